/*
 * reconciler_daemon - the reconciler's state, its cycle and the daemon_main callbacks (the
 * metrics it creates at start are reconciler_metrics.c's). One thread owns the database
 * connection and the channel clients and runs a cycle every reconciler.sweep_interval_s,
 * again at once while a batch came back full: a probe (reconciler_probe.c), then those of
 * refunds, reconciliation queries of PENDING orders and closes that have due jobs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "admin.h"
#include "clock.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "reconciler.h"

static int
recon_ready(void *arg, char *why, size_t len)
{
	struct reconciler *r = arg;

	if (!atomic_load(&r->ready)) {
		snprintf(why, len, "the last cycle failed (database?)");
		return 1;
	}
	return 0;
}

static void
recon_free(struct reconciler *r)
{
	if (r == NULL)
		return;
	admin_stop(r->admin);
	recon_clients_close(r);
	if (r->kp) {
		kq_flush(r->kp, 10000);
		kq_producer_free(r->kp);
	}
	db_close(&r->db);
	if (r->keys_cf != NULL) {
		conf_free(r->keys_cf);
		free(r->keys_cf);
	}
	free(r);
}

int
recon_daemon_init(const struct conf *cf, void **state)
{
	struct reconciler *r;
	char err[512];
	enum db_rc drc;
	int rc = EXIT_UNAVAILABLE;

	if ((r = calloc(1, sizeof(*r))) == NULL)
		return EXIT_SOFTWARE;
	r->cf = cf;
	conf_topic(cf, "callbacks", r->topic_main, sizeof(r->topic_main));
	recon_metrics_init();
	if (recon_clients_open(r, err, sizeof(err)) != 0) {
		rc = EXIT_CONFIG;
		goto fail;
	}
	drc = db_open(&r->db, &cf->db);
	if ((rc = daemon_db_open_exit(drc)) != 0) {
		snprintf(err, sizeof(err), "database: %s", r->db.last_error);
		goto fail;
	}
	rc = EXIT_UNAVAILABLE;
	if (drc != DB_OK)
		log_warn(NULL, "event=db_unavailable error=\"%s\"", r->db.last_error);
	if (kq_producer_new(&cf->kafka, &r->kp, err, sizeof(err)) != 0) {
		rc = EXIT_CONFIG;
		goto fail;
	}
	/* Idle for long, it closes its connections and threads (docs/performance.md). */
	kq_producer_sleep_after(r->kp, (int)cf->kafka.producer_sleep_s * 1000);
	if (cf->reconciler.admin_port != 0 &&
	    admin_start(cf->reconciler.admin_addr, (int)cf->reconciler.admin_port, recon_ready, r,
	                cf->admin_token_file, &r->admin, err, sizeof(err)) != 0)
		goto fail;
	log_info(NULL,
	         "event=ready sweep_interval_s=%lld batch=%lld refund_approval=%d lease_s=%lld "
	         "admin_port=%lld",
	         cf->reconciler.sweep_interval_s, cf->reconciler.batch,
	         cf->reconciler.refund_approval, cf->reconciler.lease_s, cf->reconciler.admin_port);
	*state = r;
	return 0;
fail:
	log_error(NULL, "event=init_failed error=\"%s\"", err);
	recon_free(r);
	return rc;
}

/*
 * recon_cycle - the probe, then only the kinds of job it found due (refunds, then payment
 * queries, then closes); a cycle that did work reads the gauges again at its end, unless
 * the next cycle follows at once. An idle cycle is the probe alone, one statement.
 */
static int
recon_cycle(struct reconciler *r, int *more)
{
	struct recon_counts c;
	struct recon_probe p;
	long long t0 = clock_mono_ms();
	int rc = 0, full = 0;

	memset(&c, 0, sizeof(c));
	*more = 0;
	/* A failed probe leaves every flag 0: the cycle does nothing and fails. */
	if (recon_probe(r, &p) != 0)
		rc = -1;
	if (p.refunds && recon_refunds(r, &c, &full) != 0)
		rc = -1;
	*more |= p.refunds && full;
	if (p.queries && recon_queries(r, &c, &full) != 0)
		rc = -1;
	*more |= p.queries && full;
	if (p.closes && recon_closes(r, &c, &full) != 0)
		rc = -1;
	*more |= p.closes && full;
	if ((p.refunds || p.queries || p.closes) && (rc != 0 || !*more) && recon_probe(r, &p) != 0)
		rc = -1;
	metrics_observe_us(recon_mx.cycle_us, (clock_mono_ms() - t0) * 1000);
	if (rc != 0)
		metrics_inc(recon_mx.cycle_errors, 1);
	atomic_store(&r->ready, rc == 0);
	r->last = c;
	if (c.refunds_due || c.orders_queried || c.closes)
		log_info(NULL,
		         "event=cycle refunds_due=%lld leased=%lld lost_race=%lld submitted=%lld "
		         "done=%lld failed=%lld retried=%lld unknown=%lld stuck_alerts=%lld "
		         "queried=%lld recovered=%lld closes=%lld closed=%lld ms=%lld",
		         c.refunds_due, c.refunds_leased, c.refunds_lost_race, c.submitted, c.done,
		         c.failed, c.retried, c.unknown, c.stuck_alerts, c.orders_queried,
		         c.recovered, c.closes, c.closed, clock_mono_ms() - t0);
	return rc;
}

int
recon_daemon_loop(void *state, long long *wait_ms)
{
	struct reconciler *r = state;
	long long now = clock_mono_ms();
	int more = 0;

	/* Before the next cycle (also when woken early, by a reload): the rest of the wait. */
	if (now < r->next_cycle_ms) {
		*wait_ms = r->next_cycle_ms - now;
		return 0;
	}
	if (recon_cycle(r, &more) != 0)
		more = 0;
	/* A recovered payment is published like ingest's: after a fatal idempotence error
	 * no more can be, so the process restarts with a new producer. */
	if (kq_fatal(r->kp)) {
		log_error(NULL, "event=kafka_fatal action=exit");
		return EXIT_SOFTWARE;
	}
	r->next_cycle_ms = more ? now : now + r->cf->reconciler.sweep_interval_s * 1000;
	/* The next call waits what is left of the interval after this cycle's time. */
	*wait_ms = 0;
	return 0;
}

int
recon_daemon_drain(void *state)
{
	recon_free(state);
	metrics_free();
	return 0;
}

/*
 * recon_daemon_reload - SIGHUP, between two cycles on the one thread that uses the clients: every
 * merchant's clients are built again from nc (its credentials and the client settings of the
 * reconciler section), and swapped in only when all of them were.
 */
int
recon_daemon_reload(void *state, struct conf *nc, char *err, size_t errlen)
{
	struct reconciler *r = state, fresh;

	memset(&fresh, 0, sizeof(fresh));
	fresh.cf = nc;
	if (recon_clients_open(&fresh, err, errlen) != 0) {
		recon_clients_close(&fresh);
		return -1;
	}
	/* fresh takes the old clients and file, and frees them. */
	fresh.keys_cf = r->keys_cf;
	r->keys_cf = nc;
	{
		struct recon_merchant *m = r->m;
		int nm = r->nm;

		r->m = fresh.m;
		r->nm = fresh.nm;
		fresh.m = m;
		fresh.nm = nm;
	}
	recon_clients_close(&fresh);
	if (fresh.keys_cf != NULL) {
		conf_free(fresh.keys_cf);
		free(fresh.keys_cf);
	}
	return 0;
}
