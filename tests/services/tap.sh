# shellcheck shell=bash
# tests/services/tap.sh - helpers shared by tests/services/test_*.sh (sourced, not a test).
#
# TAP output (ok N / not ok N, plan at the end), a private PAYCB_VAR under /tmp that the
# EXIT trap removes after killing whatever was started in it, and free loopback ports,
# so a test never disturbs the services the developer has up on the default ports.

TAP_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# ok, not_ok, check, contains, diag, done_testing, now_ms and free_port, shared with
# tests/ops/lib.sh.
# shellcheck source=tests/support/tap.sh
. "$TAP_ROOT/tests/support/tap.sh"
D="$TAP_ROOT/deploy/local"
T="$(mktemp -d /tmp/paycb-svc-test.XXXXXX)"
LISTENERS=()

tap_cleanup() {
	local pid v
	for pid in "${LISTENERS[@]}"; do
		kill "$pid" 2>/dev/null || true
	done
	# kill, not down: nothing here needs a clean shutdown, and it is quicker.
	for v in "$T"/*/; do
		[[ -d $v ]] || continue
		PAYCB_VAR="$v" "$D/mariadb.sh" kill >/dev/null 2>&1 || true
		PAYCB_VAR="$v" "$D/kafka.sh" kill >/dev/null 2>&1 || true
	done
	rm -rf "$T"
}
trap tap_cleanup EXIT

# occupy_port - start a listener on a kernel-chosen loopback port and set PORT to it.
# Not to be called in $(...): the listener's pid must reach LISTENERS in this shell
# for the trap. The listener exits by itself after 120 s should the trap ever miss it.
occupy_port() {
	local f="$T/listener.$RANDOM" deadline
	python3 -c '
import socket, time
s = socket.socket()
s.bind(("127.0.0.1", 0))
s.listen(16)
print(s.getsockname()[1], flush=True)
time.sleep(120)' >"$f" &
	LISTENERS+=($!)
	deadline=$(($(now_ms) + 10000))
	until [[ -s $f ]]; do
		(($(now_ms) < deadline)) || return 1
		sleep 0.05
	done
	# shellcheck disable=SC2034 # read by the test that called us
	PORT=$(cat "$f")
}

# gone PID - the process has exited. A zombie counts as gone: the daemons are detached,
# and the init of a container may reap them late.
gone() {
	local state
	state=$(awk '{ s = $0; sub(/^.*\) /, "", s); split(s, f, " "); print f[1] }' "/proc/$1/stat" 2>/dev/null) || return 0
	[[ -z $state || $state == Z || $state == X ]]
}
