/*
 * test_kq_sleep - a producer told to sleep (kq_producer_sleep_after), against the real
 * broker: once idle it destroys its librdkafka handle (no rdk: thread is left in the
 * process), kq_flush does not wake it, and the next message makes a new handle and is
 * delivered; a message in flight keeps the handle however long it takes (the broker stopped
 * with SIGSTOP, as in test_kq_then); and threads producing with pauses that let the handle
 * sleep between their messages (and surely at their rendezvous) lose none and double none.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fixtures.h"
#include "harness.h"
#include "kq.h"

#define NTHREADS   4
#define PER_THREAD 40

static struct conf cf;
static char topic[256];
static int broker_pid;

/* rdk_threads - librdkafka's threads in this process (their names start with "rdk:"). */
static int
rdk_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	char path[300], name[64];
	int n = 0;

	assert_non_null(d);
	while ((e = readdir(d)) != NULL) {
		FILE *f;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(name, sizeof(name), f) && strncmp(name, "rdk:", 4) == 0)
			n++;
		fclose(f);
	}
	closedir(d);
	return n;
}

static int
asleep(void *arg)
{
	return kq_producer_asleep(arg);
}

static int
no_rdk_thread(void *arg)
{
	(void)arg;
	return rdk_threads() == 0;
}

static struct kq_producer *
producer(int sleep_ms)
{
	struct kq_producer *p = fx_producer(&cf, topic);

	assert_non_null(p);
	kq_producer_sleep_after(p, sleep_ms);
	return p;
}

static int
send_one(struct kq_producer *p, const char *val, int timeout_ms)
{
	char err[256];
	int rc = kq_produce_wait(p, topic, "k", 1, val, strlen(val), timeout_ms, err, sizeof(err));

	if (rc != 0)
		printf("# %s: %s\n", val, err);
	return rc;
}

/* The values read back from the topic, counted per distinct value of this run's prefix. */
struct tally {
	const char *prefix;
	int counts[NTHREADS * PER_THREAD + 2];
	int other;
};

static int
tally_cb(void *arg, const rd_kafka_message_t *m)
{
	struct tally *t = arg;
	size_t plen = strlen(t->prefix);
	char val[64];
	int i;

	if (m->len >= sizeof(val) || m->len <= plen || memcmp(m->payload, t->prefix, plen) != 0)
		return 0;
	memcpy(val, m->payload, m->len);
	val[m->len] = '\0';
	i = atoi(val + plen);
	if (i >= 0 && i < (int)(sizeof(t->counts) / sizeof(t->counts[0])))
		t->counts[i]++;
	else
		t->other++;
	return 0;
}

static void
idle_producer_sleeps_and_the_next_message_wakes_it(void **state)
{
	struct kq_producer *p = producer(300);
	struct tally t = {.prefix = "wake-"};
	long long t0;

	(void)state;
	assert_int_equal(send_one(p, "wake-0", 10000), 0);
	assert_true(rdk_threads() > 0);
	assert_int_equal(harness_wait_until(asleep, p, 10000), 0);
	/* Its handle is gone: no librdkafka thread is left in the process. */
	assert_int_equal(harness_wait_until(no_rdk_thread, NULL, 10000), 0);
	assert_int_equal(kq_producer_opens(p), 1);
	/* A flush has nothing to wait for and does not wake it. */
	assert_int_equal(kq_flush(p, 1000), 0);
	assert_true(kq_producer_asleep(p));
	assert_int_equal(kq_producer_opens(p), 1);
	/* The next message makes a new handle and is delivered. */
	t0 = harness_now_ms();
	assert_int_equal(send_one(p, "wake-1", 10000), 0);
	printf("# delivered %lld ms after the call that woke the producer\n",
	       harness_now_ms() - t0);
	assert_int_equal(kq_producer_opens(p), 2);
	assert_int_equal(harness_wait_until(asleep, p, 10000), 0);
	assert_int_equal(kq_delivered(p), 2);
	kq_producer_free(p);
	assert_true(fx_read_topic(&cf, topic, tally_cb, &t) >= 2);
	assert_int_equal(t.counts[0], 1);
	assert_int_equal(t.counts[1], 1);
}

