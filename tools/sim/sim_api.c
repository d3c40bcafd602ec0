/*
 * sim_api - `paycb-sim api`: the channel side of paycb-reconciler's calls, for WeChat Pay
 * APIv3 (query an order by out_trade_no, refund, query a refund, close), on loopback HTTP.
 *
 * Every request's Authorization header is checked with chan/'s server half
 * (chan_wx_verify_request) against the merchant API key the configuration names; a bad one
 * gets 401 SIGN_ERROR, unsigned, as WeChat Pay answers. Every 2xx answer is signed with the
 * merchant's platform key (the one whose certificate ingest and the reconciler trust).
 *
 * The ledger: one entry per order (registered with POST /_sim/order, NOTPAY or PAID), its
 * refunds by out_refund_no. A refund is applied once per out_refund_no (a repeat answers the
 * refund already made, as WeChat Pay does) and never beyond the order's amount; the ledger
 * counts every refund POST, so a test can see that nothing was refunded twice.
 *
 * Faults (POST /_sim/fault, form fields, each a count of requests it applies to): drop=N
 * (a refund is applied, then the connection closes without an answer), e5xx=N, e429=N (with
 * Retry-After: 1), slow=N (answered after slow_ms, default 3000), forge=N (answers signed
 * with a key nobody trusts), refund_final=N (refunds refused 403 NOT_ENOUGH, not applied).
 * GET /_sim/ledger?merchant=M&out_trade_no=O and GET /_sim/stats show the state as JSON.
 * The process runs until SIGTERM or SIGINT.
 */
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <microhttpd.h>
#include <openssl/evp.h>

#include "chan_sign.h"
#include "daemon.h"
#include "form.h"
#include "sig.h"
#include "sim.h"

struct api_refund {
	char out_refund_no[65], refund_id[40];
	int64_t amount;
	int success; /* 0 PROCESSING, 1 SUCCESS */
};

struct api_order {
	int mi; /* merchant index */
	char out_trade_no[129], txn[40], currency[4];
	int64_t amount, refunded;
	int state; /* 0 NOTPAY, 1 PAID, 2 CLOSED */
	struct api_refund *refunds;
	int nref;
	long long refund_posts, closes;
};

static struct {
	pthread_mutex_t mu;
	struct conf cf;
	struct sim_merchant *m;
	int nm;
	EVP_PKEY **api_key; /* per merchant: the merchant API key (its public half verifies) */
	EVP_PKEY *stranger;
	struct api_order *o;
	int no, ocap;
	long long seq;
	/* Faults: requests left to which each applies. */
	long long drop, e5xx, e429, slow, forge, refund_final, slow_ms;
	long long requests, bad_sig, refunds_applied, refund_posts, queries;
} A = {.mu = PTHREAD_MUTEX_INITIALIZER, .slow_ms = 3000};

static volatile sig_atomic_t api_stop;

static void
on_signal(int s)
{
	(void)s;
	api_stop = 1;
}

struct req {
	int started;
	char *uri, *body;
	size_t len;
};

static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req *r = calloc(1, sizeof(*r));

	(void)cls, (void)c;
	if (r != NULL)
		r->uri = strdup(uri);
	return r;
}

static void
done_cb(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode t)
{
	struct req *r = *req_cls;

	(void)cls, (void)c, (void)t;
	if (r != NULL) {
		free(r->uri);
		free(r->body);
		free(r);
	}
	*req_cls = NULL;
}

static enum MHD_Result
answer(struct MHD_Connection *c, unsigned status, const char *body, const char *const *hdrs)
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

/* take - consumes one application of a fault counter (under the lock). */
static int
take(long long *n)
{
	if (*n <= 0)
		return 0;
	(*n)--;
	return 1;
}

