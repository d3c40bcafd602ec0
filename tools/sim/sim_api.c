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
 *
 * This file serves the WeChat Pay calls and runs the server; the ledger, the fault counters
 * and the /_sim/ control requests are in sim_api_ledger.c (shared through sim_api.h).
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
#include "crypto.h"
#include "daemon.h"
#include "sim.h"
#include "sim_api.h"

static volatile sig_atomic_t api_stop;

static void
on_signal(int s)
{
	(void)s;
	api_stop = 1;
}

static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct api_req *r = calloc(1, sizeof(*r));

	(void)cls, (void)c;
	if (r != NULL)
		r->uri = strdup(uri);
	return r;
}

static void
done_cb(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode t)
{
	struct api_req *r = *req_cls;

	(void)cls, (void)c, (void)t;
	if (r != NULL) {
		free(r->uri);
		free(r->body);
		free(r);
	}
	*req_cls = NULL;
}

/* wx_signed - a 2xx answer signed by the merchant's platform key (or, forged, by a stranger). */
static enum MHD_Result
wx_signed(struct MHD_Connection *c, int mi, unsigned status, const char *body, int forged)
{
	char ts[24], nonce[33], *sig = NULL;
	EVP_PKEY *k = forged ? sim_api.stranger : sim_api.m[mi].wx_cert_key;
	enum MHD_Result rc;

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	if (chan_wx_nonce(nonce) != 0 ||
	    chan_wx_sign_response(k, atoll(ts), nonce, (const uint8_t *)body, strlen(body), &sig) !=
	        0)
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
		                   sim_api.m[mi].wx_serial,
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

/* wx_refund - POST /v3/refund/domestic/refunds; called with the lock held. */
static enum MHD_Result
wx_refund(struct MHD_Connection *c, int mi, const struct api_req *r, int forged, int *drop)
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
	if ((o = sim_api_find_order(mi, otn)) == NULL) {
		rc = wx_err(c, 404, "RESOURCE_NOT_EXISTS");
		goto done;
	}
	o->refund_posts++;
	if ((f = sim_api_find_refund(mi, orn, &o2)) != NULL) {
		/* The same out_refund_no: the refund already made, never a second one. */
		body = refund_json(o2, f);
		rc = wx_signed(c, mi, 200, body, forged);
		goto done;
	}
	if (sim_api_take(&sim_api.refund_final)) {
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
	snprintf(f->refund_id, sizeof(f->refund_id), "5030%016lld", ++sim_api.seq);
	f->amount = refund;
	o->refunded += refund;
	sim_api.refunds_applied++;
	if (sim_api_take(&sim_api.drop)) {
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
	for (int i = 0; i < sim_api.nm; i++)
		if (sim_api.api_key[i] != NULL && strcmp(sim_api.m[i].mchid, id) == 0)
			return i;
	return -1;
}

static enum MHD_Result
wx_serve(struct MHD_Connection *c, const char *method, struct api_req *r)
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
	cm = mi >= 0 ? conf_merchant(&sim_api.cf, sim_api.m[mi].id) : NULL;
	if (cm == NULL ||
	    chan_wx_verify_request(sim_api.api_key[mi], cm->wxpay.mchid, cm->wxpay.merchant_serial,
	                           auth, method, r->uri, (const uint8_t *)r->body, r->len,
	                           time(NULL), 0) != CHAN_VR_OK) {
		pthread_mutex_lock(&sim_api.mu);
		sim_api.bad_sig++;
		pthread_mutex_unlock(&sim_api.mu);
		return wx_err(c, 401, "SIGN_ERROR");
	}
	pthread_mutex_lock(&sim_api.mu);
	if (sim_api_take(&sim_api.e5xx)) {
		pthread_mutex_unlock(&sim_api.mu);
		return wx_err(c, 500, "SYSTEM_ERROR");
	}
	if (sim_api_take(&sim_api.e429)) {
		const char *h[] = {"Retry-After", "1", NULL};

		pthread_mutex_unlock(&sim_api.mu);
		return sim_api_answer(c, 429,
		                      "{\"code\":\"RATELIMIT_EXCEEDED\",\"message\":\"sim\"}", h);
	}
	forged = sim_api_take(&sim_api.forge);
	slow = sim_api_take(&sim_api.slow);
	if (strcmp(method, "POST") == 0 && strcmp(path, "/v3/refund/domestic/refunds") == 0) {
		rc = wx_refund(c, mi, r, forged, &drop);
	} else if (strcmp(method, "GET") == 0 &&
	           strncmp(path, "/v3/refund/domestic/refunds/", 28) == 0) {
		sim_api.queries++;
		if ((f = sim_api_find_refund(mi, path + 28, &o)) == NULL) {
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
		o = sim_api_find_order(mi, otn);
		sim_api.queries += strcmp(method, "GET") == 0;
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
	pthread_mutex_unlock(&sim_api.mu);
	free(body);
	/* Done (a refund applied); the answer leaves after the handler returns, too late. */
	if (slow && !drop)
		usleep((useconds_t)sim_api.slow_ms * 1000);
	return rc;
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
        const char *version, const char *data, size_t *size, void **req_cls)
{
	struct api_req *r = *req_cls;

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
		return sim_api_control(c, method, r);
	pthread_mutex_lock(&sim_api.mu);
	sim_api.requests++;
	pthread_mutex_unlock(&sim_api.mu);
	if (strncmp(r->uri, "/wx/", 4) == 0)
		return wx_serve(c, method, r);
	return sim_api_answer(c, 404, "{\"error\":\"not found\"}", NULL);
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
	if (conf_load(conf, PROC_SIM, &sim_api.cf, &errs) != 0) {
		fprintf(stderr, "%s", errs.text);
		return EXIT_CONFIG;
	}
	if (sim_merchants_load(&sim_api.cf, keys, &sim_api.m, &sim_api.nm, err, sizeof(err)) != 0 ||
	    (sim_api.api_key = calloc((size_t)sim_api.nm + 1, sizeof(*sim_api.api_key))) == NULL ||
	    (sim_api.stranger = EVP_RSA_gen(2048)) == NULL) {
		fprintf(stderr, "paycb-sim api: %s\n", err);
		goto done;
	}
	for (int i = 0; i < sim_api.nm; i++) {
		const struct conf_merchant *cm = conf_merchant(&sim_api.cf, sim_api.m[i].id);

		/* The channel holds the merchant's API certificate; the simulator reads the
		 * public half from the key file the configuration names. */
		if (cm->has_wxpay && cm->wxpay.merchant_key_file != NULL &&
		    cm->wxpay.merchant_key_file[0] != '\0' &&
		    crypto_load_privkey_file(cm->wxpay.merchant_key_file, &sim_api.api_key[i], err,
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
	printf("event=api_ready port=%d merchants=%d\n", port, sim_api.nm);
	fflush(stdout);
	while (!api_stop)
		usleep(50 * 1000);
	printf("event=api_stop requests=%lld bad_sig=%lld refunds_applied=%lld refund_posts=%lld\n",
	       sim_api.requests, sim_api.bad_sig, sim_api.refunds_applied, sim_api.refund_posts);
	rc = 0;
done:
	if (d != NULL)
		MHD_stop_daemon(d);
	for (int i = 0; sim_api.api_key != NULL && i < sim_api.nm; i++)
		EVP_PKEY_free(sim_api.api_key[i]);
	free(sim_api.api_key);
	EVP_PKEY_free(sim_api.stranger);
	for (int i = 0; i < sim_api.no; i++)
		free(sim_api.o[i].refunds);
	free(sim_api.o);
	if (sim_api.m != NULL)
		sim_merchants_free(sim_api.m, sim_api.nm);
	conf_free(&sim_api.cf);
	return rc;
}
