/*
 * sim_junk - `paycb-sim junk`: a flood of requests that are not notifications, at the highest
 * rate C clients on keep-alive connections can send, for make bench (tools/bench.sh) to
 * measure genuine traffic's latency beside it. The junk is what the review's cost measurement
 * used and what the cheap checks refuse: 64 KiB Alipay bodies of 250 parameters with a
 * well-formed 256-byte sign, WeChat requests with an unknown serial, with a stale timestamp
 * or with no signature headers, and Stripe requests without Stripe-Signature. With --shaped
 * half of it is shaped like real notifications instead, which passes the cheap checks and
 * costs a verification: WeChat Pay requests with the default merchant's real key id, a fresh
 * timestamp and a signature of the right length; Alipay forms of 30 parameters with its app
 * id and a 256-byte sign; Stripe events with a fresh, well-formed Stripe-Signature. None of
 * them verifies.
 *
 * Report (key=value): sent, refused (answered 4xx), busy (503), other, rate (per second).
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan_conf.h"
#include "clock.h"
#include "daemon.h"
#include "sim.h"

struct junk_run {
	const char *addr;
	int port;
	long long end_us;
	atomic_llong sent, refused, busy, other;
	char *ali; /* the Alipay body, shared read-only */
	int shaped;
	char wx_serial[96]; /* the default merchant's key id ("" when it has none) */
	char ali_shaped[4096];
};

/* junk_b64 - a base64 string of n bytes' worth of 'A's (a signature's shape, never valid) */
static void
junk_b64(char *out, size_t cap, size_t bytes)
{
	size_t chars = (bytes + 2) / 3 * 4, pads = (3 - bytes % 3) % 3;

	if (chars + 1 > cap)
		chars = pads = 0;
	for (size_t i = 0; i < chars; i++)
		out[i] = i >= chars - pads ? '=' : 'A';
	out[chars] = '\0';
}

/* junk_shaped - one request shaped like a real notification of channel k % 3 */
static void
junk_shaped(struct junk_run *j, struct sim_conn *c, unsigned k, long long now, struct sim_answer *a)
{
	static const char wx_body[] = "{\"id\":\"junk\",\"event_type\":\"TRANSACTION.SUCCESS\"}";
	char hdr[1024], sig[400];

	switch (k % 3) {
	case 0:
		junk_b64(sig, sizeof(sig), 256);
		snprintf(hdr, sizeof(hdr),
		         "Content-Type: application/json\r\nWechatpay-Timestamp: %lld\r\n"
		         "Wechatpay-Nonce: n%u\r\nWechatpay-Serial: %s\r\n"
		         "Wechatpay-Signature: %s\r\n",
		         now, k, j->wx_serial, sig);
		sim_http_post(c, "/pay/callback/wxpay", hdr, wx_body, sizeof(wx_body) - 1, 5000, a);
		break;
	case 1:
		sim_http_post(c, "/pay/callback/alipay",
		              "Content-Type: application/x-www-form-urlencoded\r\n", j->ali_shaped,
		              strlen(j->ali_shaped), 5000, a);
		break;
	default:
		snprintf(hdr, sizeof(hdr),
		         "Content-Type: application/json\r\nStripe-Signature: t=%lld,v1=%064u\r\n",
		         now, k);
		sim_http_post(c, "/pay/callback/stripe", hdr, "{\"id\":\"evt_junk\"}", 17, 5000, a);
		break;
	}
}

