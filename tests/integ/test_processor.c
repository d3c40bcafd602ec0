/*
 * test_processor - every row of the processor's design table against the processor driven
 * in-process (proc_apply, the function its consumer path runs for each message), the real
 * MariaDB and the real Kafka broker (the outbox relay, the dead letters).
 *
 * Each case creates its order and reserves its callback rows exactly as ingest does, applies
 * the callback message as the daemon applies a delivered one, then checks the outcome: paid with
 * its two outbox events relayed once each, duplicate, paid twice, paid after close, amount and
 * currency mismatch (dead, alert, exactly one dead letter read back from the topic), order not
 * found (failure recorded, offset committed; a second copy of the same attempt not counted again),
 * a lock wait timeout (recorded like any retryable failure), refunds partial then full, cumulative
 * refunds, a refund exceeding the payment, a refund before its payment, and out-of-order
 * arrival.
 *
 * Two cases are about the daemon and run against a real bin/paycb-processor (two consumer
 * threads) with messages published as ingest publishes them: a recorded failure's offset is
 * committed, and the log lines (one per outcome, callback id first) of callbacks the case
 * publishes itself.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "inproc.h"
#include "msg.h"
#include "processor.h"
#include "retrier.h"

#define WAIT_MS 30000
#define M       "default"

static struct conf cf;
static struct db db;
static struct proc *proc;  /* the in-process processor of the first group */
static struct fx_pub *pub; /* the publisher and the daemon of the second group */
static int pid = -1;
static char plog[1024];
static const char *outcome; /* what proc_apply made of the last message applied */

static long long
q1(const char *sql, const char *s)
{
	struct db_in in[1] = {DBI_STR(s)};

	return harness_query_i64(&db, sql, in, 1);
}

static long long
qid(const char *sql, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&db, sql, in, 1);
}

/* One string column of the first row for one string parameter ("" when none). */
static const char *
qs(const char *sql, const char *s, char *buf, size_t cap)
{
	struct db_in in[1] = {DBI_STR(s)};
	struct db_out out[1] = {DBO_STR(buf, cap)};
	unsigned long long rows = 0;

	buf[0] = '\0';
	if (db_query(&db, sql, in, 1, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0)
		buf[0] = '\0';
	return buf;
}

static const char *
qsid(const char *sql, unsigned long long id, char *buf, size_t cap)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[1] = {DBO_STR(buf, cap)};
	unsigned long long rows = 0;

	buf[0] = '\0';
	if (db_query(&db, sql, in, 1, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0)
		buf[0] = '\0';
	return buf;
}

/* apply - the message of row id, attempt attempt, applied in-process; it must be done. */
static void
apply(int is_refund, unsigned long long id, const char *order, int attempt)
{
	assert_true(id > 0);
	assert_int_equal(inproc_apply(proc, is_refund, id, M, is_refund ? "alipay" : "wxpay", order,
	                              attempt, &outcome),
	                 PROC_DONE);
}

static unsigned long long
pay(const char *order, const char *trade, const char *amount, const char *cur)
{
	unsigned long long id = fx_pay_row(&db, &cf, M, "wxpay", trade, order, amount, cur);

	apply(0, id, order, 1);
	return id;
}

static unsigned long long
refund(const char *order, const char *refund_no, const char *amount, int cumulative,
       const char *cur)
{
	unsigned long long id =
	    fx_refund_row(&db, &cf, M, "alipay", refund_no, "", order, amount, cumulative, cur);

	apply(1, id, order, 1);
	return id;
}

/* The retrier's (or a second) delivery of the row's message. */
static void
republish(int is_refund, unsigned long long id, const char *order, int attempt)
{
	apply(is_refund, id, order, attempt);
}

/* A payment row whose message is published for the daemon, as ingest publishes it. */
static unsigned long long
publish_pay(const char *order, const char *trade, const char *amount, struct fx_pos *pos)
{
	unsigned long long id = fx_pay_row(&db, &cf, M, "wxpay", trade, order, amount, "CNY");

	assert_true(id > 0);
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", order, 1, RD_KAFKA_PARTITION_UA, pos), 0);
	return id;
}

static long long
retries(int is_refund, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&db,
	                         is_refund
	                             ? "SELECT retry_count FROM refund_callback_log WHERE id = ?"
	                             : "SELECT retry_count FROM pay_callback_log WHERE id = ?",
	                         in, 1);
}

