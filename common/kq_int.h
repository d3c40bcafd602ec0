/*
 * kq_int - the producer's insides, shared by kq.c, kq_then.c and kq_consumer.c (not for other
 * modules). kq.c uses kq_then.c's pending list; kq_then.c uses nothing of kq.c; kq_consumer.c
 * uses kq_set.
 */
#ifndef PAYCB_KQ_INT_H
#define PAYCB_KQ_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "kq.h"

/* Sets one librdkafka setting; returns 0 or -1 with err naming it. */
int kq_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err, size_t errlen);

struct kq_wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int done;
	int refs;
	rd_kafka_resp_err_t err;
	/* kq_produce_then's: the function, and its place among the pending ones (under amu) */
	kq_done_fn fn;
	void *arg;
	long long deadline_us;
	struct kq_wait *prev, *next;
	int listed;
};

struct kq_producer {
	/*
	 * The librdkafka handle and its main queue (what the poller serves; yielding it wakes the
	 * poller). A producer told to sleep (kq_producer_sleep_after) destroys them when idle and
	 * the next caller makes them again from tmpl: rkl guards them, shared by the callers that
	 * use the handle and exclusive to whoever makes or destroys it. awake (under smu) tells
	 * the poller that it has a handle to serve; scv wakes it.
	 */
	rd_kafka_t *rk;
	rd_kafka_queue_t *mainq;
	rd_kafka_conf_t *tmpl;
	pthread_rwlock_t rkl;
	pthread_mutex_t smu;
	pthread_cond_t scv;
	int awake;
	atomic_int sleep_ms;  /* 0: the handle is never destroyed before the end */
	atomic_llong last_us; /* when a caller last used the handle (monotonic) */
	atomic_ullong opens;  /* handles made, the first included */
	long long slept_us;   /* under rkl: when the handle was last destroyed */
	pthread_t poller;
	atomic_int stop;
	atomic_int fatal;
	atomic_int down; /* librdkafka said all brokers are down; no delivery since */
	atomic_ullong delivered, failed;
	/* kq_produce_then's messages without a report yet, the earliest deadline first */
	pthread_mutex_t amu;
	struct kq_wait *ahead, *atail;
	atomic_int idle_poll_ms; /* the poller's wait while none is pending */
	long long poll_until_us; /* under amu: when the poller's current wait ends */
};

/* A kq_produce_then message's wait, before it is queued (NULL: out of memory). */
struct kq_wait *kq_then_new(struct kq_producer *p, int timeout_ms, kq_done_fn fn, void *arg);
/* Puts a queued message's wait among the pending ones, unless its report came already. */
void kq_then_list(struct kq_producer *p, struct kq_wait *w);
/* A kq_produce_then message's delivery report, from the delivery callback. */
void kq_then_report(struct kq_producer *p, struct kq_wait *w, rd_kafka_resp_err_t e);
/* Ends the waits past their deadline; returns how long the poller may wait for the next. */
int kq_then_expire(struct kq_producer *p);

#endif
