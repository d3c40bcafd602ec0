/*
 * chan_wx - the WeChat Pay APIv3 calls (direct merchant): query an order by out_trade_no,
 * apply for a refund, query a refund by out_refund_no, close an order.
 *
 * Every request carries the WECHATPAY2-SHA256-RSA2048 Authorization header over the exact
 * bytes sent; every 2xx answer (204 included) must carry a valid Wechatpay-Signature by a
 * platform key within the clock tolerance before a byte of it is parsed, and must name our
 * merchant and the order or refund we asked about (a verified answer about something else is
 * a replay). Non-2xx answers are unsigned: they are classified by HTTP status, then code, and
 * marked unauthenticated (channel-apis.md sections 1.3, 1.4 and 1.7).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "chan_int.h"
#include "money.h"

/* What a call needs after the transport: the verified JSON body, or a classified result. */
struct chan_wx_answer {
	json_t *json; /* NULL for 204 */
};

/* chan_wx_send - signs and sends one request. */
static int
chan_wx_send(struct chan_client *c, const char *method, const char *path, const char *body,
             struct chan_http_resp *resp, struct chan_result *r)
{
	char url[1024], auth[CHAN_WX_AUTH_MAX + 32], serial[128], nonce[33];
	const char *curl, *hdrs[5];
	size_t blen = body != NULL ? strlen(body) : 0, nh = 0;
	int n;

	n = snprintf(url, sizeof(url), "%s%s", c->base_url, path);
	if (n < 0 || (size_t)n >= sizeof(url) || chan_wx_canonical_url(url, &curl) != 0)
		return chan_res(r, CHAN_FINAL, "invalid_argument", "URL too long or malformed");
	memcpy(auth, "Authorization: ", 15);
	if (chan_wx_nonce(nonce) != 0 ||
	    chan_wx_authorization(c->wx.merchant_key, c->wx.mchid, c->wx.merchant_serial, method,
	                          curl, (long long)time(NULL), nonce, (const uint8_t *)body, blen,
	                          auth + 15, sizeof(auth) - 15) != 0)
		return chan_res(r, CHAN_RETRY, "internal", "signing failed");
	hdrs[nh++] = auth;
	hdrs[nh++] = "Accept: application/json";
	hdrs[nh++] = "Content-Type: application/json";
	/* The key we can verify with, as the SDKs send it. */
	snprintf(serial, sizeof(serial), "Wechatpay-Serial: %s", c->wx.platform[0].id);
	hdrs[nh++] = serial;
	{
		const struct chan_http_req req = {method, url, hdrs, nh, (const uint8_t *)body,
		                                  blen};
		return chan_send(c, &req, resp, r);
	}
}

/* chan_wx_error - an unsigned non-2xx answer, classified by status and then code. */
static int
chan_wx_error(const struct chan_http_resp *resp, int effectful, struct chan_result *r)
{
	char code[64] = "";
	json_t *j = json_loadb((const char *)resp->body, resp->blen, JSON_REJECT_DUPLICATES, NULL);
	long s = resp->status;

	if (j != NULL && chan_json_str(j, "code", code, sizeof(code)) != 0)
		code[0] = '\0';
	json_decref(j);
	r->authenticated = 0;
	if (s == 429)
		/* "For refunds this is not clearly 'not accepted'": query before anything else. */
		return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY,
		                code[0] ? code : "RATELIMIT_EXCEEDED", "HTTP 429 (unsigned)");
	if (s >= 500)
		/* SYSTEM_ERROR, SERVICE_UNAVAILABLE: repeat with the same parameters (and the same
		 * out_refund_no, which makes a repeated refund harmless). */
		return chan_res(r, CHAN_RETRY, code[0] ? code : "SYSTEM_ERROR",
		                "HTTP %ld (unsigned)", s);
	if (s >= 400)
		return chan_res(r, CHAN_FINAL, code[0] ? code : "HTTP_ERROR", "HTTP %ld (unsigned)",
		                s);
	return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, "unexpected_status", "HTTP %ld",
	                s);
}

/*
 * chan_wx_answer - authenticates a 2xx answer and parses its JSON; anything else is
 * classified. Returns 0 with a->json set (NULL for an empty body), or -1 with r set.
 */