static const char *
pay_outcome(unsigned long long id, char *buf, size_t cap)
{
	return qsid("SELECT IFNULL(outcome, '') FROM pay_callback_log WHERE id = ?", id, buf, cap);
}

static const char *
order_status(const char *order, char *buf, size_t cap)
{
	return qs("SELECT status FROM orders WHERE out_trade_no = ?", order, buf, cap);
}

static long long
events_of(const char *order)
{
	return q1("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ?", order);
}

/* ---- reading topics back --------------------------------------------------------------- */

struct scan {
	const char *key;
	unsigned long long id; /* dead letters: the row id to count */
	int n;
	char event_ids[4][256];
	char reasons[4][64];
};

static int
scan_key(void *arg, const rd_kafka_message_t *m)
{
	struct scan *s = arg;
	json_t *o;

	if (m->key_len != strlen(s->key) || memcmp(m->key, s->key, m->key_len) != 0)
		return 0;
	if ((o = json_loadb(m->payload, m->len, 0, NULL)) == NULL)
		return 0;
	if (s->id == 0 ||
	    (unsigned long long)json_integer_value(json_object_get(o, "id")) == s->id) {
		if (s->n < 4) {
			const char *e = json_string_value(json_object_get(o, "event_id"));
			const char *r = json_string_value(json_object_get(o, "reason"));
			snprintf(s->event_ids[s->n], sizeof(s->event_ids[0]), "%s", e ? e : "");
			snprintf(s->reasons[s->n], sizeof(s->reasons[0]), "%s", r ? r : "");
		}
		s->n++;
	}
	json_decref(o);
	return 0;
}

static int
scan_topic(const char *suffix, const char *key, unsigned long long id, struct scan *s)
{
	char topic[256];

	memset(s, 0, sizeof(*s));
	s->key = key;
	s->id = id;
	conf_topic(&cf, suffix, topic, sizeof(topic));
	assert_true(fx_read_topic(&cf, topic, scan_key, s) >= 0);
	return s->n;
}

/* ---- the cases ------------------------------------------------------------------------- */

static void
payment_paid_once_and_events_relayed_once(void **state)
{
	char buf[256];
	struct scan s;
	unsigned long long id;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-paid", "88.88", "CNY", "PENDING"), 0);
	id = pay("O-paid", "T-paid", "88.88", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, id), 1);
	assert_string_equal(pay_outcome(id, buf, sizeof(buf)), "paid");
	assert_string_equal(order_status("O-paid", buf, sizeof(buf)), "PAID");
	assert_string_equal(qs("SELECT channel_trade_no FROM orders WHERE out_trade_no = ?",
	                       "O-paid", buf, sizeof(buf)),
	                    "T-paid");
	assert_int_equal(qid("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND done_at IS "
	                     "NOT NULL",
	                     id),
	                 1);
	assert_int_equal(events_of("O-paid"), 2);
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE event_id = ?",
	                    "default|O-paid|order.paid.shipment"),
	                 1);
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE event_id = ?",
	                    "default|O-paid|order.paid.points"),
	                 1);
	/* The relay marks both sent once they are on the topic. */
	{
		struct db_in in[1] = {DBI_STR("O-paid")};
		assert_int_equal(harness_wait_i64(&db,
		                                  "SELECT COUNT(*) FROM order_events WHERE "
		                                  "out_trade_no = ? AND sent_at IS NOT NULL",
		                                  in, 1, 2, WAIT_MS),
		                 0);
	}
	assert_int_equal(scan_topic("order-events", "default|O-paid", 0, &s), 2);
	assert_true((strcmp(s.event_ids[0], "default|O-paid|order.paid.shipment") == 0 &&
	             strcmp(s.event_ids[1], "default|O-paid|order.paid.points") == 0) ||
	            (strcmp(s.event_ids[1], "default|O-paid|order.paid.shipment") == 0 &&
	             strcmp(s.event_ids[0], "default|O-paid|order.paid.points") == 0));
	/* The message is the stored payload, amount as an exact decimal string. */
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                    "JSON_VALUE(payload, '$.amount') = '88.88' AND "
	                    "JSON_VALUE(payload, '$.currency') = 'CNY' AND "
	                    "JSON_VALUE(payload, '$.channel_trade_no') = 'T-paid'",
	                    "O-paid"),
	                 2);
	assert_int_equal(
	    q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?", "O-paid"), 0);
}

