/*
 * sim_notify - the notifications themselves: WeChat Pay TRANSACTION.SUCCESS,
 * REFUND.SUCCESS and REFUND.ABNORMAL, Alipay trade_status_sync (payments, partial refunds with
 * TRADE_SUCCESS and full ones with TRADE_CLOSED, refund_fee cumulative), Stripe
 * payment_intent.succeeded, refund.created, charge.refunded and a refund's failure
 * (refund.failed, refund.updated, charge.refund.updated), live-mode events, a Connect
 * account's event and a Dashboard refund without metadata, with the fields the channels document
 * (docs/specs/channel-specs.md), signed by the channel library's signers (chan/chan_notify.h) so
 * they verify through exactly the code real traffic meets.
 *
 * A notification is signed once and re-sent byte for byte, as Alipay re-sends one notify_id.
 * A Stripe re-push carries a fresh Stripe-Signature timestamp, as Stripe signs each attempt;
 * a WeChat Pay one is signed again once its timestamp nears the five-minute tolerance.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_notify.h"
#include "money.h"
#include "sim.h"

/* A re-push older than this is signed again (WeChat Pay's tolerance is 300 s). */
#define SIM_RESIGN_AFTER_S 240

/* sim_answer_ok - whether the channel takes the answer as received: its own rule, from the
 * channel library's table (Alipay reads only the body, exactly "success"). */
int
sim_answer_ok(enum sim_ch ch, const struct sim_answer *a)
{
	int i = chan_notify_find(sim_ch_name(ch));

	return i >= 0 && a->status > 0 &&
	       chan_notify_table[i]->acknowledged((unsigned)a->status, a->body);
}

/* beijing - a time as Beijing local time in format (the channels' own clocks). */
static void
beijing(time_t t, const char *format, char *buf, size_t len)
{
	time_t local = t + 8 * 3600;
	struct tm tm;

	if (gmtime_r(&local, &tm) == NULL || strftime(buf, len, format, &tm) == 0)
		snprintf(buf, len, "1970-01-01");
}

static char *
dump(json_t *j)
{
	char *s = j != NULL ? json_dumps(j, JSON_COMPACT) : NULL;

	json_decref(j);
	return s;
}

static char *
wx_plaintext(const struct sim_merchant *m, const struct sim_note *n, time_t now)
{
	int abnormal = n->rstatus == RS_ABNORMAL;
	json_t *refund;
	char when[40];

	beijing(now, "%Y-%m-%dT%H:%M:%S+08:00", when, sizeof(when));
	if (!n->refund)
		return dump(json_pack(
		    "{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:s}, "
		    "s:{s:I, s:I, s:s, s:s}}",
		    "mchid", m->mchid, "appid", "wx8888888888888888", "out_trade_no", n->order,
		    "transaction_id", n->trade, "trade_type", "NATIVE", "trade_state", "SUCCESS",
		    "trade_state_desc", "\xe6\x94\xaf\xe4\xbb\x98\xe6\x88\x90\xe5\x8a\x9f",
		    "bank_type", "OTHERS", "attach", "", "success_time", when, "payer", "openid",
		    "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o", "amount", "total", (json_int_t)n->amount,
		    "payer_total", (json_int_t)n->amount, "currency", "CNY", "payer_currency",
		    "CNY"));
	refund =
	    json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:I, s:I, s:I, s:I}}", "mchid",
	              m->mchid, "out_trade_no", n->order, "transaction_id", n->trade,
	              "out_refund_no", n->refund_no, "refund_id", n->refund_id, "refund_status",
	              abnormal ? "ABNORMAL" : "SUCCESS", "user_received_account",
	              "\xe6\x94\xaf\xe4\xbb\x98\xe7\x94\xa8\xe6\x88\xb7\xe9\x9b\xb6\xe9\x92\xb1",
	              "amount", "total", (json_int_t)n->total, "refund", (json_int_t)n->amount,
	              "payer_total", (json_int_t)n->total, "payer_refund", (json_int_t)n->amount);
	/* Only a refund that succeeded has a success time. */
	if (refund != NULL && !abnormal)
		json_object_set_new(refund, "success_time", json_string(when));
	return dump(refund);
}

static int
sign_wx(const struct sim_merchant *m, const struct sim_note *n, time_t now, struct sim_blob *b)
{
	int pub = (n->wx_pubkey && m->wx_pub_key != NULL) || m->wx_cert_key == NULL;
	EVP_PKEY *key = pub ? m->wx_pub_key : m->wx_cert_key;
	const char *serial = pub ? m->wx_pubkey_id : m->wx_serial;
	char *plain = wx_plaintext(m, n, now);
	struct chan_signer s = {key, serial, m->apiv3, 32};
	struct chan_sign_in in = {!n->refund                  ? "TRANSACTION.SUCCESS"
	                          : n->rstatus == RS_ABNORMAL ? "REFUND.ABNORMAL"
	                                                      : "REFUND.SUCCESS",
	                          plain, now};
	struct chan_signed out;
	int rc = -1;

	if (plain != NULL && notify_wx_ops.sign(&s, &in, &out) == 0) {
		b->body = out.body;
		b->len = out.len;
		snprintf(b->headers, sizeof(b->headers), "%s", out.headers);
		rc = 0;
	}
	free(plain);
	return rc;
}

