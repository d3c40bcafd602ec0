#!/usr/bin/env bash
# tools/bench_idle.sh - a short, targeted part of `make bench`: the pipeline's idle cost and
# its ack -> order PAID latency at a fixed open-loop rate, to compare Kafka and timer settings
# back to back without the whole bench (about 2 minutes).
#
# Everything runs with production settings (only ports, database, topic prefix and group are
# the bench's own): ingest, 2 processors and the retrier. After a warm-up of 1,000 payments
# (the group's join and the first fetches are start-up costs), BENCH_IDLE_RATE (300)
# payments a second for BENCH_IDLE_E2E_S (20) seconds give ack -> PAID p50/p99/p99.9; then
# BENCH_IDLE_S (30) seconds of no traffic give each component's CPU as a share of one core,
# its wake-ups (context switches; not MariaDB's, whose pool threads come and go) and the
# requests its connections open at both ends of the window sent to the broker (the retrier's
# lag check connects only during a check, so its requests are not counted). Over the
# BENCH_IDLE_RATE phase it also prints, per payment, each component's CPU ms and each
# program's requests and bytes to and from the broker.
# BENCH_IDLE_SET (optional, space-separated key=value) overrides settings of the
# configuration, to measure a setting against the default in the same conditions;
# BENCH_IDLE_THREADS=1 also prints, for the broker and the first processor, the idle CPU and
# wake-ups of their threads grouped by name (the first 15 characters the kernel keeps).
# BENCH_IDLE_ROOT (optional) a directory whose bin/ holds the daemons to run instead of this
# tree's (another build, for a before/after of the code).
# Its own database (paycb_bidle, dropped at the start and the end), topic prefix and
# consumer group pbidle; logs and reports in $PAYCB_VAR/bench-idle/.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh
PL_ROOT=${BENCH_IDLE_ROOT:-$PL_ROOT}

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
export PAYCB_VAR
B=$PAYCB_VAR/bench-idle
DB=paycb_bidle
RATE=${BENCH_IDLE_RATE:-300}
E2E_S=${BENCH_IDLE_E2E_S:-20}
IDLE_S=${BENCH_IDLE_S:-30}

pl_scratch "$B" "$DB"
sql() { pl_sql "$@"; }
say() { printf 'bench-idle: %s\n' "$*" >&2; }
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
ms() { local v=${1:--1}; ((v < 0)) && { echo -; return; }; echo "$((v / 1000)).$((v % 1000 / 100))"; }
pct() { local t=$(($1 * 10000 / ($2 * 1000))); echo "$((t / 100)).$(printf '%02d' $((t % 100)))"; }

deploy/local/services.sh up >"$B/log/services.log" 2>&1 || { cat "$B/log/services.log"; exit 1; }
base=$(deploy/local/services.sh config)
sql "DROP DATABASE IF EXISTS $DB"
INGEST=$(pl_free_port) INGEST_ADMIN=$(pl_free_port) RETRIER_ADMIN=$(pl_free_port)
CONF=$B/paycb.conf
sets=(--set "database.name=$DB" --set kafka.topic_prefix=pbidle --set kafka.group_id=pbidle
	--set "ingest.listen_port=$INGEST" --set "ingest.admin_port=$INGEST_ADMIN"
	--set "retrier.admin_port=$RETRIER_ADMIN" --set processor.admin_port=0)
for s in ${BENCH_IDLE_SET:-}; do sets+=(--set "$s"); done
bin/paycb-sim keys --out "$B/keys" --conf "$CONF" --base "$base" "${sets[@]}" >/dev/null
bin/paycb-migrate -c "$CONF" --create-db >"$B/log/migrate.log" 2>&1
# Topics outlive a run and partitions cannot be taken away: delay topics an earlier run
# created with more partitions than asked now are measured as they are. Say so.
if grep -q 'event=topic_ensured .* asked=' "$B/log/migrate.log"; then
	say "warning: topics with more partitions than configured (measured as they are):"
	grep -o 'topic=[^ ]* partitions=[0-9]* asked=[0-9]*' "$B/log/migrate.log" | sed 's/^/  /' >&2
fi

MDB=$(cat "$PAYCB_VAR/mariadb/mariadbd.pid" 2>/dev/null || echo 0)
KFK=$(cat "$PAYCB_VAR/kafka/kafka.pid" 2>/dev/null || echo 0)
KPORT=${PAYCB_KAFKA_PORT:-29092}
pids() { # NAME - the pids of the named component
	case $1 in
	processors) for i in 1 2; do pl_pid "processor-$i"; done ;;
	mariadb) echo "$MDB" ;;
	kafka) echo "$KFK" ;;
	*) pl_pid "$1" ;;
	esac
}
# snap - per component: CPU ms and context switches of all its threads; per program: the
# data segments its connections sent to the broker (one per request on loopback) and the
# bytes they sent and received.
snap() {
	local c p cpu ctx
	for c in ingest processors retrier kafka mariadb; do
		cpu=0 ctx=0
		for p in $(pids "$c"); do
			[[ -r /proc/$p/stat ]] || continue
			cpu=$((cpu + $(pl_cpu_ms "$p")))
			ctx=$((ctx + $(cat /proc/"$p"/task/*/status 2>/dev/null |
				awk '/ctxt_switches/ { s += $2 } END { print s + 0 }')))
		done
		echo "$c $cpu $ctx"
	done
	ss -tinpH state established "( dport = :$KPORT )" 2>/dev/null | awk '
		/users:/ { n = $0; sub(/.*users:\(\("/, "", n); sub(/".*/, "", n); next }
		n != "" { for (i = 1; i <= NF; i++) { split($i, a, ":")
				if (a[1] == "data_segs_out") s[n] += a[2]
				else if (a[1] == "bytes_sent") o[n] += a[2]
				else if (a[1] == "bytes_received") r[n] += a[2] }
			n = "" }
		END { for (k in s) print "req." k, s[k], 0, o[k], r[k] }'
}

# threads PID... - per thread: process, tid, name, CPU ms, context switches.
threads() {
	local p t tck
	tck=$(getconf CLK_TCK)
	for p in "$@"; do
		for t in /proc/"$p"/task/*; do
			awk -v p="$p" -v tid="${t##*/}" -v n="$(tr ' ' _ 2>/dev/null <"$t/comm")" -v tck="$tck" \
				'FNR == 1 && FILENAME ~ /stat$/ { s = $0; sub(/^.*\) /, "", s); split(s, f, " ")
					cpu = (f[12] + f[13]) * 1000 / tck }
				/ctxt_switches/ { c += $2 } END { print p, tid, n, cpu, c }' "$t/stat" "$t/status" 2>/dev/null ||
				true # A thread that ended while being read is left out, not the run.
		done
	done
}

pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
pl_ready "$INGEST_ADMIN" 60
pl_start processor-1 "$CONF" paycb-processor 0
pl_start processor-2 "$CONF" paycb-processor 0
pl_start retrier "$CONF" paycb-retrier "$RETRIER_ADMIN"
# The second processor's join is a rebalance; the latency is measured after it, not across.
for _ in $(seq 1 600); do
	grep -q 'event=assigned' "$B/log/processor-2.log" && break
	sleep 0.1
done
SIMRUN=(bin/paycb-sim run --seed 7 -c "$CONF" --keys "$B/keys" --scenario load --concurrency 16 --wait 300)
say "warm-up: 1000 payments"
"${SIMRUN[@]}" --orders 1000 --report "$B/warm.kv" >"$B/log/sim-warm.log" 2>&1 ||
	{ tail -n 30 "$B/log/sim-warm.log"; exit 1; }
say "end to end: $((RATE * E2E_S)) payments at $RATE/s"
snap >"$B/e2e-begin"
"${SIMRUN[@]}" --orders $((RATE * E2E_S)) --rate "$RATE" --report "$B/e2e.kv" \
	>"$B/log/sim-e2e.log" 2>&1 || { tail -n 30 "$B/log/sim-e2e.log"; exit 1; }
snap >"$B/e2e-end"
# Idle is measured once the producers that close when idle (kafka.producer_sleep_s) did.
sleep 3
say "idle: producers asleep after $(pl_asleep 25 processor-1 processor-2 retrier) s more; ${IDLE_S} s"
snap >"$B/idle-begin"
threads "$KFK" "$(pl_pid processor-1)" >"$B/threads-begin"
sleep "$IDLE_S"
threads "$KFK" "$(pl_pid processor-1)" >"$B/threads-end"
snap >"$B/idle-end"

echo "daemons: $PL_ROOT/bin; settings: ${BENCH_IDLE_SET:-defaults}; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "end to end at $RATE/s, $(kv "$B/e2e.kv" e2e_samples) payments: ack -> PAID" \
	"p50 $(ms "$(kv "$B/e2e.kv" e2e_p50_us)") ms, p99 $(ms "$(kv "$B/e2e.kv" e2e_p99_us)") ms," \
	"p99.9 $(ms "$(kv "$B/e2e.kv" e2e_p999_us)") ms; ack p99 $(ms "$(kv "$B/e2e.kv" ack_p99_us)") ms"
# The end-to-end phase per payment: each component's CPU (the broker's is what the
# processors' fetches of all their partitions cost it) and each program's requests and bytes
# to and from the broker.
awk -v n="$((RATE * E2E_S))" 'NR == FNR { c[$1] = $2; o[$1] = $4; r[$1] = $5; next }
	$1 ~ /^req\./ { printf "e2e per payment %s requests %.2f bytes to the broker %.0f from it %.0f\n",
		substr($1, 5), ($2 - c[$1]) / n, ($4 - o[$1]) / n, ($5 - r[$1]) / n; next }
	{ printf "e2e per payment %s cpu ms %.3f\n", $1, ($2 - c[$1]) / n }' "$B/e2e-begin" "$B/e2e-end"
awk -v s="$IDLE_S" 'NR == FNR { c[$1] = $2; x[$1] = $3; next }
	{ d = $2 - c[$1]
	  if ($1 ~ /^req\./) printf "idle %s requests/s %.2f\n", substr($1, 5), d / s
	  else if ($1 == "mariadb") printf "idle %s cpu %.2f%%\n", $1, d / s / 10
	  else { printf "idle %s cpu %.2f%% wakeups/s %.1f\n", $1, d / s / 10, ($3 - x[$1]) / s
	         if ($1 != "mariadb") t += d } }
	END { printf "idle paycb + broker cpu %.2f%%\n", t / s / 10 }' "$B/idle-begin" "$B/idle-end"
if [[ ${BENCH_IDLE_THREADS:-0} == 1 ]]; then
	awk -v s="$IDLE_S" -v k="$KFK" 'NR == FNR { c[$2] = $4; x[$2] = $5; next }
		($2 in c) { g = ($1 == k ? "kafka" : "processor-1") " " $3; n[g] += $4 - c[$2]
			w[g] += $5 - x[$2]; m[g]++ }
		END { for (g in n) if (n[g] > 0 || w[g] / s >= 1)
			printf "idle thread %s x%d cpu %.3f%% wakeups/s %.1f\n", g, m[g], n[g] / s / 10, w[g] / s }' \
		"$B/threads-begin" "$B/threads-end" | sort -t' ' -k3,3 -k7,7gr
fi
