/*
 * ingest_work - the workers that run requests: a FIFO queue and ingest.workers threads.
 *
 * The HTTP front (ingest_http.c) reads requests on one event loop and suspends each complete
 * one while a worker verifies, reserves and publishes it, because those steps block on the
 * database and on the delivery report. A fixed pool keeps the threads that compete for the
 * cores to a known number however many connections are open: a storm of 1,000 copies is 1,000
 * queued jobs, not 1,000 threads woken at once. How many requests may wait is bounded by
 * ingest.max_inflight (the front answers 503 beyond it); how long one may wait, by the front.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"

static void *
ingest_work_main(void *arg)
{
	struct ingest *in = arg;
	struct ingest_work *w = &in->work;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct ingest_job *j;

		while (w->head == NULL && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		/* Stopping ends a worker only once the queue is empty: no request is dropped. */
		if ((j = w->head) == NULL)
			break;
		if ((w->head = j->next) == NULL)
			w->tail = NULL;
		w->queued--;
		metrics_set(in->m.queued, w->queued);
		pthread_mutex_unlock(&w->mu);
		j->run(in, j);
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
	pthread_cond_init(&w->cv, NULL);
	if ((w->threads = calloc((size_t)n, sizeof(pthread_t))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (; w->nthreads < n; w->nthreads++)
		if (pthread_create(&w->threads[w->nthreads], NULL, ingest_work_main, in) != 0) {
			snprintf(err, errlen, "cannot start worker %d of %d", w->nthreads + 1, n);
			ingest_work_stop(in);
			return -1;
		}
	return 0;
}

void
ingest_work_push(struct ingest *in, struct ingest_job *j)
{
	struct ingest_work *w = &in->work;

	j->next = NULL;
	pthread_mutex_lock(&w->mu);
	if (w->tail)
		w->tail->next = j;
	else
		w->head = j;
	w->tail = j;
	w->queued++;
	metrics_set(in->m.queued, w->queued);
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
}

void
ingest_work_stop(struct ingest *in)
{
	struct ingest_work *w = &in->work;

	if (w->threads == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = 1;
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	free(w->threads);
	w->threads = NULL;
	w->nthreads = 0;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
}
