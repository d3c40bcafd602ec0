/*
 * retrier_alarm - alerts, the stuck-row alarm and the retrier's gauges.
 *
 * A row is stuck when it is pending and has been due for longer than retrier.stuck_after_s:
 * a working retrier leases every due row within a sweep or two and pushes its next_retry_at
 * forward, so such a row means the retry machinery itself is broken (no retrier running, a
 * sweep failing, or a backlog larger than the retriers can carry). Age since creation would
 * be wrong: a healthy row walks the ladder for hours. The check runs first in every cycle, so
 * a retrier that starts after an outage reports what piled up before it leases it. The gauge
 * is set every cycle; an alert (alerts row, log line event=alert) is raised when the alarm
 * goes up and again every stuck_after_s while it stays up.
 */
#include <stdio.h>
#include <string.h>

#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

#define STUCK_SQL(T)                                                                               \
	"SELECT COUNT(*), IFNULL(TIMESTAMPDIFF(SECOND, MIN(next_retry_at), NOW(3)), 0) FROM " T    \
	" WHERE status = 0 AND next_retry_at < NOW(3) - INTERVAL ? SECOND"
#define DEAD_COUNT_SQL(T) "SELECT COUNT(*) FROM " T " WHERE status = 2"
#define UNSENT_COUNT_SQL(T)                                                                        \
	"SELECT COUNT(*) FROM " T " WHERE status = 2 AND dlq_sent_at IS NULL AND dead_reason "     \
	"IS NOT NULL"
#define STEPS_SQL(T) "SELECT retry_count, COUNT(*) FROM " T " WHERE status = 0 GROUP BY retry_count"

static const char *const sql_stuck[RLOG_N] = {STUCK_SQL("pay_callback_log"),
                                              STUCK_SQL("refund_callback_log")};
static const char *const sql_dead_count[RLOG_N] = {DEAD_COUNT_SQL("pay_callback_log"),
                                                   DEAD_COUNT_SQL("refund_callback_log")};
static const char *const sql_unsent_count[RLOG_N] = {UNSENT_COUNT_SQL("pay_callback_log"),
                                                     UNSENT_COUNT_SQL("refund_callback_log")};
static const char *const sql_steps[RLOG_N] = {STEPS_SQL("pay_callback_log"),
                                              STEPS_SQL("refund_callback_log")};

/* retrier_alert - writes one alerts row (the caller logs the event=alert line). */
int
retrier_alert(struct db *db, const char *kind, unsigned long long id, const char *merchant,
              const char *order, const char *detail)
{
	struct db_in in[5] = {DBI_STR(kind), id ? DBI_I64(id) : DBI_NULL,
	                      merchant ? DBI_STR(merchant) : DBI_NULL,
	                      order ? DBI_STR(order) : DBI_NULL, DBI_STR(detail)};

	return db_exec(db,
	               "INSERT INTO alerts (kind, callback_id, merchant_id, out_trade_no, detail) "
	               "VALUES (?, ?, ?, ?, ?)",
	               in, 5, NULL, NULL);
}

/* retrier_alarm_check - counts stuck rows, sets the gauges, raises the alarm. */
int
retrier_alarm_check(struct retrier *r, struct retrier_counts *c)
{
	long long total = 0, oldest = 0, now = retrier_now_ms();
	long long every_ms = r->cf->retrier.stuck_after_s * 1000;
	char detail[256];

	for (int lg = 0; lg < RLOG_N; lg++) {
		struct db_in in[1] = {DBI_I64(r->cf->retrier.stuck_after_s)};
		struct db_out out[2] = {DBO_I64(), DBO_I64()};

		if (db_query(&r->db, sql_stuck[lg], in, 1, out, 2, NULL, NULL, NULL) != DB_OK) {
			log_warn(NULL, "event=alarm_check_failed error=\"%s\"", r->db.last_error);
			return -1;
		}
		metrics_set(retrier_mx.stuck[lg], out[0].i);
		total += out[0].i;
		if (out[0].i && out[1].i > oldest)
			oldest = out[1].i;
	}
	metrics_set(retrier_mx.stuck_oldest_s, oldest);
	c->stuck = total;
	if (total == 0) {
		if (r->alarm_up)
			log_info(NULL, "event=alarm_cleared kind=stuck_rows");
		r->alarm_up = 0;
		return 0;
	}
	if (r->alarm_up && now - r->alarm_alert_ms < every_ms)
		return 0;
	snprintf(detail, sizeof(detail),
	         "%lld pending rows due for more than %llds (oldest overdue %llds): the retry "
	         "machinery is not keeping up",
	         total, r->cf->retrier.stuck_after_s, oldest);
	if (retrier_alert(&r->db, "stuck_rows", 0, NULL, NULL, detail) != DB_OK) {
		log_warn(NULL, "event=alert_failed kind=stuck_rows error=\"%s\"", r->db.last_error);
		return -1;
	}
	r->alarm_up = 1;
	r->alarm_alert_ms = now;
	log_error(NULL,
	          "event=alert kind=stuck_rows rows=%lld stuck_after_s=%lld "
	          "oldest_overdue_s=%lld",
	          total, r->cf->retrier.stuck_after_s, oldest);
	return 0;
}

struct steps_arg {
	long long counts[CFG_LIST_MAX + 2];
	int last;
};

static int
steps_collect(void *arg, struct db_out *o)
{
	struct steps_arg *a = arg;
	long long k = o[0].i;

	/* Rows above n+1 (a shorter ladder than when they failed) are due to become dead. */
	if (k < 0)
		k = 0;
	if (k > a->last)
		k = a->last;
	a->counts[k] += o[1].i;
	return 0;
}

/* retrier_gauges - dead rows, unsent dead letters and pending rows per ladder step. */
int
retrier_gauges(struct retrier *r)
{
	int n = ladder_steps(&r->cf->retry);

	for (int lg = 0; lg < RLOG_N; lg++) {
		struct db_out out[2] = {DBO_I64(), DBO_I64()};
		struct steps_arg a;

		memset(&a, 0, sizeof(a));
		a.last = n + 1;
		if (db_query(&r->db, sql_dead_count[lg], NULL, 0, out, 1, NULL, NULL, NULL) !=
		    DB_OK)
			goto fail;
		metrics_set(retrier_mx.dead_rows[lg], out[0].i);
		if (db_query(&r->db, sql_unsent_count[lg], NULL, 0, out, 1, NULL, NULL, NULL) !=
		    DB_OK)
			goto fail;
		metrics_set(retrier_mx.dlq_unsent[lg], out[0].i);
		if (db_query(&r->db, sql_steps[lg], NULL, 0, out, 2, steps_collect, &a, NULL) !=
		    DB_OK)
			goto fail;
		for (int k = 0; k <= n + 1; k++)
			metrics_set(retrier_mx.pending[lg][k], a.counts[k]);
	}
	return 0;
fail:
	log_warn(NULL, "event=gauges_failed error=\"%s\"", r->db.last_error);
	return -1;
}
