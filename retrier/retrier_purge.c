/*
 * retrier_purge - clears raw_body of done rows older than retrier.purge_after_s.
 *
 * Only done (1) rows lose their bodies: pending rows still need them, and dead rows keep
 * them for replay. The body hash, the parsed fields and the outcome stay.
 *
 * Work goes in batches of retrier.purge_batch rows along idx_done (status, done_at): a
 * covering read finds the done_at of the batch's last row, then one UPDATE clears the bodies
 * between the cursor and it. The cursor lives in memory and only moves forward, so a log with
 * millions of done rows whose bodies are long gone is not read again every sweep; after a
 * restart the first sweeps walk the old rows once, a batch at a time, within a time budget.
 * Rows that share a done_at are cleared by the same UPDATE, so the cursor always moves.
 */
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

/* How long one sweep may spend purging one log. */
#define PURGE_BUDGET_MS 200

#define SCAN_SQL(T)                                                                                \
	"SELECT IFNULL(CAST(MAX(done_at) AS CHAR), ''), COUNT(*) FROM (SELECT done_at FROM " T     \
	" WHERE status = 1 AND done_at > ? AND done_at < NOW(3) - INTERVAL ? SECOND "              \
	"ORDER BY done_at LIMIT ?) b"
#define CLEAR_SQL(T)                                                                               \
	"UPDATE " T " SET raw_body = NULL WHERE status = 1 AND done_at > ? AND done_at <= ? "      \
	"AND raw_body IS NOT NULL"

static const char *const sql_scan[CBLOG_N] = CBLOG_SQL(SCAN_SQL);
static const char *const sql_clear[CBLOG_N] = CBLOG_SQL(CLEAR_SQL);

const char *
retrier_purge_cursor(struct retrier *r, enum cblog lg)
{
	if (r->purge_cursor[lg][0] == '\0')
		snprintf(r->purge_cursor[lg], sizeof(r->purge_cursor[lg]),
		         "1000-01-01 00:00:00.000");
	return r->purge_cursor[lg];
}

/* retrier_purge - clears old done bodies of log lg, batch by batch, within the budget. */
int
retrier_purge(struct retrier *r, enum cblog lg, struct retrier_counts *c)
{
	long long end = clock_mono_ms() + PURGE_BUDGET_MS;
	char *cursor = r->purge_cursor[lg];
	char upto[32];

	retrier_purge_cursor(r, lg);
	while (clock_mono_ms() < end) {
		struct db_in in[3] = {DBI_STR(cursor), DBI_I64(r->cf->retrier.purge_after_s),
		                      DBI_I64(r->cf->retrier.purge_batch)};
		struct db_out out[2] = {DBO_STR(upto, sizeof(upto)), DBO_I64()};
		unsigned long long affected = 0;

		if (db_query(&r->db, sql_scan[lg], in, 3, out, 2, NULL, NULL, NULL) != DB_OK)
			goto fail;
		if (out[1].i == 0 || upto[0] == '\0')
			return 0;
		{
			struct db_in in2[2] = {DBI_STR(cursor), DBI_STR(upto)};

			if (db_exec(&r->db, sql_clear[lg], in2, 2, &affected, NULL) != DB_OK)
				goto fail;
		}
		if (affected) {
			c->purged += (long long)affected;
			metrics_inc(retrier_mx.purged, affected);
			log_info(NULL, "event=purged log=%s rows=%llu done_before=\"%s\"",
			         cblog_name(lg), affected, upto);
		}
		snprintf(cursor, sizeof(r->purge_cursor[lg]), "%s", upto);
		if (out[1].i < r->cf->retrier.purge_batch)
			return 0; /* reached the rows that are too young */
	}
	return 0;
fail:
	log_warn(NULL, "event=purge_failed log=%s error=\"%s\"", cblog_name(lg), r->db.last_error);
	return -1;
}
