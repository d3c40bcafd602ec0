/*
 * chan_notify_stripe - Stripe as a channel (notify_stripe_ops): verification and parsing
 * of its webhook events, its answers, its endpoint secrets, and the matching Stripe-Signature
 * signer for the simulator and tests.
 *
 * The header is "t=<unix>,v1=<hex>[,v1=<hex>...]" plus keys we ignore (v0, unknown ones). The
 * MAC is HMAC-SHA256(endpoint secret as given, "<t>.<raw body>"), compared in constant time
 * with every v1 under every configured secret, so secrets can be rolled. As in all three
 * official SDKs the signature is checked first, then the age: older than the tolerance is
 * rejected (300 s old passes, 301 s fails) and timestamps in the future are not. v1 hex is
 * decoded before comparing, as stripe-go does, so upper-case hex is accepted. See
 * docs/specs/channel-specs.md section 3.
 */
#include "chan_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chan_conf.h"
#include "conf.h"
#include "crypto.h"

#define STRIPE_HEADER_MAX 4096
#define STRIPE_V1_MAX     8
#define STRIPE_T_DIGITS   18

struct stripe_hdr {
	int64_t t;
	int have_t;
	uint8_t v1[STRIPE_V1_MAX][CRYPTO_SHA256_LEN];
	int nv1;
};

/*
 * stripe_header - parses the comma-separated items. Like stripe-go, an item that is not
 * exactly one key=value pair makes the whole header invalid.
 */
static enum verr
stripe_header(const char *s, size_t n, struct stripe_hdr *h, char *reason, size_t rlen)
{
	size_t pos = 0;

	memset(h, 0, sizeof(*h));
	while (pos <= n) {
		const char *item = s + pos, *comma = memchr(item, ',', n - pos), *eq;
		size_t ilen = comma != NULL ? (size_t)(comma - item) : n - pos, klen, vlen;
		const char *val;

		eq = memchr(item, '=', ilen);
		if (eq == NULL || memchr(eq + 1, '=', ilen - (size_t)(eq - item) - 1) != NULL) {
			snprintf(reason, rlen, "Stripe-Signature item is not key=value");
			return VERR_HEADER;
		}
		klen = (size_t)(eq - item);
		val = eq + 1;
		vlen = ilen - klen - 1;
		if (klen == 1 && item[0] == 't') {
			if (h->have_t || vlen == 0 || vlen > STRIPE_T_DIGITS) {
				snprintf(reason, rlen,
				         "Stripe-Signature timestamp duplicated or malformed");
				return VERR_HEADER;
			}
			for (size_t i = 0; i < vlen; i++) {
				if (val[i] < '0' || val[i] > '9') {
					snprintf(reason, rlen,
					         "Stripe-Signature timestamp malformed");
					return VERR_HEADER;
				}
				h->t = h->t * 10 + (val[i] - '0');
			}
			h->have_t = 1;
		} else if (klen == 2 && item[0] == 'v' && item[1] == '1') {
			size_t dlen;

			if (h->nv1 >= STRIPE_V1_MAX || vlen != 2 * CRYPTO_SHA256_LEN ||
			    crypto_hex_decode(val, vlen, h->v1[h->nv1], CRYPTO_SHA256_LEN, &dlen) !=
			        0) {
				snprintf(reason, rlen, "Stripe-Signature v1 malformed or too many");
				return VERR_HEADER;
			}
			h->nv1++;
		}
		if (comma == NULL)
			break;
		pos += ilen + 1;
	}
	if (!h->have_t) {
		snprintf(reason, rlen, "Stripe-Signature has no timestamp");
		return VERR_HEADER;
	}
	if (h->nv1 == 0) {
		snprintf(reason, rlen, "Stripe-Signature has no v1 signature");
		return VERR_HEADER;
	}
	return VERR_OK;
}

/*
 * stripe_order - the order number from metadata[key], or else from fallback (may be NULL). An
 * object without one (a refund made in the Dashboard, a PaymentIntent of an invoice) is
 * authentic but cannot be applied: unroutable, reason no_order.
 */
