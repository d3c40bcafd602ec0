/*
 * test_kq_batch - kq_publish_batch, paycb's one confirmed-publish path, against the real
 * broker: a batch is delivered whole and is on its topic once; a message that cannot be
 * queued fails alone; and with the broker stopped every message is unknown when the one
 * deadline passes, and the retrier's outbox sweep, which publishes through it, marks nothing
 * sent.
 *
 * "Stopped" is SIGSTOP to the local broker (deploy/local/kafka.sh's pid file): it neither
 * answers nor closes its connections, the hardest case for a deadline. Each such case lasts
 * about three seconds and its teardown sends SIGCONT whatever happened.
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
#include "kq.h"
#include "metrics.h"
#include "retrier.h"

#define NMSG 200

static struct conf cf;
static struct db tdb;
static char topic[256];
static int broker_pid;

static void
broker_stop(void)
{
	printf("# stopping the broker (pid %d) with SIGSTOP\n", broker_pid);
	assert_true(broker_pid > 0);
	assert_int_equal(fx_broker_stop(broker_pid), 0);
}

static struct kq_producer *
producer(const struct conf *c)
{
	struct kq_producer *p = fx_producer(c, topic);

	assert_non_null(p);
	return p;
}

static void
batch_is_delivered_whole_and_on_its_topic_once(void **state)
{
	static char keys[NMSG][16], vals[NMSG][32];
	static struct kq_msg msgs[NMSG];
	static struct kq_result res[NMSG];
	struct kq_producer *p = producer(&cf);
	long long t0 = harness_now_ms();
	int seen = 0;

	(void)state;
	for (int i = 0; i < NMSG; i++) {
		snprintf(keys[i], sizeof(keys[i]), "m1|o%d", i % 17);
		snprintf(vals[i], sizeof(vals[i]), "{\"n\":%d}", i);
		msgs[i] =
		    (struct kq_msg){topic, keys[i], strlen(keys[i]), vals[i], strlen(vals[i])};
	}
	assert_int_equal(kq_publish_batch(p, msgs, NMSG, 10000, res), NMSG);
	printf("# %d messages confirmed in %lld ms\n", NMSG, harness_now_ms() - t0);
	for (int i = 0; i < NMSG; i++)
		assert_int_equal(res[i].rc, KQ_DELIVERED);
	assert_int_equal(fx_read_topic(&cf, topic, fx_count_all, &seen), NMSG);
	assert_int_equal(seen, NMSG);
	kq_producer_free(p);
}

static void
message_that_cannot_be_queued_fails_alone(void **state)
{
	/* Larger than librdkafka's message.max.bytes (1,000,000): refused when produced. */
	size_t big = 2 * 1000 * 1000;
	char *huge = calloc(1, big);
	struct kq_msg msgs[3];
	struct kq_result res[3];
	struct kq_producer *p = producer(&cf);

	(void)state;
	assert_non_null(huge);
	msgs[0] = (struct kq_msg){topic, "k", 1, "a", 1};
	msgs[1] = (struct kq_msg){topic, "k", 1, huge, big};
	msgs[2] = (struct kq_msg){topic, "k", 1, "c", 1};
	assert_int_equal(kq_publish_batch(p, msgs, 3, 10000, res), 2);
	assert_int_equal(res[0].rc, KQ_DELIVERED);
	assert_int_equal(res[1].rc, KQ_FAILED);
	printf("# the large one: %s\n", res[1].err);
	assert_true(res[1].err[0] != '\0');
	assert_int_equal(res[2].rc, KQ_DELIVERED);
	kq_producer_free(p);
	free(huge);
}

