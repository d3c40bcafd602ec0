#!/usr/bin/env bash
# tests/services/test_start_failure.sh - the service scripts fail loudly and quickly.
#
#   (a) mariadb.sh up on a port someone else holds: non-zero, names "mariadb", shows the
#       tail of its log, returns as soon as mariadbd dies, not at the timeout, and says when
#       the port lies in the kernel's ephemeral range;
#   (b) the same for kafka.sh;
#   (c) mariadb.sh up twice on a free port: the second is a no-op (same pid), the paycb
#       account works over TCP, down keeps the datadir, clean removes it.
#
# Runs beside the developer's services: own PAYCB_VAR, own ports (see tap.sh). TAP
# output; non-zero exit on any failure. About 10 s.
set -euo pipefail
# shellcheck source=tests/services/tap.sh
. "$(dirname "$0")/tap.sh"

export PAYCB_START_TIMEOUT=20

# expect_start_failure NAME OUTPUT RC MS LOG - the common assertions for (a) and (b).
expect_start_failure() {
	local name=$1 out=$2 rc=$3 ms=$4 log=$5
	check "$name: up on a taken port exits non-zero (rc=$rc)" test "$rc" -ne 0
	check "$name: the message names $name and the timeout" \
		contains "$out" "$name: failed to start within ${PAYCB_START_TIMEOUT}s"
	check "$name: the message shows the tail of $log" contains "$out" "last lines of $log:"
	check "$name: the message shows the bind failure" contains "$out" "Address already in use"
	# Early death must be noticed at once; the whole timeout would be 20 000 ms.
	check "$name: failure reported in ${ms} ms, well before the timeout" test "$ms" -lt 15000
	# A port from the kernel's ephemeral range gets a hint: a client may hold it next time.
	local lo hi
	read -r lo hi </proc/sys/net/ipv4/ip_local_port_range
	if ((PORT >= lo && PORT <= hi)); then
		check "$name: the message says port $PORT is in the ephemeral range" \
			contains "$out" "port $PORT is in the kernel's ephemeral range"
	fi
}

# ---- (a) mariadb on a taken port ----------------------------------------------------
VA="$T/a"
occupy_port
t0=$(now_ms)
rc=0
out=$(PAYCB_VAR="$VA" PAYCB_DB_PORT="$PORT" "$D/mariadb.sh" up 2>&1) || rc=$?
ms=$(($(now_ms) - t0))
before=$failed
expect_start_failure mariadb "$out" "$rc" "$ms" "$VA/log/mariadb.log"
check "mariadb: no pid file left behind" test ! -e "$VA/mariadb/mariadbd.pid"
((failed == before)) || diag "$out"

# ---- (b) kafka on a taken port --------------------------------------------------------
VB="$T/b"
occupy_port
cport=$(free_port)
t0=$(now_ms)
rc=0
out=$(PAYCB_VAR="$VB" PAYCB_KAFKA_PORT="$PORT" PAYCB_KAFKA_CONTROLLER_PORT="$cport" \
	"$D/kafka.sh" up 2>&1) || rc=$?
ms=$(($(now_ms) - t0))
before=$failed
expect_start_failure kafka "$out" "$rc" "$ms" "$VB/log/kafka.log"
check "kafka: no pid file left behind" test ! -e "$VB/kafka/kafka.pid"
((failed == before)) || diag "$out"

# ---- (c) mariadb up, up, down, clean on a free port ---------------------------------
VC="$T/c"
port=$(free_port)
export PAYCB_VAR="$VC" PAYCB_DB_PORT="$port"
rc=0
out=$("$D/mariadb.sh" up 2>&1) || rc=$?
check "mariadb: up on a free port succeeds (rc=$rc)" test "$rc" -eq 0
check "mariadb: reports ready on 127.0.0.1:$port" contains "$out" "mariadb: ready on 127.0.0.1:$port (version "
((rc == 0)) || diag "$out"
pid1=$(cat "$VC/mariadb/mariadbd.pid" 2>/dev/null || echo none)

rc=0
out=$("$D/mariadb.sh" up 2>&1) || rc=$?
pid2=$(cat "$VC/mariadb/mariadbd.pid" 2>/dev/null || echo none)
check "mariadb: second up succeeds (rc=$rc)" test "$rc" -eq 0
check "mariadb: second up finds the running server" contains "$out" "already running (pid $pid1)"
check "mariadb: second up starts nothing new (pid $pid1 = $pid2)" test "$pid1" = "$pid2"

check "mariadb: paycb logs in over TCP and may create paycb_test_* databases" \
	mariadb -h127.0.0.1 -P"$port" -upaycb -p"$(cat "$VC/secrets/db_password")" \
	-e 'CREATE DATABASE paycb_test_svc; DROP DATABASE paycb_test_svc' paycb
check "mariadb: paycb may not create other databases" \
	bash -c "! mariadb -h127.0.0.1 -P$port -upaycb -p\$(cat '$VC/secrets/db_password') -e 'CREATE DATABASE other_svc' 2>/dev/null"
check "mariadb: the password file is mode 600" test "$(stat -c %a "$VC/secrets/db_password")" = 600

rc=0
"$D/mariadb.sh" down >/dev/null 2>&1 || rc=$?
check "mariadb: down succeeds (rc=$rc)" test "$rc" -eq 0
check "mariadb: down stopped pid $pid1" gone "$pid1"
check "mariadb: down keeps the datadir" test -d "$VC/mariadb/data/mysql"
rc=0
"$D/mariadb.sh" status >/dev/null 2>&1 || rc=$?
check "mariadb: status after down says stopped (rc=$rc)" test "$rc" -eq 3

rc=0
"$D/mariadb.sh" clean >/dev/null 2>&1 || rc=$?
check "mariadb: clean succeeds (rc=$rc)" test "$rc" -eq 0
check "mariadb: clean removes the datadir" test ! -e "$VC/mariadb/data"

done_testing
