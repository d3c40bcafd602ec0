/*
 * processor_open - the opening of a payment's or a refund's transaction: the locking read of
 * the callback row and its order (proc_lock), the checks that the row is this message's and
 * still pending, and the per-order ordering guard (proc_guard), which may defer the row
 * instead. proc_pay (processor_pay.c) and proc_refund (processor_refund.c) both begin with
 * proc_tx_open; proc_handle (processor_handle.c) calls them, so the opening lives below all
 * three and none of them calls back up.
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"

/*
 * A deferred row comes due again in a second; the retrier publishes it on the main topic.
 * The processor saw it, so its republishes start counting again (republish_count).
 */
static const char *const SQL_DEFER[CBLOG_N] = {
    "UPDATE pay_callback_log SET next_retry_at = NOW(3) + INTERVAL 1 SECOND, republish_count "
    "= 0 WHERE id = ? AND status = 0 AND retry_count = 0",
    "UPDATE refund_callback_log SET next_retry_at = NOW(3) + INTERVAL 1 SECOND, "
    "republish_count = 0 WHERE id = ? AND status = 0 AND retry_count = 0"};

/*
 * The opening read of a transaction: the callback row and its order locked FOR UPDATE in
 * one statement, with what the ordering guard needs (proc_guard, below). One
 * round trip where there were three (an unlocked look at the row, then the row's lock, then
 * the order's). The row is a const table (its primary key) and the order one too (its
 * unique key, bound by the row's columns), so the server reads and locks the row first and
 * then the order: the lock order every transaction keeps. A missing row locks nothing; a
 * missing order leaves its columns NULL (o.id 0: the decision table makes it a retry).
 *
 * The guard's count of earlier pending callbacks of the order is a subquery, a plain
 * (consistent) read that locks nothing: the earlier rows stay free for the processors that
 * hold them. Both counts are held to idx_order: left to itself the optimizer adds a rowid
 * filter from idx_retry, which reads every pending row and made the count cost as much as
 * the transaction under a backlog. "Earlier" is by reception time, ties by id within a
 * log; a refund also waits for the earlier payments of its order (strictly earlier: no
 * tie across the logs), a payment never for a refund (see proc_guard).
 *
 * The row's columns are the same for both tables so that one function reads either: a
 * payment row has no payment trade number, cumulative flag or refund status of its own, and
 * selects the empty values a zeroed proc_row holds for them.
 */
#define LOCK_EARLIER(T)                                                                            \
	"(SELECT COUNT(*) FROM " T " e FORCE INDEX (idx_order) WHERE "                             \
	"e.merchant_id = c.merchant_id AND e.out_trade_no = c.out_trade_no AND e.status = 0 AND "  \
	"(e.created_at < c.created_at OR (e.created_at = c.created_at AND e.id < c.id)))"
#define LOCK_EARLIER_PAY                                                                           \
	"(SELECT COUNT(*) FROM pay_callback_log e FORCE INDEX (idx_order) WHERE "                  \
	"e.merchant_id = c.merchant_id AND e.out_trade_no = c.out_trade_no AND e.status = 0 AND "  \
	"e.created_at < c.created_at)"
#define LOCK_TAIL(T, EARLIER)                                                                      \
	"c.status, c.retry_count, LEFT(DATE_FORMAT(c.created_at, '%Y-%m-%d %H:%i:%s.%f'), 23), "   \
	"LEFT(DATE_FORMAT(NOW(3), '%Y-%m-%d %H:%i:%s.%f'), 23), " EARLIER ", "                     \
	"TIMESTAMPDIFF(MICROSECOND, c.created_at, NOW(3)) DIV 1000, IFNULL(o.id, 0), "             \
	"IFNULL(CAST(o.amount AS CHAR), ''), IFNULL(o.currency, ''), IFNULL(o.status, ''), "       \
	"IFNULL(o.channel, ''), IFNULL(o.channel_trade_no, ''), "                                  \
	"IFNULL(CAST(o.refunded_amount AS CHAR), '') FROM " T " c LEFT JOIN orders o ON "          \
	"o.merchant_id = c.merchant_id AND o.out_trade_no = c.out_trade_no WHERE c.id = ? "        \
	"FOR UPDATE"
