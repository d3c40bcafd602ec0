/*
 * sim_deliver - the delivery engine: at-least-once pushes on each channel's retry schedule.
 *
 * Every delivery chain is pushed until the channel's success answer comes back: WeChat Pay
 * 200/204, Alipay the body "success", Stripe any 2xx. Anything else (a failure answer, a
 * 503, a timeout, a refused connection) schedules the next push on the channel's documented
 * schedule, compressed by --compress channel seconds per real second; after the last step the
 * channel gives up. A lost acknowledgement is simulated by reading the success answer and
 * dropping it: the channel never saw it, so it pushes again on its schedule, although ingest
 * already stored the notification.
 *
 * Due chains sit in one min-heap ordered by due time and then by a random tie, so chains due
 * together go out in random order; each heap entry carries its keys, so a push or a pop
 * reads one contiguous array rather than a delivery record per level. --concurrency worker
 * threads each own one keep-alive connection and take the engine's lock once per push: to
 * book its answer and to take the next due chain in the same turn. Storm copies are
 * different: each has its own connection, opened beforehand, and one thread sends them all
 * at their instant (sim_storm.c); their re-pushes, if any, join the heap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "sim.h"

/* The channels' retry delays in seconds after push 1, 2, ... (channel-specs.md). */
static const int wx_schedule[] = {15,   15,   30,    180,   600,   1200,  1800, 1800,
                                  1800, 3600, 10800, 10800, 10800, 21600, 21600};
static const int ali_schedule[] = {240, 600, 600, 3600, 7200, 21600, 54000};
/* Stripe documents exponential backoff over three days; doubling from five minutes. */
static const int stripe_schedule[] = {300, 600, 1200, 2400, 4800, 9600, 19200, 38400, 76800, 86400};

#define SIM_STACK (256 * 1024)

/* A heap entry: a delivery and the keys it is ordered by, copied from it when pushed. */
struct slot {
	long long due_us;
	uint64_t tie;
	int d;
};

struct sim_engine {
	struct sim_plan *p;
	const struct sim_merchant *m;
	const struct sim_opts *o;
	struct sim_stats *st;
	char addr[64];
	int port;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct slot *heap;
	int nheap;
	int pending, connected, stop;
	int timing; /* a worker waits for the heap's head to fall due */
	long long t0;
	pthread_t *threads;
	int nworkers, nthreads;
	int storm_ready, storm_go;
	int *burst_dels;
};

/* ---- the heap ------------------------------------------------------------------------ */

static int
before(const struct slot *x, const struct slot *y)
{
	return x->due_us < y->due_us || (x->due_us == y->due_us && x->tie < y->tie);
}

