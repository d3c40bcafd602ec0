#!/usr/bin/env bash
# tests/services/test_crash_restart.sh - the services come back after SIGKILL, as the
# fault tests will need: `kill` really kills, `up` recovers, data survives.
#
#   mariadb: a committed row survives SIGKILL (innodb_flush_log_at_trx_commit=1);
#   kafka:   up, up again (no-op), kill, up (log recovery), down keeps data, clean.
#
# Runs beside the developer's services: own PAYCB_VAR, own ports (see tap.sh). TAP
# output; non-zero exit on any failure. About 15 s.
set -euo pipefail
# shellcheck source=tests/services/tap.sh
. "$(dirname "$0")/tap.sh"

export PAYCB_START_TIMEOUT=60
export PAYCB_VAR="$T/v"
export PAYCB_DB_PORT PAYCB_KAFKA_PORT PAYCB_KAFKA_CONTROLLER_PORT
PAYCB_DB_PORT=$(free_port)
PAYCB_KAFKA_PORT=$(free_port)
PAYCB_KAFKA_CONTROLLER_PORT=$(free_port)

sql() {
	mariadb -h127.0.0.1 -P"$PAYCB_DB_PORT" -upaycb -p"$(cat "$PAYCB_VAR/secrets/db_password")" \
		--batch --skip-column-names paycb -e "$1"
}

# run_ok DESC CMD... - CMD must succeed; its output is kept in OUT, shown on failure.
run_ok() {
	local desc=$1 rc=0
	shift
	OUT=$("$@" 2>&1) || rc=$?
	check "$desc (rc=$rc)" test "$rc" -eq 0
	((rc == 0)) || diag "$OUT"
}

# ---- mariadb ------------------------------------------------------------------------
run_ok "mariadb: up" "$D/mariadb.sh" up
run_ok "mariadb: a row is committed" sql "CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB; INSERT INTO t VALUES (42)"
pid=$(cat "$PAYCB_VAR/mariadb/mariadbd.pid" 2>/dev/null || echo none)
run_ok "mariadb: kill" "$D/mariadb.sh" kill
check "mariadb: pid $pid is gone after kill" gone "$pid"
run_ok "mariadb: up after SIGKILL" "$D/mariadb.sh" up
check "mariadb: the committed row survived SIGKILL" test "$(sql 'SELECT id FROM t' 2>/dev/null)" = 42
run_ok "mariadb: down" "$D/mariadb.sh" down

# ---- kafka --------------------------------------------------------------------------
run_ok "kafka: up" "$D/kafka.sh" up
check "kafka: reports ready on 127.0.0.1:$PAYCB_KAFKA_PORT" \
	contains "$OUT" "kafka: ready on 127.0.0.1:$PAYCB_KAFKA_PORT (Apache Kafka 3.9."
pid1=$(cat "$PAYCB_VAR/kafka/kafka.pid" 2>/dev/null || echo none)
run_ok "kafka: up again" "$D/kafka.sh" up
check "kafka: up again is a no-op" contains "$OUT" "already running (pid $pid1)"
check "kafka: serves metadata as broker 1" \
	contains "$(kcat -b "127.0.0.1:$PAYCB_KAFKA_PORT" -L -m 5 2>&1)" "broker 1 at 127.0.0.1:$PAYCB_KAFKA_PORT"
check "kafka: listens on 127.0.0.1 only" \
	bash -c "! ss -Hltn 'sport = :$PAYCB_KAFKA_PORT or sport = :$PAYCB_KAFKA_CONTROLLER_PORT' | awk '{print \$4}' | grep -vE '^(\\[::ffff:)?127\\.0\\.0\\.1\\]?:'"

run_ok "kafka: kill" "$D/kafka.sh" kill
check "kafka: pid $pid1 is gone after kill" gone "$pid1"
rc=0
"$D/kafka.sh" status >/dev/null 2>&1 || rc=$?
check "kafka: status after kill says stopped (rc=$rc)" test "$rc" -eq 3
run_ok "kafka: up after SIGKILL" "$D/kafka.sh" up
pid2=$(cat "$PAYCB_VAR/kafka/kafka.pid" 2>/dev/null || echo none)
check "kafka: a new broker process ($pid1 -> $pid2)" test "$pid1" != "$pid2"

run_ok "kafka: down" "$D/kafka.sh" down
check "kafka: down stopped pid $pid2" gone "$pid2"
check "kafka: down keeps the data" test -f "$PAYCB_VAR/kafka/data/logs/meta.properties"
run_ok "kafka: clean" "$D/kafka.sh" clean
check "kafka: clean removes the data" test ! -e "$PAYCB_VAR/kafka/data"

done_testing
