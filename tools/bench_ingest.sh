#!/usr/bin/env bash
# tools/bench_ingest.sh - phase 1 of `make bench` alone: ingest's acknowledgement rate beside
# the INSERT-then-publish ceiling at each client level, with the simulator's and ingest's CPU,
# for comparing builds of the load generator (or of ingest) on a shared machine.
#
#   tools/bench_ingest.sh [SIM...]    (default: bin/paycb-sim)
#   BENCH_INGESTS="paycb-ingest ../var/old/paycb-ingest" tools/bench_ingest.sh
#
# Each round runs, per level, every SIM against every ingest build in turn (alternating
# builds, so the machine's other load falls on all of them alike) and then `paycb-bench
# dbceiling --shape publish` at the same concurrency; one key=value line per run on stdout,
# with the load average and the local broker's CPU. Ingest builds are programs relative to
# bin/ (a copy of an older build elsewhere is reached through ../), each started once on
# ports of its own. The
# settings are tools/bench.sh's; its own database paycb_bingest (dropped at the start and the
# end), topic prefix pbingest and free ports, so it runs beside the demo and the bench.
# Environment: BENCH_INGEST_N (6000 notifications per run), BENCH_LEVELS ("8 64 256"),
# BENCH_ROUNDS (2), BENCH_INGESTS ("paycb-ingest"), BENCH_INGEST_SETS (optional: one entry
# per build, separated by ';', each a space-separated list of key=value settings for that
# build only, '-' for none; to compare settings, name one program twice:
#   BENCH_INGESTS="paycb-ingest paycb-ingest" BENCH_INGEST_SETS="-;ingest.db_connections=64").
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
read -r -a INGESTS <<<"${BENCH_INGESTS:-paycb-ingest}"
IFS=';' read -r -a INGEST_SETS <<<"${BENCH_INGEST_SETS:-}"

pl_scratch "$B" "$DB"
kv() { sed -n "s/^$2=//p" "$1" | tail -n 1; }
load() { cut -d' ' -f1 /proc/loadavg; }

deploy/local/services.sh up >"$B/log/services.log" 2>&1 || { cat "$B/log/services.log"; exit 1; }
base=$(deploy/local/services.sh config)
# The broker's CPU per run is the cost of ingest's produce requests (and of nothing else
# only when no other pipeline shares it).
BROKER=$(cat "$PAYCB_VAR/kafka/kafka.pid" 2>/dev/null || echo 0)
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
for k in "${!INGESTS[@]}"; do
	# The first build keeps the generated ports; each other one gets two more in a copy.
	if ((k > 0)); then
		p=$(pl_free_port) a=$(pl_free_port)
		sed -e "s/^\(\s*listen_port\s*=\s*\)$INGEST;/\1$p;/" \
			-e "s/^\(\s*admin_port\s*=\s*\)$INGEST_ADMIN;/\1$a;/" "$CONF" >"$B/paycb-$k.conf"
	else
		a=$INGEST_ADMIN
		cp "$CONF" "$B/paycb-$k.conf"
	fi
	sets=()
	for kv in ${INGEST_SETS[$k]:--}; do [[ $kv == - ]] || sets+=(--set "$kv"); done
	if ((${#sets[@]} > 0)); then
		bin/paycb-sim conf --base "$B/paycb-$k.conf" --out "$B/paycb-$k.set.conf" "${sets[@]}"
		mv "$B/paycb-$k.set.conf" "$B/paycb-$k.conf"
	fi
	pl_start "ingest$k" "$B/paycb-$k.conf" "${INGESTS[$k]}" "$a"
	pl_ready "$a" 60
done

for r in $(seq 1 "${BENCH_ROUNDS:-2}"); do
	for c in ${BENCH_LEVELS:-8 64 256}; do
		for i in "${!SIMS[@]}"; do
			for k in "${!INGESTS[@]}"; do
				f=$B/run-$r-$c-$i-$k.kv
				ing=$(pl_cpu_ms "$(pl_pid "ingest$k")") brk=$(pl_cpu_ms "$BROKER")
				"${SIMS[$i]}" run --seed 7 -c "$B/paycb-$k.conf" --keys "$B/keys" --scenario load \
					--orders "$N" --concurrency "$c" --ingest-only --wait 300 --report "$f" \
					>"$B/log/sim-$r-$c-$i-$k.log" 2>&1 || { tail -n 20 "$B/log/sim-$r-$c-$i-$k.log"; exit 1; }
				ing=$(($(pl_cpu_ms "$(pl_pid "ingest$k")") - ing)) brk=$(($(pl_cpu_ms "$BROKER") - brk))
				echo "round=$r clients=$c sim=${SIMS[$i]} ingest=${INGESTS[$k]} sets=${INGEST_SETS[$k]:--}" \
					"ack_rate=$(kv "$f" ack_rate) ack_p99_us=$(kv "$f" ack_p99_us)" \
					"sim_deliver_cpu_ms=$(kv "$f" deliver_cpu_ms) sim_cpu_ms=$(kv "$f" cpu_ms)" \
					"ingest_cpu_ms=$ing broker_cpu_ms=$brk load=$(load)"
			done
		done
		f=$B/publish-$r-$c.kv
		bin/paycb-bench dbceiling -c "$CONF" --shape publish --concurrency "$c" --count "$N" \
			--report "$f" >"$B/log/publish-$r-$c.log" 2>&1 || { cat "$B/log/publish-$r-$c.log"; exit 1; }
		echo "round=$r clients=$c publish_ceiling=$(kv "$f" rate) p99_us=$(kv "$f" p99_us) load=$(load)"
	done
done
