/*
 * sim_api_ledger - the state of `paycb-sim api` (the ledger of orders and refunds of each
 * channel, the fault counters, the counts of requests), the plain answer every channel
 * queues, the start and end of a channel call (where the faults are drawn), and the control
 * requests under /_sim/ that tests and the demo send to register orders, set faults and read
 * the ledger.
 *
 * It sits below the channel files (sim_api_wx.c, sim_api_ali.c, sim_api_stripe.c), which
 * serve their calls from this ledger: this file never calls up into them. Every access to
 * the state is under sim_api.mu.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "form.h"
#include "httpd.h"
#include "sim_api.h"

struct sim_api_state sim_api = {.mu = PTHREAD_MUTEX_INITIALIZER, .slow_ms = 3000};

enum MHD_Result
sim_api_answer(struct MHD_Connection *c, unsigned status, const char *body, const char *const *hdrs)
{
	struct MHD_Response *resp = httpd_response_copy(body, strlen(body));
	enum MHD_Result rc;

	if (resp == NULL)
		return MHD_NO;

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

enum api_fault
sim_api_begin(struct api_call *k)
{
	struct api_faults *f = &sim_api.f[k->ch];

	pthread_mutex_lock(&sim_api.mu);
	if (sim_api_take(&f->e5xx)) {
		pthread_mutex_unlock(&sim_api.mu);
		return API_5XX;
	}
	if (sim_api_take(&f->e429)) {
		pthread_mutex_unlock(&sim_api.mu);
		return API_429;
	}
	k->forged = sim_api_take(&f->forge);
	k->slow = sim_api_take(&f->slow);
	sim_api.forged += k->forged;
	return API_GO;
}

void
sim_api_end(const struct api_call *k)
{
	long long ms = sim_api.slow_ms;

	pthread_mutex_unlock(&sim_api.mu);
	/* Done (a refund applied); the answer leaves after the handler returns, too late. */
	if (k->slow && !k->drop)
		usleep((useconds_t)ms * 1000);
}

struct api_order *
sim_api_find_order(int ch, int mi, const char *otn)
{
	for (int i = 0; i < sim_api.no; i++)
		if (sim_api.o[i].ch == ch && sim_api.o[i].mi == mi &&
		    strcmp(sim_api.o[i].out_trade_no, otn) == 0)
			return &sim_api.o[i];
	return NULL;
}

struct api_order *
sim_api_find_txn(int ch, int mi, const char *txn)
{
	for (int i = 0; i < sim_api.no; i++)
		if (sim_api.o[i].ch == ch && sim_api.o[i].mi == mi &&
		    strcmp(sim_api.o[i].txn, txn) == 0)
			return &sim_api.o[i];
	return NULL;
}

struct api_refund *
sim_api_find_refund(int ch, int mi, const char *orn, int by_id, struct api_order **op)
{
	for (int i = 0; i < sim_api.no; i++) {
		struct api_order *o = &sim_api.o[i];

		for (int k = 0; o->ch == ch && o->mi == mi && k < o->nref; k++) {
			const char *v =
			    by_id ? o->refunds[k].refund_id : o->refunds[k].out_refund_no;

			if (v[0] != '\0' && strcmp(v, orn) == 0) {
				*op = o;
				return &o->refunds[k];
			}
		}
	}
	return NULL;
}

struct api_refund *
sim_api_refund_apply(struct api_call *k, struct api_order *o, const char *orn, int64_t amount,
                     const char *id_prefix)
{
	struct api_refund *f = realloc(o->refunds, (size_t)(o->nref + 1) * sizeof(*f));

	if (f == NULL)
		return NULL;
	o->refunds = f;
	f = &o->refunds[o->nref++];
	memset(f, 0, sizeof(*f));
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", orn);
	if (id_prefix != NULL)
		snprintf(f->refund_id, sizeof(f->refund_id), "%s%016lld", id_prefix, ++sim_api.seq);
	f->amount = amount;
	o->refunded += amount;
	sim_api.refunds_applied++;
	k->drop = sim_api_take(&sim_api.f[k->ch].drop);
	return f;
}

