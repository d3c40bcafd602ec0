/*
 * test_processor_refunds - the refund edges of the order state machine on each channel,
 * against the processor driven in-process (proc_apply), the real MariaDB and the real
 * Kafka broker.
 *
 * test_processor_edges.c proves each edge once; this file proves it on the other channels
 * where the channel's protocol differs (Alipay tells refunds by the trade's refunded total,
 * Stripe by two families of events), and the sequences that only a reversal makes possible:
 * an order refunded in full twice, a reversal that leaves the order partly refunded, an
 * older status delivered after the refund succeeded, and order and refund numbers that
 * contain the event id's separator.
 */
#include <setjmp.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "inproc.h"
#include "orders.h"
#include "processor.h"

static struct conf cf;
static struct db db;

/* ---- reversals -------------------------------------------------------------------------- */

static void
full_refund_reversed_and_made_again_is_a_second_order_refunded(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-rra", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "C-rra", "pi_rra", "30.00", "USD");
	ORD_STRIPE_REFUND("C-rra", "re_rra1", "pi_rra", "30.00", "succeeded");
	assert_string_equal(ord_status("C-rra", buf, sizeof(buf)), "REFUNDED");
	assert_int_equal(ord_event_with("default|C-rra|order.refunded", "30.00"), 1);
	r = ORD_STRIPE_REFUND("C-rra", "re_rra1", "pi_rra", "30.00", "failed");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_reversed");
	assert_string_equal(ord_status("C-rra", buf, sizeof(buf)), "PAID");
	/* The merchant refunds again, in full: downstream must hear it, as a new event. */
	r = ORD_STRIPE_REFUND("C-rra", "re_rra2", "pi_rra", "30.00", "succeeded");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refunded");
	assert_string_equal(ord_status("C-rra", buf, sizeof(buf)), "REFUNDED");
	assert_string_equal(ord_refunded("C-rra", buf, sizeof(buf)), "30.00");
	assert_int_equal(ord_events("C-rra", "order.refunded"), 2);
	assert_int_equal(ord_event_with("default|C-rra|order.refunded|2", "30.00"), 1);
	assert_int_equal(ord_event_with("default|C-rra|order.refund|re_rra2", "30.00"), 1);
	/* Its charge.refunded copy moves nothing and writes nothing. */
	ORD_STRIPE_CHARGE_REFUNDED("C-rra", "ch_rra:3000b", "pi_rra", "30.00");
	assert_int_equal(ord_events("C-rra", "order.refunded"), 2);
	assert_string_equal(ord_refunded("C-rra", buf, sizeof(buf)), "30.00");
}

static void
reversal_of_one_of_two_refunds_leaves_the_order_refunding(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-rrp", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "C-rrp", "pi_rrp", "30.00", "USD");
	ORD_STRIPE_REFUND("C-rrp", "re_rrp1", "pi_rrp", "10.00", "succeeded");
	assert_string_equal(ord_status("C-rrp", buf, sizeof(buf)), "REFUNDING");
	ORD_STRIPE_REFUND("C-rrp", "re_rrp2", "pi_rrp", "20.00", "succeeded");
	assert_string_equal(ord_status("C-rrp", buf, sizeof(buf)), "REFUNDED");
	r = ORD_STRIPE_REFUND("C-rrp", "re_rrp1", "pi_rrp", "10.00", "canceled");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_reversed");
	assert_string_equal(ord_status("C-rrp", buf, sizeof(buf)), "REFUNDING");
	assert_string_equal(ord_refunded("C-rrp", buf, sizeof(buf)), "20.00");
	assert_int_equal(ord_event_with("default|C-rrp|order.refund_reversed|re_rrp1", "10.00"), 1);
	assert_int_equal(ord_alerts("C-rrp", "refund_reversed"), 1);
	/* It was refunded in full once; that event stands, and no second one is written. */
	assert_int_equal(ord_events("C-rrp", "order.refunded"), 1);
}

