/*
 * test_retrier_ladder - the whole retry path with the real daemons: bin/paycb-processor and
 * bin/paycb-retrier against MariaDB and Kafka, on the compressed ladder "1 2 3".
 *
 *   - A callback for an order that does not exist walks the ladder: one attempt per step,
 *     each no earlier than its step's delay after the failure before it (timed on the row's
 *     retry_count and cross-checked with the processor's log), one message per delay topic,
 *     then dead with exactly one dead letter and one alert. Once the order exists,
 *     `paycbctl replay` gets it processed once: order PAID, one pair of order events.
 *   - A callback whose publish was lost (row reserved, nothing published) is republished on
 *     the main topic once ingest's initial lease ran out, and processed.
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
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"
#include "ladder.h"

static struct conf cf;
static struct db tdb;
static char conf_path[1024], plog[1024], rlog[1024];
static int proc_pid, ret_pid;

struct count_arg {
	unsigned long long id;
	int n;
	char last[2048];
};

static int
count_cb(void *arg, const rd_kafka_message_t *m)
{
	struct count_arg *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);

	if (o && (unsigned long long)json_integer_value(json_object_get(o, "id")) == a->id) {
		a->n++;
		snprintf(a->last, sizeof(a->last), "%.*s", (int)m->len, (const char *)m->payload);
	}
	json_decref(o);
	return 0;
}

static int
on_topic(const char *topic, unsigned long long id, char *last, size_t len)
{
	struct count_arg a;

	memset(&a, 0, sizeof(a));
	a.id = id;
	assert_true(fx_read_topic(&cf, topic, count_cb, &a) >= 0);
	if (last)
		snprintf(last, len, "%s", a.last);
	return a.n;
}

/* proc_attempts - the processor's outcome=retry lines for id, with attempt=k for each k. */
static void
proc_attempts(unsigned long long id, int *per_attempt, int n)
{
	char line[4096], needle[64];
	FILE *fp = fopen(plog, "r");

	memset(per_attempt, 0, sizeof(int) * (size_t)n);
	snprintf(needle, sizeof(needle), ": cb%llu: ", id);
	assert_non_null(fp);
	while (fgets(line, sizeof(line), fp)) {
		const char *a = strstr(line, " attempt=");
		int k;

		if (strstr(line, needle) && strstr(line, "outcome=retry") && a &&
		    (k = atoi(a + 9)) >= 0 && k < n)
			per_attempt[k]++;
	}
	fclose(fp);
}

static void
ladder_walk_dead_letter_then_replay(void **state)
{
	int n = ladder_steps(&cf.retry), per[8];
	long long at[8] = {0}, end, t0;
	char topic[256], dlq[2048], cmd[1400], out[4096];
	struct fx_pub *pub = fx_pub_new(&cf);
	struct fx_pos pos;
	unsigned long long id;
	FILE *p;

	(void)state;
	assert_non_null(pub);
	id = fx_pay_row(&tdb, &cf, "m1", "wxpay", "4200001001", "o-no-such-order", "88.88", "CNY");
	assert_true(id > 0);
	assert_int_equal(fx_publish(pub, NULL, 0, id, "m1", "wxpay", "o-no-such-order", 1,
	                            RD_KAFKA_PARTITION_UA, &pos),
	                 0);
	/* Time each failure as the row records it, polling every 20 ms. */
	t0 = harness_now_ms();
	for (end = t0 + 60000; harness_now_ms() < end;) {
		long long rc =
		    fx_countf(&cf, "SELECT retry_count FROM pay_callback_log WHERE id = %llu", id);
		if (rc >= 1 && rc <= n + 1 && at[rc] == 0)
			at[rc] = harness_now_ms();
		if (fx_countf(&cf, "SELECT status FROM pay_callback_log WHERE id = %llu", id) == 2)
			break;
		usleep(20 * 1000);
	}
	assert_int_equal(fx_countf(&cf, "SELECT status FROM pay_callback_log WHERE id = %llu", id),
	                 2);
	assert_int_equal(
	    fx_countf(&cf, "SELECT retry_count FROM pay_callback_log WHERE id = %llu", id), n + 1);
	for (int k = 1; k <= n; k++) {
		long long gap = at[k + 1] - at[k], delay = ladder_delay(&cf.retry, k) * 1000;

		printf("# failure %d -> %d: %lld ms (step delay %lld ms, lease %lld ms)\n", k,
		       k + 1, gap, delay, delay + cf.retry.lease_margin_s * 1000);
		assert_true(at[k] > 0 && at[k + 1] > 0);
		/* No earlier than the delay (less the 20 ms polling grain and a query). */
		assert_true(gap >= delay - 60);
		/* And from the first publish, not a republish after an expired lease. */
		assert_true(gap < delay + cf.retry.lease_margin_s * 1000);
	}
	printf("# %d failures to dead in %lld ms\n", n + 1, harness_now_ms() - t0);
	proc_attempts(id, per, 8);
	for (int k = 1; k <= n + 1; k++)
		assert_int_equal(per[k], 1);
	/* One message per delay topic, one on the main topic (the first publish). */
	for (int k = 1; k <= n; k++) {
		ladder_topic(&cf, k, topic, sizeof(topic));
		assert_int_equal(on_topic(topic, id, NULL, 0), 1);
	}
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	assert_int_equal(on_topic(topic, id, NULL, 0), 1);
	/* Dead: exactly one dead letter and one alert. */
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(harness_wait_i64(&tdb,
		                                  "SELECT COUNT(*) FROM pay_callback_log WHERE "
		                                  "id = ? AND dlq_sent_at IS NOT NULL",
		                                  in, 1, 1, 15000),
		                 0);
	}
	conf_topic(&cf, "callbacks.dlq", topic, sizeof(topic));
	assert_int_equal(on_topic(topic, id, dlq, sizeof(dlq)), 1);
	assert_non_null(strstr(dlq, "\"reason\":\"ladder_exhausted\""));
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM alerts WHERE kind = 'dead_letter' AND callback_id "
	              "= %llu",
	              id),
	    1);
	assert_true(harness_file_count(rlog, "level=error event=alert kind=dead_letter") >= 1);

	/* The order arrives; the operator replays the dead letter. */
	assert_int_equal(fx_order(&tdb, "m1", "o-no-such-order", "88.88", "CNY", "PENDING"), 0);
	snprintf(cmd, sizeof(cmd), "bin/paycbctl -c %s --actor test replay cb%llu 2>&1", conf_path,
	         id);
	assert_non_null(p = popen(cmd, "r"));
	out[fread(out, 1, sizeof(out) - 1, p)] = '\0';
	{
		int st = pclose(p);
		printf("# paycbctl replay: %s", out);
		assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
	}
	assert_int_equal(fx_wait_row(&tdb, 0, id, 1, 30000), 0);
	assert_int_equal(
	    fx_countf(&cf, "SELECT COUNT(*) FROM orders WHERE out_trade_no = 'o-no-such-order' AND "
	                   "status = 'PAID'"),
	    1);
	assert_int_equal(fx_countf(&cf, "SELECT COUNT(*) FROM order_events WHERE out_trade_no = "
	                                "'o-no-such-order'"),
	                 2);
	assert_int_equal(fx_countf(&cf, "SELECT COUNT(DISTINCT event_type) FROM order_events WHERE "
	                                "out_trade_no = 'o-no-such-order'"),
	                 2);
	ladder_topic(&cf, 1, topic, sizeof(topic));
	assert_int_equal(on_topic(topic, id, NULL, 0), 2); /* the ladder's and the replay's */
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	assert_int_equal(on_topic(topic, id, NULL, 0), 1); /* never the main topic */
	{
		char needle[64];
		snprintf(needle, sizeof(needle),
		         ": cb%llu: level=info event=processed outcome=paid", id);
		assert_int_equal(harness_file_count(plog, needle), 1);
	}
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM audit_log WHERE actor = 'test' AND target = "
	              "'cb%llu'",
	              id),
	    1);
	fx_pub_free(pub);
}

