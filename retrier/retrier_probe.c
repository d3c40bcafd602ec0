/*
 * retrier_probe - one statement that says which of a cycle's sweeps have work, and carries
 * the retrier's gauges.
 *
 * An idle retrier used to run about 17 statements every retrier.sweep_interval_s (each
 * sweep's query whether or not anything was due, and the gauges' counts), and each is a
 * round trip and a wake-up of the retrier. The probe asks all of it at once, for both
 * callback logs and the outbox, as one prepared UNION ALL:
 *
 *   - pending rows per retry_count (the per-step and republish-storm gauges), and of them
 *     whether the earliest next_retry_at has passed (rows are due: the sweep runs), whether it
 *     passed more than retrier.stuck_after_s ago (rows are stuck: the alarm counts them) and
 *     whether the earliest created_at is older than the end-to-end threshold (rows may be
 *     old: the end-to-end check runs; replayed rows count from their replay, so this is
 *     only a necessary condition);
 *   - dead rows (gauge);
 *   - dead rows whose dead letter is unconfirmed (gauge), and whether one is due;
 *   - whether a done row's body is past retrier.purge_after_s beyond the purge cursor;
 *   - whether an outbox row is unsent for longer than retrier.outbox_after_s.
 *
 * Each condition is the one its sweep's own query uses (a superset for the outbox, whose
 * sweep also skips leased rows and rows waiting for an earlier event of their order), on the
 * same indexes (idx_retry, idx_dlq, idx_done, idx_unsent), and NOW(3) is one instant for
 * the whole statement, so a row that is due when the cycle starts is handled by that cycle,
 * as before; only the sweeps with nothing to do are skipped. The gauges are set from the
 * same rows, read when the cycle starts; a cycle that did work reads them again at its end
 * (retrier_daemon.c), so they show its effect as soon as before.
 */
#include <stdio.h>
#include <string.h>

#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

/*
 * One callback log's part: kind 0 rows are its pending rows per retry_count, kind 1 its dead
 * rows, kind 2 its unsent dead letters, kind 3 its purge. Columns: log, kind, retry_count,
 * count, republish storms, due, stuck, maybe old.
 */
#define PROBE_LOG_SQL(T, LG)                                                                       \
	"SELECT " LG ", 0, retry_count, COUNT(*), CAST(IFNULL(SUM(republish_count > ?), 0) AS "    \
	"SIGNED), MIN(next_retry_at) <= NOW(3), MIN(next_retry_at) < NOW(3) - INTERVAL ? "         \
	"SECOND, MIN(created_at) < NOW(3) - INTERVAL ? SECOND FROM " T " WHERE status = 0 "        \
	"GROUP BY retry_count UNION ALL SELECT " LG ", 1, 0, COUNT(*), 0, 0, 0, 0 FROM " T         \
	" WHERE status = 2 UNION ALL SELECT " LG ", 2, 0, COUNT(*), 0, IFNULL(MIN(next_retry_at) " \
	"<= NOW(3), 0), 0, 0 FROM " T " WHERE status = 2 AND dlq_sent_at IS NULL AND "             \
	"dead_reason IS NOT NULL UNION ALL SELECT " LG ", 3, 0, EXISTS (SELECT 1 FROM " T          \
	" WHERE status = 1 AND done_at > ? AND done_at < NOW(3) - INTERVAL ? SECOND), 0, 0, 0, 0"

/* The parameters each log's part takes, in order. */
#define PROBE_LOG_PARAMS 5

const char *const retrier_sql_probe =
    PROBE_LOG_SQL(CBLOG_TABLE_PAY, "0") " UNION ALL " PROBE_LOG_SQL(
        CBLOG_TABLE_REFUND,
        "1") " UNION ALL SELECT 0, 4, 0, EXISTS (SELECT 1 FROM order_events WHERE sent_at "
             "IS NULL AND created_at <= NOW(3) - INTERVAL ? SECOND), 0, 0, 0, 0";

static int
probe_collect(void *arg, struct db_out *o)
{
	struct retrier_probe *p = arg;
	long long lg = o[0].i, k = o[2].i;

	if (lg < 0 || lg >= CBLOG_N)
		return 0;
	switch (o[1].i) {
	case 0:
		/* Rows above n+1 (a shorter ladder than when they failed) are due to become
		 * dead. */
		if (k < 0)
			k = 0;
		if (k > p->last)
			k = p->last;
		p->pending[lg][k] += o[3].i;
		p->storms[lg] += o[4].i;
		p->due[lg] |= o[5].i != 0;
		p->stuck[lg] |= o[6].i != 0;
		p->old[lg] |= o[7].i != 0;
		break;
	case 1:
		p->dead[lg] = o[3].i;
		break;
	case 2:
		p->unsent[lg] = o[3].i;
		p->dlq[lg] = o[5].i != 0;
		break;
	case 3:
		p->purge[lg] = o[3].i != 0;
		break;
	case 4:
		p->outbox = o[3].i != 0;
		break;
	default:
		break;
	}
	return 0;
}

/* probe_gauges - the gauges the probe carries. */
static void
probe_gauges(const struct retrier_probe *p)
{
	for (int lg = 0; lg < CBLOG_N; lg++) {
		for (int k = 0; k <= p->last; k++)
			metrics_set(retrier_mx.pending[lg][k], p->pending[lg][k]);
		metrics_set(retrier_mx.storm_rows[lg], p->storms[lg]);
		metrics_set(retrier_mx.dead_rows[lg], p->dead[lg]);
		metrics_set(retrier_mx.dlq_unsent[lg], p->unsent[lg]);
	}
}

/* retrier_probe - runs the probe, fills *p and sets the gauges; 0, or -1 (logged). */
int
retrier_probe(struct retrier *r, struct retrier_probe *p)
{
	const struct conf_retrier *rt = &r->cf->retrier;
	long long old_after = retrier_old_after_s(r->cf);
	struct db_in in[PROBE_LOG_PARAMS * CBLOG_N + 1];
	struct db_out out[8];
	int n = 0;

	memset(p, 0, sizeof(*p));
	p->last = ladder_steps(&r->cf->retry) + 1;
	for (int lg = 0; lg < CBLOG_N; lg++) {
		in[n++] = DBI_I64(rt->max_republish);
		in[n++] = DBI_I64(rt->stuck_after_s);
		in[n++] = DBI_I64(old_after);
		in[n++] = DBI_STR(retrier_purge_cursor(r, (enum cblog)lg));
		in[n++] = DBI_I64(rt->purge_after_s);
	}
	in[n++] = DBI_I64(rt->outbox_after_s);
	for (int i = 0; i < 8; i++)
		out[i] = DBO_I64();
	if (db_query(&r->db, retrier_sql_probe, in, n, out, 8, probe_collect, p, NULL) != DB_OK) {
		log_warn(NULL, "event=probe_failed error=\"%s\"", r->db.last_error);
		return -1;
	}
	probe_gauges(p);
	return 0;
}

/* retrier_gauges - dead rows, unsent dead letters and pending rows per ladder step. */
int
retrier_gauges(struct retrier *r)
{
	struct retrier_probe p;

	return retrier_probe(r, &p);
}
