/*
 * processor_refund - the refund transaction: one refund_callback_log row applied to its
 * order, idempotently per refund number.
 *
 * order_refunds has one row per (merchant, channel, refund number); its INSERT failing with
 * a duplicate key means the refund was applied already. Partial refunds add up exactly
 * (int64 minor units) into orders.refunded_amount. Channels that report the cumulative
 * refunded total (amount_cumulative = 1) contribute only the increase over what the order
 * has, so an older cumulative total arriving late adds nothing. The order is REFUNDING while
 * partially refunded and REFUNDED once fully, with one order.refunded outbox event.
 * A refund for an order that is not paid yet is a retryable failure: its payment may still
 * be on its way. A refund that would exceed the amount paid is dead with an alert.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "money.h"

/* proc_refund_lock - locks and reads the callback row */
static enum db_rc
proc_refund_lock(struct proc_worker *w, unsigned long long id, struct proc_row *row,
		 unsigned long long *found)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[12] = {DBO_STR(row->merchant, sizeof(row->merchant)),
				 DBO_STR(row->channel, sizeof(row->channel)),
				 DBO_STR(row->trade_no, sizeof(row->trade_no)),
				 DBO_STR(row->pay_trade_no, sizeof(row->pay_trade_no)),
				 DBO_STR(row->order, sizeof(row->order)),
				 DBO_STR(row->amount, sizeof(row->amount)),
				 DBO_I64(),
				 DBO_STR(row->currency, sizeof(row->currency)),
				 DBO_I64(),
				 DBO_I64(),
				 DBO_STR(row->created_at, sizeof(row->created_at)),
				 DBO_STR(row->now, sizeof(row->now))};
	enum db_rc rc;

	memset(row, 0, sizeof(*row));
	row->refund = 1;
	row->id = id;
	rc = db_query(&w->db,
		      "SELECT merchant_id, channel, refund_no, channel_trade_no, out_trade_no, "
		      "CAST(amount AS CHAR), amount_cumulative, currency, status, retry_count, "
		      "LEFT(DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f'), 23), "
		      "LEFT(DATE_FORMAT(NOW(3), '%Y-%m-%d %H:%i:%s.%f'), 23) "
		      "FROM refund_callback_log WHERE id = ? FOR UPDATE",
		      in, 1, out, 12, NULL, NULL, found);
	row->cumulative = out[6].i != 0;
	row->status = out[8].i;
	row->retry_count = out[9].i;
	return rc;
}

/*
 * proc_refund_other - a refund of a payment that is not the order's (the second payment of
 * an order paid twice): it settles that payment's refund request, not the order.
 */
static enum proc_tx
proc_refund_other(struct proc_worker *w, const struct proc_row *row, struct proc_result *r)
{
	struct db_in in[3] = {DBI_STR(row->merchant), DBI_STR(row->channel),
			      DBI_STR(row->pay_trade_no)};
	enum db_rc rc;

	rc = db_exec(&w->db,
		     "UPDATE refund_requests SET status = 'DONE' WHERE merchant_id = ? AND "
		     "channel = ? AND channel_trade_no = ?",
		     in, 3, NULL, NULL);
	if (rc != DB_OK)
		return proc_tx_error(w, rc, "refund request", r);
	return proc_mark_done(w, row, "refund_other_payment", r);
}

/* proc_refund_apply - the order is paid: add the refund up and move the order on */
static enum proc_tx
proc_refund_apply(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
		  struct proc_result *r)
{
	long long total, before, amount, inc, after;
	char inc_s[40], after_s[40], detail[400];
	unsigned long long ins = 0;
	const char *status, *outcome;
	enum db_rc rc;

