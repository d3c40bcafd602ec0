/*
 * test_event_order - events of one order leave in commit order (issue 17 item 8), against a
 * real bin/paycb-processor and the retrier's library driven one cycle at a time.
 *
 * The relay loses an order's payment events (the order-events topic is deleted while the
 * payment is processed; the broker's auto-create is off), the topic comes back, and the
 * order's refund is processed. The refund must not reach the topic before the payment: the
 * relay holds it back, and the retrier's outbox sweep sends the payment's events and then the
 * refund. The check reads the topic and compares, for the order's key, the first copy of each
 * event with the order of their rows (copies after the first are harmless: consumers
 * deduplicate on event_id).
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
#include "topics.h"
#include "kq.h"
#include "msg.h"
#include "retrier.h"

#define WAIT_MS 30000
#define M       "default"

static struct conf cf;
static struct db db;
static struct fx_pub *pub;
static int pid = -1;
static char plog[1024];

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

/* The first copy of each event of one key, in topic order. */
struct seen {
	const char *key;
	char ids[16][400];
	int n, copies;
};

static int
seen_cb(void *arg, const rd_kafka_message_t *m)
{
	struct seen *s = arg;
	json_t *o;
	const char *id;

	if (m->key_len != strlen(s->key) || memcmp(m->key, s->key, m->key_len) != 0)
		return 0;
	s->copies++;
	if ((o = json_loadb(m->payload, m->len, 0, NULL)) == NULL)
		return 0;
	if ((id = json_string_value(json_object_get(o, "event_id"))) != NULL) {
		int i;

		for (i = 0; i < s->n && strcmp(s->ids[i], id) != 0; i++)
			;
		if (i == s->n && s->n < 16)
			snprintf(s->ids[s->n++], sizeof(s->ids[0]), "%s", id);
	}
	json_decref(o);
	return 0;
}

/* The order_events row id of an event id, 0 when there is none. */
static long long
event_row(const char *event_id)
{
	struct db_in in[1] = {DBI_STR(event_id)};

	return harness_query_i64(&db, "SELECT id FROM order_events WHERE event_id = ?", in, 1);
}

static void
relay_loss_does_not_reorder_an_orders_events(void **state)
{
	struct conf rc = cf;
	char topic[256], key[200], needle[128];
	struct seen s = {0};
	struct retrier *r = NULL;
	unsigned long long a, b;
	long long deadline, prev = 0;
	int more, held;

	(void)state;
	conf_topic(&cf, "order-events", topic, sizeof(topic));
	assert_int_equal(fx_order(&db, M, "O-ord8", "10.00", "CNY", "PENDING"), 0);
	a = fx_pay_row(&db, &cf, M, "wxpay", "T-ord8", "O-ord8", "10.00", "CNY");
	b = fx_refund_row(&db, &cf, M, "wxpay", "R-ord8", "T-ord8", "O-ord8", "1.00", 0, "CNY");
	assert_true(a > 0 && b > 0);

	/* The payment is applied while its events cannot be published: the relay loses them. */
	assert_int_equal(topics_delete(&cf.kafka, (const char *const[]){topic}, 1, 30000), 0);
	assert_int_equal(
	    fx_publish(pub, NULL, 0, a, M, "wxpay", "O-ord8", 1, RD_KAFKA_PARTITION_UA, NULL), 0);
	assert_int_equal(fx_wait_row(&db, 0, a, 1, WAIT_MS), 0);
	snprintf(needle, sizeof(needle), "cb%llu: level=warn event=outbox_unsent", a);
	assert_int_equal(fx_wait_log(plog, needle, 2, WAIT_MS), 0);
	assert_int_equal(harness_wait_until(try_create_topic, topic, WAIT_MS), 0);

	/* The refund comes after: the relay must hold it back behind the lost payment. */
	assert_int_equal(
	    fx_publish(pub, NULL, 1, b, M, "wxpay", "O-ord8", 1, RD_KAFKA_PARTITION_UA, NULL), 0);
	assert_int_equal(fx_wait_row(&db, 1, b, 1, WAIT_MS), 0);
	/* The relay's verdict on the refund's event: held back, or (wrongly) published. */
	snprintf(needle, sizeof(needle), "rf%llu: level=warn event=outbox_held_back", b);
	held = fx_wait_log(plog, needle, 1, 15000) == 0;

	/* The retrier's sweep takes over: the payment's events first, then the refund. */
	rc.retrier.outbox_after_s = 1;
	assert_int_equal(retrier_open(&rc, &r, needle, sizeof(needle)), 0);
	deadline = harness_now_ms() + WAIT_MS;
	while (harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE sent_at IS NULL") > 0 &&
	       harness_now_ms() < deadline) {
		/* Rows younger than outbox_after_s are not taken yet: wait until one is due. */
		harness_wait_i64(&db,
		                 "SELECT COUNT(*) > 0 FROM order_events WHERE sent_at IS NULL AND "
		                 "created_at <= NOW(3) - INTERVAL 1 SECOND",
		                 NULL, 0, 1, 5000);
		assert_int_equal(retrier_cycle(r, &more), 0);
	}
	retrier_close(r);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE sent_at IS "
	                                    "NULL"),
	                 0);

	assert_true(msg_key(M, "O-ord8", key, sizeof(key)) > 0);
	s.key = key;
	assert_true(fx_read_topic(&cf, topic, seen_cb, &s) >= 0);
	printf("# %d events of the order on the topic (%d copies)\n", s.n, s.copies);
	assert_int_equal(s.n, 3);
	for (int i = 0; i < s.n; i++) {
		long long row = event_row(s.ids[i]);

		printf("#   %d: %s (row %lld)\n", i, s.ids[i], row);
		assert_true(row > prev);
		prev = row;
	}
	assert_true(held);
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
	    cmocka_unit_test(relay_loss_does_not_reorder_an_orders_events),
	};
	int rc;

	if (fx_processor_conf(&cf, "evorder", "2 3 4", 1) != 0)
		return 1;
	/* A lost publish is given up after 2 s (the relay waits for its delivery report). */
	cf.kafka.delivery_timeout_ms = 2000;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, group_setup, group_teardown);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