static void
wx_status_that_moved_no_money_after_success_is_late_and_alerts_nothing(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-lat", "12.00", "CNY", "PENDING"), 0);
	ord_pay("wxpay", "C-lat", "T-lat", "12.00", "CNY");
	ORD_WX_REFUND("C-lat", "50300-lat", "T-lat", "12.00", "SUCCESS");
	assert_string_equal(ord_status("C-lat", buf, sizeof(buf)), "REFUNDED");
	/* The ABNORMAL that preceded the SUCCESS arrives after it (at-least-once delivery). */
	r = ORD_WX_REFUND("C-lat", "50300-lat", "T-lat", "12.00", "ABNORMAL");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "duplicate");
	r = ORD_WX_REFUND("C-lat", "50300-lat", "T-lat", "12.00", "CLOSED");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "duplicate");
	assert_int_equal(ord_alerts("C-lat", "refund_abnormal"), 0);
	assert_int_equal(ord_alerts("C-lat", "refund_closed"), 0);
	assert_string_equal(ord_status("C-lat", buf, sizeof(buf)), "REFUNDED");
	assert_string_equal(ord_refunded("C-lat", buf, sizeof(buf)), "12.00");
	/* Another refund's ABNORMAL on the same order still alerts. */
	r = ORD_WX_REFUND("C-lat", "50300-lat2", "T-lat", "1.00", "ABNORMAL");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_abnormal");
	assert_int_equal(ord_alerts("C-lat", "refund_abnormal"), 1);
}

static void
separator_in_order_and_refund_numbers_cannot_merge_two_events(void **state)
{
	char buf[64];

	(void)state;
	/* WeChat Pay allows '|' in out_trade_no and out_refund_no. Unescaped, the first
	 * order's shipment event and the second order's refund event would both be
	 * "default|C-sep|order.refund|R1|order.paid.shipment", and the second would be lost as
	 * a copy of the first. */
	assert_int_equal(fx_order(&db, ORD_M, "C-sep|order.refund|R1", "8.00", "CNY", "PENDING"),
	                 0);
	assert_int_equal(fx_order(&db, ORD_M, "C-sep", "8.00", "CNY", "PENDING"), 0);
	ord_pay("wxpay", "C-sep", "T-sep", "8.00", "CNY");
	ORD_WX_REFUND("C-sep", "R1|order.paid.shipment", "T-sep", "3.00", "SUCCESS");
	ord_pay("wxpay", "C-sep|order.refund|R1", "T-sep2", "8.00", "CNY");
	assert_int_equal(ord_events("C-sep", "order.refund"), 1);
	assert_int_equal(ord_events("C-sep|order.refund|R1", "order.paid.shipment"), 1);
	assert_int_equal(
	    ord_event_with("default|C-sep|order.refund|R1%7Corder.paid.shipment", "3.00"), 1);
	assert_int_equal(
	    ord_event_with("default|C-sep%7Corder.refund%7CR1|order.paid.shipment", "8.00"), 1);
	assert_string_equal(ord_status("C-sep|order.refund|R1", buf, sizeof(buf)), "PAID");
}

/* ---- Alipay: the trade's refunded total -------------------------------------------------- */

static void
alipay_cumulative_refunds_count_each_rise_once(void **state)
{
	char buf[64];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-acu", "30.00", "CNY", "PENDING"), 0);
	ord_pay("alipay", "C-acu", "T-acu", "30.00", "CNY");
	r = ORD_ALI_REFUND("C-acu", "B-acu1", "T-acu", "10.00");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_partial");
	assert_int_equal(ord_event_with("default|C-acu|order.refund|B-acu1", "10.00"), 1);
	r = ORD_ALI_REFUND("C-acu", "B-acu2", "T-acu", "25.00");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_partial");
	/* The event carries the rise, not the total. */
	assert_int_equal(ord_event_with("default|C-acu|order.refund|B-acu2", "15.00"), 1);
	assert_string_equal(ord_status("C-acu", buf, sizeof(buf)), "REFUNDING");
	/* An older total delivered late (another request number, 10.00) adds nothing. */
	r = ORD_ALI_REFUND("C-acu", "B-acu1-late", "T-acu", "10.00");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_covered");
	assert_string_equal(ord_refunded("C-acu", buf, sizeof(buf)), "25.00");
	r = ORD_ALI_REFUND("C-acu", "B-acu3", "T-acu", "30.00");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refunded");
	assert_string_equal(ord_status("C-acu", buf, sizeof(buf)), "REFUNDED");
	assert_int_equal(ord_events("C-acu", "order.refund"), 3);
	assert_int_equal(ord_event_with("default|C-acu|order.refunded", "30.00"), 1);
	/* A total above the amount paid is never applied: kept dead, with its alert. */
	r = ord_refund_to(2, "alipay", "C-acu", "B-acu4", "T-acu", "30.01", 1, "CNY",
	                  "trade_status_sync", "TRADE_SUCCESS");
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "amount_mismatch");
	assert_int_equal(ord_alerts("C-acu", "amount_mismatch"), 1);
	assert_string_equal(ord_refunded("C-acu", buf, sizeof(buf)), "30.00");
}