static void
stopped_broker_leaves_every_message_unknown_by_the_deadline(void **state)
{
	struct kq_msg msgs[20];
	struct kq_result res[20];
	struct conf c2 = cf;
	struct kq_producer *p;
	long long t0, ms;

	(void)state;
	/* librdkafka's own timeout far beyond the batch's deadline: no report can come first. */
	c2.kafka.delivery_timeout_ms = 60000;
	p = producer(&c2);
	for (int i = 0; i < 20; i++)
		msgs[i] = (struct kq_msg){topic, "k", 1, "v", 1};
	broker_stop();
	t0 = harness_now_ms();
	assert_int_equal(kq_publish_batch(p, msgs, 20, 1500, res), 0);
	ms = harness_now_ms() - t0;
	fx_broker_resume(NULL);
	printf("# 20 messages unknown after %lld ms (deadline 1500 ms)\n", ms);
	/*
	 * The deadline, not a speed: it waited for it, and once for the batch, not per message
	 * (20 x 1.5 s would be 30 s); the slack is for a loaded machine.
	 */
	assert_true(ms >= 1400 && ms < 1500 + 3000);
	for (int i = 0; i < 20; i++) {
		assert_int_equal(res[i].rc, KQ_UNKNOWN);
		assert_string_equal(res[i].err, "no delivery report by the deadline");
	}
	kq_producer_free(p);
}

static void
stopped_broker_outbox_row_is_not_marked_sent(void **state)
{
	static const char *ins =
	    "INSERT INTO order_events (event_id, merchant_id, out_trade_no, event_type, payload, "
	    "callback_id, created_at) VALUES ('ev-stopped', 'm1', 'o-stopped', "
	    "'order.paid.shipment', '{\"v\":1,\"event_id\":\"ev-stopped\"}', 7, NOW(3) - INTERVAL "
	    "1 HOUR)";
	struct conf c2 = cf;
	struct retrier *r = NULL;
	char err[256];
	long long t0, ms;
	int more;

	(void)state;
	/* The retrier waits the delivery timeout plus a second: keep both short. */
	c2.kafka.delivery_timeout_ms = 2000;
	assert_int_equal(db_exec(&tdb, "DELETE FROM order_events", NULL, 0, NULL, NULL), DB_OK);
	assert_int_equal(db_exec(&tdb, ins, NULL, 0, NULL, NULL), DB_OK);
	if (retrier_open(&c2, &r, err, sizeof(err)) != 0)
		printf("# retrier_open: %s\n", err);
	assert_non_null(r);
	broker_stop();
	t0 = harness_now_ms();
	assert_int_equal(retrier_cycle(r, &more), 0);
	ms = harness_now_ms() - t0;
	fx_broker_resume(NULL);
	printf("# outbox sweep with the broker stopped: %lld ms, failed=%lld sent=%lld\n", ms,
	       r->last.failed, r->last.outbox_sent);
	/* The phase's deadline (delivery timeout + 1 s), with slack for a loaded machine. */
	assert_true(ms < 2000 + 1000 + 4000);
	assert_int_equal(r->last.outbox_sent, 0);
	assert_int_equal(r->last.failed, 1);
	assert_int_equal(harness_count(&tdb, "SELECT COUNT(*) FROM order_events WHERE event_id = "
	                                     "'ev-stopped' AND sent_at IS NULL"),
	                 1);
	retrier_close(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(batch_is_delivered_whole_and_on_its_topic_once),
	    cmocka_unit_test(message_that_cannot_be_queued_fails_alone),
	    cmocka_unit_test_teardown(stopped_broker_leaves_every_message_unknown_by_the_deadline,
	                              fx_broker_resume),
	    cmocka_unit_test_teardown(stopped_broker_outbox_row_is_not_marked_sent,
	                              fx_broker_resume),
	};
	const char *names[1];
	int parts[1] = {3};
	char err[256];
	int rc;

	if (harness_setup(&cf, "kqbatch", NULL) != 0)
		return 1;
	conf_topic(&cf, "kqbatch", topic, sizeof(topic));
	names[0] = topic;
	if (kq_create_topics(&cf.kafka, names, parts, NULL, 1, 30000, NULL, err, sizeof(err)) !=
	    0) {
		printf("# %s\n", err);
		return 1;
	}
	broker_pid = fx_broker_pid();
	harness_db(&cf, &tdb);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	metrics_free();
	harness_teardown(&cf);
	return rc;
}
