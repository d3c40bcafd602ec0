/*
 * test_lag - the processors' lag is measured on every topic they consume, the delay topics
 * included, with the hold taken into account (issue 17 item 9), against a real
 * bin/paycb-processor and the retrier's lag measurement (retrier_lag.c).
 *
 * The processor consumes the ladder "2 30"; the retrier's ladder is "2 4 30", so the 4 s
 * step's topic has no consumer, as in a ladder rolled out to the retriers first. A message on
 * the 30 s topic is held by the processor: it is lag, but not due lag, and raises nothing. A
 * message on the 4 s topic is never consumed: once its 4 s are over it is due lag and its
 * partition's head is overdue, the stalled partition the alert PaycbPartitionStalled watches.
 * The figures are read from the retrier's metrics exposition, as Prometheus reads them.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "ladder.h"
#include "metrics.h"
#include "retrier.h"

#define WAIT_MS 30000
#define M       "default"

static struct conf cf;
static struct db db;

/* The value of one series in the exposition, -1 when it is missing. */
static long long
series(const char *name, const char *topic, const char *kind)
{
	char *text = NULL, needle[600], *at;
	size_t len;
	long long v = -1;

	if (metrics_render(&text, &len) != 0)
		return -1;
	snprintf(needle, sizeof(needle), "%s{topic=\"%s\",kind=\"%s\"} ", name, topic, kind);
	if ((at = strstr(text, needle)) != NULL)
		v = atoll(at + strlen(needle));
	free(text);
	return v;
}

struct stalled {
	struct retrier *r;
	const char *topic;
};

/* A condition: after one more measurement, the topic's head is overdue. */
static int
stalled_now(void *arg)
{
	struct stalled *s = arg;

	if (retrier_lag_check(s->r) != 0)
		return 0;
	return series("paycb_consumer_head_overdue_seconds", s->topic, "delay") >= 1;
}

static void
held_message_is_not_lag_and_a_stalled_delay_partition_is(void **state)
{
	struct conf pc = cf;
	struct fx_pub *pub = fx_pub_new(&cf);
	struct retrier *r = NULL;
	char plog[1024], main_t[256], t4[256], t30[256], err[256];
	unsigned long long a, b;
	long long lag, due, overdue_ms, t0;
	int pid;

	(void)state;
	assert_non_null(pub);
	pc.retry.ladder_s.n = 2;
	pc.retry.ladder_s.v[1] = 30; /* "2 30": nobody consumes the 4 s step */
	assert_true((pid = fx_processor_start(&pc, "processor", plog, sizeof(plog))) > 0);
	assert_int_equal(fx_wait_log(plog, "event=assigned", 1, WAIT_MS), 0);
	conf_topic(&cf, "callbacks", main_t, sizeof(main_t));
	ladder_topic(&cf, 2, t4, sizeof(t4));
	ladder_topic(&cf, 3, t30, sizeof(t30));

	a = fx_pay_row(&db, &cf, M, "wxpay", "T-lag-a", "O-lag-a", "5.00", "CNY");
	b = fx_pay_row(&db, &cf, M, "wxpay", "T-lag-b", "O-lag-b", "5.00", "CNY");
	assert_true(a > 0 && b > 0);
	t0 = harness_now_ms();
	assert_int_equal(
	    fx_publish(pub, t30, 0, a, M, "wxpay", "O-lag-a", 3, RD_KAFKA_PARTITION_UA, NULL), 0);
	assert_int_equal(
	    fx_publish(pub, t4, 0, b, M, "wxpay", "O-lag-b", 2, RD_KAFKA_PARTITION_UA, NULL), 0);
	assert_int_equal(fx_pub_flush(pub, 10000), 0);
	assert_int_equal(fx_wait_log(plog, "event=held", 1, WAIT_MS), 0);

	assert_int_equal(retrier_open(&cf, &r, err, sizeof(err)), 0);
	/* Right away: both messages are lag; neither is due yet. */
	assert_int_equal(retrier_lag_check(r), 0);
	assert_int_equal(retrier_lag_topic(r, t30, &lag, &due, &overdue_ms), 0);
	assert_int_equal(lag, 1);
	assert_int_equal(due, 0);
	assert_int_equal(retrier_lag_topic(r, t4, &lag, &due, &overdue_ms), 0);
	assert_int_equal(lag, 1);
	if (harness_now_ms() - t0 < 3500)
		assert_int_equal(due, 0);
	assert_int_equal(series("paycb_consumer_lag_check_ok", "", "") == -1, 1); /* unlabelled */

	/* The 4 s step's head comes due and nobody consumes it: the partition is stalled. */
	{
		struct stalled s = {r, t4};
		assert_int_equal(harness_wait_until(stalled_now, &s, 20000), 0);
	}
	printf("# stalled after %lld ms: due lag %lld on %s\n", harness_now_ms() - t0,
	       series("paycb_consumer_due_lag_messages", t4, "delay"), t4);
	assert_int_equal(series("paycb_consumer_due_lag_messages", t4, "delay"), 1);
	assert_int_equal(series("paycb_consumer_lag_messages", t4, "delay"), 1);
	/* The held message on the 30 s step is still lag but not due: no alarm. */
	assert_true(harness_now_ms() - t0 < 29000);
	assert_int_equal(series("paycb_consumer_lag_messages", t30, "delay"), 1);
	assert_int_equal(series("paycb_consumer_due_lag_messages", t30, "delay"), 0);
	assert_int_equal(series("paycb_consumer_head_overdue_seconds", t30, "delay"), 0);
	assert_int_equal(series("paycb_consumer_due_lag_messages", main_t, "main"), 0);
	{
		char *text = NULL;
		size_t len;

		assert_int_equal(metrics_render(&text, &len), 0);
		assert_non_null(strstr(text, "paycb_consumer_lag_check_ok 1"));
		free(text);
	}
	/* Measuring never commits for the processors' group nor joins it. */
	assert_int_equal(fx_committed(&cf, t4, 0) <= 0, 1);
	assert_int_equal(harness_file_count(plog, "event=revoked"), 0);
	retrier_close(r);
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);
	fx_pub_free(pub);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(held_message_is_not_lag_and_a_stalled_delay_partition_is),
	};
	int rc;

	if (fx_processor_conf(&cf, "lag", "2 4 30", 1) != 0)
		return 1;
	harness_set(&cf.log_level, "debug"); /* the processor's hold lines */
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
