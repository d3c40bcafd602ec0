/*
 * test_processor_group - a second real bin/paycb-processor joins the consumer group under
 * load and leaves it again (SIGTERM, drain, exit 0) while callbacks are still pending:
 * 600 callbacks (300 orders, payment then partial refund) published in three batches; every
 * callback ends with exactly one effect, nothing lost, nothing doubled, both members did
 * part of the work. Reports the rate.
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

#define WAIT_MS 90000
#define ORDERS  300

static struct conf cf;
static struct db db;

static void
member_joins_and_leaves_under_load_nothing_lost_or_doubled(void **state)
{
	char logs[2][1024];
	struct fx_load l;
	struct fx_pub *pub;
	struct fx_progress pr;
	struct fx_logwait lw;
	long long t0, skipped = 0, by_b, at_leave;
	int a, b;

	(void)state;
	assert_int_equal(fx_load_create(&db, &cf, &l, "group", ORDERS), 0);
	assert_non_null(pub = fx_pub_new(&cf));
	a = fx_processor_start(&cf, "a", logs[0], sizeof(logs[0]));
	assert_true(a > 0);
	t0 = harness_now_ms();
	assert_int_equal(fx_load_publish(pub, &l, 0, 100), 0);
	pr = (struct fx_progress){&db, &l, 50};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);

	/*
	 * B joins while A is busy; half of batch 2 arrives during the rebalance, the other half
	 * once B has its partitions (A alone can finish the first half before the group settles).
	 */
	b = fx_processor_start(&cf, "b", logs[1], sizeof(logs[1]));
	assert_true(b > 0);
	assert_int_equal(fx_load_publish(pub, &l, 100, 150), 0);
	lw = (struct fx_logwait){logs[1], "level=info event=assigned", 1};
	assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
	assert_int_equal(fx_load_publish(pub, &l, 150, 200), 0);
	lw = (struct fx_logwait){logs[1], "level=info event=processed", 5};
	assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);

	/* Batch 3, then B leaves with work pending. */
	assert_int_equal(fx_load_publish(pub, &l, 200, ORDERS), 0);
	at_leave = fx_load_done(&db, &l);
	assert_int_equal(harness_stop(b, SIGTERM, 30000), 0);
	printf("# B left with %lld of %d callbacks done\n", at_leave, 2 * ORDERS);
	assert_true(at_leave < 2 * ORDERS);

	pr.want = 2 * ORDERS;
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	printf("# %d callbacks in %lld ms through join and leave\n", 2 * ORDERS,
	       harness_now_ms() - t0);
	assert_int_equal(harness_stop(a, SIGTERM, 30000), 0);
	by_b = harness_file_count(logs[1], "level=info event=processed");
	printf("# applied by A: %lld, by B: %lld\n",
	       harness_file_count(logs[0], "level=info event=processed"), by_b);
	assert_true(by_b > 0);
	/* Both drained: the relay marked every event it published sent (32 to a statement). */
	assert_int_equal(
	    harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE sent_at IS NULL"), 0);
	assert_int_equal(fx_load_check(&db, &l, logs, 2, &skipped), 0);
	printf("# redelivered and skipped: %lld\n", skipped);
	fx_pub_free(pub);
	fx_load_free(&l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(member_joins_and_leaves_under_load_nothing_lost_or_doubled),
	};
	int rc;

	if (fx_processor_conf(&cf, "pgroup", NULL, 1) != 0)
		return 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