	if (proc_amount_parse(o->amount, &total) != 0 ||
	    proc_amount_parse(o->refunded, &before) != 0 ||
	    proc_amount_parse(row->amount, &amount) != 0) {
		snprintf(r->reason, sizeof(r->reason), "unparsable amount");
		proc_rollback(&w->db);
		return TX_RETRY;
	}
	inc = row->cumulative ? amount - before : amount;
	if (inc < 0)
		inc = 0;
	after = before + inc;
	money_format(inc, 2, inc_s, sizeof(inc_s));
	money_format(after, 2, after_s, sizeof(after_s));
	{
		struct db_in in[6] = {DBI_STR(row->merchant), DBI_STR(row->channel),
				      DBI_STR(row->trade_no), DBI_STR(row->order),
				      DBI_STR(inc_s), DBI_I64(row->id)};

		rc = db_exec(&w->db,
			     "INSERT INTO order_refunds (merchant_id, channel, refund_no, "
			     "out_trade_no, amount, callback_id) VALUES (?, ?, ?, ?, ?, ?)",
			     in, 6, NULL, &ins);
	}
	if (rc == DB_DUPLICATE)
		return proc_mark_done(w, row, "duplicate", r);
	if (rc != DB_OK)
		return proc_tx_error(w, rc, "order refund", r);
	if (after > total) {
		struct db_in in[1] = {DBI_I64(ins)};

		/* Nothing of this refund may stay applied: take the row back before the dead
		 * mark commits. */
		if ((rc = db_exec(&w->db, "DELETE FROM order_refunds WHERE id = ?", in, 1, NULL,
				  NULL)) != DB_OK)
			return proc_tx_error(w, rc, "order refund", r);
		snprintf(detail, sizeof(detail),
			 "refund %.160s of %s would bring the refunded amount to %s of %s",
			 row->trade_no, row->amount, after_s, o->amount);
		return proc_dead(w, row, "amount_mismatch", detail, r);
	}
	if (inc == 0) {
		status = o->status;
		outcome = "refund_covered";
	} else if (after == total) {
		status = "REFUNDED";
		outcome = "refunded";
	} else {
		status = "REFUNDING";
		outcome = "refund_partial";
	}
	{
		struct db_in in[3] = {DBI_STR(after_s), DBI_STR(status), DBI_I64(o->id)};

		rc = db_exec(&w->db,
			     "UPDATE orders SET refunded_amount = ?, status = ? WHERE id = ?", in, 3,
			     NULL, NULL);
		if (rc != DB_OK)
			return proc_tx_error(w, rc, "update order", r);
	}
	snprintf(r->detail, sizeof(r->detail), "transition=%s>%s refunded=%s/%s increase=%s",
		 o->status, status, after_s, o->amount, inc_s);
	if (strcmp(status, "REFUNDED") == 0 && strcmp(o->status, "REFUNDED") != 0 &&
	    (rc = proc_outbox_add(w, row, "order.refunded", after_s, o->currency, o->trade_no,
				  r)) != DB_OK)
		return proc_tx_error(w, rc, "outbox", r);
	return proc_mark_done(w, row, outcome, r);
}

enum proc_tx
proc_refund(struct proc_worker *w, const struct msg_callback *m, struct proc_result *r)
{
	struct proc_row row;
	struct proc_order o;
	char detail[400];
	enum proc_tx tx;

	if (!proc_open(w, m, proc_refund_lock, &row, &o, r, &tx))
		return tx;
	snprintf(r->detail, sizeof(r->detail), "order_status=%s", o.status);
	if (strcmp(o.status, "PAID") != 0 && strcmp(o.status, "REFUNDING") != 0 &&
	    strcmp(o.status, "REFUNDED") != 0) {
		snprintf(r->reason, sizeof(r->reason), "order not paid (%s)", o.status);
		proc_rollback(&w->db);
		return TX_RETRY;
	}
	if (row.pay_trade_no[0] && o.trade_no[0] && strcmp(row.pay_trade_no, o.trade_no) != 0)
		return proc_refund_other(w, &row, r);
	if (strcmp(row.currency, o.currency) != 0) {
		snprintf(detail, sizeof(detail), "refund currency %s differs from the order's %s",
			 row.currency, o.currency);
		return proc_dead(w, &row, "currency_mismatch", detail, r);
	}
	return proc_refund_apply(w, &row, &o, r);
}
