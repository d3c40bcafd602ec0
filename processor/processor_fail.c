/*
 * processor_fail - how a transaction ends other than by applying its effect: the mapping of
 * database errors, the final "done" mark, dead rows with their alert and dead letter, and
 * the record of a retryable failure.
 *
 * A retryable failure is recorded outside the rolled-back transaction, on the row itself:
 * retry_count + 1, last_error, and next_retry_at = now, so the row is due at once and the
 * retrier (the one scheduler) republishes it on the next step's delay topic; a second copy
 * of the same attempt does not count again, nor does a stale attempt queued before a replay
 * reset the row's count. A dead row never comes back by itself; the transaction that makes
 * it dead marks it for its dead letter, which the retrier's dead-letter sweep publishes
 * (at least once; the row id identifies duplicates), so the processor never waits for the
 * dead-letter topic.
 */
#include "processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "money.h"

/* The statements on a row of either callback log, indexed by its enum cblog. */
#define MARK_DONE_SQL(T)                                                                           \
	"UPDATE " T " SET status = 1, outcome = ?, done_at = NOW(3) WHERE id = ? AND status = 0"
#define MARK_DEAD_SQL(T)                                                                           \
	"UPDATE " T " SET status = 2, outcome = ?, last_error = ?, done_at = NOW(3), "             \
	"dead_at = NOW(3), dead_reason = ?, dlq_sent_at = NULL, next_retry_at = NOW(3) "           \
	"WHERE id = ? AND status = 0"
#define COUNT_FAILURE_SQL(T)                                                                       \
	"UPDATE " T " SET retry_count = retry_count + 1, republish_count = 0, last_error = ?, "    \
	"next_retry_at = NOW(3) WHERE id = ? AND status = 0 AND retry_count = ? - 1"
#define RETRY_COUNT_SQL(T) "SELECT retry_count FROM " T " WHERE id = ?"

static const char *const SQL_MARK_DONE[CBLOG_N] = CBLOG_SQL(MARK_DONE_SQL);
static const char *const SQL_MARK_DEAD[CBLOG_N] = CBLOG_SQL(MARK_DEAD_SQL);
static const char *const SQL_COUNT_FAILURE[CBLOG_N] = CBLOG_SQL(COUNT_FAILURE_SQL);
static const char *const SQL_RETRY_COUNT[CBLOG_N] = CBLOG_SQL(RETRY_COUNT_SQL);

int
proc_amount_parse(const char *s, long long *minor)
{
	int64_t v;
	char err[128];

	/* DECIMAL(18,2) columns come back as exact decimal text with two fraction digits. */
	if (money_parse_decimal(s, 2, &v, err, sizeof(err)) != 0)
		return -1;
	*minor = (long long)v;
	return 0;
}

void
proc_rollback(struct db *db)
{
	/* A lost connection rolled back on the server already; reconnecting here would only
	 * stall the worker while the database is away. */
	if (!db->broken)
		db_rollback(db);
}

enum db_rc
proc_begin(struct proc_worker *w)
{
	return w->batching ? DB_OK : db_begin(&w->db);
}

enum db_rc
proc_commit(struct proc_worker *w)
{
	return w->batching ? DB_OK : db_commit(&w->db);
}

/*
 * proc_tx_error - ends a transaction after statement `what` failed with rc. A lost
 * connection means the outcome is unknown or rolled back: redeliver. Deadlocks, lock wait
 * timeouts and anything else (a bug, a schema mismatch) roll back and count as a retryable
 * failure, so they go through the ladder and end dead and visible, never in a hot loop.
 */
enum proc_tx
proc_tx_error(struct proc_worker *w, enum db_rc rc, const char *what, struct proc_result *r)
{
	snprintf(r->reason, sizeof(r->reason), "%s: %s: %s", what, db_rc_name(rc),
	         w->db.last_error);
	if (w->db.broken)
		return TX_DB_DOWN;
	proc_rollback(&w->db);
	return w->db.broken ? TX_DB_DOWN : TX_RETRY;
}

/* proc_tx_retry - ends a transaction as a retryable failure for reason */
enum proc_tx
proc_tx_retry(struct proc_worker *w, const char *reason, struct proc_result *r)
{
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	proc_rollback(&w->db);
	return TX_RETRY;
}

enum db_rc
proc_alert_insert(struct proc_worker *w, unsigned long long callback_id, const char *merchant,
                  const char *order, const char *kind, const char *detail)
{
	struct db_in in[5] = {DBI_STR(kind), DBI_I64(callback_id), DBI_STR(merchant),
	                      DBI_STR(order), DBI_STR(detail)};

	return db_exec(&w->db,
	               "INSERT INTO alerts (kind, callback_id, merchant_id, out_trade_no, detail) "
	               "VALUES (?, ?, ?, ?, ?)",
	               in, 5, NULL, NULL);
}

