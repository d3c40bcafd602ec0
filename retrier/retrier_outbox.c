/*
 * retrier_outbox - relays order_events rows the processor left unsent.
 *
 * The processor writes an order_events row in the transaction that changes the order and
 * publishes it right after the commit; if that publish or the process is lost, the row stays
 * with sent_at NULL. Rows unsent for longer than retrier.outbox_after_s are published here
 * on <prefix>.order-events (key merchant|order, value the payload as stored) and marked sent
 * only after the delivery report, with the conditional UPDATE the processor's relay uses
 * (outbox_mark_sent). Before it publishes a row the sweep leases it (lease_until, one
 * conditional UPDATE judged by affected rows, for longer than a publish phase can take), so
 * of N retriers reading the same rows one sends each.
 * Delivery is still at least once: a late processor relay may publish the same row too, a
 * lost sent mark sends it again, and consumers deduplicate on the stable event_id.
 * idx_unsent (sent_at, created_at) serves the query.
 *
 * Events of one order leave in commit order: a row is taken only when no earlier row of its
 * order (a smaller id) is unsent, so a refund whose payment event was lost waits for that
 * payment event, which this sweep publishes first and marks sent before the refund becomes
 * eligible in a later batch (idx_order_unsent answers the NOT EXISTS). An order's events
 * therefore go one per batch; a batch that sent anything asks for the next cycle at once, so
 * a successor follows without waiting for the sweep interval.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "msg.h"
#include "outbox.h"
#include "retrier.h"

#define OUTBOX_PAYLOAD_MAX 65536

static const char *const sql_unsent =
    "SELECT id, event_id, event_type, merchant_id, out_trade_no, IFNULL(callback_id, 0), "
    "payload FROM order_events e WHERE sent_at IS NULL AND created_at <= NOW(3) - INTERVAL ? "
    "SECOND AND (lease_until IS NULL OR lease_until <= NOW(3)) AND NOT EXISTS (SELECT 1 FROM "
    "order_events p WHERE p.merchant_id = e.merchant_id AND p.out_trade_no = e.out_trade_no "
    "AND p.sent_at IS NULL AND p.id < e.id) ORDER BY created_at LIMIT ?";
static const char *const sql_lease =
    "UPDATE order_events SET lease_until = NOW(3) + INTERVAL ? SECOND WHERE id = ? AND sent_at "
    "IS NULL AND (lease_until IS NULL OR lease_until <= NOW(3))";

struct ob_row {
	unsigned long long id, callback_id;
	char event_id[256], event_type[49];
	enum cblog cblog; /* of the callback that caused the event */
};

struct ob_set {
	struct ob_row *rows;
	struct retrier_job *jobs;
	const char *topic;
	int n, cap, too_big;
};

static int
ob_collect(void *arg, struct db_out *o)
{
	struct ob_set *s = arg;
	struct retrier_job *j;
	struct ob_row *w;
	int n;

	if (s->n >= s->cap)
		return 1;
	if (o[6].truncated) {
		/* It stays unsent and shows in the logs every sweep until someone looks. */
		log_error(NULL, "event=outbox_payload_too_large outbox_id=%lld length=%lu", o[0].i,
		          o[6].len);
		s->too_big++;
		return 0;
	}
	w = &s->rows[s->n];
	j = &s->jobs[s->n];
	w->id = (unsigned long long)o[0].i;
	snprintf(w->event_id, sizeof(w->event_id), "%s", o[1].buf);
	snprintf(w->event_type, sizeof(w->event_type), "%s", o[2].buf);
	w->cblog = strncmp(w->event_type, "order.refund", 12) == 0 ? CBLOG_REFUND : CBLOG_PAY;
	w->callback_id = (unsigned long long)o[5].i;
	if ((n = msg_key(o[3].buf, o[4].buf, j->key, sizeof(j->key))) < 0 ||
	    (j->val = strdup(o[6].buf)) == NULL)
		return 0;
	j->klen = (size_t)n;
	j->vlen = o[6].len;
	j->topic = s->topic;
	s->n++;
	return 0;
}

/*
 * ob_lease - leases each row of s; keeps (compacted) the rows won, frees the others' jobs.
 * Returns 0, or -1 on a database error (the rows leased so far are kept).
 */
static int
ob_lease(struct retrier *r, struct ob_set *s, struct retrier_counts *c)
{
	int won = 0, rc = 0;

	for (int i = 0; i < s->n; i++) {
		struct db_in in[2] = {DBI_I64(retrier_publish_lease_s(r)), DBI_I64(s->rows[i].id)};
		unsigned long long affected = 0;

		if (rc == 0 && db_exec(&r->db, sql_lease, in, 2, &affected, NULL) != DB_OK) {
			log_warn(NULL, "event=outbox_lease_failed error=\"%s\"", r->db.last_error);
			rc = -1;
		}
		if (affected != 1) {
			if (rc == 0)
				c->lost_race++;
			free(s->jobs[i].val);
			s->jobs[i].val = NULL;
			continue;
		}
		s->rows[won] = s->rows[i];
		s->jobs[won++] = s->jobs[i];
	}
	s->n = won;
	return rc;
}

