/*
 * reconciler_daemon - the reconciler's state, its cycle, the daemon_main callbacks and its
 * metrics. One thread owns the database connection and the channel clients and runs a cycle
 * every reconciler.sweep_interval_s, again at once while a batch came back full: refunds,
 * then reconciliation queries of PENDING orders, then closes, then the gauges.
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

struct recon_metrics recon_mx;

static void
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
	free(r);
}

int
recon_d_init(const struct conf *cf, void **state)
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
	if ((drc = db_open(&r->db, &cf->db)) == DB_FATAL) {
		snprintf(err, sizeof(err), "database: %s", r->db.last_error);
		goto fail;
	}
	if (drc != DB_OK)
		log_warn(NULL, "event=db_unavailable error=\"%s\"", r->db.last_error);
	if (kq_producer_new(&cf->kafka, &r->kp, err, sizeof(err)) != 0)
		goto fail;
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

static int
recon_cycle(struct reconciler *r, int *more)
{
	struct recon_counts c;
	long long t0 = clock_mono_ms();
	int rc = 0, full = 0;

	memset(&c, 0, sizeof(c));
	*more = 0;
	if (recon_refunds(r, &c, &full) != 0)
		rc = -1;
	*more |= full;
	if (recon_queries(r, &c, &full) != 0)
		rc = -1;
	*more |= full;
	if (recon_closes(r, &c, &full) != 0)
		rc = -1;
	*more |= full;
	if (recon_refund_gauges(r) != 0)
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
recon_d_loop(void *state)
{
	struct reconciler *r = state;
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
	if (recon_cycle(r, &more) != 0)
		more = 0;
	r->next_cycle_ms = more ? now : now + r->cf->reconciler.sweep_interval_s * 1000;
	return 0;
}

int
recon_d_drain(void *state)
{
	recon_free(state);
	metrics_free();
	return 0;
}
