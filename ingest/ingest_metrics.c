/*
 * ingest_metrics - the ingest daemon's Prometheus metrics: requests by channel and outcome,
 * verification failures by reason, latency histograms, publish failures, in-flight requests.
 */
#include <stdio.h>

#include "ingest.h"

void
ingest_metrics_init(struct ingest_metrics *m)
{
	static const char *const http[] = {"not_found", "method", "too_large", "other", "deadline"};
	char l[160];

	for (int c = 0; c < chan_notify_count; c++) {
		for (int o = 0; o < OUT_COUNT; o++) {
			snprintf(l, sizeof(l), "channel=\"%s\",outcome=\"%s\"", chan_notify_name(c),
			         outcome_name((enum outcome)o));
			m->requests[c][o] = metrics_counter(
			    "paycb_ingest_requests_total",
			    "Notifications answered, by channel and outcome (duplicate = already "
			    "stored).",
			    l);
		}
	}
	for (int c = 0; c < chan_notify_count; c++)
		for (int r = 0; r < VERR_COUNT; r++) {
			snprintf(l, sizeof(l), "channel=\"%s\",reason=\"%s\"", chan_notify_name(c),
			         notify_verr_name((enum verr)r));
			m->verify_fail[c][r] = metrics_counter(
			    "paycb_ingest_verify_failures_total",
			    "Requests rejected by verification, by channel and reason.", l);
		}
	for (int i = 0; i < 5; i++) {
		snprintf(l, sizeof(l), "kind=\"%s\"", http[i]);
		m->http_errors[i] = metrics_counter("paycb_ingest_http_errors_total",
		                                    "Requests refused before verification.", l);
	}
	m->reserve_lat =
	    metrics_hist("paycb_ingest_reserve_seconds", "Time of the reserving INSERT.", "");
	m->publish_lat = metrics_hist("paycb_ingest_publish_seconds",
	                              "Time from produce to delivery report (or budget).", "");
	m->request_lat =
	    metrics_hist("paycb_ingest_request_seconds", "Time from full body to answer.", "");
	m->publish_failures = metrics_counter(
	    "paycb_ingest_publish_failures_total",
	    "Stored rows whose publish failed or timed out (the retrier recovers them).", "");
	m->coalesced = metrics_counter(
	    "paycb_ingest_coalesced_total",
	    "Identical copies answered by the reservation of a copy already in flight.", "");
	m->coalescing = metrics_gauge(
	    "paycb_ingest_coalescing",
	    "Copies waiting right now for the reservation of an identical copy in flight.", "");
	m->inflight = metrics_gauge("paycb_ingest_inflight", "Requests in flight.", "");
	m->unverified =
	    metrics_gauge("paycb_ingest_unverified", "Requests being verified right now.", "");
	m->reading = metrics_gauge("paycb_ingest_reading",
	                           "Requests whose body is being read right now.", "");
	m->queued = metrics_gauge("paycb_ingest_queued",
	                          "Complete requests waiting for a free worker.", "");
}