/* ---- item 3 on WeChat Pay and Alipay: the refund before its paid-twice payment ----------- */

static void
refund_before_its_paid_twice_payment_on_wxpay_and_alipay(void **state)
{
	static const struct {
		const char *channel, *order, *trade1, *trade2, *refund_no, *cur;
		int cumulative;
		const char *type, *status;
	} c[] = {
	    {"wxpay", "C-ptw-wx", "T-ptwx1", "T-ptwx2", "50300-ptwx", "CNY", 0, "REFUND.SUCCESS",
	     "SUCCESS"},
	    {"alipay", "C-ptw-ali", "T-ptal1", "T-ptal2", "B-ptal", "CNY", 1, "trade_status_sync",
	     "TRADE_SUCCESS"},
	};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		unsigned long long r, p;

		assert_int_equal(fx_order(&db, ORD_M, c[i].order, "20.00", c[i].cur, "PENDING"), 0);
		ord_pay(c[i].channel, c[i].order, c[i].trade1, "20.00", c[i].cur);
		r = ord_refund(c[i].channel, c[i].order, c[i].refund_no, c[i].trade2, "20.00",
		               c[i].cumulative, c[i].cur, c[i].type, c[i].status);
		assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), "refund_before_payment");
		p = ord_pay(c[i].channel, c[i].order, c[i].trade2, "20.00", c[i].cur);
		assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_twice");
		assert_string_equal(
		    ord_qs("SELECT CONCAT(status, '/', reason) FROM refund_requests "
		           "WHERE channel_trade_no = ?",
		           c[i].trade2, buf, sizeof(buf)),
		    "DONE/refunded_early");
		assert_string_equal(ord_status(c[i].order, buf, sizeof(buf)), "PAID");
		assert_string_equal(ord_refunded(c[i].order, buf, sizeof(buf)), "0.00");
	}
}

/* ---- items 4 and 5 on the other channels ------------------------------------------------- */

static void
stripe_payment_of_another_amount_on_closed_or_paid_order_is_refunded(void **state)
{
	char buf[64];
	unsigned long long p;

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-cam", "30.00", "USD", "CLOSED"), 0);
	p = ord_pay("stripe", "C-cam", "pi_cam", "31.00", "USD");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_after_close");
	assert_string_equal(ord_qs("SELECT CONCAT(status, '/', CAST(amount AS CHAR)) FROM "
	                           "refund_requests WHERE channel_trade_no = ?",
	                           "pi_cam", buf, sizeof(buf)),
	                    "REQUESTED/31.00");
	assert_int_equal(fx_order(&db, ORD_M, "C-pam", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "C-pam", "pi_pam1", "30.00", "USD");
	p = ord_pay("stripe", "C-pam", "pi_pam2", "12.50", "USD");
	assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_twice");
	assert_string_equal(ord_qs("SELECT CONCAT(status, '/', CAST(amount AS CHAR)) FROM "
	                           "refund_requests WHERE channel_trade_no = ?",
	                           "pi_pam2", buf, sizeof(buf)),
	                    "REQUESTED/12.50");
	assert_string_equal(ord_status("C-pam", buf, sizeof(buf)), "PAID");
}

static void
alipay_and_stripe_paid_order_without_trade_is_confirmed_not_refunded(void **state)
{
	static const struct {
		const char *channel, *order, *trade, *cur;
	} c[] = {{"alipay", "C-pwt-ali", "T-pwtal", "CNY"},
	         {"stripe", "C-pwt-st", "pi_pwt", "USD"}};
	char buf[64];

	(void)state;
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++) {
		unsigned long long p;

		assert_int_equal(fx_order(&db, ORD_M, c[i].order, "40.00", c[i].cur, "PAID"), 0);
		p = ord_pay(c[i].channel, c[i].order, c[i].trade, "40.00", c[i].cur);
		assert_string_equal(ord_outcome(0, p, buf, sizeof(buf)), "paid_confirmed");
		assert_string_equal(ord_qs("SELECT channel_trade_no FROM orders WHERE out_trade_no "
		                           "= ?",
		                           c[i].order, buf, sizeof(buf)),
		                    c[i].trade);
		assert_int_equal(
		    ord_q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?",
		           c[i].order),
		    0);
		assert_int_equal(ord_alerts(c[i].order, "paid_twice"), 0);
	}
}

