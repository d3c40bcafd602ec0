/*
 * retrier_dlq - dead rows: the transition to dead (2) and the dead-letter topic.
 *
 * A due row whose retry_count is above the number of ladder steps becomes dead with one
 * conditional UPDATE (the same compare-and-set as a lease), and its alert row is written in
 * the same transaction, so a dead row always has its alert and only one retrier writes it.
 * The row keeps its raw body for replay.
 *
 * The dead letter is published separately and reliably: a dead row with dead_reason set
 * and dlq_sent_at NULL is due for its dead letter, whether the retrier made it dead (ladder
 * exhausted) or the processor did (amount or currency mismatch: the processor never
 * publishes to the dead-letter topic itself, so it cannot be stopped by it). The
 * dead-letter sweep leases such a row through next_retry_at like a pending row, for longer
 * than a publish phase can take (the delivery timeout plus the phase's slack plus
 * retry.lease_margin_s), so two retriers never send one dead letter at once; it publishes
 * <prefix>.callbacks.dlq (schemas/kafka/dlq.schema.json), waits for the delivery report and
 * only then sets dlq_sent_at. A failed publish, or a retrier that dies in between, leaves
 * dlq_sent_at NULL, and the row is published again when the lease ends. Rows the processor
 * made dead before schema 008 carry no dead_reason; their dead letter was published by the
 * processor, so they are left alone.
 * idx_dlq (status, dlq_sent_at, next_retry_at) keeps this query off the sent dead rows.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "retrier.h"

#define DEAD_SQL(T)                                                                                \
	"UPDATE " T " SET status = 2, dead_at = NOW(3), dead_reason = 'ladder_exhausted', "        \
	"dlq_sent_at = NULL, next_retry_at = NOW(3) WHERE id = ? AND status = 0 AND "              \
	"retry_count = ? AND next_retry_at = ?"
#define DLQ_DUE_SQL(T, TRADE)                                                                      \
	"SELECT id, CAST(next_retry_at AS CHAR), merchant_id, channel, " TRADE ", "                \
	"out_trade_no, retry_count, IFNULL(last_error, ''), CAST(created_at AS CHAR), "            \
	"CAST(COALESCE(dead_at, updated_at) AS CHAR), dead_reason FROM " T " WHERE "               \
	"status = 2 AND dlq_sent_at IS NULL AND next_retry_at <= NOW(3) AND dead_reason IS "       \
	"NOT NULL ORDER BY next_retry_at LIMIT ?"
#define DLQ_LEASE_SQL(T)                                                                           \
	"UPDATE " T " SET next_retry_at = NOW(3) + INTERVAL ? SECOND WHERE id = ? AND "            \
	"status = 2 AND dlq_sent_at IS NULL AND dead_reason IS NOT NULL AND next_retry_at = ?"
#define DLQ_SENT_SQL(T)                                                                            \
	"UPDATE " T " SET dlq_sent_at = NOW(3) WHERE id = ? AND status = 2 AND "                   \
	"dlq_sent_at IS NULL"

static const char *const sql_dead[CBLOG_N] = CBLOG_SQL(DEAD_SQL);
static const char *const sql_dlq_due[CBLOG_N] = {DLQ_DUE_SQL(CBLOG_TABLE_PAY, "channel_trade_no"),
                                                 DLQ_DUE_SQL(CBLOG_TABLE_REFUND, "refund_no")};
static const char *const sql_dlq_lease[CBLOG_N] = CBLOG_SQL(DLQ_LEASE_SQL);
static const char *const sql_dlq_sent[CBLOG_N] = CBLOG_SQL(DLQ_SENT_SQL);

/* retrier_make_dead - the dead transition and its alert, in one transaction. */
int
retrier_make_dead(struct retrier *r, enum cblog lg, unsigned long long id, int retry_count,
                  const char *next_retry_at, const char *merchant, const char *order,
                  const char *last_error)
{
	struct db_in in[3] = {DBI_I64(id), DBI_I64(retry_count), DBI_STR(next_retry_at)};
	unsigned long long affected = 0;
	char cbid[24], detail[512], e[200];
	int rc = -1;

	cblog_ref(cbid, sizeof(cbid), lg, id);
	if (db_begin(&r->db) != DB_OK)
		goto fail;
	if (db_exec(&r->db, sql_dead[lg], in, 3, &affected, NULL) != DB_OK)
		goto fail;
	if (affected == 1) {
		snprintf(detail, sizeof(detail),
		         "%s: dead after %d failures (ladder exhausted); last error: %.400s", cbid,
		         retry_count, last_error);
		if (retrier_alert(&r->db, "dead_letter", id, merchant, order, detail) != DB_OK)
			goto fail;
	}
	if (db_commit(&r->db) != DB_OK)
		goto fail;
	if (affected == 1) {
		metrics_inc(retrier_mx.dead, 1);
		log_error(cbid,
		          "event=alert kind=dead_letter reason=ladder_exhausted "
		          "retry_count=%d last_error=\"%s\"",
		          retry_count, log_safe(e, sizeof(e), last_error));
	}
	return affected == 1;
fail:
	log_warn(cbid, "event=dead_failed error=\"%s\"", r->db.last_error);
	db_rollback(&r->db);
	return rc;
}