enum db_rc
proc_alert(struct proc_worker *w, const struct proc_row *row, const char *kind, const char *detail,
           struct proc_result *r)
{
	enum db_rc rc;

	rc = proc_alert_insert(w, row->id, row->merchant, row->order, kind, detail);
	if (rc == DB_OK) {
		r->alert_kind = kind;
		snprintf(r->alert_detail, sizeof(r->alert_detail), "%s", detail);
	}
	return rc;
}

/* proc_row_final - the row's final UPDATE: 1 when it changed the row, else 0 with *tx set */
static int
proc_row_final(struct proc_worker *w, const char *sql, const struct db_in *in, int nin,
               const char *what, struct proc_result *r, enum proc_tx *tx)
{
	unsigned long long n = 0;
	enum db_rc rc;

	if ((rc = db_exec(&w->db, sql, in, nin, &n, NULL)) != DB_OK) {
		*tx = proc_tx_error(w, rc, what, r);
		return 0;
	}
	if (n != 1) {
		/* Someone else finished the row first; nothing of ours may commit. */
		proc_rollback(&w->db);
		*tx = TX_FINAL;
		return 0;
	}
	return 1;
}

/* proc_tx_commit - commits the transaction a final UPDATE ended */
enum proc_tx
proc_tx_commit(struct proc_worker *w, struct proc_result *r)
{
	enum db_rc rc;

	if ((rc = proc_commit(w)) != DB_OK)
		return proc_tx_error(w, rc, "commit", r);
	return TX_COMMITTED;
}

enum proc_tx
proc_mark_done(struct proc_worker *w, const struct proc_row *row, const char *outcome,
               struct proc_result *r)
{
	struct db_in in[2] = {DBI_STR(outcome), DBI_I64(row->id)};
	enum proc_tx tx;

	r->outcome = outcome;
	if (!proc_row_final(w, SQL_MARK_DONE[row->cblog], in, 2, "mark done", r, &tx))
		return tx;
	return proc_tx_commit(w, r);
}

/*
 * proc_dead - makes the locked row dead (2) with its alert, and commits. The dead letter is
 * not published here: the row is marked for it (dead_reason, dlq_sent_at NULL, due now)
 * and the retrier's dead-letter sweep publishes it and records dlq_sent_at after the
 * delivery report, as for rows whose ladder ran out. So a dead-letter topic that cannot be
 * written (missing, no permission, broker down) never holds this partition, and paycbctl
 * dead shows each dead letter's true sent state. A dead row is never self-healed: an
 * operator looks at the alert.
 */
enum proc_tx
proc_dead(struct proc_worker *w, const struct proc_row *row, const char *reason, const char *detail,
          struct proc_result *r)
{
	struct db_in in[4] = {DBI_STR(reason), DBI_STR(detail), DBI_STR(reason), DBI_I64(row->id)};
	enum proc_tx tx;
	enum db_rc rc;

	r->outcome = "dead";
	snprintf(r->reason, sizeof(r->reason), "%s", reason);
	if (!proc_row_final(w, SQL_MARK_DEAD[row->cblog], in, 4, "mark dead", r, &tx))
		return tx;
	if ((rc = proc_alert(w, row, reason, detail, r)) != DB_OK)
		return proc_tx_error(w, rc, "alert", r);
	return proc_tx_commit(w, r);
}

enum db_rc
proc_record_failure(struct proc_worker *w, enum cblog lg, unsigned long long id, int attempt,
                    const char *reason, struct proc_result *r, int *counted)
{
	struct db_in in[3] = {DBI_STR(reason), DBI_I64(id), DBI_I64(attempt)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0, changed = 0;
	enum db_rc rc;

	/*
	 * Attempt a is published while retry_count is a - 1, and only that attempt's failure
	 * counts. A row whose count has reached a had this attempt's failure recorded by
	 * another copy of the message (the retrier republished the row when its lease ran out
	 * while the first copy waited in a backlog); counting it again would run the row through
	 * the ladder at the speed of the backlog. A row whose count is below a - 1 was reset by
	 * a replay after this copy was queued: it is a stale attempt of the old ladder and must
	 * not spend a step of the new one. Either way the row's next_retry_at already brings
	 * the next attempt. Progress sets republish_count back to 0 (the retrier counts its
	 * republishes per attempt).
	 */
	rc = db_exec(&w->db, SQL_COUNT_FAILURE[lg], in, 3, &changed, NULL);
	if (rc != DB_OK) {
		proc_rollback(&w->db);
		return rc;
	}
	*counted = changed == 1;
	/* For the log line only: the count the retrier will schedule by. */
	if (db_query(&w->db, SQL_RETRY_COUNT[lg], in + 1, 1, out, 1, NULL, NULL, &rows) == DB_OK &&
	    rows)
		r->retry_count = (int)out[0].i;
	/* The worker's connection runs with autocommit off (processor_core.c). */
	if ((rc = db_commit(&w->db)) != DB_OK)
		proc_rollback(&w->db);
	return rc;
}
