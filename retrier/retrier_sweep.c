/*
 * retrier_sweep - leases the due pending rows of one callback log and republishes them.
 *
 * A pending row is due when next_retry_at has passed: its first publish was lost (ingest's
 * initial lease ran out), the processor recorded a failure (it makes the row due at once),
 * or an earlier lease of ours expired because its message or its processor was lost. The
 * retry_count decides what happens next:
 *
 *   0          republish on <prefix>.callbacks (attempt 1), leased for retry.initial_lease_s
 *              (a lost first publish, or a row the processor deferred to keep its order's
 *              callbacks in order), twice as long for each republish of the row that brought
 *              no progress, up to retry.initial_lease_max_s: while the processors are down or
 *              behind, a backlog is not copied onto the main topic every initial lease;
 *              a replayed row goes to the first step's topic instead (see paycbctl)
 *   k = 1..n   republish on step k's delay topic (attempt k+1), leased for step k's delay
 *              plus retry.lease_margin_s; the topic holds the message for the delay
 *   n+1 ...    dead: retrier_make_dead(), then the dead-letter sweep
 *
 * The lease is one conditional UPDATE that names the old next_retry_at and retry_count, so
 * of any number of retriers, and against a processor recording a failure at that moment,
 * exactly one statement changes the row; only its retrier publishes. A lost lease is not an
 * error. A publish that fails leaves the lease in place: the row comes due when it expires.
 *
 * The lease also counts the row's republishes at its attempt (republish_count; the
 * processor sets it back to 0 when it records a failure or defers the row). The lease that
 * takes a row past retrier.max_republish writes an alert (kind republish_storm) in its
 * transaction: the row's messages are not being processed (a step's topic nobody consumes,
 * a stalled partition).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "retrier.h"

/* The sweep query reads idx_retry (status, next_retry_at) as a range, in index order. */
#define DUE_SQL(T)                                                                                 \
	"SELECT id, retry_count, CAST(next_retry_at AS CHAR), merchant_id, channel, "              \
	"out_trade_no, replayed_at IS NOT NULL, IFNULL(last_error, ''), republish_count FROM " T   \
	" WHERE status = 0 AND next_retry_at <= NOW(3) ORDER BY next_retry_at LIMIT ?"
#define LEASE_SQL(T)                                                                               \
	"UPDATE " T " SET next_retry_at = NOW(3) + INTERVAL ? SECOND, republish_count = "          \
	"republish_count + 1 WHERE id = ? AND status = 0 AND retry_count = ? AND next_retry_at = " \
	"?"

const char *const retrier_sql_due[CBLOG_N] = CBLOG_SQL(DUE_SQL);
static const char *const sql_lease[CBLOG_N] = CBLOG_SQL(LEASE_SQL);

struct due_row {
	unsigned long long id;
	int retry_count;
	int replayed;
	long long republish_count; /* before this lease */
	char next_at[32];
	char merchant[65], channel[17], order[129];
	char last_error[513];
	/* The plan for a leased row. */
	int step;          /* 0 = main topic */
	long long delay_s; /* how long the topic holds it */
	long long lease_s;
};

struct due_set {
	struct due_row *rows;
	int n, cap;
};

static int
due_collect(void *arg, struct db_out *o)
{
	struct due_set *s = arg;
	struct due_row *w;

	if (s->n >= s->cap)
		return 1;
	w = &s->rows[s->n++];
	w->id = (unsigned long long)o[0].i;
	w->retry_count = (int)o[1].i;
	snprintf(w->next_at, sizeof(w->next_at), "%s", o[2].buf);
	snprintf(w->merchant, sizeof(w->merchant), "%s", o[3].buf);
	snprintf(w->channel, sizeof(w->channel), "%s", o[4].buf);
	snprintf(w->order, sizeof(w->order), "%s", o[5].buf);
	w->replayed = o[6].i != 0;
	snprintf(w->last_error, sizeof(w->last_error), "%s", o[7].buf);
	w->republish_count = o[8].i;
	return 0;
}

/* due_plan - the topic step, hold delay and lease of a row that is not dead yet. */
static void
due_plan(const struct retrier *r, struct due_row *w)
{
	const struct conf_retry *rc = &r->cf->retry;

	if (w->retry_count == 0 && !w->replayed) {
		w->step = 0;
		w->delay_s = 0;
		w->lease_s = rc->initial_lease_s;
		/* Doubling per republish without progress, up to the cap. */
		for (long long k = 0;
		     k < w->republish_count && w->lease_s < rc->initial_lease_max_s; k++)
			w->lease_s *= 2;
		if (w->lease_s > rc->initial_lease_max_s)
			w->lease_s = rc->initial_lease_max_s;
		return;
	}
	w->step = w->retry_count == 0 ? 1 : w->retry_count;
	w->delay_s = ladder_delay(rc, w->step);
	w->lease_s = w->delay_s + rc->lease_margin_s;
}