void
sim_api_ledger_free(void)
{
	for (int i = 0; i < sim_api.no; i++)
		free(sim_api.o[i].refunds);
	free(sim_api.o);
	for (int i = 0; i < sim_api.nidem; i++) {
		free(sim_api.idem[i].request);
		free(sim_api.idem[i].answer);
	}
	free(sim_api.idem);
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
	const struct form_pair *p = form_get(f, k);

	return p != NULL ? p->val : NULL;
}

/* channel_index - "wxpay" (also when absent), "alipay" or "stripe"; -1 for anything else. */
static int
channel_index(const char *name)
{
	if (name == NULL)
		return SIM_WX;
	for (int ch = 0; ch < SIM_NCH; ch++)
		if (strcmp(sim_ch_name((enum sim_ch)ch), name) == 0)
			return ch;
	return -1;
}

/* The channel's own id of an order, made up when the test gave none. */
static void
order_txn(struct api_order *o, const char *given)
{
	static const char *const fmt[SIM_NCH] = {"4200%016lld", "2026%016lld", "pi_sim%016lld"};

	if (given != NULL)
		snprintf(o->txn, sizeof(o->txn), "%s", given);
	else
		snprintf(o->txn, sizeof(o->txn), fmt[o->ch], ++sim_api.seq);
}

/* POST /_sim/order: merchant, out_trade_no, amount (minor units), state, currency, channel,
 * transaction_id. */
static enum MHD_Result
control_order(struct MHD_Connection *c, const struct form *f)
{
	int mi = merchant_index(fget(f, "merchant")), ch = channel_index(fget(f, "channel"));
	const char *otn = fget(f, "out_trade_no"), *amt = fget(f, "amount");
	const char *st = fget(f, "state"), *cur = fget(f, "currency");
	struct api_order *o;

	if (mi < 0 || ch < 0 || otn == NULL || amt == NULL || strlen(otn) > 128 ||
	    sim_api_find_order(ch, mi, otn) != NULL)
		return sim_api_answer(c, 400, "{\"error\":\"order\"}", NULL);
	if (sim_api.no == sim_api.ocap) {
		if ((o = realloc(sim_api.o, (size_t)(sim_api.ocap * 2 + 64) * sizeof(*o))) == NULL)
			return sim_api_answer(c, 500, "{\"error\":\"memory\"}", NULL);
		sim_api.o = o;
		sim_api.ocap = sim_api.ocap * 2 + 64;
	}
	o = &sim_api.o[sim_api.no++];
	memset(o, 0, sizeof(*o));
	o->ch = ch;
	o->mi = mi;
	snprintf(o->out_trade_no, sizeof(o->out_trade_no), "%s", otn);
	snprintf(o->currency, sizeof(o->currency), "%s", cur ? cur : "CNY");
	o->amount = atoll(amt);
	o->state = st != NULL && strcmp(st, "PAID") == 0;
	order_txn(o, fget(f, "transaction_id"));
	return sim_api_answer(c, 200, "{}", NULL);
}

/* POST /_sim/fault: counts for one channel (channel=...) or, without it, for every one. */
static enum MHD_Result
control_fault(struct MHD_Connection *c, const struct form *f)
{
	static const char *const names[] = {"drop", "e5xx",  "e429",
	                                    "slow", "forge", "refund_final"};
	const char *cn = fget(f, "channel");
	int only = cn != NULL ? channel_index(cn) : -1;

	if (cn != NULL && only < 0)
		return sim_api_answer(c, 400, "{\"error\":\"channel\"}", NULL);
	for (int ch = 0; ch < SIM_NCH; ch++) {
		long long *v[] = {&sim_api.f[ch].drop,  &sim_api.f[ch].e5xx,
		                  &sim_api.f[ch].e429,  &sim_api.f[ch].slow,
		                  &sim_api.f[ch].forge, &sim_api.f[ch].refund_final};

		for (size_t i = 0; (only < 0 || only == ch) && i < sizeof(v) / sizeof(v[0]); i++)
			if (fget(f, names[i]) != NULL)
				*v[i] = atoll(fget(f, names[i]));
	}
	if (fget(f, "slow_ms") != NULL)
		sim_api.slow_ms = atoll(fget(f, "slow_ms"));
	return sim_api_answer(c, 200, "{}", NULL);
}

