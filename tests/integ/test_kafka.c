/*
 * test_kafka - the Kafka helpers against the real broker: the idempotent producer's message
 * comes back with the same key and value, and consumers re-read exactly what was not stored.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "kq.h"

static struct conf cf;
static char topic[256];

/* Polls until a message arrives or the deadline passes. */
static rd_kafka_message_t *
poll_one(rd_kafka_t *rk, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;

	while (harness_now_ms() < end) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 200);
		if (m == NULL)
			continue;
		if (m->err) {
			rd_kafka_message_destroy(m);
			continue;
		}
		return m;
	}
	return NULL;
}

static rd_kafka_t *
consumer(const char *group)
{
	const char *topics[1] = {topic};
	char err[256];
	rd_kafka_t *rk = kq_consumer_new(&cf.kafka, group, topics, 1, NULL, NULL, err, sizeof(err));

	if (rk == NULL)
		printf("# consumer: %s\n", err);
	assert_non_null(rk);
	return rk;
}

static void
produce(struct kq_producer *p, const char *key, const char *val)
{
	char err[256];

	assert_int_equal(
	    kq_produce_wait(p, topic, key, strlen(key), val, strlen(val), 10000, err, sizeof(err)),
	    0);
}

static void
idempotent_producer_roundtrip_same_key_and_value(void **state)
{
	struct kq_producer *p = NULL;
	rd_kafka_message_t *m;
	rd_kafka_t *rk;
	char err[256];

	(void)state;
	assert_int_equal(kq_producer_new(&cf.kafka, &p, err, sizeof(err)), 0);
	assert_int_equal(kq_producer_ping(p, 10000), 0);
	produce(p, "merchant|order-1", "{\"id\":1}");
	rk = consumer("g-roundtrip");
	m = poll_one(rk, 30000);
	assert_non_null(m);
	assert_int_equal(m->key_len, strlen("merchant|order-1"));
	assert_memory_equal(m->key, "merchant|order-1", m->key_len);
	assert_int_equal(m->len, strlen("{\"id\":1}"));
	assert_memory_equal(m->payload, "{\"id\":1}", m->len);
	rd_kafka_message_destroy(m);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	assert_int_equal(kq_flush(p, 5000), 0);
	assert_true(kq_delivered(p) >= 1);
	assert_int_equal(kq_failed(p), 0);
	kq_producer_free(p);
}

static void
stored_offset_is_not_reread_unstored_is(void **state)
{
	struct kq_producer *p = NULL;
	rd_kafka_message_t *m;
	rd_kafka_t *rk;
	char err[256];

	(void)state;
	assert_int_equal(kq_producer_new(&cf.kafka, &p, err, sizeof(err)), 0);

	/* The group starts at the earliest offset: message "one" from the test above, "two". */
	produce(p, "k", "two");
	rk = consumer("g-offsets");
	m = poll_one(rk, 30000);
	assert_non_null(m);
	assert_memory_equal(m->payload, "{\"id\":1}", m->len);
	assert_int_equal(kq_store(rk, m), 0);
	rd_kafka_message_destroy(m);
	m = poll_one(rk, 30000);
	assert_non_null(m);
	assert_memory_equal(m->payload, "two", 3);
	assert_int_equal(kq_store(rk, m), 0);
	rd_kafka_message_destroy(m);
	assert_int_equal(rd_kafka_commit(rk, NULL, 0), RD_KAFKA_RESP_ERR_NO_ERROR);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);

	/* "three" is read but its offset is never stored: the next member must read it again. */
	produce(p, "k", "three");
	rk = consumer("g-offsets");
	m = poll_one(rk, 30000);
	assert_non_null(m);
	assert_int_equal(m->len, 5);
	assert_memory_equal(m->payload, "three", 5);
	rd_kafka_message_destroy(m);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);

	rk = consumer("g-offsets");
	m = poll_one(rk, 30000);
	assert_non_null(m);
	assert_int_equal(m->len, 5);
	assert_memory_equal(m->payload, "three", 5);
	assert_int_equal(kq_store(rk, m), 0);
	rd_kafka_message_destroy(m);
	rd_kafka_consumer_close(rk); /* commits the stored offset on the way out */
	rd_kafka_destroy(rk);

	/* Nothing is left for the group now. */
	rk = consumer("g-offsets");
	m = poll_one(rk, 4000);
	assert_null(m);
	rd_kafka_consumer_close(rk);
	rd_kafka_destroy(rk);
	kq_producer_free(p);
}

static void
produce_wait_fails_fast_for_unknown_topic(void **state)
{
	struct kq_producer *p = NULL;
	char err[256];
	long long t0;
	int rc;

	(void)state;
	assert_int_equal(kq_producer_new(&cf.kafka, &p, err, sizeof(err)), 0);
	t0 = harness_now_ms();
	/* Topics are never auto-created: the budget bounds the wait. */
	rc = kq_produce_wait(p, "paycb-no-such-topic", "k", 1, "v", 1, 1500, err, sizeof(err));
	assert_true(rc != 0);
	assert_true(harness_now_ms() - t0 < 3000);
	kq_producer_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(idempotent_producer_roundtrip_same_key_and_value),
	    cmocka_unit_test(stored_offset_is_not_reread_unstored_is),
	    cmocka_unit_test(produce_wait_fails_fast_for_unknown_topic),
	};
	int rc;

	if (fx_kafka_setup(&cf, "kqtest", 1, topic, sizeof(topic)) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