static int
chan_wx_answer(struct chan_client *c, const struct chan_http_resp *resp, int effectful,
               struct chan_wx_answer *a, struct chan_result *r)
{
	const char *ts, *nonce, *sig, *serial;
	int d1, d2, d3, d4;
	enum chan_vr vr;

	a->json = NULL;
	if (resp->status < 200 || resp->status > 299)
		return chan_wx_error(resp, effectful, r);
	ts = chan_http_header(resp, "Wechatpay-Timestamp", &d1);
	nonce = chan_http_header(resp, "Wechatpay-Nonce", &d2);
	sig = chan_http_header(resp, "Wechatpay-Signature", &d3);
	serial = chan_http_header(resp, "Wechatpay-Serial", &d4);
	if (d1 || d2 || d3 || d4 || resp->hdr_overflow)
		return chan_res(r, CHAN_FORGED, "bad_signature", "duplicated signature headers");
	vr = chan_wx_verify_response(c->wx.platform, c->wx.nplatform, c->wx.skew_s, ts, nonce, sig,
	                             serial, resp->body, resp->blen, time(NULL));
	if (vr != CHAN_VR_OK)
		return chan_res(r, CHAN_FORGED, "bad_signature", "answer signature: %s",
		                chan_vr_name(vr));
	r->authenticated = 1;
	if (resp->status == 202)
		/* "Accepted, not processed: repeat the request with the same parameters." */
		return chan_res(r, CHAN_RETRY, "ACCEPTED", "HTTP 202");
	if (resp->blen == 0)
		return 0;
	a->json = json_loadb((const char *)resp->body, resp->blen, JSON_REJECT_DUPLICATES, NULL);
	if (a->json == NULL || !json_is_object(a->json)) {
		json_decref(a->json);
		a->json = NULL;
		return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, "bad_answer",
		                "signed answer is not a JSON object");
	}
	return 0;
}

/* chan_wx_mismatch - a signed answer about another merchant or order is a replay. */
static int
chan_wx_mismatch(const json_t *j, const char *key, const char *want, struct chan_result *r)
{
	char got[CHAN_STR];

	if (chan_json_str(j, key, got, sizeof(got)) != 0 || (got[0] && strcmp(got, want) != 0) ||
	    !got[0])
		return chan_res(r, CHAN_FORGED, "mismatch", "signed answer names another %s", key);
	return 0;
}

static int
chan_wx_currency(const json_t *j, const char *path, char out[4])
{
	char cur[8];

	if (chan_json_str(j, path, cur, sizeof(cur)) != 0 || strlen(cur) != 3 ||
	    money_currency_scale(cur) < 0)
		return -1;
	memcpy(out, cur, 4);
	return 0;
}

