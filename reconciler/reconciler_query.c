/*
 * reconciler_query - reconciliation: finds payments whose notification never came.
 *
 * A PENDING order is queried at every channel its merchant has API credentials for, once per
 * step of reconciler.query_steps_s counted from its creation (orders.recon_step says how many
 * steps were done, recon_next_at when the next is due; NULL means the first, at created_at +
 * the first step). The claim is one conditional UPDATE of recon_next_at naming the values
 * read, as every lease in paycb is.
 *
 * A verified "paid" answer is reserved in pay_callback_log exactly as ingest reserves a
 * notification (cblog_reserve): one autocommit INSERT on the same unique key (merchant, channel,
 * channel_trade_no), the authenticated answer as raw_body, source 'query'. A duplicate key
 * means the notification (or an earlier query) already told paycb: nothing was lost. A new
 * row is published on <prefix>.callbacks as ingest publishes (a failed publish is recovered
 * by the retrier after retry.initial_lease_s), counted and alerted (notification_lost): the
 * processors apply it through the same state machine, and a notification arriving later is a
 * duplicate at ingest. A forged or unreadable answer is never believed; the order is queried
 * again on the ladder.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "digest.h"
#include "log.h"
#include "metrics.h"
#include "money.h"
#include "msg.h"
#include "reconciler.h"

/* publish - the reserved row to the processors, as ingest publishes a notification. */
static void
publish(struct reconciler *r, const struct recon_order *w, const char *channel,
        unsigned long long id)
{
	struct msg_callback m;
	char key[256], val[512], err[256], cb[32];
	int klen, vlen;

	memset(&m, 0, sizeof(m));
	m.cblog = CBLOG_PAY;
	m.id = id;
	m.attempt = 1;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", w->merchant);
	snprintf(m.channel, sizeof(m.channel), "%s", channel);
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", w->order);
	cblog_ref(cb, sizeof(cb), CBLOG_PAY, id);
	klen = msg_callback_key(&m, key, sizeof(key));
	vlen = msg_callback_encode(&m, val, sizeof(val));
	if (klen < 0 || vlen < 0 ||
	    kq_produce_wait(r->kp, r->topic_main, key, (size_t)klen, val, (size_t)vlen,
	                    (int)r->cf->kafka.delivery_timeout_ms, err, sizeof(err)) != 0) {
		/* Stored: the retrier publishes it once its initial lease runs out. */
		log_warn(cb, "event=publish_failed source=query error=\"%s\"",
		         klen < 0 || vlen < 0 ? "cannot encode" : err);
		return;
	}
	log_info(cb, "event=published source=query topic=%s", r->topic_main);
}

/* reserve - a verified paid answer into pay_callback_log; 1 when new, 0 duplicate, -1. */
static int
reserve(struct reconciler *r, struct chan_client *cl, const struct recon_order *w,
        const char *channel, const struct chan_payment *p, unsigned long long *id)
{
	char amount[40], sha[65];
	size_t alen = 0;
	const char *ans = chan_last_answer(cl, &alen);
	int scale = money_currency_scale(p->currency);
	struct cblog_row row = {.cblog = CBLOG_PAY,
	                        .merchant_id = w->merchant,
	                        .channel = channel,
	                        .channel_trade_no = p->channel_trade_no,
	                        .out_trade_no = w->order,
	                        .event_id = "",
	                        .event_type = "query",
	                        .status = p->status,
	                        .amount = amount,
	                        .currency = p->currency,
	                        .body = ans,
	                        .body_len = alen,
	                        .body_sha256 = sha,
	                        .lease_s = r->cf->retry.initial_lease_s,
	                        .source = "query"};
	enum db_rc rc;

	if (ans == NULL || scale < 0 ||
	    money_format(p->amount_minor, scale, amount, sizeof(amount)) != 0 ||
	    digest_sha256_hex(ans, alen, sha) != 0)
		return -1;
	/* One autocommit INSERT on ingest's unique key: the only deduplication there is. */
	rc = cblog_reserve(&r->db, &row, id);
	if (rc == DB_DUPLICATE)
		return 0;
	return rc == DB_OK ? 1 : -1;
}

