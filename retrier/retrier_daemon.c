/*
 * retrier_daemon - the retrier's state, its cycle, the daemon_main callbacks and metrics.
 *
 * One thread owns the database connection and runs the cycles; the publish phases borrow a
 * few threads (retrier_publish.c) and the admin listener serves /metrics from its own. A
 * cycle runs every retrier.sweep_interval_s, or again at once while a batch came back full,
 * so a backlog drains at full speed and an idle retrier costs a few index lookups.
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

struct retrier_metrics retrier_mx;

const char *
retrier_log_name(enum rlog lg)
{
	return lg == RLOG_REFUND ? "refund" : "pay";
}

/* retrier_metrics_init - creates the registry entries once per process. */
static void
retrier_metrics_init(const struct retrier *r, int steps)
{
	static int created;
	struct retrier_metrics *m = &retrier_mx;
	char l[400];

	if (created)
		return;
	created = 1;
	/* Series of one name are created together: the exposition prints HELP once per run. */
	for (int lg = 0; lg < RLOG_N; lg++)
		for (int k = 0; k <= steps; k++) {
			snprintf(l, sizeof(l), "log=\"%s\",step=\"%d\"", retrier_log_name(lg), k);
			m->republished[lg][k] = metrics_counter(
			    "paycb_retrier_republished_total",
			    "due rows republished and confirmed, by ladder step (0 = main topic)",
			    l);
		}
	m->lost_race = metrics_counter("paycb_retrier_lease_lost_total",
	                               "leases another retrier or the processor won", "");
	m->publish_failed = metrics_counter("paycb_retrier_publish_failed_total",
	                                    "publishes not confirmed; the lease expires", "");
	m->dead = metrics_counter("paycb_retrier_dead_total", "rows this retrier made dead", "");
	m->dlq_sent = metrics_counter("paycb_retrier_dead_letters_total",
	                              "dead letters confirmed on the dead-letter topic", "");
	m->outbox_sent = metrics_counter("paycb_retrier_outbox_relayed_total",
	                                 "order_events rows relayed by the outbox sweep", "");
	m->purged = metrics_counter("paycb_retrier_purged_total", "raw bodies cleared", "");
	m->cycle_errors = metrics_counter("paycb_retrier_cycle_errors_total",
	                                  "cycles in which a step failed", "");
	for (int lg = 0; lg < RLOG_N; lg++)
		for (int k = 0; k <= steps + 1; k++) {
			snprintf(l, sizeof(l), "log=\"%s\",step=\"%d\"", retrier_log_name(lg), k);
			m->pending[lg][k] = metrics_gauge(
			    "paycb_retrier_pending_rows",
			    "pending rows by retry_count (0 = first attempt, n+1 = to become dead)",
			    l);
		}
	for (int lg = 0; lg < RLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", retrier_log_name(lg));
		m->dead_rows[lg] = metrics_gauge("paycb_retrier_dead_rows", "dead rows", l);
	}
	for (int lg = 0; lg < RLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", retrier_log_name(lg));
		m->dlq_unsent[lg] =
		    metrics_gauge("paycb_retrier_dlq_unsent_rows",
		                  "dead rows whose dead letter is not confirmed", l);
	}
	for (int lg = 0; lg < RLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", retrier_log_name(lg));
		m->stuck[lg] = metrics_gauge(
		    "paycb_retrier_stuck_rows",
		    "pending rows due for longer than retrier.stuck_after_s (alarm when > 0)", l);
	}
	m->stuck_oldest_s = metrics_gauge("paycb_retrier_stuck_oldest_overdue_seconds",
	                                  "how long the oldest stuck row has been due", "");
	m->sweep_us = metrics_hist("paycb_retrier_sweep_seconds", "duration of one full cycle", "");
	for (int lg = 0; lg < RLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", retrier_log_name(lg));
		m->old[lg] = metrics_gauge("paycb_retrier_old_pending_rows",
		                           "pending rows created (or replayed) longer ago than the "
		                           "end-to-end threshold (alarm when > 0)",
		                           l);
	}
	m->old_oldest_s = metrics_gauge("paycb_retrier_old_pending_oldest_seconds",
	                                "age of the oldest pending row past the end-to-end "
	                                "threshold",
	                                "");
	m->old_after_s = metrics_gauge("paycb_retrier_old_pending_threshold_seconds",
	                               "the end-to-end threshold in force", "");
	for (int lg = 0; lg < RLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", retrier_log_name(lg));
		m->storm_rows[lg] = metrics_gauge(
		    "paycb_retrier_republish_storm_rows",
		    "pending rows republished more than retrier.max_republish times at one attempt",
		    l);
	}
	m->storms = metrics_counter("paycb_retrier_republish_storms_total",
	                            "rows that went past retrier.max_republish at one attempt", "");
	/* The processors' lag per topic (retrier_lag.c): step 0 is the main topic. */
	for (int k = 0; k <= steps; k++) {
		retrier_lag_labels(r, k, l, sizeof(l));
		m->lag[k] = metrics_gauge("paycb_consumer_lag_messages",
		                          "messages the processors' group has not consumed yet", l);
	}
	for (int k = 0; k <= steps; k++) {
		retrier_lag_labels(r, k, l, sizeof(l));
		m->due_lag[k] = metrics_gauge("paycb_consumer_due_lag_messages",
		                              "lag of the partitions whose head is due (a delay "
		                              "topic's held head is not lag)",
		                              l);
	}
	for (int k = 0; k <= steps; k++) {
		retrier_lag_labels(r, k, l, sizeof(l));
		m->head_overdue_s[k] = metrics_gauge(
		    "paycb_consumer_head_overdue_seconds",
		    "longest a partition's head has been due and not consumed (main topic: the "
		    "oldest unconsumed message's age)",
		    l);
	}
	m->lag_ok = metrics_gauge("paycb_consumer_lag_check_ok",
	                          "1 when the last lag measurement succeeded", "");
}

