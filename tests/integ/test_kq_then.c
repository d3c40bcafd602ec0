/*
 * test_kq_then - kq_produce_then, how ingest publishes without waiting, against the real
 * broker: each message's function is called exactly once, on the producer's poller thread,
 * with its delivery report; with the broker stopped each is called once its deadline passes
 * (rc -2), on time, and the late reports that follow once the broker is back call nothing
 * again; a message that cannot be queued fails at once and its function is never called.
 *
 * "Stopped" is SIGSTOP to the local broker (deploy/local/kafka.sh's pid file), as in
 * test_kq_batch; the teardown sends SIGCONT whatever happened.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "kq.h"

#define NMSG 200

static struct conf cf;
static char topic[256];
static int broker_pid;

/* What became of each message: how often its function ran, with what, on which thread. */
struct seen {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int calls[NMSG], rc[NMSG], total, on_producer_thread;
	long long at_ms[NMSG];
	pthread_t producer;
};
static struct seen seen;

static void
seen_reset(void)
{
	pthread_mutex_lock(&seen.mu);
	memset(seen.calls, 0, sizeof(seen.calls));
	memset(seen.rc, 0, sizeof(seen.rc));
	seen.total = 0;
	seen.on_producer_thread = 0;
	seen.producer = pthread_self();
	pthread_mutex_unlock(&seen.mu);
}

static void
on_done(void *arg, int rc, const char *err)
{
	int i = (int)(intptr_t)arg;

	(void)err;
	pthread_mutex_lock(&seen.mu);
	seen.calls[i]++;
	seen.rc[i] = rc;
	seen.at_ms[i] = harness_now_ms();
	seen.total++;
	if (pthread_equal(pthread_self(), seen.producer))
		seen.on_producer_thread++;
	pthread_cond_broadcast(&seen.cv);
	pthread_mutex_unlock(&seen.mu);
}

/* Waits until n functions ran in all or timeout_ms passed; returns how many ran. */
static int
seen_wait(int n, int timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;
	int total;

	pthread_mutex_lock(&seen.mu);
	while (seen.total < n && harness_now_ms() < end) {
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += 50 * 1000 * 1000;
		if (ts.tv_nsec >= 1000000000) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000;
		}
		pthread_cond_timedwait(&seen.cv, &seen.mu, &ts);
	}
	total = seen.total;
	pthread_mutex_unlock(&seen.mu);
	return total;
}

static struct kq_producer *
producer(void)
{
	struct kq_producer *p = fx_producer(&cf, topic);

	assert_non_null(p);
	return p;
}

static int
produce(struct kq_producer *p, int i, const void *val, size_t vlen, int timeout_ms)
{
	char key[32], err[256];

	snprintf(key, sizeof(key), "m1|o%d", i % 17);
	return kq_produce_then(p, topic, key, strlen(key), val, vlen, timeout_ms, on_done,
	                       (void *)(intptr_t)i, err, sizeof(err));
}

static void
each_function_runs_once_with_its_report_on_the_poller(void **state)
{
	struct kq_producer *p = producer();
	int on_topic = 0;

	(void)state;
	seen_reset();
	for (int i = 0; i < NMSG; i++) {
		char val[32];

		snprintf(val, sizeof(val), "{\"n\":%d}", i);
		assert_int_equal(produce(p, i, val, strlen(val), 10000), 0);
	}
	assert_int_equal(seen_wait(NMSG, 15000), NMSG);
	for (int i = 0; i < NMSG; i++) {
		assert_int_equal(seen.calls[i], 1);
		assert_int_equal(seen.rc[i], 0);
	}
	assert_int_equal(seen.on_producer_thread, 0);
	assert_int_equal(fx_read_topic(&cf, topic, fx_count_all, &on_topic), NMSG);
	assert_int_equal(on_topic, NMSG);
	kq_producer_free(p);
	assert_int_equal(seen.total, NMSG);
}

static void
message_that_cannot_be_queued_fails_and_calls_nothing(void **state)
{
	/* Larger than librdkafka's message.max.bytes (1,000,000): refused when produced. */
	size_t big = 2 * 1000 * 1000;
	char *huge = calloc(1, big);
	struct kq_producer *p = producer();

	(void)state;
	assert_non_null(huge);
	seen_reset();
	assert_int_equal(produce(p, 0, "a", 1, 10000), 0);
	assert_int_equal(produce(p, 1, huge, big, 10000), -1);
	assert_int_equal(produce(p, 2, "c", 1, 10000), 0);
	assert_int_equal(seen_wait(2, 15000), 2);
	assert_int_equal(kq_flush(p, 10000), 0);
	assert_int_equal(seen.calls[0], 1);
	assert_int_equal(seen.calls[1], 0);
	assert_int_equal(seen.calls[2], 1);
	kq_producer_free(p);
	assert_int_equal(seen.total, 2);
	free(huge);
}

static void
deadline_ends_each_message_once_with_the_broker_stopped(void **state)
{
	struct kq_producer *p = producer();
	long long t0;
	int n = 5;

	(void)state;
	seen_reset();
	printf("# stopping the broker (pid %d) with SIGSTOP\n", broker_pid);
	assert_true(broker_pid > 0);
	assert_int_equal(fx_broker_stop(broker_pid), 0);
	t0 = harness_now_ms();
	/* Deadlines out of order, the shorter ones well inside the poller's idle wait (1 s): each
	 * message is ended at its own. */
	for (int i = 0; i < n; i++)
		assert_int_equal(produce(p, i, "x", 1, i % 2 ? 300 : 1500), 0);
	assert_int_equal(seen_wait(n, 10000), n);
	for (int i = 0; i < n; i++) {
		long long after = seen.at_ms[i] - t0, due = i % 2 ? 300 : 1500;

		printf("# message %d ended after %lld ms (deadline %lld)\n", i, after, due);
		assert_int_equal(seen.calls[i], 1);
		assert_int_equal(seen.rc[i], -2);
		assert_true(after >= due);
		assert_true(after < due + 500);
	}
	/* Back: the reports now come (delivered or not), and call nothing again. */
	fx_broker_resume(NULL);
	kq_flush(p, 15000);
	kq_producer_free(p);
	assert_int_equal(seen.total, n);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(each_function_runs_once_with_its_report_on_the_poller),
	    cmocka_unit_test(message_that_cannot_be_queued_fails_and_calls_nothing),
	    cmocka_unit_test_teardown(deadline_ends_each_message_once_with_the_broker_stopped,
	                              fx_broker_resume),
	};
	int rc;

	pthread_mutex_init(&seen.mu, NULL);
	pthread_cond_init(&seen.cv, NULL);
	broker_pid = fx_broker_pid();
	if (fx_kafka_setup(&cf, "kqthen", 3, topic, sizeof(topic)) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