/* query_one - every channel of the order's merchant; 1 when all answered, 0 if some failed. */
static int
query_one(struct reconciler *r, const struct recon_order *w, struct recon_counts *c)
{
	struct recon_merchant *m = recon_merchant_find(r, w->merchant);
	int answered = 1;

	for (int k = 0; m != NULL && k < RECON_NCH; k++) {
		struct chan_order_ref ref = {w->order, NULL};
		struct chan_payment p;
		struct chan_result res;
		unsigned long long id = 0;
		char rid[32], detail[300];
		const char *channel = chan_id_name((enum chan_id)(k + 1));
		long long t0 = clock_mono_ms();
		int got;

		if (m->cl[k] == NULL)
			continue;
		chan_query_payment(m->cl[k], &ref, &p, &res);
		recon_count_call((enum chan_id)(k + 1), EP_QUERY, &res,
		                 (clock_mono_ms() - t0) * 1000);
		snprintf(rid, sizeof(rid), "o%lld", w->id);
		if (res.outcome != CHAN_OK) {
			/* Not found is an answer (the user never started paying there). */
			if (res.outcome == CHAN_FINAL &&
			    (strcmp(res.code, "ORDER_NOT_EXIST") == 0 ||
			     strcmp(res.code, "ACQ.TRADE_NOT_EXIST") == 0))
				continue;
			answered = 0;
			log_msg(
			    res.outcome == CHAN_FORGED ? LOG_LVL_ERROR : LOG_LVL_WARN, rid,
			    "event=query_failed merchant=%s order=%s channel=%s outcome=%s code=%s "
			    "http=%d",
			    w->merchant, w->order, channel, chan_outcome_name(res.outcome),
			    res.code, res.http_status);
			continue;
		}
		if (p.state != CHAN_PAY_PAID)
			continue;
		if ((got = reserve(r, m->cl[k], w, channel, &p, &id)) < 0) {
			answered = 0;
			continue;
		}
		if (got == 0) {
			log_info(rid, "event=query_paid_known merchant=%s order=%s channel=%s",
			         w->merchant, w->order, channel);
			continue;
		}
		c->recovered++;
		metrics_inc(recon_mx.recovered, 1);
		snprintf(detail, sizeof(detail),
		         "payment %s of %s (%s) found by query, no notification received: cb%llu",
		         p.channel_trade_no, w->order, channel, id);
		if (recon_alert(r, "notification_lost", w->merchant, w->order, detail) != DB_OK)
			log_warn(rid, "event=alert_failed kind=notification_lost");
		log_error(rid,
		          "event=alert kind=notification_lost merchant=%s order=%s "
		          "channel=%s callback=cb%llu",
		          w->merchant, w->order, channel, id);
		publish(r, w, channel, id);
	}
	return answered;
}

int
recon_queries(struct reconciler *r, struct recon_counts *c, int *full)
{
	const struct cfg_ints *steps = &r->cf->reconciler.query_steps_s;
	struct db_in in[3] = {DBI_I64(steps->n), DBI_I64(steps->v[0]),
	                      DBI_I64(r->cf->reconciler.batch)};
	struct recon_orders b;
	int rc = 0;

	if (recon_orders_select(
	        r,
	        "SELECT id, merchant_id, out_trade_no, recon_step, CAST(recon_next_at AS CHAR) "
	        "FROM orders WHERE " RECON_QUERY_DUE " LIMIT ?",
	        in, 3, &b, full) != 0) {
		rc = -1;
		goto done;
	}
	for (int i = 0; i < b.n; i++) {
		struct recon_order *w = &b.v[i];
		struct db_in l[4] = {DBI_I64(r->cf->reconciler.lease_s), DBI_I64(w->id),
		                     DBI_I64(w->step), w->next_null ? DBI_NULL : DBI_STR(w->next)};
		unsigned long long n = 0;
		long long next;

		if (db_exec(
		        &r->db,
		        "UPDATE orders SET recon_next_at = NOW(3) + INTERVAL ? SECOND WHERE id = ? "
		        "AND status = 'PENDING' AND recon_step = ? AND recon_next_at <=> ?",
		        l, 4, &n, NULL) != DB_OK) {
			rc = -1;
			break;
		}
		if (n != 1)
			continue;
		c->orders_queried++;
		if (query_one(r, w, c)) {
			/* The next step counts from creation; a step already past comes at once. */
			struct db_in a[4];

			next =
			    w->step + 1 < steps->n ? steps->v[w->step + 1] : steps->v[steps->n - 1];
			a[0] = DBI_I64(next);
			a[1] = DBI_I64(w->id);
			a[2] = DBI_I64(w->step);
			if (db_exec(
			        &r->db,
			        "UPDATE orders SET recon_step = recon_step + 1, recon_next_at = "
			        "created_at + INTERVAL ? SECOND WHERE id = ? AND recon_step = ?",
			        a, 3, NULL, NULL) != DB_OK)
				rc = -1;
		} else {
			struct db_in a[2] = {DBI_I64(recon_ladder_delay(r->cf, 1)), DBI_I64(w->id)};

			if (db_exec(&r->db,
			            "UPDATE orders SET recon_next_at = NOW(3) + INTERVAL ? SECOND "
			            "WHERE "
			            "id = ?",
			            a, 2, NULL, NULL) != DB_OK)
				rc = -1;
		}
	}
done:
	recon_orders_free(&b);
	return rc;
}