/*
 * due_storm_alert - the alert of a row this lease takes past retrier.max_republish, in the
 * lease's transaction.
 */
static enum db_rc
due_storm_alert(struct retrier *r, enum cblog lg, const struct due_row *w)
{
	char cbid[24], detail[400];

	cblog_ref(cbid, sizeof(cbid), lg, w->id);
	snprintf(detail, sizeof(detail),
	         "%s: republished %lld times at retry_count %d without progress (more than "
	         "retrier.max_republish %lld): are its messages consumed? last error: %.200s",
	         cbid, w->republish_count + 1, w->retry_count, r->cf->retrier.max_republish,
	         w->last_error);
	return retrier_alert(&r->db, "republish_storm", w->id, w->merchant, w->order, detail);
}

/*
 * due_lease - the conditional UPDATE (with the storm alert when this lease crosses
 * retrier.max_republish); returns 1 when won, 0 when lost, -1 on error.
 */
static int
due_lease(struct retrier *r, enum cblog lg, const struct due_row *w)
{
	struct db_in in[4] = {DBI_I64(w->lease_s), DBI_I64(w->id), DBI_I64(w->retry_count),
	                      DBI_STR(w->next_at)};
	int storm = w->republish_count == r->cf->retrier.max_republish;
	unsigned long long affected = 0;
	char cbid[24], o[130], m[66];

	if (!storm)
		return db_exec(&r->db, sql_lease[lg], in, 4, &affected, NULL) != DB_OK
		           ? -1
		           : affected == 1;
	if (db_begin(&r->db) != DB_OK ||
	    db_exec(&r->db, sql_lease[lg], in, 4, &affected, NULL) != DB_OK ||
	    (affected == 1 && due_storm_alert(r, lg, w) != DB_OK) || db_commit(&r->db) != DB_OK) {
		db_rollback(&r->db);
		return -1;
	}
	if (affected == 1) {
		metrics_inc(retrier_mx.storms, 1);
		log_error(cblog_ref(cbid, sizeof(cbid), lg, w->id),
		          "event=alert kind=republish_storm order=%s merchant=%s retry_count=%d "
		          "republish_count=%lld max_republish=%lld",
		          log_safe(o, sizeof(o), w->order), log_safe(m, sizeof(m), w->merchant),
		          w->retry_count, w->republish_count + 1, r->cf->retrier.max_republish);
	}
	return affected == 1;
}

static int
due_job(struct retrier *r, enum cblog lg, const struct due_row *w, struct retrier_job *j)
{
	struct msg_callback m;
	int len;

	memset(&m, 0, sizeof(m));
	m.cblog = lg;
	m.id = w->id;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", w->merchant);
	snprintf(m.channel, sizeof(m.channel), "%s", w->channel);
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", w->order);
	m.attempt = w->retry_count + 1;
	j->topic = w->step == 0 ? r->topic_main : r->topic_step[w->step];
	if ((len = msg_callback_key(&m, j->key, sizeof(j->key))) < 0)
		return -1;
	j->klen = (size_t)len;
	if ((j->val = malloc(1024)) == NULL || (len = msg_callback_encode(&m, j->val, 1024)) < 0) {
		free(j->val);
		j->val = NULL;
		return -1;
	}
	j->vlen = (size_t)len;
	return 0;
}

static void
due_shuffle(struct retrier *r, struct due_set *s)
{
	/* Retriers that read the same batch then try its rows in different orders, so each wins
	 * a share at once instead of all of them queueing on the same first row. */
	for (int i = s->n - 1; i > 0; i--) {
		int k = (int)(rand_r(&r->rng) % (unsigned)(i + 1));
		struct due_row t = s->rows[i];
		s->rows[i] = s->rows[k];
		s->rows[k] = t;
	}
}

static void
due_report(enum cblog lg, const struct due_row *w, const struct retrier_job *j,
           struct retrier_counts *c)
{
	const char *why = "";
	char id[24], e[256];

	cblog_ref(id, sizeof(id), lg, w->id);
	if (w->step == 0)
		why = " reason=first_publish_lost";
	else if (w->retry_count == 0)
		why = " reason=replay_publish_lost";
	if (j->rc == 0) {
		c->republished++;
		metrics_inc(retrier_mx.republished[lg][w->step], 1);
		log_info(id,
		         "event=republished step=%d topic=%s retry_count=%d attempt=%d "
		         "due_in_s=%lld lease_s=%lld%s",
		         w->step, j->topic, w->retry_count, w->retry_count + 1, w->delay_s,
		         w->lease_s, why);
	} else {
		c->failed++;
		metrics_inc(retrier_mx.publish_failed, 1);
		log_warn(id,
		         "event=republish_failed step=%d topic=%s retry_count=%d error=\"%s\" "
		         "due_again_in_s=%lld",
		         w->step, j->topic, w->retry_count, log_safe(e, sizeof(e), j->err),
		         w->lease_s);
	}
}