static const char *const proc_lock_sql[CBLOG_N] = {
    [CBLOG_PAY] = "SELECT c.merchant_id, c.channel, c.channel_trade_no, '', c.out_trade_no, "
                  "CAST(c.amount AS CHAR), 0, c.currency, '', " LOCK_TAIL(
                      CBLOG_TABLE_PAY, LOCK_EARLIER(CBLOG_TABLE_PAY)),
    [CBLOG_REFUND] =
        "SELECT c.merchant_id, c.channel, c.refund_no, c.channel_trade_no, "
        "c.out_trade_no, CAST(c.amount AS CHAR), c.amount_cumulative, c.currency, "
        "c.refund_status, " LOCK_TAIL(CBLOG_TABLE_REFUND,
                                      LOCK_EARLIER(CBLOG_TABLE_REFUND) " + " LOCK_EARLIER_PAY),
};

/* proc_lock - locks and reads callback row id of table lg and its order (o->id 0: none) */
static enum db_rc
proc_lock(struct proc_worker *w, enum cblog lg, unsigned long long id, struct proc_row *row,
          struct proc_order *o, unsigned long long *found)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[22] = {DBO_STR(row->merchant, sizeof(row->merchant)),
	                         DBO_STR(row->channel, sizeof(row->channel)),
	                         DBO_STR(row->trade_no, sizeof(row->trade_no)),
	                         DBO_STR(row->pay_trade_no, sizeof(row->pay_trade_no)),
	                         DBO_STR(row->order, sizeof(row->order)),
	                         DBO_STR(row->amount, sizeof(row->amount)),
	                         DBO_I64(),
	                         DBO_STR(row->currency, sizeof(row->currency)),
	                         DBO_STR(row->chan_status, sizeof(row->chan_status)),
	                         DBO_I64(),
	                         DBO_I64(),
	                         DBO_STR(row->created_at, sizeof(row->created_at)),
	                         DBO_STR(row->now, sizeof(row->now)),
	                         DBO_I64(),
	                         DBO_I64(),
	                         DBO_I64(),
	                         DBO_STR(o->amount, sizeof(o->amount)),
	                         DBO_STR(o->currency, sizeof(o->currency)),
	                         DBO_STR(o->status, sizeof(o->status)),
	                         DBO_STR(o->channel, sizeof(o->channel)),
	                         DBO_STR(o->trade_no, sizeof(o->trade_no)),
	                         DBO_STR(o->refunded, sizeof(o->refunded))};
	enum db_rc rc;

	memset(row, 0, sizeof(*row));
	memset(o, 0, sizeof(*o));
	row->cblog = lg;
	row->id = id;
	rc = db_query(&w->db, proc_lock_sql[lg], in, 1, out, 22, NULL, NULL, found);
	if (rc != DB_OK || *found == 0) {
		memset(o, 0, sizeof(*o));
		return rc;
	}
	row->cumulative = out[6].i != 0;
	row->status = out[9].i;
	row->retry_count = out[10].i;
	row->earlier = out[13].i;
	row->age_ms = out[14].i;
	o->id = (unsigned long long)out[15].i;
	return rc;
}

