#!/usr/bin/env bash
# deploy/local/kafka.sh - a project-local, single-node Apache Kafka broker (KRaft, no
# ZooKeeper) for development and tests, run from the jars deploy/local/deps.sh cached.
#
#   kafka.sh up|start   render server.properties, format storage once, start the broker,
#                       wait until it serves metadata
#   kafka.sh down       SIGTERM (controlled shutdown), SIGKILL after 30 s; data stays
#   kafka.sh clean      down, then remove the data
#   kafka.sh kill       SIGKILL, for crash tests
#   kafka.sh status     exit 0 if running, 3 if not
#   kafka.sh launch     render, format and start without waiting (a node of a cluster)
#
# Listens on 127.0.0.1 only: clients on ${PAYCB_KAFKA_PORT:-29092}, the controller on
# ${PAYCB_KAFKA_CONTROLLER_PORT:-29093} (not 9092/9093, so a developer's own Kafka is
# never hit). Data in $PAYCB_VAR/kafka/data, log in $PAYCB_VAR/log/kafka.log.
#
# Environment: PAYCB_VAR, PAYCB_KAFKA_PORT, PAYCB_KAFKA_CONTROLLER_PORT,
# PAYCB_START_TIMEOUT (default 90 s), PAYCB_KAFKA_STOP_TIMEOUT (default 30 s),
# PAYCB_KAFKA_VERSION (default: first cached of 3.9.2, 3.9.1), PAYCB_KAFKA_JVM_OPTS; and for a
# node of deploy/local/kafka-cluster.sh: PAYCB_KAFKA_NODE (its id; data in kafka-<id>),
# PAYCB_KAFKA_VOTERS, PAYCB_KAFKA_REPLICATION, PAYCB_KAFKA_MIN_ISR.
set -euo pipefail

# shellcheck source=deploy/local/lib.sh
. "$(dirname "$0")/lib.sh"

NAME=kafka
PORT="${PAYCB_KAFKA_PORT:-29092}"
CONTROLLER_PORT="${PAYCB_KAFKA_CONTROLLER_PORT:-29093}"
START_TIMEOUT="${PAYCB_START_TIMEOUT:-90}"
STOP_TIMEOUT="${PAYCB_KAFKA_STOP_TIMEOUT:-30}"
DIR="$PAYCB_VAR/kafka"
LOG="$PAYCB_VAR/log/kafka.log"
# One node of a local cluster (deploy/local/kafka-cluster.sh sets these): its node id, the
# quorum's voters, and the replication its topics get. Alone, node 1 is the whole quorum.
NODE_ID="${PAYCB_KAFKA_NODE:-1}"
VOTERS="${PAYCB_KAFKA_VOTERS:-1@127.0.0.1:$CONTROLLER_PORT}"
REPLICATION="${PAYCB_KAFKA_REPLICATION:-1}"
MIN_ISR="${PAYCB_KAFKA_MIN_ISR:-1}"
if [[ -n ${PAYCB_KAFKA_NODE:-} ]]; then
	NAME="kafka-$NODE_ID"
	DIR="$PAYCB_VAR/kafka-$NODE_ID"
	LOG="$PAYCB_VAR/log/kafka-$NODE_ID.log"
fi
DATA="$DIR/data"
PROPS="$DIR/server.properties"
PIDFILE="$DIR/kafka.pid"
# A fixed id: the data directory is throwaway, and a constant makes `format` repeatable.
# It is base64url("paycb-local-0001"), the 22-character form Kafka expects.
CLUSTER_ID=cGF5Y2ItbG9jYWwtMDAwMQ
# Small heap, one GC thread, C1 only: the broker starts in seconds on 2 cores and leaves
# them to the code under test. Throughput is not what this broker is for. Measured idle
# (docs/performance.md, "Idle"): with C2 (the default tiered compilation) the broker took
# 2.25% of a core alone and 5.25% with paycb's daemons idle in its first minute, against
# 1.75% and 2.60% with C1 only, its compilations costing more than the faster code saved at
# this load. No perf-data sampling (-UsePerfData: a shared-memory file updated every 50 ms
# that only jstat reads) and no safepoint forced every second when nothing asks for one.
JVM_OPTS="${PAYCB_KAFKA_JVM_OPTS:--Xms256m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 -XX:-UsePerfData -XX:+UnlockDiagnosticVMOptions -XX:GuaranteedSafepointInterval=0 -XX:+ExitOnOutOfMemoryError -Djava.awt.headless=true}"

