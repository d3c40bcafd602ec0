/*
 * orders - the steps and questions of the processor's edge-case tests (see orders.h).
 */
#include "orders.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "fixtures.h"
#include "harness.h"
#include "inproc.h"
#include "processor.h"

static struct db *ord_db;
static const struct conf *ord_cf;
static struct proc *ord_proc;

static int
ord_setup(void **state)
{
	(void)state;
	return proc_open(ord_cf, &ord_proc) == 0 ? 0 : -1;
}

static int
ord_teardown(void **state)
{
	(void)state;
	return proc_close(ord_proc) == 0 ? 0 : -1;
}

/* ord_apply - the row's message applied in-process; the row must then have status want. */
static void
ord_apply(int refund, unsigned long long id, const char *channel, const char *order, int want)
{
	const char *outcome = NULL;

	assert_true(id > 0);
	assert_int_equal(inproc_apply(ord_proc, refund, id, ORD_M, channel, order, 1, &outcome),
	                 PROC_DONE);
	assert_non_null(outcome);
	assert_int_equal(inproc_row_status(ord_db, refund, id), want);
}

int
ord_run(const char *tag, struct conf *cf, struct db *db, const struct CMUnitTest *tests, size_t n)
{
	int rc;

	if (fx_processor_conf(cf, tag, NULL, 2) != 0)
		return 1;
	harness_db(cf, db);
	ord_db = db;
	ord_cf = cf;
	rc = _cmocka_run_group_tests(tag, tests, n, ord_setup, ord_teardown);
	db_close(db);
	harness_teardown(cf);
	return rc;
}

unsigned long long
ord_pay(const char *channel, const char *order, const char *trade, const char *amount,
        const char *currency)
{
	unsigned long long id =
	    fx_pay_row(ord_db, ord_cf, ORD_M, channel, trade, order, amount, currency);

	ord_apply(0, id, channel, order, 1);
	return id;
}

unsigned long long
ord_refund_to(int want, const char *channel, const char *order, const char *refund_no,
              const char *pay_trade, const char *amount, int cumulative, const char *currency,
              const char *type, const char *status)
{
	unsigned long long id =
	    fx_refund_row_status(ord_db, ord_cf, ORD_M, channel, refund_no, pay_trade, order,
	                         amount, cumulative, currency, type, status);

	ord_apply(1, id, channel, order, want);
	return id;
}

unsigned long long
ord_refund(const char *channel, const char *order, const char *refund_no, const char *pay_trade,
           const char *amount, int cumulative, const char *currency, const char *type,
           const char *status)
{
	return ord_refund_to(1, channel, order, refund_no, pay_trade, amount, cumulative, currency,
	                     type, status);
}

long long
ord_q1(const char *sql, const char *s)
{
	struct db_in in[1] = {DBI_STR(s)};

	return harness_query_i64(ord_db, sql, in, 1);
}

const char *
ord_qs(const char *sql, const char *s, char *buf, size_t cap)
{
	struct db_in in[1] = {DBI_STR(s)};
	struct db_out out[1] = {DBO_STR(buf, cap)};
	unsigned long long rows = 0;

	if (db_query(ord_db, sql, in, 1, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0)
		buf[0] = '\0';
	return buf;
}

const char *
ord_outcome(int refund, unsigned long long id, char *buf, size_t cap)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[1] = {DBO_STR(buf, cap)};
	unsigned long long rows = 0;

	if (db_query(ord_db,
	             refund ? "SELECT IFNULL(outcome, '') FROM refund_callback_log WHERE id = ?"
	                    : "SELECT IFNULL(outcome, '') FROM pay_callback_log WHERE id = ?",
	             in, 1, out, 1, NULL, NULL, &rows) != DB_OK ||
	    rows == 0)
		buf[0] = '\0';
	return buf;
}

const char *
ord_status(const char *order, char *buf, size_t cap)
{
	return ord_qs("SELECT status FROM orders WHERE out_trade_no = ?", order, buf, cap);
}

const char *
ord_refunded(const char *order, char *buf, size_t cap)
{
	return ord_qs("SELECT CAST(refunded_amount AS CHAR) FROM orders WHERE out_trade_no = ?",
	              order, buf, cap);
}

long long
ord_events(const char *order, const char *type)
{
	struct db_in in[2] = {DBI_STR(order), DBI_STR(type)};

	return harness_query_i64(ord_db,
	                         "SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                         "event_type = ?",
	                         in, 2);
}

long long
ord_event_with(const char *event_id, const char *amount)
{
	struct db_in in[2] = {DBI_STR(event_id), DBI_STR(amount)};

	return harness_query_i64(ord_db,
	                         "SELECT COUNT(*) FROM order_events WHERE event_id = ? AND "
	                         "JSON_VALUE(payload, '$.amount') = ?",
	                         in, 2);
}

long long
ord_alerts(const char *order, const char *kind)
{
	struct db_in in[2] = {DBI_STR(order), DBI_STR(kind)};

	return harness_query_i64(
	    ord_db, "SELECT COUNT(*) FROM alerts WHERE out_trade_no = ? AND kind = ?", in, 2);
}

long long
ord_ledger_mismatches(const char *prefix)
{
	/* refunded_amount is the ledger's total: max(applied singles, cumulative - failed). */
	return ord_q1("SELECT COUNT(*) FROM orders o WHERE o.out_trade_no LIKE CONCAT(?, '%') AND "
	              "o.refunded_amount <> (SELECT GREATEST(IFNULL(SUM(IF(r.kind = 'single' AND "
	              "r.state = 'APPLIED', r.amount, 0)), 0), GREATEST(IFNULL(MAX(IF(r.kind = "
	              "'cumulative', r.amount, 0)), 0) - IFNULL(SUM(IF(r.kind = 'single' AND "
	              "r.state <> 'APPLIED', r.amount, 0)), 0), 0)) FROM order_refunds r WHERE "
	              "r.merchant_id = o.merchant_id AND r.out_trade_no = o.out_trade_no)",
	              prefix);
}

long long
ord_refunds_pending(const char *prefix)
{
	return ord_q1("SELECT COUNT(*) FROM refund_callback_log WHERE out_trade_no LIKE "
	              "CONCAT(?, '%') AND status = 0",
	              prefix);
}

long long
ord_worker_statements(void)
{
	struct db *wdb = &ord_proc->workers[0].db;
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	/*
	 * The worker's own session: every statement of a transaction is one prepared statement
	 * executed (COMMIT and ROLLBACK included), so the count is its round trips, and no
	 * other connection (the relay's, the test's) is in it. The worker runs with autocommit
	 * off, so the read is committed at once: the next transaction must find none open.
	 */
	if (db_query(wdb,
	             "SELECT CAST(VARIABLE_VALUE AS SIGNED) FROM information_schema.SESSION_STATUS "
	             "WHERE VARIABLE_NAME = 'COM_STMT_EXECUTE'",
	             NULL, 0, out, 1, NULL, NULL, &rows) != DB_OK ||
	    rows != 1 || db_commit(wdb) != DB_OK)
		return -1;
	return out[0].i;
}

struct proc *
ord_processor(void)
{
	return ord_proc;
}
