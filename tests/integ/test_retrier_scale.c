/*
 * test_retrier_scale - the sweep with 1,000,000 rows in the payment log: the due-row query
 * the retrier runs reads idx_retry as a range in index order (no filesort, no full scan), the
 * dead-letter query reads idx_dlq, the probe that starts every cycle scans no table, and one
 * cycle over a full batch stays fast. The rows are
 * generated with INSERT ... SELECT from MariaDB's sequence engine, in batches, and dropped
 * with the test database; tools/bench_sweep.sh prints the same figures for 10,000 and
 * 1,000,000 rows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "metrics.h"
#include "retrier.h"

#define NROWS 1000000
#define BATCH 50000

static struct conf cf;
static struct db tdb;

static void
plan_of(const char *sql, char *plan, size_t len)
{
	static char explain[4][1024];
	static int used;
	struct db_out out[1] = {DBO_STR(plan, (unsigned long)len)};
	struct db_in in[1] = {DBI_I64(500)};
	char *e = explain[used++ % 4];

	/* Each EXPLAIN text gets its own static buffer: the statement cache keys on it. */
	snprintf(e, sizeof(explain[0]), "EXPLAIN FORMAT=JSON %s", sql);
	assert_int_equal(db_query(&tdb, e, in, strstr(sql, "?") ? 1 : 0, out, 1, NULL, NULL, NULL),
	                 DB_OK);
}

/*
 * rows_in - how many generated rows of seq first..last are stored; -1 on error. The trade
 * numbers are zero-padded, so a batch is one range of the unique key.
 */
