#!/usr/bin/env bash
# tools/demo.sh - `make run`: the whole pipeline on this machine and a demo of what it does.
#
#   tools/demo.sh          start MariaDB + Kafka, migrate, generate channel keys and the
#                          configuration under var/demo/, start one ingest, two processors,
#                          one retrier, the simulator's channel API (paycb-sim api) and one
#                          reconciler calling it, then let paycb-sim pay DEMO_ORDERS orders
#                          (default 10,000) over WeChat Pay, Alipay and Stripe with every
#                          edge case (the refund and edge states too: WeChat ABNORMAL then
#                          SUCCESS, both Stripe refund families, a refund failing after
#                          success, refunds of paid-twice and paid-after-close payments,
#                          another amount on a closed order, a Dashboard refund and a Connect
#                          event, both kept unroutable), drop DEMO_DROPPED permille of the
#                          payments on the API's channels entirely (the reconciler must find
#                          them by query) and let the reconciler make the refunds paycb
#                          decided; print the summary with each kind's expected outcome and
#                          the channel's ledger against refund_requests, and leave it running
#   tools/demo.sh stop     `make stop`: SIGTERM each daemon and wait for it
#   tools/demo.sh status   which daemons run
#
# Environment: DEMO_ORDERS (10000), DEMO_SEED (42), DEMO_CONCURRENCY (64), DEMO_WAIT (270 s,
# how long the simulator waits for the outcome), DEMO_DROPPED (30 permille), DEMO_API_CHANNELS
# (wxpay,alipay,stripe: the channels paycb-sim api serves; the reconciler calls those), PAYCB_VAR (var).
# The demo uses the local
# database and topic prefix of var/paycb.conf (paycb / paycb); every run's orders carry
# their own run id, so runs never mix. Its processors form the consumer group paycb-demo.
# Ports: DEMO_PORT (8480) for ingest, the next four for ingest's admin (8481), the
# processors' admin (8482, 8484), the retrier's admin (8483), the reconciler's admin (8485)
# and the simulator's channel API (8486); set DEMO_PORT to run the demo beside another one.
set -euo pipefail
cd "$(dirname "$0")/.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
export PAYCB_VAR
DEMO=$PAYCB_VAR/demo
CONF=$DEMO/paycb.conf
ORDERS=${DEMO_ORDERS:-10000}
SEED=${DEMO_SEED:-42}
CONC=${DEMO_CONCURRENCY:-64}
WAIT=${DEMO_WAIT:-270}
PORT=${DEMO_PORT:-8480}
INGEST_PORT=$PORT INGEST_ADMIN=$((PORT + 1)) P1_ADMIN=$((PORT + 2)) RETRIER_ADMIN=$((PORT + 3))
P2_ADMIN=$((PORT + 4)) RECON_ADMIN=$((PORT + 5)) API_PORT=$((PORT + 6))
DROPPED=${DEMO_DROPPED:-30}
# The channels the simulator's API serves, and so the ones the reconciler calls in the demo.
API_CHANNELS=${DEMO_API_CHANNELS:-wxpay,alipay,stripe}
API="http://127.0.0.1:$API_PORT"
pl_init "$DEMO"

say() { printf 'demo: %s\n' "$*"; }