/* wx_signed - a 2xx answer signed by the merchant's platform key (or, forged, by a stranger). */
static enum MHD_Result
wx_signed(struct MHD_Connection *c, int mi, unsigned status, const char *body, int forged)
{
	char ts[24], nonce[33], *sig = NULL;
	EVP_PKEY *k = forged ? A.stranger : A.m[mi].wx_cert_key;
	enum MHD_Result rc;

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	if (chan_wx_nonce(nonce) != 0 ||
	    chan_wx_sign_response(k, atoll(ts), nonce, (const uint8_t *)body, strlen(body), &sig) !=
	        0)
		return answer(c, 500, "{\"code\":\"SYSTEM_ERROR\",\"message\":\"sim\"}", NULL);
	{
		const char *h[] = {"Wechatpay-Timestamp",
		                   ts,
		                   "Wechatpay-Nonce",
		                   nonce,
		                   "Wechatpay-Signature",
		                   sig,
		                   "Wechatpay-Serial",
		                   A.m[mi].wx_serial,
		                   NULL};
		rc = answer(c, status, body, h);
	}
	free(sig);
	return rc;
}

static enum MHD_Result
wx_err(struct MHD_Connection *c, unsigned status, const char *code)
{
	char b[160];

	snprintf(b, sizeof(b), "{\"code\":\"%s\",\"message\":\"simulated\"}", code);
	return answer(c, status, b, NULL);
}

static struct api_order *
find_order(int mi, const char *otn)
{
	for (int i = 0; i < A.no; i++)
		if (A.o[i].mi == mi && strcmp(A.o[i].out_trade_no, otn) == 0)
			return &A.o[i];
	return NULL;
}

static struct api_refund *
find_refund(int mi, const char *orn, struct api_order **op)
{
	for (int i = 0; i < A.no; i++)
		for (int k = 0; A.o[i].mi == mi && k < A.o[i].nref; k++)
			if (strcmp(A.o[i].refunds[k].out_refund_no, orn) == 0) {
				*op = &A.o[i];
				return &A.o[i].refunds[k];
			}
	return NULL;
}