static void
payment_known_already_is_duplicate(void **state)
{
	char buf[64];
	unsigned long long id;

	(void)state;
	/* Paid through another path (the merchant's own order query) with the same trade. */
	assert_int_equal(fx_order(&db, M, "O-dup", "10.00", "CNY", "PAID"), 0);
	{
		struct db_in in[1] = {DBI_STR("O-dup")};
		assert_int_equal(db_exec(&db,
		                         "UPDATE orders SET channel = 'wxpay', channel_trade_no = "
		                         "'T-dup' WHERE out_trade_no = ?",
		                         in, 1, NULL, NULL),
		                 DB_OK);
	}
	id = pay("O-dup", "T-dup", "10.00", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, id), 1);
	assert_string_equal(pay_outcome(id, buf, sizeof(buf)), "duplicate");
	assert_string_equal(order_status("O-dup", buf, sizeof(buf)), "PAID");
	assert_int_equal(events_of("O-dup"), 0);
	assert_int_equal(q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ?", "O-dup"),
	                 0);
	assert_int_equal(q1("SELECT COUNT(*) FROM alerts WHERE out_trade_no = ?", "O-dup"), 0);
}

static void
second_payment_is_paid_twice_refund_and_alert(void **state)
{
	char buf[64];
	unsigned long long first, second;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-twice", "20.00", "CNY", "PENDING"), 0);
	first = pay("O-twice", "T-twice-1", "20.00", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, first), 1);
	second = pay("O-twice", "T-twice-2", "20.00", "CNY");
	assert_string_equal(outcome, "paid_twice");
	assert_int_equal(inproc_row_status(&db, 0, second), 1);
	assert_string_equal(pay_outcome(first, buf, sizeof(buf)), "paid");
	assert_string_equal(pay_outcome(second, buf, sizeof(buf)), "paid_twice");
	assert_string_equal(qs("SELECT channel_trade_no FROM orders WHERE out_trade_no = ?",
	                       "O-twice", buf, sizeof(buf)),
	                    "T-twice-1");
	assert_int_equal(q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ? AND "
	                    "channel_trade_no = 'T-twice-2' AND reason = 'paid_twice' AND amount = "
	                    "20.00 AND status = 'REQUESTED'",
	                    "O-twice"),
	                 1);
	assert_int_equal(q1("SELECT COUNT(*) FROM alerts WHERE out_trade_no = ? AND kind = "
	                    "'paid_twice'",
	                    "O-twice"),
	                 1);
	assert_int_equal(events_of("O-twice"), 2); /* shipped once */
}

static void
payment_after_close_is_refunded_never_shipped(void **state)
{
	char buf[64];
	unsigned long long id;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-closed", "30.00", "CNY", "CLOSED"), 0);
	id = pay("O-closed", "T-closed", "30.00", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, id), 1);
	assert_string_equal(pay_outcome(id, buf, sizeof(buf)), "paid_after_close");
	assert_string_equal(order_status("O-closed", buf, sizeof(buf)), "CLOSED");
	assert_int_equal(q1("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no = ? AND "
	                    "reason = 'paid_after_close' AND channel_trade_no = 'T-closed'",
	                    "O-closed"),
	                 1);
	assert_int_equal(q1("SELECT COUNT(*) FROM alerts WHERE out_trade_no = ? AND kind = "
	                    "'paid_after_close'",
	                    "O-closed"),
	                 1);
	assert_int_equal(events_of("O-closed"), 0);
}

