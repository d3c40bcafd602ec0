/*
 * processor_refund - the refund transaction: one refund_callback_log row measured against
 * its order and decided by the rule table (processor_decide.c).
 *
 * A refund of the order's own payment goes through the refund ledger (order_refunds, see
 * processor_ledger.c), so the same money told twice (Stripe's charge.refunded and refund.*,
 * a cumulative total arriving late) counts once, and a refund that fails after it
 * succeeded gives the money back to the merchant. A refund of another payment (paid twice,
 * paid after close) settles that payment's refund request and never touches the order.
 * Statuses that moved no money (WeChat Pay ABNORMAL, CLOSED) change nothing and alert.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "money.h"
#include "processor_decide.h"

/* proc_refund_detail - the alert text: which refund, of which payment, for which order */
static void
proc_refund_detail(const struct proc_row *row, const struct proc_order *o, const char *what,
                   char *buf, size_t len)
{
	char ref[CBLOG_REF_MAX];

	snprintf(buf, len,
	         "%s: %s refund %.128s (status %s) of %s %s, payment %.128s, order %.128s "
	         "(%s, paid by %.128s): %s",
	         cblog_ref(ref, sizeof(ref), row->cblog, row->id), row->channel, row->trade_no,
	         row->chan_status[0] ? row->chan_status : "-", row->amount, row->currency,
	         row->pay_trade_no[0] ? row->pay_trade_no : "-", row->order,
	         o->id ? o->status : "missing", o->trade_no[0] ? o->trade_no : "-", what);
}

/* What each alert of the refund rules says, after the refund's names. */
static const char *
proc_refund_why(const char *alert)
{
	static const struct {
		const char *kind, *text;
	} t[] = {
	    {"refund_abnormal", "the refund did not reach the buyer; nothing applied, the "
	                        "merchant must resolve it at the channel"},
	    {"refund_closed", "the refund was closed; no money moved, nothing applied"},
	    {"refund_status_unknown", "a refund status paycb does not know; nothing applied"},
	    {"refund_request_mismatch", "the refund request was settled by a refund of another "
	                                "amount or currency"},
	    {"refund_reversed", "a refund that had succeeded failed: the money is back with "
	                        "the merchant"},
	    {"refund_failed", "the refund failed; no money moved, it must be made again"},
	    {"refund_unmatched", "the order was closed and the refund names no payment"},
	    {"currency_mismatch", "its currency differs from the order's"},
	    {"amount_mismatch", "it would bring the refunded amount above the amount paid"},
	};

	for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if (strcmp(t[i].kind, alert) == 0)
			return t[i].text;
	return "the decision table has no rule for this combination";
}

/*
 * proc_refund_done - raises the rule's alert, if any, and ends the transaction: marks the row
 * done, or, when the ledger's UPDATE marked it already (marked), commits.
 */
static enum proc_tx
proc_refund_done(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                 const struct dec_rule *rule, int marked, struct proc_result *r)
{
	char detail[400];
	enum db_rc rc;

	if (rule->alert != NULL) {
		proc_refund_detail(row, o, proc_refund_why(rule->alert), detail, sizeof(detail));
		if ((rc = proc_alert(w, row, rule->alert, detail, r)) != DB_OK)
			return proc_tx_error(w, rc, "alert", r);
	}
	return marked ? proc_tx_commit(w, r) : proc_mark_done(w, row, rule->outcome, r);
}

/*
 * The order's refunded amount and status, only if the status is still the one read, and the
 * row done, in one statement: both rows are locked already, so the two conditional UPDATEs
 * judged together (2 rows changed) are the same two judged one by one, in one round trip.
 * The refunded amount differs from the one read whenever this runs, so the order's row
 * always changes.
 */
static const char SQL_REFUNDED_DONE[] =
    "UPDATE orders o, refund_callback_log c SET o.refunded_amount = ?, o.status = ?, "
    "c.status = 1, c.outcome = ?, c.done_at = NOW(3) WHERE o.id = ? AND o.status = ? AND "
    "c.id = ? AND c.status = 0";

/* proc_refund_mark - the order's new refunded amount and status, and the row done */
static int
proc_refund_mark(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                 const char *after_s, const char *status, const struct dec_rule *rule,
                 struct proc_result *r, enum proc_tx *tx)
{
	struct db_in in[6] = {DBI_STR(after_s), DBI_STR(status),    DBI_STR(rule->outcome),
	                      DBI_I64(o->id),   DBI_STR(o->status), DBI_I64(row->id)};
	unsigned long long n = 0;
	enum db_rc rc;

	r->outcome = rule->outcome;
	if ((rc = db_exec(&w->db, SQL_REFUNDED_DONE, in, 6, &n, NULL)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "update order and row", r);
		return 0;
	}
	if (n != 2) {
		/* Both are locked in the state the decision read, so this cannot happen; if it
		 * does, the next attempt decides again on what they are then. */
		*tx = proc_tx_retry(w, "order or row changed under its lock", r);
		return 0;
	}
	return 1;
}

