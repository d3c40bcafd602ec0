#!/usr/bin/env bash
# tests/fuzz/run.sh SECONDS - runs every libFuzzer harness in bin/fuzz for SECONDS each, with
# seed corpora made from tests/vectors/inbound (kept under build/fuzz/corpus, never committed).
# Prints TAP: one line per harness; a crash, leak or sanitizer report is a failure, and the
# reproducer is kept under build/fuzz/crashes/.
set -uo pipefail
cd "$(dirname "$0")/../.."
secs=${1:-60}
vec=${PAYCB_VECTORS:-$PWD/tests/vectors/inbound}
corpus=build/fuzz/corpus
crashes=build/fuzz/crashes
mkdir -p "$crashes"
export LSAN_OPTIONS=suppressions=$PWD/tests/fuzz/lsan.supp:print_suppressions=0

seed() { # seed NAME MODE-BYTE FILE... : copies each file, prefixed with the mode byte if given
	local name=$1 mode=$2
	shift 2
	mkdir -p "$corpus/$name"
	local i=0
	for f in "$@"; do
		[ -f "$f" ] || continue
		i=$((i + 1))
		if [ -n "$mode" ]; then
			{ printf '%b' "$mode"; cat "$f"; } >"$corpus/$name/seed$i"
		else
			cp "$f" "$corpus/$name/seed$i"
		fi
	done
}

for m in 88.88 0.10 100 0 99999999999999.99 1. 1.234 -0.01 1e3; do
	mkdir -p "$corpus/money"
	printf '%s' "$m" >"$corpus/money/$m"
done
seed form "" "$vec"/alipay/*.form-urlencoded.txt
seed alipay '\x00' "$vec"/alipay/*.form-urlencoded.txt
mkdir -p "$corpus/msg"
printf '%s' '{"v":1,"log":"pay","id":42,"merchant_id":"default","channel":"wxpay","out_trade_no":"O-1","attempt":1}' >"$corpus/msg/seed1"
seed config "" deploy/local/paycb.conf.in
seed wxpay '\x01' "$vec"/wechatpay/derived/*.body.json
seed wxpay '\x02' "$vec"/wechatpay/derived/*.plaintext.json
seed stripe '\x01' "$vec"/stripe/derived/*.json "$vec"/stripe/sdk_python_test_payload.json

n=0 failed=0
fuzzers=(bin/fuzz/fuzz_*)
echo "1..${#fuzzers[@]}"
for f in "${fuzzers[@]}"; do
	n=$((n + 1))
	name=${f#bin/fuzz/fuzz_}
	mkdir -p "$corpus/$name"
	log=build/fuzz/$name.log
	if "$f" -max_total_time="$secs" -rss_limit_mb=1536 -timeout=10 \
		-artifact_prefix="$crashes/$name-" "$corpus/$name" >"$log" 2>&1; then
		runs=$(grep -oE '#[0-9]+' "$log" | tail -1)
		echo "ok $n - fuzz_$name ran ${secs}s without a finding (${runs#\#} runs)"
	else
		failed=$((failed + 1))
		echo "not ok $n - fuzz_$name found a crash (see $log, $crashes)"
		grep -E 'ERROR|SUMMARY' "$log" | head -5 | sed 's/^/# /'
	fi
done
[ "$failed" -eq 0 ]
