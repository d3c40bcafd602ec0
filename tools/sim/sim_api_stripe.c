/*
 * sim_api_stripe - `paycb-sim api` as the Stripe API under /stripe/v1, the calls chan/'s
 * Stripe client makes (docs/specs/channel-apis.md, section 3): retrieve, search (by
 * metadata['<order key>']) and cancel PaymentIntents; create, retrieve, list (by
 * payment_intent) and cancel Refunds.
 *
 * Authentication is the Bearer secret key the configuration names (stripe.api_key_file),
 * compared in constant time; a wrong one gets 401 as Stripe answers. Stripe signs no answers:
 * under the forge fault the answer names other objects (another id, other metadata), which
 * is what a client that trusted an unverified peer would be told.
 *
 * Idempotency-Key, as Stripe keeps it: the first request's status and body are stored once
 * the endpoint ran (also when the connection then dropped); the same key with the same
 * parameters gives them back, with other parameters a 400 idempotency_error. Faults drawn
 * before the endpoint ran (5xx, 429) store nothing. Refunds are deduplicated by nothing else,
 * as at Stripe: only the key stops a second refund.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "form.h"
#include "sim_api.h"

/* One endpoint's result: a status and the genuine object (NULL: out of memory). */
struct st_res {
	unsigned status;
	json_t *obj;
};

static struct st_res
st_error(unsigned status, const char *type, const char *code)
{
	json_t *e = json_pack("{s:{s:s,s:s}}", "error", "type", type, "message", "simulated");

	if (e != NULL && code != NULL)
		json_object_set_new(json_object_get(e, "error"), "code", json_string(code));
	return (struct st_res){status, e};
}

static struct st_res
st_missing(void)
{
	return st_error(404, "invalid_request_error", "resource_missing");
}

/* st_forge - the object as a peer that is not Stripe would tell it: other ids, other
 * metadata. Lists and search results are forged element by element. */
static void
st_forge(json_t *o)
{
	json_t *data = json_object_get(o, "data"), *v, *md = json_object_get(o, "metadata");
	const char *id = json_string_value(json_object_get(o, "id")), *k;
	char buf[300];
	size_t i;

	json_array_foreach(data, i, v) st_forge(v);
	if (id != NULL) {
		snprintf(buf, sizeof(buf), "%.3sforged%s", id, id + (strlen(id) > 3 ? 3 : 0));
		json_object_set_new(o, "id", json_string(buf));
	}
	json_object_foreach(md, k, v)
	{
		snprintf(buf, sizeof(buf), "forged-%s", json_string_value(v));
		json_object_set_new(md, k, json_string(buf));
	}
}

static json_t *
st_currency(const struct api_order *o)
{
	char cur[4];

	for (int i = 0; i < 4; i++)
		cur[i] = (char)tolower((unsigned char)o->currency[i]);
	return json_string(cur);
}

static json_t *
st_pi(const struct api_order *o)
{
	static const char *const st[3] = {"requires_payment_method", "succeeded", "canceled"};

	return json_pack("{s:s,s:s,s:I,s:I,s:o,s:s,s:{s:s}}", "id", o->txn, "object",
	                 "payment_intent", "amount", (json_int_t)o->amount, "amount_received",
	                 (json_int_t)(o->state == 1 ? o->amount : 0), "currency", st_currency(o),
	                 "status", st[o->state], "metadata", sim_api.m[o->mi].order_key,
	                 o->out_trade_no);
}

static json_t *
st_refund(const struct api_order *o, const struct api_refund *f)
{
	return json_pack("{s:s,s:s,s:I,s:o,s:s,s:s,s:{s:s,s:s}}", "id", f->refund_id, "object",
	                 "refund", "amount", (json_int_t)f->amount, "currency", st_currency(o),
	                 "payment_intent", o->txn, "status", f->success ? "succeeded" : "pending",
	                 "metadata", sim_api.m[o->mi].order_key, o->out_trade_no, "paycb_refund_no",
	                 f->out_refund_no);
}

