#!/usr/bin/env bash
# tools/bench_ingest.sh - phase 1 of `make bench` alone: ingest's acknowledgement rate beside
# the INSERT-then-publish ceiling at each client level, with the simulator's and ingest's CPU,
# for comparing builds of the load generator (or of ingest) on a shared machine.
#
#   tools/bench_ingest.sh [SIM...]    (default: bin/paycb-sim)
#
# Each round runs, per level, every SIM given in turn (alternating builds, so the machine's
# other load falls on all of them alike) and then `paycb-bench dbceiling --shape publish` at
# the same concurrency; one key=value line per run on stdout, with the load average. The
# settings are tools/bench.sh's; its own database paycb_bingest (dropped at the start and the
# end), topic prefix pbingest and free ports, so it runs beside the demo and the bench.
# Environment: BENCH_INGEST_N (6000 notifications per run), BENCH_LEVELS ("8 64 256"),
# BENCH_ROUNDS (2).
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
export PAYCB_VAR
B=$PAYCB_VAR/bench-ingest
DB=paycb_bingest
N=${BENCH_INGEST_N:-6000}
SIMS=("$@")
((${#SIMS[@]} > 0)) || SIMS=(bin/paycb-sim)

pl_scratch "$B" "$DB"
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
load() { cut -d' ' -f1 /proc/loadavg; }

deploy/local/services.sh up >"$B/log/services.log" 2>&1 || { cat "$B/log/services.log"; exit 1; }
base=$(deploy/local/services.sh config)
pl_sql "DROP DATABASE IF EXISTS $DB"
INGEST=$(pl_free_port) INGEST_ADMIN=$(pl_free_port)
CONF=$B/paycb.conf
bin/paycb-sim keys --out "$B/keys" --conf "$CONF" --base "$base" >/dev/null \
	--set "database.name=$DB" --set kafka.topic_prefix=pbingest --set kafka.group_id=pbingest \
	--set "ingest.listen_port=$INGEST" --set "ingest.admin_port=$INGEST_ADMIN" \
	--set ingest.max_inflight=1100 --set ingest.max_unverified=1100 --set processor.admin_port=0
bin/paycb-migrate -c "$CONF" --create-db >"$B/log/migrate.log" 2>&1
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
trap pl_scratch_cleanup EXIT
pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
pl_ready "$INGEST_ADMIN" 60

for r in $(seq 1 "${BENCH_ROUNDS:-2}"); do
	for c in ${BENCH_LEVELS:-8 64 256}; do
		for i in "${!SIMS[@]}"; do
			f=$B/run-$r-$c-$i.kv
			ing=$(pl_cpu_ms "$(pl_pid ingest)")
			"${SIMS[$i]}" run --seed 7 -c "$CONF" --keys "$B/keys" --scenario load --orders "$N" \
				--concurrency "$c" --ingest-only --wait 300 --report "$f" \
				>"$B/log/sim-$r-$c-$i.log" 2>&1 || { tail -n 20 "$B/log/sim-$r-$c-$i.log"; exit 1; }
			ing=$(($(pl_cpu_ms "$(pl_pid ingest)") - ing))
			echo "round=$r clients=$c sim=${SIMS[$i]} ack_rate=$(kv "$f" ack_rate)" \
				"ack_p99_us=$(kv "$f" ack_p99_us) sim_deliver_cpu_ms=$(kv "$f" deliver_cpu_ms)" \
				"sim_cpu_ms=$(kv "$f" cpu_ms) ingest_cpu_ms=$ing load=$(load)"
		done
		f=$B/publish-$r-$c.kv
		bin/paycb-bench dbceiling -c "$CONF" --shape publish --concurrency "$c" --count "$N" \
			--report "$f" >"$B/log/publish-$r-$c.log" 2>&1 || { cat "$B/log/publish-$r-$c.log"; exit 1; }
		echo "round=$r clients=$c publish_ceiling=$(kv "$f" rate) p99_us=$(kv "$f" p99_us) load=$(load)"
	done
done