static void *
junk_client(void *arg)
{
	struct junk_run *j = arg;
	struct sim_conn c;
	struct sim_answer a;
	char wx[512];
	unsigned k = (unsigned)(size_t)&c;

	sim_conn_init(&c, j->addr, j->port);
	while (clock_mono_us() < j->end_us) {
		long long now = (long long)time(NULL);

		if (j->shaped && k % 2 == 0) {
			junk_shaped(j, &c, k++ / 2, now, &a);
			goto count;
		}
		switch (k++ % 4) {
		case 0:
			sim_http_post(&c, "/pay/callback/alipay",
			              "Content-Type: application/x-www-form-urlencoded\r\n", j->ali,
			              strlen(j->ali), 5000, &a);
			break;
		case 1:
			snprintf(wx, sizeof(wx),
			         "Content-Type: application/json\r\nWechatpay-Timestamp: %lld\r\n"
			         "Wechatpay-Nonce: junk\r\nWechatpay-Serial: "
			         "7F0000000000000000000001\r\n"
			         "Wechatpay-Signature: QUFBQQ==\r\n",
			         now - (k % 8 == 1 ? 3600 : 0));
			sim_http_post(&c, "/pay/callback/wxpay", wx, "{\"id\":\"junk\"}", 13, 5000,
			              &a);
			break;
		case 2:
			sim_http_post(&c, "/pay/callback/wxpay",
			              "Content-Type: application/json\r\n", "{\"id\":\"junk\"}", 13,
			              5000, &a);
			break;
		default:
			sim_http_post(&c, "/pay/callback/stripe",
			              "Content-Type: application/json\r\n", "{\"id\":\"evt_junk\"}",
			              17, 5000, &a);
			break;
		}
	count:
		atomic_fetch_add(&j->sent, 1);
		if (a.status >= 400 && a.status < 500)
			atomic_fetch_add(&j->refused, 1);
		else if (a.status == 503)
			atomic_fetch_add(&j->busy, 1);
		else
			atomic_fetch_add(&j->other, 1);
	}
	sim_conn_close(&c);
	return NULL;
}

/* junk_shaped_init - the default merchant's public facts the shaped junk carries */
static int
junk_shaped_init(struct junk_run *j, const struct conf *cf)
{
	const struct conf_merchant *m = conf_merchant(cf, "default");
	const struct conf_wxpay *w = m ? chan_conf_wx(m) : NULL;
	const struct conf_alipay *a = m ? chan_conf_ali(m) : NULL;
	char sign[400];
	size_t len;

	if (w == NULL || a == NULL)
		return -1;
	for (int i = 0; i < w->nkeys; i++)
		if (w->keys[i].serial != NULL && w->keys[i].serial[0] != '\0')
			snprintf(j->wx_serial, sizeof(j->wx_serial), "%s", w->keys[i].serial);
	if (j->wx_serial[0] == '\0')
		return -1;
	junk_b64(sign, sizeof(sign), 256);
	len =
	    (size_t)snprintf(j->ali_shaped, sizeof(j->ali_shaped),
	                     "app_id=%s&notify_type=trade_status_sync&notify_id=junk&charset=utf-8"
	                     "&version=1.0&trade_status=TRADE_SUCCESS&total_amount=1.00"
	                     "&out_trade_no=junk&trade_no=junk&sign_type=RSA2&sign=%s",
	                     a->app_id, sign);
	for (int i = 0; i < 19 && len + 40 < sizeof(j->ali_shaped); i++)
		len += (size_t)snprintf(j->ali_shaped + len, sizeof(j->ali_shaped) - len,
		                        "&extra_%02d=%d", i, i);
	return 0;
}

/* junk_opts - parses junk's options into the run; returns 0, -1 for --help, or EXIT_USAGE. */
static int
junk_opts(int argc, char **argv, struct junk_run *j, const char **conf, const char **report,
          int *conc, int *secs)
{
	static const struct option lo[] = {{"concurrency", 1, NULL, 'C'}, {"seconds", 1, NULL, 's'},
	                                   {"report", 1, NULL, 'r'},      {"shaped", 0, NULL, 'S'},
	                                   {"help", 0, NULL, 'h'},        {NULL, 0, NULL, 0}};
	int opt;

	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1) {
		if (opt == 'c')
			*conf = optarg;
		else if (opt == 'C')
			*conc = atoi(optarg);
		else if (opt == 's')
			*secs = atoi(optarg);
		else if (opt == 'r')
			*report = optarg;
		else if (opt == 'S')
			j->shaped = 1;
		else {
			fprintf(stderr,
			        "usage: paycb-sim junk -c CONF [--concurrency C] [--seconds S] "
			        "[--shaped] [--report FILE]\n");
			return opt == 'h' ? -1 : EXIT_USAGE;
		}
	}
	if (*conf == NULL || *conc < 1 || *conc > 512 || *secs < 1 || *secs > 600) {
		fprintf(stderr,
		        "paycb-sim junk: need -c CONF, 1 <= concurrency <= 512, 1 <= seconds "
		        "<= 600\n");
		return EXIT_USAGE;
	}
	return 0;
}

