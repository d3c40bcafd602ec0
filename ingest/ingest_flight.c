/*
 * ingest_flight - one reservation in flight per notification: byte-identical copies that
 * arrive while a copy's INSERT is running wait for that INSERT's answer instead of sending
 * their own.
 *
 * A channel's duplicate storm (the same notification 100 or 1,000 times at once) otherwise
 * becomes as many INSERTs on one unique-key entry; InnoDB serialises them on that entry's
 * lock and each waits for the ones before it, so the last copy waits for all of them and the
 * pool's connections are all busy with the same row.
 *
 * This is not a second deduplication. The database's unique key still decides: a waiting
 * copy is answered success only because the INSERT it waited for returned success or a
 * duplicate-key error, that is, because the database holds the row. Copies are joined only
 * when they are the same notification byte for byte (the key includes the body's SHA-256),
 * so the stored raw body is theirs too. Nothing is remembered once the INSERT has answered:
 * a copy that comes a moment later sends its own INSERT and reads the duplicate key. When the
 * INSERT failed, or did not answer within the wait, each waiting copy reserves by itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ingest.h"
#include "kq.h"

struct ingest_flight_entry {
	struct ingest_flight_entry *next;
	pthread_cond_t cv;
	unsigned hash;
	int refs;
	int landed;
	int stored;
	char key[INGEST_FLIGHT_KEY_MAX];
};

static unsigned
ingest_flight_hash(const char *s)
{
	unsigned h = 2166136261u; /* FNV-1a: the key ends with a SHA-256, spread enough */

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
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

/* Drops one reference; f->mu is held. */
static void
ingest_flight_unref(struct ingest_flight_entry *e)
{
	if (--e->refs == 0) {
		pthread_cond_destroy(&e->cv);
		free(e);
	}
}

int
ingest_flight_join(struct ingest_flight *f, const char *key, struct ingest_flight_entry **out)
{
	unsigned h = ingest_flight_hash(key);
	struct ingest_flight_entry **b = &f->buckets[h % INGEST_FLIGHT_BUCKETS], *e;

	*out = NULL;
	pthread_mutex_lock(&f->mu);
	for (e = *b; e; e = e->next)
		if (e->hash == h && strcmp(e->key, key) == 0)
			break;
	if (e) {
		e->refs++;
		pthread_mutex_unlock(&f->mu);
		*out = e;
		return 0;
	}
	/* No memory: this copy reserves alone, as if nothing else were in flight. */
	if ((e = calloc(1, sizeof(*e))) != NULL) {
		pthread_cond_init(&e->cv, NULL);
		e->hash = h;
		e->refs = 1;
		snprintf(e->key, sizeof(e->key), "%s", key);
		e->next = *b;
		*b = e;
	}
	pthread_mutex_unlock(&f->mu);
	*out = e;
	return 1;
}

void
ingest_flight_land(struct ingest_flight *f, struct ingest_flight_entry *e, int stored)
{
	struct ingest_flight_entry **p;

	if (e == NULL)
		return;
	pthread_mutex_lock(&f->mu);
	for (p = &f->buckets[e->hash % INGEST_FLIGHT_BUCKETS]; *p; p = &(*p)->next)
		if (*p == e) {
			*p = e->next;
			break;
		}
	e->landed = 1;
	e->stored = stored;
	pthread_cond_broadcast(&e->cv);
	ingest_flight_unref(e);
	pthread_mutex_unlock(&f->mu);
}

int
ingest_flight_wait(struct ingest_flight *f, struct ingest_flight_entry *e, int timeout_ms)
{
	struct timespec dl;
	int stored;

	kq_deadline(&dl, timeout_ms);
	pthread_mutex_lock(&f->mu);
	while (!e->landed)
		if (pthread_cond_timedwait(&e->cv, &f->mu, &dl) == ETIMEDOUT)
			break;
	stored = e->landed && e->stored;
	ingest_flight_unref(e);
	pthread_mutex_unlock(&f->mu);
	return stored;
}