/*
 * ob_mark - marks the delivered rows of s sent, all in one go, then counts and logs each row.
 * Returns 0, or -1 when a mark failed (its rows stay unsent and are published again).
 */
static int
ob_mark(struct retrier *r, struct ob_set *s, struct retrier_counts *c, int *full)
{
	unsigned long long *ids = calloc((size_t)s->n + 1, sizeof(*ids));
	unsigned char *ok = calloc((size_t)s->n + 1, 1);
	int nd = 0, rc = 0;

	if (ids == NULL || ok == NULL) {
		log_error(NULL, "event=outbox_mark_failed error=\"out of memory\"");
		rc = -1;
		goto done;
	}
	for (int i = 0; i < s->n; i++)
		if (s->jobs[i].rc == KQ_DELIVERED)
			ids[nd++] = s->rows[i].id;
	rc = outbox_mark_sent(&r->db, ids, nd, ok);
	for (int i = 0, k = 0; i < s->n; i++) {
		char id[24], e1[128], e2[256];

		if (s->rows[i].callback_id)
			cblog_ref(id, sizeof(id), s->rows[i].cblog, s->rows[i].callback_id);
		else
			snprintf(id, sizeof(id), "-");
		if (s->jobs[i].rc != KQ_DELIVERED) {
			c->failed++;
			metrics_inc(retrier_mx.publish_failed, 1);
			log_warn(id, "event=outbox_publish_failed event_id=%s error=\"%s\"",
			         log_safe(e1, sizeof(e1), s->rows[i].event_id),
			         log_safe(e2, sizeof(e2), s->jobs[i].err));
			continue;
		}
		if (!ok[k++])
			continue;
		c->outbox_sent++;
		/* A later event of this order may have waited for this one: look again now. */
		*full = 1;
		metrics_inc(retrier_mx.outbox_sent, 1);
		log_info(id, "event=outbox_relayed event_id=%s event_type=%s topic=%s",
		         log_safe(e1, sizeof(e1), s->rows[i].event_id), s->rows[i].event_type,
		         r->topic_events);
	}
done:
	free(ok);
	free(ids);
	return rc;
}

/* retrier_outbox_sweep - publishes one batch of overdue outbox rows. */
int
retrier_outbox_sweep(struct retrier *r, struct retrier_counts *c, int *full)
{
	char b_event[256], b_type[49], b_merchant[65], b_order[129];
	char *payload = malloc(OUTBOX_PAYLOAD_MAX);
	struct db_out out[7] = {DBO_I64(),
	                        DBO_STR(b_event, sizeof(b_event)),
	                        DBO_STR(b_type, sizeof(b_type)),
	                        DBO_STR(b_merchant, sizeof(b_merchant)),
	                        DBO_STR(b_order, sizeof(b_order)),
	                        DBO_I64(),
	                        DBO_STR(payload, OUTBOX_PAYLOAD_MAX)};
	struct db_in in[2] = {DBI_I64(r->cf->retrier.outbox_after_s),
	                      DBI_I64(r->cf->retrier.batch)};
	struct ob_set s = {NULL, NULL, r->topic_events, 0, (int)r->cf->retrier.batch, 0};
	unsigned long long rows = 0;
	int rc = -1;

	*full = 0;
	if (payload == NULL || (s.rows = calloc((size_t)s.cap, sizeof(*s.rows))) == NULL ||
	    (s.jobs = calloc((size_t)s.cap, sizeof(*s.jobs))) == NULL) {
		log_error(NULL, "event=outbox_failed error=\"out of memory\"");
		goto done;
	}
	if (db_query(&r->db, sql_unsent, in, 2, out, 7, ob_collect, &s, &rows) != DB_OK) {
		log_warn(NULL, "event=outbox_failed error=\"%s\"", r->db.last_error);
		goto done;
	}
	/* Rows too large to relay do not count, or they would keep the cycle from resting. */
	*full = s.n >= s.cap && rows >= (unsigned long long)s.cap;
	rc = 0;
	if (ob_lease(r, &s, c) != 0)
		rc = -1;
	retrier_publish(r, s.jobs, s.n);
	if (ob_mark(r, &s, c, full) != 0)
		rc = -1;
done:
	for (int i = 0; s.jobs && i < s.n; i++)
		free(s.jobs[i].val);
	free(s.jobs);
	free(s.rows);
	free(payload);
	return rc;
}
