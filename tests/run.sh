#!/usr/bin/env bash
# tests/run.sh - runs paycb's test programs and prints one summary line.
#
# Every test program speaks TAP ("ok N - name" / "not ok N - name"): the cmocka programs in
# bin/tests/{unit,integ} (CMOCKA_MESSAGE_OUTPUT=TAP) and the shell tests in tests/*/test_*.sh.
# A program that exits non-zero without reporting a failing case (a crash, a sanitizer report,
# a timeout) counts as one failure. The last line is "N passed, M failed".
#
# usage: tests/run.sh [unit|integ|all]   (services must be up for integ and all)
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
export CMOCKA_MESSAGE_OUTPUT=TAP
export PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
export PAYCB_TEST_CONF=${PAYCB_TEST_CONF:-$PAYCB_VAR/paycb.conf}
export PAYCB_VECTORS=${PAYCB_VECTORS:-$PWD/tests/vectors/inbound}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
per_test_timeout=${PAYCB_TEST_TIMEOUT:-600}
logdir=$PAYCB_VAR/test-logs
mkdir -p "$logdir"

progs=()
case $what in
unit) progs+=(bin/tests/unit/test_*) ;;
integ) progs+=(bin/tests/integ/test_* tests/*/test_*.sh) ;;
all) progs+=(bin/tests/unit/test_* bin/tests/integ/test_* tests/*/test_*.sh) ;;
*) echo "usage: tests/run.sh [unit|integ|all]" >&2; exit 64 ;;
esac

if [ "$what" != unit ]; then
	deploy/local/services.sh config >/dev/null
	deploy/local/services.sh versions || true
fi

passed=0 failed=0 failures=()
for p in "${progs[@]}"; do
	[ -x "$p" ] || continue
	name=${p#bin/tests/}
	log=$logdir/$(echo "$name" | tr '/' '_').log
	start=$(date +%s%N)
	timeout -k 10 "$per_test_timeout" "$p" >"$log" 2>&1
	rc=$?
	ok=$(grep -cE '^ok [0-9]+' "$log")
	nok=$(grep -cE '^not ok [0-9]+' "$log")
	if [ "$rc" -ne 0 ] && [ "$nok" -eq 0 ]; then
		nok=1
		echo "not ok - $name exited with status $rc" >>"$log"
	fi
	passed=$((passed + ok))
	failed=$((failed + nok))
	ms=$((($(date +%s%N) - start) / 1000000))
	secs=$((ms / 1000)).$((ms % 1000 / 100))
	printf '%-44s %4d passed %3d failed  %6ss\n' "$name" "$ok" "$nok" "$secs"
	if [ "$nok" -ne 0 ]; then
		failures+=("$name")
		grep -E '^not ok|^# ' "$log" | head -40 | sed 's/^/    /'
		echo "    (full log: $log; last lines:)"
		tail -15 "$log" | sed 's/^/    | /'
	fi
done
[ ${#failures[@]} -eq 0 ] || echo "failing: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