static void
check_dead(const char *order, unsigned long long id, const char *reason)
{
	char buf[600], key[200];
	struct scan s;

	assert_int_equal(inproc_row_status(&db, 0, id), 2);
	/* A dead row's outcome says why. */
	assert_string_equal(pay_outcome(id, buf, sizeof(buf)), reason);
	assert_non_null(strstr(qsid("SELECT IFNULL(last_error, '') FROM pay_callback_log WHERE "
	                            "id = ?",
	                            id, buf, sizeof(buf)),
	                       strcmp(reason, "amount_mismatch") == 0 ? "amount" : "currency"));
	assert_string_equal(order_status(order, buf, sizeof(buf)), "PENDING");
	assert_int_equal(events_of(order), 0);
	{
		struct db_in in[3] = {DBI_I64(id), DBI_STR(order), DBI_STR(reason)};
		assert_int_equal(
		    harness_query_i64(&db,
		                      "SELECT COUNT(*) FROM alerts WHERE callback_id = "
		                      "? AND out_trade_no = ? AND kind = ?",
		                      in, 3),
		    1);
	}
	/* The processor marks the dead letter in its transaction; the retrier's sweep sends it. */
	assert_int_equal(qid("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND dead_at IS "
	                     "NOT NULL AND dlq_sent_at IS NULL",
	                     id),
	                 1);
	assert_true(msg_key("default", order, key, sizeof(key)) > 0);
	assert_int_equal(scan_topic("callbacks.dlq", key, id, &s), 0);
	{
		struct retrier_counts c;
		struct retrier *r = NULL;
		char err[256];
		int full;

		memset(&c, 0, sizeof(c));
		assert_int_equal(retrier_open(&cf, &r, err, sizeof(err)), 0);
		assert_int_equal(retrier_dlq_sweep(r, CBLOG_PAY, &c, &full), 0);
		assert_true(c.dlq_sent >= 1);
		retrier_close(r);
	}
	assert_int_equal(qid("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND dlq_sent_at "
	                     "IS NOT NULL",
	                     id),
	                 1);
	assert_int_equal(scan_topic("callbacks.dlq", key, id, &s), 1);
	assert_string_equal(s.reasons[0], reason);
}

static void
amount_mismatch_is_dead_with_alert_and_one_dead_letter(void **state)
{
	unsigned long long id;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-amount", "88.88", "CNY", "PENDING"), 0);
	id = pay("O-amount", "T-amount", "88.80", "CNY");
	assert_string_equal(outcome, "dead");
	check_dead("O-amount", id, "amount_mismatch");
}

static void
currency_mismatch_is_dead_with_alert_and_one_dead_letter(void **state)
{
	unsigned long long id;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-cur", "88.88", "CNY", "PENDING"), 0);
	id = pay("O-cur", "T-cur", "88.88", "USD");
	check_dead("O-cur", id, "currency_mismatch");
}

struct committed {
	const char *topic;
	int32_t partition;
	long long want;
};

static int
committed_cond(void *arg)
{
	struct committed *c = arg;

	return fx_committed(&cf, c->topic, c->partition) >= c->want;
}

