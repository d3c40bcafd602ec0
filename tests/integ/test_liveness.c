/*
 * test_liveness - an acknowledged notification is applied or alarmed, never stuck in silence,
 * and no partition stalls (issue 17), against a real bin/paycb-processor on the compressed
 * ladder "2 3 4", with the retrier's library driven one cycle at a time where a case needs it.
 *
 *   - a stale attempt (a copy of an attempt before a replay reset retry_count) fails without
 *     spending a step of the fresh ladder;
 *   - a message stamped a day ahead on a delay-topic partition holds that partition for at
 *     most the step's delay: a failing row behind it recovers within one step;
 *   - the dead-letter topic missing does not stop the partition: the row is dead in the
 *     transaction, the orders behind it are processed, and the retrier's dead-letter sweep
 *     sends the letter once the topic exists;
 *   - a message naming a missing row is counted and alerted with the message's merchant,
 *     channel and order; a message whose merchant or order differ from its row is alerted
 *     and not applied (counted too);
 *   - an idle processor's producer sleeps, its readiness probe does not wake it, and the
 *     next payment's events wake it and are relayed.
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
#include <time.h>

#include "fixtures.h"
#include "harness.h"
#include "topics.h"
#include "httpc.h"
#include "kq.h"
#include "ladder.h"
#include "msg.h"
#include "retrier.h"

#define WAIT_MS 30000
#define M       "default"

static struct conf cf;
static struct db db;
static struct fx_pub *pub;
static int pid = -1;
static char plog[1024];

static long long
row_i64(const char *sql, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&db, sql, in, 1);
}

static void
row_exec(const char *sql, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	assert_int_equal(db_exec(&db, sql, in, 1, NULL, NULL), DB_OK);
}

/* count_id - counts the messages of a topic whose JSON "id" is a->id. */
struct count_arg {
	unsigned long long id;
	int n;
};

static int
count_cb(void *arg, const rd_kafka_message_t *m)
{
	struct count_arg *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);

	if (o && (unsigned long long)json_integer_value(json_object_get(o, "id")) == a->id)
		a->n++;
	json_decref(o);
	return 0;
}

static int
on_topic(const char *suffix, unsigned long long id)
{
	struct count_arg a = {id, 0};
	char topic[256];

	conf_topic(&cf, suffix, topic, sizeof(topic));
	assert_true(fx_read_topic(&cf, topic, count_cb, &a) >= 0);
	return a.n;
}

/*
 * (6) After a replay reset retry_count to 0, a copy of attempt 3 that was still queued on a
 * delay topic fails: it must not count as failure 1 of the fresh ladder. The replay's own
 * attempt 1 does.
 */
static void
stale_attempt_after_replay_is_not_counted(void **state)
{
	char retry2[256], needle[128];
	unsigned long long id;

	(void)state;
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-stale6", "O-stale6", "5.00", "CNY");
	assert_true(id > 0);
	/* As paycbctl replay leaves a dead row: pending, retry_count 0, replayed. */
	row_exec("UPDATE pay_callback_log SET retry_count = 0, replayed_at = NOW(3), "
	         "next_retry_at = NOW(3) + INTERVAL 60 SECOND WHERE id = ?",
	         id);
	ladder_topic(&cf, 1, retry2, sizeof(retry2));
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-stale6", 3, RD_KAFKA_PARTITION_UA, NULL),
	    0);
	snprintf(needle, sizeof(needle), "cb%llu: level=warn event=processed outcome=retry_stale ",
	         id);
	assert_int_equal(fx_wait_log(plog, needle, 1, WAIT_MS), 0);
	assert_int_equal(row_i64("SELECT retry_count FROM pay_callback_log WHERE id = ?", id), 0);
	/* The replay's attempt 1 is counted. */
	assert_int_equal(
	    fx_publish(pub, retry2, 0, id, M, "wxpay", "O-stale6", 1, RD_KAFKA_PARTITION_UA, NULL),
	    0);
	assert_int_equal(fx_wait_retry(&db, 0, id, 1, WAIT_MS), 0);
}

static long long
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* produce_at - one callback message on topic/partition with the given CreateTime. */
static void
produce_at(const char *topic, int32_t partition, unsigned long long id, const char *order,
           int attempt, long long ts_ms)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	struct msg_callback m;
	char key[256], val[512], err[256];
	rd_kafka_t *rk;
	int klen, vlen;

	memset(&m, 0, sizeof(m));
	m.cblog = CBLOG_PAY;
	m.id = id;
	m.attempt = attempt;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", M);
	snprintf(m.channel, sizeof(m.channel), "wxpay");
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", order);
	assert_true((klen = msg_callback_key(&m, key, sizeof(key))) > 0);
	assert_true((vlen = msg_callback_encode(&m, val, sizeof(val))) > 0);
	assert_int_equal(kq_conf_common(c, &cf.kafka, err, sizeof(err)), 0);
	assert_non_null(rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err)));
	assert_int_equal(
	    rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition),
	                      RD_KAFKA_V_KEY(key, (size_t)klen),
	                      RD_KAFKA_V_VALUE(val, (size_t)vlen), RD_KAFKA_V_TIMESTAMP(ts_ms),
	                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END),
	    0);
	assert_int_equal(rd_kafka_flush(rk, 10000), 0);
	rd_kafka_destroy(rk);
}

