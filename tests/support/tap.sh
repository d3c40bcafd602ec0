# shellcheck shell=bash
# tests/support/tap.sh - the TAP helpers that tests/services/tap.sh and tests/ops/lib.sh
# both offer their test scripts (sourced by those two files; not a test itself).
#
# A test prints one "ok N - ..." or "not ok N - ..." line per check and the plan at the end;
# done_testing's status is the test's exit status. The two sourcing files add what only
# their tests need (temp directories, exit traps, services), so this file sets up nothing
# but the counters.

n=0
failed=0

ok() {
	n=$((n + 1))
	echo "ok $n - $1"
}

not_ok() {
	n=$((n + 1))
	failed=$((failed + 1))
	echo "not ok $n - $1"
}

# check DESC CMD... - one TAP line for the outcome of CMD.
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}

# contains HAYSTACK NEEDLE - fixed-string match, for check.
contains() {
	grep -qF -- "$2" <<<"$1"
}

# diag TEXT - show TEXT as TAP comments (after a failure, what the script printed).
diag() {
	sed 's/^/# /' <<<"$1"
}

# done_testing - the plan, a summary, and the exit status.
done_testing() {
	echo "1..$n"
	echo "# $((n - failed)) passed, $failed failed"
	((failed == 0))
}

# now_ms - wall clock in milliseconds, for deadlines.
now_ms() {
	local t
	t=$(date +%s%N)
	echo $((t / 1000000))
}

# free_port - a loopback port nothing listens on right now (bind to 0, read it back, close).
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
