/*
 * test_processor_crash - a real bin/paycb-processor killed with SIGKILL in the middle of a
 * load of 500 callbacks (250 orders, each a payment then a partial refund, in order on one
 * partition), then restarted: every callback ends with exactly one effect. Messages whose
 * transaction committed before the kill but whose offsets were not committed yet come again
 * and are skipped (the row is done), never applied twice; the logs of both runs together
 * show no callback applied twice. Also reports the processing rate.
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
#define ORDERS  250

static struct conf cf;
static struct db db;

static void
sigkill_under_load_then_restart_applies_each_once(void **state)
{
	char logs[2][1024];
	struct fx_load l;
	struct fx_pub *pub;
	struct fx_progress pr;
	long long t0, t1, at_kill, skipped = 0, unsent;
	int pid, rc;

	(void)state;
	assert_int_equal(fx_load_create(&db, &cf, &l, "crash", ORDERS), 0);
	assert_non_null(pub = fx_pub_new(&cf));
	assert_int_equal(fx_load_publish(pub, &l, 0, ORDERS), 0);

	pid = fx_processor_start(&cf, "run1", logs[0], sizeof(logs[0]));
	assert_true(pid > 0);
	pr = (struct fx_progress){&db, &l, 2 * ORDERS / 4};
	t0 = harness_now_ms();
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	rc = harness_stop(pid, SIGKILL, 10000);
	at_kill = fx_load_done(&db, &l);
	printf("# killed (status %d) with %lld of %d callbacks done\n", rc, at_kill, 2 * ORDERS);
	assert_int_equal(rc, 128 + SIGKILL);
	assert_true(at_kill < 2 * ORDERS);

	pid = fx_processor_start(&cf, "run2", logs[1], sizeof(logs[1]));
	assert_true(pid > 0);
	pr.want = 2 * ORDERS;
	t1 = harness_now_ms();
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	printf("# restart finished the other %lld in %lld ms (incl. group join); whole run "
	       "%lld ms\n",
	       2 * ORDERS - at_kill, harness_now_ms() - t1, harness_now_ms() - t0);
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);

	assert_int_equal(fx_load_check(&db, &l, logs, 2, &skipped), 0);
	unsent = harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE sent_at IS NULL");
	printf("# redelivered and skipped after the restart: %lld; events left unsent for the "
	       "retrier's sweep: %lld\n",
	       skipped, unsent);
	fx_pub_free(pub);
	fx_load_free(&l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(sigkill_under_load_then_restart_applies_each_once),
	};
	int rc;

	if (fx_processor_conf(&cf, "pcrash", NULL, 2) != 0)
		return 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
