# shellcheck shell=bash
# tests/ops/lib.sh - what tests/ops/test_*.sh share (sourced; not a test itself).
#
# TAP lines (ok N / not ok N, the plan at the end), one temp directory per test that the EXIT
# trap removes after stopping every process registered with ops_track, free loopback ports,
# waiting for a condition with a deadline, the local services' settings read from
# $PAYCB_TEST_CONF, and the mariadb client on them.

OPS_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# ok, not_ok, check, contains, diag, done_testing, now_ms and free_port, shared with
# tests/services/tap.sh.
# shellcheck source=tests/support/tap.sh
. "$OPS_ROOT/tests/support/tap.sh"
cd "$OPS_ROOT" || exit 1
T="$(mktemp -d /tmp/paycb-ops-test.XXXXXX)"
OPS_PIDS=()
OPS_CLEANUPS=()

# ops_track PID - stop PID (SIGTERM, then SIGKILL after 20 s) when the test exits.
ops_track() {
	OPS_PIDS+=("$1")
}

# ops_at_exit CMD - run CMD (a string for eval) at exit, before the temp dir goes.
ops_at_exit() {
	OPS_CLEANUPS+=("$1")
}

ops_cleanup() {
	local pid c end
	for pid in "${OPS_PIDS[@]}"; do
		kill -TERM "$pid" 2>/dev/null || continue
		end=$(($(now_ms) + 20000))
		while kill -0 "$pid" 2>/dev/null && (($(now_ms) < end)); do
			sleep 0.05
		done
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
	done
	for c in "${OPS_CLEANUPS[@]}"; do
		eval "$c" >/dev/null 2>&1 || true
	done
	[[ -n ${PAYCB_KEEP_TEST_FILES:-} ]] || rm -rf "$T"
}
trap ops_cleanup EXIT

# skip DESC REASON - a TAP skip (counts as passed).
skip() {
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}

# bail TEXT - a failed test that cannot go on: one not ok line, the plan, exit 1.
bail() {
	not_ok "$1"
	done_testing
	exit 1
}

# wait_for MS CMD... - true once CMD succeeds, false if it still fails after MS milliseconds.
wait_for() {
	local end=$(($(now_ms) + $1))
	shift
	until "$@"; do
		(($(now_ms) < end)) || return 1
		sleep 0.05
	done
}

# conf_value GROUP KEY [FILE] - a scalar of a libconfig file written one setting per line,
# such as the local configuration (deploy/local/paycb.conf.in); quotes removed.
conf_value() {
	awk -v g="$1" -v k="$2" '
		$0 ~ "^[ \t]*" g "[ \t]*=[ \t]*\\{" { in_g = 1; next }
		in_g && /^[ \t]*\};/ { in_g = 0 }
		in_g && $1 == k { v = $0; sub(/^[^=]*=[ \t]*/, "", v); sub(/;[ \t]*$/, "", v);
			gsub(/"/, "", v); print v; exit }' "${3:-$PAYCB_TEST_CONF}"
}

# The local services (tests/run.sh sets PAYCB_TEST_CONF; `make test` brings them up).
PAYCB_TEST_CONF=${PAYCB_TEST_CONF:-$OPS_ROOT/var/paycb.conf}
ops_services() {
	[[ -r $PAYCB_TEST_CONF ]] || return 1
	DB_HOST=$(conf_value database host)
	DB_PORT=$(conf_value database port)
	DB_USER=$(conf_value database user)
	DB_PASSWORD_FILE=$(conf_value database password_file)
	KAFKA_BROKERS=$(conf_value kafka brokers)
	[[ -n $DB_HOST && -n $DB_PORT && -n $DB_USER && -r $DB_PASSWORD_FILE && -n $KAFKA_BROKERS ]]
}

# sql DB STATEMENT - run one statement on the local MariaDB; prints the result, tab-separated.
sql() {
	MYSQL_PWD="$(cat "$DB_PASSWORD_FILE")" mariadb --no-defaults --protocol=tcp -h "$DB_HOST" \
		-P "$DB_PORT" -u "$DB_USER" -N -B ${1:+"$1"} -e "$2"
}

# ops_build_helper NAME - $T/NAME from tests/ops/NAME.c: bin/tests/ops/NAME when the Makefile
# built it (and it is newer than its source), else compiled here against the libraries the
# daemons were built from (the sanitizer build when bin/paycb-ingest is one).
ops_build_helper() {
	local b=build/opt san=()
	if [[ -x bin/tests/ops/$1 && bin/tests/ops/$1 -nt tests/ops/$1.c ]]; then
		cp "bin/tests/ops/$1" "$T/$1"
		return
	fi
	# grep reads ldd's whole output: with -q it would stop at the first match, ldd would die
	# of SIGPIPE, and under pipefail the test would take the sanitizer build for the other.
	if ldd bin/paycb-ingest 2>/dev/null | grep libasan >/dev/null; then
		b=build/san
		# shellcheck disable=SC2054 # one flag with a comma-separated value
		san=(-fsanitize=address,undefined -fno-omit-frame-pointer)
	fi
	[[ -f $b/libchan.a && -f $b/libcommon.a ]] ||
		{ echo "no $b/libchan.a or $b/libcommon.a (build first)" >&2; return 1; }
	# shellcheck disable=SC2046 # pkg-config output is a list of flags
	cc -std=c11 -D_GNU_SOURCE -O1 -g "${san[@]}" -Icommon -Ichan \
		$(pkg-config --cflags openssl jansson) -o "$T/$1" "tests/ops/$1.c" \
		"$b/libchan.a" "$b/libcommon.a" \
		$(pkg-config --libs rdkafka libconfig jansson libmicrohttpd openssl libcurl) \
		$(mariadb_config --libs) -lpthread -lm
}
