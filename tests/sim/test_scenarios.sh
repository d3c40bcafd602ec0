#!/usr/bin/env bash
# tests/sim/test_scenarios.sh - every paycb-sim scenario against a real pipeline of its own,
# each checking its outcome in the database, and a wrong expectation that must be caught.
#
#   1. keys: the simulator generates every channel key and a configuration the daemons
#      accept; private keys stay 0600 and out of the configuration.
#   2. ingest alone: a storm and duplicates leave exactly one row per notification
#      (--ingest-only); the full expectations of paid-twice must FAIL without a processor,
#      naming the mismatch, so a scenario that cannot detect a broken pipeline is caught.
#   3. ingest, a processor and a retrier: each scenario at a small size (the refund and
#      edge-state ones of issue 16 with two to four orders), channel time compressed 600x,
#      ladder 1 1 2 s, must exit 0.
#   4. the reconciler against the simulator's channel API (`paycb-sim api`, on every channel
#      `run --api` registers: WeChat Pay, Alipay and Stripe by default): payments whose
#      notification is dropped must be found by query (and are reported missing while no
#      reconciler runs), and the refunds of paid-after-close, paid-twice and
#      closed-other-amount payments are made once, as each channel's ledger shows (--api).
#   5. SIGTERM stops every daemon with status 0.
#
# Own database paycb_test_sim_$$, topic prefix and consumer group tsim$$, free ports: it runs
# beside the demo and the other tests. TAP output. About 60 s (longer in the sanitizer build).
set -euo pipefail
cd "$(dirname "$0")/../.."
# shellcheck source=tools/sim/pipeline.sh
. tools/sim/pipeline.sh

PAYCB_VAR=${PAYCB_VAR:-$PWD/var}
BASE=${PAYCB_TEST_CONF:-$PAYCB_VAR/paycb.conf}
T=$(mktemp -d /tmp/paycb-sim-test.XXXXXX)
DB=paycb_test_sim_$$
CONF=$T/paycb.conf
SIM=(bin/paycb-sim run -c "$CONF" --compress 600 --concurrency 16 --seed $$)
n=0 failed=0

umask 077
printf '[client]\nhost=127.0.0.1\nport=%s\nuser=paycb\npassword=%s\n' \
	"${PAYCB_DB_PORT:-23306}" "$(cat "$PAYCB_VAR/secrets/db_password")" >"$T/my.cnf"
umask 022

cleanup() {
	pl_stop_all >/dev/null 2>&1 || true
	mariadb --defaults-extra-file="$T/my.cnf" -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
	if ((failed > 0)) || [[ -n ${PAYCB_KEEP_TEST_FILES:-} ]]; then
		echo "# files kept in $T"
	else
		rm -rf "$T"
	fi
}
trap cleanup EXIT

ok() { n=$((n + 1)); echo "ok $n - $1"; }
not_ok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() {
	local desc=$1
	shift
	if "$@"; then ok "$desc"; else not_ok "$desc"; fi
}
diag() { sed 's/^/# /' <<<"$1"; }

# sim DESC WANT ARGS... - runs one scenario; WANT is the exit status it must have.
sim() {
	local desc=$1 want=$2 rc=0 t0
	shift 2
	t0=$(pl_now_ms)
	OUT=$("${SIM[@]}" "$@" 2>&1) || rc=$?
	t0=$(($(pl_now_ms) - t0))
	check "$desc (exit $rc, $((t0 / 1000)).$((t0 % 1000 / 100)) s)" test "$rc" -eq "$want"
	if ((rc != want)); then
		diag "$(grep -E '^(mismatch|result|paycb-sim)' <<<"$OUT" | head -20)"
		diag "$(tail -n 30 <<<"$OUT")"
	fi
}

INGEST=$(pl_free_port) INGEST_ADMIN=$(pl_free_port) PROC_ADMIN=$(pl_free_port)
RETRIER_ADMIN=$(pl_free_port) RECON_ADMIN=$(pl_free_port) API_PORT=$(pl_free_port)
API="http://127.0.0.1:$API_PORT"
pl_init "$T"