/* junk_alipay_body - an Alipay-looking form body of about 64 KiB with a sign of the right
 * length; returns 0 or -1 (out of memory). */
static int
junk_alipay_body(struct junk_run *j)
{
	size_t len = 0, cap = 70000;

	if ((j->ali = malloc(cap)) == NULL)
		return -1;
	len += (size_t)snprintf(j->ali, cap, "app_id=2021000000000001&sign_type=RSA2&sign=");
	for (int i = 0; i < 344; i++)
		j->ali[len++] = i < 342 ? 'A' : '=';
	for (int i = 0; len + 300 < 65000 && i < 247; i++)
		len += (size_t)snprintf(j->ali + len, cap - len, "&p%03d=%0200d", i, i);
	j->ali[len] = '\0';
	return 0;
}

/* junk_report - the run's counts as key=value lines, to report or stdout. */
static void
junk_report(struct junk_run *j, const char *report, long long us, int started)
{
	FILE *fp = report ? fopen(report, "w") : stdout;

	if (fp == NULL)
		return;
	fprintf(fp, "sent=%lld\nrefused=%lld\nbusy=%lld\nother=%lld\nrate=%lld\nclients=%d\n",
	        atomic_load(&j->sent), atomic_load(&j->refused), atomic_load(&j->busy),
	        atomic_load(&j->other), atomic_load(&j->sent) * 1000000LL / (us > 0 ? us : 1),
	        started);
	if (fp != stdout)
		fclose(fp);
}

int
sim_junk_main(int argc, char **argv)
{
	const char *conf = getenv("PAYCB_CONF"), *report = NULL;
	struct junk_run j;
	struct conf cf;
	pthread_t *t = NULL;
	int conc = 16, secs = 8, started = 0, rc;
	long long t0;

	memset(&cf, 0, sizeof(cf));
	memset(&j, 0, sizeof(j));
	if ((rc = junk_opts(argc, argv, &j, &conf, &report, &conc, &secs)) != 0) {
		rc = rc < 0 ? 0 : rc;
		goto done;
	}
	if ((rc = conf_bootstrap(conf, PROG_SIM, &cf, "paycb-sim")) != 0) {
		goto done;
	}
	rc = EXIT_SOFTWARE;
	if (junk_alipay_body(&j) != 0 || (t = calloc((size_t)conc, sizeof(*t))) == NULL)
		goto done;
	if (j.shaped && junk_shaped_init(&j, &cf) != 0) {
		fprintf(stderr,
		        "paycb-sim junk: --shaped needs a default merchant with a WeChat Pay "
		        "key id and an Alipay app id\n");
		rc = EXIT_CONFIG;
		goto done;
	}
	j.addr = cf.ingest.listen_addr;
	j.port = (int)cf.ingest.listen_port;
	t0 = clock_mono_us();
	j.end_us = t0 + secs * 1000000LL;
	for (; started < conc; started++)
		if (pthread_create(&t[started], NULL, junk_client, &j) != 0)
			break;
	for (int i = 0; i < started; i++)
		pthread_join(t[i], NULL);
	junk_report(&j, report, clock_mono_us() - t0, started);
	rc = started == conc ? 0 : EXIT_SOFTWARE;
done:
	free(t);
	free(j.ali);
	conf_free(&cf);
	return rc;
}