/* proc_refund_ledger_apply - DX_LEDGER: the ledger row, the order, its events */
static enum proc_tx
proc_refund_ledger_apply(struct proc_worker *w, const struct proc_row *row,
                         const struct proc_order *o, const struct proc_ledger_view *v,
                         const struct dec_rule *rule, struct proc_result *r)
{
	int64_t after = dec_ledger_total(&v->after);
	char after_s[40], diff_s[40], nth[24];
	const char *status;
	const char *trade = o->trade_no[0] ? o->trade_no : row->pay_trade_no;
	struct proc_event_spec ev[PROC_EVENTS_MAX];
	int nev = 0;
	enum proc_tx tx;
	enum db_rc rc;

	if ((rc = proc_ledger_write(w, row, v)) != DB_OK)
		return proc_tx_error(w, rc, "ledger", r);
	status = after == 0 ? "PAID" : after == v->paid ? "REFUNDED" : "REFUNDING";
	money_format(after, 2, after_s, sizeof(after_s));
	money_format(after > v->before ? after - v->before : v->before - after, 2, diff_s,
	             sizeof(diff_s));
	snprintf(r->detail, sizeof(r->detail), "transition=%s>%s refunded=%s/%s change=%s%s",
	         o->status, status, after_s, o->amount, after < v->before ? "-" : "", diff_s);
	if (after != v->before && !proc_refund_mark(w, row, o, after_s, status, rule, r, &tx))
		return tx;
	/*
	 * One event per refund that moved money, named by its refund number, and the order's
	 * order.refunded once it is refunded in full. An order refunded in full, reversed and
	 * refunded in full again has a second one, a new fact for downstream: it is told apart
	 * by its number ("|2"), counted under the order's lock by proc_ledger_measure, so it can
	 * never be taken for a copy of the first. The events go in one INSERT where they can.
	 */
	if (after != v->before)
		ev[nev++] = (struct proc_event_spec){after > v->before ? "order.refund"
		                                                       : "order.refund_reversed",
		                                     row->trade_no, diff_s, o->currency, trade};
	if (strcmp(status, "REFUNDED") == 0 && strcmp(o->status, "REFUNDED") != 0) {
		snprintf(nth, sizeof(nth), "%lld", v->refunded_events + 1);
		ev[nev++] =
		    (struct proc_event_spec){"order.refunded", v->refunded_events == 0 ? NULL : nth,
		                             after_s, o->currency, trade};
	}
	if (nev > 0 && (rc = proc_outbox_add_all(w, row, ev, nev, r)) != DB_OK)
		return proc_tx_error(w, rc, "outbox", r);
	return proc_refund_done(w, row, o, rule, after != v->before, r);
}

/* proc_refund_request - DX_SETTLE and DX_REOPEN: the other payment's refund request */
static enum proc_tx
proc_refund_request(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                    const struct proc_request *q, const struct dec_rule *rule,
                    struct proc_result *r)
{
	enum db_rc rc;

	if (rule->action == DX_REOPEN)
		rc = proc_request_reopen(w, q);
	else if (q->id != 0)
		rc = proc_request_settle(w, row, q);
	else
		rc = proc_request_record_early(w, row);
	if (rc == DB_DUPLICATE)
		return proc_tx_retry(w, "refund request changed under the lock", r);
	if (rc != DB_OK)
		return proc_tx_error(w, rc, "refund request", r);
	snprintf(r->detail, sizeof(r->detail), "payment=%.100s request=%s", row->pay_trade_no,
	         rule->action == DX_REOPEN ? "FAILED" : "DONE");
	return proc_refund_done(w, row, o, rule, 0, r);
}

enum proc_tx
proc_refund(struct proc_worker *w, const struct msg_callback *m, struct proc_result *r)
{
	struct proc_row row;
	struct proc_order o;
	struct proc_ledger_view v;
	struct proc_request q;
	struct dec_in in;
	const struct dec_rule *rule;
	char detail[400];
	enum proc_tx tx;
	enum db_rc rc = DB_OK;

	if (!proc_tx_open(w, m, &row, &o, r, &tx))
		return tx;
	memset(&v, 0, sizeof(v));
	memset(&q, 0, sizeof(q));
	in.note = dec_note_of(row.channel, row.chan_status, row.cumulative);
	in.state = dec_state_of(o.status, o.id != 0);
	in.trade = dec_trade_of(in.state, row.channel, row.pay_trade_no, o.channel, o.trade_no);
	in.money = DM_NA;
	if (in.state == DS_MISSING)
		in.money = DM_NA;
	else if (in.trade == DT_OTHER)
		rc = proc_request_measure(w, &row, &q, &in.money);
	else if (strcmp(row.currency, o.currency) != 0)
		in.money = DM_CURRENCY;
	else
		rc = proc_ledger_measure(w, &row, &o, in.note, &v, &in.money);
	if (rc != DB_OK)
		return proc_tx_error(w, rc, "measure", r);
	rule = dec_decide(&in);
	snprintf(r->detail, sizeof(r->detail), "order_status=%s note=%s trade=%s amount=%s",
	         o.id ? o.status : "MISSING", dec_note_name(in.note), dec_trade_name(in.trade),
	         dec_money_name(in.money));
	switch (rule->action) {
	case DX_RETRY:
		return proc_tx_retry(w, rule->outcome, r);
	case DX_DEAD:
		proc_refund_detail(&row, &o, proc_refund_why(rule->alert), detail, sizeof(detail));
		return proc_dead(w, &row, rule->outcome, detail, r);
	case DX_LEDGER:
		return proc_refund_ledger_apply(w, &row, &o, &v, rule, r);
	case DX_SETTLE:
	case DX_REOPEN:
		return proc_refund_request(w, &row, &o, &q, rule, r);
	case DX_NOTHING:
		return proc_refund_done(w, &row, &o, rule, 0, r);
	default:
		/* The rule table gives refunds none of the payment actions. */
		proc_refund_detail(&row, &o, "a payment action for a refund", detail,
		                   sizeof(detail));
		return proc_dead(w, &row, "decision_unexpected", detail, r);
	}
}