struct dlq_row {
	unsigned long long id;
	char next_at[32], merchant[65], channel[17], trade[161], order[129];
	long long retry_count;
	char last_error[513], created_at[32], dead_at[32], reason[33];
};

struct dlq_set {
	struct dlq_row *rows;
	int n, cap;
};

static int
dlq_collect(void *arg, struct db_out *o)
{
	struct dlq_set *s = arg;
	struct dlq_row *w;

	if (s->n >= s->cap)
		return 1;
	w = &s->rows[s->n++];
	w->id = (unsigned long long)o[0].i;
	snprintf(w->next_at, sizeof(w->next_at), "%s", o[1].buf);
	snprintf(w->merchant, sizeof(w->merchant), "%s", o[2].buf);
	snprintf(w->channel, sizeof(w->channel), "%s", o[3].buf);
	snprintf(w->trade, sizeof(w->trade), "%s", o[4].buf);
	snprintf(w->order, sizeof(w->order), "%s", o[5].buf);
	w->retry_count = o[6].i;
	snprintf(w->last_error, sizeof(w->last_error), "%s", o[7].buf);
	snprintf(w->created_at, sizeof(w->created_at), "%s", o[8].buf);
	snprintf(w->dead_at, sizeof(w->dead_at), "%s", o[9].buf);
	snprintf(w->reason, sizeof(w->reason), "%s", o[10].buf);
	return 0;
}

/* dlq_job - the dead letter of w (msg_dead_letter_encode), keyed by its order. */
static int
dlq_job(struct retrier *r, enum cblog lg, const struct dlq_row *w, struct retrier_job *j)
{
	struct msg_dead_letter d = {.cblog = lg,
	                            .id = w->id,
	                            .merchant_id = w->merchant,
	                            .channel = w->channel,
	                            .channel_trade_no = w->trade,
	                            .out_trade_no = w->order,
	                            .retry_count = w->retry_count,
	                            .last_error = w->last_error,
	                            .reason = w->reason,
	                            .created_at = w->created_at,
	                            .dead_at = w->dead_at};
	int n;

	if ((n = msg_key(w->merchant, w->order, j->key, sizeof(j->key))) < 0 ||
	    (j->val = msg_dead_letter_encode(&d, &j->vlen)) == NULL)
		return -1;
	j->klen = (size_t)n;
	j->topic = r->topic_dlq;
	return 0;
}

/* dlq_lease_all - leases each row; leaves the jobs of the rows won. */
static int
dlq_lease_all(struct retrier *r, enum cblog lg, struct dlq_set *s, struct retrier_job *jobs,
              struct dlq_row **won, int *nj, struct retrier_counts *c)
{
	char id[24];

