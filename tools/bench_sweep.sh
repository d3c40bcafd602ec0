#!/usr/bin/env bash
# tools/bench_sweep.sh - how long one retrier sweep takes with 10,000 and 1,000,000 rows in
# the payment log (make bench calls it; it prints one line per size).
#
# For each size a private database (paycb_bench_sweep) is filled with INSERT ... SELECT from
# MariaDB's sequence engine (nothing generated is stored in the repository): 99% done rows,
# the rest pending but not due. A real bin/paycb-retrier starts and publishes a few warm-up
# rows (so each delay topic's first-publish metadata wait is not measured); then 5,000 pending
# rows (1,000 at 10,000) become due at once and the retrier works through them in full
# batches of 500. Reported per size: the sweep query's own time (ANALYZE of the SELECT the
# retrier runs, which must use idx_retry), and the median, minimum and maximum wall time of
# a full cycle (lease 500 rows one by one, publish them with delivery reports, dead letters,
# outbox, purge, gauges), as the retrier logs it.
#
# Needs the local services up (make services-up) and `make all`. Uses topic prefix
# paycb_bench; drops its database at the end. Environment: PAYCB_VAR, PAYCB_DB_PORT,
# PAYCB_KAFKA_PORT, BENCH_SIZES (default "10000 1000000").
set -euo pipefail
cd "$(dirname "$0")/.."
PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
DB=paycb_bench_sweep
sizes=${BENCH_SIZES:-"10000 1000000"}
work=$(mktemp -d /tmp/paycb-bench-sweep-XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	sql "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT

# The client reads the password from a private defaults file, never from argv.
umask 077
printf '[client]\nhost=127.0.0.1\nport=%s\nuser=paycb\npassword=%s\n' \
	"${PAYCB_DB_PORT:-23306}" "$(cat "$PAYCB_VAR/secrets/db_password")" >"$work/my.cnf"
sql() { mariadb --defaults-extra-file="$work/my.cnf" -N -B -e "$1" ${2:+"$2"}; }

cat >"$work/bench.conf" <<EOF
log_level = "info";
database = { host = "127.0.0.1"; port = ${PAYCB_DB_PORT:-23306}; user = "paycb";
  password_file = "$PAYCB_VAR/secrets/db_password"; name = "$DB"; };
kafka = { brokers = "127.0.0.1:${PAYCB_KAFKA_PORT:-29092}"; topic_prefix = "paycb_bench"; };
retry = { ladder_s = [10, 30, 60]; lease_margin_s = 600; };
retrier = { sweep_interval_s = 1; batch = 500; admin_port = 0; };
EOF

SWEEP_SELECT="SELECT id, retry_count, CAST(next_retry_at AS CHAR), merchant_id, channel, \
out_trade_no, replayed_at IS NOT NULL, IFNULL(last_error, '') FROM pay_callback_log WHERE \
status = 0 AND next_retry_at <= NOW(3) ORDER BY next_retry_at LIMIT 500"

for n in $sizes; do
	due=$((n / 10 < 5000 ? n / 10 : 5000))
	pending=$((n / 100 > due ? n / 100 : due))
	sql "DROP DATABASE IF EXISTS $DB"
	bin/paycb-migrate -c "$work/bench.conf" --create-db >"$work/migrate.log" 2>&1
	t0=$(date +%s%N)
	# Row k: the first $pending are pending (not due for an hour), the others done a while
	# ago but younger than the purge age; done_at spreads over an hour like real traffic.
	sql "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, out_trade_no,
	     amount, currency, raw_body, body_sha256, status, retry_count, next_retry_at, done_at)
	     SELECT 'm1', 'wxpay', CONCAT('b', seq), CONCAT('o', seq % 50000), '10.00', 'CNY',
	     REPEAT('x', 300), REPEAT('0', 64), IF(seq <= $pending, 0, 1), IF(seq <= $pending, 1, 0),
	     NOW(3) + INTERVAL IF(seq <= $pending, 3600, -(seq % 86000)) SECOND,
	     IF(seq <= $pending, NULL, NOW(3) - INTERVAL (seq % 3600) SECOND)
	     FROM seq_1_to_$n" "$DB"
	# Warm-up rows, one per topic the sweep will publish on.
	sql "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, out_trade_no,
	     amount, currency, body_sha256, retry_count, next_retry_at) SELECT 'm1', 'wxpay',
	     CONCAT('warm', seq), 'warm', '1.00', 'CNY', REPEAT('0', 64), seq, NOW(3)
	     FROM seq_0_to_3" "$DB"
	fill_ms=$((($(date +%s%N) - t0) / 1000000))
	key=$(sql "EXPLAIN FORMAT=JSON $SWEEP_SELECT" "$DB" | grep -o '"key": "[a-z_]*"' | head -1)

	bin/paycb-retrier -c "$work/bench.conf" 2>"$work/retrier.log" &
	pid=$!
	for _ in $(seq 1 300); do
		grep -q 'event=sweep ' "$work/retrier.log" && break
		sleep 0.1
	done
	warm=$(grep -c 'event=sweep ' "$work/retrier.log" || true)
	sql "UPDATE pay_callback_log SET next_retry_at = NOW(3) - INTERVAL 1 SECOND
	     WHERE status = 0 AND retry_count = 1 AND id <= $due" "$DB"
	for _ in $(seq 1 1200); do
		[ "$(grep -c 'event=republished step=1 ' "$work/retrier.log" || true)" -ge $((due + 1)) ] && break
		sleep 0.1
	done
	kill "$pid"
	wait "$pid" || true
	pid=

	# The query alone, with 500 rows due again (the retrier is stopped).
	sql "UPDATE pay_callback_log SET next_retry_at = NOW(3) - INTERVAL 1 SECOND
	     WHERE status = 0 AND retry_count = 1 AND id <= $due" "$DB"
	query_ms=$(sql "ANALYZE FORMAT=JSON $SWEEP_SELECT" "$DB" | grep -o '"r_total_time_ms": [0-9.]*' |
		head -1 | awk '{printf "%.3f", $2}')
	cycles=$(grep 'event=sweep ' "$work/retrier.log" | tail -n +$((warm + 1)) | grep 'due=500 ' |
		sed -e 's/.* ms=\([0-9]*\).*/\1/' | sort -n)
	count=$(echo "$cycles" | grep -c . || true)
	if [ "$count" -eq 0 ]; then
		echo "bench_sweep: rows=$n: no full sweep was logged (see $work/retrier.log)" >&2
		cat "$work/retrier.log" >&2
		exit 1
	fi
	median=$(echo "$cycles" | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	printf 'sweep rows=%d due=%d batch=500 plan=%s query_ms=%s cycle_ms_median=%s min=%s max=%s cycles=%d rows_per_s=%d fill_ms=%d\n' \
		"$n" "$due" "${key#*: }" "${query_ms:-?}" "$median" "$(echo "$cycles" | head -1)" \
		"$(echo "$cycles" | tail -1)" "$count" $((500 * 1000 / (median > 0 ? median : 1))) "$fill_ms"
done
