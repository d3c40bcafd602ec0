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

/* gauges_per_log - one gauge of name per callback log, labelled log="...". */
static void
gauges_per_log(struct metric *out[CBLOG_N], const char *name, const char *help)
{
	char l[64];

	for (int lg = 0; lg < CBLOG_N; lg++) {
		snprintf(l, sizeof(l), "log=\"%s\"", cblog_name(lg));
		out[lg] = metrics_gauge(name, help, l);
	}
}

/* gauges_per_step - one gauge of name per topic of the ladder (0 = the main topic). */
static void
gauges_per_step(const struct retrier *r, int steps, struct metric **out, const char *name,
                const char *help)
{
	char l[400];

	for (int k = 0; k <= steps; k++) {
		retrier_metrics_lag_labels(r, k, l, sizeof(l));
		out[k] = metrics_gauge(name, help, l);
	}
}

/* retrier_metrics_counters - the counters of what the retrier did. */
static void
retrier_metrics_counters(struct retrier_metrics *m, int steps)
{
	char l[400];

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
}

/* retrier_metrics_rows - the gauges of the rows the sweeps and the alarm count. */
static void
retrier_metrics_rows(struct retrier_metrics *m, int steps)
{
	char l[400];

	for (int lg = 0; lg < CBLOG_N; lg++)
		for (int k = 0; k <= steps + 1; k++) {
			snprintf(l, sizeof(l), "log=\"%s\",step=\"%d\"", cblog_name(lg), k);
			m->pending[lg][k] = metrics_gauge(
			    "paycb_retrier_pending_rows",
			    "pending rows by retry_count (0 = first attempt, n+1 = to become dead)",
			    l);
		}
	gauges_per_log(m->dead_rows, "paycb_retrier_dead_rows", "dead rows");
	gauges_per_log(m->dlq_unsent, "paycb_retrier_dlq_unsent_rows",
	               "dead rows whose dead letter is not confirmed");
	gauges_per_log(m->stuck, "paycb_retrier_stuck_rows",
	               "pending rows due for longer than retrier.stuck_after_s (alarm when > 0)");
	m->stuck_oldest_s = metrics_gauge("paycb_retrier_stuck_oldest_overdue_seconds",
	                                  "how long the oldest stuck row has been due", "");
	m->sweep_us = metrics_hist("paycb_retrier_sweep_seconds", "duration of one full cycle", "");
	gauges_per_log(m->old, "paycb_retrier_old_pending_rows",
	               "pending rows created (or replayed) longer ago than the end-to-end "
	               "threshold (alarm when > 0)");
	m->old_oldest_s = metrics_gauge("paycb_retrier_old_pending_oldest_seconds",
	                                "age of the oldest pending row past the end-to-end "
	                                "threshold",
	                                "");
	m->old_after_s = metrics_gauge("paycb_retrier_old_pending_threshold_seconds",
	                               "the end-to-end threshold in force", "");
	gauges_per_log(
	    m->storm_rows, "paycb_retrier_republish_storm_rows",
	    "pending rows republished more than retrier.max_republish times at one attempt");
	m->storms = metrics_counter("paycb_retrier_republish_storms_total",
	                            "rows that went past retrier.max_republish at one attempt", "");
}

/*
 * retrier_metrics_init - creates the registry entries once per process, however many
 * retriers it opens: a series registered twice would be exported twice. Series of one name
 * are created together: the exposition prints HELP once per run.
 */
void
retrier_metrics_init(const struct retrier *r, int steps)
{
	static int created;
	struct retrier_metrics *m = &retrier_mx;

	if (created)
		return;
	created = 1;
	retrier_metrics_counters(m, steps);
	retrier_metrics_rows(m, steps);
	/* The processors' lag per topic (retrier_lag.c): step 0 is the main topic. */
	gauges_per_step(r, steps, m->lag, "paycb_consumer_lag_messages",
	                "messages the processors' group has not consumed yet");
	gauges_per_step(r, steps, m->due_lag, "paycb_consumer_due_lag_messages",
	                "lag of the partitions whose head is due (a delay topic's held head is "
	                "not lag)");
	gauges_per_step(r, steps, m->head_overdue_s, "paycb_consumer_head_overdue_seconds",
	                "longest a partition's head has been due and not consumed (main topic: "
	                "the oldest unconsumed message's age)");
	m->lag_ok = metrics_gauge("paycb_consumer_lag_check_ok",
	                          "1 when the last lag measurement succeeded", "");
}
