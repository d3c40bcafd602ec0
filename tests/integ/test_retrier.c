/*
 * test_retrier - the retrier's modules against the real MariaDB and Kafka, driven one cycle
 * at a time through the library the daemon runs (build/lib retrier): leases and the topic of
 * each ladder step, the dead transition with its alert and exactly one dead letter, a dead
 * letter whose publish failed and is retried, the outbox relay, the purge, the stuck-row
 * alarm and the per-step gauges, the sweep query's plan, and an idle cycle that costs one
 * statement (the probe) and still sets the gauges.
 *
 * Every test starts from empty logs; messages stay on the topics, so they are counted by row
 * id (ids are never reused). Topic contents are read up to the high watermarks
 * (fx_read_topic), which is exact because every publish waited for its delivery report.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "kq.h"
#include "ladder.h"
#include "metrics.h"
#include "msg.h"
#include "retrier.h"

static struct conf cf;
static struct db tdb;
static int seq;

static const char *SQL_ADD =
    "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, out_trade_no, "
    "event_type, trade_status, amount, currency, raw_body, body_sha256, status, retry_count, "
    "next_retry_at, last_error, done_at) VALUES ('m1', 'wxpay', ?, ?, 'TRANSACTION.SUCCESS', "
    "'SUCCESS', '88.88', 'CNY', ?, SHA2(?, 256), ?, ?, NOW(3) + INTERVAL ? SECOND, ?, IF(? = "
    "1, NOW(3) + INTERVAL ? SECOND, NULL))";

/* add_row - a payment row; due_in_s < 0 is overdue; done rows are done done_ago_s ago. */
static unsigned long long
add_row(const char *order, int status, int retry_count, long long due_in_s, long long done_ago_s)
{
	char trade[64], body[96];
	unsigned long long id = 0;

	snprintf(trade, sizeof(trade), "42000%06d", ++seq);
	snprintf(body, sizeof(body), "{\"out_trade_no\":\"%s\",\"secret\":\"body-%d\"}", order,
	         seq);
	{
		struct db_in in[10] = {DBI_STR(trade),    DBI_STR(order),
		                       DBI_STR(body),     DBI_STR(body),
		                       DBI_I64(status),   DBI_I64(retry_count),
		                       DBI_I64(due_in_s), DBI_STR("order not found"),
		                       DBI_I64(status),   DBI_I64(-done_ago_s)};
		assert_int_equal(db_exec(&tdb, SQL_ADD, in, 10, NULL, &id), DB_OK);
	}
	return id;
}

static long long
q(const char *fmt, ...)
{
	static char sql[8][512];
	static int slot;
	va_list ap;
	char *s = sql[slot++ % 8];
	long long v;

	/* Literal-only helpers: built from test constants; a fresh connection per query keeps
	 * the statement cache (keyed by address) from seeing a reused buffer. */
	va_start(ap, fmt);
	vsnprintf(s, 512, fmt, ap);
	va_end(ap);
	{
		struct db d;
		harness_db(&cf, &d);
		v = harness_count(&d, s);
		db_close(&d);
	}
	return v;
}

struct count_arg {
	unsigned long long id;
	int n;
	char *last;
	size_t lastlen;
};

static int
count_cb(void *arg, const rd_kafka_message_t *m)
{
	struct count_arg *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);

	if (a->id == 0 ||
	    (o && (unsigned long long)json_integer_value(json_object_get(o, "id")) == a->id)) {
		a->n++;
		if (a->last)
			snprintf(a->last, a->lastlen, "%.*s", (int)m->len,
			         (const char *)m->payload);
	}
	json_decref(o);
	return 0;
}

/* topic_count - messages on topic whose JSON "id" is id (all of them if id is 0); with
 * last, the last such message's payload is copied there. */
static int
topic_count(const char *topic, unsigned long long id, char *last, size_t lastlen)
{
	struct count_arg a = {id, 0, last, lastlen};

	assert_true(fx_read_topic(&cf, topic, count_cb, &a) >= 0);
	return a.n;
}

static struct retrier *
open_retrier(const struct conf *c)
{
	struct retrier *r = NULL;
	char err[256];

	if (retrier_open(c, &r, err, sizeof(err)) != 0)
		printf("# retrier_open: %s\n", err);
	assert_non_null(r);
	return r;
}