static enum verr
stripe_order(const json_t *obj, const char *key, const char *fallback, struct notify *out,
             char *reason, size_t rlen)
{
	const json_t *md = json_object_get(obj, "metadata");
	const json_t *v = json_is_object(md) ? json_object_get(md, key) : NULL;

	if (json_is_string(v) && json_string_length(v) > 0)
		return notify_json_str(md, "metadata", key, out->out_trade_no,
		                       sizeof(out->out_trade_no), 1, reason, rlen);
	if (fallback != NULL && json_is_string(v = json_object_get(obj, fallback)) &&
	    json_string_length(v) > 0)
		return notify_json_str(obj, NULL, fallback, out->out_trade_no,
		                       sizeof(out->out_trade_no), 1, reason, rlen);
	return notify_unroutable(out, "no_order");
}

/*
 * stripe_binding - NULL when the event is this merchant's to apply, else the unroutable
 * reason: an event of a Connect account not on the allow-list, or a test-mode event
 * (livemode false) for a merchant not in test mode. An event without livemode counts as live.
 */
static const char *
stripe_binding(const struct stripe_merchant *m, const json_t *ev)
{
	const json_t *acct = json_object_get(ev, "account");

	if (acct != NULL && !json_is_null(acct) &&
	    (!json_is_string(acct) || !notify_listed(m->accounts[0], sizeof(m->accounts[0]),
	                                             m->naccounts, json_string_value(acct))))
		return "foreign_account";
	if (json_is_false(json_object_get(ev, "livemode")) && !m->test_mode)
		return "test_mode";
	return NULL;
}

/* stripe_refund_event - whether type carries a Refund object as data.object. */
static int
stripe_refund_event(const char *type)
{
	return strcmp(type, "refund.created") == 0 || strcmp(type, "refund.updated") == 0 ||
	       strcmp(type, "refund.failed") == 0 || strcmp(type, "charge.refund.updated") == 0;
}

/* stripe_ref - copies obj[key] if it is a string, else obj.id: the trade a refund belongs to. */
static enum verr
stripe_ref(const json_t *obj, const char *key, char *dst, size_t cap, char *reason, size_t rlen)
{
	if (json_is_string(json_object_get(obj, key)))
		return notify_json_str(obj, NULL, key, dst, cap, 1, reason, rlen);
	return notify_json_str(obj, NULL, "id", dst, cap, 1, reason, rlen);
}

/*
 * stripe_classify - the kind of the event's type; a checkout session or a refund object whose
 * status moves no money yet is NOTIFY_IGNORED, as is every other type.
 */
static enum verr
stripe_classify(const json_t *obj, struct notify *out, char *reason, size_t rlen)
{
	const char *type = out->event_type;
	enum verr e;

	out->kind = NOTIFY_IGNORED;
	if (strcmp(type, "payment_intent.succeeded") == 0 ||
	    strcmp(type, "checkout.session.completed") == 0 ||
	    strcmp(type, "checkout.session.async_payment_succeeded") == 0)
		out->kind = NOTIFY_PAYMENT;
	else if (strcmp(type, "charge.refunded") == 0 || stripe_refund_event(type))
		out->kind = NOTIFY_REFUND;
	else
		return VERR_OK;
	if (!json_is_object(obj)) {
		snprintf(reason, rlen, "missing data.object");
		return VERR_BODY;
	}
	if (strncmp(type, "checkout.session.", 17) == 0) {
		/* A delayed payment method completes the session unpaid; wait for the money. */
		if ((e = notify_json_str(obj, "data.object", "payment_status", out->status,
		                         sizeof(out->status), 1, reason, rlen)))
			return e;
		if (strcmp(out->status, "paid") != 0)
			out->kind = NOTIFY_IGNORED;
	} else if (stripe_refund_event(type)) {
		/*
		 * A refund object's status is final once succeeded, failed or canceled (a
		 * succeeded refund can still fail later); pending and requires_action move no
		 * money yet. The status goes to the processor verbatim.
		 */
		if ((e = notify_json_str(obj, "data.object", "status", out->status,
		                         sizeof(out->status), 1, reason, rlen)))
			return e;
		if (strcmp(out->status, "succeeded") != 0 && strcmp(out->status, "failed") != 0 &&
		    strcmp(out->status, "canceled") != 0)
			out->kind = NOTIFY_IGNORED;
	}
	return VERR_OK;
}

