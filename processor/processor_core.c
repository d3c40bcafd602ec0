/*
 * processor_core - the processor's state without its consumers, and the in-process API built
 * on it.
 *
 * proc_core_new builds what every processor has whoever feeds it messages: the topic names,
 * the metrics, the shared idempotent producer, the outbox relay thread and, per worker, a
 * database connection. The daemon (processor_daemon.c) adds a consumer to each worker and
 * starts the worker threads; the in-process API (proc_open, proc_apply, proc_close) adds
 * nothing: a test or a tool hands it one callback message at a time and proc_apply runs
 * proc_handle, the very function the daemon's consumer path runs for each message (the
 * ordering guard, the state machine's transaction, the outbox rows and their relay, the log
 * line), so what a test drives this way is what the daemon does with the message.
 */
#include "processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "log.h"

/* proc_core_worker - one worker's database connection (no consumer). */
static int
proc_core_worker(struct proc *p, struct proc_worker *w, int index)
{
	enum db_rc rc;

	w->p = p;
	w->index = index;
	w->backoff_ms = PROC_BACKOFF_MIN_MS;
	/*
	 * A database that is down at start is an outage like any other: the worker reconnects
	 * when it has a message. A password file that cannot be read or refused credentials are
	 * configuration errors.
	 */
	rc = db_open(&w->db, &p->cf->db);
	/*
	 * Autocommit off: each transaction begins with its first statement instead of a START
	 * TRANSACTION round trip. Every path of processor_handle.c ends in COMMIT or ROLLBACK.
	 */
	if (rc == DB_OK)
		rc = db_manual_commit(&w->db);
	else
		w->db.manual = 1;
	if (daemon_db_open_exit(rc) != 0) {
		log_error(NULL, "event=db_open_failed thread=%d error=\"%s\"", index,
		          w->db.last_error);
		return daemon_db_open_exit(rc);
	}
	if (rc != DB_OK)
		log_warn(NULL, "event=db_unavailable thread=%d error=\"%s\"", index,
		         w->db.last_error);
	return 0;
}

int
proc_core_new(const struct conf *cf, int nworkers, struct proc **out)
{
	char err[512];
	int rc = EXIT_SOFTWARE;
	struct proc *p;

	if ((p = calloc(1, sizeof(*p))) == NULL)
		return EXIT_SOFTWARE;
	p->cf = cf;
	proc_metrics_init();
	conf_topic(cf, "callbacks", p->topic_main, sizeof(p->topic_main));
	conf_topic(cf, "callbacks.dlq", p->topic_dlq, sizeof(p->topic_dlq));
	conf_topic(cf, "order-events", p->topic_events, sizeof(p->topic_events));
	if (kq_producer_new(&cf->kafka, &p->prod, err, sizeof(err)) != 0) {
		log_error(NULL, "event=producer_failed error=\"%s\"", err);
		rc = EXIT_CONFIG;
		goto fail;
	}
	/* Idle for long, it closes its connections and threads (docs/performance.md). */
	kq_producer_sleep_after(p->prod, (int)cf->kafka.producer_sleep_s * 1000);
	if (proc_relay_start(p) != 0) {
		rc = EXIT_CONFIG;
		goto fail;
	}
	if ((p->workers = calloc((size_t)nworkers, sizeof(*p->workers))) == NULL)
		goto fail;
	p->nworkers = nworkers;
	for (int i = 0; i < nworkers; i++)
		if ((rc = proc_core_worker(p, &p->workers[i], i)) != 0)
			goto fail;
	*out = p;
	return 0;
fail:
	proc_core_free(p);
	return rc;
}

void
proc_core_free(struct proc *p)
{
	if (p == NULL)
		return;
	for (int i = 0; i < p->nworkers; i++) {
		struct proc_worker *w = &p->workers[i];

		if (w->rk)
			rd_kafka_destroy(w->rk);
		db_close(&w->db);
		free(w->holds);
		free(w->seen);
	}
	free(p->workers);
	proc_relay_stop(p);
	kq_producer_free(p->prod);
	free(p);
}

int
proc_open(const struct conf *cf, struct proc **out)
{
	return proc_core_new(cf, 1, out);
}

enum proc_rc
proc_apply(struct proc *p, const struct msg_callback *m, const char **outcome)
{
	struct proc_worker *w = &p->workers[0];
	enum proc_rc rc;

	w->outcome = NULL;
	rc = proc_handle(w, m);
	if (outcome)
		*outcome = w->outcome ? w->outcome : "";
	return rc;
}

int
proc_close(struct proc *p)
{
	int left;

	if (p == NULL)
		return 0;
	/* The relay publishes what proc_apply queued before it stops, as in the drain. */
	proc_relay_stop(p);
	if ((left = kq_flush(p->prod, PROC_PUBLISH_WAIT_MS)) > 0)
		log_warn(NULL, "event=close_undelivered messages=%d", left);
	proc_core_free(p);
	return left > 0 ? left : 0;
}
