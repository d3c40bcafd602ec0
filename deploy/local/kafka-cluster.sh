#!/usr/bin/env bash
# deploy/local/kafka-cluster.sh - a project-local three-broker Apache Kafka cluster (KRaft,
# every node broker and controller, a three-voter quorum) as production runs it: replication
# factor 3 and min.insync.replicas 2 by default, so one broker may be down and acks=all
# producers go on. For fault runs (`make chaos CHAOS_BROKERS=3`); make test uses kafka.sh.
#
#   kafka-cluster.sh up [N]       start the three nodes (or node N), wait until each serves
#   kafka-cluster.sh down [N]     controlled shutdown of every node (or node N); data stays
#   kafka-cluster.sh kill N       SIGKILL node N, for crash tests
#   kafka-cluster.sh clean        down, then remove the data
#   kafka-cluster.sh status       exit 0 when all three run
#   kafka-cluster.sh brokers      print the bootstrap list (host:port,...)
#
# Leaders move: a node killed or shut down hands its partitions' leadership to the other
# replicas, and once it is back the controller moves the preferred leaders back to it within
# leader.imbalance.check.interval.seconds (10 s here, server.properties.in).
#
# Each node is deploy/local/kafka.sh with PAYCB_KAFKA_NODE=1..3: data in
# $PAYCB_VAR/kafka-<n>, log in $PAYCB_VAR/log/kafka-<n>.log. Ports, on 127.0.0.1 only:
# PAYCB_KAFKA_CLUSTER_PORTS (three client ports, default 29192 29193 29194) and
# PAYCB_KAFKA_CLUSTER_CONTROLLER_PORTS (default 29195 29196 29197), away from kafka.sh's.
set -euo pipefail

HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=deploy/local/lib.sh
. "$HERE/lib.sh"

read -r -a PORTS <<<"${PAYCB_KAFKA_CLUSTER_PORTS:-29192 29193 29194}"
read -r -a CPORTS <<<"${PAYCB_KAFKA_CLUSTER_CONTROLLER_PORTS:-29195 29196 29197}"
((${#PORTS[@]} == 3 && ${#CPORTS[@]} == 3)) || die kafka-cluster "three client and three controller ports are needed"
VOTERS="1@127.0.0.1:${CPORTS[0]},2@127.0.0.1:${CPORTS[1]},3@127.0.0.1:${CPORTS[2]}"

# node N CMD - kafka.sh CMD for node N.
node() {
	local n=$1
	shift
	PAYCB_KAFKA_NODE=$n PAYCB_KAFKA_PORT=${PORTS[n - 1]} \
		PAYCB_KAFKA_CONTROLLER_PORT=${CPORTS[n - 1]} PAYCB_KAFKA_VOTERS=$VOTERS \
		PAYCB_KAFKA_REPLICATION=3 PAYCB_KAFKA_MIN_ISR=2 "$HERE/kafka.sh" "$@"
}

nodes() {
	if [[ -n ${1:-} ]]; then
		[[ $1 =~ ^[123]$ ]] || die kafka-cluster "node must be 1, 2 or 3"
		echo "$1"
	else
		echo 1 2 3
	fi
}

brokers() {
	echo "127.0.0.1:${PORTS[0]},127.0.0.1:${PORTS[1]},127.0.0.1:${PORTS[2]}"
}

cmd_up() {
	local n t0
	t0=$(now_ms)
	# Launch them all first: one voter alone never forms a quorum, so none is ready alone.
	for n in $(nodes "${1:-}"); do node "$n" launch; done
	for n in $(nodes "${1:-}"); do node "$n" up; done
	say kafka-cluster "up in $(elapsed "$t0")s: $(brokers)"
}

case "${1:-}" in
up | start) cmd_up "${2:-}" ;;
down | stop) for n in $(nodes "${2:-}"); do node "$n" down; done ;;
kill) node "$(nodes "${2:?usage: $0 kill N}")" kill ;;
clean) for n in 1 2 3; do node "$n" clean; done ;;
status)
	rc=0
	for n in 1 2 3; do node "$n" status || rc=$?; done
	exit $rc
	;;
brokers) brokers ;;
*)
	echo "usage: $0 up [N]|down [N]|kill N|clean|status|brokers" >&2
	exit 2
	;;
esac