/* GET /v1/payment_intents/search?query=metadata['KEY']:'VALUE' */
static struct st_res
st_search(struct MHD_Connection *c, const struct api_call *k)
{
	const char *q = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "query");
	const char *key = sim_api.m[k->mi].order_key;
	char want[200];
	size_t kl = strlen(key), n;
	json_t *data = json_array();

	sim_api.queries++;
	if (q == NULL || strncmp(q, "metadata['", 10) != 0 || strncmp(q + 10, key, kl) != 0 ||
	    strncmp(q + 10 + kl, "']:'", 4) != 0 ||
	    (n = strcspn(q + 14 + kl, "'")) >= sizeof(want) || q[14 + kl + n] != '\'' ||
	    q[15 + kl + n] != '\0') {
		json_decref(data);
		return st_error(400, "invalid_request_error", "parameter_invalid");
	}
	snprintf(want, sizeof(want), "%.*s", (int)n, q + 14 + kl);
	for (int i = 0; i < sim_api.no; i++)
		if (sim_api.o[i].ch == SIM_STRIPE && sim_api.o[i].mi == k->mi &&
		    strcmp(sim_api.o[i].out_trade_no, want) == 0)
			json_array_append_new(data, st_pi(&sim_api.o[i]));
	return (struct st_res){200, json_pack("{s:s,s:o,s:b,s:n}", "object", "search_result",
	                                      "data", data, "has_more", 0, "next_page")};
}

/* POST /v1/payment_intents/{id}/cancel: only a PaymentIntent still payable cancels. */
static struct st_res
st_pi_cancel(const struct api_call *k, const char *id)
{
	struct api_order *o = sim_api_find_txn(SIM_STRIPE, k->mi, id);

	if (o == NULL)
		return st_missing();
	o->closes++;
	if (o->state != 0)
		return st_error(400, "invalid_request_error", "payment_intent_unexpected_state");
	o->state = 2;
	return (struct st_res){200, st_pi(o)};
}

/* POST /v1/refunds: payment_intent, amount (default: what is left), metadata[...]. */
static struct st_res
st_refund_create(struct api_call *k, const struct form *f)
{
	const struct form_pair *pi = form_get(f, "payment_intent"), *amt = form_get(f, "amount");
	const struct form_pair *no = form_get(f, "metadata[paycb_refund_no]");
	struct api_order *o = pi != NULL ? sim_api_find_txn(SIM_STRIPE, k->mi, pi->val) : NULL;
	struct api_refund *r;
	long long want;

	if (o == NULL)
		return st_error(400, "invalid_request_error", "resource_missing");
	want = amt != NULL ? atoll(amt->val) : o->amount - o->refunded;
	if (no != NULL && strlen(no->val) > 64)
		return st_error(400, "invalid_request_error", "parameter_invalid_string_too_long");
	if (sim_api_take(&sim_api.f[SIM_STRIPE].refund_final))
		return st_error(400, "invalid_request_error", "balance_insufficient");
	if (o->state != 1)
		return st_error(400, "invalid_request_error", "payment_intent_unexpected_state");
	if (o->refunded >= o->amount)
		return st_error(400, "invalid_request_error", "charge_already_refunded");
	if (want <= 0 || o->refunded + want > o->amount)
		return st_error(400, "invalid_request_error", "amount_too_large");
	if ((r = sim_api_refund_apply(k, o, no != NULL ? no->val : "", want, "re_sim")) == NULL)
		return (struct st_res){500, NULL};
	return (struct st_res){200, st_refund(o, r)};
}

/* GET /v1/refunds/{id}: a refund is settled by the time anyone asks. */
static struct st_res
st_refund_get(const struct api_call *k, const char *id)
{
	struct api_order *o;
	struct api_refund *f = sim_api_find_refund(SIM_STRIPE, k->mi, id, 1, &o);

	sim_api.queries++;
	if (f == NULL)
		return st_missing();
	f->success = 1;
	return (struct st_res){200, st_refund(o, f)};
}

/* GET /v1/refunds?payment_intent=pi_... */
static struct st_res
st_refund_list(struct MHD_Connection *c, const struct api_call *k)
{
	const char *pi = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "payment_intent");
	struct api_order *o = pi != NULL ? sim_api_find_txn(SIM_STRIPE, k->mi, pi) : NULL;
	json_t *data = json_array();

	sim_api.queries++;
	for (int i = 0; o != NULL && i < o->nref; i++) {
		o->refunds[i].success = 1;
		json_array_append_new(data, st_refund(o, &o->refunds[i]));
	}
	return (struct st_res){200, json_pack("{s:s,s:o,s:b,s:s}", "object", "list", "data", data,
	                                      "has_more", 0, "url", "/v1/refunds")};
}

