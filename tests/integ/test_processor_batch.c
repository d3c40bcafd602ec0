/*
 * test_processor_batch - a backlog of payments on one partition, waiting before a real
 * bin/paycb-processor starts, is applied in batches (one transaction for a run of the
 * partition's messages): every order is paid once with its two events, and the processor
 * logs batches of more than one message (`event=batch_committed`, debug). A second backlog
 * holds one payment whose order does not exist in its middle: its batch is rolled back and
 * handled one message at a time (`event=batch_fallback`), the others are all paid once, and
 * that one payment's failure is recorded (retry_count 1) as it is without batches, while
 * the messages before and after it in its batch form batches again. A third backlog whose
 * first payment has no order shows the messages after a failing one applied as a batch (they
 * were handled one at a time until 2026-12-06), and a backlog of copies of done rows shows
 * that the rest of a run is tried as a batch once more, not once per message.
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
#define N       40
#define M       "default"

static struct conf cf;
static struct db db;
static struct fx_pub *pub;
static int pid = -1;
static char plog[1024];

/*
 * backlog - N payments of orders <prefix>-i on partition 0; the order of payment `missing`
 * is not created (-1: all are). The ids go to ids.
 */
static void
backlog(const char *prefix, int missing, unsigned long long *ids)
{
	char order[64], trade[64];

	for (int i = 0; i < N; i++) {
		snprintf(order, sizeof(order), "%s-%d", prefix, i);
		snprintf(trade, sizeof(trade), "T%s-%d", prefix, i);
		if (i != missing)
			assert_int_equal(fx_order(&db, M, order, "10.00", "CNY", "PENDING"), 0);
		ids[i] = fx_pay_row(&db, &cf, M, "wxpay", trade, order, "10.00", "CNY");
		assert_true(ids[i] > 0);
		assert_int_equal(fx_publish(pub, NULL, 0, ids[i], M, "wxpay", order, 1, 0, NULL),
		                 0);
	}
	assert_int_equal(fx_pub_flush(pub, 30000), 0);
}

/* paid_once - how many of the backlog's orders are PAID with exactly two events. */
static long long
paid_once(const char *prefix)
{
	char like[64];

	snprintf(like, sizeof(like), "%s-%%", prefix);
	struct db_in in[2] = {DBI_STR(like), DBI_STR(like)};
	return harness_query_i64(
	    &db,
	    "SELECT COUNT(*) FROM orders o WHERE o.out_trade_no LIKE ? AND "
	    "o.status = 'PAID' AND (SELECT COUNT(*) FROM order_events e WHERE "
	    "e.merchant_id = o.merchant_id AND e.out_trade_no = o.out_trade_no) = 2 "
	    "AND o.out_trade_no IN (SELECT out_trade_no FROM pay_callback_log WHERE "
	    "out_trade_no LIKE ? AND status = 1 AND outcome = 'paid')",
	    in, 2);
}

/*
 * start_processor - a processor of the case's own, logging to a file of its own (name): a
 * case counts only the lines of the processor it started.
 */
static void
start_processor(const char *name)
{
	pid = fx_processor_start(&cf, name, plog, sizeof(plog));
	assert_true(pid > 0);
	assert_int_equal(fx_wait_log(plog, "event=assigned", 1, WAIT_MS), 0);
}

/* stop_processor - the case's processor drains and must exit 0. */
static void
stop_processor(void)
{
	int rc = harness_stop(pid, SIGTERM, 30000);

	printf("# processor exited with %d (log %s)\n", rc, plog);
	pid = -1;
	assert_int_equal(rc, 0);
}

/* fallback - the n and at of the processor's one event=batch_fallback line. */
static void
fallback(int *n, int *at)
{
	char line[4096];
	const char *p = NULL;
	FILE *fp = fopen(plog, "r");

	assert_non_null(fp);
	while (p == NULL && fgets(line, sizeof(line), fp))
		p = strstr(line, "event=batch_fallback ");
	fclose(fp);
	assert_non_null(p);
	assert_int_equal(sscanf(p, "event=batch_fallback messages=%d at=%d", n, at), 2);
	printf("# the batch of %d fell back at %d\n", *n, *at);
}

/*
 * batch_from - asserts that the n messages from row id were committed as one batch (when
 * n is 2 or more: one message alone is no batch).
 */
static void
batch_from(unsigned long long id, int n)
{
	char needle[128];

	if (n < 2)
		return;
	snprintf(needle, sizeof(needle), "cb%llu: level=debug event=batch_committed messages=%d ",
	         id, n);
	assert_int_equal(fx_wait_log(plog, needle, 1, 1000), 0);
}

static void
backlog_is_applied_in_batches(void **state)
{
	unsigned long long ids[N];

	(void)state;
	backlog("OB", -1, ids);
	start_processor("processor-backlog");
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_wait_row(&db, 0, ids[i], 1, WAIT_MS), 0);
	assert_int_equal(paid_once("OB"), N);
	/* The backlog went in batches, and none of them fell back. */
	assert_int_equal(fx_wait_log(plog, "event=batch_committed", 1, 1000), 0);
	assert_int_equal(harness_file_count(plog, "event=batch_fallback"), 0);
	printf("# %lld batches for %d payments\n",
	       harness_file_count(plog, "event=batch_committed"), N);
	assert_true(harness_file_count(plog, "event=batch_committed") < N);
	stop_processor();
}