static void
order_not_found_is_recorded_for_retry_and_offset_stored(void **state)
{
	char buf[256], topic[256];
	struct fx_pos pos;
	unsigned long long id;

	(void)state;
	id = publish_pay("O-missing", "T-missing", "5.00", &pos);
	assert_int_equal(fx_wait_retry(&db, 0, id, 1, WAIT_MS), 0);
	assert_int_equal(qid("SELECT status FROM pay_callback_log WHERE id = ?", id), 0);
	assert_string_equal(qsid("SELECT IFNULL(last_error, '') FROM pay_callback_log WHERE id = ?",
	                         id, buf, sizeof(buf)),
	                    "order not found");
	/* Due at once (ingest reserved it initial_lease_s ahead): the retrier takes it now. */
	assert_int_equal(qid("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND "
	                     "next_retry_at <= NOW(3) AND next_retry_at < created_at + INTERVAL 10 "
	                     "SECOND",
	                     id),
	                 1);
	/* The offset after the message is committed (auto commit runs every second). */
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	{
		struct committed c = {topic, pos.partition, pos.offset + 1};
		assert_int_equal(harness_wait_until(committed_cond, &c, WAIT_MS), 0);
	}
	assert_int_equal(qid("SELECT retry_count FROM pay_callback_log WHERE id = ?", id), 1);
	assert_true(harness_file_count(plog, "outcome=retry reason=\"order not found\" "
	                                     "order=O-missing") == 1);
}

/*
 * A second copy of the same attempt (the retrier republished the row when its lease ran out
 * while the first copy still waited in a backlog) fails again but is not counted again; the
 * next attempt's copy is.
 */
static void
second_copy_of_a_failed_attempt_is_not_counted_again(void **state)
{
	unsigned long long id;

	(void)state;
	id = pay("O-stale", "T-stale", "5.00", "CNY");
	assert_string_equal(outcome, "retry");
	assert_int_equal(retries(0, id), 1);
	republish(0, id, "O-stale", 1);
	assert_string_equal(outcome, "retry_stale");
	assert_int_equal(qid("SELECT retry_count FROM pay_callback_log WHERE id = ?", id), 1);
	republish(0, id, "O-stale", 2);
	assert_string_equal(outcome, "retry");
	assert_int_equal(retries(0, id), 2);
	assert_int_equal(qid("SELECT status FROM pay_callback_log WHERE id = ?", id), 0);
}

static void
lock_wait_timeout_is_a_recorded_failure_not_a_hot_loop(void **state)
{
	struct db locker;
	char buf[256];
	unsigned long long id;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-locked", "7.00", "CNY", "PENDING"), 0);
	harness_db(&cf, &locker);
	assert_int_equal(db_begin(&locker), DB_OK);
	{
		struct db_in in[1] = {DBI_STR("O-locked")};
		struct db_out out[1] = {DBO_I64()};
		assert_int_equal(db_query(&locker,
		                          "SELECT id FROM orders WHERE out_trade_no = ? FOR UPDATE",
		                          in, 1, out, 1, NULL, NULL, NULL),
		                 DB_OK);
	}
	id = pay("O-locked", "T-locked", "7.00", "CNY");
	/* The processor's lock wait is 1 s: one failure, recorded, and no second attempt. */
	assert_int_equal(retries(0, id), 1);
	assert_non_null(strstr(qsid("SELECT IFNULL(last_error, '') FROM pay_callback_log WHERE "
	                            "id = ?",
	                            id, buf, sizeof(buf)),
	                       "1205"));
	assert_int_equal(db_rollback(&locker), DB_OK);
	db_close(&locker);
	assert_string_equal(order_status("O-locked", buf, sizeof(buf)), "PENDING");
	assert_int_equal(qid("SELECT retry_count FROM pay_callback_log WHERE id = ?", id), 1);
	/* The retrier's republication (attempt 2) then applies it. */
	republish(0, id, "O-locked", 2);
	assert_int_equal(inproc_row_status(&db, 0, id), 1);
	assert_string_equal(order_status("O-locked", buf, sizeof(buf)), "PAID");
}

/*
 * The ordering guard is measured by the transaction's opening read, which locks the row and
 * its order: its count of the order's earlier pending callbacks must lock none of them, or a
 * processor holding an earlier row (it locks its row, then the order) and this one (its row,
 * then the earlier rows) could deadlock. With the earlier row locked elsewhere, the later
 * one is deferred at once (a locking count would wait 1 s and fail with 1205), and the
 * deferral is committed.
 */
