/*
 * processor_handle - one callback message from start to finish: the payment or refund
 * transaction, whose opening read locks the row and its order and measures the ordering
 * guard (a done or dead row is skipped, a first attempt that would overtake an earlier
 * callback of its order is deferred: proc_guard; both in processor_open.c), the record of
 * a retryable failure, the outbox relay after a commit, and the one log line of the
 * outcome, callback id first; and a run of one partition's messages in one transaction
 * (proc_handle_batch, at the end of this file).
 *
 * Until 2026-12-06 a done or dead row was skipped by an unlocked look before the
 * transaction, so that copies of a message did not queue on the row's lock; the look cost a
 * round trip on every message to spare a short lock wait on the rare copy, and is folded
 * into the locking read now (processor_open.c, proc_lock). The worker's connection runs with
 * autocommit off: every path here ends its transaction with a COMMIT or a ROLLBACK.
 *
 * A message naming a row that does not exist (a database failover that lost an
 * acknowledged INSERT, or a message from elsewhere) and a message whose merchant or order
 * differ from the row it names (an id reused after such a loss) are never applied: each is
 * counted (paycb_processor_callbacks_total{outcome="row_missing"|"row_mismatch"}) and
 * alerted with the merchant, channel and order the message carries, and its offset is
 * stored.
 *
 * The caller stores the message's offset only for PROC_DONE: the effect committed, the row
 * was final already, or the failure was recorded on the row. Anything else (the database or
 * the broker away) leaves the message to be delivered again.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"

/* proc_msg_alert - an alerts row about message m itself (no row of ours to name), committed. */
static enum db_rc
proc_msg_alert(struct proc_worker *w, const struct msg_callback *m, const char *kind,
               const char *detail)
{
	enum db_rc rc;

	rc = proc_alert_insert(w, m->id, m->merchant_id, m->out_trade_no, kind, detail);
	if (rc == DB_OK)
		rc = db_commit(&w->db);
	if (rc != DB_OK)
		proc_rollback(&w->db);
	return rc;
}

