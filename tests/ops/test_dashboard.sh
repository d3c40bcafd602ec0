#!/usr/bin/env bash
# tests/ops/test_dashboard.sh - every query of the Grafana dashboard (deploy/grafana) works
# against the real daemons' metrics, so a renamed metric or label breaks the build.
#
# A pipeline of its own (ingest, processor, retrier; own database, topics and free ports)
# handles a small mixed scenario from the simulator, so the metrics have values; a real
# Prometheus (Debian's, the one promtool comes with) scrapes the three admin listeners every
# second with the project's alert rules loaded; then every panel's every query is evaluated
# through Prometheus' HTTP API. A query must be accepted, and a query over paycb_* metrics
# must return at least one series: an empty answer means the dashboard names something the
# daemons do not export. Queries over metrics paycb does not export (Prometheus' own ALERTS
# and up) need only be accepted. About 30 s.
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
BASE=${PAYCB_TEST_CONF:-$PAYCB_VAR/paycb.conf}
DASH=deploy/grafana/paycb-dashboard.json
T=$(mktemp -d /tmp/paycb-dash-test.XXXXXX)
DB=paycb_test_dash_$$
CONF=$T/paycb.conf
n=0 failed=0 prom_pid=

umask 077
printf '[client]\nhost=127.0.0.1\nport=%s\nuser=paycb\npassword=%s\n' \
	"${PAYCB_DB_PORT:-23306}" "$(cat "$PAYCB_VAR/secrets/db_password")" >"$T/my.cnf"
umask 022

cleanup() {
	[[ -n $prom_pid ]] && kill "$prom_pid" 2>/dev/null && wait "$prom_pid" 2>/dev/null
	pl_stop_all >/dev/null 2>&1 || true
	mariadb --defaults-extra-file="$T/my.cnf" -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
	if ((failed > 0)) || [[ -n ${PAYCB_KEEP_TEST_FILES:-} ]]; then
		echo "# files kept in $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
diag() { sed 's/^/# /' <<<"$1"; }
finish() {
	echo "1..$n"
	echo "# $((n - failed)) passed, $failed failed"
	((failed == 0))
	exit
}

command -v prometheus >/dev/null || { not_ok "prometheus is installed (apt-get install prometheus)"; finish; }
check "the dashboard is valid JSON with panels" \
	python3 -c "import json,sys; d = json.load(open('$DASH')); sys.exit(0 if d['panels'] else 1)"

# ---- the pipeline --------------------------------------------------------------------------
INGEST=$(pl_free_port) INGEST_ADMIN=$(pl_free_port) PROC_ADMIN=$(pl_free_port)
RETRIER_ADMIN=$(pl_free_port) PROM=$(pl_free_port)
pl_init "$T"
bin/paycb-sim keys --out "$T/keys" --conf "$CONF" --base "$BASE" \
	--set "database.name=$DB" --set "kafka.topic_prefix=tdash$$" --set "kafka.group_id=tdash$$" \
	--set "ingest.listen_port=$INGEST" --set "ingest.admin_port=$INGEST_ADMIN" \
	--set 'retry.ladder_s=[1, 1, 2]' --set retry.initial_lease_s=3 \
	--set retry.lease_margin_s=1 --set retrier.sweep_interval_s=1 \
	--set "retrier.admin_port=$RETRIER_ADMIN" --set "processor.admin_port=$PROC_ADMIN" \
	>"$T/keys.log" 2>&1 || { not_ok "simulator keys and configuration"; diag "$(cat "$T/keys.log")"; finish; }
bin/paycb-migrate -c "$CONF" --create-db >"$T/migrate.log" 2>&1 ||
	{ not_ok "migrate"; diag "$(tail -5 "$T/migrate.log")"; finish; }
check "ingest starts" pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
check "processor starts" pl_start processor "$CONF" paycb-processor "$PROC_ADMIN"
check "retrier starts" pl_start retrier "$CONF" paycb-retrier "$RETRIER_ADMIN"
check "ingest is ready" pl_ready "$INGEST_ADMIN" 60
rc=0
OUT=$(bin/paycb-sim run -c "$CONF" --compress 600 --concurrency 8 --seed $$ --scenario mixed \
	--orders 40 --wait 60 2>&1) || rc=$?
check "a mixed scenario went through the pipeline (exit $rc)" test "$rc" -eq 0
((rc == 0)) || diag "$(tail -n 20 <<<"$OUT")"

# ---- Prometheus scraping it ----------------------------------------------------------------
cp deploy/prometheus/paycb-rules.yml "$T/"
cat >"$T/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - paycb-rules.yml
scrape_configs:
  - job_name: paycb-ingest
    static_configs: [{targets: ["127.0.0.1:$INGEST_ADMIN"]}]
  - job_name: paycb-processor
    static_configs: [{targets: ["127.0.0.1:$PROC_ADMIN"]}]
  - job_name: paycb-retrier
    static_configs: [{targets: ["127.0.0.1:$RETRIER_ADMIN"]}]
EOF
prometheus --config.file="$T/prometheus.yml" --storage.tsdb.path="$T/tsdb" \
	--web.listen-address="127.0.0.1:$PROM" >"$T/prometheus.log" 2>&1 &
prom_pid=$!

# query EXPR - Prometheus' JSON answer to an instant query.
query() {
	curl -sS --max-time 5 -G "http://127.0.0.1:$PROM/api/v1/query" --data-urlencode "query=$1" 2>/dev/null
}
# series EXPR - the number of series the query returns, or "error: ..." when it fails.
series() {
	query "$1" | python3 -c '
import json, sys
try:
    d = json.load(sys.stdin)
except ValueError:
    print("error: no JSON answer"); sys.exit()
print(len(d["data"]["result"]) if d.get("status") == "success" else "error: " + d.get("error", "?"))'
}
# Every target up, and scraped at least three times, so rate() over the window has samples.
scraped() {
	[[ $(series 'count_over_time(up{job=~"paycb-.*"}[1m]) >= 3 and up == 1') == 3 ]]
}
deadline=$(($(pl_now_ms) + 30000))
until scraped || (($(pl_now_ms) > deadline)); do sleep 0.2; done
check "Prometheus scrapes the three daemons" scraped || diag "$(tail -5 "$T/prometheus.log")"

# ---- every query of every panel ------------------------------------------------------------
mapfile -t exprs < <(python3 -c "
import json
for p in json.load(open('$DASH'))['panels']:
    for t in p['targets']:
        print(p['title'] + '\t' + t['expr'])")
check "the dashboard has queries (${#exprs[@]})" test "${#exprs[@]}" -ge 14
for line in "${exprs[@]}"; do
	title=${line%%$'\t'*} expr=${line#*$'\t'}
	got=$(series "$expr")
	if [[ $got == error* ]]; then
		not_ok "$title: query accepted: $expr"
		diag "$got"
	elif grep -q 'paycb_' <<<"$expr"; then
		check "$title: $expr returns series ($got)" test "$got" -ge 1
	else
		ok "$title: $expr accepted (a metric paycb does not export; $got series)"
	fi
done
finish