static void
guard_counts_earlier_callbacks_without_locking_them(void **state)
{
	struct db locker;
	unsigned long long first, second;
	char buf[64];

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-guard", "5.00", "CNY", "PENDING"), 0);
	first = fx_pay_row(&db, &cf, M, "wxpay", "T-guard-1", "O-guard", "5.00", "CNY");
	second = fx_pay_row(&db, &cf, M, "wxpay", "T-guard-2", "O-guard", "5.00", "CNY");
	harness_db(&cf, &locker);
	assert_int_equal(db_begin(&locker), DB_OK);
	{
		struct db_in in[1] = {DBI_I64(first)};
		struct db_out out[1] = {DBO_I64()};
		assert_int_equal(db_query(&locker,
		                          "SELECT id FROM pay_callback_log WHERE id = ? FOR UPDATE",
		                          in, 1, out, 1, NULL, NULL, NULL),
		                 DB_OK);
	}
	apply(0, second, "O-guard", 1);
	assert_string_equal(outcome, "deferred");
	/* Committed: seen from another connection while the locker still holds the first. */
	assert_int_equal(
	    qid("SELECT COUNT(*) FROM pay_callback_log WHERE id = ? AND status = 0 AND "
	        "retry_count = 0 AND next_retry_at <= NOW(3) + INTERVAL 2 SECOND",
	        second),
	    1);
	assert_int_equal(db_rollback(&locker), DB_OK);
	db_close(&locker);
	apply(0, first, "O-guard", 1);
	assert_string_equal(outcome, "paid");
	apply(0, second, "O-guard", 1);
	assert_string_equal(outcome, "paid_twice");
	assert_string_equal(qs("SELECT channel_trade_no FROM orders WHERE out_trade_no = ?",
	                       "O-guard", buf, sizeof(buf)),
	                    "T-guard-1");
}

static void
refunds_partial_then_full(void **state)
{
	char buf[64];
	unsigned long long p, r1, r2;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-refund", "88.88", "CNY", "PENDING"), 0);
	p = pay("O-refund", "T-refund", "88.88", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, p), 1);
	r1 = refund("O-refund", "R-refund-1", "30.01", 0, "CNY");
	assert_int_equal(inproc_row_status(&db, 1, r1), 1);
	assert_string_equal(order_status("O-refund", buf, sizeof(buf)), "REFUNDING");
	assert_string_equal(qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE "
	                       "out_trade_no = ?",
	                       "O-refund", buf, sizeof(buf)),
	                    "30.01");
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                    "event_type = 'order.refunded'",
	                    "O-refund"),
	                 0);
	r2 = refund("O-refund", "R-refund-2", "58.87", 0, "CNY");
	assert_int_equal(inproc_row_status(&db, 1, r2), 1);
	assert_string_equal(order_status("O-refund", buf, sizeof(buf)), "REFUNDED");
	assert_string_equal(qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE "
	                       "out_trade_no = ?",
	                       "O-refund", buf, sizeof(buf)),
	                    "88.88");
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                    "event_type = 'order.refunded' AND JSON_VALUE(payload, '$.amount') = "
	                    "'88.88'",
	                    "O-refund"),
	                 1);
	assert_int_equal(
	    q1("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no = ?", "O-refund"), 2);
	assert_string_equal(
	    qsid("SELECT outcome FROM refund_callback_log WHERE id = ?", r1, buf, sizeof(buf)),
	    "refund_partial");
	assert_string_equal(
	    qsid("SELECT outcome FROM refund_callback_log WHERE id = ?", r2, buf, sizeof(buf)),
	    "refunded");
}

