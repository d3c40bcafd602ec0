/*
 * chan_ali - the Alipay OpenAPI calls: alipay.trade.query, alipay.trade.refund,
 * alipay.trade.fastpay.refund.query and alipay.trade.close, through the gateway with RSA2.
 *
 * A request is every common parameter plus biz_content, signed over the sorted parameters
 * with the app private key and posted as a form. An answer is believed only when its "sign"
 * verifies over the raw "<method>_response" node with an Alipay public key, and then only
 * the verified node's bytes are parsed. A success without a sign is forged; a failure
 * without one is an unauthenticated hint (channel-apis.md sections 2.3 to 2.9).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "chan_int.h"
#include "form.h"
#include "money.h"

/* chan_ali_send - builds, signs and posts one request. */
static int
chan_ali_send(struct chan_client *c, const char *method, const char *biz,
              struct chan_http_resp *resp, struct chan_result *r)
{
	char ts[20], *sign = NULL, *body = NULL;
	struct form f = {0};
	struct chan_kv p[9];
	size_t n = 0;
	int rc = -1;

	if (chan_ali_timestamp(time(NULL), ts) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "clock");
		goto done;
	}
	p[n++] = (struct chan_kv){"app_id", c->ali.app_id};
	p[n++] = (struct chan_kv){"method", method};
	p[n++] = (struct chan_kv){"format", "JSON"};
	p[n++] = (struct chan_kv){"charset", "utf-8"};
	p[n++] = (struct chan_kv){"sign_type", "RSA2"};
	p[n++] = (struct chan_kv){"timestamp", ts};
	p[n++] = (struct chan_kv){"version", "1.0"};
	p[n++] = (struct chan_kv){"biz_content", biz};
	if (chan_ali_sign_params(c->ali.app_key, p, n, &sign) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "signing failed");
		goto done;
	}
	p[n++] = (struct chan_kv){"sign", sign};
	/* Every parameter in the body: the gateway reads both the query and the body. */
	for (size_t i = 0; i < n; i++)
		if (form_add(&f, p[i].k, strlen(p[i].k), p[i].v, strlen(p[i].v)) != 0) {
			chan_res(r, CHAN_RETRY, "internal", "out of memory");
			goto done;
		}
	if ((body = form_encode(&f)) == NULL) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	{
		const char *hdrs[] = {
		    "Content-Type: application/x-www-form-urlencoded;charset=utf-8",
		    "Accept: application/json",
		};
		const struct chan_http_req req = {"POST", c->base_url,           hdrs,
		                                  2,      (const uint8_t *)body, strlen(body)};
		rc = chan_send(c, &req, resp, r);
	}
done:
	form_free(&f);
	free(sign);
	free(body);
	return rc;
}

/* chan_ali_code - classifies a node's code and sub_code; 0 only for "10000". */
static int
chan_ali_code(const json_t *node, int effectful, struct chan_result *r)
{
	char code[16], sub[64];

	if (chan_json_str(node, "code", code, sizeof(code)) != 0 ||
	    chan_json_str(node, "sub_code", sub, sizeof(sub)) != 0 || code[0] == '\0')
		return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, "bad_answer",
		                "answer without a code");
	if (strcmp(code, "10000") == 0 && sub[0] == '\0')
		return 0;
	/* 20000 and ACQ.SYSTEM_ERROR: "retry with the same parameters"; for a refund the
	 * outcome is unknown until the refund query says. */
	if (strcmp(code, "20000") == 0 || strcmp(sub, "ACQ.SYSTEM_ERROR") == 0)
		return chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, sub[0] ? sub : code,
		                "alipay code %s", code);
	return chan_res(r, CHAN_FINAL, sub[0] ? sub : code, "alipay code %s", code);
}

/*
 * chan_ali_answer - authenticates the answer and parses the verified node into *node.
 * Returns 0 for a verified "10000", else -1 with r classified (a verified failure is
 * authenticated; an unsigned one is not, and an unsigned success is forged).
 */
