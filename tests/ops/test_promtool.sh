#!/usr/bin/env bash
# tests/ops/test_promtool.sh - the Prometheus alert rules in deploy/prometheus: valid
# (`promtool check rules`), behaving as their unit tests say (`promtool test rules
# paycb-rules.test.yml`: each alert firing on the series that should raise it and quiet on a
# near miss), loadable with the example scrape config (`promtool check config`), every alert
# unit-tested and documented in docs/operations.md under the anchor its runbook annotation
# names, and every paycb_* metric the rules use exported by the daemons' code. promtool comes
# with Debian's prometheus package. Under a second.
set -uo pipefail
# shellcheck source=tests/ops/lib.sh
. "$(dirname "$0")/lib.sh"

P=deploy/prometheus
command -v promtool >/dev/null || bail "promtool is installed (apt-get install prometheus)"

out=$(promtool check rules "$P/paycb-rules.yml" 2>&1)
check "promtool check rules paycb-rules.yml" test $? -eq 0 || diag "$out"
out=$(cd "$P" && promtool test rules paycb-rules.test.yml 2>&1)
check "promtool test rules paycb-rules.test.yml" test $? -eq 0 || diag "$out"
# The scrape jobs read the admin token from a file promtool wants to exist: check a copy
# that points at a token of this run's.
T=$(mktemp -d /tmp/paycb-promtool.XXXXXX)
trap 'rm -rf "$T"' EXIT
cp "$P/paycb-rules.yml" "$T/"
printf 'test-token\n' >"$T/token"
sed "s|/etc/prometheus/paycb_admin_token|$T/token|" "$P/prometheus.yml" >"$T/prometheus.yml"
check "every scrape job sends the admin token" \
	test "$(grep -c 'credentials_file: /etc/prometheus/paycb_admin_token' "$P/prometheus.yml")" \
	-eq "$(grep -c 'job_name:' "$P/prometheus.yml")"
out=$(cd "$T" && promtool check config prometheus.yml 2>&1)
check "promtool check config prometheus.yml (loads the rules)" test $? -eq 0 || diag "$out"

mapfile -t alerts < <(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' "$P/paycb-rules.yml")
check "the rules define alerts (${#alerts[@]})" test "${#alerts[@]}" -gt 10

missing_test=() missing_doc=() bad_anchor=()
for a in "${alerts[@]}"; do
	# Firing somewhere in the unit tests: "alertname: A" followed by a non-empty exp_alerts.
	awk -v a="$a" '$1 == "alertname:" { cur = $2 } cur == a && /exp_labels:/ { found = 1 }
		END { exit !found }' "$P/paycb-rules.test.yml" || missing_test+=("$a")
	anchor=$(awk -v a="$a" '$0 ~ "- alert: " a "$" { on = 1 } on && /runbook:/ { print $2; exit }' "$P/paycb-rules.yml")
	[[ $anchor == "docs/operations.md#${a,,}" ]] || bad_anchor+=("$a")
	grep -qE "^#+ ${a}\$" docs/operations.md || missing_doc+=("$a")
done
check "every alert fires in a unit test${missing_test[*]:+ (missing: ${missing_test[*]})}" test ${#missing_test[@]} -eq 0
check "every alert's runbook annotation is docs/operations.md#<alert>${bad_anchor[*]:+ (wrong: ${bad_anchor[*]})}" test ${#bad_anchor[@]} -eq 0
check "every alert has a heading in docs/operations.md${missing_doc[*]:+ (missing: ${missing_doc[*]})}" test ${#missing_doc[@]} -eq 0

# The metric names the rules use are the ones the code registers (metrics_counter/gauge/hist
# with the name as a string literal). The processor's names are checked once it registers any.
mapfile -t names < <(grep -o 'paycb_[a-z_]*' "$P/paycb-rules.yml" | sed 's/_bucket$//' | sort -u)
for m in "${names[@]}"; do
	dir=${m#paycb_}
	dir=${dir%%_*}
	# The processors' consumer lag is measured and exported by the retrier (retrier_lag.c).
	[[ $dir == consumer ]] && dir=retrier
	# Every daemon's reload status is the skeleton's (common/daemon.c).
	[[ $dir == config ]] && dir=common
	if grep -rqF "\"$m\"" "$dir"/*.c 2>/dev/null; then
		ok "$m is exported by $dir/"
	elif [[ $dir == processor ]] && ! grep -qs 'metrics_\(counter\|gauge\|hist\)(' processor/*.c; then
		skip "$m is exported by processor/" "the processor registers no metrics yet"
	else
		not_ok "$m is exported by $dir/"
	fi
done

# The label values the rules match on ingest's counters are ones ingest uses (the verify
# failure reasons are the channel library's, chan/chan_notify*.c, which ingest reports).
# label_values METRIC LABEL - the values of LABEL in matchers of METRIC in the rules.
label_values() {
	grep -o "$1{[^}]*}" "$P/paycb-rules.yml" | grep -o "$2=~\?\"[^\"]*\"" |
		sed 's/^[^"]*"//; s/"$//' | tr '|' '\n' | sort -u
}
bad=()
for v in $(label_values paycb_ingest_requests_total outcome); do
	grep -qF "\"$v\"" ingest/ingest_flow.c || bad+=("outcome=$v")
done
for v in $(label_values paycb_ingest_verify_failures_total reason); do
	grep -qF "\"$v\"" ingest/*.c chan/chan_notify*.c || bad+=("reason=$v")
done
check "the outcome and reason values the rules match are ingest's${bad[*]:+ (unknown: ${bad[*]})}" test ${#bad[@]} -eq 0
done_testing