static void
cumulative_refunds_apply_only_the_increase(void **state)
{
	char buf[64];
	unsigned long long p, r1, r2, r3;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-cum", "100.00", "CNY", "PENDING"), 0);
	p = pay("O-cum", "T-cum", "100.00", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, p), 1);
	r1 = refund("O-cum", "R-cum-1", "10.00", 1, "CNY");
	assert_int_equal(inproc_row_status(&db, 1, r1), 1);
	r2 = refund("O-cum", "R-cum-2", "35.50", 1, "CNY"); /* total so far: +25.50 */
	assert_int_equal(inproc_row_status(&db, 1, r2), 1);
	assert_string_equal(qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE "
	                       "out_trade_no = ?",
	                       "O-cum", buf, sizeof(buf)),
	                    "35.50");
	/* An older cumulative total that arrives late adds nothing. */
	r3 = refund("O-cum", "R-cum-0", "5.00", 1, "CNY");
	assert_int_equal(inproc_row_status(&db, 1, r3), 1);
	assert_string_equal(
	    qsid("SELECT outcome FROM refund_callback_log WHERE id = ?", r3, buf, sizeof(buf)),
	    "refund_covered");
	assert_string_equal(qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE "
	                       "out_trade_no = ?",
	                       "O-cum", buf, sizeof(buf)),
	                    "35.50");
	assert_string_equal(order_status("O-cum", buf, sizeof(buf)), "REFUNDING");
}

static void
refund_beyond_the_payment_is_dead(void **state)
{
	char buf[64];
	unsigned long long p, r;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-over", "10.00", "CNY", "PENDING"), 0);
	p = pay("O-over", "T-over", "10.00", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, p), 1);
	r = refund("O-over", "R-over", "10.01", 0, "CNY");
	assert_int_equal(inproc_row_status(&db, 1, r), 2);
	assert_string_equal(order_status("O-over", buf, sizeof(buf)), "PAID");
	assert_int_equal(q1("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no = ?", "O-over"),
	                 0);
	assert_int_equal(q1("SELECT COUNT(*) FROM alerts WHERE out_trade_no = ? AND kind = "
	                    "'amount_mismatch'",
	                    "O-over"),
	                 1);
}

static void
refund_before_payment_is_retryable(void **state)
{
	char buf[256];
	unsigned long long r;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-early", "12.00", "CNY", "PENDING"), 0);
	r = refund("O-early", "R-early", "12.00", 0, "CNY");
	assert_int_equal(retries(1, r), 1);
	assert_int_equal(qid("SELECT status FROM refund_callback_log WHERE id = ?", r), 0);
	assert_string_equal(qsid("SELECT IFNULL(last_error, '') FROM refund_callback_log WHERE "
	                         "id = ?",
	                         r, buf, sizeof(buf)),
	                    "order not paid (PENDING)");
	assert_string_equal(order_status("O-early", buf, sizeof(buf)), "PENDING");
	assert_int_equal(q1("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no = ?", "O-early"),
	                 0);
}

static void
out_of_order_refund_payment_refund_ends_refunded(void **state)
{
	char buf[64];
	unsigned long long p, r;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-ooo", "66.60", "CNY", "PENDING"), 0);
	r = refund("O-ooo", "R-ooo", "66.60", 0, "CNY");
	assert_int_equal(retries(1, r), 1);
	p = pay("O-ooo", "T-ooo", "66.60", "CNY");
	assert_int_equal(inproc_row_status(&db, 0, p), 1);
	assert_string_equal(order_status("O-ooo", buf, sizeof(buf)), "PAID");
	/* The retrier's republication of the refund. */
	republish(1, r, "O-ooo", 2);
	assert_int_equal(inproc_row_status(&db, 1, r), 1);
	assert_string_equal(order_status("O-ooo", buf, sizeof(buf)), "REFUNDED");
	assert_string_equal(qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE "
	                       "out_trade_no = ?",
	                       "O-ooo", buf, sizeof(buf)),
	                    "66.60");
	assert_int_equal(q1("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                    "event_type = 'order.refunded'",
	                    "O-ooo"),
	                 1);
	/* shipment, points, the refund's own order.refund and the final order.refunded */
	assert_int_equal(events_of("O-ooo"), 4);
	assert_int_equal(qid("SELECT retry_count FROM refund_callback_log WHERE id = ?", r), 1);
}

/*
 * The daemon logs one line per outcome, callback id first. The case publishes its own
 * callbacks (a payment applied and one dead on its amount) and counts only their lines.
 */