/* ---- round trips ------------------------------------------------------------------------ */

/* rt_refund - the worker's statements for one Stripe refund of order C-rt, which must end in
 * outcome; calib is what two reads of the count in a row give. */
static long long
rt_refund(long long calib, const char *no, const char *amount, int cumulative, const char *status,
          const char *outcome)
{
	char buf[64];
	long long before = ord_worker_statements(), after;
	unsigned long long r;

	assert_true(before >= 0);
	r = ord_refund("stripe", "C-rt", no, "pi_rt", amount, cumulative, "USD",
	               cumulative ? "charge.refunded" : "refund.updated", status);
	after = ord_worker_statements();
	assert_true(after >= 0);
	assert_string_equal(ord_outcome(1, r, buf, sizeof(buf)), outcome);
	print_message("# round trips: %s %lld\n", outcome, after - before - calib);
	return after - before - calib;
}

/*
 * Each refund outcome that moves money takes the payment's treatment (docs/performance.md,
 * "Round trips"): one read measures the ledger, the refund number's entry and the order's
 * order.refunded count; the order's and the row's conditional UPDATEs are one statement
 * judged by 2 rows; the events go in one INSERT. So: lock, measure, ledger write, UPDATE,
 * events, COMMIT. Until issue 21 a partial refund took 8, the last refund of an order 10.
 */
static void
refund_round_trips_are_the_payments_treatment(void **state)
{
	long long a, b, calib, step;
	char buf[64];

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-rt", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "C-rt", "pi_rt", "30.00", "USD");
	a = ord_worker_statements();
	b = ord_worker_statements();
	assert_true(a >= 0 && b > a);
	calib = b - a;
	/* Two events share an INSERT only where the server gives it consecutive ids. */
	step = harness_query_i64(&db, "SELECT @@innodb_autoinc_lock_mode <= 1", NULL, 0);
	assert_int_equal(rt_refund(calib, "re_rt1", "10.00", 0, "succeeded", "refund_partial"), 6);
	/* The same money told by the cumulative family: the ledger row, the row done. */
	assert_int_equal(rt_refund(calib, "ch_rt:1000", "10.00", 1, "succeeded", "refund_covered"),
	                 5);
	assert_int_equal(rt_refund(calib, "re_rt2", "20.00", 0, "succeeded", "refunded"),
	                 step == 1 ? 6 : 7);
	assert_int_equal(ord_event_with("default|C-rt|order.refund|re_rt2", "20.00"), 1);
	assert_int_equal(ord_event_with("default|C-rt|order.refunded", "30.00"), 1);
	/* A reversal adds its alert's INSERT. */
	assert_int_equal(rt_refund(calib, "re_rt2", "20.00", 0, "failed", "refund_reversed"), 7);
	assert_string_equal(ord_status("C-rt", buf, sizeof(buf)), "REFUNDING");
	assert_string_equal(ord_refunded("C-rt", buf, sizeof(buf)), "10.00");
	assert_int_equal(ord_alerts("C-rt", "refund_reversed"), 1);
}

/* ---- what the ledger's plain reads see ----------------------------------------------------- */

struct rv_apply {
	unsigned long long id;
	const char *outcome;
	int rc;
};

static void *
rv_apply_main(void *arg)
{
	struct rv_apply *a = arg;

	a->rc = inproc_apply(ord_processor(), 1, a->id, ORD_M, "stripe", "C-rv", 1, &a->outcome);
	return NULL;
}

/*
 * The ledger is read with plain reads (processor_ledger.c): they must see what the order
 * lock's holder committed while this refund's opening read waited for that lock, or the
 * refund would be measured against a ledger without it. Here the holder commits a refund of
 * 20.00 of the order's 30.00 while the processor's refund of another 20.00 waits: measured
 * against the committed ledger it would bring the total to 40.00, above the amount paid, and
 * is dead with its alert; measured against the ledger before the holder's refund it would
 * look covered by the order's refunded amount.
 */