static int
sign_ali(const struct sim_merchant *m, const struct sim_note *n, time_t now, struct sim_blob *b)
{
	char when[32], paid[32], amount[32], fee[32], nid[96], bills[128];
	const char *k[24], *v[24];
	size_t c = 0;

	beijing(now, "%Y-%m-%d %H:%M:%S", when, sizeof(when));
	beijing(now - 2, "%Y-%m-%d %H:%M:%S", paid, sizeof(paid));
	if (money_format(n->refund ? n->total : n->amount, 2, amount, sizeof(amount)) != 0 ||
	    money_format(n->cumulative, 2, fee, sizeof(fee)) != 0)
		return -1;
	/* Alipay reuses one notify_id for every re-send of a notification. */
	snprintf(nid, sizeof(nid), "%s%s%d", n->refund ? "r" : "p", n->trade, n->seq);
	snprintf(bills, sizeof(bills), "[{\"amount\":\"%s\",\"fundChannel\":\"ALIPAYACCOUNT\"}]",
	         amount);
#define P(key, val) (k[c] = (key), v[c] = (val), c++)
	P("notify_time", when);
	P("notify_type", "trade_status_sync");
	P("notify_id", nid);
	P("app_id", m->app_id);
	P("auth_app_id", m->app_id);
	P("charset", "utf-8");
	P("version", "1.0");
	P("trade_no", n->trade);
	P("out_trade_no", n->order);
	P("buyer_id", "2088102177846880");
	P("seller_id", "2088101106499364");
	P("total_amount", amount);
	P("subject", "paycb-sim \xe8\xae\xa2\xe5\x8d\x95 & = + %");
	P("gmt_create", paid);
	P("gmt_payment", paid);
	if (!n->refund) {
		P("trade_status", "TRADE_SUCCESS");
		P("receipt_amount", amount);
		P("buyer_pay_amount", amount);
		P("invoice_amount", amount);
		P("point_amount", "0.00");
		P("fund_bill_list", bills);
	} else {
		/* A partial refund re-sends TRADE_SUCCESS; the full one closes the trade. */
		P("trade_status", n->full ? "TRADE_CLOSED" : "TRADE_SUCCESS");
		P("out_biz_no", n->refund_no);
		P("refund_fee", fee);
		P("gmt_refund", when);
		if (n->full)
			P("gmt_close", when);
	}
#undef P
	if (notify_ali_sign(m->ali_key, k, v, c, &b->body) != 0)
		return -1;
	b->len = strlen(b->body);
	snprintf(b->headers, sizeof(b->headers),
	         "Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n");
	return 0;
}

/* stripe_type - the event type of n: its failure's own type, or by the family */
static const char *
stripe_type(const struct sim_note *n)
{
	if (!n->refund)
		return "payment_intent.succeeded";
	if (n->stripe_type != NULL)
		return n->stripe_type;
	return n->stripe_cumulative ? "charge.refunded" : "refund.created";
}

/* stripe_tag - a letter that keeps the event ids of one refund's events apart */
static char
stripe_tag(const struct sim_note *n)
{
	if (!n->refund)
		return n->account[0] != '\0' ? 'a' : 'p';
	if (n->rstatus != RS_SUCCESS)
		return 'f';
	return n->no_metadata ? 'd' : n->stripe_cumulative ? 'c' : 'r';
}