static void
heap_push(struct sim_engine *e, int d)
{
	struct sim_delivery *dl = &e->p->dels[d];
	struct slot v = {dl->due_us, dl->tie, d};
	int i = e->nheap++;

	while (i > 0 && before(&v, &e->heap[(i - 1) / 2])) {
		e->heap[i] = e->heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	e->heap[i] = v;
	dl->state = D_QUEUED;
}

static int
heap_pop(struct sim_engine *e)
{
	int top = e->heap[0].d, i = 0;
	struct slot v = e->heap[--e->nheap];

	for (;;) {
		int l = 2 * i + 1, r = l + 1, s = -1;
		const struct slot *m = &v;

		if (l < e->nheap && before(&e->heap[l], m))
			m = &e->heap[s = l];
		if (r < e->nheap && before(&e->heap[r], m))
			s = r;
		if (s < 0)
			break;
		e->heap[i] = e->heap[s];
		i = s;
	}
	if (e->nheap > 0)
		e->heap[i] = v;
	return top;
}

/* ---- one push ------------------------------------------------------------------------ */

/* next_delay_us - the wait before push attempt+1, or -1 when the channel gives up. */
static long long
next_delay_us(const struct sim_engine *e, enum sim_ch ch, int attempt)
{
	const int *s = ch == SIM_WX ? wx_schedule : ch == SIM_ALI ? ali_schedule : stripe_schedule;
	int n = ch == SIM_WX    ? (int)(sizeof(wx_schedule) / sizeof(int))
	        : ch == SIM_ALI ? (int)(sizeof(ali_schedule) / sizeof(int))
	                        : (int)(sizeof(stripe_schedule) / sizeof(int));

	if (attempt < 1 || attempt > n)
		return -1;
	return (long long)s[attempt - 1] * 1000000LL / e->o->compress;
}

/* finish - books the answer of one push of d; called with the lock held. */
static void
finish(struct sim_engine *e, int di, int ok, long long now)
{
	struct sim_delivery *d = &e->p->dels[di];
	const struct sim_note *n = &e->p->notes[d->note];
	long long delay;

	d->attempt++;
	if (ok && !d->answered_ok) {
		struct sim_case *c = &e->p->cases[n->ccase];
		long long zero = 0;

		d->answered_ok = 1;
		if (c->e2e_note == d->note)
			atomic_compare_exchange_strong(&c->ack_us, &zero, now);
		/* The chains that wait for this one's success start now. Idle workers are woken
		 * only when there is such a chain: a storm's 1,000 answers would otherwise wake
		 * every worker 1,000 times on the cores the storm is measured on. */
		for (int k = d->first_dep; k >= 0; k = e->p->dels[k].next_dep) {
			e->p->dels[k].due_us = now + e->p->dels[k].after_us;
			heap_push(e, k);
		}
		if (d->first_dep >= 0)
			pthread_cond_broadcast(&e->cv);
	}
	if (ok && d->lost_acks == 0) {
		d->state = D_DONE;
		e->pending--;
		return;
	}
	if (ok) {
		d->lost_acks--;
		atomic_fetch_add(&e->st->lost, 1);
	}
	if ((delay = next_delay_us(e, n->ch, d->attempt)) < 0) {
		d->state = D_GAVE_UP;
		e->pending--;
		atomic_fetch_add(&e->st->gave_up, 1);
		return;
	}
	d->due_us = now + delay;
	heap_push(e, di);
	pthread_cond_broadcast(&e->cv);
}

/*
 * count - counts the answer a of one push of d (sent: a request went out) without the
 * engine's lock; returns whether it is the channel's success answer. The latency sample is
 * the caller's to add, under the lock it takes anyway.
 */
static int
count(struct sim_engine *e, int di, const struct sim_answer *a, int sent)
{
	const struct sim_note *n = &e->p->notes[e->p->dels[di].note];
	int ok = 0;

	if (!sent) {
		/* Cannot happen with valid keys; counted as a failed push so it is visible. */
		atomic_fetch_add(&e->st->errors, 1);
	} else {
		atomic_fetch_add(&e->st->sent, 1);
		atomic_fetch_add(
		    &e->st->status[n->ch]
		                  [a->status > 0 && a->status < SIM_STATUS_MAX ? a->status : 0],
		    1);
		ok = sim_answer_ok(n->ch, a);
		atomic_fetch_add(a->status == 0 ? &e->st->errors
		                 : ok           ? &e->st->ok
		                                : &e->st->failed,
		                 1);
	}
	return ok;
}

/* book_locked - books the answer of one push of di, read at t: its latency sample and what
 * follows from it (finish); called with the engine's lock held. t is taken before the lock,
 * so waiting for it delays neither the ack -> PAID start nor the chains released by it. */
static void
book_locked(struct sim_engine *e, int di, const struct sim_answer *a, int ok, long long t)
{
	if (a->status > 0)
		sim_lat_add(&e->st->ack, a->us);
	if (ok)
		atomic_store(&e->st->last_ok_us, t);
	finish(e, di, ok, t);
}

/* book - counts and books the answer of one push of di (a storm copy's). */
static void
book(struct sim_engine *e, int di, const struct sim_answer *a, int sent)
{
	int ok = count(e, di, a, sent);
	long long t = clock_mono_us();

	pthread_mutex_lock(&e->mu);
	book_locked(e, di, a, ok, t);
	pthread_mutex_unlock(&e->mu);
}

/*
 * prepare - the signed body and headers of one push of delivery di, signed for now; NULL
 * when it cannot be made (booked by the caller as a push that was not sent).
 */
static struct sim_blob *
prepare(struct sim_engine *e, int di, time_t now, char *headers, size_t hlen)
{
	struct sim_note *n = &e->p->notes[e->p->dels[di].note];
	const struct sim_merchant *m = &e->m[n->merchant];
	struct sim_blob *b = sim_note_get(m, n, now);

	if (b != NULL && sim_note_headers(m, n, b, now, headers, hlen) != 0) {
		sim_blob_put(b);
		b = NULL;
	}
	return b;
}

/* push - sends delivery di once on c, with the engine's lock released, and counts the
 * answer in a; returns whether it is the channel's success answer. */
static int
push(struct sim_engine *e, struct sim_conn *c, int di, struct sim_answer *a)
{
	const char *path = e->p->notes[e->p->dels[di].note].path;
	char headers[2048];
	struct sim_blob *b = prepare(e, di, time(NULL), headers, sizeof(headers));
	long long zero = 0;
	int ok;

	memset(a, 0, sizeof(*a));
	if (b != NULL) {
		atomic_compare_exchange_strong(&e->st->first_send_us, &zero, clock_mono_us());
		sim_http_post(c, path, headers, b->body, b->len, e->o->timeout_ms, a);
	}
	ok = count(e, di, a, b != NULL);
	sim_blob_put(b);
	return ok;
}

/* ---- threads ------------------------------------------------------------------------- */

static void
abs_deadline(struct timespec *ts, long long mono_us)
{
	ts->tv_sec = (time_t)(mono_us / 1000000);
	ts->tv_nsec = (long)(mono_us % 1000000) * 1000;
}

static void *
worker(void *arg)
{
	struct sim_engine *e = arg;
	struct sim_conn c;

	sim_conn_init(&c, e->addr, e->port);
	/* Opened before the clock starts, so the first pushes do not pay for it. */
	sim_conn_open(&c, e->o->timeout_ms);
	pthread_mutex_lock(&e->mu);
	e->connected++;
	pthread_cond_broadcast(&e->cv);
	while (!e->stop) {
		long long now = clock_mono_us();
		struct timespec ts;

		if (e->nheap > 0 && e->heap[0].due_us <= now && e->t0 > 0) {
			int di = heap_pop(e), ok;
			struct sim_answer a;
			long long t;

			e->p->dels[di].state = D_BUSY;
			/* Someone else is to wait for the next one. */
			if (e->nheap > 0)
				pthread_cond_signal(&e->cv);
			pthread_mutex_unlock(&e->mu);
			ok = push(e, &c, di, &a);
			t = clock_mono_us();
			/* The answer is booked in the same turn of the lock that takes the next. */
			pthread_mutex_lock(&e->mu);
			book_locked(e, di, &a, ok, t);
			continue;
		}
		/*
		 * One worker waits for the head to fall due, the others until they are signalled.
		 * If all of them slept until the head's instant, every push of an open-loop run
		 * would wake every idle worker (64 at a time) on the cores being measured.
		 */
		if (e->nheap > 0 && e->t0 > 0 && !e->timing) {
			e->timing = 1;
			abs_deadline(&ts, e->heap[0].due_us);
			pthread_cond_timedwait(&e->cv, &e->mu, &ts);
			e->timing = 0;
		} else {
			pthread_cond_wait(&e->cv, &e->mu);
		}
	}
	pthread_mutex_unlock(&e->mu);
	sim_conn_close(&c);
	free(c.buf);
	return NULL;
}

/* The storm's copies, as the storm thread hands them to sim_storm_run. */
struct storm {
	struct sim_engine *e;
	struct sim_storm_req *r;
	struct sim_blob **blobs;
	int n;
};

static void
storm_done(void *arg, int i)
{
	struct storm *s = arg;

	book(s->e, s->e->burst_dels[i], &s->r[i].a, s->blobs[i] != NULL);
	sim_blob_put(s->blobs[i]);
	s->blobs[i] = NULL;
}

/*
 * storm_main - every storm copy, from one thread (sim_storm.c): the connections are opened
 * before the clock starts, like the workers', and each copy goes at its instant.
 */
static void *
storm_main(void *arg)
{
	struct sim_engine *e = arg;
	struct storm s = {e, NULL, NULL, e->p->bursts};
	long long zero = 0, first = 0;
	time_t now;

	s.r = calloc((size_t)s.n, sizeof(*s.r));
	s.blobs = calloc((size_t)s.n, sizeof(*s.blobs));
	if (s.r != NULL && s.blobs != NULL)
		sim_storm_open(s.r, s.n, e->addr, e->port, e->o->timeout_ms);
	pthread_mutex_lock(&e->mu);
	e->storm_ready = s.n;
	pthread_cond_broadcast(&e->cv);
	while (!e->storm_go && !e->stop)
		pthread_cond_wait(&e->cv, &e->mu);
	pthread_mutex_unlock(&e->mu);
	if (s.r == NULL || s.blobs == NULL || e->stop)
		goto done;
	now = time(NULL);
	for (int i = 0; i < s.n; i++) {
		int di = e->burst_dels[i];
		struct sim_storm_req *q = &s.r[i];
		char headers[2048];

		q->at_us = e->t0 + e->p->dels[di].start_us;
		if (i == 0 || q->at_us < first)
			first = q->at_us;
		s.blobs[i] = prepare(e, di, now, headers, sizeof(headers));
		if (s.blobs[i] == NULL ||
		    (q->hlen = sim_http_head(&q->c, e->p->notes[e->p->dels[di].note].path, headers,
		                             s.blobs[i]->len, q->head, sizeof(q->head))) < 0) {
			/* Booked as a push that could not be made, like push() does. */
			sim_blob_put(s.blobs[i]);
			s.blobs[i] = NULL;
			sim_conn_close(&q->c);
			continue;
		}
		q->body = s.blobs[i]->body;
		q->blen = s.blobs[i]->len;
	}
	atomic_compare_exchange_strong(&e->st->first_send_us, &zero, first);
	sim_storm_run(s.r, s.n, e->o->timeout_ms, storm_done, &s);
done:
	if (s.r != NULL)
		for (int i = 0; i < s.n; i++) {
			sim_conn_close(&s.r[i].c);
			free(s.r[i].c.buf);
		}
	if (s.blobs != NULL)
		for (int i = 0; i < s.n; i++)
			sim_blob_put(s.blobs[i]);
	free(s.r);
	free(s.blobs);
	return NULL;
}

int
sim_engine_start(struct sim_engine **out, struct sim_plan *p, const struct sim_merchant *m,
                 const struct sim_opts *o, const char *addr, int port, struct sim_stats *st,
                 char *err, size_t errlen)
{
	struct sim_engine *e = calloc(1, sizeof(*e));
	pthread_attr_t attr;
	int rc = -1, nb = 0;

	*out = NULL;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, SIM_STACK);
	if (e == NULL)
		goto done;
	e->p = p;
	e->m = m;
	e->o = o;
	e->st = st;
	e->port = port;
	snprintf(e->addr, sizeof(e->addr), "%s", addr);
	pthread_mutex_init(&e->mu, NULL);
	{
		pthread_condattr_t ca;
		pthread_condattr_init(&ca);
		pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
		pthread_cond_init(&e->cv, &ca);
		pthread_condattr_destroy(&ca);
	}
	e->heap = calloc((size_t)p->ndels + 1, sizeof(*e->heap));
	e->burst_dels = calloc((size_t)p->bursts + 1, sizeof(int));
	e->threads = calloc((size_t)(o->concurrency + p->bursts), sizeof(pthread_t));
	if (e->heap == NULL || e->burst_dels == NULL || e->threads == NULL)
		goto done;
	e->pending = p->ndels;
	for (int i = 0; i < p->ndels; i++)
		if (p->dels[i].burst)
			e->burst_dels[nb++] = i;
	for (int i = 0; i < o->concurrency; i++, e->nworkers++, e->nthreads++)
		if (pthread_create(&e->threads[e->nthreads], &attr, worker, e) != 0)
			goto done;
	/* The storm thread opens its connections and waits for the start, like the workers. */
	if (nb > 0) {
		if (pthread_create(&e->threads[e->nthreads], &attr, storm_main, e) != 0) {
			snprintf(err, errlen, "cannot start the storm thread");
			goto done;
		}
		e->nthreads++;
	}
	pthread_mutex_lock(&e->mu);
	while (e->connected < e->nworkers || e->storm_ready < nb)
		pthread_cond_wait(&e->cv, &e->mu);
	e->t0 = clock_mono_us();
	e->storm_go = 1;
	for (int i = 0; i < p->ndels; i++) {
		struct sim_delivery *d = &p->dels[i];

		d->due_us = e->t0 + d->start_us;
		if (d->after < 0 && !d->burst)
			heap_push(e, i);
	}
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	rc = 0;
done:
	pthread_attr_destroy(&attr);
	if (rc != 0 && e != NULL) {
		if (err[0] == '\0')
			snprintf(err, errlen, "cannot start the delivery engine");
		sim_engine_stop(e);
		e = NULL;
	}
	*out = e;
	return rc;
}

int
sim_engine_pending(struct sim_engine *e)
{
	int n;

	pthread_mutex_lock(&e->mu);
	n = e->pending;
	pthread_mutex_unlock(&e->mu);
	return n;
}

void
sim_engine_stop(struct sim_engine *e)
{
	if (e == NULL)
		return;
	pthread_mutex_lock(&e->mu);
	e->stop = 1;
	if (e->t0 == 0)
		e->t0 = clock_mono_us();
	pthread_cond_broadcast(&e->cv);
	pthread_mutex_unlock(&e->mu);
	for (int i = 0; i < e->nthreads; i++)
		pthread_join(e->threads[i], NULL);
	for (int i = 0; i < e->p->ndels; i++) {
		enum sim_dstate s = e->p->dels[i].state;
		if (s != D_DONE && s != D_GAVE_UP) {
			e->p->dels[i].state = D_ABANDONED;
			atomic_fetch_add(&e->st->abandoned, 1);
		}
	}
	pthread_cond_destroy(&e->cv);
	pthread_mutex_destroy(&e->mu);
	free(e->heap);
	free(e->burst_dels);
	free(e->threads);
	free(e);
}
