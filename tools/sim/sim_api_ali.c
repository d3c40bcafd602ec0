/*
 * sim_api_ali - `paycb-sim api` as the Alipay OpenAPI gateway, POST /ali/gateway.do:
 * alipay.trade.query, alipay.trade.refund, alipay.trade.fastpay.refund.query and
 * alipay.trade.close (docs/specs/channel-apis.md, section 2).
 *
 * The parameters are read from the form body and the query string, as the gateway reads
 * both. The request's "sign" is checked with chan/'s server half (chan_ali_verify_params:
 * RSA2 over the sorted non-empty parameters) against the public half of the app key the
 * configuration names; a bad one gets code 40002 isv.invalid-signature, as Alipay answers.
 * Every answer is {"<method>_response":{...},"sign":"..."}, signed over the raw node with the
 * merchant's Alipay key (the one whose public half ingest and the reconciler trust), or,
 * under the forge fault, with a key nobody trusts.
 *
 * A refund is applied once per out_request_no: a repeat answers code 10000 with
 * fund_change=N and the trade's refund_fee, as Alipay does, never a second refund.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chan_sign.h"
#include "form.h"
#include "money.h"
#include "sim_api.h"

#define ALI_MAX_PARAMS 32

/* ali_reply - the signed answer of method with node (consumed). */
static enum MHD_Result
ali_reply(struct MHD_Connection *c, const struct api_call *k, const char *method, json_t *node)
{
	EVP_PKEY *key = k->forged ? sim_api.stranger : sim_api.m[k->mi].ali_key;
	char *nj = node != NULL ? json_dumps(node, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	char *body = NULL;
	enum MHD_Result rc;

	if (nj == NULL || chan_ali_sign_response(key, method, nj, &body) != 0)
		rc = sim_api_answer(c, 500, "", NULL);
	else
		rc = sim_api_answer(c, 200, body, NULL);
	free(body);
	free(nj);
	json_decref(node);
	return rc;
}

/* ali_fail - a failure node: code (40004 "Business Failed" unless given) and sub_code. */
static json_t *
ali_fail(const char *code, const char *sub)
{
	return json_pack("{s:s,s:s,s:s,s:s}", "code", code, "msg",
	                 strcmp(code, "40004") == 0 ? "Business Failed" : "Invalid Arguments",
	                 "sub_code", sub, "sub_msg", "simulated");
}

/* ali_ok - a success node naming the trade. */
static json_t *
ali_ok(const struct api_order *o)
{
	return json_pack("{s:s,s:s,s:s,s:s}", "code", "10000", "msg", "Success", "trade_no", o->txn,
	                 "out_trade_no", o->out_trade_no);
}

/* ali_set_amount - a decimal yuan member from minor units. */
static void
ali_set_amount(json_t *node, const char *key, int64_t minor)
{
	char s[40];

	if (money_format(minor, 2, s, sizeof(s)) == 0)
		json_object_set_new(node, key, json_string(s));
}

/* ali_order - the order biz_content names (out_trade_no, else trade_no), or NULL. */
static struct api_order *
ali_order(const struct api_call *k, const json_t *biz)
{
	const char *otn = json_string_value(json_object_get(biz, "out_trade_no"));
	const char *tn = json_string_value(json_object_get(biz, "trade_no"));

	if (tn != NULL)
		return sim_api_find_txn(SIM_ALI, k->mi, tn);
	return otn != NULL ? sim_api_find_order(SIM_ALI, k->mi, otn) : NULL;
}

/* alipay.trade.query: a fully refunded trade reads TRADE_CLOSED, as Alipay documents. */
static json_t *
ali_query(const struct api_call *k, const json_t *biz)
{
	static const char *const st[3] = {"WAIT_BUYER_PAY", "TRADE_SUCCESS", "TRADE_CLOSED"};
	struct api_order *o = ali_order(k, biz);
	json_t *n;

	sim_api.queries++;
	if (o == NULL)
		return ali_fail("40004", "ACQ.TRADE_NOT_EXIST");
	if ((n = ali_ok(o)) == NULL)
		return NULL;
	json_object_set_new(n, "buyer_logon_id", json_string("sim***@example.com"));
	json_object_set_new(
	    n, "trade_status",
	    json_string(o->state == 1 && o->refunded == o->amount ? "TRADE_CLOSED" : st[o->state]));
	ali_set_amount(n, "total_amount", o->amount);
	if (o->state == 1)
		ali_set_amount(n, "buyer_pay_amount", o->amount);
	return n;
}

/* ali_refund_node - the answer to a refund: fund_change says whether this call moved money. */
static json_t *
ali_refund_node(const struct api_order *o, int moved)
{
	json_t *n = ali_ok(o);

	if (n == NULL)
		return NULL;
	json_object_set_new(n, "buyer_logon_id", json_string("sim***@example.com"));
	json_object_set_new(n, "fund_change", json_string(moved ? "Y" : "N"));
	ali_set_amount(n, "refund_fee", o->refunded);
	json_object_set_new(n, "gmt_refund_pay", json_string("2026-12-02 10:00:00"));
	ali_set_amount(n, "send_back_fee", moved ? o->refunds[o->nref - 1].amount : 0);
	return n;
}

/* alipay.trade.refund; NULL with k->drop set when the answer is to be dropped. */
static json_t *
ali_refund(struct api_call *k, const json_t *biz)
{
	struct api_order *o = ali_order(k, biz), *o2 = NULL;
	const char *orn = json_string_value(json_object_get(biz, "out_request_no"));
	const char *amt = json_string_value(json_object_get(biz, "refund_amount"));
	int64_t minor = 0;

	sim_api.refund_posts++;
	if (o == NULL)
		return ali_fail("40004", "ACQ.TRADE_NOT_EXIST");
	o->refund_posts++;
	/* Without out_request_no the request number is the order number. */
	if (orn == NULL)
		orn = o->out_trade_no;
	if (strlen(orn) > 64 || amt == NULL || money_parse_decimal_why(amt, 2, &minor) != NULL ||
	    minor <= 0)
		return ali_fail("40002", "isv.invalid-parameter");
	if (sim_api_find_refund(SIM_ALI, k->mi, orn, 0, &o2) != NULL && o2 == o)
		return ali_refund_node(o, 0);
	if (sim_api_take(&sim_api.f[SIM_ALI].refund_final))
		return ali_fail("40004", "ACQ.SELLER_BALANCE_NOT_ENOUGH");
	if (o->state != 1)
		return ali_fail("40004", "ACQ.TRADE_STATUS_ERROR");
	if (o->refunded + minor > o->amount)
		return ali_fail("40004", "ACQ.REASON_TRADE_REFUND_FEE_ERR");
	if (sim_api_refund_apply(k, o, orn, minor, NULL) == NULL || k->drop)
		return NULL;
	o->refunds[o->nref - 1].success = 1; /* the synchronous refund settles at once */
	return ali_refund_node(o, 1);
}

/* alipay.trade.fastpay.refund.query: no refund_status when the refund is unknown. */
static json_t *
ali_refund_query(const struct api_call *k, const json_t *biz)
{
	struct api_order *o = ali_order(k, biz), *o2 = NULL;
	const char *orn = json_string_value(json_object_get(biz, "out_request_no"));
	struct api_refund *f;
	json_t *n;

	sim_api.queries++;
	if (orn == NULL)
		return ali_fail("40001", "isv.missing-out-request-no");
	if (o == NULL)
		return ali_fail("40004", "ACQ.TRADE_NOT_EXIST");
	if ((n = ali_ok(o)) == NULL)
		return NULL;
	json_object_set_new(n, "out_request_no", json_string(orn));
	if ((f = sim_api_find_refund(SIM_ALI, k->mi, orn, 0, &o2)) == NULL || o2 != o)
		return n;
	ali_set_amount(n, "refund_amount", f->amount);
	ali_set_amount(n, "total_amount", o->amount);
	json_object_set_new(n, "refund_status", json_string("REFUND_SUCCESS"));
	return n;
}

/* alipay.trade.close: only a trade waiting for payment closes. */
static json_t *
ali_close(const struct api_call *k, const json_t *biz)
{
	struct api_order *o = ali_order(k, biz);

	if (o == NULL)
		return ali_fail("40004", "ACQ.TRADE_NOT_EXIST");
	o->closes++;
	if (o->state != 0)
		return ali_fail("40004", "ACQ.TRADE_STATUS_ERROR");
	o->state = 2;
	return ali_ok(o);
}

static enum MHD_Result
ali_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	(void)kind;
	if (value == NULL)
		value = "";
	return form_add(cls, key, strlen(key), value, strlen(value)) == 0 ? MHD_YES : MHD_NO;
}

