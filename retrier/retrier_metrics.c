/*
 * retrier_metrics - the retrier's metrics handle, retrier_mx, and the names its series and
 * log lines carry.
 *
 * Every module of the retrier counts into retrier_mx, so the handle lives in this leaf module
 * rather than in the daemon that starts them: the sweeps, the alarm and the lag measurement
 * then depend only downwards, on this file, and never back on retrier_daemon.c.
 */
#include <stdio.h>

#include "metrics.h"
#include "retrier.h"

struct retrier_metrics retrier_mx;

/* retrier_metrics_lag_labels - the labels of step k's lag series (0 = the main topic). */
static void
retrier_metrics_lag_labels(const struct retrier *r, int k, char *buf, size_t len)
{
	snprintf(buf, len, "topic=\"%s\",kind=\"%s\"", k ? r->topic_step[k] : r->topic_main,
	         k ? "delay" : "main");
}

/*
 * retrier_metrics_init - creates the registry entries once per process, however many
 * retriers it opens: a series registered twice would be exported twice.
 */
void
retrier_metrics_init(const struct retrier *r, int steps)
{
	static int created;
	struct retrier_metrics *m = &retrier_mx;
	char l[400];

	if (created)
		return;
	created = 1;
	/* Series of one name are created together: the exposition prints HELP once per run. */
	for (int lg = 0; lg < CBLOG_N; lg++)
		for (int k = 0; k <= steps; k++) {
			snprintf(l, sizeof(l), "log=\"%s\",step=\"%d\"", cblog_name(lg), k);
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
	for (int lg = 0; lg < CBLOG_N; lg++)
		for (int k = 0; k <= steps + 1; k++) {
			snprintf(l, sizeof(l), "log=\"%s\",step=\"%d\"", cblog_name(lg), k);
			m->pending[lg][k] = metrics_gauge(
			    "paycb_retrier_pending_rows",
			    "pending rows by retry_count (0 = first attempt, n+1 = to become dead)",
			    l);
		}
	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
		m->dead_rows[lg] = metrics_gauge("paycb_retrier_dead_rows", "dead rows", l);
	}
	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
		m->dlq_unsent[lg] =
		    metrics_gauge("paycb_retrier_dlq_unsent_rows",
		                  "dead rows whose dead letter is not confirmed", l);
	}
	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
		m->stuck[lg] = metrics_gauge(
		    "paycb_retrier_stuck_rows",
		    "pending rows due for longer than retrier.stuck_after_s (alarm when > 0)", l);
	}
	m->stuck_oldest_s = metrics_gauge("paycb_retrier_stuck_oldest_overdue_seconds",
	                                  "how long the oldest stuck row has been due", "");
	m->sweep_us = metrics_hist("paycb_retrier_sweep_seconds", "duration of one full cycle", "");
	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
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
	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
		m->storm_rows[lg] = metrics_gauge(
		    "paycb_retrier_republish_storm_rows",
		    "pending rows republished more than retrier.max_republish times at one attempt",
		    l);
	}
	m->storms = metrics_counter("paycb_retrier_republish_storms_total",
	                            "rows that went past retrier.max_republish at one attempt", "");
	/* The processors' lag per topic (retrier_lag.c): step 0 is the main topic. */
	for (int k = 0; k <= steps; k++) {
		retrier_metrics_lag_labels(r, k, l, sizeof(l));
		m->lag[k] = metrics_gauge("paycb_consumer_lag_messages",
		                          "messages the processors' group has not consumed yet", l);
	}
	for (int k = 0; k <= steps; k++) {
		retrier_metrics_lag_labels(r, k, l, sizeof(l));
		m->due_lag[k] = metrics_gauge("paycb_consumer_due_lag_messages",
		                              "lag of the partitions whose head is due (a delay "
		                              "topic's held head is not lag)",
		                              l);
	}
	for (int k = 0; k <= steps; k++) {
		retrier_metrics_lag_labels(r, k, l, sizeof(l));
		m->head_overdue_s[k] = metrics_gauge(
		    "paycb_consumer_head_overdue_seconds",
		    "longest a partition's head has been due and not consumed (main topic: the "
		    "oldest unconsumed message's age)",
		    l);
	}
	m->lag_ok = metrics_gauge("paycb_consumer_lag_check_ok",
	                          "1 when the last lag measurement succeeded", "");
}
