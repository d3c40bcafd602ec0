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

/*
 * The outcome label's values: the outcomes the decision table can give a row (one home for
 * them, processor_decide.c), and the processor's own. "other" is last and counts anything
 * else.
 */
#define NOUT_MAX 48
static const char *const own_outcomes[] = {"dead",     "retry",       "retry_stale", "skipped",
                                           "deferred", "row_missing", "row_mismatch"};
static const char *outcomes[NOUT_MAX];
static size_t nout;

static struct metric *m_outcome[NOUT_MAX], *m_elapsed;
static struct admin *admin;

/* proc_metrics_add - adds name to the outcomes unless it is there (or the list is full) */
static void
proc_metrics_add(const char *name)
{
	for (size_t i = 0; i < nout; i++)
		if (strcmp(outcomes[i], name) == 0)
			return;
	if (nout < NOUT_MAX - 1)
		outcomes[nout++] = name;
}

void
proc_metrics_init(void)
{
	const struct dec_rule *rules;
	size_t nrules;
	char l[64];

	nout = 0;
	rules = dec_rules(&nrules);
	for (size_t i = 0; i < nrules; i++)
		if (rules[i].action != DX_RETRY && rules[i].action != DX_DEAD)
			proc_metrics_add(rules[i].outcome);
	for (size_t i = 0; i < sizeof(own_outcomes) / sizeof(own_outcomes[0]); i++)
		proc_metrics_add(own_outcomes[i]);
	outcomes[nout++] = "other";
	for (size_t i = 0; i < nout; i++) {
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

	if (nout == 0)
		return;
	for (i = 0; i < nout - 1; i++)
		if (strcmp(outcomes[i], outcome) == 0)
			break;
	metrics_inc(m_outcome[i], 1);
	metrics_observe_us(m_elapsed, elapsed_ms * 1000);
}

static int
proc_ready(void *arg, char *why, size_t len)
{
	struct proc *p = arg;

	/*
	 * Asked through a consumer: the producer sleeps while idle (kafka.producer_sleep_s),
	 * and a probe every few seconds would keep it awake. Both talk to the same brokers.
	 */
	if (kq_fatal(p->prod)) {
		snprintf(why, len, "kafka: the producer failed fatally");
		return -1;
	}
	if (p->nworkers < 1 || p->workers[0].rk == NULL ||
	    kq_consumer_ping(p->workers[0].rk, 1000) != 0) {
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
	                p, p->cf->admin_token_file, &admin, err, sizeof(err)) != 0) {
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