static int
chan_ali_answer(struct chan_client *c, const char *method, const struct chan_http_resp *resp,
                int effectful, json_t **node, struct chan_result *r)
{
	struct chan_ali_node n;
	enum chan_vr vr;
	int rc = -1;

	*node = NULL;
	if (resp->status != 200) {
		if (resp->status == 429 || resp->status >= 500)
			return chan_res(
			    r, effectful && resp->status >= 500 ? CHAN_UNKNOWN : CHAN_RETRY,
			    "http_error", "HTTP %ld", resp->status);
		return chan_res(r, CHAN_FINAL, "http_error", "HTTP %ld", resp->status);
	}
	vr = chan_ali_verify_response(c->ali.alipay_keys, c->ali.nalipay, resp->body, resp->blen,
	                              method, &n);
	if (vr == CHAN_VR_MISSING) {
		/* No sign: possibly an honest gateway error, never a success. */
		json_t *j = json_loadb(n.text, n.len, JSON_REJECT_DUPLICATES, NULL);
		char code[16] = "";

		if (j == NULL || chan_json_str(j, "code", code, sizeof(code)) != 0 ||
		    code[0] == '\0' || strcmp(code, "10000") == 0) {
			json_decref(j);
			return chan_res(r, CHAN_FORGED, "bad_signature", "answer without a sign");
		}
		r->authenticated = 0;
		chan_ali_code(j, effectful, r);
		json_decref(j);
		return -1;
	}
	if (vr != CHAN_VR_OK)
		return chan_res(r, CHAN_FORGED, "bad_signature", "answer signature: %s",
		                chan_vr_name(vr));
	r->authenticated = 1;
	/* Parse exactly the bytes that were verified, nothing else of the body. */
	*node = json_loadb(n.text, n.len, JSON_REJECT_DUPLICATES, NULL);
	if (*node == NULL || !json_is_object(*node)) {
		chan_res(r, effectful ? CHAN_UNKNOWN : CHAN_RETRY, "bad_answer",
		         "signed node is not a JSON object");
		goto done;
	}
	if (chan_ali_code(*node, effectful, r) != 0)
		goto done;
	rc = 0;
done:
	if (rc != 0) {
		json_decref(*node);
		*node = NULL;
	}
	return rc;
}

/* chan_ali_call - one method call: biz_content from the JSON, the verified node back. */
static int
chan_ali_call(struct chan_client *c, const char *method, json_t *biz, int effectful, json_t **node,
              struct chan_result *r)
{
	struct chan_http_resp resp = {0};
	char *b = NULL;
	int rc = -1;