static int
clean(void **state)
{
	(void)state;
	assert_int_equal(db_exec(&tdb, "DELETE FROM pay_callback_log", NULL, 0, NULL, NULL), DB_OK);
	assert_int_equal(db_exec(&tdb, "DELETE FROM refund_callback_log", NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_int_equal(db_exec(&tdb, "DELETE FROM alerts", NULL, 0, NULL, NULL), DB_OK);
	assert_int_equal(db_exec(&tdb, "DELETE FROM order_events", NULL, 0, NULL, NULL), DB_OK);
	return 0;
}

static void
due_row_is_leased_once_and_published_on_its_step(void **state)
{
	struct retrier *a = open_retrier(&cf), *b = open_retrier(&cf);
	unsigned long long id;
	char topic[256], last[512], err[128];
	struct msg_callback m;
	int more;

	(void)state;
	id = add_row("o-step2", 0, 2, -1, 0);
	assert_int_equal(retrier_cycle(a, &more), 0);
	assert_int_equal(a->last.leased, 1);
	assert_int_equal(a->last.republished, 1);
	/* The lease is step 2's delay plus the margin; the second retrier finds nothing due. */
	assert_int_equal(q("SELECT TIMESTAMPDIFF(SECOND, NOW(3), next_retry_at) BETWEEN %lld AND "
	                   "%lld FROM pay_callback_log WHERE id = %llu",
	                   ladder_delay(&cf.retry, 2) + cf.retry.lease_margin_s - 2,
	                   ladder_delay(&cf.retry, 2) + cf.retry.lease_margin_s, id),
	                 1);
	assert_int_equal(retrier_cycle(b, &more), 0);
	assert_int_equal(b->last.due, 0);
	ladder_topic(&cf, 2, topic, sizeof(topic));
	assert_int_equal(topic_count(topic, id, last, sizeof(last)), 1);
	assert_int_equal(msg_callback_decode(last, strlen(last), &m, err, sizeof(err)), 0);
	assert_int_equal(m.attempt, 3);
	assert_string_equal(m.out_trade_no, "o-step2");
	assert_int_equal(q("SELECT retry_count FROM pay_callback_log WHERE id = %llu", id), 2);
	retrier_close(a);
	retrier_close(b);
}

static void
lost_first_publish_goes_to_main_topic_replayed_row_to_first_step(void **state)
{
	struct retrier *r = open_retrier(&cf);
	unsigned long long lost, replayed, young;
	char main_topic[256], step1[256];
	int more;

	(void)state;
	lost = add_row("o-lost", 0, 0, -1, 0);
	replayed = add_row("o-replayed", 0, 0, -1, 0);
	young = add_row("o-young", 0, 0, 30, 0); /* still inside ingest's initial lease */
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET replayed_at = NOW(3) WHERE "
	                         "out_trade_no = 'o-replayed'",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.republished, 2);
	/* A lost first attempt is leased for ingest's initial lease again. */
	assert_int_equal(q("SELECT TIMESTAMPDIFF(SECOND, NOW(3), next_retry_at) >= %lld FROM "
	                   "pay_callback_log WHERE id = %llu",
	                   cf.retry.initial_lease_s - 2, lost),
	                 1);
	conf_topic(&cf, "callbacks", main_topic, sizeof(main_topic));
	ladder_topic(&cf, 1, step1, sizeof(step1));
	assert_int_equal(topic_count(main_topic, lost, NULL, 0), 1);
	assert_int_equal(topic_count(step1, lost, NULL, 0), 0);
	assert_int_equal(topic_count(step1, replayed, NULL, 0), 1);
	assert_int_equal(topic_count(main_topic, replayed, NULL, 0), 0);
	assert_int_equal(topic_count(main_topic, young, NULL, 0), 0);
	retrier_close(r);
}

static void
past_last_step_dead_with_alert_and_one_dead_letter(void **state)
{
	struct retrier *r = open_retrier(&cf);
	int n = ladder_steps(&cf.retry), more;
	char dlq[256], last[2048];
	unsigned long long id, alive, proc_dead;
	json_t *o;

	(void)state;
	id = add_row("o-dead", 0, n + 1, -1, 0);
	alive = add_row("o-last-step", 0, n, -1, 0);
	/* A row the processor made dead (it publishes that dead letter itself) is left alone. */
	proc_dead = add_row("o-mismatch", 2, 0, -1, 0);
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET outcome = 'amount_mismatch' "
	                         "WHERE out_trade_no = 'o-mismatch'",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.dead, 1);
	assert_int_equal(r->last.dlq_sent, 1);
	assert_int_equal(q("SELECT status FROM pay_callback_log WHERE id = %llu", id), 2);
	assert_int_equal(q("SELECT status FROM pay_callback_log WHERE id = %llu", alive), 0);
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu AND "
	                   "dlq_sent_at IS NOT NULL AND dead_reason = 'ladder_exhausted' AND "
	                   "raw_body IS NOT NULL",
	                   id),
	                 1);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'dead_letter' AND "
	                   "callback_id = %llu",
	                   id),
	                 1);
	/* Later cycles neither alert nor dead-letter it again. */
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'dead_letter'"), 1);
	conf_topic(&cf, "callbacks.dlq", dlq, sizeof(dlq));
	assert_int_equal(topic_count(dlq, id, last, sizeof(last)), 1);
	assert_int_equal(topic_count(dlq, alive, NULL, 0), 0);
	assert_int_equal(topic_count(dlq, proc_dead, NULL, 0), 0);
	o = json_loads(last, 0, NULL);
	assert_non_null(o);
	/* Every field dlq.schema.json requires. */
	assert_int_equal(json_integer_value(json_object_get(o, "v")), 1);
	assert_string_equal(json_string_value(json_object_get(o, "log")), "pay");
	assert_string_equal(json_string_value(json_object_get(o, "merchant_id")), "m1");
	assert_string_equal(json_string_value(json_object_get(o, "channel")), "wxpay");
	assert_non_null(json_string_value(json_object_get(o, "channel_trade_no")));
	assert_string_equal(json_string_value(json_object_get(o, "out_trade_no")), "o-dead");
	assert_int_equal(json_integer_value(json_object_get(o, "retry_count")), n + 1);
	assert_string_equal(json_string_value(json_object_get(o, "last_error")), "order not found");
	assert_string_equal(json_string_value(json_object_get(o, "reason")), "ladder_exhausted");
	assert_int_equal(strlen(json_string_value(json_object_get(o, "created_at"))), 23);
	assert_int_equal(strlen(json_string_value(json_object_get(o, "dead_at"))), 23);
	assert_int_equal(json_object_size(o), 12);
	json_decref(o);
	retrier_close(r);
}

