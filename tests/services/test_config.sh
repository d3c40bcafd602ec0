#!/usr/bin/env bash
# tests/services/test_config.sh - `services.sh config` renders paycb.conf from the template:
# every placeholder replaced, the ports from the environment, the var path absolute even
# when it holds characters sed treats specially, and a hand edit kept until the template
# changes. No service is started; under a second.
set -euo pipefail
# shellcheck source=tests/services/tap.sh
. "$(dirname "$0")/tap.sh"

export PAYCB_VAR="$T/v #&x"
export PAYCB_DB_PORT=33333 PAYCB_KAFKA_PORT=44444

rc=0
path=$("$D/services.sh" config 2>&1) || rc=$?
check "config succeeds (rc=$rc)" test "$rc" -eq 0
check "config prints the path it wrote" test "$path" = "$PAYCB_VAR/paycb.conf"
conf=$(cat "$PAYCB_VAR/paycb.conf" 2>/dev/null || true)
check "no placeholder is left" bash -c "! grep -q '@[A-Z_]*@' <<<\"\$1\"" _ "$conf"
check "database port from PAYCB_DB_PORT" contains "$conf" "port = 33333;"
check "brokers from PAYCB_KAFKA_PORT" contains "$conf" 'brokers = "127.0.0.1:44444";'
check "password_file is the absolute secret path" \
	contains "$conf" "password_file = \"$PAYCB_VAR/secrets/db_password\";"
check "TCP unless asked: the socket is empty" contains "$conf" 'socket = "";'
rm -f "$PAYCB_VAR/paycb.conf"
PAYCB_DB_SOCKET=1 "$D/services.sh" config >/dev/null
check "PAYCB_DB_SOCKET=1: the local server's socket" \
	grep -qF "socket = \"$PAYCB_VAR/mariadb/mysqld.sock\";" "$PAYCB_VAR/paycb.conf"
rm -f "$PAYCB_VAR/paycb.conf"
"$D/services.sh" config >/dev/null

# The rule is "regenerate when the template is newer"; move paycb.conf's mtime rather
# than the template's, so the test never touches a tracked file.
echo "# edited" >>"$PAYCB_VAR/paycb.conf"
touch -d '+1 hour' "$PAYCB_VAR/paycb.conf"
"$D/services.sh" config >/dev/null
check "a paycb.conf newer than the template is kept" grep -q '^# edited' "$PAYCB_VAR/paycb.conf"

touch -d '2000-01-01' "$PAYCB_VAR/paycb.conf"
"$D/services.sh" config >/dev/null
check "a paycb.conf older than the template is regenerated" \
	bash -c "! grep -q '^# edited' \"\$1\"" _ "$PAYCB_VAR/paycb.conf"

done_testing