lib_dir() {
	local v
	v=$(kafka_version) || die "$NAME" "no Kafka jars in $PAYCB_CACHE (versions $PAYCB_KAFKA_VERSIONS); run deploy/local/deps.sh"
	kafka_lib_dir "$v"
}

# broker_version LIB - "Apache Kafka X.Y.Z", from the broker jar's file name.
broker_version() {
	local jar v
	for jar in "$1"/kafka_2.13-*.jar; do
		v=${jar##*/kafka_2.13-}
		v=${v%.jar}
		# Only the plain artifact; -test or -sources jars never get copied, but be sure.
		[[ $v =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]] && break
	done
	echo "Apache Kafka ${v:-unknown}"
}

# java_cmd LIB - set JAVA_CMD to the JVM command line shared by StorageTool and the
# broker (an array: the class path holds a literal `*` that the JVM expands itself).
java_cmd() {
	local opts
	read -r -a opts <<<"$JVM_OPTS"
	JAVA_CMD=(java "${opts[@]}" -Dlog4j.configuration="file:$PAYCB_LOCAL/kafka/log4j.properties"
		-Dkafka.logs.dir="$PAYCB_VAR/log" -cp "$1/*")
}

# render_props - server.properties from the template. Only while the broker is down, so
# the file on disk always describes the running broker.
render_props() {
	mkdir -p "$DATA" "$PAYCB_VAR/log"
	sed -e "s#@DATA@#$DATA#g" -e "s#@PORT@#$PORT#g" -e "s#@CONTROLLER_PORT@#$CONTROLLER_PORT#g" \
		-e "s#@NODE_ID@#$NODE_ID#g" -e "s#@VOTERS@#$VOTERS#g" \
		-e "s#@REPLICATION@#$REPLICATION#g" -e "s#@MIN_ISR@#$MIN_ISR#g" \
		"$PAYCB_LOCAL/kafka/server.properties.in" >"$PROPS.tmp"
	if grep -q '@[A-Z_]*@' "$PROPS.tmp"; then
		die "$NAME" "unreplaced placeholder in $PAYCB_LOCAL/kafka/server.properties.in"
	fi
	mv -f "$PROPS.tmp" "$PROPS"
}

# format_storage LIB - write meta.properties once. --ignore-formatted makes a repeat
# harmless, but skipping the extra JVM start saves seconds on every up.
format_storage() {
	local lib=$1 t0
	[[ -f $DATA/logs/meta.properties ]] && return 0
	t0=$(now_ms)
	java_cmd "$lib"
	if ! "${JAVA_CMD[@]}" kafka.tools.StorageTool format --ignore-formatted \
		-t "$CLUSTER_ID" -c "$PROPS" >>"$LOG" 2>&1; then
		fail_start "$NAME" "$START_TIMEOUT" "$LOG" "$PORT" "storage format failed"
	fi
	say "$NAME" "formatted $DATA/logs in $(elapsed "$t0")s"
}

metadata_ok() {
	timeout 10 kcat -b "127.0.0.1:$PORT" -L -m 2 >/dev/null 2>&1
}

running_pid() {
	read_pidfile "$PIDFILE" "$PROPS"
}

# wait_ready PID T0 LOG_OFFSET - poll until this broker serves metadata; fail at once if
# it died. "Kafka Server started" in our own part of the log comes first, so a foreign
# broker on the same port cannot pass for ours in the moment before ours exits.
wait_ready() {
	local pid=$1 t0=$2 offset=$3 deadline=$(($2 + START_TIMEOUT * 1000)) started=0
	# An offset of -1: a broker that was already running, whose start line may have
	# gone with a rotated log.
	((offset >= 0)) || started=1
	while :; do
		# grep -c, not -q: -q would stop reading early and, under pipefail, tail's SIGPIPE
		# would turn a match into a failure.
		if ((started == 0)) && tail -c "+$((offset + 1))" "$LOG" 2>/dev/null | grep -c 'Kafka Server started' >/dev/null; then
			started=1
		fi
		if ((started)) && metadata_ok; then
			return 0
		fi
		start_check "$pid" "$t0" "$deadline" broker "no metadata from 127.0.0.1:$PORT"
		sleep 0.25
	done
}

# cmd_launch - start the broker and return at once: a node of a three-voter quorum serves
# nothing until a second voter runs, so kafka-cluster.sh launches all, then waits with `up`.
cmd_launch() {
	local lib
	take_lock "$NAME"
	lib=$(lib_dir)
	if running_pid >/dev/null; then
		return 0
	fi
	render_props
	rotate_log "$LOG"
	printf '=== %s kafka.sh launch (port %s) ===\n' "$(date -Is)" "$PORT" >>"$LOG"
	format_storage "$lib"
	java_cmd "$lib"
	start_detached "$LOG" "$PIDFILE" "${JAVA_CMD[@]}" kafka.Kafka "$PROPS"
	say "$NAME" "launched (pid $(cat "$PIDFILE"))"
}

cmd_up() {
	local lib pid t0 offset
	take_lock "$NAME"
	lib=$(lib_dir)
	if pid=$(running_pid); then
		grep -q "^listeners=PLAINTEXT://127.0.0.1:$PORT," "$PROPS" ||
			die "$NAME" "pid $pid runs with other ports ($(grep '^listeners=' "$PROPS")); run '$0 down' first"
		say "$NAME" "already running (pid $pid)"
		wait_ready "$pid" "$(now_ms)" -1
	else
		render_props
		rotate_log "$LOG"
		PAYCB_LOG_OFFSET=$(stat -c %s "$LOG" 2>/dev/null || echo 0)
		t0=$(now_ms)
		printf '=== %s kafka.sh up (port %s) ===\n' "$(date -Is)" "$PORT" >>"$LOG"
		format_storage "$lib"
		offset=$(stat -c %s "$LOG")
		java_cmd "$lib"
		start_detached "$LOG" "$PIDFILE" "${JAVA_CMD[@]}" kafka.Kafka "$PROPS"
		pid=$(cat "$PIDFILE")
		wait_ready "$pid" "$t0" "$offset"
		say "$NAME" "started in $(elapsed "$t0")s (pid $pid)"
	fi
	say "$NAME" "ready on 127.0.0.1:$PORT ($(broker_version "$lib"))"
}

cmd_down() {
	local pid t0
	down_begin "$NAME" || return 0
	t0=$(now_ms)
	# SIGTERM runs the broker's shutdown hook: a controlled shutdown that closes the
	# logs cleanly, so the next start needs no log recovery.
	stop_pid "$NAME" "$pid" "$STOP_TIMEOUT"
	rm -f "$PIDFILE"
	say "$NAME" "stopped in $(elapsed "$t0")s (data kept in $DATA)"
}

cmd_clean() {
	cmd_down
	rm -rf "$DIR"
	say "$NAME" "removed $DIR"
}

cmd_status() {
	service_status metadata_ok "serves no metadata on 127.0.0.1:$PORT"
}

case "${1:-}" in
up | start) cmd_up ;;
launch) cmd_launch ;;
down | stop) cmd_down ;;
clean) cmd_clean ;;
kill) service_kill ;;
status) cmd_status ;;
version) broker_version "$(lib_dir)" ;;
*)
	echo "usage: $0 up|start|launch|down|stop|clean|kill|status|version" >&2
	exit 2
	;;
esac