/*
 * (3) A message stamped a day ahead (a replay from a host whose clock is a day fast) on
 * partition p of the 2 s step must hold p for at most 2 s from when the processor first
 * saw it; a failing row published behind it on p is processed within one step.
 */
static void
future_stamped_message_holds_its_partition_one_step_at_most(void **state)
{
	char retry2[256], needle[96];
	struct fx_pos pos;
	unsigned long long skewed, id;
	long long t0, took;

	(void)state;
	ladder_topic(&cf, 1, retry2, sizeof(retry2)); /* the 2 s step */
	assert_int_equal(fx_order(&db, M, "O-skew", "3.00", "CNY", "PENDING"), 0);
	skewed = fx_pay_row(&db, &cf, M, "wxpay", "T-skew", "O-skew", "3.00", "CNY");
	assert_true(skewed > 0);
	row_exec("UPDATE pay_callback_log SET retry_count = 1 WHERE id = ?", skewed);
	assert_int_equal(fx_order(&db, M, "O-behind", "4.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-behind", "O-behind", "4.00", "CNY");
	assert_true(id > 0);
	row_exec("UPDATE pay_callback_log SET retry_count = 1, last_error = 'order not found' "
	         "WHERE id = ?",
	         id);
	produce_at(retry2, 0, skewed, "O-skew", 2, wall_ms() + 86400000LL);
	snprintf(needle, sizeof(needle), "cb%llu: level=debug event=held", skewed);
	assert_int_equal(fx_wait_log(plog, needle, 1, WAIT_MS), 0);
	t0 = harness_now_ms();
	assert_int_equal(fx_publish(pub, retry2, 0, id, M, "wxpay", "O-behind", 2, 0, &pos), 0);
	assert_int_equal(fx_wait_row(&db, 0, id, 1, 12000), 0);
	took = harness_now_ms() - t0;
	printf("# the row behind a day-ahead message was processed after %lld ms (step 2000 ms)\n",
	       took);
	assert_true(took < 2000 + 5000);
	/* The skewed message itself is processed too, a step after it was first seen. */
	assert_int_equal(fx_wait_row(&db, 0, skewed, 1, 12000), 0);
}

static int
try_create_topic(void *arg)
{
	const char *names[1] = {arg};
	int parts[1] = {3};
	char err[256];

	/* Right after a deletion the broker refuses the name for a moment. */
	return kq_create_topics(&cf.kafka, names, parts, NULL, 1, 10000, NULL, err, sizeof(err)) ==
	       0;
}

static void
create_topic(char *topic)
{
	assert_int_equal(harness_wait_until(try_create_topic, topic, WAIT_MS), 0);
}

/* open_retrier - a retrier of cf's database and topics, driven one cycle at a time. */
static struct retrier *
open_retrier(const struct conf *c)
{
	struct retrier *r = NULL;
	char err[256];

	assert_int_equal(retrier_open(c, &r, err, sizeof(err)), 0);
	return r;
}

/*
 * (2) The dead-letter topic is missing. An amount mismatch makes its row dead; the payment
 * behind it on the same partition is processed at once (today the processor held the
 * partition for as long as the dead letter could not be published). The dead letter waits
 * in the row (dlq_sent_at NULL) and the retrier's sweep sends it, once, when the topic
 * exists again.
 */
static void
missing_dead_letter_topic_does_not_stop_the_partition(void **state)
{
	struct conf rc = cf;
	char dlq[256], out[256];
	struct fx_pos pos;
	struct retrier *r;
	unsigned long long a, b;
	int more;

	(void)state;
	conf_topic(&cf, "callbacks.dlq", dlq, sizeof(dlq));
	assert_int_equal(topics_delete(&cf.kafka, (const char *const[]){dlq}, 1, 30000), 0);
	assert_int_equal(fx_order(&db, M, "O-dlq-a", "10.00", "CNY", "PENDING"), 0);
	assert_int_equal(fx_order(&db, M, "O-dlq-b", "10.00", "CNY", "PENDING"), 0);
	a = fx_pay_row(&db, &cf, M, "wxpay", "T-dlq-a", "O-dlq-a", "9.00", "CNY"); /* mismatch */
	b = fx_pay_row(&db, &cf, M, "wxpay", "T-dlq-b", "O-dlq-b", "10.00", "CNY");
	assert_true(a > 0 && b > 0);
	assert_int_equal(fx_publish(pub, NULL, 0, a, M, "wxpay", "O-dlq-a", 1, 5, &pos), 0);
	assert_int_equal(fx_publish(pub, NULL, 0, b, M, "wxpay", "O-dlq-b", 1, 5, &pos), 0);
	assert_int_equal(fx_wait_row(&db, 0, b, 1, 15000), 0);
	assert_int_equal(fx_wait_row(&db, 0, a, 2, WAIT_MS), 0);
	assert_int_equal(row_i64("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND "
	                         "dead_reason = 'amount_mismatch' AND dead_at IS NOT NULL AND "
	                         "dlq_sent_at IS NULL",
	                         a),
	                 1);
	assert_int_equal(row_i64("SELECT COUNT(*) FROM alerts WHERE callback_id = ? AND kind = "
	                         "'amount_mismatch'",
	                         a),
	                 1);
	/* paycbctl dead shows the truth: not sent yet. */
	{
		char cmd[1400], conf_path[1024];
		FILE *p;

		snprintf(conf_path, sizeof(conf_path), "%s/test-logs/%s-processor.conf", fx_dir(),
		         cf.kafka.topic_prefix);
		snprintf(cmd, sizeof(cmd), "bin/paycbctl -c %s dead 2>&1 | grep -c 'NOT SENT'",
		         conf_path);
		assert_non_null(p = popen(cmd, "r"));
		out[fread(out, 1, sizeof(out) - 1, p)] = '\0';
		pclose(p);
		assert_int_equal(atoi(out), 1);
	}
	/* The retrier cannot send it while the topic is missing: it stays unsent. */
	rc.kafka.delivery_timeout_ms = 2000;
	rc.retry.lease_margin_s = 1;
	r = open_retrier(&rc);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.dlq_sent, 0);
	/* Still leased: the lease outlasts a publish that waits out the delivery timeout (2 s
	 * + the phase's 2 s + the margin, 1 s), so no second retrier sends it meanwhile. */
	assert_int_equal(row_i64("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND "
	                         "dlq_sent_at IS NULL AND TIMESTAMPDIFF(SECOND, updated_at, "
	                         "next_retry_at) >= 5",
	                         a),
	                 1);
	retrier_close(r);
	create_topic(dlq);
	/* Once the topic exists (and the lease of the failed attempt is over) it goes out. */
	row_exec("UPDATE pay_callback_log SET next_retry_at = NOW(3) WHERE id = ?", a);
	r = open_retrier(&rc);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.dlq_sent, 1);
	retrier_close(r);
	assert_int_equal(row_i64("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND "
	                         "dlq_sent_at IS NOT NULL",
	                         a),
	                 1);
	assert_int_equal(on_topic("callbacks.dlq", a), 1);
}