/* due_read - reads up to s->cap due rows of log lg into s; returns 0 or -1. */
static int
due_read(struct retrier *r, enum cblog lg, struct due_set *s)
{
	char b_next[32], b_merchant[65], b_channel[17], b_order[129], b_err[513];
	struct db_out out[9] = {DBO_I64(),
	                        DBO_I64(),
	                        DBO_STR(b_next, sizeof(b_next)),
	                        DBO_STR(b_merchant, sizeof(b_merchant)),
	                        DBO_STR(b_channel, sizeof(b_channel)),
	                        DBO_STR(b_order, sizeof(b_order)),
	                        DBO_I64(),
	                        DBO_STR(b_err, sizeof(b_err)),
	                        DBO_I64()};
	struct db_in in[1] = {DBI_I64(r->cf->retrier.batch)};

	if (db_query(&r->db, retrier_sql_due[lg], in, 1, out, 9, due_collect, s, NULL) != DB_OK) {
		log_warn(NULL, "event=sweep_failed log=%s error=\"%s\"", cblog_name(lg),
		         r->db.last_error);
		return -1;
	}
	return 0;
}

/*
 * due_take - one due row: made dead past the ladder, or leased and its message encoded into
 * j. Returns 1 when j is to be published, 0 when the row needs nothing more from this
 * sweep, -1 when the database failed (the rest of the batch waits for the next sweep).
 */
static int
due_take(struct retrier *r, enum cblog lg, struct due_row *w, struct retrier_counts *c,
         struct retrier_job *j)
{
	char id[24];
	int won;

	if (w->retry_count > ladder_steps(&r->cf->retry)) {
		won = retrier_make_dead(r, lg, w->id, w->retry_count, w->next_at, w->merchant,
		                        w->order, w->last_error);
		if (won < 0)
			return -1;
		if (won)
			c->dead++;
		else
			c->lost_race++;
		return 0;
	}
	due_plan(r, w);
	if ((won = due_lease(r, lg, w)) < 0) {
		log_warn(cblog_ref(id, sizeof(id), lg, w->id), "event=lease_failed error=\"%s\"",
		         r->db.last_error);
		return -1;
	}
	if (won == 0) {
		c->lost_race++;
		metrics_inc(retrier_mx.lost_race, 1);
		log_debug(cblog_ref(id, sizeof(id), lg, w->id), "event=lease_lost");
		return 0;
	}
	c->leased++;
	if (w->republish_count == r->cf->retrier.max_republish)
		c->storms++;
	if (due_job(r, lg, w, j) != 0) {
		log_error(cblog_ref(id, sizeof(id), lg, w->id),
		          "event=encode_failed due_again_in_s=%lld", w->lease_s);
		return 0;
	}
	return 1;
}

/* retrier_sweep - leases and republishes one batch of due rows of log lg. */
int
retrier_sweep(struct retrier *r, enum cblog lg, struct retrier_counts *c, int *full)
{
	struct due_set s = {NULL, 0, (int)r->cf->retrier.batch};
	struct retrier_job *jobs = NULL;
	struct due_row **leased = NULL;
	int nj = 0, rc = -1;

	*full = 0;
	if ((s.rows = calloc((size_t)s.cap, sizeof(*s.rows))) == NULL ||
	    (jobs = calloc((size_t)s.cap, sizeof(*jobs))) == NULL ||
	    (leased = calloc((size_t)s.cap, sizeof(*leased))) == NULL) {
		log_error(NULL, "event=sweep_failed log=%s error=\"out of memory\"",
		          cblog_name(lg));
		goto done;
	}
	if (due_read(r, lg, &s) != 0)
		goto done;
	*full = s.n >= s.cap;
	c->due += s.n;
	due_shuffle(r, &s);
	rc = 0;
	for (int i = 0; i < s.n; i++) {
		int t = due_take(r, lg, &s.rows[i], c, &jobs[nj]);

		if (t < 0) {
			/* Publish what is leased already; the rest waits for the next sweep. */
			rc = -1;
			break;
		}
		if (t > 0)
			leased[nj++] = &s.rows[i];
	}
	retrier_publish(r, jobs, nj);
	for (int i = 0; i < nj; i++)
		due_report(lg, leased[i], &jobs[i], c);
done:
	for (int i = 0; jobs && i < s.cap; i++)
		free(jobs[i].val);
	free(jobs);
	free(leased);
	free(s.rows);
	return rc;
}
