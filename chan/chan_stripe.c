/*
 * chan_stripe - the Stripe calls: retrieve or search a PaymentIntent for an order, create a
 * refund, find a refund, cancel an order's PaymentIntents.
 *
 * Stripe signs no answers; they are authenticated by TLS with a verified peer, which is why
 * the transport never turns verification off. Every request pins Stripe-Version so answer
 * shapes never change with the account's default, and every POST carries an Idempotency-Key
 * derived from our own ids ("paycb-refund-<out_refund_no>"), so a repeat within Stripe's 24 h
 * window returns the first result instead of acting twice (channel-apis.md 3.1 to 3.7).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "chan_int.h"
#include "money.h"

/* The Stripe Idempotency-Key of a refund: "paycb-refund-<out_refund_no>". */
static int
chan_stripe_refund_key(const char *out_refund_no, char *out, size_t outcap)
{
	int n = snprintf(out, outcap, "paycb-refund-%s", out_refund_no);

	return n > 0 && (size_t)n < outcap ? 0 : -1;
}

/* chan_stripe_error - a non-2xx answer by Stripe-Should-Retry, status, then error code. */
static int
chan_stripe_error(const struct chan_http_resp *resp, int effectful, struct chan_result *r)
{
	const char *retry = chan_http_header(resp, "Stripe-Should-Retry", NULL);
	json_t *j = json_loadb((const char *)resp->body, resp->blen, 0, NULL);
	char code[64] = "", type[64] = "";
	long s = resp->status;

	if (j != NULL) {
		(void)chan_json_str(j, "error.code", code, sizeof(code));
		(void)chan_json_str(j, "error.type", type, sizeof(type));
	}
	json_decref(j);
	if (code[0] == '\0')
		snprintf(code, sizeof(code), "%s", type[0] ? type : "http_error");
	if (retry != NULL && strcmp(retry, "false") == 0)
		return chan_res(r, CHAN_FINAL, code, "HTTP %ld, Stripe-Should-Retry: false", s);
	if (retry != NULL && strcmp(retry, "true") == 0)
		return chan_res(r, CHAN_RETRY, code, "HTTP %ld, Stripe-Should-Retry: true", s);
	/* Stripe stores even a 500 under the idempotency key: what happened is unknown. */
	if (s >= 500)
		return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, code, "HTTP %ld", s);
	if (s == 409 || s == 429)
		return chan_res(r, CHAN_RETRY, code, "HTTP %ld", s);
	return chan_res(r, CHAN_FINAL, code, "HTTP %ld", s);
}

/*
 * chan_stripe_call - one request; on a 2xx the parsed JSON object in *out. path includes any
 * query. form, if not NULL, is the POST body; idem the Idempotency-Key of a POST.
 */
static int
chan_stripe_call(struct chan_client *c, const char *method, const char *path, const char *form,
                 const char *idem, int effectful, json_t **out, struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	char url[1024], auth[512], ver[96], key[320];
	const char *hdrs[5];
	size_t nh = 0;
	int rc = -1, n;

	*out = NULL;
	n = snprintf(url, sizeof(url), "%s%s", c->base_url, path);
	if (n < 0 || (size_t)n >= sizeof(url) ||
	    (size_t)snprintf(auth, sizeof(auth), "Authorization: Bearer %s",
	                     c->stripe.secret_key) >= sizeof(auth)) {
		chan_res(r, CHAN_FINAL, "invalid_argument", "URL or key too long");
		goto done;
	}
	snprintf(ver, sizeof(ver), "Stripe-Version: %s", c->stripe.api_version);
	hdrs[nh++] = auth;
	hdrs[nh++] = ver;
	hdrs[nh++] = "Accept: application/json";
	if (form != NULL)
		hdrs[nh++] = "Content-Type: application/x-www-form-urlencoded";
	if (idem != NULL) {
		snprintf(key, sizeof(key), "Idempotency-Key: %s", idem);
		hdrs[nh++] = key;
	}
	{
		const struct chan_http_req req = {
		    method, url, hdrs, nh, (const uint8_t *)form, form != NULL ? strlen(form) : 0};
		if (chan_send(c, &req, &resp, r) != 0)
			goto done;
	}
	if (resp.status < 200 || resp.status > 299) {
		chan_stripe_error(&resp, effectful, r);
		goto done;
	}
	*out = json_loadb((const char *)resp.body, resp.blen, JSON_REJECT_DUPLICATES, NULL);
	if (*out == NULL || !json_is_object(*out)) {
		json_decref(*out);
		*out = NULL;
		chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, "bad_answer",
		         "answer is not a JSON object");
		goto done;
	}
	r->authenticated = 1; /* TLS with a verified peer: Stripe signs no answers */
	rc = 0;