static void
failed_dead_letter_is_published_again(void **state)
{
	struct conf broken = cf, good = cf;
	struct retrier *r;
	char dlq[256];
	unsigned long long id;
	int more;

	(void)state;
	id = add_row("o-dlq-retry", 0, ladder_steps(&cf.retry) + 1, -1, 0);
	/* A retrier whose dead-letter topic does not exist: the row becomes dead, the publish
	 * fails within the short delivery timeout, and dlq_sent_at stays NULL. */
	broken.kafka.delivery_timeout_ms = 1500;
	broken.retry.lease_margin_s = 1;
	r = open_retrier(&broken);
	snprintf(r->topic_dlq, sizeof(r->topic_dlq), "%s.no-such-dlq", cf.kafka.topic_prefix);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.dead, 1);
	assert_int_equal(r->last.dlq_sent, 0);
	assert_int_equal(r->last.failed, 1);
	retrier_close(r);
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu AND status = 2 "
	                   "AND dlq_sent_at IS NULL",
	                   id),
	                 1);
	/* When the one-second lease has passed, a healthy retrier publishes it, once. */
	good.retry.lease_margin_s = 1;
	r = open_retrier(&good);
	for (long long end = harness_now_ms() + 10000;
	     harness_now_ms() < end && q("SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu "
	                                 "AND dlq_sent_at IS NULL",
	                                 id) == 1;)
		assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu AND "
	                   "dlq_sent_at IS NOT NULL",
	                   id),
	                 1);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'dead_letter'"), 1);
	conf_topic(&cf, "callbacks.dlq", dlq, sizeof(dlq));
	assert_int_equal(topic_count(dlq, id, NULL, 0), 1);
	retrier_close(r);
}

