/*
 * test_liveness_daemons - liveness faults with the real daemons (bin/paycb-processor and
 * bin/paycb-retrier) against MariaDB and Kafka, on compressed ladders and leases (issue 17).
 *
 *   - a ladder mismatch: the retrier's ladder "1 2 3" has a step whose topic the processor
 *     (ladder "1 2") does not consume; a callback for a missing order walks to that step and
 *     is republished there forever. The end-to-end alarm (old_pending) and the republish
 *     alarm (republish_storm) are raised within the configured time, once per row;
 *   - two retriers started together send each dead letter and each outbox event once;
 *   - a processor outage (compressed: 20 s at a 1 s initial lease) leaves a few copies of
 *     each pending first attempt on the main topic, not one per initial lease, and the rows
 *     are processed once the processor is back.
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
#include "kq.h"
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
	return harness_spawn(getenv("PAYCB_RETRIER_BIN") ? getenv("PAYCB_RETRIER_BIN")
	                                                 : "bin/paycb-retrier",
	                     path, log);
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
	assert_int_equal(fx_wait_log(plog, "event=assigned", 1, WAIT_MS), 0);
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
	assert_int_equal(fx_wait_log(rlog, needle, 1, WAIT_MS), 0); /* logged after the commit */
	/* The republish alarm: past max_republish (2) at retry_count 3. */
	snprintf(needle, sizeof(needle), "cb%llu: level=error event=alert kind=republish_storm",
	         id);
	assert_int_equal(fx_wait_log(rlog, needle, 1, WAIT_MS), 0);
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

/* count_ids - messages per JSON "id" (dead letters) or "event_id" (order events). */
struct ids {
	const char *field;
	char keys[4096][64];
	int counts[4096];
	int n, dups_shown;
};

static int
ids_cb(void *arg, const rd_kafka_message_t *m)
{
	struct ids *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);
	json_t *v = o ? json_object_get(o, a->field) : NULL;
	char key[64];
	int i;

	if (v == NULL) {
		json_decref(o);
		return 0;
	}
	if (json_is_integer(v))
		snprintf(key, sizeof(key), "%lld", (long long)json_integer_value(v));
	else
		snprintf(key, sizeof(key), "%s", json_string_value(v) ? json_string_value(v) : "");
	for (i = 0; i < a->n && strcmp(a->keys[i], key) != 0; i++)
		;
	if (i == a->n && a->n < 4096)
		snprintf(a->keys[a->n++], sizeof(a->keys[0]), "%s", key);
	if (i < 4096)
		a->counts[i]++;
	if (i < 4096 && a->counts[i] > 1 && ++a->dups_shown <= 5)
		printf("# duplicate %s=%s at partition %d offset %lld\n", a->field, key,
		       (int)m->partition, (long long)m->offset);
	json_decref(o);
	return 0;
}

static struct ids *
count_ids(const char *suffix, const char *field)
{
	struct ids *a = calloc(1, sizeof(*a));
	char topic[256];

	assert_non_null(a);
	a->field = field;
	conf_topic(&cf, suffix, topic, sizeof(topic));
	assert_true(fx_read_topic(&cf, topic, ids_cb, a) >= 0);
	return a;
}

/*
 * (7) N dead rows waiting for their dead letter and M unsent outbox events, two retriers
 * started together: each dead letter and each event is sent once (without the outbox lease
 * both retrievers read the same unsent rows and sent most of them twice). That the
 * dead-letter lease outlasts a publish waiting out the delivery timeout is checked in
 * test_liveness (missing dead-letter topic).
 */