/*
 * ali_authentic - the merchant whose app_id the request names and whose app key signed it;
 * -1 for an unknown app, -2 for a bad signature (counted).
 */
static int
ali_authentic(const struct form *f)
{
	const struct form_pair *app = form_get(f, "app_id");
	struct chan_kv kv[ALI_MAX_PARAMS];
	int mi = -1;

	for (int i = 0; app != NULL && i < sim_api.nm; i++)
		if (sim_api.ali_app[i] != NULL && strcmp(sim_api.m[i].app_id, app->val) == 0)
			mi = i;
	if (mi < 0)
		goto bad;
	for (size_t i = 0; i < f->n && i < ALI_MAX_PARAMS; i++)
		kv[i] = (struct chan_kv){f->pairs[i].key, f->pairs[i].val};
	if (f->n <= ALI_MAX_PARAMS &&
	    chan_ali_verify_params(sim_api.ali_app[mi], kv, f->n) == CHAN_VR_OK)
		return mi;
	mi = -2 - mi; /* keep the merchant: its key signs the refusal */
bad:
	pthread_mutex_lock(&sim_api.mu);
	sim_api.bad_sig++;
	pthread_mutex_unlock(&sim_api.mu);
	return mi;
}

/* ali_dispatch - the method's answer node (the lock held). */
static json_t *
ali_dispatch(struct api_call *k, const char *method, const json_t *biz)
{
	if (biz == NULL)
		return ali_fail("40002", "isv.invalid-biz-content");
	if (strcmp(method, "alipay.trade.query") == 0)
		return ali_query(k, biz);
	if (strcmp(method, "alipay.trade.refund") == 0)
		return ali_refund(k, biz);
	if (strcmp(method, "alipay.trade.fastpay.refund.query") == 0)
		return ali_refund_query(k, biz);
	if (strcmp(method, "alipay.trade.close") == 0)
		return ali_close(k, biz);
	return ali_fail("40002", "isv.invalid-method");
}

