/*
 * kq_int - the producer's insides, shared by kq.c and kq_then.c (not for other modules).
 * kq.c uses kq_then.c's pending list; kq_then.c uses nothing of kq.c.
 */
#ifndef PAYCB_KQ_INT_H
#define PAYCB_KQ_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "kq.h"

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
	rd_kafka_t *rk;
	rd_kafka_queue_t *mainq; /* what the poller serves; yielding it wakes the poller */
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
