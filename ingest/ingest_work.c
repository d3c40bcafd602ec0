/*
 * ingest_work - the workers that run requests: ingest.workers threads, a stack of the idle
 * ones and a FIFO queue for the jobs that find none.
 *
 * The HTTP front (ingest_http.c) reads requests on one event loop and suspends each complete
 * one while a worker verifies, reserves and publishes it, because those steps block on the
 * database and on the delivery report. A fixed pool keeps the threads that compete for the
 * cores to a known number however many connections are open: a storm of 1,000 copies is 1,000
 * queued jobs, not 1,000 threads woken at once. How many requests may wait is bounded by
 * ingest.max_inflight (the front answers 503 beyond it); how long one may wait, by the front.
 *
 * A job is handed to the worker that went idle last, on that worker's own condition variable
 * (docs/performance.md, "Ingest's cost per request"): with one shared condition variable the
 * kernel woke the worker that had waited longest, so at 8 clients all 256 workers took turns
 * and each request ran on a cold stack and cache. Now the few workers the load needs stay warm
 * and the others sleep. Jobs that find no idle worker wait in the queue, in arrival order, and
 * a worker takes the queue's head before it goes idle again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"

/* ingest_work_next - under mu: the next job for worker k, waiting idle for one; NULL to stop. */
static struct ingest_job *
ingest_work_next(struct ingest_work *w, struct ingest_worker *k)
{
	struct ingest_job *j;

	for (;;) {
		if ((j = w->head) != NULL) {
			if ((w->head = j->next) == NULL)
				w->tail = NULL;
			w->queued--;
			metrics_set(k->in->m.queued, w->queued);
			return j;
		}
		/* Stopping ends a worker only once the queue is empty: no request is dropped. */
		if (w->stop)
			return NULL;
		k->job = NULL;
		k->next_idle = w->idle;
		w->idle = k;
		while (k->job == NULL && !w->stop)
			pthread_cond_wait(&k->cv, &w->mu);
		/* A worker handed a job was taken off the idle stack by the push. */
		if ((j = k->job) != NULL) {
			k->job = NULL;
			return j;
		}
	}
}

static void *
ingest_work_main(void *arg)
{
	struct ingest_worker *k = arg;
	struct ingest_work *w = &k->in->work;
	struct ingest_job *j;

	pthread_mutex_lock(&w->mu);
	while ((j = ingest_work_next(w, k)) != NULL) {
		pthread_mutex_unlock(&w->mu);
		j->run(k->in, j);
		pthread_mutex_lock(&w->mu);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

int
ingest_work_start(struct ingest *in, int n, char *err, size_t errlen)
{
	struct ingest_work *w = &in->work;

	memset(w, 0, sizeof(*w));
	pthread_mutex_init(&w->mu, NULL);
	if ((w->workers = calloc((size_t)n, sizeof(*w->workers))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (; w->nthreads < n; w->nthreads++) {
		struct ingest_worker *k = &w->workers[w->nthreads];

		k->in = in;
		pthread_cond_init(&k->cv, NULL);
		if (pthread_create(&k->thread, NULL, ingest_work_main, k) != 0) {
			pthread_cond_destroy(&k->cv);
			snprintf(err, errlen, "cannot start worker %d of %d", w->nthreads + 1, n);
			ingest_work_stop(in);
			return -1;
		}
	}
	return 0;
}

void
ingest_work_push(struct ingest *in, struct ingest_job *j)
{
	struct ingest_work *w = &in->work;
	struct ingest_worker *k;

	j->next = NULL;
	pthread_mutex_lock(&w->mu);
	if ((k = w->idle) != NULL && !w->stop) {
		w->idle = k->next_idle;
		k->job = j;
		pthread_cond_signal(&k->cv);
	} else {
		if (w->tail)
			w->tail->next = j;
		else
			w->head = j;
		w->tail = j;
		w->queued++;
		metrics_set(in->m.queued, w->queued);
	}
	pthread_mutex_unlock(&w->mu);
}

void
ingest_work_stop(struct ingest *in)
{
	struct ingest_work *w = &in->work;

	if (w->workers == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	for (int i = 0; i < w->nthreads; i++)
		pthread_cond_signal(&w->workers[i].cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nthreads; i++) {
		pthread_join(w->workers[i].thread, NULL);
		pthread_cond_destroy(&w->workers[i].cv);
	}
	free(w->workers);
	w->workers = NULL;
	w->nthreads = 0;
	w->idle = NULL;
	pthread_mutex_destroy(&w->mu);
}