/* The stored answer under merchant mi's key, or NULL. */
static struct api_idem *
st_idem_find(int mi, const char *key)
{
	for (int i = 0; i < sim_api.nidem; i++)
		if (sim_api.idem[i].mi == mi && strcmp(sim_api.idem[i].key, key) == 0)
			return &sim_api.idem[i];
	return NULL;
}

static void
st_idem_store(int mi, const char *key, const char *request, unsigned status, const char *answer)
{
	struct api_idem *e;

	if (sim_api.nidem == sim_api.idemcap) {
		int cap = sim_api.idemcap * 2 + 16;

		if ((e = realloc(sim_api.idem, (size_t)cap * sizeof(*e))) == NULL)
			return;
		sim_api.idem = e;
		sim_api.idemcap = cap;
	}
	e = &sim_api.idem[sim_api.nidem];
	snprintf(e->key, sizeof(e->key), "%s", key);
	e->mi = mi;
	e->status = status;
	e->request = strdup(request);
	e->answer = strdup(answer);
	if (e->request == NULL || e->answer == NULL) {
		free(e->request);
		free(e->answer);
		return;
	}
	sim_api.nidem++;
}

/* st_route - the endpoint of a request, run with the lock held. */
static struct st_res
st_route(struct MHD_Connection *c, struct api_call *k, const char *method, const char *path,
         const struct api_req *r)
{
	static const char pis[] = "/v1/payment_intents/", refs[] = "/v1/refunds";
	struct form f = {0};
	char err[128];
	struct st_res res;
	size_t n;

	if (strcmp(method, "GET") == 0 && strcmp(path, "/v1/payment_intents/search") == 0)
		return st_search(c, k);
	if (strcmp(method, "GET") == 0 && strcmp(path, refs) == 0)
		return st_refund_list(c, k);
	if (strncmp(path, pis, 20) == 0 && (n = strcspn(path + 20, "/")) > 0) {
		struct api_order *o;

		if (strcmp(method, "POST") == 0 && strcmp(path + 20 + n, "/cancel") == 0) {
			char id[64];

			snprintf(id, sizeof(id), "%.*s", (int)n, path + 20);
			return st_pi_cancel(k, id);
		}
		if (strcmp(method, "GET") != 0 || path[20 + n] != '\0')
			return st_missing();
		sim_api.queries++;
		o = sim_api_find_txn(SIM_STRIPE, k->mi, path + 20);
		return o != NULL ? (struct st_res){200, st_pi(o)} : st_missing();
	}
	if (strcmp(method, "POST") == 0 && strcmp(path, refs) == 0) {
		if (form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0)
			return st_error(400, "invalid_request_error", "parameter_invalid");
		res = st_refund_create(k, &f);
		form_free(&f);
		return res;
	}
	if (strncmp(path, "/v1/refunds/", 12) == 0 && (n = strcspn(path + 12, "/")) > 0) {
		if (strcmp(method, "GET") == 0 && path[12 + n] == '\0')
			return st_refund_get(k, path + 12);
		if (strcmp(method, "POST") == 0 && strcmp(path + 12 + n, "/cancel") == 0)
			return st_error(400, "invalid_request_error", "refund_unexpected_state");
	}
	return st_missing();
}

/* st_key_owner - the merchant whose secret key the Bearer header carries, or -1 (counted). */
static int
st_key_owner(struct MHD_Connection *c)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	size_t n = auth != NULL && strncmp(auth, "Bearer ", 7) == 0 ? strlen(auth + 7) : 0;
	int mi = -1;

	for (int i = 0; n > 0 && i < sim_api.nm; i++)
		if (sim_api.stripe_key[i] != NULL && strlen(sim_api.stripe_key[i]) == n &&
		    CRYPTO_memcmp(sim_api.stripe_key[i], auth + 7, n) == 0)
			mi = i;
	if (mi < 0) {
		pthread_mutex_lock(&sim_api.mu);
		sim_api.bad_sig++;
		pthread_mutex_unlock(&sim_api.mu);
	}
	return mi;
}