static char *
stats_json(void)
{
	json_t *j = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "requests", (json_int_t)sim_api.requests,
	                      "bad_sig", (json_int_t)sim_api.bad_sig, "refunds_applied",
	                      (json_int_t)sim_api.refunds_applied, "refund_posts",
	                      (json_int_t)sim_api.refund_posts, "queries",
	                      (json_int_t)sim_api.queries, "forged", (json_int_t)sim_api.forged);
	char *s = json_dumps(j, JSON_COMPACT);

	json_decref(j);
	return s;
}

/* GET /_sim/ledger?merchant=M&out_trade_no=O[&channel=C]: one order and its refunds. */
static char *
ledger_json(struct MHD_Connection *c)
{
	static const char *const st[3] = {"NOTPAY", "PAID", "CLOSED"};
	int mi = merchant_index(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "merchant"));
	int ch = channel_index(MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "channel"));
	const char *otn = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "out_trade_no");
	struct api_order *o =
	    mi >= 0 && ch >= 0 && otn != NULL ? sim_api_find_order(ch, mi, otn) : NULL;
	json_t *rf, *j;
	char *s;

	if (o == NULL)
		return NULL;
	rf = json_array();
	for (int k = 0; k < o->nref; k++)
		json_array_append_new(
		    rf, json_pack("{s:s,s:s,s:I,s:s}", "out_refund_no", o->refunds[k].out_refund_no,
		                  "refund_id", o->refunds[k].refund_id, "amount",
		                  (json_int_t)o->refunds[k].amount, "status",
		                  o->refunds[k].success ? "SUCCESS" : "PROCESSING"));
	j = json_pack("{s:s,s:s,s:s,s:I,s:I,s:I,s:I,s:o}", "channel", sim_ch_name((enum sim_ch)ch),
	              "state", st[o->state], "transaction_id", o->txn, "amount",
	              (json_int_t)o->amount, "refunded", (json_int_t)o->refunded, "refund_posts",
	              (json_int_t)o->refund_posts, "closes", (json_int_t)o->closes, "refunds", rf);
	s = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	return s;
}

/* sim_api_control - the test and demo side: orders, faults, the ledger, the counters. */
enum MHD_Result
sim_api_control(struct MHD_Connection *c, const char *method, const struct api_req *r)
{
	int post = strcmp(method, "POST") == 0, get = strcmp(method, "GET") == 0;
	struct form f = {0};
	char err[128], *body = NULL;
	enum MHD_Result rc;

	pthread_mutex_lock(&sim_api.mu);
	if (post && form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0)
		rc = sim_api_answer(c, 400, "{\"error\":\"form\"}", NULL);
	else if (post && strcmp(r->uri, "/_sim/order") == 0)
		rc = control_order(c, &f);
	else if (post && strcmp(r->uri, "/_sim/fault") == 0)
		rc = control_fault(c, &f);
	else if (get && strcmp(r->uri, "/_sim/stats") == 0 && (body = stats_json()) != NULL)
		rc = sim_api_answer(c, 200, body, NULL);
	else if (get && strncmp(r->uri, "/_sim/ledger?", 13) == 0)
		rc = (body = ledger_json(c)) != NULL
		         ? sim_api_answer(c, 200, body, NULL)
		         : sim_api_answer(c, 404, "{\"error\":\"no such order\"}", NULL);
	else
		rc = sim_api_answer(c, 404, "{\"error\":\"not found\"}", NULL);
	pthread_mutex_unlock(&sim_api.mu);
	form_free(&f);
	free(body);
	return rc;
}
