/*
 * sim_api - `paycb-sim api`: the channel side of paycb-reconciler's calls, for WeChat Pay
 * APIv3 under /wx (sim_api_wx.c), the Alipay OpenAPI gateway under /ali/gateway.do
 * (sim_api_ali.c) and the Stripe API under /stripe (sim_api_stripe.c), on loopback HTTP and,
 * with --tls-port, also on HTTPS with a certificate the caller gives (a test CA's).
 *
 * Each channel checks paycb's credentials as the real one does (WeChat Pay's Authorization
 * signature, Alipay's RSA2 sign over the sorted parameters, Stripe's Bearer secret key) with
 * the keys the configuration names, and authenticates its answers as the real one does
 * (WeChat Pay and Alipay sign them; Stripe relies on TLS).
 *
 * The ledger: one entry per channel and order (registered with POST /_sim/order, NOTPAY or
 * PAID), its refunds by the merchant's refund number. A refund is applied once per refund
 * number (a repeat answers the refund already made) and never beyond the order's amount; the
 * ledger counts every refund POST, so a test can see that nothing was refunded twice.
 *
 * Faults (POST /_sim/fault, form fields, each a count of requests it applies to, for
 * channel=wxpay|alipay|stripe or, without channel, for each): drop=N (a refund is applied,
 * then the connection closes without an answer), e5xx=N, e429=N (with Retry-After: 1),
 * slow=N (answered after slow_ms, default 3000), forge=N (answers signed with a key nobody
 * trusts; Stripe's name another object), refund_final=N (refunds refused, not applied).
 * GET /_sim/ledger?merchant=M&out_trade_no=O&channel=C and GET /_sim/stats show the state
 * as JSON. The process runs until SIGTERM or SIGINT. docs/simulator.md has the details.
 *
 * This file runs the server and loads the keys; the ledger, the fault counters and the
 * /_sim/ control requests are in sim_api_ledger.c (shared through sim_api.h).
 */
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "cfg.h"
#include "chan_conf.h"
#include "daemon.h"
#include "crypto.h"
#include "sim.h"
#include "sim_api.h"

static volatile sig_atomic_t api_stop;

/* What the command line says. */
struct api_opts {
	const char *conf, *keys, *tls_cert, *tls_key;
	int port, tls_port;
	char kdir[SIM_PATH];
};

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

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
        const char *version, const char *data, size_t *size, void **req_cls)
{
	struct api_req *r = *req_cls;

	(void)cls, (void)url, (void)version;
	if (r == NULL || r->uri == NULL)
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
		return sim_api_wx(c, method, r);
	if (strncmp(r->uri, "/ali/", 5) == 0)
		return sim_api_ali(c, method, r);
	if (strncmp(r->uri, "/stripe/", 8) == 0)
		return sim_api_stripe(c, method, r);
	return sim_api_answer(c, 404, "{\"error\":\"not found\"}", NULL);
}

static int
parse_args(int argc, char **argv, struct api_opts *o)
{
	static const struct option opts[] = {
	    {"keys", required_argument, NULL, 'k'},     {"port", required_argument, NULL, 'p'},
	    {"tls-port", required_argument, NULL, 't'}, {"tls-cert", required_argument, NULL, 'C'},
	    {"tls-key", required_argument, NULL, 'K'},  {NULL, 0, NULL, 0}};
	int ch;

	while ((ch = getopt_long(argc, argv, "c:", opts, NULL)) != -1) {
		if (ch == 'c')
			o->conf = optarg;
		else if (ch == 'k')
			o->keys = optarg;
		else if (ch == 'p')
			o->port = atoi(optarg);
		else if (ch == 't')
			o->tls_port = atoi(optarg);
		else if (ch == 'C')
			o->tls_cert = optarg;
		else if (ch == 'K')
			o->tls_key = optarg;
		else
			return -1;
	}
	if (o->conf == NULL || o->port <= 0 || o->port > 65535 || o->tls_port < 0 ||
	    o->tls_port > 65535 || (o->tls_port > 0 && (o->tls_cert == NULL || o->tls_key == NULL)))
		return -1;
	if (o->keys == NULL) {
		const char *slash = strrchr(o->conf, '/');

		snprintf(o->kdir, sizeof(o->kdir), "%.*skeys",
		         slash ? (int)(slash - o->conf + 1) : 0, o->conf);
		o->keys = o->kdir;
	}
	return 0;
}

/* set - a string setting that is present and not empty. */
static int
set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/*
 * load_merchant_keys - the channel holds what identifies paycb: the public half of the
 * WeChat Pay merchant API key and of the Alipay app key (read from the private key files the
 * configuration names), and the Stripe secret key paycb presents.
 */
static int
load_merchant_keys(int i, char *err, size_t errlen)
{
	const struct conf_merchant *cm = conf_merchant(&sim_api.cf, sim_api.m[i].id);
	const struct conf_wxpay *w = chan_conf_wx(cm);
	const struct conf_alipay *a = chan_conf_ali(cm);
	const struct conf_stripe *st = chan_conf_stripe(cm);
	size_t len = 0;

	if (w && set(w->merchant_key_file) &&
	    crypto_load_privkey_file(w->merchant_key_file, &sim_api.api_key[i], err, errlen) != 0)
		return -1;
	if (a && set(a->app_private_key_file) &&
	    crypto_load_privkey_file(a->app_private_key_file, &sim_api.ali_app[i], err, errlen) !=
	        0)
		return -1;
	if (st && set(st->api_key_file) &&
	    cfg_read_secret(st->api_key_file, &sim_api.stripe_key[i], &len, err, errlen) != 0)
		return -1;
	return 0;
}

