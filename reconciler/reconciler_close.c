/*
 * reconciler_close - closes at the channels the orders a merchant closed, so a user can no
 * longer pay them (the root of paid-after-close).
 *
 * paycb learns of a close from `paycbctl order close` (or the merchant's order service doing
 * the same): orders.status CLOSED and close_requested_at set, one conditional UPDATE on a
 * PENDING order. A due order (close_requested_at set, channel_closed_at NULL, recon_next_at
 * due or NULL) is claimed by the conditional UPDATE of recon_next_at naming the value read,
 * then closed at every channel its merchant has API credentials for. A close is harmless to
 * repeat, so a failed one simply comes again on reconciler.refund_ladder_s. "Already paid"
 * (WeChat ORDERPAID, Stripe order_paid) and "no such order" end the job for that channel: the
 * payment's notification, or the reconciliation query, brings the payment to the state
 * machine, which refunds a payment after close. channel_closed_at marks the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "reconciler.h"

/* settled - a close answer that ends the job for the channel. */
static int
settled(const struct chan_result *res)
{
	static const char *const done[] = {
	    "ORDERPAID",  "ORDER_CLOSED",        "ORDER_NOT_EXIST",
	    "order_paid", "ACQ.TRADE_NOT_EXIST", "ACQ.TRADE_STATUS_ERROR",
	    NULL};

	if (res->outcome == CHAN_OK)
		return 1;
	if (res->outcome != CHAN_FINAL)
		return 0;
	for (int i = 0; done[i] != NULL; i++)
		if (strcmp(res->code, done[i]) == 0)
			return 1;
	return 0;
}

/* close_one - every channel of the order's merchant; 1 when each is settled. */
static int
close_one(struct reconciler *r, const struct recon_order *w, struct recon_counts *c)
{
	struct recon_merchant *m = recon_merchant_find(r, w->merchant);
	char rid[32];
	int all = 1;

	snprintf(rid, sizeof(rid), "o%lld", w->id);
	for (int k = 0; m != NULL && k < RECON_NCH; k++) {
		struct chan_order_ref ref = {w->order, NULL};
		struct chan_result res;
		long long t0 = clock_mono_ms();

		if (m->cl[k] == NULL)
			continue;
		chan_close(m->cl[k], &ref, &res);
		recon_count_call((enum chan_id)(k + 1), EP_CLOSE, &res,
		                 (clock_mono_ms() - t0) * 1000);
		c->closes++;
		log_msg(settled(&res) ? LOG_LVL_INFO : LOG_LVL_WARN, rid,
		        "event=close merchant=%s order=%s channel=%s outcome=%s code=%s http=%d",
		        w->merchant, w->order, chan_id_name((enum chan_id)(k + 1)),
		        chan_outcome_name(res.outcome), res.code[0] ? res.code : "-",
		        res.http_status);
		if (!settled(&res))
			all = 0;
	}
	return all;
}

int
recon_closes(struct reconciler *r, struct recon_counts *c, int *full)
{
	struct db_in in[1] = {DBI_I64(r->cf->reconciler.batch)};
	struct recon_orders b;
	int rc = 0;

	if (recon_orders_select(
	        r,
	        "SELECT id, merchant_id, out_trade_no, recon_step, CAST(recon_next_at AS CHAR) "
	        "FROM orders WHERE " RECON_CLOSE_DUE " LIMIT ?",
	        in, 1, &b, full) != 0) {
		rc = -1;
		goto done;
	}
	for (int i = 0; i < b.n; i++) {
		struct recon_order *w = &b.v[i];
		struct db_in l[3] = {DBI_I64(r->cf->reconciler.lease_s), DBI_I64(w->id),
		                     w->next_null ? DBI_NULL : DBI_STR(w->next)};
		struct db_in a[3];
		unsigned long long n = 0;

		if (db_exec(
		        &r->db,
		        "UPDATE orders SET recon_next_at = NOW(3) + INTERVAL ? SECOND WHERE id = ? "
		        "AND channel_closed_at IS NULL AND recon_next_at <=> ?",
		        l, 3, &n, NULL) != DB_OK) {
			rc = -1;
			break;
		}
		if (n != 1)
			continue;
		if (close_one(r, w, c)) {
			a[0] = DBI_I64(w->id);
			if (db_exec(&r->db,
			            "UPDATE orders SET channel_closed_at = NOW(3) WHERE id = ? AND "
			            "channel_closed_at IS NULL",
			            a, 1, &n, NULL) != DB_OK)
				rc = -1;
			else if (n == 1) {
				c->closed++;
				metrics_inc(recon_mx.closed, 1);
			}
		} else {
			/* recon_step counts the failed close attempts of a closed order. */
			a[0] = DBI_I64(recon_ladder_delay(r->cf, w->step + 1));
			a[1] = DBI_I64(w->id);
			if (db_exec(
			        &r->db,
			        "UPDATE orders SET recon_step = recon_step + 1, recon_next_at = "
			        "NOW(3) "
			        "+ INTERVAL ? SECOND WHERE id = ? AND channel_closed_at IS NULL",
			        a, 2, NULL, NULL) != DB_OK)
				rc = -1;
		}
	}
done:
	recon_orders_free(&b);
	return rc;
}