enum MHD_Result
sim_api_ali(struct MHD_Connection *c, const char *verb, struct api_req *r)
{
	struct api_call k = {.ch = SIM_ALI};
	struct form f = {0};
	const struct form_pair *mp, *bp;
	json_t *biz = NULL, *node;
	char err[128];
	enum MHD_Result rc;

	if (strcmp(verb, "POST") != 0 || strncmp(r->uri, "/ali/gateway.do", 15) != 0 ||
	    form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0 ||
	    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, ali_arg, &f) < 0 ||
	    (mp = form_get(&f, "method")) == NULL) {
		rc = sim_api_answer(c, 400, "", NULL);
		goto done;
	}
	if ((k.mi = ali_authentic(&f)) < 0) {
		k.mi = -2 - k.mi;
		rc = k.mi >= 0
		         ? ali_reply(c, &k, mp->val, ali_fail("40002", "isv.invalid-signature"))
		         : sim_api_answer(c, 200,
		                          "{\"error_response\":{\"code\":\"40002\",\"msg\":"
		                          "\"Invalid Arguments\",\"sub_code\":"
		                          "\"isv.invalid-app-id\"}}",
		                          NULL);
		goto done;
	}
	switch (sim_api_begin(&k)) {
	case API_5XX:
		rc = sim_api_answer(c, 502, "", NULL);
		goto done;
	case API_429: {
		const char *h[] = {"Retry-After", "1", NULL};

		rc = sim_api_answer(c, 429, "", h);
		goto done;
	}
	case API_GO:
		break;
	}
	bp = form_get(&f, "biz_content");
	biz = bp != NULL ? json_loads(bp->val, JSON_REJECT_DUPLICATES, NULL) : NULL;
	node = ali_dispatch(&k, mp->val, biz);
	if (k.drop)
		rc = MHD_NO; /* applied; the answer never leaves */
	else
		rc = ali_reply(c, &k, mp->val, node);
	sim_api_end(&k);
done:
	json_decref(biz);
	form_free(&f);
	return rc;
}
