#!/usr/bin/env bash
# tools/bench.sh - `make bench`: the measurements of the whole pipeline, printed as one table.
#
#   1. ingest alone: throughput and acknowledgement latency at 8, 64 and 256 concurrent
#      clients sending unique signed notifications of all three channels (paycb-sim run
#      --scenario load --ingest-only), beside the database's own ceiling for the same
#      single-row INSERT at the same concurrency (paycb-bench dbceiling --shape reserve) and
#      the INSERT then a publish waited for (--shape publish: what an acknowledgement must
#      cost at least), then open loop at half of the best of those rates for the latency target, and genuine
#      traffic's p99 at a quarter of it alone and beside a junk flood (paycb-sim junk);
#   2. three storms of 1,000 concurrent copies of one notification (one per channel), answered;
#   3. processing: a backlog of payments drained by 1, 2 and 4 processors on 12 partitions
#      (paycb-bench drain; the processors form their group first and are stopped while the
#      backlog is made, so every one of them drains from the start), beside the database's ceiling for the processor's statements by
#      a plain client at the same concurrency (dbceiling --shape process);
#   4. end to end: the whole pipeline's maximum rate with everything running, beside the
#      database-only ceiling of whole payments (--shape payment: the reservation and the
#      processor's transaction by plain clients), then ack -> order PAID at half of it;
#   5. CPU seconds per component during phases 1, 3 and 4 (from /proc/PID/stat; the
#      simulator's deliver_cpu_ms, from its first push until no chain is open), and the CPU
#      of everything running idle for BENCH_IDLE_S (20) seconds after phase 4; for phase 4
#      and idle also round trips to MariaDB and requests to the broker per process (ss -ti),
#      MariaDB's statements and commits, and wake-ups (context switches); MariaDB's CPU,
#      statements and commits per payment at the maximum, at half of it and in the
#      whole-payment ceiling, side by side;
#   6. the retrier's sweep at 10,000 and 1,000,000 rows (tools/bench_sweep.sh, if present);
#   7. charts of the run (tools/bench_plot.sh, with gnuplot if installed) in var/bench/charts.
#
# Its own database (paycb_bench, dropped at the start and the end), topic prefixes
# pbench / pbench_ingest, consumer group pbench and free ports, so it runs beside the demo.
# Logs, configurations and the raw key=value reports stay in var/bench/; the table is also
# written to var/bench/results.txt. About 2 minutes on 2 cores (the sweep adds ~20 s).
# Environment: BENCH_INGEST_N (6000 notifications per level), BENCH_BACKLOG_N (4000),
# BENCH_DB_N (5000), BENCH_SWEEP (1; 0 skips tools/bench_sweep.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
export PAYCB_VAR
B=$PAYCB_VAR/bench
DB=paycb_bench
N_INGEST=${BENCH_INGEST_N:-6000}
N_BACKLOG=${BENCH_BACKLOG_N:-4000}
N_DB=${BENCH_DB_N:-5000}
N_PAYCEIL=4000
T0=$(pl_now_ms)

pl_scratch "$B" "$DB"
sql() { pl_sql "$@"; }

say() { printf 'bench: %s\n' "$*" >&2; }
# kv FILE KEY - one value of a paycb-sim or paycb-bench report.
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
# storm_channel KV - the channel a storm's copies came from.
storm_channel() {
	local c v
	for c in wxpay alipay stripe; do
		v=$(kv "$1" "sent_$c")
		((${v:-0} > 0)) && { echo "$c"; return; }
	done
	echo "?"
}
# ms US - microseconds as milliseconds with one decimal.
ms() { local v=${1:--1}; ((v < 0)) && { echo -; return; }; echo "$((v / 1000)).$((v % 1000 / 100))"; }
# secs MS - milliseconds as seconds with one decimal.
secs() { echo "$(($1 / 1000)).$(($1 % 1000 / 100))"; }
# pct CPU_MS SECONDS - CPU time over a wall-clock interval as a percentage of one core, 0.01.
pct() { local t=$(($1 * 10000 / ($2 * 1000))); echo "$((t / 100)).$(printf '%02d' $((t % 100)))"; }
# ratio A B - A/B with two decimals.
ratio() { ((${2:-0} > 0)) && echo "$((${1:-0} * 100 / $2 / 100)).$(printf '%02d' $((${1:-0} * 100 / $2 % 100)))" || echo -; }

deploy/local/services.sh up >"$B/log/services.log" 2>&1 || { cat "$B/log/services.log"; exit 1; }
base=$(deploy/local/services.sh config)
sql "DROP DATABASE IF EXISTS $DB"
INGEST=$(pl_free_port) INGEST_ADMIN=$(pl_free_port) RETRIER_ADMIN=$(pl_free_port)
CONF=$B/paycb.conf
say "keys, configuration, migration"
# Production settings except what the storm needs (1,000 requests in flight) and a retrier
# sweep of 1 s; the ladder stays the production one, nothing here needs it.
bin/paycb-sim keys --out "$B/keys" --conf "$CONF" --base "$base" >/dev/null \
	--set "database.name=$DB" --set kafka.topic_prefix=pbench --set kafka.group_id=pbench \
	--set "ingest.listen_port=$INGEST" --set "ingest.admin_port=$INGEST_ADMIN" \
	--set ingest.max_inflight=1100 --set ingest.max_unverified=1100 \
	--set retrier.sweep_interval_s=1 --set "retrier.admin_port=$RETRIER_ADMIN" \
	--set processor.admin_port=0
