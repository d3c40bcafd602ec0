/*
 * test_processor_edges - refunds and the unusual states of the order state machine against
 * the processor driven in-process (proc_apply, the code its consumer path runs), the real
 * MariaDB and the real Kafka broker (the outbox relay): every verified notification must
 * have exactly the effect the channel meant.
 *
 * Rows are reserved exactly as ingest reserves them (with the channel's refund status) and
 * their messages applied as the daemon applies a delivered message; each case then checks
 * that the rows are done and checks the order, the refund ledger, the refund requests, the alerts
 * and the outbox. The cases: WeChat Pay ABNORMAL and CLOSED refunds change nothing and alert, and
 * a later SUCCESS of the same refund_id is applied once; Stripe's two refund
 * representations count once in either order, and a refund that fails after it succeeded
 * is reversed; refunds of paid-after-close and paid-twice payments settle their refund
 * requests whatever the order's state, also when the refund comes first; a payment of
 * another amount on a CLOSED or PAID order is refunded, not dead-lettered; an order the
 * merchant marked paid without a trade is confirmed, not refunded; partial refunds emit one
 * event each.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "orders.h"

static struct conf cf;
static struct db db;

/* ---- item 1: WeChat Pay refunds that moved no money ------------------------------------- */

static void
wx_abnormal_refund_changes_nothing_and_a_later_success_applies_once(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-abn", "88.88", "CNY", "PENDING"), 0);
	ord_pay("wxpay", "E-abn", "T-abn", "88.88", "CNY");
	r = ORD_WX_REFUND("E-abn", "50300-abn", "T-abn", "88.88", "ABNORMAL");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_abnormal");
	assert_string_equal(ord_status("E-abn", buf, sizeof(buf)), "PAID");
	assert_string_equal(ord_refunded("E-abn", buf, sizeof(buf)), "0.00");
	assert_int_equal(ord_events("E-abn", "order.refund"), 0);
	assert_int_equal(ord_events("E-abn", "order.refunded"), 0);
	assert_int_equal(ord_alerts("E-abn", "refund_abnormal"), 1);
	/* The alert names the order and the refund. */
	assert_int_equal(ord_q1("SELECT COUNT(*) FROM alerts WHERE kind = 'refund_abnormal' AND "
	                        "detail LIKE CONCAT('%', ?, '%')",
	                        "refund 50300-abn"),
	                 1);
	/* The merchant resolves it; WeChat Pay keeps the refund_id and says SUCCESS. */
	r = ORD_WX_REFUND("E-abn", "50300-abn", "T-abn", "88.88", "SUCCESS");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refunded");
	assert_string_equal(ord_status("E-abn", buf, sizeof(buf)), "REFUNDED");
	assert_string_equal(ord_refunded("E-abn", buf, sizeof(buf)), "88.88");
	assert_int_equal(ord_events("E-abn", "order.refund"), 1);
	assert_int_equal(ord_events("E-abn", "order.refunded"), 1);
	/* A copy of the same status is a duplicate key at the reservation. */
	assert_int_equal(fx_refund_row_status(&db, &cf, ORD_M, "wxpay", "50300-abn", "T-abn",
	                                      "E-abn", "88.88", 0, "CNY", "REFUND.SUCCESS",
	                                      "SUCCESS"),
	                 0);
}

static void
wx_closed_refund_changes_nothing(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-rcl", "20.00", "CNY", "PENDING"), 0);
	ord_pay("wxpay", "E-rcl", "T-rcl", "20.00", "CNY");
	r = ORD_WX_REFUND("E-rcl", "50300-rcl", "T-rcl", "5.00", "CLOSED");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_closed");
	assert_string_equal(ord_status("E-rcl", buf, sizeof(buf)), "PAID");
	assert_string_equal(ord_refunded("E-rcl", buf, sizeof(buf)), "0.00");
	assert_int_equal(ord_alerts("E-rcl", "refund_closed"), 1);
	assert_int_equal(
	    ord_q1("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no = ?", "E-rcl"), 0);
}

/* ---- item 2: Stripe's two refund representations, and refunds that fail ----------------- */