static void
every_outcome_logged_once_with_the_callback_id_first(void **state)
{
	char needle[3][160];
	unsigned long long paid, dead;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-logged", "9.00", "CNY", "PENDING"), 0);
	assert_int_equal(fx_order(&db, M, "O-logdead", "9.00", "CNY", "PENDING"), 0);
	paid = publish_pay("O-logged", "T-logged", "9.00", NULL);
	dead = publish_pay("O-logdead", "T-logdead", "8.00", NULL);
	assert_int_equal(fx_wait_row(&db, 0, paid, 1, WAIT_MS), 0);
	assert_int_equal(fx_wait_row(&db, 0, dead, 2, WAIT_MS), 0);
	snprintf(needle[0], sizeof(needle[0]),
	         "cb%llu: level=info event=processed outcome=paid order=O-logged merchant=default "
	         "attempt=1 ",
	         paid);
	snprintf(needle[1], sizeof(needle[1]),
	         "cb%llu: level=error event=alert kind=amount_mismatch order=O-logdead ", dead);
	snprintf(needle[2], sizeof(needle[2]),
	         "cb%llu: level=error event=processed outcome=dead reason=amount_mismatch "
	         "order=O-logdead ",
	         dead);
	/* The lines follow the commits: wait for each, then it must be there exactly once. */
	for (int i = 0; i < 3; i++) {
		struct fx_logwait lw = {plog, needle[i], 1};

		assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
		assert_int_equal(harness_file_count(plog, needle[i]), 1);
	}
}

static int
inproc_setup(void **state)
{
	(void)state;
	return proc_open(&cf, &proc) == 0 ? 0 : -1;
}

static int
inproc_teardown(void **state)
{
	(void)state;
	return proc_close(proc) == 0 ? 0 : -1;
}

static int
daemon_setup(void **state)
{
	(void)state;
	pub = fx_pub_new(&cf);
	if (pub == NULL)
		return -1;
	pid = fx_processor_start(&cf, "processor", plog, sizeof(plog));
	return pid > 0 ? 0 : -1;
}

static int
daemon_teardown(void **state)
{
	(void)state;
	return fx_processor_stop(pub, pid, plog);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(payment_paid_once_and_events_relayed_once),
	    cmocka_unit_test(payment_known_already_is_duplicate),
	    cmocka_unit_test(second_payment_is_paid_twice_refund_and_alert),
	    cmocka_unit_test(payment_after_close_is_refunded_never_shipped),
	    cmocka_unit_test(amount_mismatch_is_dead_with_alert_and_one_dead_letter),
	    cmocka_unit_test(currency_mismatch_is_dead_with_alert_and_one_dead_letter),
	    cmocka_unit_test(second_copy_of_a_failed_attempt_is_not_counted_again),
	    cmocka_unit_test(lock_wait_timeout_is_a_recorded_failure_not_a_hot_loop),
	    cmocka_unit_test(guard_counts_earlier_callbacks_without_locking_them),
	    cmocka_unit_test(refunds_partial_then_full),
	    cmocka_unit_test(cumulative_refunds_apply_only_the_increase),
	    cmocka_unit_test(refund_beyond_the_payment_is_dead),
	    cmocka_unit_test(refund_before_payment_is_retryable),
	    cmocka_unit_test(out_of_order_refund_payment_refund_ends_refunded),
	};
	/* About the daemon: its consumer's offsets and its log. */
	const struct CMUnitTest daemon_tests[] = {
	    cmocka_unit_test(order_not_found_is_recorded_for_retry_and_offset_stored),
	    cmocka_unit_test(every_outcome_logged_once_with_the_callback_id_first),
	};
	int rc;

	if (fx_processor_conf(&cf, "proc", NULL, 2) != 0)
		return 1;
	cf.db.lock_wait_timeout_s = 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests_name("inproc", tests, inproc_setup, inproc_teardown);
	if (cmocka_run_group_tests_name("daemon", daemon_tests, daemon_setup, daemon_teardown) != 0)
		rc = 1;
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