static void
outbox_relays_only_old_unsent_rows(void **state)
{
	static const char *ins =
	    "INSERT INTO order_events (event_id, merchant_id, out_trade_no, event_type, payload, "
	    "callback_id, sent_at, created_at) VALUES (?, 'm1', ?, 'order.paid.shipment', ?, 7, "
	    "IF(? = 1, NOW(3), NULL), NOW(3) - INTERVAL ? SECOND)";
	struct retrier *r = open_retrier(&cf);
	char topic[256];
	int more, before;

	(void)state;
	conf_topic(&cf, "order-events", topic, sizeof(topic));
	before = topic_count(topic, 0, NULL, 0);
	{
		struct db_in a[5] = {DBI_STR("ev-old"), DBI_STR("o-ob-1"),
		                     DBI_STR("{\"v\":1,\"event_id\":\"ev-old\"}"), DBI_I64(0),
		                     DBI_I64(3600)};
		struct db_in b[5] = {DBI_STR("ev-young"), DBI_STR("o-ob-2"),
		                     DBI_STR("{\"v\":1,\"event_id\":\"ev-young\"}"), DBI_I64(0),
		                     DBI_I64(0)};
		struct db_in c[5] = {DBI_STR("ev-sent"), DBI_STR("o-ob-3"),
		                     DBI_STR("{\"v\":1,\"event_id\":\"ev-sent\"}"), DBI_I64(1),
		                     DBI_I64(3600)};
		assert_int_equal(db_exec(&tdb, ins, a, 5, NULL, NULL), DB_OK);
		assert_int_equal(db_exec(&tdb, ins, b, 5, NULL, NULL), DB_OK);
		assert_int_equal(db_exec(&tdb, ins, c, 5, NULL, NULL), DB_OK);
	}
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.outbox_sent, 1);
	assert_int_equal(
	    q("SELECT COUNT(*) FROM order_events WHERE event_id = 'ev-old' AND sent_at "
	      "IS NOT NULL"),
	    1);
	assert_int_equal(q("SELECT COUNT(*) FROM order_events WHERE event_id = 'ev-young' AND "
	                   "sent_at IS NULL"),
	                 1);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.outbox_sent, 0);
	assert_int_equal(topic_count(topic, 0, NULL, 0), before + 1);
	retrier_close(r);
}

static void
purge_clears_only_done_bodies(void **state)
{
	struct conf c2 = cf;
	struct retrier *r;
	int more;

	(void)state;
	c2.retrier.purge_after_s = 86400;
	c2.retrier.purge_batch = 2; /* several batches, and ties on done_at across them */
	for (int i = 0; i < 5; i++)
		add_row("o-purge-old", 1, 0, -1, 2 * 86400);
	add_row("o-purge-old", 1, 0, -1, 3 * 86400);
	add_row("o-purge-young", 1, 0, -1, 3600);
	add_row("o-purge-pending", 0, 1, 3600, 0);
	add_row("o-purge-dead", 2, 9, 3600, 0);
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET created_at = NOW(3) - INTERVAL "
	                         "4 DAY WHERE out_trade_no IN ('o-purge-pending', "
	                         "'o-purge-dead')",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	r = open_retrier(&c2);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.purged, 6);
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE raw_body IS NULL"), 6);
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE raw_body IS NULL AND "
	                   "out_trade_no <> 'o-purge-old'"),
	                 0);
	/* The hash and the outcome fields stay. */
	assert_int_equal(q("SELECT COUNT(*) FROM pay_callback_log WHERE LENGTH(body_sha256) = 64"),
	                 9);
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.purged, 0);
	retrier_close(r);
}

static void
stuck_alarm_up_when_rows_overdue(void **state)
{
	struct conf c2 = cf;
	struct retrier *r;
	int more;

	(void)state;
	c2.retrier.stuck_after_s = 60;
	/* Due two minutes ago and never leased: no retrier ran. One due a moment ago is not. */
	add_row("o-stuck", 0, 1, -120, 0);
	add_row("o-stuck", 0, 2, -180, 0);
	add_row("o-due", 0, 1, -5, 0);
	r = open_retrier(&c2);
	assert_int_equal(retrier_alarm_check(r, &r->last), 0);
	assert_int_equal(r->last.stuck, 2);
	assert_int_equal(metrics_value(retrier_mx.stuck[CBLOG_PAY]), 2);
	assert_true(metrics_value(retrier_mx.stuck_oldest_s) >= 180);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'stuck_rows'"), 1);
	/* While it stays up, the next checks do not raise a second alert. */
	assert_int_equal(retrier_alarm_check(r, &r->last), 0);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'stuck_rows'"), 1);
	/* A cycle leases them; the next check clears the gauge. */
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.republished, 3);
	assert_int_equal(retrier_alarm_check(r, &r->last), 0);
	assert_int_equal(metrics_value(retrier_mx.stuck[CBLOG_PAY]), 0);
	assert_int_equal(r->alarm_up, 0);
	retrier_close(r);
}