# Ingest's own phase publishes under another prefix, so the processors of phase 3 start
# with exactly the backlog they are measured on.
bin/paycb-sim conf --base "$CONF" --out "$B/ingest-only.conf" --set kafka.topic_prefix=pbench_ingest
bin/paycb-migrate -c "$CONF" --create-db >"$B/log/migrate.log" 2>&1
bin/paycb-migrate -c "$B/ingest-only.conf" --topics-only >>"$B/log/migrate.log" 2>&1
# Topics outlive a run and partitions cannot be taken away: delay topics an earlier build
# created with more partitions than kafka.retry_partitions are measured as they are (a wiped
# broker, `deploy/local/kafka.sh clean`, makes them anew). Say so above the figures.
if grep -q 'event=topic_ensured .* asked=' "$B/log/migrate.log"; then
	say "warning: topics with more partitions than configured (measured as they are):"
	grep -o 'topic=[^ ]* partitions=[0-9]* asked=[0-9]*' "$B/log/migrate.log" | sed 's/^/  /' >&2
fi
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

MDB=$(cat "$PAYCB_VAR/mariadb/mariadbd.pid" 2>/dev/null || echo 0)
KFK=$(cat "$PAYCB_VAR/kafka/kafka.pid" 2>/dev/null || echo 0)
# cpu_sum PID... - the summed CPU ms of the pids that run.
cpu_sum() {
	local t=0 p
	for p in "$@"; do
		[[ -n $p && -r /proc/$p/stat ]] && t=$((t + $(pl_cpu_ms "$p")))
	done
	echo "$t"
}
declare -A CPU
# cpu_phase PHASE begin|end - CPU of every component at the start / end of a phase.
cpu_phase() {
	local ph=$1 what=$2 procs
	procs=$(for f in "$B"/run/processor-*.pid; do
		if [[ -e $f ]]; then pl_pid "$(basename "$f" .pid)"; fi
	done)
	# shellcheck disable=SC2086 # word splitting of pid lists is wanted
	local now=("$(cpu_sum "$(pl_pid ingest)")" "$(cpu_sum $procs)"
		"$(cpu_sum "$(pl_pid retrier)")" "$(cpu_sum "$MDB")" "$(cpu_sum "$KFK")")
	local i=0 c
	for c in ingest processors retrier mariadb kafka; do
		if [[ $what == begin ]]; then
			CPU[$ph.$c]=${now[$i]}
		else
			CPU[$ph.$c]=$((${now[$i]} - ${CPU[$ph.$c]:-0}))
		fi
		i=$((i + 1))
	done
}

