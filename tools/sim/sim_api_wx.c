/*
 * sim_api_wx - `paycb-sim api` as WeChat Pay APIv3 under /wx: query an order by
 * out_trade_no, refund, query a refund, close.
 *
 * Every request's Authorization header is checked with chan/'s server half
 * (chan_wx_verify_request) against the merchant API key the configuration names; a bad one
 * gets 401 SIGN_ERROR, unsigned, as WeChat Pay answers. Every 2xx answer is signed with the
 * merchant's platform key (the one whose certificate ingest and the reconciler trust), or,
 * under the forge fault, with a key nobody trusts.
 *
 * A refund is applied once per out_refund_no (a repeat answers the refund already made, as
 * WeChat Pay does) and never beyond the order's amount.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "chan_conf.h"
#include "chan_sign.h"
#include "sim_api.h"

/* wx_signed - a 2xx answer signed by the merchant's platform key (or, forged, by a stranger). */
static enum MHD_Result
wx_signed(struct MHD_Connection *c, const struct api_call *k, unsigned status, const char *body)
{
	char ts[24], nonce[33], *sig = NULL;
	EVP_PKEY *key = k->forged ? sim_api.stranger : sim_api.m[k->mi].wx_cert_key;
	enum MHD_Result rc;

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	if (chan_wx_nonce(nonce) != 0 ||
	    chan_wx_sign_response(key, atoll(ts), nonce, (const uint8_t *)body, strlen(body),
	                          &sig) != 0)
		return sim_api_answer(c, 500, "{\"code\":\"SYSTEM_ERROR\",\"message\":\"sim\"}",
		                      NULL);
	{
		const char *h[] = {"Wechatpay-Timestamp",
		                   ts,
		                   "Wechatpay-Nonce",
		                   nonce,
		                   "Wechatpay-Signature",
		                   sig,
		                   "Wechatpay-Serial",
		                   sim_api.m[k->mi].wx_serial,
		                   NULL};
		rc = sim_api_answer(c, status, body, h);
	}
	free(sig);
	return rc;
}

static enum MHD_Result
wx_err(struct MHD_Connection *c, unsigned status, const char *code)
{
	char b[160];

	snprintf(b, sizeof(b), "{\"code\":\"%s\",\"message\":\"simulated\"}", code);
	return sim_api_answer(c, status, b, NULL);
}