done:
	OPENSSL_cleanse(auth, sizeof(auth));
	chan_http_resp_free(&resp);
	return rc;
}

static const struct chan_state_map chan_stripe_pi_map[] = {
    {"succeeded", CHAN_PAY_PAID},
    {"processing", CHAN_PAY_PAYING},
    {"requires_capture", CHAN_PAY_PAYING},
    {"requires_payment_method", CHAN_PAY_NOTPAY},
    {"requires_confirmation", CHAN_PAY_NOTPAY},
    {"requires_action", CHAN_PAY_NOTPAY},
    {"canceled", CHAN_PAY_CLOSED},
};

/* chan_stripe_currency - Stripe's lower-case code as upper-case, if paycb knows it. */
static int
chan_stripe_currency(const json_t *o, char out[4])
{
	char cur[8];

	if (chan_json_str(o, "currency", cur, sizeof(cur)) != 0 || strlen(cur) != 3)
		return -1;
	for (int i = 0; i < 3; i++)
		out[i] = (char)toupper((unsigned char)cur[i]);
	out[3] = '\0';
	return money_currency_scale(out) < 0 ? -1 : 0;
}

/* chan_stripe_pi - a PaymentIntent object into *p. */
static int
chan_stripe_pi(struct chan_client *c, const json_t *pi, struct chan_payment *p,
               struct chan_result *r)
{
	char key[80];

	snprintf(key, sizeof(key), "metadata.%s", c->stripe.order_key);
	memset(p, 0, sizeof(*p));
	p->amount_minor = -1;
	if (chan_json_str(pi, "id", p->channel_trade_no, sizeof(p->channel_trade_no)) != 0 ||
	    p->channel_trade_no[0] == '\0' ||
	    chan_json_str(pi, "status", p->status, sizeof(p->status)) ||
	    chan_json_str(pi, key, p->out_trade_no, sizeof(p->out_trade_no)) != 0 ||
	    chan_json_minor(pi, "amount", &p->amount_minor) != 0 ||
	    chan_stripe_currency(pi, p->currency) != 0)
		return chan_res(r, CHAN_RETRY, "bad_answer", "PaymentIntent fields malformed");
	p->state = (enum chan_pay_state)chan_state_of(
	    chan_stripe_pi_map, CHAN_NMAP(chan_stripe_pi_map), p->status, CHAN_PAY_NONE);
	if (p->state == CHAN_PAY_NONE)
		return chan_res(r, CHAN_RETRY, "bad_answer", "unknown PaymentIntent status");
	return 0;
}

/* chan_stripe_search - the PaymentIntents whose metadata names the order (*data: array). */
static int
chan_stripe_search(struct chan_client *c, const char *out_trade_no, json_t **root, json_t **data,
                   struct chan_result *r)
{
	char q[256], esc[800], path[900];

	/* Ids are [A-Za-z0-9_-|*@.] (chan_id_ok), so no quote needs escaping in the query. */
	snprintf(q, sizeof(q), "metadata['%s']:'%s'", c->stripe.order_key, out_trade_no);
	if (strchr(c->stripe.order_key, '\'') != NULL || chan_url_escape(q, esc, sizeof(esc)) != 0)
		return chan_res(r, CHAN_FINAL, "invalid_argument", "order key unusable");
	snprintf(path, sizeof(path), "/v1/payment_intents/search?query=%s&limit=100", esc);
	if (chan_stripe_call(c, "GET", path, NULL, NULL, 0, root, r) != 0)
		return -1;
	*data = json_object_get(*root, "data");
	if (!json_is_array(*data))
		return chan_res(r, CHAN_RETRY, "bad_answer", "search without data");
	return 0;
}