/* stripe_charge_refunded - a charge's cumulative refund state. */
static enum verr
stripe_charge_refunded(const json_t *obj, const char *key, struct notify *out, char *reason,
                       size_t rlen)
{
	char tmp[NOTIFY_STR];
	enum verr e;

	/* amount_refunded is cumulative; charge id plus that amount names this state. */
	out->refund_cumulative = 1;
	if ((e = notify_json_str(obj, "data.object", "id", tmp, sizeof(tmp), 1, reason, rlen)) ||
	    (e = notify_json_amount(obj, "data.object", "amount_refunded", &out->amount_minor,
	                            reason, rlen)) ||
	    (e = notify_json_str(obj, "data.object", "status", out->status, sizeof(out->status), 0,
	                         reason, rlen)))
		return e;
	if (json_is_integer(json_object_get(obj, "amount")) &&
	    (e = notify_json_amount(obj, "data.object", "amount", &out->order_total_minor, reason,
	                            rlen)))
		return e;
	if ((size_t)snprintf(out->refund_no, sizeof(out->refund_no), "%s:%lld", tmp,
	                     (long long)out->amount_minor) >= sizeof(out->refund_no)) {
		snprintf(reason, rlen, "data.object.id too long for a refund id");
		return VERR_BODY;
	}
	/* A charge made without a PaymentIntent is its own trade. */
	if ((e = stripe_ref(obj, "payment_intent", out->channel_trade_no,
	                    sizeof(out->channel_trade_no), reason, rlen)))
		return e;
	return stripe_order(obj, key, NULL, out, reason, rlen);
}

static enum verr
stripe_parse(const struct stripe_merchant *m, const json_t *ev, struct notify *out, char *reason,
             size_t rlen)
{
	const char *key = m->order_key[0] != '\0' ? m->order_key : "order_id";
	const json_t *obj = json_object_get(json_object_get(ev, "data"), "object");
	const char *type = out->event_type, *why;
	char currency[8];
	enum verr e;

	if ((e = stripe_classify(obj, out, reason, rlen)) != VERR_OK || out->kind == NOTIFY_IGNORED)
		return e;
	if ((why = stripe_binding(m, ev)) != NULL)
		return notify_unroutable(out, why);
	if ((e = notify_json_str(obj, "data.object", "currency", currency, sizeof(currency), 1,
	                         reason, rlen)) ||
	    (e = notify_currency(currency, out->currency, reason, rlen)))
		return e;
	if (strcmp(type, "payment_intent.succeeded") == 0) {
		const json_t *recv = json_object_get(obj, "amount_received");

		if ((e = notify_json_str(obj, "data.object", "id", out->channel_trade_no,
		                         sizeof(out->channel_trade_no), 1, reason, rlen)) ||
		    (e = notify_json_str(obj, "data.object", "status", out->status,
		                         sizeof(out->status), 0, reason, rlen)) ||
		    (e = notify_json_amount(obj, "data.object",
		                            recv != NULL && !json_is_null(recv) ? "amount_received"
		                                                                : "amount",
		                            &out->amount_minor, reason, rlen)))
			return e;
		return stripe_order(obj, key, NULL, out, reason, rlen);
	}
	if (strncmp(type, "checkout.session.", 17) == 0) {
		if ((e = stripe_ref(obj, "payment_intent", out->channel_trade_no,
		                    sizeof(out->channel_trade_no), reason, rlen)) ||
		    (e = notify_json_amount(obj, "data.object", "amount_total", &out->amount_minor,
		                            reason, rlen)))
			return e;
		return stripe_order(obj, key, "client_reference_id", out, reason, rlen);
	}
	if (strcmp(type, "charge.refunded") == 0)
		return stripe_charge_refunded(obj, key, out, reason, rlen);
	/* A refund object: this refund's own amount, not a total. */
	if ((e = notify_json_str(obj, "data.object", "id", out->refund_no, sizeof(out->refund_no),
	                         1, reason, rlen)) ||
	    (e = notify_json_amount(obj, "data.object", "amount", &out->amount_minor, reason,
	                            rlen)) ||
	    (e = stripe_ref(obj,
	                    json_is_string(json_object_get(obj, "payment_intent"))
	                        ? "payment_intent"
	                        : "charge",
	                    out->channel_trade_no, sizeof(out->channel_trade_no), reason, rlen)))
		return e;
	return stripe_order(obj, key, NULL, out, reason, rlen);
}