static void
message_in_flight_keeps_the_handle(void **state)
{
	struct kq_producer *p = producer(200);
	struct tally t = {.prefix = "held-"};
	struct kq_wait *w;
	struct timespec dl;
	char err[256];

	(void)state;
	assert_true(broker_pid > 0);
	assert_int_equal(fx_broker_stop(broker_pid), 0);
	w = kq_produce_start(p, topic, "k", 1, "held-0", 6, err, sizeof(err));
	assert_non_null(w);
	/* Ten times its idle time without a report: the handle must stay all along. */
	assert_int_equal(harness_wait_until(asleep, p, 2000), -1);
	fx_broker_resume(NULL);
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 20;
	assert_int_equal(kq_wait_end(w, &dl, err, sizeof(err)), 0);
	/* Reported: now it may sleep. */
	assert_int_equal(harness_wait_until(asleep, p, 10000), 0);
	assert_int_equal(kq_producer_opens(p), 1);
	kq_producer_free(p);
	assert_true(fx_read_topic(&cf, topic, tally_cb, &t) >= 1);
	assert_int_equal(t.counts[0], 1);
}

/* Every RENDEZVOUS messages the threads meet and one waits until the handle slept. */
#define RENDEZVOUS 10

static pthread_barrier_t met, slept;

struct worker {
	struct kq_producer *p;
	int index, failed, unslept;
};

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	unsigned seed = (unsigned)w->index * 7919u + 1;

	for (int i = 0; i < PER_THREAD; i++) {
		char val[32];
		/* Pauses around the idle time (20 ms), so the handle may sleep and wake between
		 * messages while other threads produce, however loaded the machine is. */
		struct timespec ts = {0, (long)(rand_r(&seed) % 40) * 1000 * 1000};

		snprintf(val, sizeof(val), "race-%d", w->index * PER_THREAD + i);
		if (send_one(w->p, val, 15000) != 0)
			w->failed++;
		nanosleep(&ts, NULL);
		/* And surely sleeps at each rendezvous, so the next messages wake it together. */
		if ((i + 1) % RENDEZVOUS == 0) {
			if (pthread_barrier_wait(&met) == PTHREAD_BARRIER_SERIAL_THREAD &&
			    harness_wait_until(asleep, w->p, 10000) != 0)
				w->unslept++;
			pthread_barrier_wait(&slept);
		}
	}
	return NULL;
}

static void
threads_lose_and_double_nothing_across_sleeps(void **state)
{
	struct kq_producer *p = producer(20);
	struct worker ws[NTHREADS];
	pthread_t th[NTHREADS];
	struct tally t = {.prefix = "race-"};
	unsigned long long opens;

	(void)state;
	pthread_barrier_init(&met, NULL, NTHREADS);
	pthread_barrier_init(&slept, NULL, NTHREADS);
	for (int i = 0; i < NTHREADS; i++) {
		ws[i] = (struct worker){p, i, 0, 0};
		assert_int_equal(pthread_create(&th[i], NULL, worker_main, &ws[i]), 0);
	}
	for (int i = 0; i < NTHREADS; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(ws[i].failed, 0);
		assert_int_equal(ws[i].unslept, 0);
	}
	pthread_barrier_destroy(&met);
	pthread_barrier_destroy(&slept);
	opens = kq_producer_opens(p);
	printf("# %d messages from %d threads, %llu handles made\n", NTHREADS * PER_THREAD,
	       NTHREADS, opens);
	/* A new handle after each rendezvous but the last, and maybe more in between. */
	assert_true(opens >= PER_THREAD / RENDEZVOUS);
	assert_int_equal(kq_delivered(p), NTHREADS * PER_THREAD);
	kq_producer_free(p);
	assert_true(fx_read_topic(&cf, topic, tally_cb, &t) >= NTHREADS * PER_THREAD);
	for (int i = 0; i < NTHREADS * PER_THREAD; i++)
		assert_int_equal(t.counts[i], 1);
	assert_int_equal(t.other, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(idle_producer_sleeps_and_the_next_message_wakes_it),
	    cmocka_unit_test_teardown(message_in_flight_keeps_the_handle, fx_broker_resume),
	    cmocka_unit_test(threads_lose_and_double_nothing_across_sleeps),
	};
	int rc;

	broker_pid = fx_broker_pid();
	if (fx_kafka_setup(&cf, "kqsleep", 2, topic, sizeof(topic)) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