/* retrier_open - state for one retrier: database, producer, topic names, metrics. */
int
retrier_open(const struct conf *cf, struct retrier **out, char *err, size_t errlen)
{
	struct retrier *r;
	enum db_rc drc;

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
	if ((drc = db_open(&r->db, &cf->db)) == DB_FATAL) {
		snprintf(err, errlen, "database: %s", r->db.last_error);
		goto fail;
	}
	if (drc != DB_OK)
		log_warn(NULL, "event=db_unavailable error=\"%s\"", r->db.last_error);
	if (kq_producer_new(&cf->kafka, &r->kp, err, errlen) != 0)
		goto fail;
	*out = r;
	return 0;
fail:
	db_close(&r->db);
	free(r);
	return EXIT_UNAVAILABLE;
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

/* retrier_cycle - alarm, due rows, dead letters, outbox, purge and gauges. */
int
retrier_cycle(struct retrier *r, int *more)
{
	struct retrier_counts c;
	long long t0 = clock_mono_ms();
	long long a, b;
	int rc = 0, full;

	memset(&c, 0, sizeof(c));
	*more = 0;
	a = clock_mono_us();
	if (retrier_alarm_check(r, &c) != 0)
		rc = -1;
	if (retrier_old_check(r, &c) != 0)
		rc = -1;
	for (int lg = 0; lg < RLOG_N; lg++) {
		if (retrier_sweep(r, (enum rlog)lg, &c, &full) != 0)
			rc = -1;
		*more |= full;
	}
	for (int lg = 0; lg < RLOG_N; lg++) {
		if (retrier_dlq_sweep(r, (enum rlog)lg, &c, &full) != 0)
			rc = -1;
		*more |= full;
	}
	if (retrier_outbox_sweep(r, &c, &full) != 0)
		rc = -1;
	*more |= full;
	for (int lg = 0; lg < RLOG_N; lg++)
		if (retrier_purge(r, (enum rlog)lg, &c) != 0)
			rc = -1;
	if (retrier_gauges(r) != 0)
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
retrier_d_init(const struct conf *cf, void **state)
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
retrier_d_loop(void *state)
{
	struct retrier *r = state;
	long long now = clock_mono_ms();
	int more = 0;

	if (now < r->next_cycle_ms) {
		long long ms = r->next_cycle_ms - now;
		struct timespec ts;

		if (ms > 100)
			ms = 100;
		ts.tv_sec = 0;
		ts.tv_nsec = ms * 1000000L;
		nanosleep(&ts, NULL);
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
	return 0;
}

int
retrier_d_drain(void *state)
{
	struct retrier *r = state;
	int left;

	admin_stop(r->admin);
	r->admin = NULL;
	left = retrier_close(r);
	metrics_free();
	if (left > 0) {
		log_error(NULL, "event=undelivered messages=%d", left);
		return EXIT_SOFTWARE;
	}
	return 0;
}
