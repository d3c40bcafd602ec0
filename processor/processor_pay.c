/*
 * processor_pay - the payment transaction: one pay_callback_log row applied to its order.
 *
 * Locks are always taken in the same order, the callback row first and then the order, so
 * two processors handling the same id serialize on the row and only the first applies it;
 * callbacks of one order handled at once serialize on the order. Steps:
 *
 *   1. lock the row and then its order FOR UPDATE, in one statement (a locking read sees
 *      the latest committed state), re-check status = 0 and apply the ordering guard
 *      (proc_tx_open in processor_open.c, shared with refunds);
 *   2. measure: the order's state, the payment's trade against the order's paid trade, its
 *      amount and currency against the order's (exactly, int64 minor units);
 *   3. the rule table (processor_decide.c) decides: paid (one conditional UPDATE of the
 *      order WHERE status = 'PENDING' and of the row WHERE status = 0, judged by affected
 *      rows, then both outbox events in one INSERT), duplicate, paid twice or paid after
 *      close (a refund request and an alert, for any amount), confirmed (an order the
 *      merchant marked paid without a trade), a mismatch (dead, alert, dead letter; never
 *      self-healed) or a retryable failure;
 *   4. mark the row done (for paid, in step 3's UPDATE) and commit, all in the one
 *      transaction.
 *
 * The worker's connection runs with autocommit off (processor_core.c), so the transaction
 * begins with step 1's statement: a payment is four round trips (lock, UPDATE, INSERT,
 * COMMIT) when it is paid.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "processor_decide.h"

int
proc_order_change(struct proc_worker *w, const char *sql, const struct db_in *in, int nin,
                  struct proc_result *r, enum proc_tx *tx)
{
	unsigned long long n = 0;
	enum db_rc rc;

	if ((rc = db_exec(&w->db, sql, in, nin, &n, NULL)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "update order", r);
		return 0;
	}
	if (n != 1) {
		/* The order is locked in the state the decision read, so this cannot happen; if
		 * it does, the next attempt decides again on what the order is then. */
		*tx = proc_tx_retry(w, "order changed under its lock", r);
		return 0;
	}
	return 1;
}

/* proc_pay_money - the payment's amount and currency against the order's, exactly */
static enum dec_money
proc_pay_money(const struct proc_row *row, const struct proc_order *o)
{
	long long paid, due;

	if (o->id == 0)
		return DM_NA;
	if (strcmp(row->currency, o->currency) != 0)
		return DM_CURRENCY;
	if (proc_amount_parse(row->amount, &paid) != 0 || proc_amount_parse(o->amount, &due) != 0 ||
	    paid != due)
		return DM_DIFFERS;
	return DM_EQUAL;
}

/* proc_pay_detail - the alert text of a payment: which payment, for which order */
static void
proc_pay_detail(const struct proc_row *row, const struct proc_order *o, const char *what, char *buf,
                size_t len)
{
	char ref[CBLOG_REF_MAX];

	snprintf(buf, len,
	         "%s: %s payment %.128s of %s %s for order %.128s (%s %s %s, paid by "
	         "%.128s): %s",
	         cblog_ref(ref, sizeof(ref), row->cblog, row->id), row->channel, row->trade_no,
	         row->amount, row->currency, row->order, o->status, o->amount, o->currency,
	         o->trade_no[0] ? o->trade_no : "-", what);
}

/*
 * proc_pay_refund_request - a payment that must be given back, with its alert. When the
 * payment's refund was processed before it, the request exists already as settled
 * (refunded_early): the unique key makes this INSERT a duplicate and nothing new is
 * requested.
 */
static enum proc_tx
proc_pay_refund_request(struct proc_worker *w, const struct proc_row *row,
                        const struct proc_order *o, const struct dec_rule *rule,
                        struct proc_result *r)
{
	struct db_in in[8] = {DBI_STR(row->merchant), DBI_STR(row->channel), DBI_STR(row->trade_no),
	                      DBI_STR(row->order),    DBI_STR(row->amount),  DBI_STR(row->currency),
	                      DBI_STR(rule->outcome), DBI_I64(row->id)};
	char detail[400];
	enum db_rc rc;

	rc = db_exec(&w->db,
	             "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
	             "out_trade_no, amount, currency, reason, callback_id) "
	             "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
	             in, 8, NULL, NULL);
	if (rc != DB_OK && rc != DB_DUPLICATE)
		return proc_tx_error(w, rc, "refund request", r);
	proc_pay_detail(row, o,
	                rc == DB_DUPLICATE ? "a refund request for this payment exists already "
	                                     "(or its refund came first); nothing new requested"
	                                   : "refund requested",
	                detail, sizeof(detail));
	snprintf(r->detail, sizeof(r->detail), "order_status=%s refund_request=%s", o->status,
	         rc == DB_DUPLICATE ? "existing" : "new");
	if ((rc = proc_alert(w, row, rule->alert, detail, r)) != DB_OK)
		return proc_tx_error(w, rc, "alert", r);
	return proc_mark_done(w, row, rule->outcome, r);
}

/*
 * PENDING -> PAID and the row done, in one statement: both rows are locked already, so the
 * two conditional UPDATEs judged together (2 rows changed) are the same two judged one by
 * one, in one round trip.
 */