static void
a_failing_payment_rolls_its_batch_back_and_goes_alone(void **state)
{
	unsigned long long ids[N];

	(void)state;
	/* The backlog is published before the processor starts, so it is read as a backlog. */
	backlog("OF", N / 2, ids);
	start_processor("processor-fallback");
	for (int i = 0; i < N; i++)
		if (i != N / 2)
			assert_int_equal(fx_wait_row(&db, 0, ids[i], 1, WAIT_MS), 0);
	/* No order: a retryable failure, recorded on the row, which stays pending. */
	assert_int_equal(fx_wait_retry(&db, 0, ids[N / 2], 1, WAIT_MS), 0);
	assert_int_equal(paid_once("OF"), N - 1);
	assert_int_equal(fx_wait_log(plog, "event=batch_fallback", 1, 1000), 0);
	{
		struct db_in in[1] = {DBI_I64(ids[N / 2])};
		assert_int_equal(
		    harness_query_i64(&db,
		                      "SELECT COUNT(*) FROM pay_callback_log WHERE id = "
		                      "? AND status = 0 AND retry_count = 1",
		                      in, 1),
		    1);
	}
	/* The messages before and after the failing one in its batch went in batches again. */
	{
		int n, at;

		fallback(&n, &at);
		batch_from(ids[N / 2 - at], at);
		batch_from(ids[N / 2 + 1], n - at - 1);
	}
	stop_processor();
}

static void
the_messages_after_a_failing_one_form_a_batch_again(void **state)
{
	unsigned long long ids[N];
	int n, at;

	(void)state;
	/* The first payment has no order: the backlog's first batch falls back at its first. */
	backlog("OA", 0, ids);
	start_processor("processor-after");
	for (int i = 1; i < N; i++)
		assert_int_equal(fx_wait_row(&db, 0, ids[i], 1, WAIT_MS), 0);
	assert_int_equal(fx_wait_retry(&db, 0, ids[0], 1, WAIT_MS), 0);
	assert_int_equal(paid_once("OA"), N - 1);
	fallback(&n, &at);
	assert_int_equal(at, 0);
	/* A fetch brings the whole backlog: the first batch is full, so a batch follows. */
	assert_true(n > 2);
	batch_from(ids[1], n - 1);
	stop_processor();
}

/*
 * copies_of_done_rows_try_one_batch_more - a backlog of copies of done rows (as after a
 * rebalance before the offsets were committed): every batch falls back at its first message,
 * and after it the rest is tried as a batch once, not once per message.
 */
static void
copies_of_done_rows_try_one_batch_more(void **state)
{
	unsigned long long ids[N];
	char order[64];
	long long fallbacks;

	(void)state;
	backlog("OC", -1, ids);
	start_processor("processor-copies-1");
	for (int i = 0; i < N; i++)
		assert_int_equal(fx_wait_row(&db, 0, ids[i], 1, WAIT_MS), 0);
	stop_processor();
	for (int i = 0; i < N; i++) {
		snprintf(order, sizeof(order), "OC-%d", i);
		assert_int_equal(fx_publish(pub, NULL, 0, ids[i], M, "wxpay", order, 1, 0, NULL),
		                 0);
	}
	assert_int_equal(fx_pub_flush(pub, 30000), 0);
	start_processor("processor-copies-2");
	assert_int_equal(fx_wait_log(plog, "event=skipped reason=already_final", N, WAIT_MS), 0);
	assert_int_equal(paid_once("OC"), N);
	fallbacks = harness_file_count(plog, "event=batch_fallback");
	printf("# %lld fallbacks for %d copies\n", fallbacks, N);
	/*
	 * At most two per run (the run, then the rest once): 10 for runs of 8; one per copy but
	 * the last of each run without the bound, 35.
	 */
	assert_true(fallbacks > 0);
	assert_true(fallbacks < N / 2);
	stop_processor();
}

static int
group_setup(void **state)
{
	(void)state;
	return (pub = fx_pub_new(&cf)) == NULL ? -1 : 0;
}

/* Frees the publisher, and stops a processor a failed case left running. */
static int
group_teardown(void **state)
{
	(void)state;
	if (pid > 0)
		return fx_processor_stop(pub, pid, plog);
	fx_pub_free(pub);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(backlog_is_applied_in_batches),
	    cmocka_unit_test(a_failing_payment_rolls_its_batch_back_and_goes_alone),
	    cmocka_unit_test(the_messages_after_a_failing_one_form_a_batch_again),
	    cmocka_unit_test(copies_of_done_rows_try_one_batch_more),
	};
	int rc;

	if (fx_processor_conf(&cf, "pbatch", NULL, 1) != 0)
		return 1;
	harness_set(&cf.log_level, "debug"); /* the batch_committed lines */
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
