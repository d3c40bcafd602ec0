/*
 * ingest_flight - one reservation in flight per notification: copies that are byte for byte
 * the request of a copy already in flight are parked on it, and its reservation answers them.
 *
 * A channel's duplicate storm (the same notification 100 or 1,000 times at once) otherwise
 * costs a worker, a verification, an INSERT on one unique-key entry and several thread
 * wake-ups per copy; InnoDB serialises the INSERTs on that entry's lock, and on a small box
 * the wake-ups alone starve the event loop that has to send the answers. The front
 * (ingest_http.c) therefore joins a complete request to the flight of an identical one
 * before any worker sees it: the first copy (the leader) is queued and runs the flow, the
 * others stay suspended, holding no thread, until the leader's reservation has answered.
 *
 * This is not a second deduplication, and a parked copy is not answered unverified:
 * - Copies are joined only when their key is equal, and the key is the whole input of
 *   verification: channel, merchant, the body's SHA-256 and every Wechatpay-* and Stripe-*
 *   header in order (the verifiers read no other header). Verifying the same input gives
 *   the same verdict except for the time check, so the leader hands over the range of arrival
 *   seconds in which its verdict holds, and a copy that arrived outside it runs by itself.
 * - A parked copy is answered success only because the leader's INSERT returned success or
 *   a duplicate-key error, that is, because the database holds the row. In every other case
 *   (verification failed, no database, busy, queued past the budget) each parked copy is
 *   queued to run the whole flow by itself, as if it had come alone.
 * - Nothing is remembered once the reservation has answered: a copy that comes a moment
 *   later starts a flight of its own and reads the duplicate key.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"

struct ingest_flight_entry {
	struct ingest_flight_entry *next;
	struct ingest_job *parked, **tail;
	unsigned hash;
	size_t klen;
	char key[]; /* klen bytes, not a C string: the key holds NUL separators */
};

static unsigned
ingest_flight_hash(const char *s, size_t n)
{
	unsigned h = 2166136261u; /* FNV-1a: the key carries a SHA-256 and signatures */

	for (size_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

void
ingest_flight_init(struct ingest_flight *f)
{
	memset(f, 0, sizeof(*f));
	pthread_mutex_init(&f->mu, NULL);
}

void
ingest_flight_free(struct ingest_flight *f)
{
	pthread_mutex_destroy(&f->mu);
}

int
ingest_flight_join(struct ingest *in, const char *key, size_t klen, struct ingest_job *j,
                   struct ingest_flight_entry **out)
{
	struct ingest_flight *f = &in->flight;
	unsigned h = ingest_flight_hash(key, klen);
	struct ingest_flight_entry **b = &f->buckets[h % INGEST_FLIGHT_BUCKETS], *e;

	*out = NULL;
	j->next = NULL;
	pthread_mutex_lock(&f->mu);
	for (e = *b; e; e = e->next)
		if (e->hash == h && e->klen == klen && memcmp(e->key, key, klen) == 0)
			break;
	if (e) {
		*e->tail = j;
		e->tail = &j->next;
		pthread_mutex_unlock(&f->mu);
		metrics_add(in->m.coalescing, 1);
		return 0;
	}
	/* No memory: this copy runs alone, as if nothing else were in flight. */
	if ((e = malloc(sizeof(*e) + klen)) != NULL) {
		e->parked = NULL;
		e->tail = &e->parked;
		e->hash = h;
		e->klen = klen;
		memcpy(e->key, key, klen);
		e->next = *b;
		*b = e;
	}
	pthread_mutex_unlock(&f->mu);
	*out = e;
	return 1;
}

void
ingest_flight_land(struct ingest *in, struct ingest_flight_entry *e, const struct ingest_landing *l)
{
	struct ingest_flight *f = &in->flight;
	struct ingest_flight_entry **p;
	struct ingest_job *j, *next;

	if (e == NULL)
		return;
	pthread_mutex_lock(&f->mu);
	for (p = &f->buckets[e->hash % INGEST_FLIGHT_BUCKETS]; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	pthread_mutex_unlock(&f->mu);
	/* Out of the table, the list is the leader's alone: no copy can join it any more. */
	for (j = e->parked; j; j = next) {
		next = j->next;
		metrics_add(in->m.coalescing, -1);
		j->settle(in, j, l);
	}
	free(e);
}