/* stripe_read_header - the one Stripe-Signature header, parsed into *h. */
static enum verr
stripe_read_header(const struct http_hdr *hdrs, size_t nhdrs, struct stripe_hdr *h, char *reason,
                   size_t rlen)
{
	const char *v;
	size_t vlen;
	int count;

	if ((count = notify_header(hdrs, nhdrs, "Stripe-Signature", &v, &vlen)) != 1 || vlen == 0 ||
	    vlen > STRIPE_HEADER_MAX) {
		snprintf(reason, rlen, "%s Stripe-Signature header",
		         count > 1                 ? "duplicated"
		         : count == 0 || vlen == 0 ? "missing"
		                                   : "oversized");
		return VERR_HEADER;
	}
	return stripe_header(v, vlen, h, reason, rlen);
}

enum verr
notify_stripe_precheck(const struct http_hdr *hdrs, size_t nhdrs, char *reason, size_t rlen)
{
	struct stripe_hdr h;

	if (rlen > 0)
		reason[0] = '\0';
	/* The same header checks, with the same verdicts, as notify_stripe_verify_parse. */
	return stripe_read_header(hdrs, nhdrs, &h, reason, rlen);
}

enum verr
notify_stripe_verify_parse(const struct stripe_merchant *m, const struct http_hdr *hdrs,
                           size_t nhdrs, const uint8_t *body, size_t len, time_t now,
                           struct notify *out, char *reason, size_t rlen)
{
	int tol = m->tolerance_s > 0 ? m->tolerance_s : NOTIFY_TOLERANCE_DEFAULT;
	uint8_t mac[CRYPTO_SHA256_LEN];
	struct stripe_hdr h;
	struct crypto_part parts[2];
	char tstr[24];
	json_t *ev = NULL;
	int match = 0;
	enum verr e;

	if ((e = notify_begin(out, body, len, reason, rlen)) != VERR_OK)
		return e;
	if ((e = stripe_read_header(hdrs, nhdrs, &h, reason, rlen)) != VERR_OK)
		return e;
	/* The SDKs sign the re-printed integer, so "t=0170..." would not match them either. */
	snprintf(tstr, sizeof(tstr), "%lld.", (long long)h.t);
	parts[0] = (struct crypto_part){tstr, strlen(tstr)};
	parts[1] = (struct crypto_part){body, len};
	for (int s = 0; s < m->nsecrets && s < 4; s++) {
		if (crypto_hmac_sha256v(m->secrets[s].bytes, m->secrets[s].len, parts, 2, mac) != 0)
			continue;
		for (int i = 0; i < h.nv1; i++)
			match |= crypto_ct_equal(mac, h.v1[i], CRYPTO_SHA256_LEN);
	}
	if (!match) {
		snprintf(reason, rlen, "no v1 signature matches");
		return VERR_SIGNATURE;
	}
	if ((int64_t)now - h.t > tol) {
		snprintf(reason, rlen, "Stripe-Signature timestamp %lld s old, tolerance %d s",
		         (long long)((int64_t)now - h.t), tol);
		return VERR_TIMESTAMP;
	}
	out->valid_to = h.t + tol;
	if ((e = notify_json_load(body, len, &ev, reason, rlen)) != VERR_OK)
		return e;
	/* Events without a type (the SDK test payload) are authentic but carry nothing for us. */
	if ((e = notify_json_str(ev, NULL, "id", out->event_id, sizeof(out->event_id), 1, reason,
	                         rlen)) ||
	    (e = notify_json_str(ev, NULL, "type", out->event_type, sizeof(out->event_type), 0,
	                         reason, rlen)))
		goto done;
	e = stripe_parse(m, ev, out, reason, rlen);
done:
	json_decref(ev);
	return e;
}

int
notify_stripe_sign_header(const uint8_t *secret, size_t len, const uint8_t *body, size_t blen,
                          time_t t, char *hdr, size_t hlen)
{
	uint8_t mac[CRYPTO_SHA256_LEN];
	char tstr[24], hex[2 * CRYPTO_SHA256_LEN + 1];
	struct crypto_part parts[2];
	int n;

	if (t < 0 || (body == NULL && blen > 0) || hdr == NULL)
		return -1;
	snprintf(tstr, sizeof(tstr), "%lld.", (long long)t);
	parts[0] = (struct crypto_part){tstr, strlen(tstr)};
	parts[1] = (struct crypto_part){body, blen};
	if (crypto_hmac_sha256v(secret, len, parts, 2, mac) != 0 ||
	    crypto_hex_encode(mac, sizeof(mac), hex, sizeof(hex)) != 0)
		return -1;
	n = snprintf(hdr, hlen, "t=%lld,v1=%s", (long long)t, hex);
	return n < 0 || (size_t)n >= hlen ? -1 : 0;
}