static void
gauges_count_rows_per_step_and_dead(void **state)
{
	struct retrier *r = open_retrier(&cf);
	int n = ladder_steps(&cf.retry);

	(void)state;
	add_row("o-g", 0, 0, 60, 0);
	add_row("o-g", 0, 1, 60, 0);
	add_row("o-g", 0, 1, 60, 0);
	add_row("o-g", 0, n, 60, 0);
	add_row("o-g", 2, n + 1, 60, 0);
	add_row("o-g", 1, 0, 60, 10);
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET dead_reason = "
	                         "'ladder_exhausted' WHERE status = 2",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_int_equal(retrier_gauges(r), 0);
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_PAY][0]), 1);
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_PAY][1]), 2);
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_PAY][n]), 1);
	assert_int_equal(metrics_value(retrier_mx.dead_rows[CBLOG_PAY]), 1);
	assert_int_equal(metrics_value(retrier_mx.dlq_unsent[CBLOG_PAY]), 1);
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_REFUND][1]), 0);
	retrier_close(r);
}

static void
refund_rows_walk_the_same_ladder(void **state)
{
	static const char *ins =
	    "INSERT INTO refund_callback_log (merchant_id, channel, refund_no, out_trade_no, "
	    "amount, currency, raw_body, body_sha256, retry_count, next_retry_at, last_error) "
	    "VALUES ('m1', 'stripe', ?, 'o-refund', '5.00', 'USD', 'body', REPEAT('0', 64), ?, "
	    "NOW(3) - INTERVAL 1 SECOND, 'no payment yet')";
	struct retrier *r = open_retrier(&cf);
	unsigned long long step, dead;
	char topic[256], last[2048];
	int more;

	(void)state;
	{
		struct db_in a[2] = {DBI_STR("re_step"), DBI_I64(1)};
		struct db_in b[2] = {DBI_STR("re_dead"), DBI_I64(ladder_steps(&cf.retry) + 1)};
		assert_int_equal(db_exec(&tdb, ins, a, 2, NULL, &step), DB_OK);
		assert_int_equal(db_exec(&tdb, ins, b, 2, NULL, &dead), DB_OK);
	}
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.republished, 1);
	assert_int_equal(r->last.dead, 1);
	assert_int_equal(r->last.dlq_sent, 1);
	ladder_topic(&cf, 1, topic, sizeof(topic));
	assert_int_equal(topic_count(topic, step, last, sizeof(last)), 1);
	assert_non_null(strstr(last, "\"log\":\"refund\""));
	conf_topic(&cf, "callbacks.dlq", topic, sizeof(topic));
	assert_int_equal(topic_count(topic, dead, last, sizeof(last)), 1);
	assert_non_null(strstr(last, "\"log\":\"refund\""));
	/* For refunds the dead letter's channel_trade_no is the refund number. */
	assert_non_null(strstr(last, "\"channel_trade_no\":\"re_dead\""));
	assert_int_equal(q("SELECT status FROM refund_callback_log WHERE id = %llu", dead), 2);
	retrier_close(r);
}

/* stmt_executes - the statements the retrier's own connection has executed so far. */
static long long
stmt_executes(struct retrier *r)
{
	struct db_out out[1] = {DBO_I64()};

	assert_int_equal(db_query(&r->db,
	                          "SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM "
	                          "information_schema.SESSION_STATUS WHERE VARIABLE_NAME = "
	                          "'COM_STMT_EXECUTE'",
	                          NULL, 0, out, 1, NULL, NULL, NULL),
	                 DB_OK);
	return out[0].i;
}

