/*
 * test_repartition - partitions added to <prefix>.callbacks while the real processor and
 * retrier run: nothing is lost or doubled, and one order's callbacks stay in order.
 *
 * The topic starts with 2 partitions and a processor with two consumer threads drains a
 * load. In the middle of it paycb-migrate's own path (migrate_topics with kafka.partitions
 * raised) grows the topic to 6 and the test waits until the group has re-assigned. Then the
 * case that growth makes possible: an order's payment was published before the change and
 * still waits on its old partition (key hash mod 2) while its refund, which came in later,
 * is published after the change on a new partition (mod 6) and reaches a processor first.
 * The test publishes the refunds first and the payments only once the processor has
 * deferred every refund; so without the ordering guard each refund would fail against an
 * order not yet PAID (retry_count 1) and the load check, which wants every row done at its
 * first attempt, fails. A second load published after the change by key (mod 6) must also
 * come out with exactly one effect per callback.
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
#include "migrate.h"
#include "msg.h"

#define WAIT_MS    90000
#define BEFORE     150 /* orders of the load published before the change */
#define AFTER      100 /* orders of the load published after it */
#define REORDERED  24  /* orders whose refund overtakes their payment */
#define PARTS_FROM 2
#define PARTS_TO   6

static struct conf cf;
static struct db db;
/* The daemons, so that a failed assertion does not leave them running. */
static int proc = -1, ret = -1;

/* partition_of - the partition kq's partitioner (murmur2) gives order's callbacks of n */
static int32_t
partition_of(const char *order, int n)
{
	struct msg_callback m;
	char key[256];
	int klen;

	memset(&m, 0, sizeof(m));
	snprintf(m.merchant_id, sizeof(m.merchant_id), "default");
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", order);
	klen = msg_callback_key(&m, key, sizeof(key));
	assert_true(klen > 0);
	return rd_kafka_msg_partitioner_murmur2(NULL, key, (size_t)klen, n, NULL, NULL);
}

/* clock_passed - true once the database clock is past every payment row's created_at */
static int
clock_passed(void *arg)
{
	return harness_count(arg, "SELECT NOW(3) > MAX(created_at) FROM pay_callback_log") == 1;
}

/* The numbers of the moved orders ("moved-<n>"): those the growth puts on a new partition. */
static int moved_no[REORDERED];

/*
 * reordered_load - REORDERED orders that move to a new partition when the topic grows, each
 * with a payment row and a later refund row, as a load fx_load_check can judge. All payment
 * rows are reserved before the first refund row, and a clock tick apart, so every refund
 * came in strictly later than its payment.
 */
static void
reordered_load(struct fx_load *l)
{
	char order[64], trade[80], rno[80];

	memset(l, 0, sizeof(*l));
	snprintf(l->prefix, sizeof(l->prefix), "moved");
	l->n = REORDERED;
	assert_non_null(l->pay_ids = calloc(REORDERED, sizeof(*l->pay_ids)));
	assert_non_null(l->refund_ids = calloc(REORDERED, sizeof(*l->refund_ids)));
	for (int i = 0, k = 0; k < REORDERED; i++) {
		snprintf(order, sizeof(order), "moved-%d", i);
		if (partition_of(order, PARTS_TO) < PARTS_FROM)
			continue;
		snprintf(trade, sizeof(trade), "T-%s", order);
		assert_int_equal(fx_order(&db, "default", order, "10.00", "CNY", "PENDING"), 0);
		assert_true((l->pay_ids[k] = fx_pay_row(&db, &cf, "default", "wxpay", trade, order,
		                                        "10.00", "CNY")) > 0);
		moved_no[k++] = i;
	}
	assert_int_equal(harness_wait_until(clock_passed, &db, 5000), 0);
	for (int k = 0; k < REORDERED; k++) {
		snprintf(order, sizeof(order), "moved-%d", moved_no[k]);
		snprintf(trade, sizeof(trade), "T-%s", order);
		snprintf(rno, sizeof(rno), "R-%s", order);
		assert_true((l->refund_ids[k] = fx_refund_row(&db, &cf, "default", "wxpay", rno,
		                                              trade, order, "1.00", 0, "CNY")) > 0);
	}
}

