/*
 * kq_then - producing without waiting: kq_produce_then's messages and their deadlines.
 *
 * ingest answers a notification once its message's delivery report came (or its budget
 * passed). Waiting for the report on the request's worker cost two thread switches per request:
 * the poller thread woke to serve the report and then woke the worker, which only resumed the
 * connection. Here the poller thread calls the caller's function itself (docs/performance.md,
 * "Ingest's cost per request"). A message without a report by its deadline is ended by the
 * poller too: the pending messages are kept in deadline order, and the poller waits no longer
 * than until the first.
 */
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "kq_int.h"

/* kq_then_unlink - under amu: w leaves the pending list (a no-op when it is not on it). */
static void
kq_then_unlink(struct kq_producer *p, struct kq_wait *w)
{
	if (!w->listed)
		return;
	if (w->prev)
		w->prev->next = w->next;
	else
		p->ahead = w->next;
	if (w->next)
		w->next->prev = w->prev;
	else
		p->atail = w->prev;
	w->prev = w->next = NULL;
	w->listed = 0;
}

/*
 * kq_then_report - a kq_produce_then message's report. Its function is called unless its
 * deadline came first; the report's reference goes, and the list's with it if it was listed.
 */
void
kq_then_report(struct kq_producer *p, struct kq_wait *w, rd_kafka_resp_err_t e)
{
	int call, last;
	char err[256] = "";

	pthread_mutex_lock(&p->amu);
	call = !w->done;
	w->done = 1;
	if (w->listed) {
		kq_then_unlink(p, w);
		w->refs--;
	}
	last = --w->refs == 0;
	pthread_mutex_unlock(&p->amu);
	if (call) {
		if (e)
			snprintf(err, sizeof(err), "delivery failed: %s", rd_kafka_err2str(e));
		w->fn(w->arg, e ? -1 : 0, err);
	}
	if (last)
		free(w);
}

/*
 * kq_then_expire - calls the functions of the messages whose deadline passed without a report
 * (rc -2) and returns how long until the next deadline, at most the idle wait.
 */
int
kq_then_expire(struct kq_producer *p)
{
	long long now = clock_mono_us();
	int wait_ms = atomic_load(&p->idle_poll_ms);
	struct kq_wait *w;
	kq_done_fn fn;
	void *arg;

	for (;;) {
		fn = NULL;
		pthread_mutex_lock(&p->amu);
		if ((w = p->ahead) != NULL && w->deadline_us <= now) {
			kq_then_unlink(p, w);
			w->done = 1;
			/* The list's reference goes; the report's stays until the report comes,
			 * which may be at once on another thread: fn and arg are read here. */
			w->refs--;
			fn = w->fn;
			arg = w->arg;
		} else if (w != NULL && (w->deadline_us - now) / 1000 + 1 < wait_ms) {
			wait_ms = (int)((w->deadline_us - now) / 1000 + 1);
		}
		if (fn == NULL)
			p->poll_until_us = now + wait_ms * 1000LL;
		pthread_mutex_unlock(&p->amu);
		if (fn == NULL)
			return wait_ms;
		fn(arg, -2, "no delivery report by the deadline");
	}
}

struct kq_wait *
kq_then_new(struct kq_producer *p, int timeout_ms, kq_done_fn fn, void *arg)
{
	struct kq_wait *w;

	if ((w = calloc(1, sizeof(*w))) == NULL)
		return NULL;
	w->fn = fn;
	w->arg = arg;
	w->refs = 2; /* the pending list and the delivery report */
	w->deadline_us = clock_mono_us() + timeout_ms * 1000LL;
	/* An idle poller must wake by the earliest deadline a new message can have. */
	if (timeout_ms < atomic_load(&p->idle_poll_ms))
		atomic_store(&p->idle_poll_ms, timeout_ms > 0 ? timeout_ms : 1);
	return w;
}

void
kq_then_list(struct kq_producer *p, struct kq_wait *w)
{
	struct kq_wait *at;
	int wake;

	pthread_mutex_lock(&p->amu);
	if (w->done) {
		/* The report came first (fn has run): the list's reference is dropped here. */
		int last = --w->refs == 0;

		pthread_mutex_unlock(&p->amu);
		if (last)
			free(w);
		return;
	}
	/* Deadlines come almost in order: the place is found from the tail. */
	for (at = p->atail; at != NULL && at->deadline_us > w->deadline_us; at = at->prev)
		;
	w->prev = at;
	w->next = at ? at->next : p->ahead;
	if (w->next)
		w->next->prev = w;
	else
		p->atail = w;
	if (at)
		at->next = w;
	else
		p->ahead = w;
	w->listed = 1;
	/* A new first deadline before the poller's wait ends (the first message of a budget
	 * shorter than the idle wait, or one shorter than those pending) wakes it. With one
	 * budget for all, as in ingest, that is never again. */
	wake = at == NULL && w->deadline_us < p->poll_until_us;
	pthread_mutex_unlock(&p->amu);
	if (wake)
		rd_kafka_queue_yield(p->mainq);
}
