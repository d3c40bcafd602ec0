/*
 * processor_ledger - what the refund transaction reads and writes besides the order: the
 * refund ledger of the order's own payment (order_refunds) and the refund requests of
 * payments paycb gives back (refund_requests).
 *
 * Every writer of these rows holds the row lock of their order, taken FOR UPDATE after its
 * callback row's: the ledger and a payment's refund request belong to the order the
 * notification names, so all the transactions that change them are serialized on it. The
 * reads here are therefore plain reads, on purpose: a locking read of a key that is not
 * there takes a gap lock, and two transactions of neighbouring orders then deadlock on each
 * other's INSERT (seen under load). A plain read sees every commit made before the order
 * lock was granted: the transaction's read view is created by its first consistent read,
 * the ordering guard's count in the opening read (processor_pay.c), which the server
 * evaluates after it has read and locked that statement's row and order (its const
 * tables). test_processor_refunds checks it: a ledger row committed by the order lock's
 * holder while the opening read waited for it is seen by the read here (a consistent read
 * made before the opening read would not see it). Writes are single
 * INSERTs on unique keys and conditional UPDATEs judged by affected rows; a write that
 * finds the row changed returns DB_DUPLICATE, which the caller rolls back and retries.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "money.h"

/* proc_ledger_amount - parses a DECIMAL(18,2) text, naming the column on failure */
static enum db_rc
proc_ledger_amount(struct proc_worker *w, const char *text, const char *what, int64_t *out)
{
	long long v;

	if (proc_amount_parse(text, &v) != 0) {
		snprintf(w->db.last_error, sizeof(w->db.last_error), "unparsable %s", what);
		return DB_FATAL;
	}
	*out = (int64_t)v;
	return DB_OK;
}

/*
 * What the refund transaction measures, in one plain read: the ledger's sums for the order,
 * this refund number's entry (NULL columns when there is none), and how many order.refunded
 * events the order has (proc_refund names the next one by it). Until issue 21 these were
 * three statements, the count only when the order became refunded; now every ledger refund
 * counts (an index range of the order's few events, idx_order_unsent) and none pays a round
 * trip for it.
 */
static const char SQL_LEDGER_MEASURE[] =
    "SELECT s.singles, s.cum, s.failed, e.state, CAST(e.amount AS CHAR), (SELECT COUNT(*) "
    "FROM order_events v WHERE v.merchant_id = ? AND v.out_trade_no = ? AND v.event_type = "
    "'order.refunded') FROM (SELECT CAST(IFNULL(SUM(IF(kind = 'single' AND state = "
    "'APPLIED', amount, 0)), 0.00) AS CHAR) singles, CAST(IFNULL(MAX(IF(kind = "
    "'cumulative', amount, 0)), 0.00) AS CHAR) cum, CAST(IFNULL(SUM(IF(kind = 'single' AND "
    "state <> 'APPLIED', amount, 0)), 0.00) AS CHAR) failed FROM order_refunds WHERE "
    "merchant_id = ? AND out_trade_no = ?) s LEFT JOIN order_refunds e ON e.merchant_id = ? "
    "AND e.channel = ? AND e.refund_no = ?";

enum db_rc
proc_ledger_measure(struct proc_worker *w, const struct proc_row *row, const struct proc_order *o,
                    enum dec_note note, struct proc_ledger_view *v, enum dec_money *money)
{
	char singles[48], cum[48], failed[48], state[16], eamount[48];
	struct db_in in[7] = {DBI_STR(row->merchant), DBI_STR(row->order),
	                      DBI_STR(row->merchant), DBI_STR(row->order),
	                      DBI_STR(row->merchant), DBI_STR(row->channel),
	                      DBI_STR(row->trade_no)};
	struct db_out out[6] = {DBO_STR(singles, sizeof(singles)), DBO_STR(cum, sizeof(cum)),
	                        DBO_STR(failed, sizeof(failed)),   DBO_STR(state, sizeof(state)),
	                        DBO_STR(eamount, sizeof(eamount)), DBO_I64()};
	unsigned long long rows = 0;
	int found;
	enum db_rc rc;

	memset(v, 0, sizeof(*v));
	rc = db_query(&w->db, SQL_LEDGER_MEASURE, in, 7, out, 6, NULL, NULL, &rows);
	if (rc != DB_OK)
		return rc;
	if (rows != 1) {
		/* An aggregate without GROUP BY is always one row. */
		snprintf(w->db.last_error, sizeof(w->db.last_error), "ledger read %llu rows", rows);
		return DB_FATAL;
	}
	found = !out[3].is_null;
	v->refunded_events = out[5].i;
	v->entry = !found                           ? DE_NONE
	           : strcmp(state, "APPLIED") == 0  ? DE_APPLIED
	           : strcmp(state, "REVERSED") == 0 ? DE_REVERSED
	                                            : DE_FAILED;
	if ((rc = proc_ledger_amount(w, singles, "ledger sum", &v->now.singles)) != DB_OK ||
	    (rc = proc_ledger_amount(w, cum, "ledger total", &v->now.cumulative)) != DB_OK ||
	    (rc = proc_ledger_amount(w, failed, "ledger failures", &v->now.failed)) != DB_OK ||
	    (found &&
	     (rc = proc_ledger_amount(w, eamount, "ledger entry", &v->entry_amount)) != DB_OK) ||
	    (rc = proc_ledger_amount(w, row->amount, "refund amount", &v->amount)) != DB_OK ||
	    (rc = proc_ledger_amount(w, o->refunded, "refunded amount", &v->before)) != DB_OK ||
	    (rc = proc_ledger_amount(w, o->amount, "order amount", &v->paid)) != DB_OK)
		return rc;
	*money = dec_ledger_next(note, &v->now, v->entry, v->entry_amount, v->amount, v->before,
	                         v->paid, &v->after, &v->op);
	return DB_OK;
}

