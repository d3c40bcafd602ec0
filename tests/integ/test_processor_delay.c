/*
 * test_processor_delay - delay topics against a real bin/paycb-processor with a compressed
 * ladder ("2 3 4": topics <prefix>.callbacks.retry.{2,3,4}s).
 *
 *   - a message on a delay topic is not processed before its timestamp plus the topic's
 *     delay, while a message published meanwhile on the main topic, to the same partition
 *     number and handled by the same single consumer thread, is processed at once: the hold
 *     pauses one partition, it does not sleep in the poll loop;
 *   - a held partition resumes after a rebalance (a second processor joins while the
 *     message is held) and the message is still not processed before it is due.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "ladder.h"

#define WAIT_MS 30000
#define M       "default"

static struct conf cf;
static struct db db;
static struct fx_pub *pub;
static int pid = -1;
static char plog[1024];

static long long
done_ms(unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&db,
	                         "SELECT CAST(UNIX_TIMESTAMP(done_at) * 1000 AS SIGNED) FROM "
	                         "pay_callback_log WHERE id = ? AND status = 1",
	                         in, 1);
}

static long long
status_of(unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&db, "SELECT status FROM pay_callback_log WHERE id = ?", in, 1);
}

/* A row as the retrier leaves it before republishing: one failure recorded. */
static unsigned long long
failed_once(const char *order, const char *trade)
{
	unsigned long long id;

	assert_int_equal(fx_order(&db, M, order, "9.99", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", trade, order, "9.99", "CNY");
	assert_true(id > 0);
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(
		    db_exec(&db,
		            "UPDATE pay_callback_log SET retry_count = 1, last_error = "
		            "'order not found' WHERE id = ?",
		            in, 1, NULL, NULL),
		    DB_OK);
	}
	return id;
}

static void
retry_message_waits_while_main_topic_flows(void **state)
{
	char retry2[256];
	struct fx_pos held, quick;
	unsigned long long a, b;
	long long t0, b_done, a_done;

	(void)state;
	ladder_topic(&cf, 2, retry2, sizeof(retry2)); /* the 3 s step */
	a = failed_once("O-held", "T-held");
	assert_int_equal(
	    fx_publish(pub, retry2, 0, a, M, "wxpay", "O-held", 2, RD_KAFKA_PARTITION_UA, &held),
	    0);
	/* Same partition number on the main topic, consumed by the same (single) thread. */
	assert_int_equal(fx_order(&db, M, "O-quick", "1.00", "CNY", "PENDING"), 0);
	b = fx_pay_row(&db, &cf, M, "wxpay", "T-quick", "O-quick", "1.00", "CNY");
	t0 = harness_now_ms();
	assert_int_equal(
	    fx_publish(pub, NULL, 0, b, M, "wxpay", "O-quick", 1, held.partition, &quick), 0);
	assert_int_equal(fx_wait_row(&db, 0, b, 1, WAIT_MS), 0);
	b_done = done_ms(b);
	printf("# main-topic message processed %lld ms after its timestamp (seen after %lld "
	       "ms), the held one is due %lld ms after it\n",
	       b_done - quick.timestamp_ms, harness_now_ms() - t0,
	       (long long)(held.timestamp_ms + 3000 - quick.timestamp_ms));
	assert_true(b_done < held.timestamp_ms + 3000);
	assert_true(b_done - quick.timestamp_ms < 2000);
	assert_int_equal(status_of(a), 0); /* still held */

	assert_int_equal(fx_wait_row(&db, 0, a, 1, WAIT_MS), 0);
	a_done = done_ms(a);
	printf("# delay-topic message processed %lld ms after its timestamp (delay 3000)\n",
	       a_done - held.timestamp_ms);
	assert_true(a_done >= held.timestamp_ms + 3000);
	assert_true(a_done < held.timestamp_ms + 3000 + 5000);
	/* The log line follows the commit: wait for it, then it must be there exactly once. */
	assert_int_equal(
	    fx_wait_log(plog, "outcome=paid order=O-held merchant=default attempt=2", 1, WAIT_MS),
	    0);
	assert_true(harness_file_count(plog, "outcome=paid order=O-held merchant=default "
	                                     "attempt=2") == 1);
}

static void
held_partition_resumes_after_a_rebalance(void **state)
{
	char retry3[256], log2[1024];
	struct fx_pos held;
	unsigned long long c;
	long long c_done;
	int pid2;

	(void)state;
	ladder_topic(&cf, 3, retry3, sizeof(retry3)); /* the 4 s step */
	c = failed_once("O-rebalanced", "T-rebalanced");
	assert_int_equal(fx_publish(pub, retry3, 0, c, M, "wxpay", "O-rebalanced", 2,
	                            RD_KAFKA_PARTITION_UA, &held),
	                 0);
	/* Wait for the first processor to hold it, then make the group rebalance. */
	{
		char needle[64];

		snprintf(needle, sizeof(needle), "cb%llu: level=debug event=held", c);
		assert_int_equal(fx_wait_log(plog, needle, 1, WAIT_MS), 0);
	}
	pid2 = fx_processor_start(&cf, "processor2", log2, sizeof(log2));
	assert_true(pid2 > 0);
	assert_int_equal(fx_wait_log(log2, "event=assigned", 1, WAIT_MS), 0);
	assert_int_equal(fx_wait_row(&db, 0, c, 1, WAIT_MS), 0);
	c_done = done_ms(c);
	printf("# held across a rebalance: processed %lld ms after its timestamp (delay 4000)\n",
	       c_done - held.timestamp_ms);
	assert_true(c_done >= held.timestamp_ms + 4000);
	assert_int_equal(harness_stop(pid2, SIGTERM, 30000), 0);
}

static int
group_setup(void **state)
{
	(void)state;
	/* Timing is measured from a member that owns its partitions and fetches already, and
	 * with a producer that knows the topics. */
	if (fx_processor_up(&cf, &pub, &pid, plog, sizeof(plog), WAIT_MS) != 0)
		return -1;
	{
		char retry[256];
		struct fx_pos pos;
		unsigned long long id;

		for (int k = 1; k <= 3; k++) {
			ladder_topic(&cf, k, retry, sizeof(retry));
			if (fx_publish(pub, retry, 0, 999999, M, "wxpay", "O-none", 2,
			               RD_KAFKA_PARTITION_UA, &pos) != 0)
				return -1;
		}
		if (fx_order(&db, M, "O-warm", "1.00", "CNY", "PENDING") != 0 ||
		    (id = fx_pay_row(&db, &cf, M, "wxpay", "T-warm", "O-warm", "1.00", "CNY")) ==
		        0 ||
		    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-warm", 1, RD_KAFKA_PARTITION_UA,
		               &pos) != 0)
			return -1;
		return fx_wait_row(&db, 0, id, 1, WAIT_MS);
	}
}

static int
group_teardown(void **state)
{
	(void)state;
	return fx_processor_stop(pub, pid, plog);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(retry_message_waits_while_main_topic_flows),
	    cmocka_unit_test(held_partition_resumes_after_a_rebalance),
	};
	int rc;

	if (fx_processor_conf(&cf, "pdelay", "2 3 4", 1) != 0)
		return 1;
	harness_set(&cf.log_level, "debug"); /* the hold lines */
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