static long long
metric_of(const char *series)
{
	struct httpc_resp *resp = calloc(1, sizeof(*resp));
	const char *at;
	long long v = -1;

	assert_non_null(resp);
	if (httpc_request((int)cf.processor.admin_port, "GET", "/metrics", NULL, NULL, 0, 5000,
	                  resp) == 0 &&
	    resp->status == 200) {
		resp->body[resp->body_len < sizeof(resp->body) ? resp->body_len
		                                               : sizeof(resp->body) - 1] = '\0';
		v = (at = strstr(resp->body, series)) ? atoll(at + strlen(series)) : 0;
	}
	free(resp);
	return v;
}

/*
 * (5) A message naming a row that does not exist (a failover lost the acknowledged INSERT)
 * is counted and alerted with the merchant, channel and order it carries. A message whose
 * order differs from the row it names is alerted and not applied.
 */
static void
message_naming_a_missing_or_other_row_is_counted_and_alerted(void **state)
{
	const char *missing = "paycb_processor_callbacks_total{outcome=\"row_missing\"} ";
	const char *mismatch = "paycb_processor_callbacks_total{outcome=\"row_mismatch\"} ";
	unsigned long long ghost = 900000001ULL, id;
	char buf[600];

	(void)state;
	assert_int_equal(metric_of(missing), 0);
	assert_int_equal(
	    fx_publish(pub, NULL, 1, ghost, M, "alipay", "O-ghost", 1, RD_KAFKA_PARTITION_UA, NULL),
	    0);
	{
		struct db_in in[1] = {DBI_I64(ghost)};
		assert_int_equal(
		    harness_wait_i64(&db,
		                     "SELECT COUNT(*) FROM alerts WHERE kind = "
		                     "'row_missing' AND callback_id = ? AND merchant_id "
		                     "= 'default' AND out_trade_no = 'O-ghost' AND detail "
		                     "LIKE '%channel alipay%'",
		                     in, 1, 1, WAIT_MS),
		    0);
	}
	snprintf(buf, sizeof(buf),
	         "rf%llu: level=error event=alert kind=row_missing order=O-ghost merchant=default "
	         "channel=alipay",
	         ghost);
	assert_int_equal(fx_wait_log(plog, buf, 1, WAIT_MS), 0);
	assert_int_equal(metric_of(missing), 1);

	/* The row is O-real's; the message says O-fake. */
	assert_int_equal(fx_order(&db, M, "O-real", "2.00", "CNY", "PENDING"), 0);
	assert_int_equal(fx_order(&db, M, "O-fake", "2.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-real", "O-real", "2.00", "CNY");
	assert_true(id > 0);
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-fake", 1, RD_KAFKA_PARTITION_UA, NULL), 0);
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(harness_wait_i64(&db,
		                                  "SELECT COUNT(*) FROM alerts WHERE kind = "
		                                  "'row_mismatch' AND callback_id = ? AND "
		                                  "out_trade_no = 'O-fake'",
		                                  in, 1, 1, WAIT_MS),
		                 0);
	}
	assert_int_equal(metric_of(mismatch), 1);
	assert_int_equal(row_i64("SELECT status FROM pay_callback_log WHERE id = ?", id), 0);
	assert_int_equal(row_i64("SELECT retry_count FROM pay_callback_log WHERE id = ?", id), 0);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM orders WHERE out_trade_no IN "
	                                    "('O-real', 'O-fake') AND status <> 'PENDING'"),
	                 0);
}