static const char SQL_PAID_DONE[] =
    "UPDATE orders o, pay_callback_log c SET o.status = 'PAID', o.paid_at = NOW(3), "
    "o.channel = ?, o.channel_trade_no = ?, c.status = 1, c.outcome = 'paid', "
    "c.done_at = NOW(3) WHERE o.id = ? AND o.status = 'PENDING' AND c.id = ? AND c.status = 0";

/* proc_pay_mark_paid - PENDING -> PAID, the row done, and the two outbox events */
static enum proc_tx
proc_pay_mark_paid(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                   struct proc_result *r)
{
	struct db_in in[4] = {DBI_STR(row->channel), DBI_STR(row->trade_no), DBI_I64(o->id),
	                      DBI_I64(row->id)};
	const struct proc_event_spec ev[2] = {
	    {"order.paid.shipment", NULL, row->amount, row->currency, row->trade_no},
	    {"order.paid.points", NULL, row->amount, row->currency, row->trade_no}};
	unsigned long long n = 0;
	enum db_rc rc;

	r->outcome = "paid";
	if ((rc = db_exec(&w->db, SQL_PAID_DONE, in, 4, &n, NULL)) != DB_OK)
		return proc_tx_error(w, rc, "update order and row", r);
	/* Both are locked in the state the decision read, so this cannot happen; if it does,
	 * the next attempt decides again on what they are then. */
	if (n != 2)
		return proc_tx_retry(w, "order or row changed under its lock", r);
	snprintf(r->detail, sizeof(r->detail), "transition=PENDING>PAID");
	if ((rc = proc_outbox_add_all(w, row, ev, 2, r)) != DB_OK)
		return proc_tx_error(w, rc, "outbox", r);
	return proc_tx_commit(w, r);
}

/*
 * proc_pay_confirm - the merchant marked the order paid on its own (a query of the
 * channel) without recording the trade: this notification is that payment. Its trade is
 * recorded and nothing is requested or emitted; the merchant's path did the rest.
 */
/* Records the trade of an order paid without one, only if it still has none. */
static const char SQL_RECORD_TRADE[] =
    "UPDATE orders SET channel = ?, channel_trade_no = ? WHERE id = ? AND "
    "(channel_trade_no IS NULL OR channel_trade_no = '')";

static enum proc_tx
proc_pay_confirm(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                 const struct dec_rule *rule, struct proc_result *r)
{
	struct db_in in[3] = {DBI_STR(row->channel), DBI_STR(row->trade_no), DBI_I64(o->id)};
	char detail[400];
	enum proc_tx tx;
	enum db_rc rc;

	if (!proc_order_change(w, SQL_RECORD_TRADE, in, 3, r, &tx))
		return tx;
	snprintf(r->detail, sizeof(r->detail), "order_status=%s trade_recorded=1", o->status);
	if (rule->alert != NULL) {
		proc_pay_detail(row, o,
		                "the order was marked paid without a trade; this payment "
		                "is its trade but the amount or currency differs",
		                detail, sizeof(detail));
		if ((rc = proc_alert(w, row, rule->alert, detail, r)) != DB_OK)
			return proc_tx_error(w, rc, "alert", r);
	}
	return proc_mark_done(w, row, rule->outcome, r);
}

enum proc_tx
proc_pay(struct proc_worker *w, const struct msg_callback *m, struct proc_result *r)
{
	struct proc_row row;
	struct proc_order o;
	const struct dec_rule *rule;
	struct dec_in in;
	char detail[400];
	enum proc_tx tx;

	if (!proc_tx_open(w, m, &row, &o, r, &tx))
		return tx;
	in.note = DN_PAY;
	in.state = dec_state_of(o.status, o.id != 0);
	in.trade = dec_trade_of(in.state, row.channel, row.trade_no, o.channel, o.trade_no);
	in.money = proc_pay_money(&row, &o);
	rule = dec_decide(&in);
	snprintf(r->detail, sizeof(r->detail), "order_status=%s", o.id ? o.status : "MISSING");
	switch (rule->action) {
	case DX_RETRY:
		return proc_tx_retry(w, rule->outcome, r);
	case DX_DEAD:
		proc_pay_detail(&row, &o,
		                strcmp(rule->outcome, "currency_mismatch") == 0
		                    ? "its currency differs from the order's"
		                : strcmp(rule->outcome, "amount_mismatch") == 0
		                    ? "its amount differs from the order's"
		                    : "the decision table has no rule for this combination",
		                detail, sizeof(detail));
		return proc_dead(w, &row, rule->outcome, detail, r);
	case DX_MARK_PAID:
		return proc_pay_mark_paid(w, &row, &o, r);
	case DX_CONFIRM_PAID:
		return proc_pay_confirm(w, &row, &o, rule, r);
	case DX_REQUEST_REFUND:
		return proc_pay_refund_request(w, &row, &o, rule, r);
	case DX_NOTHING:
		return proc_mark_done(w, &row, rule->outcome, r);
	default:
		proc_pay_detail(&row, &o, "a refund action for a payment", detail, sizeof(detail));
		return proc_dead(w, &row, "decision_unexpected", detail, r);
	}
}