# ---- 1. keys and configuration --------------------------------------------------------
rc=0
OUT=$(bin/paycb-sim keys --out "$T/keys" --conf "$CONF" --base "$BASE" --api "$API" \
	--set "database.name=$DB" --set "kafka.topic_prefix=tsim$$" --set "kafka.group_id=tsim$$" \
	--set "ingest.listen_port=$INGEST" --set "ingest.admin_port=$INGEST_ADMIN" \
	--set ingest.max_inflight=1024 --set ingest.max_unverified=1024 \
	--set 'retry.ladder_s=[1, 1, 2]' --set retry.initial_lease_s=3 \
	--set retry.lease_margin_s=1 --set retrier.sweep_interval_s=1 \
	--set "retrier.admin_port=$RETRIER_ADMIN" --set "processor.admin_port=$PROC_ADMIN" \
	--set reconciler.allow_http=true --set reconciler.sweep_interval_s=1 \
	--set "reconciler.admin_port=$RECON_ADMIN" --set 'reconciler.query_steps_s=[2, 30]' \
	--set 'reconciler.refund_ladder_s=[1, 1, 2]' --set reconciler.lease_s=5 \
	--set reconciler.total_timeout_ms=2000 2>&1) || rc=$?
check "keys: generated with a configuration (exit $rc)" test "$rc" -eq 0
((rc == 0)) || diag "$OUT"
check "keys: the daemons accept the configuration" bash -c "bin/paycb-ingest -n -c '$CONF' >/dev/null"
check "keys: private keys are 0600" \
	test "$(stat -c %a "$T"/keys/*/wx_platform_key.pem "$T"/keys/*/wx_pubkey_key.pem "$T"/keys/*/alipay_key.pem "$T"/keys/*/wx_merchant_key.pem "$T"/keys/*/alipay_app_key.pem | sort -u)" = 600
check "keys: shared secrets are 0600" \
	test "$(stat -c %a "$T"/keys/*/wx_apiv3_key "$T"/keys/*/stripe_whsec_* "$T"/keys/*/stripe_api_key | sort -u)" = 600
# The channels' private keys stay with the simulator; the private keys paycb's configuration
# names are paycb's own, which its reconciler signs calls with: the WeChat Pay merchant API
# key and, when keys --api names the Alipay API too, the Alipay app key.
check "keys: the configuration names no channel's private key" \
	bash -c "! grep '_key.pem' '$CONF' | grep -v 'merchant_key_file = .*/wx_merchant_key.pem' |
		grep -qv 'app_private_key_file = .*/alipay_app_key.pem'"
check "keys: the configuration names the merchant API key for the reconciler" \
	grep -q 'merchant_key_file = .*/wx_merchant_key.pem' "$CONF"
check "keys: two merchants with all three channels" \
	test "$(grep -c 'public_key_files\|secret_files\|apiv3_key_file' "$CONF")" -eq 6

OUT=$(bin/paycb-migrate -c "$CONF" --create-db 2>&1) || true
check "migrate: database $DB created" grep -q "database $DB" <<<"$OUT"

# ---- 2. ingest alone -------------------------------------------------------------------
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
check "ingest starts" pl_start ingest "$CONF" paycb-ingest "$INGEST_ADMIN"
check "ingest is ready" pl_ready "$INGEST_ADMIN" 60
sim "ingest only: storm of 300 copies, one row" 0 --scenario storm --copies 300 --ingest-only --wait 30
sim "ingest only: duplicates, one row each" 0 --scenario duplicates --orders 20 --ingest-only --wait 30
sim "ingest only: a foreign Connect event is kept unroutable, no row" 0 \
	--scenario connect-foreign --orders 2 --ingest-only --wait 30
sim "without a processor, refund-paid-twice's expectations are reported unmet" 1 \
	--scenario refund-paid-twice --orders 2 --wait 4
check "... naming the refund request that was never made" \
	test "$(grep -c '^mismatch: order .*refund_requests 0 ' <<<"$OUT")" -eq 2
sim "without a processor, paid-twice's expectations are reported unmet" 1 \
	--scenario paid-twice --orders 3 --wait 4
check "... naming each order's mismatch" \
	test "$(grep -c '^mismatch: order .*status PENDING, expected PAID' <<<"$OUT")" -eq 3
check "... and saying MISMATCH" grep -q '^result: MISMATCH' <<<"$OUT"