# ---- activity: round trips, requests, statements, wake-ups --------------------------------
# The CPU table says which process spends; these say on what. For every client connection to
# MariaDB and to the broker, the kernel's own counters (ss -ti): the data segments the client
# sent (one per write: a statement or a batch of them, a produce or a fetch request; on
# loopback a request never needs two) and the bytes each way. MariaDB's own status counters
# give the statements, commits and redo log fsyncs; /proc gives every thread's context
# switches, the wake-ups that idle processes cost.
ACT=$B/act
mkdir -p "$ACT"
DBPORT=${PAYCB_DB_PORT:-23306}
KPORT=${PAYCB_KAFKA_PORT:-29092}
# conn_snap PORT - per client connection to PORT: local port, program, segments, bytes out, in.
conn_snap() {
	ss -tinpH state established "( dport = :$1 )" 2>/dev/null | awk '
		/users:/ { split($3, a, ":"); lp = a[2]; n = $0
			sub(/.*users:\(\("/, "", n); sub(/".*/, "", n); next }
		lp != "" { s = 0; b = 0; r = 0
			for (i = 1; i <= NF; i++) { split($i, kv, ":")
				if (kv[1] == "data_segs_out") s = kv[2]
				else if (kv[1] == "bytes_sent") b = kv[2]
				else if (kv[1] == "bytes_received") r = kv[2] }
			print lp, n, s, b, r; lp = "" }'
}
# conn_delta BEGIN END - per program: segments, bytes out, bytes in between two snapshots
# (a connection opened in between counts from zero).
conn_delta() {
	awk 'NR == FNR { s[$1 " " $2] = $3; b[$1 " " $2] = $4; r[$1 " " $2] = $5; next }
		{ k = $1 " " $2; n[$2] += $3 - s[k]; bo[$2] += $4 - b[k]; bi[$2] += $5 - r[k] }
		END { for (p in n) print p, n[p], bo[p], bi[p] }' "$1" "$2"
}
DB_STATUS="'Questions','Com_stmt_execute','Com_commit','Com_rollback','Innodb_os_log_fsyncs',\
'Bytes_received','Bytes_sent'"
# ctxt_sum PID... - voluntary and involuntary context switches of every thread of the pids.
ctxt_sum() {
	local p
	for p in "$@"; do
		[[ -n $p ]] && cat /proc/"$p"/task/*/status 2>/dev/null
	done | awk '/ctxt_switches/ { t += $2 } END { print t + 0 }'
}
# act_snap PHASE begin|end - the activity counters at the start / end of a phase.
act_snap() {
	local f=$ACT/$1-$2 procs
	procs=$(for x in "$B"/run/processor-*.pid; do
		if [[ -e $x ]]; then pl_pid "$(basename "$x" .pid)"; fi
	done)
	conn_snap "$DBPORT" >"$f.db"
	conn_snap "$KPORT" >"$f.kafka"
	sql "SHOW GLOBAL STATUS WHERE Variable_name IN ($DB_STATUS)" >"$f.status" 2>/dev/null || :
	# MariaDB is left out: its pool threads come and go, and a thread that ended takes its
	# switches with it, so a sum over the living threads can even fall.
	# shellcheck disable=SC2086 # word splitting of pid lists is wanted
	printf 'ingest %s\nprocessors %s\nretrier %s\nkafka %s\n' \
		"$(ctxt_sum "$(pl_pid ingest)")" "$(ctxt_sum $procs)" "$(ctxt_sum "$(pl_pid retrier)")" \
		"$(ctxt_sum "$KFK")" >"$f.ctxt"
}
# act_per PHASE KIND PER - a phase's deltas of KIND (db, kafka, status, ctxt) divided by PER,
# one "name value..." line each, two decimals.
act_per() {
	local b=$ACT/$1-begin.$2 e=$ACT/$1-end.$2
	if [[ $2 == db || $2 == kafka ]]; then
		conn_delta "$b" "$e"
	else
		awk 'NR == FNR { v[$1] = $2; next } { print $1, $2 - v[$1] }' "$b" "$e"
	fi | awk -v per="$3" '{ printf "%s", $1; for (i = 2; i <= NF; i++) printf " %.2f", $i / per; print "" }' |
		sed 's/^paycb-//' | sort
}
# db_per PHASE COUNT - MariaDB's CPU ms, statements (Questions) and explicit commits per
# payment of a phase, two decimals each.
db_per() {
	local st
	st=$(act_per "$1" status "$2")
	printf '%s %s %s\n' "$(awk -v v="${CPU[$1.mariadb]:-0}" -v n="$2" 'BEGIN { printf "%.2f", v / n }')" \
		"$(awk '$1 == "Questions" { print $2 }' <<<"$st")" "$(awk '$1 == "Com_commit" { print $2 }' <<<"$st")"
}
# db_line - the pipeline's database work per payment beside the whole-payment ceiling's.
db_line() {
	local mx half ce
	read -r -a mx <<<"$(db_per e2emax "$N_BACKLOG")"
	read -r -a half <<<"$(db_per e2e "$E2E_N")"
	read -r -a ce <<<"$(db_per ceiling "$N_PAYCEIL")"
	echo "   mariadb, the pipeline (at the maximum / at half of it) against the ceiling of whole payments" \
		"(16 plain clients, $N_PAYCEIL, order creation included in all three): CPU ms per payment" \
		"${mx[0]} / ${half[0]} against ${ce[0]}, ceiling ÷ pipeline" \
		"$(awk -v c="${ce[0]}" -v p="${mx[0]}" 'BEGIN { if (p > 0) printf "%.2f", c / p; else print "-" }')" \
		"(a pipeline bound by MariaDB's CPU alone reaches that share of the ceiling);" \
		"statements ${mx[1]:--} / ${half[1]:--} against ${ce[1]:--}" \
		"(beyond the ceiling's: the relay's order checks and sent marks, the retrier's sweeps, the" \
		"simulator's poll; fewer where batches share a COMMIT);" \
		"commits ${mx[2]:--} / ${half[2]:--} against ${ce[2]:--};" \
		"the ceiling's client $(awk -v v="$(kv "$B/dbpayment.kv" cpu_ms)" -v n="$N_PAYCEIL" 'BEGIN { printf "%.2f", v / n }') ms"
}
# act_line PHASE KIND PER FIELD - "name v, name v" of one field (2 = first value) of act_per.
act_line() {
	act_per "$1" "$2" "$3" | awk -v f="$4" '{ printf "%s%s %s", sep, $1, $f; sep = ", " } END { print "" }'
}

SIMRUN=(bin/paycb-sim run --seed 7)

# ---- 1. ingest alone ----------------------------------------------------------------------
pl_start ingest "$B/ingest-only.conf" paycb-ingest "$INGEST_ADMIN"
pl_ready "$INGEST_ADMIN" 60
for c in 8 64 256; do
	say "ingest: $N_INGEST unique notifications from $c clients"
	[[ $c == 64 ]] && cpu_phase ingest begin
	cpu_phase "ing$c" begin
	"${SIMRUN[@]}" -c "$B/ingest-only.conf" --keys "$B/keys" --scenario load --orders "$N_INGEST" \
		--concurrency "$c" --ingest-only --wait 300 --report "$B/ingest-$c.kv" \
		>"$B/log/sim-ingest-$c.log" 2>&1 || { tail -n 30 "$B/log/sim-ingest-$c.log"; exit 1; }
	cpu_phase "ing$c" end
	CPU[ing$c.sim]=$(kv "$B/ingest-$c.kv" deliver_cpu_ms)
	[[ $c == 64 ]] && cpu_phase ingest end && CPU[ingest.sim]=$(kv "$B/ingest-$c.kv" deliver_cpu_ms)
	say "database ceiling: $N_DB of ingest's INSERT from $c connections"
	bin/paycb-bench dbceiling -c "$CONF" --shape reserve --concurrency "$c" --count "$N_DB" \
		--report "$B/dbreserve-$c.kv" >"$B/log/dbceiling-reserve-$c.log" 2>&1 ||
		{ cat "$B/log/dbceiling-reserve-$c.log"; exit 1; }
	say "publish ceiling: $N_DB of ingest's INSERT, each published and waited for, from $c connections"
	cpu_phase "pub$c" begin
	bin/paycb-bench dbceiling -c "$B/ingest-only.conf" --shape publish --concurrency "$c" --count "$N_DB" \
		--report "$B/publish-$c.kv" >"$B/log/dbceiling-publish-$c.log" 2>&1 ||
		{ cat "$B/log/dbceiling-publish-$c.log"; exit 1; }
	cpu_phase "pub$c" end
	CPU[pub$c.client]=$(kv "$B/publish-$c.kv" run_cpu_ms)
done
# The latency target is set at half of the maximum: the best of the three levels, sent open
# loop at half its rate for 8 s from 64 connections (enough that none waits for a free one).
IMAX=0
for c in 8 64 256; do
	r=$(kv "$B/ingest-$c.kv" ack_rate)
	((${r:-0} > IMAX)) && IMAX=$r
done
IRATE=$((IMAX / 2 > 1 ? IMAX / 2 : 1))
IHALF_N=$((IRATE * 8))
say "ingest: $IHALF_N unique notifications at $IRATE/s (half of its $IMAX/s), open loop"
"${SIMRUN[@]}" -c "$B/ingest-only.conf" --keys "$B/keys" --scenario load --orders "$IHALF_N" \
	--rate "$IRATE" --concurrency 64 --ingest-only --wait 300 --report "$B/ingest-half.kv" \
	>"$B/log/sim-ingest-half.log" 2>&1 || { tail -n 30 "$B/log/sim-ingest-half.log"; exit 1; }

# Genuine traffic beside a junk flood: the same open-loop rate (a quarter of the maximum) for
# 6 s, first alone, then while paycb-sim junk sends requests that are not notifications from
# 32 keep-alive clients as fast as it can, half of them shaped like real ones (--shaped: a
# real key id, fresh timestamps, signatures of the right length, so they cost a
# verification) (issue 18: junk must not take genuine slots).
JRATE=$((IMAX / 4 > 1 ? IMAX / 4 : 1))
JN=$((JRATE * 6))
say "ingest: $JN unique notifications at $JRATE/s, alone"
"${SIMRUN[@]}" -c "$B/ingest-only.conf" --keys "$B/keys" --scenario load --orders "$JN" \
	--rate "$JRATE" --concurrency 64 --ingest-only --wait 300 --report "$B/ingest-quiet.kv" \
	>"$B/log/sim-ingest-quiet.log" 2>&1 || { tail -n 30 "$B/log/sim-ingest-quiet.log"; exit 1; }
say "ingest: $JN unique notifications at $JRATE/s during a junk flood from 32 clients"
bin/paycb-sim junk -c "$B/ingest-only.conf" --concurrency 32 --seconds 9 --shaped --report "$B/junk.kv" \
	>"$B/log/sim-junk.log" 2>&1 &
JUNK_PID=$!
"${SIMRUN[@]}" -c "$B/ingest-only.conf" --keys "$B/keys" --scenario load --orders "$JN" \
	--rate "$JRATE" --concurrency 64 --ingest-only --wait 300 --report "$B/ingest-junk.kv" \
	>"$B/log/sim-ingest-junk.log" 2>&1 || { tail -n 30 "$B/log/sim-ingest-junk.log"; exit 1; }
wait "$JUNK_PID" || { tail -n 30 "$B/log/sim-junk.log"; exit 1; }

# Three storms, one per channel (the seed picks it: 7 Stripe, 9 WeChat Pay, 12 Alipay), on
# the ingest that served the levels above; each is reported, the first included.
STORM_SEEDS=(7 9 12)
for s in "${STORM_SEEDS[@]}"; do
	say "storm: 1,000 concurrent copies of one notification (seed $s)"
	bin/paycb-sim run --seed "$s" -c "$B/ingest-only.conf" --keys "$B/keys" --scenario storm \
		--copies 1000 --ingest-only --wait 120 --report "$B/storm-$s.kv" \
		>"$B/log/sim-storm-$s.log" 2>&1 || { tail -n 30 "$B/log/sim-storm-$s.log"; exit 1; }
done
pl_stop ingest
# Phase 1's rows are finished by hand: its messages went to another prefix, and the
# retrier must not bring them back into phase 3's backlog.
sql "UPDATE pay_callback_log SET status = 1, done_at = NOW(3) WHERE status = 0" "$DB"

# ---- 3. processing ------------------------------------------------------------------------
# group_formed K - waits until each of the K processors' last rebalance line is an
# assignment: with the eager protocol every member has then joined the same generation.
group_formed() {
	local i l t
	for t in $(seq 1 1200); do
		for i in $(seq 1 "$1"); do
			l=$(grep -E 'event=(assigned|revoked)' "$B/log/processor-$i.log" 2>/dev/null | tail -n 1 || :)
			[[ $l == *event=assigned* ]] || break
			((i == $1)) && return 0
		done
		sleep "$PL_TICK"
	done
	say "the $1 processors did not form one group in 60 s"
	return 1
}
pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
pl_ready "$INGEST_ADMIN" 60
for k in 1 2 4; do
	mark=$(bin/paycb-bench drain -c "$CONF" --mark)
	# The processors join first and are stopped while the backlog is made: started on a
	# backlog, the first to join took every partition and drained alone until the others'
	# join reached it at its next heartbeat (3 s), so 1, 2 and 4 measured one processor.
	for i in $(seq 1 "$k"); do
		pl_start "processor-$i" "$CONF" paycb-processor 0
	done
	group_formed "$k" || exit 1
	for i in $(seq 1 "$k"); do kill -STOP "$(pl_pid "processor-$i")"; done
	say "processing: a backlog of $N_BACKLOG payments, then $k processor(s)"
	rc=0
	"${SIMRUN[@]}" -c "$CONF" --keys "$B/keys" --scenario load --orders "$N_BACKLOG" \
		--concurrency 64 --ingest-only --wait 300 --report "$B/backlog-$k.kv" \
		>"$B/log/sim-backlog-$k.log" 2>&1 || rc=$?
	[[ $k == 2 ]] && cpu_phase process begin
	for i in $(seq 1 "$k"); do kill -CONT "$(pl_pid "processor-$i")"; done
	((rc == 0)) || { tail -n 30 "$B/log/sim-backlog-$k.log"; exit 1; }
	bin/paycb-bench drain -c "$CONF" --after-id "$mark" --count "$N_BACKLOG" --wait 300 \
		--report "$B/drain-$k.kv" >"$B/log/drain-$k.log" 2>&1 || { cat "$B/log/drain-$k.log"; exit 1; }
	[[ $k == 2 ]] && cpu_phase process end
	for i in $(seq 1 "$k"); do pl_stop "processor-$i"; done
	say "database ceiling: the processor's statements from $k connection(s)"
	bin/paycb-bench dbceiling -c "$CONF" --shape process --concurrency "$k" --count 3000 \
		--report "$B/dbprocess-$k.kv" >"$B/log/dbceiling-process-$k.log" 2>&1 ||
		{ cat "$B/log/dbceiling-process-$k.log"; exit 1; }
done

# ---- 4. end to end at half the max rate -------------------------------------------------
# The maximum is the whole pipeline's, with everything on the same cores: payments sent as
# fast as 16 closed-loop clients get answers while 2 processors and the retrier run, and
# the rate at which their rows got done (paycb-bench drain). It doubles as the warm-up (the
# consumer group's join and the first fetches are start-up costs, not latency).
# The ceiling the pipeline is held against: the database's work of whole payments (the
# reservation, then the processor's transaction) by plain clients, from as many connections
# as the pipeline's clients, before anything of the pipeline runs.
say "database ceiling: whole payments (reservation + the processor's transaction) from 16 connections"
# Its MariaDB CPU and counters are taken around the whole command, its order creation and
# the final sent mark of its events included, as the pipeline's phases include the
# simulator's order creation and the relay's marks.
act_snap ceiling begin
cpu_phase ceiling begin
bin/paycb-bench dbceiling -c "$CONF" --shape payment --concurrency 16 --count "$N_PAYCEIL" \
	--report "$B/dbpayment.kv" >"$B/log/dbceiling-payment.log" 2>&1 ||
	{ cat "$B/log/dbceiling-payment.log"; exit 1; }
cpu_phase ceiling end
act_snap ceiling end
pl_start processor-1 "$CONF" paycb-processor 0
pl_start processor-2 "$CONF" paycb-processor 0
pl_start retrier "$CONF" paycb-retrier "$RETRIER_ADMIN"
mark=$(bin/paycb-bench drain -c "$CONF" --mark)
say "end to end: the pipeline's maximum, $N_BACKLOG payments from 16 clients, everything running"
act_snap e2emax begin
cpu_phase e2emax begin
"${SIMRUN[@]}" -c "$CONF" --keys "$B/keys" --scenario load --orders "$N_BACKLOG" \
	--concurrency 16 --wait 300 --report "$B/e2emax-run.kv" >"$B/log/sim-e2e-max.log" 2>&1 ||
	{ tail -n 30 "$B/log/sim-e2e-max.log"; exit 1; }
bin/paycb-bench drain -c "$CONF" --after-id "$mark" --count "$N_BACKLOG" --wait 300 \
	--report "$B/e2emax.kv" >"$B/log/drain-e2e-max.log" 2>&1 || { cat "$B/log/drain-e2e-max.log"; exit 1; }
cpu_phase e2emax end
act_snap e2emax end
CPU[e2emax.sim]=$(kv "$B/e2emax-run.kv" deliver_cpu_ms)
MAX=$(kv "$B/e2emax.kv" drain_rate)
RATE=$((MAX / 2 > 1 ? MAX / 2 : 1))
E2E_N=$((RATE * 30))
say "end to end: $E2E_N payments at $RATE/s (half of the pipeline's $MAX/s), everything running"
act_snap e2e begin
cpu_phase e2e begin
"${SIMRUN[@]}" -c "$CONF" --keys "$B/keys" --scenario load --orders "$E2E_N" --rate "$RATE" \
	--concurrency 16 --wait 300 --report "$B/e2e.kv" >"$B/log/sim-e2e.log" 2>&1 ||
	{ tail -n 30 "$B/log/sim-e2e.log"; exit 1; }
cpu_phase e2e end
act_snap e2e end
CPU[e2e.sim]=$(kv "$B/e2e.kv" deliver_cpu_ms)

# ---- 5b. idle ------------------------------------------------------------------------------
# Everything still running and no traffic: what the processes cost while nothing happens
# (their timers, polls, sweeps and the broker's own housekeeping). The first seconds after
# the load are left out, so the last batches and commits do not count as idle, and so are
# those until the producers that close when idle (kafka.producer_sleep_s) have closed.
IDLE_S=${BENCH_IDLE_S:-20}
sleep 3
IDLE_SETTLE=$(pl_asleep 25 processor-1 processor-2 retrier)
say "idle: everything running, no traffic, ${IDLE_S} s (producers asleep after $IDLE_SETTLE s more)"
act_snap idle begin
cpu_phase idle begin
sleep "$IDLE_S"
cpu_phase idle end
act_snap idle end
pl_stop_all

# ---- 6. the retrier's sweep -----------------------------------------------------------------
SWEEP=
if [[ -x tools/bench_sweep.sh && ${BENCH_SWEEP:-1} != 0 ]]; then
	say "retrier sweep at 10,000 and 1,000,000 rows (tools/bench_sweep.sh)"
	SWEEP=$(tools/bench_sweep.sh 2>"$B/log/bench_sweep.log") || SWEEP="tools/bench_sweep.sh failed; see $B/log/bench_sweep.log"
fi

# ---- the table ------------------------------------------------------------------------------
# cpu_per PHASE N PART... - "part a + part b ... = total" in CPU ms per operation over N, from
# CPU[PHASE.PART].
cpu_per() {
	local ph=$1 n=$2 part t=0 out=
	shift 2
	for part in "$@"; do
		t=$((t + ${CPU[$ph.$part]:-0}))
		out+="${out:+ + }$part $(awk -v v="${CPU[$ph.$part]:-0}" -v n="$n" 'BEGIN { printf "%.3f", v / n }')"
	done
	echo "$out = $(awk -v v="$t" -v n="$n" 'BEGIN { printf "%.3f", v / n }')"
}
# cpu_ratio PHASE_A N_A PARTS_A PHASE_B N_B PARTS_B - B's CPU per operation ÷ A's.
cpu_ratio() {
	local a=0 b=0 part
	for part in $3; do a=$((a + ${CPU[$1.$part]:-0})); done
	for part in $6; do b=$((b + ${CPU[$4.$part]:-0})); done
	awk -v a="$a" -v na="$2" -v b="$b" -v nb="$5" 'BEGIN { if (a > 0) printf "%.2f", (b / nb) / (a / na); else print "-" }'
}
report() {
	local c k
	echo "paycb bench, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git describe --always --dirty 2>/dev/null || echo '?')"
	echo "machine: $(lscpu | sed -n 's/^Model name: *//p' | head -n 1), $(nproc) cores," \
		"$(free -g | awk '/^Mem:/ { print $2 " GB" }'), $(uname -r), Debian $(cat /etc/debian_version)," \
		"$(deploy/local/services.sh versions | tr '\n' ' ')"
	echo
	echo "1. ingest alone: unique signed notifications, wxpay + alipay + stripe"
	echo "   (db INSERT: ingest's INSERT by plain clients; INSERT+publish: the INSERT, then the message" \
		"published and waited for, what an acknowledgement must cost at least)"
	printf '   %-8s %10s %9s %9s %9s | %13s %9s | %9s | %16s %9s | %s\n' clients acked/s "p50 ms" "p99 ms" \
		"p99.9 ms" "db INSERT/s" "p99 ms" "ingest/db" "INSERT+publish/s" "p99 ms" "ingest/that"
	for c in 8 64 256; do
		printf '   %-8s %10s %9s %9s %9s | %13s %9s | %9s | %16s %9s | %s\n' "$c" "$(kv "$B/ingest-$c.kv" ack_rate)" \
			"$(ms "$(kv "$B/ingest-$c.kv" ack_p50_us)")" "$(ms "$(kv "$B/ingest-$c.kv" ack_p99_us)")" \
			"$(ms "$(kv "$B/ingest-$c.kv" ack_p999_us)")" "$(kv "$B/dbreserve-$c.kv" rate)" \
			"$(ms "$(kv "$B/dbreserve-$c.kv" p99_us)")" \
			"$(ratio "$(kv "$B/ingest-$c.kv" ack_rate)" "$(kv "$B/dbreserve-$c.kv" rate)")" \
			"$(kv "$B/publish-$c.kv" rate)" "$(ms "$(kv "$B/publish-$c.kv" p99_us)")" \
			"$(ratio "$(kv "$B/ingest-$c.kv" ack_rate)" "$(kv "$B/publish-$c.kv" rate)")"
	done
	echo "   CPU ms per acknowledgement: ingest (ingest + simulator + MariaDB + broker) | INSERT+publish" \
		"(client + MariaDB + broker); on two shared cores a CPU-bound ingest reaches about their ratio"
	for c in 8 64 256; do
		echo "   $c: $(cpu_per "ing$c" "$N_INGEST" ingest sim mariadb kafka) |" \
			"$(cpu_per "pub$c" "$N_DB" client mariadb kafka); ratio" \
			"$(cpu_ratio "ing$c" "$N_INGEST" "ingest sim mariadb kafka" "pub$c" "$N_DB" "client mariadb kafka")"
	done
	echo "   at half of the maximum, $IRATE/s open loop from 64 connections, $IHALF_N notifications:" \
		"acked/s $(kv "$B/ingest-half.kv" ack_rate), p50 $(ms "$(kv "$B/ingest-half.kv" ack_p50_us)") ms," \
		"p99 $(ms "$(kv "$B/ingest-half.kv" ack_p99_us)") ms, p99.9 $(ms "$(kv "$B/ingest-half.kv" ack_p999_us)") ms," \
		"$(kv "$B/ingest-half.kv" ok) of $(kv "$B/ingest-half.kv" sent) answered success"
	echo "   genuine traffic during a junk flood, $JRATE/s open loop, $JN notifications:" \
		"p50 $(ms "$(kv "$B/ingest-junk.kv" ack_p50_us)") ms, p99 $(ms "$(kv "$B/ingest-junk.kv" ack_p99_us)") ms" \
		"(without the flood: p50 $(ms "$(kv "$B/ingest-quiet.kv" ack_p50_us)") ms, p99 $(ms "$(kv "$B/ingest-quiet.kv" ack_p99_us)") ms)," \
		"$(kv "$B/ingest-junk.kv" ok) of $(kv "$B/ingest-junk.kv" sent) answered success;" \
		"junk $(kv "$B/junk.kv" rate)/s from $(kv "$B/junk.kv" clients) clients, $(kv "$B/junk.kv" refused) refused 4xx," \
		"$(kv "$B/junk.kv" busy) answered 503, $(kv "$B/junk.kv" other) other"
	echo
	echo "2. storms: 1,000 concurrent copies of one notification, three times (one row each)"
	for s in "${STORM_SEEDS[@]}"; do
		f=$B/storm-$s.kv
		echo "   $(storm_channel "$f"): $(kv "$f" ok) of $(kv "$f" sent) answered success," \
			"p50 $(ms "$(kv "$f" ack_p50_us)") ms, p99 $(ms "$(kv "$f" ack_p99_us)") ms," \
			"max $(ms "$(kv "$f" ack_max_us)") ms"
	done
	echo
	echo "3. processing: backlog of $N_BACKLOG payments, 12 partitions, 1 thread per processor" \
		"(pause: the longest time between two rows done)"
	printf '   %-11s %13s %10s | %20s %9s %9s | %s\n' processors callbacks/s "pause ms" \
		"db same stmts tx/s" "p50 ms" "p99 ms" "processors/db"
	for k in 1 2 4; do
		printf '   %-11s %13s %10s | %20s %9s %9s | %s\n' "$k" "$(kv "$B/drain-$k.kv" drain_rate)" \
			"$(ms "$(kv "$B/drain-$k.kv" drain_max_gap_us)")" \
			"$(kv "$B/dbprocess-$k.kv" rate)" "$(ms "$(kv "$B/dbprocess-$k.kv" p50_us)")" \
			"$(ms "$(kv "$B/dbprocess-$k.kv" p99_us)")" \
			"$(ratio "$(kv "$B/drain-$k.kv" drain_rate)" "$(kv "$B/dbprocess-$k.kv" rate)")"
	done
	echo
	echo "4. end to end: the pipeline's maximum with everything running (16 clients, 2 processors):" \
		"$MAX/s, ack p99 $(ms "$(kv "$B/e2emax-run.kv" ack_p99_us)") ms;" \
		"the database's ceiling of whole payments by 16 plain clients $(kv "$B/dbpayment.kv" rate)/s," \
		"pipeline/ceiling $(ratio "$MAX" "$(kv "$B/dbpayment.kv" rate)") (target at least 0.7);" \
		"at half of it, $RATE/s, $E2E_N payments:" \
		"ack -> order PAID p50 $(ms "$(kv "$B/e2e.kv" e2e_p50_us)") ms, p99 $(ms "$(kv "$B/e2e.kv" e2e_p99_us)") ms," \
		"p99.9 $(ms "$(kv "$B/e2e.kv" e2e_p999_us)") ms (polled every 10 ms);" \
		"ack p99 $(ms "$(kv "$B/e2e.kv" ack_p99_us)") ms; outcome mismatches: $(kv "$B/e2e.kv" mismatches)"
	echo
	echo "5. CPU seconds per component (from /proc/PID/stat; the simulator from getrusage while it" \
		"delivers, its order creation and signing before the clock left out)"
	printf '   %-34s %8s %11s %8s %8s %8s %8s | %s\n' phase ingest processors retrier mariadb kafka sim \
		"CPU ms per callback"
	for ph in "ingest:1. ingest, 64 clients, $N_INGEST:$N_INGEST" \
		"process:3. 2 processors drain $N_BACKLOG:$N_BACKLOG" "e2emax:4. at the maximum, $N_BACKLOG:$N_BACKLOG" \
		"e2e:4. end to end, $E2E_N:$E2E_N"; do
		IFS=: read -r key label count <<<"$ph"
		local tot=0 c line=""
		for c in ingest processors retrier mariadb kafka sim; do
			local v=${CPU[$key.$c]:-0}
			tot=$((tot + v))
			line+=$(printf ' %8s' "$(secs "$v")")
		done
		printf '   %-34s%s | %s\n' "$label" "$line" "$(ms $((tot * 1000 / count)))"
	done
	local idle_paycb=$((${CPU[idle.ingest]:-0} + ${CPU[idle.processors]:-0} + ${CPU[idle.retrier]:-0}))
	echo "   idle, everything running, ${IDLE_S} s without traffic (from $((3 + ${IDLE_SETTLE%%[. ]*})) s after the load," \
		"once the idle producers closed): paycb processes" \
		"$(pct "$idle_paycb" "$IDLE_S")% of one core (ingest $(pct "${CPU[idle.ingest]:-0}" "$IDLE_S")%," \
		"processors $(pct "${CPU[idle.processors]:-0}" "$IDLE_S")%, retrier $(pct "${CPU[idle.retrier]:-0}" "$IDLE_S")%)," \
		"kafka $(pct "${CPU[idle.kafka]:-0}" "$IDLE_S")%, mariadb $(pct "${CPU[idle.mariadb]:-0}" "$IDLE_S")%;" \
		"paycb and the broker together $(pct $((idle_paycb + ${CPU[idle.kafka]:-0})) "$IDLE_S")% (target under 2%)"
	echo
	echo "5b. activity of the end-to-end phase per payment ($E2E_N payments; MariaDB's counters include" \
		"the simulator's ack -> PAID poll, one query every 10 ms)"
	echo "   mariadb, per payment: $(act_per e2e status "$E2E_N" | awk '{ printf "%s%s %s", sep, $1, $2; sep = ", " }')"
	db_line
	echo "   round trips to MariaDB per payment (client writes): $(act_line e2e db "$E2E_N" 2)"
	echo "   requests to the broker per payment (client writes): $(act_line e2e kafka "$E2E_N" 2)"
	echo "   bytes to the broker per payment: $(act_line e2e kafka "$E2E_N" 3); from it: $(act_line e2e kafka "$E2E_N" 4)"
	echo "   idle, per second: wake-ups (context switches) $(act_line idle ctxt "$IDLE_S" 2);" \
		"requests to the broker $(act_line idle kafka "$IDLE_S" 2); round trips to MariaDB $(act_line idle db "$IDLE_S" 2)"
	if [[ -n $SWEEP ]]; then
		echo
		echo "6. retrier sweep (tools/bench_sweep.sh)"
		sed 's/^/   /' <<<"$SWEEP"
	fi
	echo
	echo "total bench time $((($(pl_now_ms) - T0) / 1000)) s; raw reports and logs in $B"
}
# cpu_dat - CPU ms per payment by process and phase, for tools/bench_plot.sh's chart.
cpu_dat() {
	local ph key count c
	echo "# phase ingest processors retrier mariadb kafka sim (CPU ms per payment)"
	for ph in "ingest-64:ingest:$N_INGEST" "drain-2:process:$N_BACKLOG" "e2e-max:e2emax:$N_BACKLOG" \
		"e2e-half:e2e:$E2E_N"; do
		IFS=: read -r label key count <<<"$ph"
		printf '%s' "$label"
		for c in ingest processors retrier mariadb kafka sim; do
			printf ' %s' "$(awk -v v="${CPU[$key.$c]:-0}" -v n="$count" 'BEGIN { printf "%.3f", v / n }')"
		done
		echo
	done
}
report | tee "$B/results.txt"
cpu_dat >"$B/cpu.dat"
tools/bench_plot.sh "$B" || say "charts failed; the figures above stand"