static long long
rows_in(long long first, long long last)
{
	char lo[16], hi[16];
	struct db_in in[2] = {DBI_STR(lo), DBI_STR(hi)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long n = 0;

	snprintf(lo, sizeof(lo), "s%07lld", first);
	snprintf(hi, sizeof(hi), "s%07lld", last);
	if (db_query(&tdb,
	             "SELECT COUNT(*) FROM pay_callback_log WHERE merchant_id = 'm1' AND channel = "
	             "'wxpay' AND channel_trade_no BETWEEN ? AND ?",
	             in, 2, out, 1, NULL, NULL, &n) != DB_OK ||
	    n == 0)
		return -1;
	return out[0].i;
}

/*
 * generate - the million rows, BATCH at a time. A batch that fails with a retryable error
 * (the server busy under the sanitizer build, a connection lost) may still have committed:
 * it is counted, and run again only if none of it is there (one statement is atomic).
 */
static void
generate(void)
{
	for (long long first = 1; first <= NROWS; first += BATCH) {
		long long last = first + BATCH - 1;
		struct db_in in[2] = {DBI_I64(first), DBI_I64(last)};
		int tries = 0;
		enum db_rc rc;

		/* 99% done, 0.5% pending and due (the backlog after an outage), 0.5% dead. */
		while (
		    (rc = db_exec(
		         &tdb,
		         "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, "
		         "out_trade_no, amount, currency, body_sha256, status, retry_count, "
		         "next_retry_at, done_at, dead_reason, dlq_sent_at) SELECT 'm1', 'wxpay', "
		         "CONCAT('s', LPAD(seq, 7, '0')), CONCAT('o', seq % 50000), '10.00', "
		         "'CNY', "
		         "REPEAT('0', 64), CASE WHEN seq % 200 = 0 THEN 0 WHEN seq % 200 = 1 THEN "
		         "2 "
		         "ELSE 1 END, IF(seq % 200 = 0, 1, 9), NOW(3) - INTERVAL (seq % 86000) "
		         "SECOND, IF(seq % 200 > 1, NOW(3) - INTERVAL (seq % 3600) SECOND, NULL), "
		         "IF(seq % 200 = 1, 'ladder_exhausted', NULL), IF(seq % 200 = 1, NOW(3), "
		         "NULL) FROM seq_1_to_1000000 WHERE seq BETWEEN ? AND ?",
		         in, 2, NULL, NULL)) == DB_RETRYABLE &&
		    ++tries < 5) {
			printf("# batch %lld..%lld: %s, %s\n", first, last, db_rc_name(rc),
			       tdb.last_error);
			assert_int_equal(db_ensure(&tdb), DB_OK);
			long long have = rows_in(first, last);
			if (have == BATCH) {
				rc = DB_OK;
				break;
			}
			assert_int_equal(have, 0);
		}
		assert_int_equal(rc, DB_OK);
	}
}

static void
sweep_uses_idx_retry_with_a_million_rows(void **state)
{
	char plan[16384];
	long long t0;

	(void)state;
	t0 = harness_now_ms();
	generate();
	printf("# %d rows generated in %lld ms\n", NROWS, harness_now_ms() - t0);
	assert_int_equal(harness_count(&tdb, "SELECT COUNT(*) FROM pay_callback_log"), NROWS);
	for (int lg = 0; lg < CBLOG_N; lg++) {
		plan_of(retrier_sql_due[lg], plan, sizeof(plan));
		printf("# sweep plan (%s): %s\n", lg ? "refund" : "pay",
		       strstr(plan, "\"key\": \"idx_retry\"") ? "range on idx_retry, no filesort"
		                                              : plan);
		assert_non_null(strstr(plan, "\"key\": \"idx_retry\""));
		assert_non_null(strstr(plan, "\"access_type\": \"range\""));
		assert_null(strstr(plan, "filesort"));
	}
	/* The dead-letter sweep must not read the sent dead rows: idx_dlq. */
	plan_of(
	    "SELECT id FROM pay_callback_log WHERE status = 2 AND dlq_sent_at IS NULL AND "
	    "next_retry_at <= NOW(3) AND dead_reason IS NOT NULL ORDER BY next_retry_at LIMIT ?",
	    plan, sizeof(plan));
	assert_non_null(strstr(plan, "\"key\": \"idx_dlq\""));
	assert_null(strstr(plan, "filesort"));
}

/*
 * probe_reads_indexes_with_a_million_rows - the probe that starts every cycle (one UNION ALL
 * for both logs and the outbox) reads only index ranges: no part of it scans a table, and its
 * counts and flags are right.
 */
static void
probe_reads_indexes_with_a_million_rows(void **state)
{
	static char explain[8192];
	const struct conf_retrier *rt = &cf.retrier;
	struct retrier_probe p;
	struct retrier *r = NULL;
	char plan[32768], err[256];
	struct db_in in[11];
	struct db_out out[1] = {DBO_STR(plan, sizeof(plan))};
	long long t0;
	int n = 0;

	(void)state;
	for (int lg = 0; lg < CBLOG_N; lg++) {
		in[n++] = DBI_I64(rt->max_republish);
		in[n++] = DBI_I64(rt->stuck_after_s);
		in[n++] = DBI_I64(retrier_old_after_s(&cf));
		in[n++] = DBI_STR("1000-01-01 00:00:00.000");
		in[n++] = DBI_I64(rt->purge_after_s);
	}
	in[n++] = DBI_I64(rt->outbox_after_s);
	snprintf(explain, sizeof(explain), "EXPLAIN FORMAT=JSON %s", retrier_sql_probe);
	assert_int_equal(db_query(&tdb, explain, in, n, out, 1, NULL, NULL, NULL), DB_OK);
	printf("# probe plan: %s, %s\n",
	       strstr(plan, "\"access_type\": \"ALL\"") ? "a FULL SCAN" : "no full scan",
	       strstr(plan, "filesort") ? "a filesort (the pending rows grouped by step)"
	                                : "no filesort");
	/* The GROUP BY retry_count of the pending rows (the per-step gauges) sorts those rows,
	 * as the gauge query it replaced did; no part reads more than its index range. */
	assert_null(strstr(plan, "\"access_type\": \"ALL\""));
	assert_non_null(strstr(plan, "\"key\": \"idx_retry\""));
	assert_non_null(strstr(plan, "\"key\": \"idx_dlq\""));
	assert_non_null(strstr(plan, "\"key\": \"idx_done\""));
	assert_non_null(strstr(plan, "\"key\": \"idx_unsent\""));
	assert_int_equal(retrier_open(&cf, &r, err, sizeof(err)), 0);
	assert_int_equal(retrier_probe(r, &p), 0);
	t0 = harness_now_ms();
	assert_int_equal(retrier_probe(r, &p), 0);
	printf("# probe with %d rows (%lld pending): %lld ms\n", NROWS, p.pending[CBLOG_PAY][1],
	       harness_now_ms() - t0);
	assert_int_equal(p.pending[CBLOG_PAY][1], NROWS / 200);
	assert_int_equal(p.dead[CBLOG_PAY], NROWS / 200);
	assert_int_equal(p.unsent[CBLOG_PAY], 0);
	assert_true(p.due[CBLOG_PAY]);
	assert_false(p.due[CBLOG_REFUND]);
	assert_false(p.dlq[CBLOG_PAY]);
	assert_false(p.purge[CBLOG_PAY]);
	retrier_close(r);
}

static void
one_cycle_over_a_full_batch_is_fast(void **state)
{
	struct retrier *r = NULL;
	char err[256];
	long long t0, ms, warm;
	int more = 0;

	(void)state;
	assert_int_equal(retrier_open(&cf, &r, err, sizeof(err)), 0);
	/* The first publish to each topic waits for its metadata; measure the second cycle. */
	t0 = harness_now_ms();
	assert_int_equal(retrier_cycle(r, &more), 0);
	warm = harness_now_ms() - t0;
	assert_int_equal(r->last.republished, 500);
	t0 = harness_now_ms();
	assert_int_equal(retrier_cycle(r, &more), 0);
	ms = harness_now_ms() - t0;
	printf(
	    "# cycle over %lld due rows with %d rows in the log: %lld ms (first cycle %lld ms)\n",
	    r->last.due, NROWS, ms, warm);
	assert_int_equal(r->last.due, 500);
	assert_int_equal(r->last.republished, 500);
	assert_int_equal(more, 1);
	/* Generous: 500 leases and 500 confirmed publishes take a few hundred ms here. */
	assert_true(ms < 10000);
	retrier_close(r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(sweep_uses_idx_retry_with_a_million_rows),
	    cmocka_unit_test(probe_reads_indexes_with_a_million_rows),
	    cmocka_unit_test(one_cycle_over_a_full_batch_is_fast),
	};
	int rc;

	if (harness_setup(&cf, "rscale", "1 2 3") != 0)
		return 1;
	cf.retrier.batch = 500;
	cf.retry.lease_margin_s = 600;
	/* The generating connection waits as long as a batch may take on a busy machine. */
	long long rt = cf.db.read_timeout_s, wt = cf.db.write_timeout_s;
	cf.db.read_timeout_s = cf.db.write_timeout_s = 600;
	harness_db(&cf, &tdb);
	cf.db.read_timeout_s = rt;
	cf.db.write_timeout_s = wt;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	metrics_free();
	harness_teardown(&cf);
	return rc;
}