/*
 * proc_guard - the per-order ordering guard, on the row proc_tx_open has just locked.
 * Callbacks of one order are keyed to one partition, so they normally arrive here in the
 * order they came in. After partitions are added to the topic, a later callback of an order
 * can be published on a new partition while an earlier one still waits in the backlog of
 * the old one; a channel's re-push through another ingest, or a first publish that was lost,
 * can do the same; so can an earlier callback whose attempt failed and that waits on the
 * backoff ladder. A payment waits for the earlier pending payments of its order, attempted
 * or not: one that failed and waits on the ladder must still come first, or a second
 * payment overtakes the first and becomes the order's payment, and a refund the channel
 * made of that second payment then refunds the order instead of settling the duplicate. A
 * refund waits for the earlier pending payments and refunds of its order. A payment never
 * waits for a refund: a refund that came first waits for a payment (it fails "order not
 * paid" and retries), so the payment waiting for it would stall both until
 * processor.order_wait_s, and no payment's decision depends on a refund. Earlier is a strict
 * order, so two callbacks can never wait for each other.
 *
 * Such a first attempt is deferred rather than run: the row comes due again in a second and
 * the retrier publishes it again on the main topic, while its partition goes on flowing (a
 * hold would block the earlier callback when it sits behind this one in the same
 * partition). Nothing is counted as a failure. After processor.order_wait_s the callback
 * goes ahead anyway: the state machine is consistent in any order, but the order of effects
 * differs, and of two payments of one order the first applied is the order's payment. In a
 * batch, a row with an earlier pending callback ends the batch instead (rolled back), and is
 * judged again when handled alone.
 *
 * Returns 0 to go on, or 1 with *tx set when the transaction has ended: TX_DEFERRED
 * (deferred and committed; in a batch, rolled back so that the message is handled alone) or
 * a database error.
 */
static int
proc_guard(struct proc_worker *w, const struct msg_callback *m, const struct proc_row *row,
           struct proc_result *r, enum proc_tx *tx)
{
	long long wait_ms = w->p->cf->processor.order_wait_s * 1000;
	struct db_in in[1] = {DBI_I64(m->id)};
	unsigned long long changed = 0;
	char id[CBLOG_REF_MAX];
	enum db_rc rc;

	r->earlier = row->earlier;
	r->age_ms = row->age_ms;
	if (w->batching && row->earlier > 0) {
		proc_rollback(&w->db);
		*tx = TX_DEFERRED;
		return 1;
	}
	if (wait_ms == 0 || row->retry_count != 0 || row->earlier == 0)
		return 0;
	if (row->age_ms >= wait_ms) {
		log_warn(cblog_ref(id, sizeof(id), m->cblog, m->id),
		         "event=order_wait_expired order=%s merchant=%s earlier_pending=%lld "
		         "waited_ms=%lld",
		         r->order, r->merchant, row->earlier, row->age_ms);
		return 0;
	}
	if ((rc = db_exec(&w->db, SQL_DEFER[m->cblog], in, 1, &changed, NULL)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "defer", r);
		return 1;
	}
	/* The row is locked pending at its first attempt, so the UPDATE changes it; if it did
	 * not, the transaction decides, as it would have. */
	if (changed != 1)
		return 0;
	*tx = proc_tx_commit(w, r);
	if (*tx == TX_COMMITTED)
		*tx = TX_DEFERRED;
	return 1;
}

/* proc_tx_open - the opening proc_pay and proc_refund share (see processor.h) */
int
proc_tx_open(struct proc_worker *w, const struct msg_callback *m, struct proc_row *row,
             struct proc_order *o, struct proc_result *r, enum proc_tx *tx)
{
	unsigned long long found = 0;
	enum db_rc rc;
	int differs;

	if ((rc = proc_begin(w)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "begin", r);
		return 0;
	}
	if ((rc = proc_lock(w, m->cblog, m->id, row, o, &found)) != DB_OK) {
		*tx = proc_tx_error(w, rc, "lock row and order", r);
		return 0;
	}
	/* A row that is not this message's, or not pending, is never applied (processor_handle.c).
	 */
	differs = found && (strcmp(row->merchant, m->merchant_id) != 0 ||
	                    strcmp(row->order, m->out_trade_no) != 0);
	if (!found || differs || row->status != 0) {
		snprintf(r->row_merchant, sizeof(r->row_merchant), "%s", row->merchant);
		snprintf(r->row_order, sizeof(r->row_order), "%s", row->order);
		proc_rollback(&w->db);
		*tx = !found ? TX_MISSING : differs ? TX_MISMATCH : TX_FINAL;
		return 0;
	}
	snprintf(r->merchant, sizeof(r->merchant), "%s", row->merchant);
	snprintf(r->order, sizeof(r->order), "%s", row->order);
	/* The ordering guard may defer the row instead (it ends the transaction then). */
	return !proc_guard(w, m, row, r, tx);
}
