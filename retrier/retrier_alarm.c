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
 *
 * The overdue check cannot see a row that is republished on every lease without ever being
 * processed (a delay partition nobody consumes, a stalled partition): its next_retry_at
 * keeps moving. The end-to-end alarm closes that gap, as the seed design's last line of
 * defence did: a row still pending longer than retrier_old_after_s() after it was created
 * (or replayed) is counted in a gauge and alerted once (kind old_pending), marked by
 * old_alerted_at with a conditional UPDATE in the alert's transaction, so of any number of
 * retriers one writes it. The per-step gauges also count rows republished more than
 * retrier.max_republish times at one attempt (the sweep alerts each of those once).
 *
 * A cycle runs these checks only for the logs where its probe (retrier_probe.c) saw a
 * stuck row or a pending row older than the threshold; the other logs' gauges are 0 without a
 * query, as their queries would have counted nothing. The per-step and dead-row gauges are the
 * probe's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

#define STUCK_SQL(T)                                                                               \
	"SELECT COUNT(*), IFNULL(TIMESTAMPDIFF(SECOND, MIN(next_retry_at), NOW(3)), 0) FROM " T    \
	" WHERE status = 0 AND next_retry_at < NOW(3) - INTERVAL ? SECOND"
/* Served by idx_pending_age (status, created_at); a replayed row counts from its replay. */
#define OLD_WHERE                                                                                  \
	" WHERE status = 0 AND created_at < NOW(3) - INTERVAL ? SECOND AND "                       \
	"COALESCE(replayed_at, created_at) < NOW(3) - INTERVAL ? SECOND"
#define OLD_COUNT_SQL(T)                                                                           \
	"SELECT COUNT(*), IFNULL(TIMESTAMPDIFF(SECOND, MIN(created_at), NOW(3)), 0) FROM " T       \
	    OLD_WHERE
#define OLD_NEW_SQL(T)                                                                             \
	"SELECT id, merchant_id, out_trade_no, channel, retry_count, republish_count, "            \
	"TIMESTAMPDIFF(SECOND, created_at, NOW(3)) FROM " T OLD_WHERE                              \
	" AND old_alerted_at IS NULL LIMIT ?"
#define OLD_MARK_SQL(T)                                                                            \
	"UPDATE " T " SET old_alerted_at = NOW(3) WHERE id = ? AND status = 0 AND "                \
	"old_alerted_at IS NULL"

/* The alarm's statements for one callback table T. */
#define ALARM_SQL(T)                                                                               \
	{                                                                                          \
		STUCK_SQL(T), OLD_COUNT_SQL(T), OLD_NEW_SQL(T), OLD_MARK_SQL(T)                    \
	}

static const struct {
	const char *stuck, *old_count, *old_new, *old_mark;
} sql[CBLOG_N] = CBLOG_SQL(ALARM_SQL);

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

static const int all_logs[CBLOG_N] = {1, 1};

int
retrier_alarm_check(struct retrier *r, struct retrier_counts *c)
{
	return retrier_alarm_check_logs(r, c, all_logs);
}