static int
chan_stripe_query_payment(struct chan_client *c, const struct chan_order_ref *o,
                          struct chan_payment *p, struct chan_result *r)
{
	json_t *root = NULL, *data, *v;
	struct chan_payment best = {0}, one;
	char esc[200], path[300];
	size_t i;
	int rc = -1;

	if (o->channel_trade_no != NULL && o->channel_trade_no[0] != '\0') {
		if (!chan_id_ok(o->channel_trade_no) ||
		    chan_url_escape(o->channel_trade_no, esc, sizeof(esc)) != 0) {
			chan_res(r, CHAN_FINAL, "invalid_argument", "bad PaymentIntent id");
			goto done;
		}
		snprintf(path, sizeof(path), "/v1/payment_intents/%s", esc);
		if (chan_stripe_call(c, "GET", path, NULL, NULL, 0, &root, r) != 0 ||
		    chan_stripe_pi(c, root, p, r) != 0)
			goto done;
		if (strcmp(p->out_trade_no, o->out_trade_no) != 0) {
			chan_res(r, CHAN_FINAL, "order_mismatch",
			         "the PaymentIntent belongs to another order");
			goto done;
		}
		if (chan_keep_answer_json(c, root) != 0) {
			chan_res(r, CHAN_RETRY, "internal", "out of memory");
			goto done;
		}
		rc = chan_res(r, CHAN_OK, "", "status %s", p->status);
		goto done;
	}
	if (chan_stripe_search(c, o->out_trade_no, &root, &data, r) != 0)
		goto done;
	/* Several PaymentIntents may name one order: a paid one wins, then the most alive. */
	json_array_foreach(data, i, v)
	{
		if (chan_stripe_pi(c, v, &one, r) != 0)
			goto done;
		if (strcmp(one.out_trade_no, o->out_trade_no) != 0)
			continue;
		if (best.state == CHAN_PAY_NONE || (one.state == CHAN_PAY_PAID) ||
		    (best.state != CHAN_PAY_PAID && one.state == CHAN_PAY_PAYING) ||
		    (best.state == CHAN_PAY_CLOSED && one.state == CHAN_PAY_NOTPAY))
			best = one;
	}
	*p = best;
	if (p->state == CHAN_PAY_NONE) {
		p->amount_minor = -1;
		snprintf(p->out_trade_no, sizeof(p->out_trade_no), "%s", o->out_trade_no);
	}
	if (chan_keep_answer_json(c, root) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	rc = chan_res(r, CHAN_OK, "", "status %s", p->state == CHAN_PAY_NONE ? "none" : p->status);
done:
	json_decref(root);
	return rc;
}

/* chan_stripe_parse_refund - a Refund object into *f. */
static int
chan_stripe_parse_refund(const json_t *o, struct chan_refund *f, struct chan_result *r)
{
	static const struct chan_state_map map[] = {{"pending", CHAN_REFUND_PENDING},
	                                            {"requires_action", CHAN_REFUND_PENDING},
	                                            {"succeeded", CHAN_REFUND_SUCCEEDED},
	                                            {"failed", CHAN_REFUND_FAILED},
	                                            {"canceled", CHAN_REFUND_FAILED}};

	if (chan_json_str(o, "id", f->refund_id, sizeof(f->refund_id)) != 0 ||
	    f->refund_id[0] == '\0' ||
	    chan_json_str(o, "status", f->status, sizeof(f->status)) != 0 ||
	    chan_json_str(o, "metadata.paycb_refund_no", f->out_refund_no,
	                  sizeof(f->out_refund_no)) != 0 ||
	    chan_json_minor(o, "amount", &f->amount_minor) != 0 ||
	    chan_stripe_currency(o, f->currency) != 0)
		return chan_res(r, CHAN_RETRY, "bad_answer", "Refund fields malformed");
	f->state =
	    (enum chan_refund_state)chan_state_of(map, CHAN_NMAP(map), f->status, CHAN_REFUND_NONE);
	if (f->state == CHAN_REFUND_NONE)
		return chan_res(r, CHAN_RETRY, "bad_answer", "unknown Refund status");
	return chan_res(r, CHAN_OK, "", "refund %s", f->status);
}

static int
chan_stripe_refund(struct chan_client *c, const struct chan_refund_req *q, struct chan_refund *f,
                   struct chan_result *r)
{
	static const char *const reasons[] = {"duplicate", "fraudulent", "requested_by_customer"};
	json_t *params = NULL, *md, *root = NULL;
	char *form = NULL, idem[200];
	int rc = -1;