/* publish_moved - the refunds (with partitions mod n) or the payments of the moved orders */
static void
publish_moved(struct fx_pub *pub, const struct fx_load *l, int refund, int n)
{
	char order[64];

	for (int k = 0; k < l->n; k++) {
		snprintf(order, sizeof(order), "moved-%d", moved_no[k]);
		assert_int_equal(fx_publish(pub, NULL, refund,
		                            refund ? l->refund_ids[k] : l->pay_ids[k], "default",
		                            "wxpay", order, 1, partition_of(order, n), NULL),
		                 0);
	}
	assert_int_equal(fx_pub_flush(pub, 30000), 0);
}

/* A condition: the processor's log shows every refund of the moved load deferred. */
struct deferred_all {
	const char *log;
	const struct fx_load *l;
};

static int
deferred_all(void *arg)
{
	struct deferred_all *d = arg;
	char needle[64];

	for (int k = 0; k < d->l->n; k++) {
		snprintf(needle, sizeof(needle), "rf%llu: level=info event=deferred ",
		         d->l->refund_ids[k]);
		if (harness_file_count(d->log, needle) == 0)
			return 0;
	}
	return 1;
}

static void
growing_the_topic_loses_nothing_and_keeps_each_orders_order(void **state)
{
	char logs[2][1024], conf[1024], topic[256], err[1024], needle[128];
	struct migrate_result res = {0, 0, 0};
	struct fx_load before, after, moved;
	struct fx_pub *pub;
	struct deferred_all dw;
	struct fx_logwait lw;
	struct fx_progress pr;
	long long skipped = 0, t0;

	(void)state;
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	assert_int_equal(fx_load_create(&db, &cf, &before, "before", BEFORE), 0);
	assert_int_equal(fx_load_create(&db, &cf, &after, "after", AFTER), 0);
	reordered_load(&moved);

	proc = fx_processor_start(&cf, "p", logs[0], sizeof(logs[0]));
	assert_true(proc > 0);
	snprintf(conf, sizeof(conf), "%s/test-logs/%s-retrier.conf", fx_dir(),
	         cf.kafka.topic_prefix);
	snprintf(logs[1], sizeof(logs[1]), "%s/test-logs/%s-retrier.log", fx_dir(),
	         cf.kafka.topic_prefix);
	assert_int_equal(harness_write_conf(&cf, conf, NULL), 0);
	ret = harness_spawn("bin/paycb-retrier", conf, logs[1]);
	assert_true(ret > 0);

	/* The first load goes out by key on 2 partitions; the topic grows while it drains. */
	t0 = harness_now_ms();
	assert_non_null(pub = fx_pub_new(&cf));
	assert_int_equal(fx_load_publish(pub, &before, 0, BEFORE), 0);
	fx_pub_free(pub);
	pr = (struct fx_progress){&db, &before, BEFORE / 2};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	cf.kafka.partitions = PARTS_TO;
	assert_int_equal(migrate_topics(&cf, "schemas", &res, err, sizeof(err)), 0);
	printf("# grown to %d partitions with %lld of %d callbacks done\n", PARTS_TO,
	       fx_load_done(&db, &before), 2 * BEFORE);
	/*
	 * Each of the two consumer threads ends up with half of the partitions of the main topic
	 * and of each delay topic (the default ladder's delays are all different). The delay
	 * topics keep their own count, kafka.retry_partitions (2 by default): growing
	 * kafka.partitions leaves them alone.
	 */
	assert_true(cf.kafka.retry_partitions % 2 == 0);
	snprintf(needle, sizeof(needle), "event=assigned thread=0 partitions=%d ",
	         (PARTS_TO + (int)cf.retry.ladder_s.n * (int)cf.kafka.retry_partitions) / 2);
	lw = (struct fx_logwait){logs[0], needle, 1};
	assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
	needle[strlen("event=assigned thread=")] = '1';
	assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
	printf("# re-assigned %lld ms after the first publish\n", harness_now_ms() - t0);

	/* The refunds that overtake their payments, then the payments from the old partitions. */
	assert_non_null(pub = fx_pub_new(&cf));
	publish_moved(pub, &moved, 1, PARTS_TO);
	dw = (struct deferred_all){logs[0], &moved};
	assert_int_equal(harness_wait_until(deferred_all, &dw, WAIT_MS), 0);
	publish_moved(pub, &moved, 0, PARTS_FROM);
	/* The second load by key on the grown topic, as a producer that has seen the change. */
	for (int i = 0; i < AFTER; i++) {
		char order[64];
		snprintf(order, sizeof(order), "after-%d", i);
		int32_t p = partition_of(order, PARTS_TO);
		assert_int_equal(fx_publish(pub, NULL, 0, after.pay_ids[i], "default", "wxpay",
		                            order, 1, p, NULL),
		                 0);
		assert_int_equal(fx_publish(pub, NULL, 1, after.refund_ids[i], "default", "wxpay",
		                            order, 1, p, NULL),
		                 0);
	}
	fx_pub_free(pub);

	pr = (struct fx_progress){&db, &before, 2 * BEFORE};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	pr = (struct fx_progress){&db, &after, 2 * AFTER};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	pr = (struct fx_progress){&db, &moved, 2 * REORDERED};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	printf("# all %d callbacks done %lld ms after the first publish; deferred %lld times\n",
	       2 * (BEFORE + AFTER + REORDERED), harness_now_ms() - t0,
	       harness_file_count(logs[0], "event=deferred"));

	assert_int_equal(harness_stop(proc, SIGTERM, 30000), 0);
	proc = -1;
	assert_int_equal(harness_stop(ret, SIGTERM, 30000), 0);
	ret = -1;
	/* Both drained: the relay marked every event it published sent (32 to a statement). */
	assert_int_equal(
	    harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE sent_at IS NULL"), 0);
	/* Exactly one effect per callback, each done at its first attempt. */
	assert_int_equal(fx_load_check(&db, &before, logs, 1, &skipped), 0);
	assert_int_equal(fx_load_check(&db, &after, logs, 1, &skipped), 0);
	assert_int_equal(fx_load_check(&db, &moved, logs, 1, &skipped), 0);
	/* Every moved order's refund was applied after its payment. */
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM refund_callback_log r JOIN "
	                                    "pay_callback_log p ON p.out_trade_no = r.out_trade_no "
	                                    "WHERE r.out_trade_no LIKE 'moved-%' AND "
	                                    "r.done_at >= p.done_at"),
	                 REORDERED);
	/* The new partitions carried work, and the processor committed past it. */
	for (int32_t p = PARTS_FROM; p < PARTS_TO; p++)
		assert_true(fx_committed(&cf, topic, p) > 0);
	assert_int_equal(harness_file_count(logs[0], "event=order_wait_expired"), 0);
	fx_load_free(&before);
	fx_load_free(&after);
	fx_load_free(&moved);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(growing_the_topic_loses_nothing_and_keeps_each_orders_order),
	};
	char group[256];
	int rc;

	if (harness_setup_parts(&cf, "repart", NULL, PARTS_FROM) != 0)
		return 1;
	snprintf(group, sizeof(group), "%s.processor", cf.kafka.topic_prefix);
	harness_set(&cf.kafka.group_id, group);
	cf.processor.threads = 2;
	cf.processor.admin_port = 0;
	cf.retrier.admin_port = 0;
	cf.retrier.sweep_interval_s = 1;
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_stop(proc, SIGKILL, 10000);
	harness_stop(ret, SIGKILL, 10000);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