enum db_rc
proc_ledger_write(struct proc_worker *w, const struct proc_row *row,
                  const struct proc_ledger_view *v)
{
	const char *kind = v->op == DL_ADD_CUMULATIVE ? "cumulative" : "single";
	const char *state = v->op == DL_ADD_FAILED ? "FAILED" : "APPLIED";
	unsigned long long n = 0;
	enum db_rc rc;

	switch (v->op) {
	case DL_ADD_SINGLE:
	case DL_ADD_CUMULATIVE:
	case DL_ADD_FAILED: {
		struct db_in in[9] = {
		    DBI_STR(row->merchant),     DBI_STR(row->channel), DBI_STR(row->trade_no),
		    DBI_STR(row->order),        DBI_STR(row->amount),  DBI_I64(row->id),
		    DBI_STR(row->pay_trade_no), DBI_STR(kind),         DBI_STR(state)};

		/* The entry was read under the lock as absent; a duplicate here means another
		 * order holds this refund number, which the retry and the alert surface. */
		return db_exec(&w->db,
		               "INSERT INTO order_refunds (merchant_id, channel, refund_no, "
		               "out_trade_no, amount, callback_id, pay_trade_no, kind, state) "
		               "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		               in, 9, NULL, NULL);
	}
	case DL_REVERSE: {
		struct db_in in[4] = {DBI_I64(row->id), DBI_STR(row->merchant),
		                      DBI_STR(row->channel), DBI_STR(row->trade_no)};

		rc =
		    db_exec(&w->db,
		            "UPDATE order_refunds SET state = 'REVERSED', reversed_callback_id = ? "
		            "WHERE merchant_id = ? AND channel = ? AND refund_no = ? AND state = "
		            "'APPLIED'",
		            in, 4, &n, NULL);
		return rc != DB_OK ? rc : n == 1 ? DB_OK : DB_DUPLICATE;
	}
	default:
		return DB_OK;
	}
}

enum db_rc
proc_request_measure(struct proc_worker *w, const struct proc_row *row, struct proc_request *q,
                     enum dec_money *money)
{
	struct db_in in[3] = {DBI_STR(row->merchant), DBI_STR(row->channel),
	                      DBI_STR(row->pay_trade_no)};
	struct db_out out[4] = {DBO_I64(), DBO_STR(q->status, sizeof(q->status)),
	                        DBO_STR(q->amount, sizeof(q->amount)),
	                        DBO_STR(q->currency, sizeof(q->currency))};
	unsigned long long found = 0;
	int64_t want, got;
	enum db_rc rc;

	memset(q, 0, sizeof(*q));
	rc = db_query(&w->db,
	              "SELECT id, status, CAST(amount AS CHAR), currency FROM refund_requests "
	              "WHERE merchant_id = ? AND channel = ? AND channel_trade_no = ?",
	              in, 3, out, 4, NULL, NULL, &found);
	if (rc != DB_OK)
		return rc;
	if (!found) {
		*money = DM_REQ_NONE;
		return DB_OK;
	}
	q->id = (unsigned long long)out[0].i;
	if (strcmp(q->status, "DONE") == 0) {
		*money = DM_REQ_SETTLED;
		return DB_OK;
	}
	if ((rc = proc_ledger_amount(w, q->amount, "request amount", &want)) != DB_OK ||
	    (rc = proc_ledger_amount(w, row->amount, "refund amount", &got)) != DB_OK)
		return rc;
	*money =
	    want == got && strcmp(q->currency, row->currency) == 0 ? DM_REQ_MATCH : DM_REQ_DIFFERS;
	return DB_OK;
}

enum db_rc
proc_request_settle(struct proc_worker *w, const struct proc_row *row, const struct proc_request *q)
{
	struct db_in in[2] = {DBI_STR(row->trade_no), DBI_I64(q->id)};
	unsigned long long n = 0;
	enum db_rc rc;

	rc = db_exec(&w->db,
	             "UPDATE refund_requests SET status = 'DONE', refund_no = ?, settled_at = "
	             "NOW(3) WHERE id = ? AND status <> 'DONE'",
	             in, 2, &n, NULL);
	return rc != DB_OK ? rc : n == 1 ? DB_OK : DB_DUPLICATE;
}

enum db_rc
proc_request_record_early(struct proc_worker *w, const struct proc_row *row)
{
	struct db_in in[7] = {DBI_STR(row->merchant),     DBI_STR(row->channel),
	                      DBI_STR(row->pay_trade_no), DBI_STR(row->order),
	                      DBI_STR(row->amount),       DBI_STR(row->currency),
	                      DBI_STR(row->trade_no)};

	/*
	 * The refund came before its payment was processed. The request is recorded as
	 * settled, so the payment, when it comes, finds its money returned and requests
	 * nothing; the unique key on the trade makes its own INSERT a duplicate.
	 */
	return db_exec(&w->db,
	               "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
	               "out_trade_no, amount, currency, reason, status, refund_no, settled_at) "
	               "VALUES (?, ?, ?, ?, ?, ?, 'refunded_early', 'DONE', ?, NOW(3))",
	               in, 7, NULL, NULL);
}

enum db_rc
proc_request_reopen(struct proc_worker *w, const struct proc_request *q)
{
	struct db_in in[1] = {DBI_I64(q->id)};
	unsigned long long n = 0;
	enum db_rc rc;

	rc = db_exec(
	    &w->db, "UPDATE refund_requests SET status = 'FAILED' WHERE id = ? AND status = 'DONE'",
	    in, 1, &n, NULL);
	return rc != DB_OK ? rc : n == 1 ? DB_OK : DB_DUPLICATE;
}
