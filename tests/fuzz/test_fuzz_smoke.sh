#!/usr/bin/env bash
# test_fuzz_smoke - builds the libFuzzer harnesses and runs each for a few seconds, so a
# parser regression that crashes on hostile input fails make test. `make fuzz` runs longer.
set -uo pipefail
cd "$(dirname "$0")/../.."
if ! make --no-print-directory fuzzers >build-fuzz.log 2>&1; then
	echo "1..1"
	echo "not ok 1 - the fuzz harnesses build"
	tail -20 build-fuzz.log | sed 's/^/# /'
	rm -f build-fuzz.log
	exit 1
fi
rm -f build-fuzz.log
exec tests/fuzz/run.sh "${PAYCB_FUZZ_SMOKE_SECONDS:-4}"