static void
ledger_read_sees_what_the_order_lock_holder_committed(void **state)
{
	struct db hold;
	struct rv_apply a = {0, NULL, -1};
	struct db_in in[1] = {DBI_STR("C-rv")};
	pthread_t t;
	char buf[64];

	(void)state;
	assert_int_equal(fx_order(&db, ORD_M, "C-rv", "30.00", "USD", "PENDING"), 0);
	ord_pay("stripe", "C-rv", "pi_rv", "30.00", "USD");
	a.id = fx_refund_row_status(&db, &cf, ORD_M, "stripe", "re_rv2", "pi_rv", "C-rv", "20.00",
	                            0, "USD", "refund.updated", "succeeded");
	assert_true(a.id > 0);
	harness_db(&cf, &hold);
	assert_int_equal(db_exec(&hold, "START TRANSACTION", NULL, 0, NULL, NULL), DB_OK);
	assert_int_equal(harness_query_i64(&hold,
	                                   "SELECT COUNT(*) FROM orders WHERE out_trade_no = ? "
	                                   "FOR UPDATE",
	                                   in, 1),
	                 1);
	assert_int_equal(pthread_create(&t, NULL, rv_apply_main, &a), 0);
	/*
	 * The refund's opening read has locked its row and waits for the order: the server reads
	 * and locks const tables in the state "Statistics", seen in PROCESSLIST without the
	 * PROCESS privilege the lock-wait tables need (the session's user is the test's).
	 */
	assert_int_equal(harness_wait_i64(&db,
	                                  "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
	                                  "WHERE STATE = 'Statistics' AND INFO LIKE "
	                                  "'%FROM refund_callback_log c LEFT JOIN orders o%'",
	                                  NULL, 0, 1, ORD_WAIT_MS),
	                 0);
	assert_int_equal(db_exec(&hold,
	                         "INSERT INTO order_refunds (merchant_id, channel, refund_no, "
	                         "out_trade_no, amount, pay_trade_no, kind, state) VALUES "
	                         "('default', 'stripe', 're_rv1', 'C-rv', 20.00, 'pi_rv', "
	                         "'single', 'APPLIED')",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_int_equal(db_exec(&hold,
	                         "UPDATE orders SET refunded_amount = 20.00, status = 'REFUNDING' "
	                         "WHERE out_trade_no = ?",
	                         in, 1, NULL, NULL),
	                 DB_OK);
	assert_int_equal(db_commit(&hold), DB_OK);
	assert_int_equal(pthread_join(t, NULL), 0);
	db_close(&hold);
	assert_int_equal(a.rc, PROC_DONE);
	assert_non_null(a.outcome);
	assert_string_equal(a.outcome, "dead");
	assert_string_equal(ord_outcome(1, a.id, buf, sizeof(buf)), "amount_mismatch");
	assert_string_equal(ord_refunded("C-rv", buf, sizeof(buf)), "20.00");
	assert_int_equal(ord_alerts("C-rv", "amount_mismatch"), 1);
}

/* ---- the invariant over every order above ---------------------------------------------- */

static void
no_order_refunded_amount_differs_from_its_ledger(void **state)
{
	(void)state;
	assert_int_equal(ord_ledger_mismatches("C-"), 0);
	assert_int_equal(ord_refunds_pending("C-"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(full_refund_reversed_and_made_again_is_a_second_order_refunded),
	    cmocka_unit_test(reversal_of_one_of_two_refunds_leaves_the_order_refunding),
	    cmocka_unit_test(
	        wx_status_that_moved_no_money_after_success_is_late_and_alerts_nothing),
	    cmocka_unit_test(separator_in_order_and_refund_numbers_cannot_merge_two_events),
	    cmocka_unit_test(alipay_cumulative_refunds_count_each_rise_once),
	    cmocka_unit_test(refund_before_its_paid_twice_payment_on_wxpay_and_alipay),
	    cmocka_unit_test(stripe_payment_of_another_amount_on_closed_or_paid_order_is_refunded),
	    cmocka_unit_test(alipay_and_stripe_paid_order_without_trade_is_confirmed_not_refunded),
	    cmocka_unit_test(refund_round_trips_are_the_payments_treatment),
	    cmocka_unit_test(ledger_read_sees_what_the_order_lock_holder_committed),
	    cmocka_unit_test(no_order_refunded_amount_differs_from_its_ledger),
	};

	return ord_run("refunds", &cf, &db, tests, sizeof(tests) / sizeof(tests[0]));
}