/* retrier_alarm_check_logs - counts stuck rows, sets the gauges, raises the alarm. */
int
retrier_alarm_check_logs(struct retrier *r, struct retrier_counts *c, const int logs[CBLOG_N])
{
	long long total = 0, oldest = 0, now = clock_mono_ms();
	long long every_ms = r->cf->retrier.stuck_after_s * 1000;
	char detail[256];

	for (int lg = 0; lg < CBLOG_N; lg++) {
		struct db_in in[1] = {DBI_I64(r->cf->retrier.stuck_after_s)};
		struct db_out out[2] = {DBO_I64(), DBO_I64()};

		if (!logs[lg]) {
			metrics_set(retrier_mx.stuck[lg], 0);
			continue;
		}
		if (db_query(&r->db, sql[lg].stuck, in, 1, out, 2, NULL, NULL, NULL) != DB_OK) {
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

long long
retrier_old_after_s(const struct conf *cf)
{
	const struct conf_retry *rc = &cf->retry;
	long long floor = rc->initial_lease_s + 2 * cf->retrier.sweep_interval_s;

	for (int k = 1; k <= ladder_steps(rc); k++)
		floor += ladder_delay(rc, k) + rc->lease_margin_s;
	return cf->retrier.stuck_after_s > floor ? cf->retrier.stuck_after_s : floor;
}

struct old_row {
	unsigned long long id;
	char merchant[65], order[129], channel[17];
	long long retry_count, republish_count, age_s;
};

struct old_set {
	struct old_row *rows;
	int n, cap;
};

static int
old_collect(void *arg, struct db_out *o)
{
	struct old_set *s = arg;
	struct old_row *w;

	if (s->n >= s->cap)
		return 1;
	w = &s->rows[s->n++];
	w->id = (unsigned long long)o[0].i;
	snprintf(w->merchant, sizeof(w->merchant), "%s", o[1].buf);
	snprintf(w->order, sizeof(w->order), "%s", o[2].buf);
	snprintf(w->channel, sizeof(w->channel), "%s", o[3].buf);
	w->retry_count = o[4].i;
	w->republish_count = o[5].i;
	w->age_s = o[6].i;
	return 0;
}

/* old_alert - marks one old row alerted and writes its alert, in one transaction; returns
 * 1 when this retrier wrote it, 0 when another had, -1 on a database error. */
static int
old_alert(struct retrier *r, enum cblog lg, const struct old_row *w, long long after_s)
{
	struct db_in in[1] = {DBI_I64(w->id)};
	unsigned long long affected = 0;
	char cbid[24], detail[400], o[130], m[66];

	cblog_ref(cbid, sizeof(cbid), lg, w->id);
	if (db_begin(&r->db) != DB_OK ||
	    db_exec(&r->db, sql[lg].old_mark, in, 1, &affected, NULL) != DB_OK)
		goto fail;
	if (affected == 1) {
		snprintf(detail, sizeof(detail),
		         "%s: %s still pending %llds after it came in (threshold %llds): "
		         "channel %s, retry_count %lld, republished %lld times at this attempt",
		         cbid, cblog_name(lg), w->age_s, after_s, w->channel, w->retry_count,
		         w->republish_count);
		if (retrier_alert(&r->db, "old_pending", w->id, w->merchant, w->order, detail) !=
		    DB_OK)
			goto fail;
	}
	if (db_commit(&r->db) != DB_OK)
		goto fail;
	if (affected == 1)
		log_error(cbid,
		          "event=alert kind=old_pending order=%s merchant=%s channel=%s age_s=%lld "
		          "threshold_s=%lld retry_count=%lld republish_count=%lld",
		          log_safe(o, sizeof(o), w->order), log_safe(m, sizeof(m), w->merchant),
		          w->channel, w->age_s, after_s, w->retry_count, w->republish_count);
	return affected == 1;
fail:
	log_warn(cbid, "event=alert_failed kind=old_pending error=\"%s\"", r->db.last_error);
	db_rollback(&r->db);
	return -1;
}

int
retrier_old_check(struct retrier *r, struct retrier_counts *c)
{
	return retrier_old_check_logs(r, c, all_logs);
}

/* retrier_old_check_logs - the end-to-end alarm: gauges, then one alert per old row. */
int
retrier_old_check_logs(struct retrier *r, struct retrier_counts *c, const int logs[CBLOG_N])
{
	long long after_s = retrier_old_after_s(r->cf), oldest = 0;
	char b_merchant[65], b_order[129], b_channel[17];
	struct old_set s = {NULL, 0, (int)r->cf->retrier.batch};
	int rc = -1;

	metrics_set(retrier_mx.old_after_s, after_s);
	if ((s.rows = calloc((size_t)s.cap, sizeof(*s.rows))) == NULL) {
		log_error(NULL,
		          "event=alarm_check_failed kind=old_pending error=\"out of memory\"");
		return -1;
	}
	for (int lg = 0; lg < CBLOG_N; lg++) {
		struct db_in in[3] = {DBI_I64(after_s), DBI_I64(after_s), DBI_I64(s.cap)};
		struct db_out cnt[2] = {DBO_I64(), DBO_I64()};
		struct db_out out[7] = {DBO_I64(),
		                        DBO_STR(b_merchant, sizeof(b_merchant)),
		                        DBO_STR(b_order, sizeof(b_order)),
		                        DBO_STR(b_channel, sizeof(b_channel)),
		                        DBO_I64(),
		                        DBO_I64(),
		                        DBO_I64()};

		if (!logs[lg]) {
			metrics_set(retrier_mx.old[lg], 0);
			continue;
		}
		if (db_query(&r->db, sql[lg].old_count, in, 2, cnt, 2, NULL, NULL, NULL) != DB_OK)
			goto db_fail;
		metrics_set(retrier_mx.old[lg], cnt[0].i);
		c->old += cnt[0].i;
		if (cnt[0].i && cnt[1].i > oldest)
			oldest = cnt[1].i;
		if (cnt[0].i == 0)
			continue;
		s.n = 0;
		if (db_query(&r->db, sql[lg].old_new, in, 3, out, 7, old_collect, &s, NULL) !=
		    DB_OK)
			goto db_fail;
		for (int i = 0; i < s.n; i++) {
			int won = old_alert(r, (enum cblog)lg, &s.rows[i], after_s);

			if (won < 0)
				goto done;
			c->old_alerted += won;
		}
	}
	metrics_set(retrier_mx.old_oldest_s, oldest);
	rc = 0;
	goto done;
db_fail:
	log_warn(NULL, "event=alarm_check_failed kind=old_pending error=\"%s\"", r->db.last_error);
done:
	free(s.rows);
	return rc;
}