	*node = NULL;
	if (biz == NULL || (b = json_dumps(biz, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	if (chan_ali_send(c, method, b, &resp, r) != 0)
		goto done;
	rc = chan_ali_answer(c, method, &resp, effectful, node, r);
done:
	free(b);
	json_decref(biz);
	chan_http_resp_free(&resp);
	return rc;
}

/* chan_ali_amount - a decimal yuan member into minor units; -1 when absent or invalid. */
static int
chan_ali_amount(const json_t *node, const char *key, int64_t *out)
{
	char s[MONEY_STR_MAX + 1];

	if (chan_json_str(node, key, s, sizeof(s)) != 0 || s[0] == '\0')
		return -1;
	return money_parse_decimal_why(s, 2, out) == NULL ? 0 : -1;
}

/* chan_ali_same_order - a signed answer about another order is a replay. */
static int
chan_ali_same_order(const json_t *node, const char *out_trade_no, struct chan_result *r)
{
	char got[CHAN_STR];

	if (chan_json_str(node, "out_trade_no", got, sizeof(got)) != 0 ||
	    strcmp(got, out_trade_no) != 0)
		return chan_res(r, CHAN_FORGED, "mismatch", "signed answer names another order");
	return 0;
}

/* chan_ali_order_call - method on one order; its signed answer must name that order. */
static int
chan_ali_order_call(struct chan_client *c, const char *method, const char *out_trade_no,
                    json_t **node, struct chan_result *r)
{
	if (chan_ali_call(c, method, json_pack("{s:s}", "out_trade_no", out_trade_no), 0, node,
	                  r) != 0)
		return -1;
	return chan_ali_same_order(*node, out_trade_no, r);
}

static int
chan_ali_query_payment(struct chan_client *c, const struct chan_order_ref *o,
                       struct chan_payment *p, struct chan_result *r)
{
	static const struct chan_state_map map[] = {{"WAIT_BUYER_PAY", CHAN_PAY_NOTPAY},
	                                            {"TRADE_SUCCESS", CHAN_PAY_PAID},
	                                            {"TRADE_FINISHED", CHAN_PAY_PAID},
	                                            {"TRADE_CLOSED", CHAN_PAY_CLOSED}};
	json_t *node = NULL;
	int rc = -1;

	if (chan_ali_order_call(c, "alipay.trade.query", o->out_trade_no, &node, r) != 0)
		goto done;
	if (chan_json_str(node, "trade_status", p->status, sizeof(p->status)) != 0 ||
	    chan_json_str(node, "trade_no", p->channel_trade_no, sizeof(p->channel_trade_no)) !=
	        0 ||
	    chan_ali_amount(node, "total_amount", &p->amount_minor) != 0) {
		chan_res(r, CHAN_RETRY, "bad_answer", "trade fields malformed");
		goto done;
	}
	p->state =
	    (enum chan_pay_state)chan_state_of(map, CHAN_NMAP(map), p->status, CHAN_PAY_NONE);
	if (p->state == CHAN_PAY_NONE || p->channel_trade_no[0] == '\0') {
		chan_res(r, CHAN_RETRY, "bad_answer", "unknown trade_status or no trade_no");
		goto done;
	}
	snprintf(p->out_trade_no, sizeof(p->out_trade_no), "%s", o->out_trade_no);
	memcpy(p->currency, "CNY", 4);
	if (chan_keep_answer_json(c, node) != 0) {
		chan_res(r, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	rc = chan_res(r, CHAN_OK, "", "trade_status %s", p->status);
done:
	json_decref(node);
	return rc;
}

int
chan_ali_refund_biz(const struct chan_refund_req *q, char **out)
{
	char amount[MONEY_STR_MAX];
	json_t *j;

	*out = NULL;
	/* Alipay takes decimal yuan with two places, formatted from minor units. */
	if (strcmp(q->currency, "CNY") != 0 ||
	    money_format(q->amount_minor, 2, amount, sizeof(amount)) != 0)
		return -1;
	if ((j = json_object()) == NULL)
		return -1;
	json_object_set_new(j, "out_trade_no", json_string(q->order.out_trade_no));
	json_object_set_new(j, "refund_amount", json_string(amount));
	json_object_set_new(j, "out_request_no", json_string(q->out_refund_no));
	if (q->reason != NULL && q->reason[0] != '\0')
		json_object_set_new(j, "refund_reason", json_string(q->reason));
	*out = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(j);
	return *out != NULL ? 0 : -1;
}

static int
chan_ali_refund(struct chan_client *c, const struct chan_refund_req *q, struct chan_refund *f,
                struct chan_result *r)
{
	json_t *node = NULL, *biz = NULL;
	char *b = NULL, fund[4];
	int rc = -1;

	if (chan_ali_refund_biz(q, &b) != 0 || (biz = json_loads(b, 0, NULL)) == NULL) {
		chan_res(r, CHAN_FINAL, "invalid_argument", "alipay refunds are in CNY");
		goto done;
	}
	if (chan_ali_call(c, "alipay.trade.refund", biz, 1, &node, r) != 0) {
		biz = NULL;
		goto done;
	}
	biz = NULL;
	if (chan_ali_same_order(node, q->order.out_trade_no, r) != 0)
		goto done;
	if (chan_json_str(node, "fund_change", fund, sizeof(fund)) != 0 ||
	    (json_object_get(node, "refund_fee") != NULL &&
	     chan_ali_amount(node, "refund_fee", &f->refunded_total_minor) != 0)) {
		chan_res(r, CHAN_UNKNOWN, "bad_answer", "refund fields malformed");
		goto done;
	}
	/* fund_change=Y: this call moved the money. N (a repeat) or absent: not proven; the
	 * refund query says. */
	f->state = strcmp(fund, "Y") == 0 ? CHAN_REFUND_SUCCEEDED : CHAN_REFUND_PENDING;
	snprintf(f->status, sizeof(f->status), "fund_change=%s", fund[0] ? fund : "-");
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", q->out_refund_no);
	f->amount_minor = q->amount_minor;
	memcpy(f->currency, "CNY", 4);
	rc = chan_res(r, CHAN_OK, "", "refund %s", f->status);
done:
	free(b);
	json_decref(biz);
	json_decref(node);
	return rc;
}

static int
chan_ali_query_refund(struct chan_client *c, const struct chan_refund_ref *q, struct chan_refund *f,
                      struct chan_result *r)
{
	static const struct chan_state_map map[] = {{"REFUND_SUCCESS", CHAN_REFUND_SUCCEEDED},
	                                            {"REFUND_PROCESSING", CHAN_REFUND_PENDING},
	                                            {"REFUND_FAIL", CHAN_REFUND_FAILED}};
	json_t *node = NULL;
	char req_no[CHAN_STR];
	int rc = -1;

	if (chan_ali_call(c, "alipay.trade.fastpay.refund.query",
	                  json_pack("{s:s,s:s}", "out_trade_no", q->order.out_trade_no,
	                            "out_request_no", q->out_refund_no),
	                  0, &node, r) != 0)
		goto done;
	if (chan_json_str(node, "refund_status", f->status, sizeof(f->status)) != 0 ||
	    chan_json_str(node, "out_request_no", req_no, sizeof(req_no)) != 0) {
		chan_res(r, CHAN_RETRY, "bad_answer", "refund fields malformed");
		goto done;
	}
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", q->out_refund_no);
	memcpy(f->currency, "CNY", 4);
	/* "No refund_status means the refund was not received or failed": NONE, and the caller
	 * may submit again with the same out_request_no. */
	if (f->status[0] == '\0') {
		f->state = CHAN_REFUND_NONE;
		rc = chan_res(r, CHAN_OK, "", "no such refund");
		goto done;
	}
	if (chan_ali_same_order(node, q->order.out_trade_no, r) != 0 ||
	    (req_no[0] != '\0' && strcmp(req_no, q->out_refund_no) != 0)) {
		chan_res(r, CHAN_FORGED, "mismatch", "signed answer names another refund");
		goto done;
	}
	f->state =
	    (enum chan_refund_state)chan_state_of(map, CHAN_NMAP(map), f->status, CHAN_REFUND_NONE);
	if (f->state == CHAN_REFUND_NONE) {
		chan_res(r, CHAN_RETRY, "bad_answer", "unknown refund_status");
		goto done;
	}
	if (json_object_get(node, "refund_amount") != NULL &&
	    chan_ali_amount(node, "refund_amount", &f->amount_minor) != 0) {
		chan_res(r, CHAN_RETRY, "bad_answer", "refund_amount malformed");
		goto done;
	}
	rc = chan_res(r, CHAN_OK, "", "refund %s", f->status);
done:
	json_decref(node);
	return rc;
}

static int
chan_ali_close(struct chan_client *c, const struct chan_order_ref *o, struct chan_result *r)
{
	json_t *node = NULL;
	int rc = -1;

	if (chan_ali_order_call(c, "alipay.trade.close", o->out_trade_no, &node, r) != 0)
		goto done;
	rc = chan_res(r, CHAN_OK, "", "closed");
done:
	json_decref(node);
	return rc;
}

const struct chan_ops chan_ali_ops = {
    .id = CHAN_ALIPAY,
    .query_payment = chan_ali_query_payment,
    .refund = chan_ali_refund,
    .query_refund = chan_ali_query_refund,
    .close = chan_ali_close,
};
