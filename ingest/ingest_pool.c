/*
 * ingest_pool - a fixed pool of database connections shared by the request threads.
 *
 * Reservations are short single-row INSERTs, so a few connections serve many requests; a
 * request that cannot get one within its wait answers 503 rather than queue past the
 * channel's time budget. A connection that broke reconnects on its next use (db.h).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon.h"
#include "ingest.h"
#include "log.h"

int
ingest_pool_init(struct ingest_pool *p, const struct conf_db *cf, int size, char *err,
                 size_t errlen)
{
	memset(p, 0, sizeof(*p));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->conns = calloc((size_t)size, sizeof(*p->conns));
	p->free_list = calloc((size_t)size, sizeof(int));
	if (p->conns == NULL || p->free_list == NULL) {
		snprintf(err, errlen, "out of memory");
		return EXIT_SOFTWARE;
	}
	p->size = size;
	for (int i = 0; i < size; i++) {
		enum db_rc rc = db_open(&p->conns[i], cf);
		/* A database that is down at start-up is an outage, not a configuration error:
		 * the connection reconnects on first use. Anything else stops the start. */
		if (daemon_db_open_exit(rc) != 0) {
			snprintf(err, errlen, "database: %s", p->conns[i].last_error);
			return daemon_db_open_exit(rc);
		}
		if (rc != DB_OK && i == 0)
			log_warn(NULL, "event=db_unavailable error=\"%s\"", p->conns[i].last_error);
		p->free_list[p->nfree++] = i;
	}
	return 0;
}

struct db *
ingest_pool_get(struct ingest_pool *p, int wait_ms)
{
	struct timespec dl;
	struct db *db = NULL;

	clock_deadline(&dl, wait_ms);
	pthread_mutex_lock(&p->mu);
	while (p->nfree == 0)
		if (pthread_cond_timedwait(&p->cv, &p->mu, &dl) == ETIMEDOUT)
			break;
	if (p->nfree > 0)
		db = &p->conns[p->free_list[--p->nfree]];
	pthread_mutex_unlock(&p->mu);
	return db;
}

void
ingest_pool_put(struct ingest_pool *p, struct db *db)
{
	pthread_mutex_lock(&p->mu);
	p->free_list[p->nfree++] = (int)(db - p->conns);
	pthread_cond_signal(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void
ingest_pool_free(struct ingest_pool *p)
{
	for (int i = 0; p->conns && i < p->size; i++)
		db_close(&p->conns[i]);
	free(p->conns);
	free(p->free_list);
	p->conns = NULL;
	p->free_list = NULL;
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
}