/*
 * (7) An idle processor's producer sleeps (kafka.producer_sleep_s, 1 s here) and its
 * readiness probe does not wake it: /readyz asks through a consumer. The next payment's
 * events wake it and are relayed (sent_at set), and the payment is applied once.
 */
static void
idle_producer_sleeps_and_wakes_for_the_next_events(void **state)
{
	struct httpc_resp *resp = calloc(1, sizeof(*resp));
	const char *asleep = "event=kafka_producer_asleep", *woken = "event=kafka_producer_woken";
	unsigned long long id;
	long long slept, wakes;

	(void)state;
	assert_non_null(resp);
	assert_int_equal(fx_order(&db, M, "O-sleep7", "5.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-sleep7a", "O-sleep7", "5.00", "CNY");
	assert_true(id > 0);
	/* Asleep once whatever ran before is relayed and a second passed. */
	slept = harness_file_count(plog, asleep);
	assert_int_equal(fx_wait_log(plog, asleep, slept > 0 ? slept : 1, WAIT_MS), 0);
	wakes = harness_file_count(plog, woken);
	assert_int_equal(httpc_request((int)cf.processor.admin_port, "GET", "/readyz", NULL, NULL,
	                               0, 5000, resp),
	                 0);
	assert_int_equal(resp->status, 200);
	assert_int_equal(harness_file_count(plog, woken), wakes);
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-sleep7", 1, RD_KAFKA_PARTITION_UA, NULL),
	    0);
	assert_int_equal(fx_wait_row(&db, 0, id, 1, WAIT_MS), 0);
	assert_int_equal(
	    harness_wait_i64(
	        &db,
	        "SELECT COUNT(*) FROM order_events WHERE out_trade_no = 'O-sleep7' AND "
	        "sent_at IS NOT NULL",
	        NULL, 0, 2, WAIT_MS),
	    0);
	assert_true(harness_file_count(plog, woken) > wakes);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM orders WHERE out_trade_no = "
	                                    "'O-sleep7' AND status = 'PAID'"),
	                 1);
	free(resp);
}

static int
group_setup(void **state)
{
	(void)state;
	return fx_processor_up(&cf, &pub, &pid, plog, sizeof(plog), WAIT_MS);
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
	    cmocka_unit_test(stale_attempt_after_replay_is_not_counted),
	    cmocka_unit_test(future_stamped_message_holds_its_partition_one_step_at_most),
	    cmocka_unit_test(missing_dead_letter_topic_does_not_stop_the_partition),
	    cmocka_unit_test(message_naming_a_missing_or_other_row_is_counted_and_alerted),
	    cmocka_unit_test(idle_producer_sleeps_and_wakes_for_the_next_events),
	};
	int rc;

	if (fx_processor_conf(&cf, "live", "2 3 4", 1) != 0)
		return 1;
	harness_set(&cf.log_level, "debug"); /* the hold lines */
	cf.processor.admin_port = httpc_free_port();
	cf.kafka.producer_sleep_s = 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