static void
two_retriers_send_each_dead_letter_and_event_once(void **state)
{
	enum { NDEAD = 20, NEVENTS = 1500 };
	struct conf rc = cf;
	char log1[1024], log2[1024];
	struct ids *dl, *ev;
	int pid1, pid2, dups = 0;

	(void)state;
	rc.retrier.outbox_after_s = 1;
	for (int i = 0; i < NDEAD; i++) {
		char trade[32];
		struct db_in in[1];

		snprintf(trade, sizeof(trade), "T-dead-%d", i);
		in[0] = (struct db_in)DBI_STR(trade);
		assert_int_equal(
		    db_exec(
		        &tdb,
		        "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, "
		        "out_trade_no, amount, currency, body_sha256, status, retry_count, "
		        "next_retry_at, outcome, last_error, done_at, dead_at, dead_reason) VALUES "
		        "('m1', 'wxpay', ?, 'o-dead', '1.00', 'CNY', REPEAT('0', 64), 2, 0, "
		        "NOW(3), 'amount_mismatch', 'amount', NOW(3), NOW(3), 'amount_mismatch')",
		        in, 1, NULL, NULL),
		    DB_OK);
	}
	assert_int_equal(db_exec(&tdb,
	                         "INSERT INTO order_events (event_id, merchant_id, out_trade_no, "
	                         "event_type, payload, created_at) SELECT CONCAT('m1|o-ev-', seq, "
	                         "'|order.paid'), 'm1', CONCAT('o-ev-', seq), 'order.paid', "
	                         "JSON_OBJECT('event_id', CONCAT('m1|o-ev-', seq, '|order.paid')), "
	                         "NOW(3) - INTERVAL 60 SECOND FROM seq_1_to_1500",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	assert_true((pid1 = start_retrier(&rc, "twins-1", log1, sizeof(log1))) > 0);
	assert_true((pid2 = start_retrier(&rc, "twins-2", log2, sizeof(log2))) > 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM pay_callback_log WHERE dlq_sent_at "
	                                  "IS NOT NULL",
	                                  NULL, 0, NDEAD, WAIT_MS),
	                 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM order_events WHERE sent_at IS NOT "
	                                  "NULL",
	                                  NULL, 0, NEVENTS, WAIT_MS),
	                 0);
	assert_int_equal(harness_stop(pid1, SIGTERM, 30000), 0);
	assert_int_equal(harness_stop(pid2, SIGTERM, 30000), 0);
	dl = count_ids("callbacks.dlq", "id");
	ev = count_ids("order-events", "event_id");
	for (int i = 0; i < ev->n; i++)
		dups += ev->counts[i] - 1;
	printf("# outbox events: %d rows, %d distinct on the topic, %d duplicates\n", NEVENTS,
	       ev->n, dups);
	assert_int_equal(ev->n, NEVENTS);
	assert_int_equal(dups, 0);
	dups = 0;
	for (int i = 0; i < dl->n; i++)
		dups += dl->counts[i] - 1;
	printf("# dead letters: %d rows, %d distinct on the topic, %d duplicates\n", NDEAD, dl->n,
	       dups);
	assert_int_equal(dl->n, NDEAD);
	assert_int_equal(dups, 0);
	free(dl);
	free(ev);
}

static int
deadline_passed(void *arg)
{
	return harness_now_ms() >= *(long long *)arg;
}

/*
 * (4) Processors down for a compressed outage (20 s at an initial lease of 1 s, the cap
 * 4 s): without the back-off each pending first attempt was republished on the main topic
 * every initial lease (about 20 copies per row); with it a few. Once a processor is back
 * every row is processed once.
 */
static void
outage_leaves_few_copies_per_row(void **state)
{
	enum { NROWS = 30 };
	struct conf rc = cf;
	char rlog[1024], plog[1024], main_topic[256];
	unsigned long long ids[NROWS];
	struct ids *cp;
	long long end;
	int rpid, ppid, most = 0, total = 0;

	(void)state;
	rc.retry.initial_lease_s = 1;
	rc.retry.initial_lease_max_s = 4;
	for (int i = 0; i < NROWS; i++) {
		char order[32], trade[32];

		snprintf(order, sizeof(order), "o-outage-%d", i);
		snprintf(trade, sizeof(trade), "T-outage-%d", i);
		assert_int_equal(fx_order(&tdb, "m1", order, "1.00", "CNY", "PENDING"), 0);
		/* Reserved as ingest reserves them; their first publish is lost with the
		 * processors (nobody consumes it either way). */
		assert_true((ids[i] = fx_pay_row(&tdb, &rc, "m1", "wxpay", trade, order, "1.00",
		                                 "CNY")) > 0);
	}
	assert_true((rpid = start_retrier(&rc, "outage-retrier", rlog, sizeof(rlog))) > 0);
	end = harness_now_ms() + 20000; /* the outage being simulated */
	assert_int_equal(harness_wait_until(deadline_passed, &end, 30000), 0);
	assert_true((ppid = fx_processor_start(&rc, "outage-processor", plog, sizeof(plog))) > 0);
	assert_int_equal(
	    harness_wait_i64(&tdb,
	                     "SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no "
	                     "LIKE 'o-outage-%' AND status = 1",
	                     NULL, 0, NROWS, WAIT_MS),
	    0);
	assert_int_equal(harness_stop(rpid, SIGTERM, 30000), 0);
	assert_int_equal(harness_stop(ppid, SIGTERM, 30000), 0);
	conf_topic(&cf, "callbacks", main_topic, sizeof(main_topic));
	cp = count_ids("callbacks", "id");
	for (int i = 0; i < cp->n; i++) {
		for (int k = 0; k < NROWS; k++)
			if (strtoull(cp->keys[i], NULL, 10) == ids[k]) {
				total += cp->counts[i];
				if (cp->counts[i] > most)
					most = cp->counts[i];
			}
	}
	printf("# 20 s outage, initial lease %lld s (cap %lld s): %d copies of %d rows on %s, at "
	       "most %d per row\n",
	       rc.retry.initial_lease_s, rc.retry.initial_lease_max_s, total, NROWS, main_topic,
	       most);
	assert_true(most <= 7);
	assert_int_equal(harness_count(&tdb, "SELECT COUNT(*) FROM orders WHERE out_trade_no LIKE "
	                                     "'o-outage-%' AND status = 'PAID'"),
	                 NROWS);
	free(cp);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup(ladder_mismatch_raises_the_alarm_within_the_threshold, clean),
	    cmocka_unit_test_setup(two_retriers_send_each_dead_letter_and_event_once, clean),
	    cmocka_unit_test_setup(outage_leaves_few_copies_per_row, clean),
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
