/*
 * reconciler_metrics - the reconciler's metrics handle, recon_mx, its registration and the
 * counting of channel calls.
 *
 * The refund, query and close jobs all count into recon_mx, so the handle lives in this leaf
 * module rather than in the daemon that runs the jobs: the jobs then depend only downwards,
 * on this file, and never back on reconciler_daemon.c.
 */
#include <stdio.h>

#include "metrics.h"
#include "reconciler.h"

struct recon_metrics recon_mx;

/* recon_metrics_init - creates the registry entries; the daemon calls it once at start. */
void
recon_metrics_init(void)
{
	static const char *const eps[RECON_NEP] = {"query_payment", "refund", "query_refund",
	                                           "close"};
	static const char *const states[4] = {"REQUESTED", "SUBMITTED", "DONE", "FAILED"};
	struct recon_metrics *m = &recon_mx;
	char l[160];

	for (int c = 0; c < RECON_NCH; c++)
		for (int e = 0; e < RECON_NEP; e++)
			for (int o = 0; o < 5; o++) {
				snprintf(l, sizeof(l),
				         "channel=\"%s\",endpoint=\"%s\",outcome=\"%s\"",
				         chan_id_name((enum chan_id)(c + 1)), eps[e],
				         chan_outcome_name((enum chan_outcome)o));
				m->calls[c][e][o] = metrics_counter(
				    "paycb_reconciler_calls_total",
				    "channel API calls by channel, endpoint and outcome", l);
			}
	for (int c = 0; c < RECON_NCH; c++)
		for (int e = 0; e < RECON_NEP; e++) {
			snprintf(l, sizeof(l), "channel=\"%s\",endpoint=\"%s\"",
			         chan_id_name((enum chan_id)(c + 1)), eps[e]);
			m->latency[c][e] = metrics_hist("paycb_reconciler_call_seconds",
			                                "channel API call latency", l);
		}
	for (int k = 0; k < 4; k++) {
		snprintf(l, sizeof(l), "state=\"%s\"", states[k]);
		m->refunds[k] =
		    metrics_gauge("paycb_reconciler_refunds", "refund requests by state", l);
	}
	m->stuck =
	    metrics_gauge("paycb_reconciler_refunds_stuck",
	                  "refund requests still REQUESTED or SUBMITTED past the last step of "
	                  "reconciler.refund_ladder_s (each raised refund_stuck)",
	                  "");
	for (int k = 0; k < 4; k++) {
		snprintf(l, sizeof(l), "to=\"%s\"", states[k]);
		m->transitions[k] =
		    metrics_counter("paycb_reconciler_refund_transitions_total",
		                    "refund requests this process moved, by new state", l);
	}
	m->recovered = metrics_counter("paycb_reconciler_recovered_payments_total",
	                               "payments found paid by a query whose notification never "
	                               "came (notification_lost)",
	                               "");
	m->closed =
	    metrics_counter("paycb_reconciler_closed_total",
	                    "orders closed at a channel after the merchant closed them", "");
	m->forged = metrics_counter("paycb_reconciler_forged_answers_total",
	                            "channel answers whose signature failed (never believed)", "");
	m->cycle_errors = metrics_counter("paycb_reconciler_cycle_errors_total",
	                                  "cycles in which a step failed", "");
	m->cycle_us = metrics_hist("paycb_reconciler_cycle_seconds", "duration of one cycle", "");
}

void
recon_count_call(enum chan_id ch, enum recon_ep ep, const struct chan_result *res, long long us)
{
	int c = (int)ch - 1;

	if (c < 0 || c >= RECON_NCH || (int)res->outcome < 0 || (int)res->outcome > 4)
		return;
	metrics_inc(recon_mx.calls[c][ep][res->outcome], 1);
	metrics_observe_us(recon_mx.latency[c][ep], us);
	if (res->outcome == CHAN_FORGED)
		metrics_inc(recon_mx.forged, 1);
}