static void
stripe_refund_told_both_ways_counts_once_in_either_order(void **state)
{
	char buf[64];

	(void)state;
	/* charge.refunded first, then refund.updated. */
	assert_int_equal(fx_order(&db, ORD_M, "E-sb1", "100.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "E-sb1", "pi_sb1", "100.00", "USD");
	ORD_STRIPE_CHARGE_REFUNDED("E-sb1", "ch_sb1:5000", "pi_sb1", "50.00");
	ORD_STRIPE_REFUND("E-sb1", "re_sb1", "pi_sb1", "50.00", "succeeded");
	assert_string_equal(ord_refunded("E-sb1", buf, sizeof(buf)), "50.00");
	assert_string_equal(ord_status("E-sb1", buf, sizeof(buf)), "REFUNDING");
	assert_int_equal(ord_events("E-sb1", "order.refund"), 1);
	assert_int_equal(ord_events("E-sb1", "order.refunded"), 0);
	/* refund.updated first, then charge.refunded; a 4.00 refund stays 4.00. */
	assert_int_equal(fx_order(&db, ORD_M, "E-sb2", "10.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "E-sb2", "pi_sb2", "10.00", "USD");
	ORD_STRIPE_REFUND("E-sb2", "re_sb2", "pi_sb2", "4.00", "succeeded");
	ORD_STRIPE_CHARGE_REFUNDED("E-sb2", "ch_sb2:400", "pi_sb2", "4.00");
	assert_string_equal(ord_refunded("E-sb2", buf, sizeof(buf)), "4.00");
	assert_string_equal(ord_status("E-sb2", buf, sizeof(buf)), "REFUNDING");
	assert_int_equal(ord_events("E-sb2", "order.refund"), 1);
	/* The rest, told both ways: the order is REFUNDED once, with one order.refunded. */
	ORD_STRIPE_CHARGE_REFUNDED("E-sb2", "ch_sb2:1000", "pi_sb2", "10.00");
	ORD_STRIPE_REFUND("E-sb2", "re_sb2b", "pi_sb2", "6.00", "succeeded");
	assert_string_equal(ord_refunded("E-sb2", buf, sizeof(buf)), "10.00");
	assert_string_equal(ord_status("E-sb2", buf, sizeof(buf)), "REFUNDED");
	assert_int_equal(ord_events("E-sb2", "order.refund"), 2);
	assert_int_equal(ord_events("E-sb2", "order.refunded"), 1);
	assert_int_equal(ord_alerts("E-sb2", "amount_mismatch"), 0);
}

static void
stripe_refund_failing_after_success_is_reversed(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-rev", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "E-rev", "pi_rev", "30.00", "USD");
	ORD_STRIPE_REFUND("E-rev", "re_rev", "pi_rev", "30.00", "succeeded");
	ORD_STRIPE_CHARGE_REFUNDED("E-rev", "ch_rev:3000", "pi_rev", "30.00");
	assert_string_equal(ord_status("E-rev", buf, sizeof(buf)), "REFUNDED");
	r = ORD_STRIPE_REFUND("E-rev", "re_rev", "pi_rev", "30.00", "failed");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_reversed");
	assert_string_equal(ord_refunded("E-rev", buf, sizeof(buf)), "0.00");
	assert_string_equal(ord_status("E-rev", buf, sizeof(buf)), "PAID");
	assert_int_equal(ord_events("E-rev", "order.refund_reversed"), 1);
	assert_int_equal(ord_alerts("E-rev", "refund_reversed"), 1);
	assert_int_equal(ord_q1("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no = ? AND "
	                        "refund_no = 're_rev' AND state = 'REVERSED'",
	                        "E-rev"),
	                 1);
	/* A canceled copy of the same refund is a new status but changes nothing more. */
	r = ORD_STRIPE_REFUND("E-rev", "re_rev", "pi_rev", "30.00", "canceled");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "duplicate");
	assert_string_equal(ord_refunded("E-rev", buf, sizeof(buf)), "0.00");
	/* A failure of a refund never applied moves nothing and alerts. */
	r = ORD_STRIPE_REFUND("E-rev", "re_rev2", "pi_rev", "10.00", "failed");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_failed");
	assert_int_equal(ord_alerts("E-rev", "refund_failed"), 1);
	/* Its success copy arriving later is never applied. */
	r = ORD_STRIPE_REFUND("E-rev", "re_rev2", "pi_rev", "10.00", "succeeded");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "duplicate");
	assert_string_equal(ord_refunded("E-rev", buf, sizeof(buf)), "0.00");
	assert_string_equal(ord_status("E-rev", buf, sizeof(buf)), "PAID");
}

/* ---- item 3: refunds of payments that are not the order's ------------------------------ */

static void
refund_of_a_paid_after_close_payment_settles_its_request(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-pac", "30.00", "CNY", "CLOSED"), 0);
	ord_pay("wxpay", "E-pac", "T-pac", "30.00", "CNY");
	assert_string_equal(ord_qs("SELECT status FROM refund_requests WHERE channel_trade_no = ?",
	                           "T-pac", buf, sizeof(buf)),
	                    "REQUESTED");
	r = ORD_WX_REFUND("E-pac", "50300-pac", "T-pac", "30.00", "SUCCESS");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_other_payment");
	assert_string_equal(ord_qs("SELECT status FROM refund_requests WHERE channel_trade_no = ?",
	                           "T-pac", buf, sizeof(buf)),
	                    "DONE");
	assert_string_equal(ord_status("E-pac", buf, sizeof(buf)), "CLOSED");
	assert_string_equal(ord_refunded("E-pac", buf, sizeof(buf)), "0.00");
	assert_int_equal(ord_events("E-pac", "order.refund"), 0);
	assert_int_equal(
	    ord_q1("SELECT COUNT(*) FROM refund_callback_log WHERE out_trade_no = ? AND "
	           "status = 2",
	           "E-pac"),
	    0);
	/* A refund of another amount settles the request too, with an alert. */
	assert_int_equal(fx_order(&db, ORD_M, "E-pac2", "30.00", "CNY", "CLOSED"), 0);
	ord_pay("alipay", "E-pac2", "T-pac2", "30.00", "CNY");
	r = ord_refund("alipay", "E-pac2", "B-pac2", "T-pac2", "20.00", 1, "CNY",
	               "trade_status_sync", "TRADE_SUCCESS");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_other_payment");
	assert_int_equal(ord_alerts("E-pac2", "refund_request_mismatch"), 1);
}

static void
refund_before_its_paid_twice_payment_is_recorded_and_nothing_requested(void **state)
{
	char buf[64];
	unsigned long long r, p;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-ptw", "50.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "E-ptw", "pi_ptw1", "50.00", "USD");
	/* The refund of the second payment is processed before that payment. */
	r = ORD_STRIPE_REFUND("E-ptw", "re_ptw2", "pi_ptw2", "50.00", "succeeded");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_before_payment");
	assert_string_equal(ord_qs("SELECT CONCAT(status, '/', reason) FROM refund_requests WHERE "
	                           "channel_trade_no = ?",
	                           "pi_ptw2", buf, sizeof(buf)),
	                    "DONE/refunded_early");
	p = ord_pay("stripe", "E-ptw", "pi_ptw2", "50.00", "USD");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_twice");
	assert_int_equal(
	    ord_q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?", "E-ptw"), 1);
	assert_int_equal(ord_q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ? AND "
	                        "status = 'REQUESTED'",
	                        "E-ptw"),
	                 0);
	assert_string_equal(ord_refunded("E-ptw", buf, sizeof(buf)), "0.00");
	assert_string_equal(ord_status("E-ptw", buf, sizeof(buf)), "PAID");
}

/* ---- item 4: payments of another amount on CLOSED and PAID orders ----------------------- */

static void
payment_of_another_amount_on_closed_or_paid_order_is_refunded_not_dead(void **state)
{
	char buf[64];
	unsigned long long p;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-cam", "30.00", "CNY", "CLOSED"), 0);
	p = ord_pay("wxpay", "E-cam", "T-cam", "29.99", "CNY");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_after_close");
	assert_string_equal(ord_qs("SELECT CONCAT(status, '/', CAST(amount AS CHAR)) FROM "
	                           "refund_requests WHERE channel_trade_no = ?",
	                           "T-cam", buf, sizeof(buf)),
	                    "REQUESTED/29.99");
	assert_int_equal(ord_alerts("E-cam", "paid_after_close"), 1);
	assert_int_equal(fx_order(&db, ORD_M, "E-pam", "30.00", "CNY", "PENDING"), 0);
	ord_pay("alipay", "E-pam", "T-pam1", "30.00", "CNY");
	p = ord_pay("alipay", "E-pam", "T-pam2", "25.00", "CNY");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_twice");
	assert_string_equal(ord_qs("SELECT CONCAT(status, '/', CAST(amount AS CHAR)) FROM "
	                           "refund_requests WHERE channel_trade_no = ?",
	                           "T-pam2", buf, sizeof(buf)),
	                    "REQUESTED/25.00");
}

/* ---- item 5: an order the merchant marked paid without a trade number ------------------- */

static void
paid_order_without_trade_is_confirmed_not_refunded(void **state)
{
	char buf[64];
	unsigned long long p;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-pwt", "40.00", "CNY", "PAID"), 0);
	p = ord_pay("wxpay", "E-pwt", "T-pwt", "40.00", "CNY");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_confirmed");
	assert_string_equal(ord_qs("SELECT channel_trade_no FROM orders WHERE out_trade_no = ?",
	                           "E-pwt", buf, sizeof(buf)),
	                    "T-pwt");
	assert_int_equal(
	    ord_q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?", "E-pwt"), 0);
	assert_int_equal(ord_alerts("E-pwt", "paid_twice"), 0);
	/* A copy is now a duplicate of the recorded trade. */
	assert_int_equal(fx_order(&db, ORD_M, "E-pwt2", "40.00", "CNY", "PAID"), 0);
	p = ord_pay("wxpay", "E-pwt2", "T-pwt2", "39.00", "CNY");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_confirmed");
	assert_int_equal(ord_alerts("E-pwt2", "amount_mismatch"), 1);
	assert_int_equal(
	    ord_q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?", "E-pwt2"), 0);
}

/* ---- item 8: one event per refund ------------------------------------------------------- */

static void
partial_refunds_emit_one_event_each_with_the_refund_number(void **state)
{
	char buf[64];

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "E-prt", "88.88", "CNY", "PENDING"), 0);
	ord_pay("wxpay", "E-prt", "T-prt", "88.88", "CNY");
	ORD_WX_REFUND("E-prt", "50300-prt1", "T-prt", "30.01", "SUCCESS");
	assert_int_equal(ord_event_with("default|E-prt|order.refund|50300-prt1", "30.01"), 1);
	ORD_WX_REFUND("E-prt", "50300-prt2", "T-prt", "58.87", "SUCCESS");
	assert_int_equal(ord_event_with("default|E-prt|order.refund|50300-prt2", "58.87"), 1);
	assert_int_equal(ord_event_with("default|E-prt|order.refunded", "88.88"), 1);
	assert_string_equal(ord_status("E-prt", buf, sizeof(buf)), "REFUNDED");
	/* Every event reaches the topic (the relay marks them sent). */
	{
		struct db_in in[1] = {DBI_STR("E-prt")};

		assert_int_equal(harness_wait_i64(&db,
		                                  "SELECT COUNT(*) FROM order_events WHERE "
		                                  "out_trade_no = ? AND sent_at IS NOT NULL",
		                                  in, 1, 5, ORD_WAIT_MS),
		                 0);
	}
}

/* ---- the invariant over every order above ---------------------------------------------- */

static void
no_order_refunded_amount_differs_from_its_ledger(void **state)
{
	(void)state;
	assert_int_equal(ord_ledger_mismatches("E-"), 0);
	assert_int_equal(ord_refunds_pending("E-"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wx_abnormal_refund_changes_nothing_and_a_later_success_applies_once),
	    cmocka_unit_test(wx_closed_refund_changes_nothing),
	    cmocka_unit_test(stripe_refund_told_both_ways_counts_once_in_either_order),
	    cmocka_unit_test(stripe_refund_failing_after_success_is_reversed),
	    cmocka_unit_test(refund_of_a_paid_after_close_payment_settles_its_request),
	    cmocka_unit_test(
	        refund_before_its_paid_twice_payment_is_recorded_and_nothing_requested),
	    cmocka_unit_test(
	        payment_of_another_amount_on_closed_or_paid_order_is_refunded_not_dead),
	    cmocka_unit_test(paid_order_without_trade_is_confirmed_not_refunded),
	    cmocka_unit_test(partial_refunds_emit_one_event_each_with_the_refund_number),
	    cmocka_unit_test(no_order_refunded_amount_differs_from_its_ledger),
	};

	return ord_run("edges", &cf, &db, tests, sizeof(tests) / sizeof(tests[0]));
}