	for (int i = 0; i < s->n; i++) {
		struct dlq_row *w = &s->rows[i];
		struct db_in in[3] = {DBI_I64(retrier_publish_lease_s(r)), DBI_I64(w->id),
		                      DBI_STR(w->next_at)};
		unsigned long long affected = 0;

		cblog_ref(id, sizeof(id), lg, w->id);
		if (db_exec(&r->db, sql_dlq_lease[lg], in, 3, &affected, NULL) != DB_OK) {
			log_warn(id, "event=dlq_lease_failed error=\"%s\"", r->db.last_error);
			return -1;
		}
		if (affected != 1) {
			c->lost_race++;
			continue;
		}
		if (dlq_job(r, lg, w, &jobs[*nj]) != 0) {
			log_error(id, "event=encode_failed topic=%s", r->topic_dlq);
			continue;
		}
		won[(*nj)++] = w;
	}
	return 0;
}

/* retrier_dlq_sweep - publishes one batch of dead letters of log lg. */
int
retrier_dlq_sweep(struct retrier *r, enum cblog lg, struct retrier_counts *c, int *full)
{
	char b[10][520];
	struct db_out out[11] = {DBO_I64(),         DBO_STR(b[0], 32),  DBO_STR(b[1], 65),
	                         DBO_STR(b[2], 17), DBO_STR(b[3], 161), DBO_STR(b[4], 129),
	                         DBO_I64(),         DBO_STR(b[5], 513), DBO_STR(b[6], 32),
	                         DBO_STR(b[7], 32), DBO_STR(b[8], 33)};
	struct db_in in[1] = {DBI_I64(r->cf->retrier.batch)};
	struct dlq_set s = {NULL, 0, (int)r->cf->retrier.batch};
	struct retrier_job *jobs = NULL;
	struct dlq_row **won = NULL;
	int nj = 0, rc = -1;
	char id[24];

	*full = 0;
	if ((s.rows = calloc((size_t)s.cap, sizeof(*s.rows))) == NULL ||
	    (jobs = calloc((size_t)s.cap, sizeof(*jobs))) == NULL ||
	    (won = calloc((size_t)s.cap, sizeof(*won))) == NULL)
		goto done;
	if (db_query(&r->db, sql_dlq_due[lg], in, 1, out, 11, dlq_collect, &s, NULL) != DB_OK) {
		log_warn(NULL, "event=dlq_sweep_failed log=%s error=\"%s\"", cblog_name(lg),
		         r->db.last_error);
		goto done;
	}
	*full = s.n >= s.cap;
	rc = dlq_lease_all(r, lg, &s, jobs, won, &nj, c);
	retrier_publish(r, jobs, nj);
	for (int i = 0; i < nj; i++) {
		struct db_in in1[1] = {DBI_I64(won[i]->id)};
		char e[256];

		cblog_ref(id, sizeof(id), lg, won[i]->id);
		if (jobs[i].rc != 0) {
			c->failed++;
			metrics_inc(retrier_mx.publish_failed, 1);
			log_warn(
			    id,
			    "event=dead_letter_failed topic=%s error=\"%s\" due_again_in_s=%lld",
			    r->topic_dlq, log_safe(e, sizeof(e), jobs[i].err),
			    retrier_publish_lease_s(r));
			continue;
		}
		/* If this UPDATE is lost the dead letter goes out once more: at least once. */
		if (db_exec(&r->db, sql_dlq_sent[lg], in1, 1, NULL, NULL) != DB_OK) {
			log_warn(id, "event=dlq_mark_failed error=\"%s\"", r->db.last_error);
			rc = -1;
			continue;
		}
		c->dlq_sent++;
		metrics_inc(retrier_mx.dlq_sent, 1);
		log_info(id, "event=dead_lettered topic=%s reason=%s retry_count=%lld",
		         r->topic_dlq, won[i]->reason, won[i]->retry_count);
	}
done:
	if (s.rows == NULL || jobs == NULL || won == NULL)
		log_error(NULL, "event=dlq_sweep_failed error=\"out of memory\"");
	for (int i = 0; jobs && i < nj; i++)
		free(jobs[i].val);
	free(jobs);
	free(won);
	free(s.rows);
	return rc;
}