static char *
order_json(int mi, const struct api_order *o)
{
	static const char *const st[3] = {"NOTPAY", "SUCCESS", "CLOSED"};
	json_t *j =
	    json_pack("{s:s,s:s,s:s,s:s,s:{s:I,s:I,s:s}}", "mchid", sim_api.m[mi].mchid,
	              "out_trade_no", o->out_trade_no, "trade_state",
	              o->state == 1 && o->refunded > 0 ? "REFUND" : st[o->state],
	              "trade_state_desc", "simulated", "amount", "total", (json_int_t)o->amount,
	              "payer_total", (json_int_t)o->amount, "currency", o->currency);
	char *s;

	if (o->state == 1)
		json_object_set_new(j, "transaction_id", json_string(o->txn));
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

static char *
refund_json(const struct api_order *o, const struct api_refund *f)
{
	json_t *j = json_pack(
	    "{s:s,s:s,s:s,s:s,s:s,s:{s:I,s:I,s:s}}", "refund_id", f->refund_id, "out_refund_no",
	    f->out_refund_no, "transaction_id", o->txn, "out_trade_no", o->out_trade_no, "status",
	    f->success ? "SUCCESS" : "PROCESSING", "amount", "refund", (json_int_t)f->amount,
	    "total", (json_int_t)o->amount, "currency", o->currency);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

/* wx_reply - a signed 200 with body, or a 500 when building it ran out of memory. */
static enum MHD_Result
wx_reply(struct MHD_Connection *c, const struct api_call *k, const char *body)
{
	return body != NULL ? wx_signed(c, k, 200, body) : wx_err(c, 500, "SYSTEM_ERROR");
}

/* wx_refund - POST /v3/refund/domestic/refunds; called with the lock held. */
static enum MHD_Result
wx_refund(struct MHD_Connection *c, struct api_call *k, const struct api_req *r)
{
	json_t *j = json_loadb(r->body, r->len, JSON_REJECT_DUPLICATES, NULL);
	const char *otn = json_string_value(json_object_get(j, "out_trade_no"));
	const char *orn = json_string_value(json_object_get(j, "out_refund_no"));
	json_t *amt = json_object_get(j, "amount");
	json_int_t refund = json_integer_value(json_object_get(amt, "refund"));
	json_int_t total = json_integer_value(json_object_get(amt, "total"));
	struct api_order *o, *o2 = NULL;
	struct api_refund *f;
	enum MHD_Result rc;
	char *body = NULL;

	sim_api.refund_posts++;
	if (otn == NULL || orn == NULL || refund <= 0 || strlen(orn) > 64) {
		rc = wx_err(c, 400, "PARAM_ERROR");
		goto done;
	}
	if ((o = sim_api_find_order(SIM_WX, k->mi, otn)) == NULL) {
		rc = wx_err(c, 404, "RESOURCE_NOT_EXISTS");
		goto done;
	}
	o->refund_posts++;
	if ((f = sim_api_find_refund(SIM_WX, k->mi, orn, 0, &o2)) != NULL) {
		/* The same out_refund_no: the refund already made, never a second one. */
		rc = wx_reply(c, k, body = refund_json(o2, f));
		goto done;
	}
	if (sim_api_take(&sim_api.f[SIM_WX].refund_final))
		rc = wx_err(c, 403, "NOT_ENOUGH");
	else if (o->state != 1 || total != o->amount)
		rc = wx_err(c, 400, o->state != 1 ? "INVALID_REQUEST" : "PARAM_ERROR");
	else if (o->refunded + refund > o->amount)
		rc = wx_err(c, 400, "INVALID_REQUEST");
	else if ((f = sim_api_refund_apply(k, o, orn, refund, "5030")) == NULL)
		rc = wx_err(c, 500, "SYSTEM_ERROR");
	else if (k->drop)
		rc = MHD_NO; /* applied; the answer never leaves */
	else
		rc = wx_reply(c, k, body = refund_json(o, f));
done:
	free(body);
	json_decref(j);
	return rc;
}

/* wx_order - GET .../out-trade-no/{otn} and POST .../out-trade-no/{otn}/close. */
static enum MHD_Result
wx_order(struct MHD_Connection *c, const struct api_call *k, const char *method, const char *rest)
{
	char otn[200], *body = NULL;
	size_t n = strcspn(rest, "/");
	struct api_order *o;
	enum MHD_Result rc;

	snprintf(otn, sizeof(otn), "%.*s", (int)n, rest);
	o = sim_api_find_order(SIM_WX, k->mi, otn);
	sim_api.queries += strcmp(method, "GET") == 0;
	if (o == NULL)
		return wx_err(c, 404, "ORDER_NOT_EXIST");
	if (strcmp(method, "POST") == 0 && strcmp(rest + n, "/close") == 0) {
		o->closes++;
		if (o->state == 1)
			return wx_err(c, 400, "ORDERPAID");
		o->state = 2;
		return wx_signed(c, k, 204, "");
	}
	if (strcmp(method, "GET") != 0 || rest[n] != '\0')
		return wx_err(c, 404, "NOT_FOUND");
	rc = wx_reply(c, k, body = order_json(k->mi, o));
	free(body);
	return rc;
}

/* wx_refund_query - GET /v3/refund/domestic/refunds/{out_refund_no}. */
static enum MHD_Result
wx_refund_query(struct MHD_Connection *c, const struct api_call *k, const char *orn)
{
	struct api_order *o;
	struct api_refund *f;
	enum MHD_Result rc;
	char *body;

	sim_api.queries++;
	if ((f = sim_api_find_refund(SIM_WX, k->mi, orn, 0, &o)) == NULL)
		return wx_err(c, 404, "RESOURCE_NOT_EXISTS");
	f->success = 1; /* settled by the time anyone asks */
	rc = wx_reply(c, k, body = refund_json(o, f));
	free(body);
	return rc;
}

/* merchant_of - the merchant whose mchid the Authorization header names, or -1. */
static int
merchant_of(const char *auth)
{
	const char *p = auth ? strstr(auth, "mchid=\"") : NULL;
	char id[40];
	size_t n;

	if (p == NULL)
		return -1;
	p += 7;
	n = strcspn(p, "\"");
	if (n == 0 || n >= sizeof(id))
		return -1;
	memcpy(id, p, n);
	id[n] = '\0';
	for (int i = 0; i < sim_api.nm; i++)
		if (sim_api.api_key[i] != NULL && strcmp(sim_api.m[i].mchid, id) == 0)
			return i;
	return -1;
}

/* wx_authentic - the merchant whose signature the request carries, or -1 (counted). */
static int
wx_authentic(struct MHD_Connection *c, const char *method, const struct api_req *r)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	int mi = merchant_of(auth);
	const struct conf_merchant *cm =
	    mi >= 0 ? conf_merchant(&sim_api.cf, sim_api.m[mi].id) : NULL;

	const struct conf_wxpay *w = cm != NULL ? chan_conf_wx(cm) : NULL;

	if (w != NULL && chan_wx_verify_request(sim_api.api_key[mi], w->mchid, w->merchant_serial,
	                                        auth, method, r->uri, (const uint8_t *)r->body,
	                                        r->len, time(NULL), 0) == CHAN_VR_OK)
		return mi;
	pthread_mutex_lock(&sim_api.mu);
	sim_api.bad_sig++;
	pthread_mutex_unlock(&sim_api.mu);
	return -1;
}

enum MHD_Result
sim_api_wx(struct MHD_Connection *c, const char *method, struct api_req *r)
{
	static const char order_prefix[] = "/v3/pay/transactions/out-trade-no/";
	static const char refund_prefix[] = "/v3/refund/domestic/refunds/";
	struct api_call k = {.ch = SIM_WX};
	const char *p = r->uri + 3; /* after "/wx" */
	char path[512];
	size_t n = strcspn(p, "?");
	enum MHD_Result rc;

	if (n >= sizeof(path))
		return wx_err(c, 400, "PARAM_ERROR");
	memcpy(path, p, n);
	path[n] = '\0';
	if ((k.mi = wx_authentic(c, method, r)) < 0)
		return wx_err(c, 401, "SIGN_ERROR");
	switch (sim_api_begin(&k)) {
	case API_5XX:
		return wx_err(c, 500, "SYSTEM_ERROR");
	case API_429: {
		const char *h[] = {"Retry-After", "1", NULL};

		return sim_api_answer(c, 429,
		                      "{\"code\":\"RATELIMIT_EXCEEDED\",\"message\":\"sim\"}", h);
	}
	case API_GO:
		break;
	}
	if (strcmp(method, "POST") == 0 && strcmp(path, "/v3/refund/domestic/refunds") == 0)
		rc = wx_refund(c, &k, r);
	else if (strcmp(method, "GET") == 0 && strncmp(path, refund_prefix, 28) == 0)
		rc = wx_refund_query(c, &k, path + 28);
	else if (strncmp(path, order_prefix, 34) == 0)
		rc = wx_order(c, &k, method, path + 34);
	else
		rc = wx_err(c, 404, "NOT_FOUND");
	sim_api_end(&k);
	return rc;
}