static int
chan_wx_query_payment(struct chan_client *c, const struct chan_order_ref *o, struct chan_payment *p,
                      struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	struct chan_wx_answer a = {0};
	char esc[200], mch[100], path[400];
	static const struct chan_state_map map[] = {
	    {"SUCCESS", CHAN_PAY_PAID},      {"REFUND", CHAN_PAY_PAID},
	    {"NOTPAY", CHAN_PAY_NOTPAY},     {"CLOSED", CHAN_PAY_CLOSED},
	    {"REVOKED", CHAN_PAY_FAILED},    {"PAYERROR", CHAN_PAY_FAILED},
	    {"USERPAYING", CHAN_PAY_PAYING}, {"ACCEPT", CHAN_PAY_PAYING},
	};
	int rc = -1;

	if (chan_url_escape(o->out_trade_no, esc, sizeof(esc)) != 0 ||
	    chan_url_escape(c->wx.mchid, mch, sizeof(mch)) != 0) {
		rc = chan_res(r, CHAN_FINAL, "invalid_argument", "id too long");
		goto done;
	}
	snprintf(path, sizeof(path), "/v3/pay/transactions/out-trade-no/%s?mchid=%s", esc, mch);
	if (chan_wx_send(c, "GET", path, NULL, &resp, r) != 0 ||
	    chan_wx_answer(c, &resp, 0, &a, r) != 0)
		goto done;
	if (a.json == NULL || chan_wx_mismatch(a.json, "mchid", c->wx.mchid, r) != 0 ||
	    chan_wx_mismatch(a.json, "out_trade_no", o->out_trade_no, r) != 0) {
		if (a.json == NULL)
			chan_res(r, CHAN_RETRY, "bad_answer", "empty answer to a query");
		goto done;
	}
	if (chan_json_str(a.json, "trade_state", p->status, sizeof(p->status)) != 0 ||
	    chan_json_str(a.json, "transaction_id", p->channel_trade_no,
	                  sizeof(p->channel_trade_no)) != 0) {
		chan_res(r, CHAN_RETRY, "bad_answer", "trade_state or transaction_id malformed");
		goto done;
	}
	snprintf(p->out_trade_no, sizeof(p->out_trade_no), "%s", o->out_trade_no);
	p->state =
	    (enum chan_pay_state)chan_state_of(map, CHAN_NMAP(map), p->status, CHAN_PAY_NONE);
	if (p->state == CHAN_PAY_NONE) {
		chan_res(r, CHAN_RETRY, "bad_answer", "unknown trade_state");
		goto done;
	}
	if (json_object_get(a.json, "amount") != NULL &&
	    (chan_json_minor(a.json, "amount.total", &p->amount_minor) != 0 ||
	     chan_wx_currency(a.json, "amount.currency", p->currency) != 0)) {
		chan_res(r, CHAN_RETRY, "bad_answer", "amount malformed");
		goto done;
	}
	if (p->state == CHAN_PAY_PAID && (p->channel_trade_no[0] == '\0' || p->amount_minor < 0)) {
		chan_res(r, CHAN_RETRY, "bad_answer", "paid without transaction_id or amount");
		goto done;
	}
	if (chan_keep_answer(c, resp.body, resp.blen) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	rc = chan_res(r, CHAN_OK, "", "trade_state %s", p->status);
done:
	json_decref(a.json);
	chan_http_resp_free(&resp);
	return rc;
}

int
chan_wx_refund_body(const struct chan_refund_req *q, char **out)
{
	json_t *j = json_object(), *amt = json_object();
	int rc = -1;

	*out = NULL;
	if (j == NULL || amt == NULL)
		goto done;
	/* The field order of the official examples (and of vector W-D3). */
	json_object_set_new(j, "out_trade_no", json_string(q->order.out_trade_no));
	json_object_set_new(j, "out_refund_no", json_string(q->out_refund_no));
	if (q->reason != NULL && q->reason[0] != '\0')
		json_object_set_new(j, "reason", json_string(q->reason));
	if (q->notify_url != NULL && q->notify_url[0] != '\0')
		json_object_set_new(j, "notify_url", json_string(q->notify_url));
	json_object_set_new(amt, "refund", json_integer((json_int_t)q->amount_minor));
	json_object_set_new(amt, "total", json_integer((json_int_t)q->total_minor));
	json_object_set_new(amt, "currency", json_string(q->currency));
	json_object_set_new(j, "amount", amt);
	amt = NULL;
	*out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = *out != NULL ? 0 : -1;
done:
	json_decref(amt);
	json_decref(j);
	return rc;
}

/* chan_wx_parse_refund - a signed Refund object for our out_refund_no. */
static int
chan_wx_parse_refund(const json_t *j, const char *out_refund_no, struct chan_refund *f,
                     struct chan_result *r)
{
	static const struct chan_state_map map[] = {{"SUCCESS", CHAN_REFUND_SUCCEEDED},
	                                            {"PROCESSING", CHAN_REFUND_PENDING},
	                                            {"ABNORMAL", CHAN_REFUND_ABNORMAL},
	                                            {"CLOSED", CHAN_REFUND_FAILED}};

	if (chan_wx_mismatch(j, "out_refund_no", out_refund_no, r) != 0)
		return -1;
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", out_refund_no);
	if (chan_json_str(j, "refund_id", f->refund_id, sizeof(f->refund_id)) != 0 ||
	    f->refund_id[0] == '\0' ||
	    chan_json_str(j, "status", f->status, sizeof(f->status)) != 0 ||
	    chan_json_minor(j, "amount.refund", &f->amount_minor) != 0 ||
	    chan_wx_currency(j, "amount.currency", f->currency) != 0)
		return chan_res(r, CHAN_RETRY, "bad_answer", "refund fields malformed");
	f->state =
	    (enum chan_refund_state)chan_state_of(map, CHAN_NMAP(map), f->status, CHAN_REFUND_NONE);
	if (f->state == CHAN_REFUND_NONE)
		return chan_res(r, CHAN_RETRY, "bad_answer", "unknown refund status");
	return chan_res(r, CHAN_OK, "", "refund %s", f->status);
}

static int
chan_wx_refund(struct chan_client *c, const struct chan_refund_req *q, struct chan_refund *f,
               struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	struct chan_wx_answer a = {0};
	char *body = NULL;
	int rc = -1;

	if (chan_wx_refund_body(q, &body) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	if (chan_wx_send(c, "POST", "/v3/refund/domestic/refunds", body, &resp, r) != 0 ||
	    chan_wx_answer(c, &resp, 1, &a, r) != 0)
		goto done;
	if (a.json == NULL) {
		chan_res(r, CHAN_UNKNOWN, "bad_answer", "empty answer to a refund");
		goto done;
	}
	rc = chan_wx_parse_refund(a.json, q->out_refund_no, f, r);
	/* A signed answer that cannot be read still means the refund may exist. */
	if (rc != 0 && r->outcome == CHAN_RETRY)
		r->outcome = CHAN_UNKNOWN;
done:
	free(body);
	json_decref(a.json);
	chan_http_resp_free(&resp);
	return rc;
}

static int
chan_wx_query_refund(struct chan_client *c, const struct chan_refund_ref *q, struct chan_refund *f,
                     struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	struct chan_wx_answer a = {0};
	char esc[200], path[300];
	int rc = -1;

	if (chan_url_escape(q->out_refund_no, esc, sizeof(esc)) != 0) {
		chan_res(r, CHAN_FINAL, "invalid_argument", "id too long");
		goto done;
	}
	snprintf(path, sizeof(path), "/v3/refund/domestic/refunds/%s", esc);
	if (chan_wx_send(c, "GET", path, NULL, &resp, r) != 0 ||
	    chan_wx_answer(c, &resp, 0, &a, r) != 0)
		goto done;
	if (a.json == NULL) {
		chan_res(r, CHAN_RETRY, "bad_answer", "empty answer to a query");
		goto done;
	}
	rc = chan_wx_parse_refund(a.json, q->out_refund_no, f, r);
done:
	json_decref(a.json);
	chan_http_resp_free(&resp);
	return rc;
}

static int
chan_wx_close(struct chan_client *c, const struct chan_order_ref *o, struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	struct chan_wx_answer a = {0};
	char esc[200], path[300], *body = NULL;
	json_t *j = json_pack("{s:s}", "mchid", c->wx.mchid);
	int rc = -1;

	if (j == NULL || (body = json_dumps(j, JSON_COMPACT)) == NULL) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	if (chan_url_escape(o->out_trade_no, esc, sizeof(esc)) != 0) {
		chan_res(r, CHAN_FINAL, "invalid_argument", "id too long");
		goto done;
	}
	snprintf(path, sizeof(path), "/v3/pay/transactions/out-trade-no/%s/close", esc);
	/* Closing twice is harmless, so a close is not "effectful" in the UNKNOWN sense. */
	if (chan_wx_send(c, "POST", path, body, &resp, r) != 0 ||
	    chan_wx_answer(c, &resp, 0, &a, r) != 0)
		goto done;
	rc = chan_res(r, CHAN_OK, "", "closed");
done:
	free(body);
	json_decref(j);
	json_decref(a.json);
	chan_http_resp_free(&resp);
	return rc;
}

const struct chan_ops chan_wx_ops = {
    .id = CHAN_WXPAY,
    .query_payment = chan_wx_query_payment,
    .refund = chan_wx_refund,
    .query_refund = chan_wx_query_refund,
    .close = chan_wx_close,
};