static void
idle_cycle_is_one_statement_and_keeps_the_gauges(void **state)
{
	struct retrier *r = open_retrier(&cf);
	long long base, used;
	unsigned long long id;
	int more;

	(void)state;
	/* Rows that need nothing now: leased, done a moment ago, dead with its letter sent. */
	id = add_row("o-idle", 0, 1, 60, 0);
	add_row("o-idle", 1, 0, 60, 1);
	add_row("o-idle", 2, 2, -60, 0);
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET dead_reason = 'ladder_exhausted', "
	                         "dlq_sent_at = NOW(3) WHERE status = 2",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	/* The first cycle walks the purge cursor from the start; the next ones are idle. */
	assert_int_equal(retrier_cycle(r, &more), 0);
	base = stmt_executes(r);
	base = stmt_executes(r) - base; /* what reading the counter costs */
	for (int i = 0; i < 3; i++) {
		used = stmt_executes(r);
		assert_int_equal(retrier_cycle(r, &more), 0);
		used = stmt_executes(r) - used - base;
		printf("# idle cycle %d: %lld statements\n", i + 1, used);
		assert_int_equal(used, 1);
		assert_int_equal(more, 0);
	}
	/* The one statement still sets every gauge the sweeps used to. */
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_PAY][1]), 1);
	assert_int_equal(metrics_value(retrier_mx.dead_rows[CBLOG_PAY]), 1);
	assert_int_equal(metrics_value(retrier_mx.dlq_unsent[CBLOG_PAY]), 0);
	assert_int_equal(metrics_value(retrier_mx.stuck[CBLOG_PAY]), 0);
	/* A row that comes due is taken by the next cycle, whose end reads the gauges again. */
	{
		struct db_in in[1] = {DBI_I64(id)};

		assert_int_equal(db_exec(&tdb,
		                         "UPDATE pay_callback_log SET next_retry_at = NOW(3) - "
		                         "INTERVAL 1 SECOND WHERE id = ?",
		                         in, 1, NULL, NULL),
		                 DB_OK);
	}
	assert_int_equal(retrier_cycle(r, &more), 0);
	assert_int_equal(r->last.republished, 1);
	assert_int_equal(metrics_value(retrier_mx.pending[CBLOG_PAY][1]), 1);
	retrier_close(r);
}

static void
sweep_query_plan_uses_idx_retry(void **state)
{
	static char explain[CBLOG_N][1024];
	char plan[8192];

	(void)state;
	/* 20,000 rows, 1% of them pending; the 1,000,000-row case is test_retrier_scale. */
	assert_int_equal(
	    db_exec(
	        &tdb,
	        "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, "
	        "out_trade_no, amount, currency, body_sha256, status, next_retry_at, done_at) "
	        "SELECT 'm1', 'wxpay', CONCAT('plan', seq), CONCAT('o', seq), '1.00', 'CNY', "
	        "REPEAT('0', 64), IF(seq % 100 = 0, 0, 1), NOW(3) - INTERVAL (seq % 5000) SECOND, "
	        "NOW(3) FROM seq_1_to_20000",
	        NULL, 0, NULL, NULL),
	    DB_OK);
	for (int lg = 0; lg < CBLOG_N; lg++) {
		struct db_out out[1] = {DBO_STR(plan, sizeof(plan))};
		struct db_in in[1] = {DBI_I64(500)};

		snprintf(explain[lg], sizeof(explain[lg]), "EXPLAIN FORMAT=JSON %s",
		         retrier_sql_due[lg]);
		assert_int_equal(db_query(&tdb, explain[lg], in, 1, out, 1, NULL, NULL, NULL),
		                 DB_OK);
		printf("# plan %s: key %s, filesort %s\n", lg ? "refund" : "pay",
		       strstr(plan, "\"key\": \"idx_retry\"") ? "idx_retry" : "OTHER",
		       strstr(plan, "filesort") ? "yes" : "no");
		assert_non_null(strstr(plan, "\"key\": \"idx_retry\""));
		assert_null(strstr(plan, "filesort"));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(due_row_is_leased_once_and_published_on_its_step, clean),
	    cmocka_unit_test_setup(lost_first_publish_goes_to_main_topic_replayed_row_to_first_step,
	                           clean),
	    cmocka_unit_test_setup(past_last_step_dead_with_alert_and_one_dead_letter, clean),
	    cmocka_unit_test_setup(failed_dead_letter_is_published_again, clean),
	    cmocka_unit_test_setup(outbox_relays_only_old_unsent_rows, clean),
	    cmocka_unit_test_setup(purge_clears_only_done_bodies, clean),
	    cmocka_unit_test_setup(stuck_alarm_up_when_rows_overdue, clean),
	    cmocka_unit_test_setup(gauges_count_rows_per_step_and_dead, clean),
	    cmocka_unit_test_setup(refund_rows_walk_the_same_ladder, clean),
	    cmocka_unit_test_setup(sweep_query_plan_uses_idx_retry, clean),
	    cmocka_unit_test_setup(idle_cycle_is_one_statement_and_keeps_the_gauges, clean),
	};
	int rc;

	if (harness_setup(&cf, "retrier", "1 2 3") != 0)
		return 1;
	cf.retry.lease_margin_s = 5;
	cf.retry.initial_lease_s = 10;
	cf.retrier.batch = 100;
	harness_db(&cf, &tdb);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	metrics_free();
	harness_teardown(&cf);
	return rc;
}