	if (q->order.channel_trade_no == NULL || !chan_id_ok(q->order.channel_trade_no) ||
	    chan_stripe_refund_key(q->out_refund_no, idem, sizeof(idem)) != 0) {
		chan_res(r, CHAN_FINAL, "invalid_argument",
		         "a Stripe refund needs the PaymentIntent id");
		goto done;
	}
	params = json_pack("{s:s,s:I}", "payment_intent", q->order.channel_trade_no, "amount",
	                   (json_int_t)q->amount_minor);
	md = json_object();
	if (params == NULL || md == NULL) {
		json_decref(md);
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	for (size_t i = 0; q->reason != NULL && i < 3; i++)
		if (strcmp(q->reason, reasons[i]) == 0)
			json_object_set_new(params, "reason", json_string(reasons[i]));
	json_object_set_new(md, c->stripe.order_key, json_string(q->order.out_trade_no));
	json_object_set_new(md, "paycb_refund_no", json_string(q->out_refund_no));
	json_object_set_new(params, "metadata", md);
	if (chan_stripe_form(params, &form) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "form encoding failed");
		goto done;
	}
	if (chan_stripe_call(c, "POST", "/v1/refunds", form, idem, 1, &root, r) != 0)
		goto done;
	rc = chan_stripe_parse_refund(root, f, r);
	if (rc == 0 && strcmp(f->out_refund_no, q->out_refund_no) != 0)
		rc =
		    chan_res(r, CHAN_UNKNOWN, "mismatch", "the Refund names another refund number");
	else if (rc != 0)
		r->outcome = CHAN_UNKNOWN; /* created, but unreadable: find it with a query */
done:
	free(form);
	json_decref(params);
	json_decref(root);
	return rc;
}

/*
 * chan_stripe_same_refund - a Refund fetched by id is believed only when it is the one asked
 * about: the same id, our refund number in its metadata, and the order's PaymentIntent when
 * both are known. Anything else (a proxy's cache, a mixed-up id) is never a fact about ours.
 */
static int
chan_stripe_same_refund(const json_t *o, const struct chan_refund_ref *q,
                        const struct chan_refund *f, struct chan_result *r)
{
	char pi[CHAN_STR];

	if (chan_json_str(o, "payment_intent", pi, sizeof(pi)) != 0)
		pi[0] = '\0';
	if (strcmp(f->refund_id, q->refund_id) != 0 ||
	    strcmp(f->out_refund_no, q->out_refund_no) != 0 ||
	    (pi[0] != '\0' && q->order.channel_trade_no != NULL &&
	     q->order.channel_trade_no[0] != '\0' && strcmp(pi, q->order.channel_trade_no) != 0))
		return chan_res(r, CHAN_FORGED, "mismatch",
		                "the Refund is not the one asked about");
	return 0;
}

static int
chan_stripe_query_refund(struct chan_client *c, const struct chan_refund_ref *q,
                         struct chan_refund *f, struct chan_result *r)
{
	json_t *root = NULL, *data, *v;
	char esc[200], path[300];
	size_t i;
	int rc = -1;

