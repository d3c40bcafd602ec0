/*
 * paycb-ingest - where payment channels deliver notifications.
 *
 * It verifies each notification on its raw bytes, reserves it with one autocommit INSERT on
 * the unique key, publishes the row id to <prefix>.callbacks and only then answers the
 * channel. See docs/ingest.md. SIGTERM: stop accepting, finish in-flight requests, flush the
 * producer, exit 0. SIGHUP: the merchants' keys reloaded (docs/operations.md, Rotating keys).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "chan_conf.h"
#include "daemon.h"
#include "ingest.h"
#include "log.h"

static struct ingest g_in;

/*
 * ingest_ready - /readyz. The probe has a database connection of its own, opened when first
 * needed and reopened after a failure, so that probes never take one of the connections
 * reservations wait for; it runs on the admin listener's single thread.
 */
static int
ingest_ready(void *arg, char *why, size_t len)
{
	struct ingest *in = arg;

	if (!in->ready_db_open || in->ready_db.broken) {
		if (in->ready_db_open)
			db_close(&in->ready_db);
		in->ready_db_open = 0;
		if (db_open(&in->ready_db, &in->cf->db) != DB_OK) {
			snprintf(why, len, "database: %s", in->ready_db.last_error);
			db_close(&in->ready_db);
			return -1;
		}
		in->ready_db_open = 1;
	}
	if (db_exec(&in->ready_db, "SELECT 1", NULL, 0, NULL, NULL) != DB_OK) {
		snprintf(why, len, "database: %s", in->ready_db.last_error);
		return -1;
	}
	if (kq_producer_ping(in->kp, 1000) != 0) {
		snprintf(why, len, "kafka: no metadata answer within 1 s");
		return -1;
	}
	return 0;
}

static int
ingest_daemon_init(const struct conf *cf, void **state)
{
	struct ingest *in = &g_in;
	char err[512];
	int rc;

	memset(in, 0, sizeof(*in));
	in->cf = cf;
	conf_topic(cf, "callbacks", in->topic, sizeof(in->topic));
	ingest_metrics_init(&in->m);
	ingest_flight_init(&in->flight);
	pthread_mutex_init(&in->keys_mu, NULL);
	if ((in->keys = ingest_keyset_build(cf, err, sizeof(err))) == NULL) {
		log_error(NULL, "event=config_error error=\"%s\"", err);
		return EXIT_CONFIG;
	}
	if ((rc = ingest_pool_init(&in->pool, &cf->db, (int)cf->ingest.db_connections, err,
	                           sizeof(err))) != 0) {
		log_error(NULL, "event=db_error error=\"%s\"", err);
		return rc;
	}
	if (kq_producer_new(&cf->kafka, &in->kp, err, sizeof(err)) != 0) {
		log_error(NULL, "event=kafka_error error=\"%s\"", err);
		return EXIT_CONFIG;
	}
	/* A broker that is down now is not fatal: the first publishes are late, not lost. */
	if (kq_producer_warm(in->kp, in->topic, 2000) != 0)
		log_warn(NULL, "event=kafka_unavailable topic=%s action=continue", in->topic);
	/* The admin listener comes last, so that an answer from /healthz means the channel
	 * listener and its workers are up too. */
	if (ingest_work_start(in, (int)cf->ingest.workers, err, sizeof(err)) != 0 ||
	    ingest_http_start(in, err, sizeof(err)) != 0 ||
	    admin_start(cf->ingest.admin_addr, (int)cf->ingest.admin_port, ingest_ready, in,
	                cf->admin_token_file, &in->admin, err, sizeof(err)) != 0) {
		log_error(NULL, "event=listen_failed error=\"%s\"", err);
		return EXIT_UNAVAILABLE;
	}
	log_info(NULL, "event=listening addr=%s port=%lld admin_port=%lld merchants=%d",
	         cf->ingest.listen_addr, cf->ingest.listen_port, cf->ingest.admin_port,
	         in->keys->nmerchants);
	*state = in;
	return 0;
}

static int
ingest_daemon_loop(void *state, long long *wait_ms)
{
	struct ingest *in = state;

	/* The HTTP threads do the work; the loop only watches for a fatal producer error,
	 * after which idempotent delivery can no longer be promised. kq wakes the skeleton
	 * when one happens, so the loop waits for nothing else. */
	if (kq_fatal(in->kp)) {
		log_error(NULL, "event=kafka_fatal action=drain");
		return EXIT_SOFTWARE;
	}
	*wait_ms = DAEMON_WAIT_FOREVER;
	return 0;
}

static int
ingest_daemon_drain(void *state)
{
	struct ingest *in = state;
	long long waited = 0, limit = in->cf->ingest.publish_budget_ms + 5000;
	struct timespec ts = {0, 20 * 1000 * 1000};
	int left, rc = 0;

	ingest_http_quiesce(in);
	while (atomic_load(&in->inflight) > 0 && waited < limit) {
		nanosleep(&ts, NULL);
		waited += 20;
	}
	if (atomic_load(&in->inflight) > 0) {
		log_warn(NULL, "event=drain_timeout inflight=%d", atomic_load(&in->inflight));
		rc = EXIT_SOFTWARE;
	}
	/* The queue is empty once nothing is in flight; the workers end before the listener,
	 * which must have no suspended connection left when it stops. */
	ingest_work_stop(in);
	ingest_http_stop(in);
	admin_stop(in->admin);
	if (in->ready_db_open)
		db_close(&in->ready_db);
	left = kq_flush(in->kp, 10000);
	if (left > 0)
		log_warn(NULL, "event=flush_incomplete undelivered=%d", left);
	kq_producer_free(in->kp);
	ingest_pool_free(&in->pool);
	ingest_flight_free(&in->flight);
	ingest_keyset_put(in->keys);
	in->keys = NULL;
	metrics_free();
	return rc;
}

/*
 * ingest_daemon_reload - SIGHUP: every merchant's keys from the new file into a new set, swapped in
 * only when all of them loaded. Requests in flight keep the set they started with.
 */
static int
ingest_daemon_reload(void *state, struct conf *nc, char *err, size_t errlen)
{
	struct ingest *in = state;
	struct ingest_keyset *ks = ingest_keyset_build(nc, err, errlen);

	if (ks == NULL)
		return -1;
	ks->owned = nc;
	ingest_keyset_swap(in, ks);
	return 0;
}

DAEMON_MAIN(ingest, "paycb-ingest",
            "Receives payment notifications, verifies, stores and publishes them.", PROG_INGEST,
            ingest_daemon_reload, chan_conf_use)