static char *
order_json(int mi, const struct api_order *o)
{
	static const char *const st[3] = {"NOTPAY", "SUCCESS", "CLOSED"};
	json_t *j =
	    json_pack("{s:s,s:s,s:s,s:s,s:{s:I,s:I,s:s}}", "mchid", A.m[mi].mchid, "out_trade_no",
	              o->out_trade_no, "trade_state",
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

/* wx_refund - POST /v3/refund/domestic/refunds; called with the lock held. */
static enum MHD_Result
wx_refund(struct MHD_Connection *c, int mi, const struct req *r, int forged, int *drop)
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

	A.refund_posts++;
	if (otn == NULL || orn == NULL || refund <= 0 || strlen(orn) > 64) {
		rc = wx_err(c, 400, "PARAM_ERROR");
		goto done;
	}
	if ((o = find_order(mi, otn)) == NULL) {
		rc = wx_err(c, 404, "RESOURCE_NOT_EXISTS");
		goto done;
	}
	o->refund_posts++;
	if ((f = find_refund(mi, orn, &o2)) != NULL) {
		/* The same out_refund_no: the refund already made, never a second one. */
		body = refund_json(o2, f);
		rc = wx_signed(c, mi, 200, body, forged);
		goto done;
	}
	if (take(&A.refund_final)) {
		rc = wx_err(c, 403, "NOT_ENOUGH");
		goto done;
	}
	if (o->state != 1 || total != o->amount) {
		rc = wx_err(c, 400, o->state != 1 ? "INVALID_REQUEST" : "PARAM_ERROR");
		goto done;
	}
	if (o->refunded + refund > o->amount) {
		rc = wx_err(c, 400, "INVALID_REQUEST");
		goto done;
	}
	if ((f = realloc(o->refunds, (size_t)(o->nref + 1) * sizeof(*f))) == NULL) {
		rc = wx_err(c, 500, "SYSTEM_ERROR");
		goto done;
	}
	o->refunds = f;
	f = &o->refunds[o->nref++];
	memset(f, 0, sizeof(*f));
	snprintf(f->out_refund_no, sizeof(f->out_refund_no), "%s", orn);
	snprintf(f->refund_id, sizeof(f->refund_id), "5030%016lld", ++A.seq);
	f->amount = refund;
	o->refunded += refund;
	A.refunds_applied++;
	if (take(&A.drop)) {
		*drop = 1; /* applied; the answer never leaves */
		rc = MHD_NO;
		goto done;
	}
	body = refund_json(o, f);
	rc = wx_signed(c, mi, 200, body, forged);
done:
	free(body);
	json_decref(j);
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
	for (int i = 0; i < A.nm; i++)
		if (A.api_key[i] != NULL && strcmp(A.m[i].mchid, id) == 0)
			return i;
	return -1;
}

static enum MHD_Result
wx_serve(struct MHD_Connection *c, const char *method, struct req *r)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *p = r->uri + 3; /* after "/wx" */
	char path[512];
	int mi = merchant_of(auth), forged, drop = 0, slow;
	const struct conf_merchant *cm;
	struct api_order *o;
	struct api_refund *f;
	enum MHD_Result rc;
	char *body = NULL;
	size_t n = strcspn(p, "?");

	if (n >= sizeof(path))
		return wx_err(c, 400, "PARAM_ERROR");
	memcpy(path, p, n);
	path[n] = '\0';
	cm = mi >= 0 ? conf_merchant(&A.cf, A.m[mi].id) : NULL;
	if (cm == NULL ||
	    chan_wx_verify_request(A.api_key[mi], cm->wxpay.mchid, cm->wxpay.merchant_serial, auth,
	                           method, r->uri, (const uint8_t *)r->body, r->len, time(NULL),
	                           0) != CHAN_VR_OK) {
		pthread_mutex_lock(&A.mu);
		A.bad_sig++;
		pthread_mutex_unlock(&A.mu);
		return wx_err(c, 401, "SIGN_ERROR");
	}
	pthread_mutex_lock(&A.mu);
	if (take(&A.e5xx)) {
		pthread_mutex_unlock(&A.mu);
		return wx_err(c, 500, "SYSTEM_ERROR");
	}
	if (take(&A.e429)) {
		const char *h[] = {"Retry-After", "1", NULL};

		pthread_mutex_unlock(&A.mu);
		return answer(c, 429, "{\"code\":\"RATELIMIT_EXCEEDED\",\"message\":\"sim\"}", h);
	}
	forged = take(&A.forge);
	slow = take(&A.slow);
	if (strcmp(method, "POST") == 0 && strcmp(path, "/v3/refund/domestic/refunds") == 0) {
		rc = wx_refund(c, mi, r, forged, &drop);
	} else if (strcmp(method, "GET") == 0 &&
	           strncmp(path, "/v3/refund/domestic/refunds/", 28) == 0) {
		A.queries++;
		if ((f = find_refund(mi, path + 28, &o)) == NULL) {
			rc = wx_err(c, 404, "RESOURCE_NOT_EXISTS");
		} else {
			f->success = 1; /* settled by the time anyone asks */
			body = refund_json(o, f);
			rc = wx_signed(c, mi, 200, body, forged);
		}
	} else if (strncmp(path, "/v3/pay/transactions/out-trade-no/", 34) == 0) {
		char otn[200];
		size_t k = strcspn(path + 34, "/");

		snprintf(otn, sizeof(otn), "%.*s", (int)k, path + 34);
		o = find_order(mi, otn);
		A.queries += strcmp(method, "GET") == 0;
		if (o == NULL) {
			rc = wx_err(c, 404, "ORDER_NOT_EXIST");
		} else if (strcmp(method, "POST") == 0 && strcmp(path + 34 + k, "/close") == 0) {
			o->closes++;
			if (o->state == 1) {
				rc = wx_err(c, 400, "ORDERPAID");
			} else {
				o->state = 2;
				rc = wx_signed(c, mi, 204, "", forged);
			}
		} else if (strcmp(method, "GET") == 0 && path[34 + k] == '\0') {
			body = order_json(mi, o);
			rc = wx_signed(c, mi, 200, body, forged);
		} else {
			rc = wx_err(c, 404, "NOT_FOUND");
		}
	} else {
		rc = wx_err(c, 404, "NOT_FOUND");
	}
	pthread_mutex_unlock(&A.mu);
	free(body);
	/* Done (a refund applied); the answer leaves after the handler returns, too late. */
	if (slow && !drop)
		usleep((useconds_t)A.slow_ms * 1000);
	return rc;
}