static void
lost_publish_is_processed_after_the_initial_lease(void **state)
{
	char topic[256], needle[96];
	unsigned long long id;
	long long t0, took;

	(void)state;
	assert_int_equal(fx_order(&tdb, "m1", "o-lost-publish", "10.00", "CNY", "PENDING"), 0);
	/* Reserved as ingest reserves it; the publish never happened. */
	t0 = harness_now_ms();
	id = fx_pay_row(&tdb, &cf, "m1", "alipay", "2026120200001", "o-lost-publish", "10.00",
	                "CNY");
	assert_true(id > 0);
	assert_int_equal(fx_wait_row(&tdb, 0, id, 1, 30000), 0);
	took = harness_now_ms() - t0;
	printf("# processed %lld ms after the reservation (initial lease %lld s)\n", took,
	       cf.retry.initial_lease_s);
	assert_true(took >= cf.retry.initial_lease_s * 1000 - 100);
	snprintf(needle, sizeof(needle), ": cb%llu: level=info event=republished step=0", id);
	assert_int_equal(harness_file_count(rlog, needle), 1);
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	assert_int_equal(on_topic(topic, id, NULL, 0), 1);
	assert_int_equal(
	    fx_countf(&cf, "SELECT COUNT(*) FROM orders WHERE out_trade_no = 'o-lost-publish' AND "
	                   "status = 'PAID'"),
	    1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(ladder_walk_dead_letter_then_replay),
	    cmocka_unit_test(lost_publish_is_processed_after_the_initial_lease),
	};
	char group[128];
	int rc, r1, r2;

	if (harness_setup(&cf, "rladder", "1 2 3") != 0)
		return 1;
	cf.retry.lease_margin_s = 5;
	cf.retry.initial_lease_s = 3;
	cf.retrier.sweep_interval_s = 1;
	cf.retrier.admin_port = 0;
	cf.processor.admin_port = 0;
	snprintf(group, sizeof(group), "%s-processor", cf.kafka.topic_prefix);
	harness_set(&cf.kafka.group_id, group);
	harness_db(&cf, &tdb);
	if ((proc_pid = fx_processor_start(&cf, "processor", plog, sizeof(plog))) < 0)
		return 1;
	snprintf(conf_path, sizeof(conf_path), "%s/test-logs/%s-retrier.conf", fx_dir(),
	         cf.kafka.topic_prefix);
	snprintf(rlog, sizeof(rlog), "%s/test-logs/%s-retrier.log", fx_dir(),
	         cf.kafka.topic_prefix);
	if (harness_write_conf(&cf, conf_path, NULL) != 0 ||
	    (ret_pid = harness_spawn("bin/paycb-retrier", conf_path, rlog)) < 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	r1 = harness_stop(ret_pid, SIGTERM, 30000);
	r2 = harness_stop(proc_pid, SIGTERM, 30000);
	printf("# retrier exit %d, processor exit %d (logs %s, %s)\n", r1, r2, rlog, plog);
	if (r1 != 0 || r2 != 0)
		rc = 1;
	db_close(&tdb);
	harness_teardown(&cf);
	return rc;
}
