/*
 * processor_pay - the payment transaction: one pay_callback_log row applied to its order.
 *
 * Locks are always taken in the same order, the callback row first and then the order, so
 * two processors handling the same id serialize on the row and only the first applies it;
 * callbacks of one order handled at once serialize on the order. Steps:
 *
 *   1. lock the row FOR UPDATE and re-check status = 0;
 *   2. lock the order FOR UPDATE (a locking read sees the latest committed state);
 *   3. amount and currency must equal the order's, exactly; a mismatch is never
 *      self-healed: the row is dead with an alert and a dead letter;
 *   4. UPDATE ... WHERE status = 'PENDING': one row changed means paid, with the two outbox
 *      events; otherwise the order's state decides: duplicate, paid twice, paid after
 *      close (both a refund request and an alert), or a retryable failure;
 *   5. mark the row done and commit, all in the one transaction.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

enum db_rc
proc_order_lock(struct proc_worker *w, const struct proc_row *row, struct proc_order *o,
		unsigned long long *found)
{
	struct db_in in[2] = {DBI_STR(row->merchant), DBI_STR(row->order)};
	struct db_out out[7] = {DBO_I64(),
				DBO_STR(o->amount, sizeof(o->amount)),
				DBO_STR(o->currency, sizeof(o->currency)),
				DBO_STR(o->status, sizeof(o->status)),
				DBO_STR(o->channel, sizeof(o->channel)),
				DBO_STR(o->trade_no, sizeof(o->trade_no)),
				DBO_STR(o->refunded, sizeof(o->refunded))};
	enum db_rc rc;

	memset(o, 0, sizeof(*o));
	rc = db_query(&w->db,
		      "SELECT id, CAST(amount AS CHAR), currency, status, IFNULL(channel, ''), "
		      "IFNULL(channel_trade_no, ''), CAST(refunded_amount AS CHAR) FROM orders "
		      "WHERE merchant_id = ? AND out_trade_no = ? FOR UPDATE",
		      in, 2, out, 7, NULL, NULL, found);
	if (rc == DB_OK && *found)
		o->id = (unsigned long long)out[0].i;
	return rc;
}

/* proc_open - the opening proc_pay and proc_refund share (see processor.h) */
int
proc_open(struct proc_worker *w, const struct msg_callback *m, proc_row_lock_fn lock,
	  struct proc_row *row, struct proc_order *o, struct proc_result *r, enum proc_tx *tx)
{
	unsigned long long found = 0;
	enum db_rc rc;

	if ((rc = db_begin(&w->db)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "begin", r);
		return 0;
	}
	if ((rc = lock(w, m->id, row, &found)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "lock row", r);
		return 0;
	}
	if (!found || row->status != 0) {
		proc_rollback(&w->db);
		*tx = found ? TX_FINAL : TX_MISSING;
		return 0;
	}
	snprintf(r->merchant, sizeof(r->merchant), "%s", row->merchant);
	snprintf(r->order, sizeof(r->order), "%s", row->order);
	if ((rc = proc_order_lock(w, row, o, &found)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "lock order", r);
		return 0;
	}
	if (!found) {
		snprintf(r->reason, sizeof(r->reason), "order not found");
		proc_rollback(&w->db);
		*tx = TX_RETRY;
		return 0;
	}
	return 1;
}

/* proc_pay_lock - locks and reads the callback row */
static enum db_rc
proc_pay_lock(struct proc_worker *w, unsigned long long id, struct proc_row *row,
	      unsigned long long *found)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[10] = {DBO_STR(row->merchant, sizeof(row->merchant)),
				 DBO_STR(row->channel, sizeof(row->channel)),
				 DBO_STR(row->trade_no, sizeof(row->trade_no)),
				 DBO_STR(row->order, sizeof(row->order)),
				 DBO_STR(row->amount, sizeof(row->amount)),
				 DBO_STR(row->currency, sizeof(row->currency)),
				 DBO_I64(),
				 DBO_I64(),
				 DBO_STR(row->created_at, sizeof(row->created_at)),
				 DBO_STR(row->now, sizeof(row->now))};
	enum db_rc rc;

	memset(row, 0, sizeof(*row));
	row->id = id;
	rc = db_query(&w->db,
		      "SELECT merchant_id, channel, channel_trade_no, out_trade_no, "
		      "CAST(amount AS CHAR), currency, status, retry_count, "
		      "LEFT(DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f'), 23), "
		      "LEFT(DATE_FORMAT(NOW(3), '%Y-%m-%d %H:%i:%s.%f'), 23) "
		      "FROM pay_callback_log WHERE id = ? FOR UPDATE",
		      in, 1, out, 10, NULL, NULL, found);
	row->status = out[6].i;
	row->retry_count = out[7].i;
	return rc;
}