static int
load_keys(const struct api_opts *o, char *err, size_t errlen)
{
	size_t n;

	if (sim_merchants_load(&sim_api.cf, o->keys, &sim_api.m, &sim_api.nm, err, errlen) != 0)
		return -1;
	n = (size_t)sim_api.nm + 1;
	if ((sim_api.api_key = calloc(n, sizeof(*sim_api.api_key))) == NULL ||
	    (sim_api.ali_app = calloc(n, sizeof(*sim_api.ali_app))) == NULL ||
	    (sim_api.stripe_key = calloc(n, sizeof(*sim_api.stripe_key))) == NULL ||
	    (sim_api.stranger = EVP_RSA_gen(2048)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < sim_api.nm; i++)
		if (load_merchant_keys(i, err, errlen) != 0)
			return -1;
	return 0;
}

static void
free_keys(void)
{
	for (int i = 0; i < sim_api.nm; i++) {
		if (sim_api.api_key != NULL)
			EVP_PKEY_free(sim_api.api_key[i]);
		if (sim_api.ali_app != NULL)
			EVP_PKEY_free(sim_api.ali_app[i]);
		if (sim_api.stripe_key != NULL && sim_api.stripe_key[i] != NULL) {
			OPENSSL_cleanse(sim_api.stripe_key[i], strlen(sim_api.stripe_key[i]));
			free(sim_api.stripe_key[i]);
		}
	}
	free(sim_api.api_key);
	free(sim_api.ali_app);
	free(sim_api.stripe_key);
	EVP_PKEY_free(sim_api.stranger);
}

/* start - one listener; with cert and key (PEM text), HTTPS. */
static struct MHD_Daemon *
start(int port, const char *cert, const char *key)
{
	unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD;

	if (cert == NULL)
		return MHD_start_daemon(
		    flags, (uint16_t)port, NULL, NULL, handler, NULL, MHD_OPTION_URI_LOG_CALLBACK,
		    uri_cb, NULL, MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
		    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_END);
	return MHD_start_daemon(
	    flags | MHD_USE_TLS, (uint16_t)port, NULL, NULL, handler, NULL,
	    MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL, MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_HTTPS_MEM_CERT, cert,
	    MHD_OPTION_HTTPS_MEM_KEY, key, MHD_OPTION_END);
}

/* serve - listens (plain, and HTTPS when asked) until a signal. */
static int
serve(const struct api_opts *o)
{
	struct MHD_Daemon *d = NULL, *t = NULL;
	char *cert = NULL, *key = NULL, err[512];
	sigset_t stop, old;
	size_t len;
	int rc = EXIT_UNAVAILABLE;

	/* Blocked before the listeners start, so their threads inherit the mask and a stop
	 * signal reaches only the sigsuspend below, which sleeps until it comes. */
	sigemptyset(&stop);
	sigaddset(&stop, SIGTERM);
	sigaddset(&stop, SIGINT);
	pthread_sigmask(SIG_BLOCK, &stop, &old);
	if (o->tls_port > 0 &&
	    (!MHD_is_feature_supported(MHD_FEATURE_TLS) ||
	     cfg_read_file(o->tls_cert, 65536, 0, &cert, &len, err, sizeof(err)) != 0 ||
	     cfg_read_file(o->tls_key, 65536, 1, &key, &len, err, sizeof(err)) != 0)) {
		fprintf(stderr, "paycb-sim api: no HTTPS: %s\n",
		        MHD_is_feature_supported(MHD_FEATURE_TLS) ? err
		                                                  : "libmicrohttpd without TLS");
		rc = EXIT_CONFIG;
		goto done;
	}
	if ((d = start(o->port, NULL, NULL)) == NULL ||
	    (o->tls_port > 0 && (t = start(o->tls_port, cert, key)) == NULL)) {
		fprintf(stderr, "paycb-sim api: cannot listen on port %d\n",
		        d == NULL ? o->port : o->tls_port);
		goto done;
	}
	printf("event=api_ready port=%d tls_port=%d merchants=%d\n", o->port, o->tls_port,
	       sim_api.nm);
	fflush(stdout);
	while (!api_stop)
		sigsuspend(&old);
	printf("event=api_stop requests=%lld bad_sig=%lld refunds_applied=%lld refund_posts=%lld\n",
	       sim_api.requests, sim_api.bad_sig, sim_api.refunds_applied, sim_api.refund_posts);
	rc = 0;
done:
	if (t != NULL)
		MHD_stop_daemon(t);
	if (d != NULL)
		MHD_stop_daemon(d);
	if (key != NULL)
		OPENSSL_cleanse(key, strlen(key));
	free(key);
	free(cert);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc;
}

int
sim_api_main(int argc, char **argv)
{
	struct api_opts o = {0};
	char err[512] = "";
	int rc = EXIT_CONFIG;

	if (parse_args(argc, argv, &o) != 0) {
		fprintf(stderr, "paycb-sim api: need -c CONF --port P [--keys DIR] "
		                "[--tls-port P --tls-cert PEM --tls-key PEM]\n");
		return EXIT_USAGE;
	}
	if (conf_bootstrap(o.conf, PROG_SIM, &sim_api.cf, "paycb-sim api") != 0)
		return EXIT_CONFIG;
	if (load_keys(&o, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim api: %s\n", err);
		goto done;
	}
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	signal(SIGPIPE, SIG_IGN);
	rc = serve(&o);
done:
	free_keys();
	sim_api_ledger_free();
	if (sim_api.m != NULL)
		sim_merchants_free(sim_api.m, sim_api.nm);
	conf_free(&sim_api.cf);
	return rc;
}