static int
merchant_index(const char *id)
{
	for (int i = 0; i < A.nm; i++)
		if (id != NULL && strcmp(A.m[i].id, id) == 0)
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

/* control - the test and demo side: orders, faults, the ledger, the counters. */
static enum MHD_Result
control(struct MHD_Connection *c, const char *method, struct req *r)
{
	struct form f = {0};
	char err[128], *body = NULL;
	enum MHD_Result rc;
	json_t *j = NULL;

	pthread_mutex_lock(&A.mu);
	if (strcmp(method, "POST") == 0 &&
	    form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0) {
		rc = answer(c, 400, "{\"error\":\"form\"}", NULL);
	} else if (strcmp(method, "POST") == 0 && strcmp(r->uri, "/_sim/order") == 0) {
		int mi = merchant_index(fget(&f, "merchant"));
		const char *otn = fget(&f, "out_trade_no"), *amt = fget(&f, "amount");
		const char *st = fget(&f, "state"), *cur = fget(&f, "currency");
		struct api_order *o;

		if (mi < 0 || otn == NULL || amt == NULL || strlen(otn) > 128 ||
		    find_order(mi, otn) != NULL) {
			rc = answer(c, 400, "{\"error\":\"order\"}", NULL);
		} else if (A.no == A.ocap &&
		           (o = realloc(A.o, (size_t)(A.ocap * 2 + 64) * sizeof(*o))) == NULL) {
			rc = answer(c, 500, "{\"error\":\"memory\"}", NULL);
		} else {
			if (A.no == A.ocap) {
				A.o = o;
				A.ocap = A.ocap * 2 + 64;
			}
			o = &A.o[A.no++];
			memset(o, 0, sizeof(*o));
			o->mi = mi;
			snprintf(o->out_trade_no, sizeof(o->out_trade_no), "%s", otn);
			snprintf(o->currency, sizeof(o->currency), "%s", cur ? cur : "CNY");
			o->amount = atoll(amt);
			o->state = st != NULL && strcmp(st, "PAID") == 0;
			if (fget(&f, "transaction_id") != NULL)
				snprintf(o->txn, sizeof(o->txn), "%s", fget(&f, "transaction_id"));
			else
				snprintf(o->txn, sizeof(o->txn), "4200%016lld", ++A.seq);
			rc = answer(c, 200, "{}", NULL);
		}
	} else if (strcmp(method, "POST") == 0 && strcmp(r->uri, "/_sim/fault") == 0) {
		static const struct {
			const char *k;
			long long *v;
		} fs[] = {{"drop", &A.drop},      {"e5xx", &A.e5xx},
		          {"e429", &A.e429},      {"slow", &A.slow},
		          {"forge", &A.forge},    {"refund_final", &A.refund_final},
		          {"slow_ms", &A.slow_ms}};

		for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++)
			if (fget(&f, fs[i].k) != NULL)
				*fs[i].v = atoll(fget(&f, fs[i].k));
		rc = answer(c, 200, "{}", NULL);
	} else if (strcmp(method, "GET") == 0 && strcmp(r->uri, "/_sim/stats") == 0) {
		j = json_pack("{s:I,s:I,s:I,s:I,s:I}", "requests", (json_int_t)A.requests,
		              "bad_sig", (json_int_t)A.bad_sig, "refunds_applied",
		              (json_int_t)A.refunds_applied, "refund_posts",
		              (json_int_t)A.refund_posts, "queries", (json_int_t)A.queries);
		body = json_dumps(j, JSON_COMPACT);
		rc = answer(c, 200, body, NULL);
	} else if (strcmp(method, "GET") == 0 && strncmp(r->uri, "/_sim/ledger?", 13) == 0) {
		int mi = merchant_index(
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "merchant"));
		const char *otn =
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "out_trade_no");
		struct api_order *o = mi >= 0 && otn != NULL ? find_order(mi, otn) : NULL;

		if (o == NULL) {
			rc = answer(c, 404, "{\"error\":\"no such order\"}", NULL);
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
			rc = answer(c, 200, body, NULL);
		}
	} else {
		rc = answer(c, 404, "{\"error\":\"not found\"}", NULL);
	}
	pthread_mutex_unlock(&A.mu);
	form_free(&f);
	json_decref(j);
	free(body);
	return rc;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
        const char *version, const char *data, size_t *size, void **req_cls)
{
	struct req *r = *req_cls;

	(void)cls, (void)url, (void)version;
	if (r == NULL)
		return MHD_NO;
	if (!r->started) {
		r->started = 1;
		return MHD_YES;
	}
	if (*size > 0) {
		char *nb;

		if (r->len + *size > 65536 || (nb = realloc(r->body, r->len + *size + 1)) == NULL)
			return MHD_NO;
		r->body = nb;
		memcpy(r->body + r->len, data, *size);
		r->len += *size;
		r->body[r->len] = '\0';
		*size = 0;
		return MHD_YES;
	}
	if (r->body == NULL && (r->body = calloc(1, 1)) == NULL)
		return MHD_NO;
	if (strncmp(r->uri, "/_sim/", 6) == 0)
		return control(c, method, r);
	pthread_mutex_lock(&A.mu);
	A.requests++;
	pthread_mutex_unlock(&A.mu);
	if (strncmp(r->uri, "/wx/", 4) == 0)
		return wx_serve(c, method, r);
	return answer(c, 404, "{\"error\":\"not found\"}", NULL);
}

