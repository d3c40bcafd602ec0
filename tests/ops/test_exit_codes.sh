#!/usr/bin/env bash
# tests/ops/test_exit_codes.sh - one mistake, one exit code, in every daemon (daemon.h). The
# systemd units stay stopped after 64 and 78 and restart after 69 and 70, so a daemon that
# mapped a configuration mistake to 69 would be restarted for ever. Each daemon is started
# against the local MariaDB:
#   - with a password the server refuses (Access denied): 78, the database named in the log;
#   - with a password file shared with the group: 78 before it connects, naming the file;
#   - with -n on a good configuration: 0, and on an unknown setting: 78 with its line.
# About 2 s.
set -uo pipefail
# shellcheck source=tests/ops/lib.sh
. "$(dirname "$0")/lib.sh"

ops_services || bail "the local services are up (make services-up)"
DAEMONS=(ingest processor retrier reconciler)

printf 'not-the-password\n' >"$T/wrong"
chmod 600 "$T/wrong"
sed "s|password_file = .*|password_file = \"$T/wrong\";|" "$PAYCB_TEST_CONF" >"$T/refused.conf"
cp "$DB_PASSWORD_FILE" "$T/shared"
chmod 640 "$T/shared"
sed "s|password_file = .*|password_file = \"$T/shared\";|" "$PAYCB_TEST_CONF" >"$T/shared.conf"
{ cat "$PAYCB_TEST_CONF"; printf 'no_such_setting = 1;\n'; } >"$T/unknown.conf"
unknown_line=$(wc -l <"$T/unknown.conf")

for d in "${DAEMONS[@]}"; do
	timeout 30 "bin/paycb-$d" -c "$T/refused.conf" >"$T/$d-refused.log" 2>&1
	rc=$?
	check "$d: a password the database refuses exits 78 (got $rc)" test "$rc" -eq 78
	check "$d: the log says the database refused it" grep -q "Access denied" "$T/$d-refused.log"
	timeout 30 "bin/paycb-$d" -c "$T/shared.conf" >"$T/$d-shared.log" 2>&1
	rc=$?
	check "$d: a group-readable password file exits 78 (got $rc)" test "$rc" -eq 78
	check "$d: the error names the file" grep -q "$T/shared" "$T/$d-shared.log"
	timeout 30 "bin/paycb-$d" -n -c "$PAYCB_TEST_CONF" >"$T/$d-n.log" 2>&1
	rc=$?
	check "$d -n: a good configuration exits 0 (got $rc)" test "$rc" -eq 0
	timeout 30 "bin/paycb-$d" -n -c "$T/unknown.conf" >"$T/$d-unknown.log" 2>&1
	rc=$?
	check "$d -n: an unknown setting exits 78 (got $rc)" test "$rc" -eq 78
	check "$d -n: the error gives the setting's line" \
		grep -q "unknown.conf:$unknown_line:" "$T/$d-unknown.log"
done

done_testing
