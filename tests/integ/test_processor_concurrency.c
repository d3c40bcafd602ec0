/*
 * test_processor_concurrency - one callback id delivered 50 times at once to two real
 * bin/paycb-processor processes (two consumer threads each, one consumer group): the 50
 * copies are spread over the 12 partitions of the main topic, so four consumers race for
 * the same row. Exactly one delivery applies it (the row lock serializes them, the status
 * re-check turns the rest into skips): one order paid, exactly two order_events rows, the
 * row done; the same for a refund of an order the case pays first (refunded_amount added
 * once). Both processors exit 0 on
 * SIGTERM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cblog.h"
#include "fixtures.h"
#include "harness.h"

#define WAIT_MS 60000
#define COPIES  50
#define M       "default"

static struct conf cf;
static struct db db;
static struct fx_pub *pub;
static int pid[2] = {-1, -1};
static char plog[2][1024];

struct handled {
	char needle_done[64], needle_skip[64];
	long long want;
};

static long long
handled_count(struct handled *h, int which)
{
	return harness_file_count(plog[which], h->needle_done) +
	       harness_file_count(plog[which], h->needle_skip);
}

static int
all_handled(void *arg)
{
	struct handled *h = arg;

	return handled_count(h, 0) + handled_count(h, 1) >= h->want;
}

static void
deliver_copies(int refund, unsigned long long id, const char *channel, const char *order)
{
	for (int i = 0; i < COPIES; i++)
		assert_int_equal(fx_publish(pub, NULL, refund, id, M, channel, order, 1,
		                            (int32_t)(i % cf.kafka.partitions), NULL),
		                 0);
	assert_int_equal(fx_pub_flush(pub, 30000), 0);
}

static void
wait_handled(int refund, unsigned long long id, long long *per)
{
	struct handled h;
	char cbid[CBLOG_REF_MAX];

	cblog_ref(cbid, sizeof(cbid), refund ? CBLOG_REFUND : CBLOG_PAY, id);
	snprintf(h.needle_done, sizeof(h.needle_done), "%s: level=info event=processed", cbid);
	snprintf(h.needle_skip, sizeof(h.needle_skip), "%s: level=info event=skipped", cbid);
	h.want = COPIES;
	assert_int_equal(harness_wait_until(all_handled, &h, WAIT_MS), 0);
	per[0] = handled_count(&h, 0);
	per[1] = handled_count(&h, 1);
	/* Exactly one delivery applied it, across both processes. */
	assert_int_equal(harness_file_count(plog[0], h.needle_done) +
	                     harness_file_count(plog[1], h.needle_done),
	                 1);
}

static void
same_payment_fifty_times_applies_once(void **state)
{
	struct db_in in[1] = {DBI_STR("O-race")};
	unsigned long long id;
	long long per[2], t0;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-race", "42.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-race", "O-race", "42.00", "CNY");
	assert_true(id > 0);
	t0 = harness_now_ms();
	deliver_copies(0, id, "wxpay", "O-race");
	wait_handled(0, id, per);
	printf("# %d deliveries handled in %lld ms: %lld by processor 1, %lld by processor 2\n",
	       COPIES, harness_now_ms() - t0, per[0], per[1]);
	assert_true(per[0] > 0 && per[1] > 0); /* both processes took part */
	assert_int_equal(harness_query_i64(&db,
	                                   "SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND "
	                                   "status = 'PAID' AND channel_trade_no = 'T-race'",
	                                   in, 1),
	                 1);
	assert_int_equal(
	    harness_query_i64(&db, "SELECT COUNT(*) FROM order_events WHERE out_trade_no = ?", in,
	                      1),
	    2);
	{
		struct db_in i2[1] = {DBI_I64(id)};
		assert_int_equal(
		    harness_query_i64(&db,
		                      "SELECT COUNT(*) FROM pay_callback_log WHERE id = "
		                      "? AND status = 1 AND outcome = 'paid' AND "
		                      "retry_count = 0",
		                      i2, 1),
		    1);
	}
	assert_int_equal(harness_query_i64(&db,
	                                   "SELECT COUNT(*) FROM refund_requests WHERE "
	                                   "out_trade_no = ?",
	                                   in, 1),
	                 0);
	assert_int_equal(
	    harness_query_i64(&db, "SELECT COUNT(*) FROM alerts WHERE out_trade_no = ?", in, 1), 0);
}

static void
same_refund_fifty_times_applies_once(void **state)
{
	struct db_in in[1] = {DBI_STR("O-race-r")};
	unsigned long long id;
	long long per[2];

	(void)state;
	/* The case pays its own order first, once, rather than refund the first case's. */
	assert_int_equal(fx_order(&db, M, "O-race-r", "42.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-race-r", "O-race-r", "42.00", "CNY");
	assert_true(id > 0);
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-race-r", 1, RD_KAFKA_PARTITION_UA, NULL),
	    0);
	assert_int_equal(fx_wait_row(&db, 0, id, 1, WAIT_MS), 0);
	id = fx_refund_row(&db, &cf, M, "alipay", "R-race", "", "O-race-r", "2.50", 0, "CNY");
	assert_true(id > 0);
	deliver_copies(1, id, "alipay", "O-race-r");
	wait_handled(1, id, per);
	printf("# refund: %lld by processor 1, %lld by processor 2\n", per[0], per[1]);
	assert_int_equal(harness_query_i64(&db,
	                                   "SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND "
	                                   "status = 'REFUNDING' AND refunded_amount = 2.50",
	                                   in, 1),
	                 1);
	assert_int_equal(harness_query_i64(&db,
	                                   "SELECT COUNT(*) FROM order_refunds WHERE "
	                                   "out_trade_no = ?",
	                                   in, 1),
	                 1);
}

static int
group_setup(void **state)
{
	struct fx_logwait w1 = {plog[0], "event=assigned", 1}, w2 = {plog[1], "event=assigned", 1};

	(void)state;
	if ((pub = fx_pub_new(&cf)) == NULL)
		return -1;
	pid[0] = fx_processor_start(&cf, "processor1", plog[0], sizeof(plog[0]));
	pid[1] = fx_processor_start(&cf, "processor2", plog[1], sizeof(plog[1]));
	if (pid[0] <= 0 || pid[1] <= 0)
		return -1;
	/* Both own partitions (an eager rebalance assigns every member at once). */
	if (harness_wait_until(fx_log_has, &w2, WAIT_MS) != 0)
		return -1;
	return harness_wait_until(fx_log_has, &w1, WAIT_MS);
}

static int
group_teardown(void **state)
{
	int rc0, rc1;

	(void)state;
	fx_pub_free(pub);
	rc0 = harness_stop(pid[0], SIGTERM, 30000);
	rc1 = harness_stop(pid[1], SIGTERM, 30000);
	printf("# processors exited with %d and %d (logs %s, %s)\n", rc0, rc1, plog[0], plog[1]);
	return rc0 == 0 && rc1 == 0 ? 0 : -1;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(same_payment_fifty_times_applies_once),
	    cmocka_unit_test(same_refund_fifty_times_applies_once),
	};
	int rc;

	if (fx_processor_conf(&cf, "pconc", NULL, 2) != 0)
		return 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
