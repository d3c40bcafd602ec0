/*
 * test_liveness_daemons - liveness faults with the real daemons (bin/paycb-processor and
 * bin/paycb-retrier) against MariaDB and Kafka, on compressed ladders and leases (issue 17).
 *
 *   - a ladder mismatch: the retrier's ladder "1 2 3" has a step whose topic the processor
 *     (ladder "1 2") does not consume; a callback for a missing order walks to that step and
 *     is republished there forever. The end-to-end alarm (old_pending) and the republish
 *     alarm (republish_storm) are raised within the configured time, once per row.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "ladder.h"

#define WAIT_MS 30000

static struct conf cf;
static struct db tdb;

static long long
row_i64(const char *sql, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&tdb, sql, in, 1);
}

static int
wait_log(const char *file, const char *needle, long long n, long long timeout_ms)
{
	struct fx_logwait w = {file, needle, n};

	return harness_wait_until(fx_log_has, &w, timeout_ms);
}

/* start_retrier - writes c to <prefix>-<name>.conf and starts a retrier with it. */
static int
start_retrier(const struct conf *c, const char *name, char *log, size_t loglen)
{
	char path[1024];

	snprintf(path, sizeof(path), "%s/test-logs/%s-%s.conf", fx_dir(), c->kafka.topic_prefix,
	         name);
	snprintf(log, loglen, "%s/test-logs/%s-%s.log", fx_dir(), c->kafka.topic_prefix, name);
	if (harness_write_conf(c, path, NULL) != 0)
		return -1;
	return harness_spawn("bin/paycb-retrier", path, log);
}

/* Every case starts from empty logs, so no daemon of one case sees another's rows. */
static int
clean(void **state)
{
	(void)state;
	if (db_exec(&tdb, "DELETE FROM pay_callback_log", NULL, 0, NULL, NULL) != DB_OK ||
	    db_exec(&tdb, "DELETE FROM refund_callback_log", NULL, 0, NULL, NULL) != DB_OK ||
	    db_exec(&tdb, "DELETE FROM order_events", NULL, 0, NULL, NULL) != DB_OK ||
	    db_exec(&tdb, "DELETE FROM alerts", NULL, 0, NULL, NULL) != DB_OK)
		return -1;
	return 0;
}

/*
 * (1) The processor consumes the steps 1 s and 2 s; the retrier's ladder has a third step,
 * 3 s, whose topic nobody consumes. The row is never overdue (every lease moves it), so the
 * overdue check stays quiet; the end-to-end alarm is raised once the row is older than the
 * threshold (stuck_after_s 10, raised to 1+2+3 + 3*2 + 2 + 2*1 = 16 s by the ladder), and
 * the republish alarm once the row is republished a third time at retry_count 3.
 */
static void
ladder_mismatch_raises_the_alarm_within_the_threshold(void **state)
{
	struct conf pc = cf, rc = cf;
	char plog[1024], rlog[1024], needle[128];
	struct fx_pub *pub = fx_pub_new(&cf);
	struct fx_pos pos;
	unsigned long long id;
	long long t0, took, after_s;
	int ppid, rpid;

	(void)state;
	assert_non_null(pub);
	pc.retry.ladder_s.n = 2; /* "1 2": no consumer for the 3 s step */
	rc.retrier.stuck_after_s = 10;
	rc.retrier.max_republish = 2;
	after_s = 1 + 2 + 3 + 3 * rc.retry.lease_margin_s + rc.retry.initial_lease_s +
	          2 * rc.retrier.sweep_interval_s;
	assert_true((ppid = fx_processor_start(&pc, "mismatch-processor", plog, sizeof(plog))) > 0);
	assert_int_equal(wait_log(plog, "event=assigned", 1, WAIT_MS), 0);
	assert_true((rpid = start_retrier(&rc, "mismatch-retrier", rlog, sizeof(rlog))) > 0);
	t0 = harness_now_ms();
	id = fx_pay_row(&tdb, &cf, "m1", "wxpay", "T-mismatch", "o-mismatch", "7.00", "CNY");
	assert_true(id > 0);
	assert_int_equal(fx_publish(pub, NULL, 0, id, "m1", "wxpay", "o-mismatch", 1,
	                            RD_KAFKA_PARTITION_UA, &pos),
	                 0);
	/* Three failures (attempts 1..3) bring it to the step nobody consumes. */
	assert_int_equal(fx_wait_retry(&tdb, 0, id, 3, WAIT_MS), 0);
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(harness_wait_i64(&tdb,
		                                  "SELECT COUNT(*) FROM alerts WHERE kind = "
		                                  "'old_pending' AND callback_id = ?",
		                                  in, 1, 1, (after_s + 10) * 1000),
		                 0);
	}
	took = harness_now_ms() - t0;
	printf("# old_pending alert %lld ms after the row came in (threshold %lld s)\n", took,
	       after_s);
	assert_true(took >= after_s * 1000 - 1000);
	assert_true(took <= (after_s + 4) * 1000);
	assert_int_equal(row_i64("SELECT status FROM pay_callback_log WHERE id = ?", id), 0);
	snprintf(needle, sizeof(needle), "cb%llu: level=error event=alert kind=old_pending", id);
	assert_int_equal(harness_file_count(rlog, needle), 1);
	/* The republish alarm: past max_republish (2) at retry_count 3. */
	snprintf(needle, sizeof(needle), "cb%llu: level=error event=alert kind=republish_storm",
	         id);
	assert_int_equal(wait_log(rlog, needle, 1, WAIT_MS), 0);
	/* One more lease period: still one alert of each kind for the row. */
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(
		    harness_wait_i64(&tdb,
		                     "SELECT republish_count >= 4 FROM pay_callback_log "
		                     "WHERE id = ?",
		                     in, 1, 1, WAIT_MS),
		    0);
		assert_int_equal(harness_query_i64(&tdb,
		                                   "SELECT COUNT(*) FROM alerts WHERE kind IN "
		                                   "('old_pending', 'republish_storm') AND "
		                                   "callback_id = ?",
		                                   in, 1),
		                 2);
	}
	assert_int_equal(harness_file_count(rlog, "kind=stuck_rows"), 0); /* never overdue */
	assert_int_equal(harness_stop(rpid, SIGTERM, 30000), 0);
	assert_int_equal(harness_stop(ppid, SIGTERM, 30000), 0);
	fx_pub_free(pub);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(ladder_mismatch_raises_the_alarm_within_the_threshold, clean),
	};
	char group[128];
	int rc;

	if (harness_setup(&cf, "lived", "1 2 3") != 0)
		return 1;
	cf.retry.lease_margin_s = 2;
	cf.retry.initial_lease_s = 2;
	cf.retrier.sweep_interval_s = 1;
	cf.retrier.admin_port = 0;
	cf.processor.admin_port = 0;
	snprintf(group, sizeof(group), "%s-processor", cf.kafka.topic_prefix);
	harness_set(&cf.kafka.group_id, group);
	harness_db(&cf, &tdb);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	harness_teardown(&cf);
	return rc;
}