/* proc_log_text - s for a quoted log value: printable ASCII, no quote or backslash */
static const char *
proc_log_text(char *buf, size_t len, const char *s)
{
	size_t i;

	for (i = 0; s[i] && i + 1 < len; i++) {
		unsigned char c = (unsigned char)s[i];
		buf[i] = (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') ? (char)c : '?';
	}
	buf[i] = '\0';
	return buf;
}

static void
proc_log_done(const char *id, const struct msg_callback *m, struct proc_result *r,
              long long elapsed)
{
	char order[130], merchant[66], text[400];

	log_safe(order, sizeof(order), r->order);
	log_safe(merchant, sizeof(merchant), r->merchant);
	if (r->alert_kind)
		log_error(id, "event=alert kind=%s order=%s merchant=%s detail=\"%s\"",
		          r->alert_kind, order, merchant,
		          proc_log_text(text, sizeof(text), r->alert_detail));
	if (strcmp(r->outcome, "dead") == 0)
		log_error(id,
		          "event=processed outcome=dead reason=%s order=%s merchant=%s attempt=%d "
		          "elapsed_ms=%lld",
		          r->reason, order, merchant, m->attempt, elapsed);
	else
		log_info(id,
		         "event=processed outcome=%s order=%s merchant=%s attempt=%d %s%s"
		         "elapsed_ms=%lld",
		         r->outcome, order, merchant, m->attempt, r->detail,
		         r->detail[0] ? " " : "", elapsed);
}

/* proc_counted - a handled message's outcome, counted and kept for proc_apply. */
static enum proc_rc
proc_counted(struct proc_worker *w, const char *outcome, long long t0)
{
	w->outcome = outcome;
	proc_metrics_outcome(outcome, clock_mono_ms() - t0);
	return PROC_DONE;
}

/* proc_db_down - the log line of a database failure while handling m. */
static enum proc_rc
proc_db_down(struct proc_worker *w, const char *id, const struct proc_result *r)
{
	w->outcome = "db_unavailable";
	log_warn(id, "event=db_unavailable order=%s error=\"%s\"", r->order, w->db.last_error);
	return PROC_DB_DOWN;
}

/*
 * proc_mismatch - a message whose merchant or order differ from the row it names (an id
 * reused after a lost INSERT): never applied, alerted, and done.
 */
static enum proc_rc
proc_mismatch(struct proc_worker *w, const struct msg_callback *m, const char *id,
              const struct proc_result *r, long long t0)
{
	char rm[66], ro[130], ch[17], reason[400];

	snprintf(reason, sizeof(reason),
	         "%s: the message names merchant %s, order %s, channel %s; the row is "
	         "merchant %s, order %s: not applied",
	         id, r->merchant, r->order, log_safe(ch, sizeof(ch), m->channel),
	         log_safe(rm, sizeof(rm), r->row_merchant), log_safe(ro, sizeof(ro), r->row_order));
	if (proc_msg_alert(w, m, "row_mismatch", reason) != DB_OK)
		return proc_db_down(w, id, r);
	log_error(id,
	          "event=alert kind=row_mismatch order=%s merchant=%s channel=%s "
	          "row_order=%s row_merchant=%s attempt=%d",
	          r->order, r->merchant, ch, ro, rm, m->attempt);
	return proc_counted(w, "row_mismatch", t0);
}

/*
 * proc_missing - a message naming a row that does not exist. Ingest writes the row before
 * it publishes, so an acknowledged notification was lost (a failover that dropped the
 * INSERT): only the channel's reconciliation can bring it back. A missing row cannot be
 * retried.
 */
static enum proc_rc
proc_missing(struct proc_worker *w, const struct msg_callback *m, const char *id,
             const struct proc_result *r, long long t0)
{
	char ch[17], reason[400];

	log_safe(ch, sizeof(ch), m->channel);
	snprintf(reason, sizeof(reason),
	         "%s: a message names a %s row that does not exist: merchant %s, order "
	         "%s, channel %s, attempt %d (reconcile with the channel)",
	         id, m->cblog == CBLOG_REFUND ? "refund" : "payment", r->merchant, r->order, ch,
	         m->attempt);
	if (proc_msg_alert(w, m, "row_missing", reason) != DB_OK)
		return proc_db_down(w, id, r);
	log_error(id, "event=alert kind=row_missing order=%s merchant=%s channel=%s attempt=%d",
	          r->order, r->merchant, ch, m->attempt);
	return proc_counted(w, "row_missing", t0);
}

/* proc_retry - a retryable failure, recorded on the row (the retrier brings it back). */
static enum proc_rc
proc_retry(struct proc_worker *w, const struct msg_callback *m, const char *id,
           struct proc_result *r, long long t0)
{
	char reason[400];
	int counted = 0;

	snprintf(reason, sizeof(reason), "%s", r->reason);
	if (proc_record_failure(w, m->cblog, m->id, m->attempt, reason, r, &counted) != DB_OK)
		return proc_db_down(w, id, r);
	proc_log_text(reason, sizeof(reason), r->reason);
	log_warn(id,
	         "event=processed outcome=%s reason=\"%s\" order=%s merchant=%s "
	         "attempt=%d retry_count=%d elapsed_ms=%lld",
	         counted ? "retry" : "retry_stale", reason, r->order, r->merchant, m->attempt,
	         r->retry_count, clock_mono_ms() - t0);
	return proc_counted(w, counted ? "retry" : "retry_stale", t0);
}

enum proc_rc
proc_handle(struct proc_worker *w, const struct msg_callback *m)
{
	long long t0 = clock_mono_ms();
	struct proc_result r;
	char id[24], reason[400];
	enum proc_tx tx;

	memset(&r, 0, sizeof(r));
	cblog_ref(id, sizeof(id), m->cblog, m->id);
	log_safe(r.order, sizeof(r.order), m->out_trade_no);
	log_safe(r.merchant, sizeof(r.merchant), m->merchant_id);
	tx = m->cblog == CBLOG_REFUND ? proc_refund(w, m, &r) : proc_pay(w, m, &r);

	switch (tx) {
	case TX_COMMITTED:
		proc_log_done(id, m, &r, clock_mono_ms() - t0);
		proc_outbox_relay(w, id, &r);
		return proc_counted(w, r.outcome, t0);
	case TX_FINAL:
		log_info(id,
		         "event=skipped reason=already_final order=%s merchant=%s attempt=%d "
		         "elapsed_ms=%lld",
		         r.order, r.merchant, m->attempt, clock_mono_ms() - t0);
		return proc_counted(w, "skipped", t0);
	case TX_MISSING:
		return proc_missing(w, m, id, &r, t0);
	case TX_MISMATCH:
		return proc_mismatch(w, m, id, &r, t0);
	case TX_DEFERRED:
		log_info(id,
		         "event=deferred reason=earlier_callback_pending order=%s merchant=%s "
		         "earlier_pending=%lld age_ms=%lld attempt=%d",
		         r.order, r.merchant, r.earlier, r.age_ms, m->attempt);
		return proc_counted(w, "deferred", t0);
	case TX_RETRY:
		return proc_retry(w, m, id, &r, t0);
	case TX_DB_DOWN:
		w->outcome = "db_unavailable";
		log_warn(id, "event=db_unavailable order=%s error=\"%s\"", r.order,
		         proc_log_text(reason, sizeof(reason), r.reason));
		return PROC_DB_DOWN;
	case TX_BROKER_DOWN:
		w->outcome = "broker_unavailable";
		log_warn(id, "event=broker_unavailable order=%s error=\"%s\"", r.order,
		         proc_log_text(reason, sizeof(reason), r.reason));
		return PROC_BROKER_DOWN;
	}
	return PROC_DB_DOWN;
}

/*
 * proc_handle_batch - see processor.h. One transaction runs the messages' own transactions
 * back to back, proc_begin and proc_commit leaving BEGIN and COMMIT to the batch: locks are
 * taken in the messages' order and held to the one commit. A message that ends in anything
 * but TX_COMMITTED (a retry, a row final already, missing or not the message's, an earlier
 * callback of its order pending, an error) ends the batch: everything is rolled back and
 * nothing was applied, so handling each message alone afterwards repeats nothing, and the
 * message that ended it is judged again alone (deferred, skipped, alerted). A message's
 * guard sees the rows the batch finished before it as done: they came earlier and were
 * applied first, so nothing overtook them. The logs, relays and metrics of the messages run
 * only after the batch's commit.
 */
int
proc_handle_batch(struct proc_worker *w, const struct msg_callback *ms, int n, int *at)
{
	struct proc_result r[PROC_BATCH_MAX];
	long long t0 = clock_mono_ms();
	char id[24], last[24];
	int i, ok = 0;

	*at = 0;
	if (n < 2 || n > PROC_BATCH_MAX)
		return 0;
	/*
	 * Read committed, for this transaction only: the messages' own plain reads (a refund's
	 * ledger, a payment's refund requests) then see what is committed when each runs, as
	 * each message's transaction alone does, not the snapshot of the batch's first read.
	 */
	if (db_exec(&w->db, "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", NULL, 0, NULL,
	            NULL) != DB_OK ||
	    db_begin(&w->db) != DB_OK)
		return 0;
	w->batching = 1;
	for (i = 0; i < n; i++) {
		memset(&r[i], 0, sizeof(r[i]));
		log_safe(r[i].order, sizeof(r[i].order), ms[i].out_trade_no);
		log_safe(r[i].merchant, sizeof(r[i].merchant), ms[i].merchant_id);
		if ((ms[i].cblog == CBLOG_REFUND ? proc_refund(w, &ms[i], &r[i])
		                                 : proc_pay(w, &ms[i], &r[i])) != TX_COMMITTED)
			break;
	}
	w->batching = 0;
	if (i == n && db_commit(&w->db) == DB_OK)
		ok = 1;
	else
		proc_rollback(&w->db);
	if (!ok) {
		log_info(NULL, "event=batch_fallback messages=%d at=%d", n, i);
		/* A failed commit says nothing about which message was at fault. */
		*at = i < n ? i : 0;
		return 0;
	}
	log_debug(cblog_ref(id, sizeof(id), ms[0].cblog, ms[0].id),
	          "event=batch_committed messages=%d last=%s elapsed_ms=%lld", n,
	          cblog_ref(last, sizeof(last), ms[n - 1].cblog, ms[n - 1].id),
	          clock_mono_ms() - t0);
	for (i = 0; i < n; i++) {
		cblog_ref(id, sizeof(id), ms[i].cblog, ms[i].id);
		proc_log_done(id, &ms[i], &r[i], clock_mono_ms() - t0);
		proc_outbox_relay(w, id, &r[i]);
		proc_metrics_outcome(r[i].outcome, clock_mono_ms() - t0);
	}
	return 1;
}
