/*
 * processor_handle - one callback message from start to finish: a cheap look at the row
 * (a done or dead row is skipped without taking a lock), the payment or refund
 * transaction, the record of a retryable failure, the outbox relay after a commit, and the
 * one log line of the outcome, callback id first.
 *
 * The caller stores the message's offset only for PROC_DONE: the effect committed, the row
 * was final already, or the failure was recorded on the row. Anything else (the database or
 * the broker away) leaves the message to be delivered again.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

/* proc_precheck - the row's status without a lock: -1 missing, -2 database error */
static long long
proc_precheck(struct proc_worker *w, const struct msg_callback *m)
{
	struct db_in in[1] = {DBI_I64(m->id)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(&w->db,
		     m->log == MSG_LOG_REFUND ? "SELECT status FROM refund_callback_log WHERE id = ?"
					      : "SELECT status FROM pay_callback_log WHERE id = ?",
		     in, 1, out, 1, NULL, NULL, &rows) != DB_OK)
		return -2;
	return rows ? out[0].i : -1;
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
			 r->outcome, order, merchant, m->attempt, r->detail, r->detail[0] ? " " : "",
			 elapsed);
}

enum proc_rc
proc_handle(struct proc_worker *w, const struct msg_callback *m)
{
	int refund = m->log == MSG_LOG_REFUND;
	long long t0 = proc_mono_ms(), st;
	struct proc_result r;
	char id[24], reason[400];
	enum proc_tx tx;
	enum db_rc rc;

	memset(&r, 0, sizeof(r));
	log_cbid(id, m->id, refund);
	log_safe(r.order, sizeof(r.order), m->out_trade_no);
	log_safe(r.merchant, sizeof(r.merchant), m->merchant_id);
	if ((st = proc_precheck(w, m)) == -2) {
		log_warn(id, "event=db_unavailable order=%s error=\"%s\"", r.order,
			 w->db.last_error);
		return PROC_DB_DOWN;
	}
	if (st == -1)
		tx = TX_MISSING;
	else if (st != 0)
		tx = TX_FINAL;
	else
		tx = refund ? proc_refund(w, m, &r) : proc_pay(w, m, &r);

	switch (tx) {
	case TX_COMMITTED:
		proc_log_done(id, m, &r, proc_mono_ms() - t0);
		proc_outbox_relay(w, id, &r);
		proc_metrics_outcome(r.outcome, proc_mono_ms() - t0);
		return PROC_DONE;
	case TX_FINAL:
		log_info(id, "event=skipped reason=already_final order=%s merchant=%s attempt=%d "
			     "elapsed_ms=%lld",
			 r.order, r.merchant, m->attempt, proc_mono_ms() - t0);
		proc_metrics_outcome("skipped", proc_mono_ms() - t0);
		return PROC_DONE;
	case TX_MISSING:
		/* Ingest writes the row before it publishes; a missing row cannot be retried. */
		log_error(id, "event=row_missing order=%s merchant=%s", r.order, r.merchant);
		return PROC_DONE;
	case TX_RETRY:
		snprintf(reason, sizeof(reason), "%s", r.reason);
		if ((rc = proc_record_failure(w, refund, m->id, reason, &r)) != DB_OK) {
			log_warn(id, "event=db_unavailable order=%s error=\"%s\"", r.order,
				 w->db.last_error);
			return PROC_DB_DOWN;
		}
		proc_log_text(reason, sizeof(reason), r.reason);
		log_warn(id,
			 "event=processed outcome=retry reason=\"%s\" order=%s merchant=%s "
			 "attempt=%d retry_count=%d elapsed_ms=%lld",
			 reason, r.order, r.merchant, m->attempt, r.retry_count,
			 proc_mono_ms() - t0);
		proc_metrics_outcome("retry", proc_mono_ms() - t0);
		return PROC_DONE;
	case TX_DB_DOWN:
		log_warn(id, "event=db_unavailable order=%s error=\"%s\"", r.order,
			 proc_log_text(reason, sizeof(reason), r.reason));
		return PROC_DB_DOWN;
	case TX_BROKER_DOWN:
		log_warn(id, "event=broker_unavailable order=%s error=\"%s\"", r.order,
			 proc_log_text(reason, sizeof(reason), r.reason));
		return PROC_BROKER_DOWN;
	}
	return PROC_DB_DOWN;
}