/* ---- the Stripe operations (struct chan_notify_ops) ----------------------------------- */

static void
stripe_keys_free(void *keys)
{
	notify_keys_stripe_free(keys);
	free(keys);
}

static int
stripe_keys_load(const struct conf *cf, const struct conf_merchant *cm, void **keys, char *err,
                 size_t errlen)
{
	const struct conf_stripe *st = chan_conf_stripe(cm);
	struct stripe_merchant *m;

	*keys = NULL;
	if (st == NULL)
		return 0;
	if ((*keys = m = notify_keys_alloc(sizeof(*m), err, errlen)) == NULL)
		return -1;
	m->tolerance_s = (int)cf->ingest.timestamp_tolerance_s;
	snprintf(m->order_key, sizeof(m->order_key), "%s", st->order_metadata_key);
	notify_list_copy(m->accounts[0], sizeof(m->accounts[0]), &m->naccounts,
	                 &st->connect_accounts);
	m->test_mode = st->test_mode;
	for (int k = 0; k < st->secret_files.n; k++)
		if (notify_keys_stripe_add(m, st->secret_files.v[k], err, errlen) != 0)
			return -1;
	return 0;
}

static void
stripe_keys_describe(const void *keys, char *buf, size_t cap)
{
	snprintf(buf, cap, "stripe_secrets=%d",
	         keys ? ((const struct stripe_merchant *)keys)->nsecrets : 0);
}

static enum verr
stripe_precheck_op(const void *keys, const struct chan_req *r, char *reason, size_t rlen)
{
	(void)keys;
	return notify_stripe_precheck(r->hdrs, r->nhdrs, reason, rlen);
}

static enum verr
stripe_verify_op(const void *keys, const struct chan_req *r, struct notify *out, char *reason,
                 size_t rlen)
{
	return notify_stripe_verify_parse(keys, r->hdrs, r->nhdrs, r->body, r->len, r->now, out,
	                                  reason, rlen);
}

/* Stripe takes any 2xx as delivered. */
static int
stripe_acknowledged(unsigned status, const char *body)
{
	(void)body;
	return status >= 200 && status <= 299;
}

static const char *
stripe_answer(int ok, const char *msg, char *body, size_t cap)
{
	if (ok)
		snprintf(body, cap, "{\"received\":true}");
	else
		snprintf(body, cap, "{\"error\":\"%s\"}", msg);
	return "application/json";
}

/* stripe_sign_op - in->content is the event's JSON, sent as it is. */
static int
stripe_sign_op(const struct chan_signer *s, const struct chan_sign_in *in, struct chan_signed *out)
{
	char hdr[256];
	int n;

	out->len = strlen(in->content);
	if (notify_stripe_sign_header(s->secret, s->secret_len, (const uint8_t *)in->content,
	                              out->len, in->ts, hdr, sizeof(hdr)) != 0 ||
	    (out->body = strdup(in->content)) == NULL)
		return -1;
	n = snprintf(out->headers, sizeof(out->headers),
	             "Content-Type: application/json; charset=utf-8\r\nStripe-Signature: %s\r\n",
	             hdr);
	if (n < 0 || (size_t)n >= sizeof(out->headers)) {
		free(out->body);
		out->body = NULL;
		return -1;
	}
	return 0;
}

const struct chan_notify_ops notify_stripe_ops = {
    .name = "stripe",
    .conf = &chan_conf_stripe_decl,
    .keys_load = stripe_keys_load,
    .keys_free = stripe_keys_free,
    .keys_describe = stripe_keys_describe,
    .precheck = stripe_precheck_op,
    .verify_parse = stripe_verify_op,
    .status = notify_status_plain,
    .answer = stripe_answer,
    .acknowledged = stripe_acknowledged,
    .sign = stripe_sign_op,
};