	if (q->refund_id != NULL && q->refund_id[0] != '\0') {
		if (!chan_id_ok(q->refund_id) ||
		    chan_url_escape(q->refund_id, esc, sizeof(esc)) != 0) {
			chan_res(r, CHAN_FINAL, "invalid_argument", "bad refund id");
			goto done;
		}
		snprintf(path, sizeof(path), "/v1/refunds/%s", esc);
		if (chan_stripe_call(c, "GET", path, NULL, NULL, 0, &root, r) != 0 ||
		    chan_stripe_parse_refund(root, f, r) != 0)
			goto done;
		rc = chan_stripe_same_refund(root, q, f, r);
		goto done;
	}
	if (q->order.channel_trade_no == NULL || !chan_id_ok(q->order.channel_trade_no) ||
	    chan_url_escape(q->order.channel_trade_no, esc, sizeof(esc)) != 0) {
		chan_res(r, CHAN_FINAL, "invalid_argument", "needs the refund or PaymentIntent id");
		goto done;
	}
	/* The list is read-after-write consistent, unlike search. */
	snprintf(path, sizeof(path), "/v1/refunds?payment_intent=%s&limit=100", esc);
	if (chan_stripe_call(c, "GET", path, NULL, NULL, 0, &root, r) != 0)
		goto done;
	if (!json_is_array(data = json_object_get(root, "data"))) {
		chan_res(r, CHAN_RETRY, "bad_answer", "list without data");
		goto done;
	}
	json_array_foreach(data, i, v)
	{
		char no[CHAN_STR];

		if (chan_json_str(v, "metadata.paycb_refund_no", no, sizeof(no)) == 0 &&
		    strcmp(no, q->out_refund_no) == 0) {
			rc = chan_stripe_parse_refund(v, f, r);
			goto done;
		}
	}
	if (json_is_true(json_object_get(root, "has_more"))) {
		chan_res(r, CHAN_RETRY, "too_many_refunds", "more than 100 refunds on one payment");
		goto done;
	}
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", q->out_refund_no);
	rc = chan_res(r, CHAN_OK, "", "no such refund");
done:
	json_decref(root);
	return rc;
}

/* chan_stripe_cancel - cancels one PaymentIntent that is still payable. */
static int
chan_stripe_cancel(struct chan_client *c, const struct chan_payment *p, struct chan_result *r)
{
	char esc[200], path[300], idem[200];
	json_t *root = NULL;
	struct chan_payment after;
	int rc = -1;

	if (p->state == CHAN_PAY_PAID)
		return chan_res(r, CHAN_FINAL, "order_paid",
		                "a PaymentIntent of the order succeeded");
	if (p->state == CHAN_PAY_PAYING)
		return chan_res(r, CHAN_RETRY, "order_paying", "a PaymentIntent is processing");
	if (p->state != CHAN_PAY_NOTPAY)
		return 0;
	if (chan_url_escape(p->channel_trade_no, esc, sizeof(esc)) != 0)
		return chan_res(r, CHAN_RETRY, "bad_answer", "PaymentIntent id too long");
	snprintf(path, sizeof(path), "/v1/payment_intents/%s/cancel", esc);
	snprintf(idem, sizeof(idem), "paycb-close-%s", p->channel_trade_no);
	if (chan_stripe_call(c, "POST", path, "", idem, 0, &root, r) != 0 ||
	    chan_stripe_pi(c, root, &after, r) != 0)
		goto done;
	if (after.state != CHAN_PAY_CLOSED) {
		chan_res(r, CHAN_RETRY, "not_canceled", "the PaymentIntent is still %s",
		         after.status);
		goto done;
	}
	rc = 0;
done:
	json_decref(root);
	return rc;
}

static int
chan_stripe_close(struct chan_client *c, const struct chan_order_ref *o, struct chan_result *r)
{
	json_t *root = NULL, *data, *v;
	struct chan_payment p;
	size_t i;
	int rc = -1;

	if (o->channel_trade_no != NULL && o->channel_trade_no[0] != '\0') {
		if (chan_stripe_query_payment(c, o, &p, r) != 0 ||
		    chan_stripe_cancel(c, &p, r) != 0)
			goto done;
		rc = chan_res(r, CHAN_OK, "", "closed");
		goto done;
	}
	/* Search is eventually consistent: a PaymentIntent created in the last minute may be
	 * missed. docs/channels.md says what the caller must do about it. */
	if (chan_stripe_search(c, o->out_trade_no, &root, &data, r) != 0)
		goto done;
	json_array_foreach(data, i, v)
	{
		if (chan_stripe_pi(c, v, &p, r) != 0)
			goto done;
		if (strcmp(p.out_trade_no, o->out_trade_no) == 0 &&
		    chan_stripe_cancel(c, &p, r) != 0)
			goto done;
	}
	rc = chan_res(r, CHAN_OK, "", "closed");
done:
	json_decref(root);
	return rc;
}

const struct chan_ops chan_stripe_ops = {
    .id = CHAN_STRIPE,
    .query_payment = chan_stripe_query_payment,
    .refund = chan_stripe_refund,
    .query_refund = chan_stripe_query_refund,
    .close = chan_stripe_close,
};
