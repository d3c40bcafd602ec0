#!/usr/bin/env bash
# tests/services/test_stale_pid.sh - a pid file left by a crash or a reboot never makes
# a script signal the wrong process or refuse to start.
#
# The pid files name (1) a process that has exited and (2) a live process that is not
# the service (this test's own shell). status must say stopped and drop the file,
# down and kill must touch nothing. No service is started; under a second.
set -euo pipefail
# shellcheck source=tests/services/tap.sh
. "$(dirname "$0")/tap.sh"

export PAYCB_VAR="$T/v"
mkdir -p "$PAYCB_VAR/mariadb" "$PAYCB_VAR/kafka"

sleep 0 &
dead=$!
wait "$dead" || true

# name, script, pid file
for svc in "mariadb mariadb.sh $PAYCB_VAR/mariadb/mariadbd.pid" "kafka kafka.sh $PAYCB_VAR/kafka/kafka.pid"; do
	read -r name script pidfile <<<"$svc"
	for who in "exited:$dead" "unrelated:$$"; do
		kind=${who%%:*}
		pid=${who#*:}
		echo "$pid" >"$pidfile"
		rc=0
		out=$("$D/$script" status 2>&1) || rc=$?
		check "$name: status with the pid of an $kind process says stopped (rc=$rc)" test "$rc" -eq 3
		check "$name: the stale pid file is removed" test ! -e "$pidfile"
		for action in down kill; do
			echo "$pid" >"$pidfile"
			rc=0
			out=$("$D/$script" "$action" 2>&1) || rc=$?
			check "$name: $action with the pid of an $kind process does nothing (rc=$rc)" \
				contains "$out" "$name: not running"
		done
	done
done
check "this shell was never signalled" kill -0 $$

done_testing