# ---- 3. the whole pipeline -------------------------------------------------------------
check "processor starts" pl_start processor "$CONF" paycb-processor "$PROC_ADMIN"
check "retrier starts" pl_start retrier "$CONF" paycb-retrier "$RETRIER_ADMIN"
sim "incident: one payment pushed three times over the window" 0 --scenario incident --orders 3 --wait 60
sim "storm: 500 concurrent copies" 0 --scenario storm --copies 500 --wait 60
sim "paid-after-close: refund requested, order stays CLOSED" 0 --scenario paid-after-close --orders 4 --wait 60
sim "paid-twice: one PAID, a refund request for the other trade" 0 --scenario paid-twice --orders 4 --wait 60
sim "amount-mismatch: dead with a dead letter, order PENDING" 0 --scenario amount-mismatch --orders 4 --wait 60
sim "refund-partial-full: REFUNDED to the cent" 0 --scenario refund-partial-full --orders 6 --wait 60
sim "refund-before-payment: retried until the payment, then REFUNDED" 0 \
	--scenario refund-before-payment --orders 4 --wait 60
sim "no-order: dead after the ladder, no order row" 0 --scenario no-order --orders 3 --wait 60
# The refund and edge states of issue 16, two to four orders each (odd cases take the other
# variant: the refund first, or in full).
sim "refund-abnormal: ABNORMAL changes nothing, the SUCCESS that follows refunds once" 0 \
	--scenario refund-abnormal --orders 2 --wait 60
sim "refund-stripe-both: both Stripe families in random order count the money once" 0 \
	--scenario refund-stripe-both --orders 4 --wait 60
sim "refund-reversed: a Stripe refund failing after success is reversed" 0 \
	--scenario refund-reversed --orders 4 --wait 60
sim "refund-paid-twice: the refund settles the second payment's request, in any order" 0 \
	--scenario refund-paid-twice --orders 4 --wait 60
sim "refund-paid-after-close: the refund settles the request, in any order" 0 \
	--scenario refund-paid-after-close --orders 4 --wait 60
sim "closed-other-amount: a refund request for the amount paid, order CLOSED" 0 \
	--scenario closed-other-amount --orders 2 --wait 60
sim "dashboard-refund: kept unroutable, the order untouched" 0 \
	--scenario dashboard-refund --orders 2 --wait 60
sim "connect-foreign: kept unroutable, the order never PAID" 0 \
	--scenario connect-foreign --orders 2 --wait 60
sim "lost acknowledgements: re-pushed, absorbed" 0 --scenario duplicates --orders 30 --lost 500 --wait 60
sim "mixed: 300 orders, every edge case" 0 --scenario mixed --orders 300 --wait 90

# ---- 4. the reconciler and the channel API ---------------------------------------------
check "the channel API starts" pl_start_api channel-api "$CONF" "$API_PORT"
# dropped FOUND|WANT - the report's row of dropped notifications found by query.
dropped() {
	sed -n "s/^  dropped notifications found by query  *\([0-9]*\)  *\([0-9]*\) .*/\1 \2/p" <<<"$OUT"
}
# Of 30 payments on three channels, those on the channels the API serves (by default all
# three) are all dropped.
sim "without a reconciler, dropped notifications are reported unfound" 1 \
	--scenario load --orders 30 --api "$API" --dropped 1000 --wait 5
read -r found want <<<"$(dropped)"
check "... all $want of them, each named as a mismatch" \
	test "${found:-x}" = 0 -a "${want:-0}" -gt 0 -a \
	"$(grep -c "^mismatch: order .*found by the reconciler's query 0, expected 1" <<<"$OUT")" = "${want:-0}"
check "reconciler starts" pl_start reconciler "$CONF" paycb-reconciler "$RECON_ADMIN"
sim "dropped notifications: the reconciler finds every payment by query" 0 \
	--scenario load --orders 30 --api "$API" --dropped 1000 --wait 60
read -r found want <<<"$(dropped)"
check "... and reports them recovered ($found of $want)" \
	test "${want:-0}" -gt 0 -a "${found:-x}" = "${want:-0}"
sim "paid-after-close: the reconciler refunds the payment once (the ledger judges)" 0 \
	--scenario paid-after-close --orders 3 --api "$API" --wait 60
sim "paid-twice: the reconciler refunds the second payment once" 0 \
	--scenario paid-twice --orders 3 --api "$API" --wait 60
sim "closed-other-amount: the reconciler refunds the amount paid" 0 \
	--scenario closed-other-amount --orders 2 --api "$API" --wait 60
check "... and the channel refunded nothing twice" \
	grep -q '^  payments the channel refunded twice  *0  *0 ' <<<"$OUT"

# ---- 5. orderly stop --------------------------------------------------------------------
for d in ingest processor retrier reconciler channel-api; do
	pl_stop "$d" 30
	check "$d stops on SIGTERM with status 0 (status $PL_STATUS)" test "$PL_STATUS" -eq 0
done

echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
((failed == 0))