/* proc_pay_check - amount and currency against the order; returns the dead reason or NULL */
static const char *
proc_pay_check(const struct proc_row *row, const struct proc_order *o, char *detail,
	       size_t len)
{
	long long paid, due;

	if (strcmp(row->currency, o->currency) != 0) {
		snprintf(detail, len, "currency %s differs from the order's %s", row->currency,
			 o->currency);
		return "currency_mismatch";
	}
	if (proc_amount_parse(row->amount, &paid) != 0 || proc_amount_parse(o->amount, &due) != 0 ||
	    paid != due) {
		snprintf(detail, len, "amount %s differs from the order's %s", row->amount,
			 o->amount);
		return "amount_mismatch";
	}
	return NULL;
}

/* proc_pay_refund_request - a payment that must be given back, with its alert */
static enum proc_tx
proc_pay_refund_request(struct proc_worker *w, const struct proc_row *row,
			const struct proc_order *o, const char *reason, struct proc_result *r)
{
	struct db_in in[8] = {DBI_STR(row->merchant), DBI_STR(row->channel),
			      DBI_STR(row->trade_no), DBI_STR(row->order),
			      DBI_STR(row->amount), DBI_STR(row->currency),
			      DBI_STR(reason), DBI_I64(row->id)};
	char detail[400];
	enum db_rc rc;

	/* The unique key on the trade number makes a second request for it a no-op. */
	rc = db_exec(&w->db,
		     "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
		     "out_trade_no, amount, currency, reason, callback_id) "
		     "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
		     in, 8, NULL, NULL);
	if (rc != DB_OK && rc != DB_DUPLICATE)
		return proc_tx_error(w, rc, "refund request", r);
	snprintf(detail, sizeof(detail),
		 "cb%llu: %s payment %.128s of %s %s for an order %s (paid by %.128s); refund "
		 "requested",
		 row->id, row->channel, row->trade_no, row->amount, row->currency, o->status,
		 o->trade_no[0] ? o->trade_no : "-");
	if ((rc = proc_alert(w, row, reason, detail, r)) != DB_OK)
		return proc_tx_error(w, rc, "alert", r);
	return proc_mark_done(w, row, reason, r);
}

enum proc_tx
proc_pay(struct proc_worker *w, const struct msg_callback *m, struct proc_result *r)
{
	struct proc_row row;
	struct proc_order o;
	unsigned long long n = 0;
	const char *dead;
	char detail[400];
	enum proc_tx tx;
	enum db_rc rc;

	if (!proc_open(w, m, proc_pay_lock, &row, &o, r, &tx))
		return tx;
	if ((dead = proc_pay_check(&row, &o, detail, sizeof(detail))) != NULL)
		return proc_dead(w, &row, dead, detail, r);
	{
		struct db_in in[4] = {DBI_STR(row.channel), DBI_STR(row.trade_no),
				      DBI_STR(row.merchant), DBI_STR(row.order)};

		rc = db_exec(&w->db,
			     "UPDATE orders SET status = 'PAID', paid_at = NOW(3), channel = ?, "
			     "channel_trade_no = ? WHERE merchant_id = ? AND out_trade_no = ? AND "
			     "status = 'PENDING'",
			     in, 4, &n, NULL);
		if (rc != DB_OK)
			return proc_tx_error(w, rc, "update order", r);
	}
	if (n == 1) {
		snprintf(r->detail, sizeof(r->detail), "transition=PENDING>PAID");
		if ((rc = proc_outbox_add(w, &row, "order.paid.shipment", row.amount, row.currency,
					  row.trade_no, r)) != DB_OK ||
		    (rc = proc_outbox_add(w, &row, "order.paid.points", row.amount, row.currency,
					  row.trade_no, r)) != DB_OK)
			return proc_tx_error(w, rc, "outbox", r);
		return proc_mark_done(w, &row, "paid", r);
	}
	snprintf(r->detail, sizeof(r->detail), "order_status=%s", o.status);
	if (strcmp(o.status, "PAID") == 0 || strcmp(o.status, "REFUNDING") == 0 ||
	    strcmp(o.status, "REFUNDED") == 0) {
		/* The same payment told again (a refund since changes nothing about it). */
		if (strcmp(o.trade_no, row.trade_no) == 0 && strcmp(o.channel, row.channel) == 0)
			return proc_mark_done(w, &row, "duplicate", r);
		return proc_pay_refund_request(w, &row, &o, "paid_twice", r);
	}
	if (strcmp(o.status, "CLOSED") == 0)
		return proc_pay_refund_request(w, &row, &o, "paid_after_close", r);
	snprintf(r->reason, sizeof(r->reason), "order is %s", o.status);
	proc_rollback(&w->db);
	return TX_RETRY;
}