/* st_send - the answer: genuine, or forged on the wire; NULL object is a 500. */
static enum MHD_Result
st_send(struct MHD_Connection *c, const struct api_call *k, unsigned status, const char *text)
{
	json_t *o;
	char *forged;
	enum MHD_Result rc;

	if (!k->forged || status != 200 || (o = json_loads(text, 0, NULL)) == NULL)
		return sim_api_answer(c, status, text, NULL);
	st_forge(o);
	forged = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	rc = sim_api_answer(c, status, forged != NULL ? forged : "", NULL);
	free(forged);
	json_decref(o);
	return rc;
}

/* st_count_post - every refund POST counts, a replayed or refused one too. */
static void
st_count_post(const struct api_call *k, const struct api_req *r)
{
	struct form f = {0};
	const struct form_pair *pi;
	struct api_order *o;
	char err[128];

	sim_api.refund_posts++;
	if (form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) == 0 &&
	    (pi = form_get(&f, "payment_intent")) != NULL &&
	    (o = sim_api_find_txn(SIM_STRIPE, k->mi, pi->val)) != NULL)
		o->refund_posts++;
	form_free(&f);
}

/* st_serve - an authenticated call after its faults: replay, or run and store. */
static enum MHD_Result
st_serve(struct MHD_Connection *c, struct api_call *k, const char *method, const char *path,
         const struct api_req *r)
{
	const char *idem = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
	const struct api_idem *seen;
	char *req = NULL, *text = NULL;
	struct st_res res;
	enum MHD_Result rc;

	if (strcmp(method, "POST") == 0 && strcmp(path, "/v1/refunds") == 0)
		st_count_post(k, r);
	if (strcmp(method, "POST") != 0 || idem == NULL || strlen(idem) > 255)
		idem = NULL;
	else if (asprintf(&req, "%s %s\n%s", method, path, r->body) < 0)
		return sim_api_answer(c, 500, "", NULL);
	if (idem != NULL && (seen = st_idem_find(k->mi, idem)) != NULL) {
		res = strcmp(seen->request, req) == 0
		          ? (struct st_res){seen->status, json_loads(seen->answer, 0, NULL)}
		          : st_error(400, "idempotency_error", NULL);
	} else {
		res = st_route(c, k, method, path, r);
	}
	if (res.obj == NULL ||
	    (text = json_dumps(res.obj, JSON_COMPACT | JSON_PRESERVE_ORDER)) == NULL) {
		rc = sim_api_answer(c, 500, "{\"error\":{\"type\":\"api_error\"}}", NULL);
		goto done;
	}
	if (idem != NULL && st_idem_find(k->mi, idem) == NULL)
		st_idem_store(k->mi, idem, req, res.status, text);
	rc = k->drop ? MHD_NO : st_send(c, k, res.status, text);
done:
	json_decref(res.obj);
	free(text);
	free(req);
	return rc;
}

enum MHD_Result
sim_api_stripe(struct MHD_Connection *c, const char *method, struct api_req *r)
{
	struct api_call k = {.ch = SIM_STRIPE};
	char path[512];
	size_t n = strcspn(r->uri + 7, "?"); /* after "/stripe" */
	enum MHD_Result rc;

	if (n >= sizeof(path))
		return sim_api_answer(c, 414, "", NULL);
	snprintf(path, sizeof(path), "%.*s", (int)n, r->uri + 7);
	if ((k.mi = st_key_owner(c)) < 0)
		return sim_api_answer(c, 401,
		                      "{\"error\":{\"type\":\"invalid_request_error\",\"message\":"
		                      "\"Invalid API Key provided\"}}",
		                      NULL);
	switch (sim_api_begin(&k)) {
	case API_5XX:
		return sim_api_answer(c, 500, "{\"error\":{\"type\":\"api_error\"}}", NULL);
	case API_429:
		return sim_api_answer(c, 429,
		                      "{\"error\":{\"type\":\"invalid_request_error\",\"code\":"
		                      "\"rate_limit\"}}",
		                      NULL);
	case API_GO:
		break;
	}
	rc = st_serve(c, &k, method, path, r);
	sim_api_end(&k);
	return rc;
}
