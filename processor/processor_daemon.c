/*
 * processor_daemon - the processor's init, loop and drain for daemon_main(), and the worker
 * threads they start and stop.
 *
 * init builds the processor's state (processor_core.c: the shared producer, the outbox relay
 * and, per thread, a database connection), then gives each thread a consumer in
 * kafka.group_id subscribed to the main callback topic and every delay topic of the ladder.
 * The workers do all the work; the daemon loop only watches for a worker's request to stop
 * the process (a database outage longer than processor.db_outage_max_s, a fatal producer
 * error). drain stops the workers (each finishes its in-flight message and closes its
 * consumer), then the outbox relay (it publishes what the workers queued), then flushes the
 * producer.
 */
#include "processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon.h"
#include "ladder.h"
#include "log.h"

/*
 * proc_consumers - the workers' consumers, each subscribed to the main topic and every delay
 * topic (*ntopics of them).
 */
static int
proc_consumers(struct proc *p, int *ntopics_out)
{
	char ladder[CFG_LIST_MAX][PROC_TOPIC_MAX], err[512];
	const char *topics[CFG_LIST_MAX + 1];
	int ntopics = 0;

	topics[ntopics++] = p->topic_main;
	for (int k = 1; k <= ladder_steps(&p->cf->retry) && k <= CFG_LIST_MAX; k++) {
		int seen = 0;

		/* Steps with equal delays share one topic (migrate creates it once). */
		ladder_topic(p->cf, k, ladder[k - 1], sizeof(ladder[k - 1]));
		for (int i = 1; i < ntopics; i++)
			seen |= strcmp(topics[i], ladder[k - 1]) == 0;
		if (!seen)
			topics[ntopics++] = ladder[k - 1];
	}
	for (int i = 0; i < p->nworkers; i++) {
		struct proc_worker *w = &p->workers[i];

		w->rk = kq_consumer_new(&p->cf->kafka, p->cf->kafka.group_id, topics, ntopics,
		                        proc_rebalance, w, err, sizeof(err));
		if (w->rk == NULL) {
			log_error(NULL, "event=consumer_failed thread=%d error=\"%s\"", i, err);
			return EXIT_CONFIG;
		}
	}
	*ntopics_out = ntopics;
	return 0;
}

int
proc_daemon_init(const struct conf *cf, void **state)
{
	struct proc *p = NULL;
	int rc, ntopics = 0;

	if ((rc = proc_core_new(cf, (int)cf->processor.threads, &p)) != 0)
		return rc;
	if ((rc = proc_consumers(p, &ntopics)) != 0) {
		proc_core_free(p);
		return rc;
	}
	for (int i = 0; i < p->nworkers; i++) {
		if (pthread_create(&p->workers[i].thread, NULL, proc_worker_main, &p->workers[i]) !=
		    0) {
			log_error(NULL, "event=thread_failed thread=%d", i);
			proc_request_exit(p, EXIT_SOFTWARE);
			*state = p;
			return 0; /* the loop reports the exit code; drain joins the started ones */
		}
		p->workers[i].started = 1;
	}
	if (proc_admin_start(p) != 0) {
		proc_request_exit(p, EXIT_UNAVAILABLE);
		*state = p;
		return 0;
	}
	log_info(NULL, "event=ready threads=%d group=%s topics=%d", p->nworkers, cf->kafka.group_id,
	         ntopics);
	*state = p;
	return 0;
}

int
proc_daemon_loop(void *state, long long *wait_ms)
{
	struct proc *p = state;

	/* An idempotent producer that failed fatally can no longer promise no duplicates. */
	if (kq_fatal(p->prod))
		proc_request_exit(p, EXIT_SOFTWARE);
	if (atomic_load(&p->exit_code))
		return atomic_load(&p->exit_code);
	/* The workers do the work; both reasons to stop wake the skeleton (kq on the fatal
	 * error, proc_request_exit on the workers' own). */
	*wait_ms = DAEMON_WAIT_FOREVER;
	return 0;
}

static void *
proc_free_main(void *arg)
{
	proc_core_free(arg);
	return NULL;
}

/*
 * How long the drain waits for the Kafka handles to be destroyed. Everything that matters is
 * done by then (offsets committed at the consumers' close, the producer flushed); destroying
 * the handles only frees memory. librdkafka 2.0 can hang for ever in rd_kafka_destroy() of a
 * consumer that paused a partition of a topic since deleted (librdkafka issue 4362; a delay
 * topic deleted and recreated does it), which would keep a drained processor from exiting.
 */
#define PROC_FREE_WAIT_S 10

/* proc_free_bounded - proc_core_free, given up after PROC_FREE_WAIT_S (then the exit). */
static void
proc_free_bounded(struct proc *p)
{
	struct timespec dl;
	pthread_t t;

	if (pthread_create(&t, NULL, proc_free_main, p) != 0) {
		proc_core_free(p);
		return;
	}
	clock_deadline(&dl, PROC_FREE_WAIT_S * 1000);
	if (pthread_timedjoin_np(t, NULL, &dl) != 0) {
		log_warn(NULL, "event=destroy_stuck waited_s=%d action=exit", PROC_FREE_WAIT_S);
		pthread_detach(t);
	}
}

int
proc_daemon_drain(void *state)
{
	struct proc *p = state;
	int left, rc = 0;

	atomic_store(&p->stop, 1);
	proc_wake_workers(p);
	for (int i = 0; i < p->nworkers; i++)
		if (p->workers[i].started)
			pthread_join(p->workers[i].thread, NULL);
	/* The workers queued their last events; the relay publishes them before it stops. */
	proc_relay_stop(p);
	/* Outbox rows whose events are still queued are not lost: the retrier sweeps them. */
	if ((left = kq_flush(p->prod, 10000)) > 0) {
		log_warn(NULL, "event=drain_undelivered messages=%d", left);
		rc = EXIT_UNAVAILABLE;
	}
	log_info(NULL, "event=drained delivered=%llu failed=%llu", kq_delivered(p->prod),
	         kq_failed(p->prod));
	proc_admin_stop();
	proc_free_bounded(p);
	return rc;
}
