/*
 * sim_api_ledger - the state of `paycb-sim api` (the ledger of orders and refunds, the fault
 * counters, the counts of requests), the plain answer both halves queue, and the control
 * requests under /_sim/ that tests and the demo send to register orders, set faults and read
 * the ledger.
 *
 * It sits below sim_api.c, which serves the WeChat Pay calls from the same ledger: this file
 * never calls up into it. Every access to the state is under sim_api.mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "form.h"
#include "sim_api.h"

struct sim_api_state sim_api = {.mu = PTHREAD_MUTEX_INITIALIZER, .slow_ms = 3000};

enum MHD_Result
sim_api_answer(struct MHD_Connection *c, unsigned status, const char *body, const char *const *hdrs)
{
	struct MHD_Response *resp =
	    MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	for (; hdrs != NULL && hdrs[0] != NULL; hdrs += 2)
		MHD_add_response_header(resp, hdrs[0], hdrs[1]);
	if (body[0] != '\0')
		MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Request-ID", "sim-api");
	rc = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

int
sim_api_take(long long *n)
{
	if (*n <= 0)
		return 0;
	(*n)--;
	return 1;
}

struct api_order *
sim_api_find_order(int mi, const char *otn)
{
	for (int i = 0; i < sim_api.no; i++)
		if (sim_api.o[i].mi == mi && strcmp(sim_api.o[i].out_trade_no, otn) == 0)
			return &sim_api.o[i];
	return NULL;
}

struct api_refund *
sim_api_find_refund(int mi, const char *orn, struct api_order **op)
{
	for (int i = 0; i < sim_api.no; i++)
		for (int k = 0; sim_api.o[i].mi == mi && k < sim_api.o[i].nref; k++)
			if (strcmp(sim_api.o[i].refunds[k].out_refund_no, orn) == 0) {
				*op = &sim_api.o[i];
				return &sim_api.o[i].refunds[k];
			}
	return NULL;
}

static int
merchant_index(const char *id)
{
	for (int i = 0; i < sim_api.nm; i++)
		if (id != NULL && strcmp(sim_api.m[i].id, id) == 0)
			return i;
	return -1;
}

static const char *
fget(const struct form *f, const char *k)
{
	for (size_t i = 0; i < f->n; i++)
		if (strcmp(f->pairs[i].key, k) == 0)
			return f->pairs[i].val;
	return NULL;
}

/* sim_api_control - the test and demo side: orders, faults, the ledger, the counters. */
enum MHD_Result
sim_api_control(struct MHD_Connection *c, const char *method, const struct api_req *r)
{
	struct form f = {0};
	char err[128], *body = NULL;
	enum MHD_Result rc;
	json_t *j = NULL;

	pthread_mutex_lock(&sim_api.mu);
	if (strcmp(method, "POST") == 0 &&
	    form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0) {
		rc = sim_api_answer(c, 400, "{\"error\":\"form\"}", NULL);
	} else if (strcmp(method, "POST") == 0 && strcmp(r->uri, "/_sim/order") == 0) {
		int mi = merchant_index(fget(&f, "merchant"));
		const char *otn = fget(&f, "out_trade_no"), *amt = fget(&f, "amount");
		const char *st = fget(&f, "state"), *cur = fget(&f, "currency");
		struct api_order *o;

		if (mi < 0 || otn == NULL || amt == NULL || strlen(otn) > 128 ||
		    sim_api_find_order(mi, otn) != NULL) {
			rc = sim_api_answer(c, 400, "{\"error\":\"order\"}", NULL);
		} else if (sim_api.no == sim_api.ocap &&
		           (o = realloc(sim_api.o, (size_t)(sim_api.ocap * 2 + 64) * sizeof(*o))) ==
		               NULL) {
			rc = sim_api_answer(c, 500, "{\"error\":\"memory\"}", NULL);
		} else {
			if (sim_api.no == sim_api.ocap) {
				sim_api.o = o;
				sim_api.ocap = sim_api.ocap * 2 + 64;
			}
			o = &sim_api.o[sim_api.no++];
			memset(o, 0, sizeof(*o));
			o->mi = mi;
			snprintf(o->out_trade_no, sizeof(o->out_trade_no), "%s", otn);
			snprintf(o->currency, sizeof(o->currency), "%s", cur ? cur : "CNY");
			o->amount = atoll(amt);
			o->state = st != NULL && strcmp(st, "PAID") == 0;
			if (fget(&f, "transaction_id") != NULL)
				snprintf(o->txn, sizeof(o->txn), "%s", fget(&f, "transaction_id"));
			else
				snprintf(o->txn, sizeof(o->txn), "4200%016lld", ++sim_api.seq);
			rc = sim_api_answer(c, 200, "{}", NULL);
		}
	} else if (strcmp(method, "POST") == 0 && strcmp(r->uri, "/_sim/fault") == 0) {
		static const struct {
			const char *k;
			long long *v;
		} fs[] = {{"drop", &sim_api.drop},      {"e5xx", &sim_api.e5xx},
		          {"e429", &sim_api.e429},      {"slow", &sim_api.slow},
		          {"forge", &sim_api.forge},    {"refund_final", &sim_api.refund_final},
		          {"slow_ms", &sim_api.slow_ms}};

		for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
			if (fget(&f, fs[i].k) != NULL)
				*fs[i].v = atoll(fget(&f, fs[i].k));
		rc = sim_api_answer(c, 200, "{}", NULL);
	} else if (strcmp(method, "GET") == 0 && strcmp(r->uri, "/_sim/stats") == 0) {
		j = json_pack("{s:I,s:I,s:I,s:I,s:I}", "requests", (json_int_t)sim_api.requests,
		              "bad_sig", (json_int_t)sim_api.bad_sig, "refunds_applied",
		              (json_int_t)sim_api.refunds_applied, "refund_posts",
		              (json_int_t)sim_api.refund_posts, "queries",
		              (json_int_t)sim_api.queries);
		body = json_dumps(j, JSON_COMPACT);
		rc = sim_api_answer(c, 200, body, NULL);
	} else if (strcmp(method, "GET") == 0 && strncmp(r->uri, "/_sim/ledger?", 13) == 0) {
		int mi = merchant_index(
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "merchant"));
		const char *otn =
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "out_trade_no");
		struct api_order *o = mi >= 0 && otn != NULL ? sim_api_find_order(mi, otn) : NULL;

		if (o == NULL) {
			rc = sim_api_answer(c, 404, "{\"error\":\"no such order\"}", NULL);
		} else {
			static const char *const st[3] = {"NOTPAY", "PAID", "CLOSED"};
			json_t *rf = json_array();

			for (int k = 0; k < o->nref; k++)
				json_array_append_new(
				    rf,
				    json_pack("{s:s,s:I,s:s}", "out_refund_no",
				              o->refunds[k].out_refund_no, "amount",
				              (json_int_t)o->refunds[k].amount, "status",
				              o->refunds[k].success ? "SUCCESS" : "PROCESSING"));
			j = json_pack("{s:s,s:I,s:I,s:I,s:I,s:o}", "state", st[o->state], "amount",
			              (json_int_t)o->amount, "refunded", (json_int_t)o->refunded,
			              "refund_posts", (json_int_t)o->refund_posts, "closes",
			              (json_int_t)o->closes, "refunds", rf);
			body = json_dumps(j, JSON_COMPACT);
			rc = sim_api_answer(c, 200, body, NULL);
		}
	} else {
		rc = sim_api_answer(c, 404, "{\"error\":\"not found\"}", NULL);
	}
	pthread_mutex_unlock(&sim_api.mu);
	form_free(&f);
	json_decref(j);
	free(body);
	return rc;
}
