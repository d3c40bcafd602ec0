/*
 * processor_metrics - the processor's Prometheus metrics and admin listener: callbacks by
 * outcome, processing time, and readiness (the broker answers a metadata request).
 */
#include <stdio.h>
#include <string.h>

#include "admin.h"
#include "log.h"
#include "metrics.h"
#include "processor.h"

static const char *const outcomes[] = {"paid",           "duplicate",     "paid_twice",
				       "paid_after_close", "refund_partial", "refunded",
				       "refund_covered", "dead",          "retry",
				       "retry_stale",    "skipped",       "deferred",
				       "row_missing",    "row_mismatch",  "other"};
#define NOUT (sizeof(outcomes) / sizeof(outcomes[0]))

static struct metric *m_outcome[NOUT], *m_elapsed;
static struct admin *admin;

void
proc_metrics_init(void)
{
	char l[64];

	for (size_t i = 0; i < NOUT; i++) {
		snprintf(l, sizeof(l), "outcome=\"%s\"", outcomes[i]);
		m_outcome[i] = metrics_counter("paycb_processor_callbacks_total",
					       "Callbacks handled, by outcome.", l);
	}
	m_elapsed = metrics_hist("paycb_processor_callback_seconds",
				 "Time to handle one callback (transaction and relay).", "");
}

void
proc_metrics_outcome(const char *outcome, long long elapsed_ms)
{
	size_t i;

	for (i = 0; i < NOUT - 1; i++)
		if (strcmp(outcomes[i], outcome) == 0)
			break;
	metrics_inc(m_outcome[i], 1);
	metrics_observe_us(m_elapsed, elapsed_ms * 1000);
}

static int
proc_ready(void *arg, char *why, size_t len)
{
	struct proc *p = arg;

	if (kq_producer_ping(p->prod, 1000) != 0) {
		snprintf(why, len, "kafka: no metadata answer within 1 s");
		return -1;
	}
	return 0;
}

int
proc_admin_start(struct proc *p)
{
	char err[256];

	if (p->cf->processor.admin_port == 0)
		return 0;
	if (admin_start(p->cf->processor.admin_addr, (int)p->cf->processor.admin_port, proc_ready,
			p, &admin, err, sizeof(err)) != 0) {
		log_error(NULL, "event=listen_failed error=\"%s\"", err);
		return -1;
	}
	return 0;
}

void
proc_admin_stop(void)
{
	admin_stop(admin);
	admin = NULL;
	metrics_free();
}
