/*
 * retrier_daemon - the retrier's state, its cycle and the daemon_main callbacks (the
 * metrics it creates at open are retrier_metrics.c's).
 *
 * One thread owns the database connection and runs the cycles, publishing each phase as one
 * batch (retrier_publish.c); the admin listener serves /metrics from its own thread. A
 * cycle runs every retrier.sweep_interval_s, or again at once while a batch came back full,
 * so a backlog drains at full speed. A cycle starts with one statement, the probe
 * (retrier_probe.c), and runs only the sweeps it found work for, so an idle retrier costs one
 * round trip per interval.
 *
 * On SIGTERM daemon_main stops calling the loop after the current cycle; the drain flushes
 * the producer and exits 0, or 70 when messages were left undelivered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "admin.h"
#include "clock.h"
#include "daemon.h"
#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

/* retrier_open - state for one retrier: database, producer, topic names, metrics. */
int
retrier_open(const struct conf *cf, struct retrier **out, char *err, size_t errlen)
{
	struct retrier *r;
	enum db_rc drc;
	int rc;

	if ((r = calloc(1, sizeof(*r))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return EXIT_SOFTWARE;
	}
	r->cf = cf;
	r->rng = (unsigned)getpid() ^ (unsigned)clock_mono_ms();
	conf_topic(cf, "callbacks", r->topic_main, sizeof(r->topic_main));
	conf_topic(cf, "callbacks.dlq", r->topic_dlq, sizeof(r->topic_dlq));
	conf_topic(cf, "order-events", r->topic_events, sizeof(r->topic_events));
	for (int k = 1; k <= ladder_steps(&cf->retry); k++)
		ladder_topic(cf, k, r->topic_step[k], sizeof(r->topic_step[k]));
	retrier_metrics_init(r, ladder_steps(&cf->retry));
	/* A database that is down at start is waited for: every statement reconnects first. */
	drc = db_open(&r->db, &cf->db);
	if ((rc = daemon_db_open_exit(drc)) != 0) {
		snprintf(err, errlen, "database: %s", r->db.last_error);
		goto fail;
	}
	if (drc != DB_OK)
		log_warn(NULL, "event=db_unavailable error=\"%s\"", r->db.last_error);
	if (kq_producer_new(&cf->kafka, &r->kp, err, errlen) != 0) {
		rc = EXIT_CONFIG;
		goto fail;
	}
	/* Idle for long, it closes its connections and threads (docs/performance.md). */
	kq_producer_sleep_after(r->kp, (int)cf->kafka.producer_sleep_s * 1000);
	*out = r;
	return 0;
fail:
	db_close(&r->db);
	free(r);
	return rc;
}

int
retrier_close(struct retrier *r)
{
	int left = 0;

	if (r == NULL)
		return 0;
	retrier_lag_free(r);
	if (r->kp) {
		left = kq_flush(r->kp, 10000);
		kq_producer_free(r->kp);
	}
	db_close(&r->db);
	free(r);
	return left;
}

/*
 * cycle_work - the sweeps the probe found work for: alarm, due rows, dead letters, outbox,
 * purge. Sets *worked when one ran; returns 0, or -1 when one failed.
 */
static int
cycle_work(struct retrier *r, const struct retrier_probe *p, struct retrier_counts *c, int *more,
           int *worked)
{
	int rc = 0, full;

	if (retrier_alarm_check_logs(r, c, p->stuck) != 0)
		rc = -1;
	if (retrier_old_check_logs(r, c, p->old) != 0)
		rc = -1;
	for (int lg = 0; lg < CBLOG_N; lg++) {
		long long dead = c->dead;

		if (p->due[lg]) {
			*worked = 1;
			if (retrier_sweep(r, (enum cblog)lg, c, &full) != 0)
				rc = -1;
			*more |= full;
		}
		/* A row the sweep just made dead is due for its dead letter now, as before. */
		if (p->dlq[lg] || c->dead > dead) {
			*worked = 1;
			if (retrier_dlq_sweep(r, (enum cblog)lg, c, &full) != 0)
				rc = -1;
			*more |= full;
		}
	}
	if (p->outbox) {
		*worked = 1;
		if (retrier_outbox_sweep(r, c, &full) != 0)
			rc = -1;
		*more |= full;
	}
	for (int lg = 0; lg < CBLOG_N; lg++)
		if (p->purge[lg]) {
			*worked = 1;
			if (retrier_purge(r, (enum cblog)lg, c) != 0)
				rc = -1;
		}
	return rc;
}

/*
 * retrier_cycle - the probe, then only the sweeps it found work for. An idle cycle is the
 * probe alone, one statement; a cycle that worked reads the gauges again at its end, unless
 * the next cycle (and its probe) follows at once.
 */
int
retrier_cycle(struct retrier *r, int *more)
{
	struct retrier_counts c;
	struct retrier_probe p;
	long long t0 = clock_mono_ms();
	long long a, b;
	int rc = 0, worked = 0;

	memset(&c, 0, sizeof(c));
	*more = 0;
	a = clock_mono_us();
	if (retrier_probe(r, &p) != 0)
		rc = -1;
	else if (cycle_work(r, &p, &c, more, &worked) != 0)
		rc = -1;
	if (worked && (rc != 0 || !*more) && retrier_gauges(r) != 0)
		rc = -1;
	b = clock_mono_us();
	metrics_observe_us(retrier_mx.sweep_us, b - a);
	if (rc != 0)
		metrics_inc(retrier_mx.cycle_errors, 1);
	atomic_store(&r->ready, rc == 0);
	r->last = c;
	if (c.due || c.dead || c.dlq_sent || c.outbox_sent || c.purged || c.failed || c.old_alerted)
		log_info(NULL,
		         "event=sweep due=%lld leased=%lld lost_race=%lld republished=%lld "
		         "failed=%lld dead=%lld dead_lettered=%lld outbox=%lld purged=%lld "
		         "stuck=%lld old=%lld old_alerted=%lld storms=%lld ms=%lld",
		         c.due, c.leased, c.lost_race, c.republished, c.failed, c.dead, c.dlq_sent,
		         c.outbox_sent, c.purged, c.stuck, c.old, c.old_alerted, c.storms,
		         clock_mono_ms() - t0);
	return rc;
}

static int
retrier_ready(void *arg, char *why, size_t len)
{
	struct retrier *r = arg;

	if (kq_fatal(r->kp)) {
		snprintf(why, len, "kafka producer failed fatally");
		return 1;
	}
	if (!atomic_load(&r->ready)) {
		snprintf(why, len, "the last sweep failed (database?)");
		return 1;
	}
	return 0;
}

int
retrier_daemon_init(const struct conf *cf, void **state)
{
	struct retrier *r = NULL;
	char err[512];
	int rc;

	if ((rc = retrier_open(cf, &r, err, sizeof(err))) != 0) {
		log_error(NULL, "event=init_failed error=\"%s\"", err);
		return rc;
	}
	if (cf->retrier.admin_port != 0 &&
	    admin_start(cf->retrier.admin_addr, (int)cf->retrier.admin_port, retrier_ready, r,
	                cf->admin_token_file, &r->admin, err, sizeof(err)) != 0) {
		log_error(NULL, "event=init_failed error=\"%s\"", err);
		retrier_close(r);
		return EXIT_UNAVAILABLE;
	}
	log_info(NULL,
	         "event=ready sweep_interval_s=%lld batch=%lld steps=%d admin_port=%lld "
	         "stuck_after_s=%lld old_pending_after_s=%lld",
	         cf->retrier.sweep_interval_s, cf->retrier.batch, ladder_steps(&cf->retry),
	         cf->retrier.admin_port, cf->retrier.stuck_after_s, retrier_old_after_s(cf));
	if (retrier_old_after_s(cf) > cf->retrier.stuck_after_s)
		log_info(
		    NULL,
		    "event=threshold_raised setting=retrier.stuck_after_s configured_s=%lld "
		    "old_pending_after_s=%lld reason=\"the ladder and its leases take longer\"",
		    cf->retrier.stuck_after_s, retrier_old_after_s(cf));
	*state = r;
	return 0;
}

int
retrier_daemon_loop(void *state, long long *wait_ms)
{
	struct retrier *r = state;
	long long now = clock_mono_ms();
	int more = 0;

	/* Before the next cycle (also when woken early, by a reload): the rest of the wait. */
	if (now < r->next_cycle_ms) {
		*wait_ms = r->next_cycle_ms - now;
		return 0;
	}
	/* A failing cycle waits the full interval even after a full batch, so a persistent
	 * error cannot turn the loop into a busy one. */
	if (retrier_cycle(r, &more) != 0)
		more = 0;
	if (kq_fatal(r->kp)) {
		log_error(NULL, "event=kafka_fatal action=exit");
		return EXIT_SOFTWARE;
	}
	retrier_lag_due(r);
	r->next_cycle_ms = more ? now : now + r->cf->retrier.sweep_interval_s * 1000;
	/* The next call waits what is left of the interval after this cycle's time. */
	*wait_ms = 0;
	return 0;
}

int
retrier_daemon_drain(void *state)
{
	struct retrier *r = state;
	int left;

	admin_stop(r->admin);
	r->admin = NULL;
	left = retrier_close(r);
	metrics_free();
	if (left > 0) {
		log_error(NULL, "event=undelivered messages=%d", left);
		return EXIT_UNAVAILABLE;
	}
	return 0;
}