cmd_stop() {
	if [[ -z $(ls "$DEMO"/run/*.pid 2>/dev/null) ]]; then
		say "nothing is running"
		return 0
	fi
	pl_stop_all
	say "stopped (logs stay in $DEMO/log; the local services keep running: make services-down)"
}

cmd_status() {
	local f name pid
	for f in "$DEMO"/run/*.pid; do
		[[ -e $f ]] || { say "nothing is running"; return 0; }
		name=$(basename "$f" .pid)
		pid=$(pl_pid "$name")
		say "$name: ${pid:+running (pid $pid)}${pid:-not running}"
	done
}

# port_free PORT - nothing listens on it (the demo's ports are fixed so its URLs are too).
port_free() {
	! ss -Hltn "sport = :$1" 2>/dev/null | grep . >/dev/null
}

cmd_run() {
	local t0 rc=0 p
	t0=$(pl_now_ms)
	# A previous demo is replaced, not doubled.
	[[ -z $(ls "$DEMO"/run/*.pid 2>/dev/null) ]] || { say "stopping the previous demo"; pl_stop_all; }
	for p in $INGEST_PORT $INGEST_ADMIN $P1_ADMIN $RETRIER_ADMIN $P2_ADMIN $RECON_ADMIN $API_PORT; do
		port_free "$p" || {
			say "port $p is in use; the demo needs $INGEST_PORT-$API_PORT (make stop, or DEMO_PORT=...)"
			exit 1
		}
	done
	deploy/local/services.sh up
	base=$(deploy/local/services.sh config)

	say "generating channel keys and the configuration under $DEMO"
	rm -rf "$DEMO/keys"
	# A ladder of seconds, so rows of orders that do not exist are dead within the demo, yet
	# long enough to outlast the processors' backlog: a refund that came before its payment
	# must still be retrying when the payment is processed. The leases are longer than that
	# backlog too: a lease that ends while its message still waits in the backlog makes the
	# retrier publish the row again, and each extra copy of a failing row counts a failure.
	# The reconciler's steps are short too: PENDING orders are queried 60 s after creation
	# (when every notification that was sent has long been processed) and again at 150 s,
	# and refunds are followed up after 1, 2, 5 and 10 s, so it all ends within DEMO_WAIT.
	bin/paycb-sim keys --out "$DEMO/keys" --conf "$CONF" --base "$base" --api "$API" \
		--set "ingest.listen_port=$INGEST_PORT" --set "ingest.admin_port=$INGEST_ADMIN" \
		--set ingest.max_inflight=1100 --set ingest.max_unverified=1100 \
		--set ingest.db_connections=32 \
		--set 'retry.ladder_s=[1, 5, 15, 30, 60]' --set retry.initial_lease_s=120 \
		--set retry.lease_margin_s=60 --set retrier.sweep_interval_s=1 \
		--set "retrier.admin_port=$RETRIER_ADMIN" --set "processor.admin_port=$P1_ADMIN" \
		--set kafka.group_id=paycb-demo \
		--set reconciler.allow_http=true --set reconciler.sweep_interval_s=1 \
		--set "reconciler.admin_port=$RECON_ADMIN" --set 'reconciler.query_steps_s=[60, 150]' \
		--set 'reconciler.refund_ladder_s=[1, 2, 5, 10]' --set reconciler.lease_s=20 \
		--set reconciler.total_timeout_ms=5000 --set reconciler.rate_per_s=500 \
		--set reconciler.batch=500
	bin/paycb-sim conf --base "$CONF" --out "$DEMO/processor-2.conf" --set "processor.admin_port=$P2_ADMIN"
	bin/paycb-migrate -c "$CONF" --create-db >"$DEMO/log/migrate.log" 2>&1 ||
		{ tail -n 20 "$DEMO/log/migrate.log"; exit 1; }
	say "migrated ($(tail -n 1 "$DEMO/log/migrate.log" | sed 's/^paycb-migrate: //'))"

	# Storm copies each hold a connection; ingest needs descriptors for them.
	ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
	pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
	pl_start processor-1 "$CONF" paycb-processor "$P1_ADMIN"
	pl_start processor-2 "$DEMO/processor-2.conf" paycb-processor "$P2_ADMIN"
	pl_start retrier "$CONF" paycb-retrier "$RETRIER_ADMIN"
	pl_start_api channel-api "$CONF" "$API_PORT"
	pl_start reconciler "$CONF" paycb-reconciler "$RECON_ADMIN"
	pl_ready "$INGEST_ADMIN" 60 || { say "ingest is not ready (see $DEMO/log/ingest.log)"; exit 1; }
	say "pipeline up in $((($(pl_now_ms) - t0) / 1000)) s: ingest $(pl_pid ingest), processors" \
		"$(pl_pid processor-1) $(pl_pid processor-2), retrier $(pl_pid retrier)," \
		"reconciler $(pl_pid reconciler), channel API $(pl_pid channel-api) ($API_CHANNELS)"

	say "paying $ORDERS orders over wxpay, alipay and stripe (seed $SEED, $CONC connections," \
		"$DROPPED permille of the $API_CHANNELS payments never notified)"
	bin/paycb-sim run -c "$CONF" --keys "$DEMO/keys" --scenario mixed --orders "$ORDERS" \
		--concurrency "$CONC" --seed "$SEED" --wait "$WAIT" --progress \
		--api "$API" --api-channels "$API_CHANNELS" --dropped "$DROPPED" \
		--report "$DEMO/sim-report.kv" || rc=$?

	cat <<EOF

The cases by kind above list each kind's expected outcome. The refund kinds also hold for
every order: refunded_amount is the sum of its distinct refunds that moved money (its
order.refund events less its order.refund_reversed ones), and no refund request is left
REQUESTED for a payment whose refund happened. Authentic notifications that cannot be routed
(dashboard-refund, connect-foreign) are answered success and kept:
  bin/paycbctl -c $CONF unroutable

The reconciler ($API_CHANNELS through the simulator's channel API): the payments whose
notification was never sent were found by its queries ("dropped notifications found by
query", each with a notification_lost alert), and the refunds paycb decided (paid twice, paid
after close, another amount on a closed order) were submitted once and settled: "refunds the
reconciler made" counts their refund_requests DONE, "refunds in the channel's ledger" what the
simulated channel did, and no payment was refunded twice.
  bin/paycbctl -c $CONF refund list --status done      (and: refund show rr7)
  bin/paycbctl -c $CONF reconcile --merchant default --from 1h --to now --wait
  curl -s $API/_sim/stats                              (the channel's counters)

ack -> order PAID above includes queueing: ingest accepts notifications faster than two
processors sharing this machine's cores process them, and Kafka holds the difference. For
the latency at a sustainable load see make bench (docs/performance.md).

The pipeline keeps running. To look at it:
  metrics      curl -s http://127.0.0.1:$INGEST_ADMIN/metrics | grep ^paycb_ingest_requests
               curl -s http://127.0.0.1:$P1_ADMIN/metrics   (processor-1; processor-2 on $P2_ADMIN)
               curl -s http://127.0.0.1:$RETRIER_ADMIN/metrics   (retrier)
               curl -s http://127.0.0.1:$RECON_ADMIN/metrics | grep ^paycb_reconciler   (reconciler)
  dead letters bin/paycbctl -c $CONF dead --since 1h
               bin/paycbctl -c $CONF list --status pending
               bin/paycbctl -c $CONF show ID        (cb42: a payment row, rf7: a refund row)
  topics       kcat -b 127.0.0.1:${PAYCB_KAFKA_PORT:-29092} -C -t paycb.order-events -o -5 -e
               kcat -b 127.0.0.1:${PAYCB_KAFKA_PORT:-29092} -C -t paycb.callbacks.dlq -o beginning -e
               kcat -b 127.0.0.1:${PAYCB_KAFKA_PORT:-29092} -L | grep 'topic "paycb'
  logs         $DEMO/log/{ingest,processor-1,processor-2,retrier,reconciler,channel-api}.log
  more         bin/paycb-sim run -c $CONF --scenario storm   (see docs/simulator.md)
To stop it:    make stop      (the local MariaDB and Kafka stay up: make services-down)
EOF
	if ((rc != 0)); then
		say "the outcome did not match the expectations (exit $rc); see the mismatches above"
		exit "$rc"
	fi
	say "done in $((($(pl_now_ms) - t0) / 1000)) s"
}

case "${1:-run}" in
run) cmd_run ;;
stop) cmd_stop ;;
status) cmd_status ;;
*) echo "usage: $0 [run|stop|status]" >&2; exit 64 ;;
esac