static int
sign_stripe(const struct sim_merchant *m, const struct sim_note *n, time_t now, struct sim_blob *b)
{
	const char *status = n->rstatus == RS_FAILED     ? "failed"
	                     : n->rstatus == RS_CANCELED ? "canceled"
	                                                 : "succeeded";
	char evt[96], cur[4];
	json_t *meta = n->no_metadata ? json_object() : json_pack("{s:s}", m->order_key, n->order);
	json_t *obj, *ev;

	for (int i = 0; i < 3; i++)
		cur[i] = (char)(n->currency[i] | 0x20); /* Stripe's codes are lower case */
	cur[3] = '\0';
	/* A Stripe event keeps its id across re-pushes; the body is signed once. */
	snprintf(evt, sizeof(evt), "evt_%c%s_%d", stripe_tag(n), n->trade + 3, n->seq);
	if (!n->refund)
		obj = json_pack("{s:s, s:s, s:I, s:I, s:s, s:s, s:o, s:s, s:s}", "id", n->trade,
		                "object", "payment_intent", "amount", (json_int_t)n->amount,
		                "amount_received", (json_int_t)n->amount, "currency", cur,
		                "latest_charge", n->charge, "metadata", meta, "status", "succeeded",
		                "description", "paycb-sim order");
	else if (n->stripe_cumulative)
		obj =
		    json_pack("{s:s, s:s, s:I, s:I, s:b, s:s, s:s, s:o, s:s}", "id", n->charge,
		              "object", "charge", "amount", (json_int_t)n->total, "amount_refunded",
		              (json_int_t)n->cumulative, "refunded", n->full, "currency", cur,
		              "payment_intent", n->trade, "metadata", meta, "status", "succeeded");
	else
		obj = json_pack("{s:s, s:s, s:I, s:s, s:s, s:s, s:o, s:s, s:s}", "id", n->refund_id,
		                "object", "refund", "amount", (json_int_t)n->amount, "charge",
		                n->charge, "currency", cur, "payment_intent", n->trade, "metadata",
		                meta, "status", status, "reason", "requested_by_customer");
	if (obj == NULL)
		return -1;
	if (n->rstatus == RS_FAILED)
		json_object_set_new(obj, "failure_reason", json_string("expired_or_canceled_card"));
	/* The simulator is a test environment: its events say livemode false, as Stripe's test
	 * mode does, and its merchants are configured with stripe.test_mode (sim_conf.c). */
	ev = json_pack("{s:s, s:s, s:s, s:I, s:b, s:i, s:{s:n, s:n}, s:s, s:{s:o}}", "id", evt,
	               "object", "event", "api_version", "2024-06-20", "created", (json_int_t)now,
	               "livemode", 0, "pending_webhooks", 1, "request", "id", "idempotency_key",
	               "type", stripe_type(n), "data", "object", obj);
	if (ev != NULL && n->account[0] != '\0')
		json_object_set_new(ev, "account", json_string(n->account));
	if ((b->body = dump(ev)) == NULL)
		return -1;
	b->len = strlen(b->body);
	snprintf(b->headers, sizeof(b->headers),
	         "Content-Type: application/json; charset=utf-8\r\n");
	return 0;
}

void
sim_blob_put(struct sim_blob *b)
{
	if (b == NULL || atomic_fetch_sub(&b->refs, 1) != 1)
		return;
	free(b->body);
	free(b);
}

int
sim_note_sign(const struct sim_merchant *m, struct sim_note *n, time_t now)
{
	struct sim_blob *b = calloc(1, sizeof(*b));
	int rc;

	if (b == NULL)
		return -1;
	atomic_init(&b->refs, 1);
	b->ts = now;
	rc = n->ch == SIM_WX    ? sign_wx(m, n, now, b)
	     : n->ch == SIM_ALI ? sign_ali(m, n, now, b)
	                        : sign_stripe(m, n, now, b);
	if (rc != 0) {
		sim_blob_put(b);
		return -1;
	}
	pthread_mutex_lock(&n->mu);
	sim_blob_put(n->blob);
	n->blob = b;
	pthread_mutex_unlock(&n->mu);
	return 0;
}

struct sim_blob *
sim_note_get(const struct sim_merchant *m, struct sim_note *n, time_t now)
{
	struct sim_blob *b;
	int stale;

	pthread_mutex_lock(&n->mu);
	stale = n->blob == NULL || (n->ch == SIM_WX && now - n->blob->ts > SIM_RESIGN_AFTER_S);
	pthread_mutex_unlock(&n->mu);
	if (stale && sim_note_sign(m, n, now) != 0)
		return NULL;
	pthread_mutex_lock(&n->mu);
	b = n->blob;
	atomic_fetch_add(&b->refs, 1);
	pthread_mutex_unlock(&n->mu);
	return b;
}

int
sim_note_headers(const struct sim_merchant *m, const struct sim_note *n, const struct sim_blob *b,
                 time_t now, char *buf, size_t len)
{
	char sig[256], other[256];
	const char *v1;
	int k;

	if (n->ch != SIM_STRIPE) {
		k = snprintf(buf, len, "%s", b->headers);
		return k < 0 || (size_t)k >= len ? -1 : 0;
	}
	/* The newest secret signs; during a roll Stripe adds a v1 under the other one. */
	if (notify_stripe_sign_header(m->stripe[m->nstripe - 1], m->stripe_len[m->nstripe - 1],
	                              (const uint8_t *)b->body, b->len, now, sig, sizeof(sig)) != 0)
		return -1;
	other[0] = '\0';
	if (n->stripe_both && m->nstripe > 1) {
		if (notify_stripe_sign_header(m->stripe[0], m->stripe_len[0],
		                              (const uint8_t *)b->body, b->len, now, other,
		                              sizeof(other)) != 0 ||
		    (v1 = strstr(other, ",v1=")) == NULL)
			return -1;
		memmove(other, v1, strlen(v1) + 1);
	}
	k = snprintf(buf, len, "%sStripe-Signature: %s%s\r\n", b->headers, sig, other);
	return k < 0 || (size_t)k >= len ? -1 : 0;
}