int
sim_api_main(int argc, char **argv)
{
	static const struct option opts[] = {{"keys", required_argument, NULL, 'k'},
	                                     {"port", required_argument, NULL, 'p'},
	                                     {NULL, 0, NULL, 0}};
	const char *conf = NULL, *keys = NULL;
	char kdir[SIM_PATH], err[512];
	struct cfg_errors errs;
	struct MHD_Daemon *d = NULL;
	int port = 0, ch, rc = EXIT_CONFIG;

	while ((ch = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (ch == 'c')
			conf = optarg;
		else if (ch == 'k')
			keys = optarg;
		else if (ch == 'p')
			port = atoi(optarg);
		else
			return EXIT_USAGE;
	}
	if (conf == NULL || port <= 0 || port > 65535) {
		fprintf(stderr, "paycb-sim api: need -c CONF --port P [--keys DIR]\n");
		return EXIT_USAGE;
	}
	if (keys == NULL) {
		const char *slash = strrchr(conf, '/');

		snprintf(kdir, sizeof(kdir), "%.*skeys", slash ? (int)(slash - conf + 1) : 0, conf);
		keys = kdir;
	}
	if (conf_load(conf, PROC_SIM, &A.cf, &errs) != 0) {
		fprintf(stderr, "%s", errs.text);
		return EXIT_CONFIG;
	}
	if (sim_merchants_load(&A.cf, keys, &A.m, &A.nm, err, sizeof(err)) != 0 ||
	    (A.api_key = calloc((size_t)A.nm + 1, sizeof(*A.api_key))) == NULL ||
	    (A.stranger = EVP_RSA_gen(2048)) == NULL) {
		fprintf(stderr, "paycb-sim api: %s\n", err);
		goto done;
	}
	for (int i = 0; i < A.nm; i++) {
		const struct conf_merchant *cm = conf_merchant(&A.cf, A.m[i].id);

		/* The channel holds the merchant's API certificate; the simulator reads the
		 * public half from the key file the configuration names. */
		if (cm->has_wxpay && cm->wxpay.merchant_key_file != NULL &&
		    cm->wxpay.merchant_key_file[0] != '\0' &&
		    sig_load_privkey_file(cm->wxpay.merchant_key_file, &A.api_key[i], err,
		                          sizeof(err)) != 0) {
			fprintf(stderr, "paycb-sim api: %s\n", err);
			goto done;
		}
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD,
	                     (uint16_t)port, NULL, NULL, handler, NULL, MHD_OPTION_URI_LOG_CALLBACK,
	                     uri_cb, NULL, MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
	                     MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "paycb-sim api: cannot listen on port %d\n", port);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	printf("event=api_ready port=%d merchants=%d\n", port, A.nm);
	fflush(stdout);
	while (!api_stop)
		usleep(50 * 1000);
	printf("event=api_stop requests=%lld bad_sig=%lld refunds_applied=%lld refund_posts=%lld\n",
	       A.requests, A.bad_sig, A.refunds_applied, A.refund_posts);
	rc = 0;
done:
	if (d != NULL)
		MHD_stop_daemon(d);
	for (int i = 0; A.api_key != NULL && i < A.nm; i++)
		EVP_PKEY_free(A.api_key[i]);
	free(A.api_key);
	EVP_PKEY_free(A.stranger);
	for (int i = 0; i < A.no; i++)
		free(A.o[i].refunds);
	free(A.o);
	if (A.m != NULL)
		sim_merchants_free(A.m, A.nm);
	conf_free(&A.cf);
	return rc;
}
