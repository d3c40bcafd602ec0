#!/usr/bin/env bash
# deploy/local/services.sh - the local services paycb needs, as one command
# (`make services-up`, `make test`, `make migrate` call it).
#
#   services.sh up        MariaDB, then Kafka; non-zero if either fails to start
#   services.sh down      Kafka, then MariaDB (reverse order); data stays
#   services.sh clean     down, then remove both services' data
#   services.sh status    one line per service; non-zero unless both run
#   services.sh config    write $PAYCB_VAR/paycb.conf from deploy/local/paycb.conf.in
#                         (if absent or older than the template) and print its path
#   services.sh versions  the server versions, one line each
#
# Each service is also usable alone: deploy/local/mariadb.sh, deploy/local/kafka.sh.
# Environment: PAYCB_VAR, PAYCB_DB_PORT, PAYCB_KAFKA_PORT, PAYCB_KAFKA_CONTROLLER_PORT,
# PAYCB_START_TIMEOUT (see those scripts).
set -euo pipefail

# shellcheck source=deploy/local/lib.sh
. "$(dirname "$0")/lib.sh"

HERE="$PAYCB_LOCAL"
CONF="$PAYCB_VAR/paycb.conf"
TEMPLATE="$HERE/paycb.conf.in"

# sed_quote STRING - STRING made literal for the replacement side of s#...#...#.
sed_quote() {
	printf '%s' "$1" | sed -e 's/[\\#&]/\\&/g'
}

cmd_config() {
	if [[ ! -f $CONF || $TEMPLATE -nt $CONF ]]; then
		sed -e "s#@VAR@#$(sed_quote "$PAYCB_VAR")#g" \
			-e "s#@DB_PORT@#${PAYCB_DB_PORT:-23306}#g" \
			-e "s#@DB_SOCKET@#$(sed_quote "${PAYCB_DB_SOCKET:+$PAYCB_VAR/mariadb/mysqld.sock}")#g" \
			-e "s#@KAFKA_PORT@#${PAYCB_KAFKA_PORT:-29092}#g" \
			"$TEMPLATE" >"$CONF.tmp"
		local left
		left=$(grep -o '@[A-Z_]*@' "$CONF.tmp" || true)
		if [[ -n $left ]]; then
			rm -f "$CONF.tmp"
			die services "unknown placeholder in $TEMPLATE: ${left%%$'\n'*}"
		fi
		mv -f "$CONF.tmp" "$CONF"
	fi
	echo "$CONF"
}

cmd_up() {
	local t0
	t0=$(now_ms)
	# MariaDB first: it is quicker, and a broken database is the likelier failure.
	"$HERE/mariadb.sh" up
	"$HERE/kafka.sh" up
	say services "config at $(cmd_config)"
	say services "up in $(elapsed "$t0")s"
}

# down and clean go on when one service fails to stop, so the other is not left behind.
cmd_down() {
	local rc=0
	"$HERE/kafka.sh" down || rc=1
	"$HERE/mariadb.sh" down || rc=1
	return $rc
}

cmd_clean() {
	local rc=0
	"$HERE/kafka.sh" clean || rc=1
	"$HERE/mariadb.sh" clean || rc=1
	return $rc
}

cmd_status() {
	local rc=0
	"$HERE/mariadb.sh" status || rc=$?
	"$HERE/kafka.sh" status || rc=$?
	return $rc
}

cmd_versions() {
	local v
	# The binaries' versions, so this works with the services down; `up` prints the
	# version the running server reports.
	v=$(mariadbd --version 2>/dev/null | sed -n 's/.* Ver \([^ ]*\).*/\1/p')
	echo "mariadb: ${v:-not installed}"
	echo "kafka: $("$HERE/kafka.sh" version 2>/dev/null || echo 'not installed (run deploy/local/deps.sh)')"
}

case "${1:-}" in
up | start) cmd_up ;;
down | stop) cmd_down ;;
clean) cmd_clean ;;
status) cmd_status ;;
config) cmd_config ;;
versions) cmd_versions ;;
*)
	echo "usage: $0 up|down|clean|status|config|versions" >&2
	exit 2
	;;
esac
