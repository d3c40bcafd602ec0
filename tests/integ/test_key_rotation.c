/*
 * test_key_rotation - every channel's keys rotated with SIGHUP under load, against a live
 * paycb-ingest (issue 19, item 12).
 *
 * Senders sign genuine payments of all three channels without pause, from three threads,
 * through the whole test. For each channel's material (WeChat Pay platform certificate and
 * APIv3 key, Alipay public key, Stripe endpoint secret), as the runbook in docs/operations.md
 * says:
 *
 *   1. the new key is added beside the old one and ingest is sent SIGHUP (the APIv3 key as
 *      apiv3_key_file with the old one as apiv3_previous_key_file);
 *   2. the senders switch to the new key;
 *   3. the old key is removed and ingest is sent SIGHUP again.
 *
 * Every notification sent during all of it must be answered with its channel's success and
 * stored; after step 3 a notification signed (or, for WeChat Pay, encrypted) with an old key
 * is refused. Then broken reloads - a garbage PEM, a Stripe secret readable by others, an
 * unknown setting - are each refused with one log line naming the file (and the line) and
 * why, the running set kept and serving. Each reload is waited for on the metric
 * paycb_config_reload_total, never with a fixed sleep.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "harness.h"
#include "testkeys.h"

#define NSEND 3

/* One generation of every channel's material: 0 is the old one, 1 the new. */
struct gen {
	EVP_PKEY *wx, *ali;
	char serial[48];
	struct chan_keys apiv3; /* only .apiv3: what chan_wx_note encrypts with */
	char stripe[48];
	char wx_file[300], apiv3_file[300], ali_file[300], stripe_file[300];
};

/* Which generations a configuration lists: bit g of a mask = generation g. */
struct plan {
	unsigned wx, ali, stripe;
	int apiv3, apiv3_prev; /* a generation; -1 = none */
	const char *extra_ali, *extra_stripe, *extra_ingest, *extra_top;
	const char *stripe_api; /* the reconciler's Stripe API key file; NULL = none */
};

static struct conf cf;
static struct db db;
static struct chan_keys K; /* its temp dir holds the files */
static struct gen G[2];
static int port, admin_port;
/* The admin ports of the processor, the retrier and the reconciler. */
static int dport[3];
static pid_t ingest_pid;
static char conf_path[300], log_path[300];

/* What the senders sign with now, per channel: a generation. */
static atomic_int use_wx, use_apiv3, use_ali, use_stripe;
static atomic_int stop, ok, bad, iters[NSEND];
static atomic_int paused;        /* the senders wait while set */
static atomic_int parked[NSEND]; /* set by a sender waiting, so with no request open */
static pthread_t senders[NSEND];

static int
write_file(const char *path, const char *text, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	size_t n = strlen(text);
	int rc;

	if (fd < 0)
		return -1;
	rc = write(fd, text, n) == (ssize_t)n && fchmod(fd, mode) == 0 ? 0 : -1;
	return close(fd) == 0 ? rc : -1;
}

static int
gen_new(struct gen *g, int i)
{
	X509 *x;
	char *pem;
	int rc;

	memset(g, 0, sizeof(*g));
	g->wx = tk_rsa_new();
	g->ali = tk_rsa_new();
	snprintf(g->serial, sizeof(g->serial), "5A1B2C3D4E5F60718293A4B5C6D7E8F90123456%d", i);
	for (int k = 0; k < 32; k++)
		g->apiv3.apiv3[k] = (uint8_t)("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef"[(k * 5 + i) % 32]);
	snprintf(g->stripe, sizeof(g->stripe), "whsec_rotation_generation_%d", i);
	snprintf(g->wx_file, sizeof(g->wx_file), "%s/wx_%d.pem", K.dir, i);
	snprintf(g->apiv3_file, sizeof(g->apiv3_file), "%s/apiv3_%d", K.dir, i);
	snprintf(g->ali_file, sizeof(g->ali_file), "%s/ali_%d.pem", K.dir, i);
	snprintf(g->stripe_file, sizeof(g->stripe_file), "%s/whsec_%d", K.dir, i);
	if (g->wx == NULL || g->ali == NULL || (x = tk_self_signed(g->wx, g->serial)) == NULL)
		return -1;
	pem = tk_cert_pem(x);
	rc = pem != NULL && write_file(g->wx_file, pem, 0600) == 0 ? 0 : -1;
	free(pem);
	X509_free(x);
	pem = tk_pubkey_pem(g->ali);
	if (pem == NULL || write_file(g->ali_file, pem, 0600) != 0)
		rc = -1;
	free(pem);
	if (write_file(g->apiv3_file, (const char *)g->apiv3.apiv3, 0600) != 0 ||
	    write_file(g->stripe_file, g->stripe, 0600) != 0)
		rc = -1;
	return rc;
}

/* list - the files of kind (0 WeChat Pay keys, 1 Alipay keys, 2 Stripe secrets) of the
 * generations in mask, and extra, as the items of a libconfig list. */
static void
list(char *buf, size_t len, unsigned mask, int kind, const char *extra)
{
	size_t n = 0;

	buf[0] = '\0';
	for (int g = 0; g < 2; g++) {
		const char *f = kind == 0   ? G[g].wx_file
		                : kind == 1 ? G[g].ali_file
		                            : G[g].stripe_file;

		if (!(mask & (1u << g)))
			continue;
		if (kind == 0)
			n += (size_t)snprintf(buf + n, len - n, "%s{ file = \"%s\"; }",
			                      n ? ", " : "", f);
		else
			n += (size_t)snprintf(buf + n, len - n, "%s\"%s\"", n ? ", " : "", f);
	}
	if (extra)
		snprintf(buf + n, len - n, "%s\"%s\"", n ? ", " : "", extra);
}

/* write_conf - the configuration of plan p, written whole and renamed over the old one. */
static int
write_conf(const struct plan *p)
{
	char tmp[320], wx[1024], ali[1024], st[1024], prev[400] = "", api[400] = "";
	FILE *fp;

	list(wx, sizeof(wx), p->wx, 0, NULL);
	list(ali, sizeof(ali), p->ali, 1, p->extra_ali);
	list(st, sizeof(st), p->stripe, 2, p->extra_stripe);
	if (p->apiv3_prev >= 0)
		snprintf(prev, sizeof(prev), "apiv3_previous_key_file = \"%s\"; ",
		         G[p->apiv3_prev].apiv3_file);
	if (p->stripe_api != NULL)
		snprintf(api, sizeof(api), "api_key_file = \"%s\"; ", p->stripe_api);
	snprintf(tmp, sizeof(tmp), "%s.new", conf_path);
	if ((fp = fopen(tmp, "w")) == NULL)
		return -1;
	fprintf(
	    fp,
	    "log_level = \"info\";\n%s"
	    "database = { host = \"%s\"; port = %lld; user = \"%s\"; password_file = \"%s\";"
	    " name = \"%s\"; };\n"
	    "kafka = { brokers = \"%s\"; topic_prefix = \"%s\"; delivery_timeout_ms = 5000; };\n"
	    "ingest = { listen_port = %d; admin_port = %d; publish_budget_ms = 1500; %s };\n"
	    "processor = { admin_port = %d; };\nretrier = { admin_port = %d; };\n"
	    "reconciler = { admin_port = %d; };\n"
	    "merchants = ( { id = \"default\";\n"
	    "  wxpay = { mchid = \"1900000001\"; apiv3_key_file = \"%s\"; %skeys = ( %s ); };\n"
	    "  alipay = { app_id = \"2021000000000001\"; public_key_files = [ %s ]; };\n"
	    "  stripe = { %ssecret_files = [ %s ]; }; } );\n",
	    p->extra_top ? p->extra_top : "", cf.db.host, cf.db.port, cf.db.user,
	    cf.db.password_file, cf.db.name, cf.kafka.brokers, cf.kafka.topic_prefix, port,
	    admin_port, p->extra_ingest ? p->extra_ingest : "", dport[0], dport[1], dport[2],
	    G[p->apiv3].apiv3_file, prev, wx, ali, api, st);
	if (fclose(fp) != 0)
		return -1;
	return rename(tmp, conf_path);
}

/* metric_at - the value of the metric line starting with name (labels included) on the
 * admin listener at aport, -1 if none. */
static long long
metric_at(int aport, const char *name)
{
	struct httpc_resp *r = malloc(sizeof(*r));
	char needle[160];
	const char *at;
	long long v = -1;

	snprintf(needle, sizeof(needle), "\n%s ", name);
	if (r != NULL && httpc_request(aport, "GET", "/metrics", NULL, "", 0, 5000, r) == 0 &&
	    (at = strstr(r->body, needle)) != NULL)
		v = strtoll(at + strlen(needle), NULL, 10);
	free(r);
	return v;
}

static long long
metric(const char *name)
{
	return metric_at(admin_port, name);
}

struct want {
	int port;
	const char *name;
	long long n;
};

static int
metric_reached(void *arg)
{
	const struct want *w = arg;

	return metric_at(w->port, w->name) >= w->n;
}

#define RELOAD_OK     "paycb_config_reload_total{result=\"ok\"}"
#define RELOAD_FAILED "paycb_config_reload_total{result=\"failed\"}"

/* reload - writes plan p, sends SIGHUP and waits for the reload counted as result. */
static void
reload(const struct plan *p, const char *result)
{
	struct want w = {admin_port, result, metric(result) + 1};
	long long t0;

	assert_true(w.n >= 1);
	assert_int_equal(write_conf(p), 0);
	t0 = harness_now_ms();
	assert_int_equal(kill(ingest_pid, SIGHUP), 0);
	assert_int_equal(harness_wait_until(metric_reached, &w, 15000), 0);
	printf("# reload %lld (%s): counted %lld ms after SIGHUP\n", w.n,
	       strstr(result, "failed") ? "failed" : "ok", harness_now_ms() - t0);
}

/* sign - a payment of channel ch signed with the generations given; its path and success. */
static int
sign(int ch, struct chan_note *n, const char *order, int wxg, int apiv3g, int alig, int stg,
     const char **path, int *want)
{
	char trade[64];

	snprintf(trade, sizeof(trade), "T%s", order);
	memset(n, 0, sizeof(*n));
	if (ch == 0) {
		*path = "/pay/callback/wxpay";
		*want = 204;
		return chan_wx_pay(&G[apiv3g].apiv3, n, order, trade, 100, G[wxg].wx, G[wxg].serial,
		                   time(NULL));
	}
	if (ch == 1) {
		*path = "/pay/callback/alipay";
		*want = 200;
		return chan_ali_pay(n, order, trade, "1.00", G[alig].ali);
	}
	*path = "/pay/callback/stripe";
	*want = 200;
	snprintf(trade, sizeof(trade), "pi_%s", order);
	return chan_stripe_pay(n, G[stg].stripe, order, trade, 100, time(NULL));
}

static void *
sender(void *arg)
{
	int t = (int)(intptr_t)arg, i = 0;
	struct httpc_resp *r = malloc(sizeof(*r));
	struct timespec pause = {0, 2 * 1000 * 1000};

	while (r != NULL && !atomic_load(&stop)) {
		char order[64];

		if (atomic_load(&paused)) {
			atomic_store(&parked[t], 1);
			nanosleep(&pause, NULL);
			continue;
		}
		atomic_store(&parked[t], 0);
		struct chan_note n;
		const char *path;
		int want, ch = i % 3;

		snprintf(order, sizeof(order), "R%d-%d-%d", getpid(), t, i++);
		r->status = 0;
		if (sign(ch, &n, order, atomic_load(&use_wx), atomic_load(&use_apiv3),
		         atomic_load(&use_ali), atomic_load(&use_stripe), &path, &want) == 0 &&
		    chan_post(port, path, &n, r) == 0 && r->status == want) {
			atomic_fetch_add(&ok, 1);
		} else {
			atomic_fetch_add(&bad, 1);
			printf("# refused during rotation: %s %s got %d\n", path, order, r->status);
		}
		free(n.body);
		atomic_fetch_add(&iters[t], 1);
		nanosleep(&pause, NULL);
	}
	free(r);
	return NULL;
}

static int
all_iterated(void *arg)
{
	const int *from = arg;

	for (int t = 0; t < NSEND; t++)
		if (atomic_load(&iters[t]) < from[t] + 4)
			return 0;
	return 1;
}

/* settle - waits until every sender has sent each channel at least once with what it uses
 * now (a request signed before a switch may still be on its way until then). */
static void
settle(void)
{
	int from[NSEND];

	for (int t = 0; t < NSEND; t++)
		from[t] = atomic_load(&iters[t]);
	assert_int_equal(harness_wait_until(all_iterated, from, 30000), 0);
}

static int
all_parked(void *arg)
{
	(void)arg;
	for (int t = 0; t < NSEND; t++)
		if (!atomic_load(&parked[t]))
			return 0;
	return 1;
}

/* settle_paused - waits until no sender has a request open (after paused was set). */
static void
settle_paused(void)
{
	assert_int_equal(harness_wait_until(all_parked, NULL, 30000), 0);
}

/* post_one - one payment signed with the given generations: the HTTP status. */
static int
post_one(int ch, const char *order, int wxg, int apiv3g, int alig, int stg)
{
	struct httpc_resp *r = malloc(sizeof(*r));
	struct chan_note n;
	const char *path;
	int want, status = -1;

	assert_non_null(r);
	assert_int_equal(sign(ch, &n, order, wxg, apiv3g, alig, stg, &path, &want), 0);
	if (chan_post(port, path, &n, r) == 0)
		status = r->status;
	free(n.body);
	free(r);
	return status;
}

static const struct plan OLD = {.wx = 1, .ali = 1, .stripe = 1, .apiv3 = 0, .apiv3_prev = -1};
static const struct plan BOTH = {.wx = 3, .ali = 3, .stripe = 3, .apiv3 = 1, .apiv3_prev = 0};
static const struct plan NEW = {.wx = 2, .ali = 2, .stripe = 2, .apiv3 = 1, .apiv3_prev = -1};

static void
rotate_every_channel_under_load(void **state)
{
	(void)state;
	settle();
	/* 1: the new keys beside the old; the senders still use the old ones. */
	reload(&BOTH, RELOAD_OK);
	settle();
	/* 2: the senders switch, as the channels do once the merchant switched there. */
	atomic_store(&use_wx, 1);
	atomic_store(&use_apiv3, 1);
	atomic_store(&use_ali, 1);
	atomic_store(&use_stripe, 1);
	settle();
	/* 3: the old keys removed. */
	reload(&NEW, RELOAD_OK);
	settle();
	assert_int_equal(harness_file_count(log_path, "event=config_reload result=ok"), 2);
	assert_true(harness_file_count(log_path, "apiv3_keys=2") >= 1);
	assert_int_equal(atomic_load(&bad), 0);
}

static void
old_keys_are_refused_after_the_removal(void **state)
{
	char order[64];

	(void)state;
	snprintf(order, sizeof(order), "X%d-wxcert", getpid());
	assert_int_equal(post_one(0, order, 0, 1, 1, 1), 401); /* old platform certificate */
	snprintf(order, sizeof(order), "X%d-apiv3", getpid());
	assert_int_equal(post_one(0, order, 1, 0, 1, 1), 400); /* old APIv3 key: no decryption */
	snprintf(order, sizeof(order), "X%d-ali", getpid());
	assert_int_equal(post_one(1, order, 1, 1, 0, 1), 400);
	snprintf(order, sizeof(order), "X%d-stripe", getpid());
	assert_int_equal(post_one(2, order, 1, 1, 1, 0), 400);
	assert_int_equal(chan_rows(&db, "pay_callback_log WHERE out_trade_no LIKE 'X%'"), 0);
	/* The same payments signed with the new keys are stored. */
	snprintf(order, sizeof(order), "Y%d-wx", getpid());
	assert_int_equal(post_one(0, order, 1, 1, 1, 1), 204);
	snprintf(order, sizeof(order), "Y%d-ali", getpid());
	assert_int_equal(post_one(1, order, 1, 1, 1, 1), 200);
}

static void
broken_reloads_keep_the_running_set(void **state)
{
	char garbage[300], shared[300], needle[400];
	struct plan p = NEW;

	(void)state;
	snprintf(garbage, sizeof(garbage), "%s/ali_garbage.pem", K.dir);
	snprintf(shared, sizeof(shared), "%s/whsec_shared", K.dir);
	assert_int_equal(write_file(garbage,
	                            "-----BEGIN PUBLIC KEY-----\nnot a key\n"
	                            "-----END PUBLIC KEY-----\n",
	                            0600),
	                 0);
	assert_int_equal(write_file(shared, "whsec_readable_by_others", 0644), 0);

	p.extra_ali = garbage;
	reload(&p, RELOAD_FAILED);
	snprintf(needle, sizeof(needle), "result=failed reload=3 config=%s action=kept_old",
	         conf_path);
	assert_int_equal(harness_file_count(log_path, needle), 1);
	assert_int_equal(harness_file_count(log_path, "ali_garbage.pem"), 1);
	assert_int_equal(metric("paycb_config_last_reload_successful"), 0);

	p = NEW;
	p.extra_stripe = shared;
	reload(&p, RELOAD_FAILED);
	assert_int_equal(harness_file_count(log_path, "whsec_shared' is readable or writable"), 1);

	p = NEW;
	p.extra_top = "no_such_setting = 1;\n";
	reload(&p, RELOAD_FAILED);
	snprintf(needle, sizeof(needle), "%s:2: setting 'no_such_setting': unknown setting",
	         conf_path);
	assert_int_equal(harness_file_count(log_path, needle), 1);

	/* The running set still serves: the senders' new keys pass, an old key is refused. */
	settle();
	assert_int_equal(atomic_load(&bad), 0);
	assert_int_equal(post_one(2, "Xbroken", 1, 1, 1, 0), 400);

	/* A setting a reload cannot change is named, and keeps its running value. */
	p = NEW;
	p.extra_ingest = "max_inflight = 300;";
	reload(&p, RELOAD_OK);
	assert_int_equal(harness_file_count(log_path, "needs_restart=ingest.max_inflight"), 1);
	assert_int_equal(metric("paycb_config_last_reload_successful"), 1);
}

/* slow_begin - a POST of n to path whose headers and first half of the body are sent now: the
 * open socket. */
static int
slow_begin(const char *path, const struct chan_note *n)
{
	struct sockaddr_in sa;
	char head[2600];
	int fd = socket(AF_INET, SOCK_STREAM, 0), len;

	assert_true(fd >= 0);
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	len = snprintf(head, sizeof(head),
	               "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%sContent-Length: %zu\r\n"
	               "Connection: close\r\n\r\n",
	               path, n->headers, n->len);
	assert_int_equal(send(fd, head, (size_t)len, MSG_NOSIGNAL), len);
	assert_int_equal(send(fd, n->body, n->len / 2, MSG_NOSIGNAL), (ssize_t)(n->len / 2));
	return fd;
}

/* slow_end - the rest of the body, then the answer's status (0 when none came). */
static int
slow_end(int fd, const struct chan_note *n)
{
	size_t rest = n->len - n->len / 2, got = 0;
	char buf[4096];
	ssize_t r;
	int status = 0;

	assert_int_equal(send(fd, n->body + n->len / 2, rest, MSG_NOSIGNAL), (ssize_t)rest);
	while (got + 1 < sizeof(buf) && (r = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)r;
	buf[got] = '\0';
	close(fd);
	if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
		status = 0;
	return status;
}

static int
one_reading(void *arg)
{
	(void)arg;
	return metric("paycb_ingest_reading") == 1;
}

/*
 * A request whose headers came before a reload finishes with the keys it started with: a
 * Stripe event signed with the old secret, its body half sent while the old secret is
 * removed, is stored; the same secret on a request that starts after the reload is refused.
 */
static void
request_in_flight_keeps_the_keys_it_started_with(void **state)
{
	struct chan_note n;
	char order[64];
	int fd;

	(void)state;
	reload(&BOTH, RELOAD_OK);
	snprintf(order, sizeof(order), "Z%d-inflight", getpid());
	assert_int_equal(chan_stripe_pay(&n, G[0].stripe, order, "pi_inflight", 100, time(NULL)),
	                 0);
	/* The senders pause, so that the one request being read is this one. */
	atomic_store(&paused, 1);
	settle_paused();
	fd = slow_begin("/pay/callback/stripe", &n);
	assert_int_equal(harness_wait_until(one_reading, NULL, 10000), 0);
	reload(&NEW, RELOAD_OK);
	assert_int_equal(slow_end(fd, &n), 200);
	free(n.body);
	atomic_store(&paused, 0);
	assert_int_equal(chan_row_id(&db, "pay_callback_log", "out_trade_no", order) > 0, 1);
	assert_int_equal(post_one(2, "Zafter", 1, 1, 1, 0), 400);
}

/*
 * Reloads back to back under load, the set swapped while requests hold the one before (under
 * the sanitizer build a request freed too early or a set never freed is an error).
 */
static void
back_to_back_reloads_refuse_nothing(void **state)
{
	long long t0 = harness_now_ms();

	(void)state;
	for (int i = 0; i < 20; i++)
		reload(i % 2 ? &NEW : &BOTH, RELOAD_OK);
	settle();
	printf("# 20 reloads under load in %lld ms\n", harness_now_ms() - t0);
	assert_int_equal(atomic_load(&bad), 0);
}

static void
every_notification_was_answered_and_stored(void **state)
{
	char clause[128];

	(void)state;
	atomic_store(&stop, 1);
	for (int t = 0; t < NSEND; t++)
		pthread_join(senders[t], NULL);
	printf("# rotation: %d notifications stored, %d refused\n", atomic_load(&ok),
	       atomic_load(&bad));
	assert_int_equal(atomic_load(&bad), 0);
	assert_true(atomic_load(&ok) >= 60);
	snprintf(clause, sizeof(clause), "pay_callback_log WHERE out_trade_no LIKE 'R%d-%%'",
	         getpid());
	assert_int_equal(chan_rows(&db, clause), atomic_load(&ok));
}

/* hup - writes plan p, sends SIGHUP to daemons first to 2 (processor, retrier, reconciler)
 * and waits for each to count the reload as result. */
static void
hup(const struct plan *p, const pid_t pids[3], int first, const char *result)
{
	struct want w[3];

	assert_int_equal(write_conf(p), 0);
	for (int d = first; d < 3; d++) {
		w[d] = (struct want){dport[d], result, metric_at(dport[d], result) + 1};
		assert_true(w[d].n >= 1);
		assert_int_equal(kill(pids[d], SIGHUP), 0);
	}
	for (int d = first; d < 3; d++)
		assert_int_equal(harness_wait_until(metric_reached, &w[d], 15000), 0);
}

static void
processor_retrier_and_reconciler_reload_too(void **state)
{
	static const char *const bins[3] = {"bin/paycb-processor", "bin/paycb-retrier",
	                                    "bin/paycb-reconciler"};
	char logs[3][320], api[320], needle[400];
	struct plan p = NEW;
	pid_t pids[3];

	(void)state;
	snprintf(api, sizeof(api), "%s/stripe_api_key", K.dir);
	assert_int_equal(write_file(api, "sk_test_reload", 0600), 0);
	p.stripe_api = api;
	assert_int_equal(write_conf(&p), 0);
	for (int d = 0; d < 3; d++) {
		struct want up = {dport[d], RELOAD_OK, 0};

		snprintf(logs[d], sizeof(logs[d]), "%s/daemon%d.log", K.dir, d);
		assert_true((pids[d] = harness_spawn(bins[d], conf_path, logs[d])) > 0);
		assert_int_equal(harness_wait_until(metric_reached, &up, 30000), 0);
	}
	hup(&p, pids, 0, RELOAD_OK);
	/* The reconciler built its clients again from the file: at start and at the reload. */
	assert_int_equal(harness_file_count(logs[2], "event=merchant_clients merchant=default "
	                                             "wxpay=0 alipay=0 stripe=1"),
	                 2);
	/* A broken key file (only the reconciler reads it), then a broken configuration: each
	 * keeps what it runs with, and says why. */
	assert_int_equal(chmod(api, 0644), 0);
	hup(&p, pids, 2, RELOAD_FAILED);
	snprintf(needle, sizeof(needle), "secret file '%s' is readable", api);
	assert_int_equal(harness_file_count(logs[2], needle), 1);
	for (int d = 0; d < 2; d++)
		assert_int_equal(harness_file_count(logs[d], "event=config_reload result=ok"), 1);
	assert_int_equal(chmod(api, 0600), 0);
	p.extra_top = "processor = 1;\n";
	hup(&p, pids, 0, RELOAD_FAILED);
	for (int d = 0; d < 3; d++) {
		assert_int_equal(harness_file_count(logs[d], "action=kept_old"), d < 2 ? 1 : 2);
		assert_int_equal(metric_at(dport[d], "paycb_config_last_reload_successful"), 0);
		assert_int_equal(harness_stop(pids[d], SIGTERM, 60000), 0);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(rotate_every_channel_under_load),
	    cmocka_unit_test(old_keys_are_refused_after_the_removal),
	    cmocka_unit_test(broken_reloads_keep_the_running_set),
	    cmocka_unit_test(back_to_back_reloads_refuse_nothing),
	    cmocka_unit_test(request_in_flight_keeps_the_keys_it_started_with),
	    cmocka_unit_test(every_notification_was_answered_and_stored),
	    cmocka_unit_test(processor_retrier_and_reconciler_reload_too),
	};
	int rc;

	if (harness_setup(&cf, "key_rotation", NULL) != 0 || chan_keys_new(&K) != 0 ||
	    gen_new(&G[0], 0) != 0 || gen_new(&G[1], 1) != 0)
		return 1;
	harness_db(&cf, &db);
	port = httpc_free_port();
	admin_port = httpc_free_port();
	for (int d = 0; d < 3; d++)
		dport[d] = httpc_free_port();
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", K.dir);
	snprintf(log_path, sizeof(log_path), "%s/ingest.log", K.dir);
	if (write_conf(&OLD) != 0 ||
	    (ingest_pid = chan_spawn_ingest(conf_path, log_path, admin_port)) < 0)
		return 1;
	for (int t = 0; t < NSEND; t++)
		if (pthread_create(&senders[t], NULL, sender, (void *)(intptr_t)t) != 0)
			return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (!atomic_load(&stop)) {
		atomic_store(&stop, 1);
		for (int t = 0; t < NSEND; t++)
			pthread_join(senders[t], NULL);
	}
	if (chan_stop(ingest_pid) != 0 && rc == 0)
		rc = 1;
	for (int g = 0; g < 2; g++) {
		EVP_PKEY_free(G[g].wx);
		EVP_PKEY_free(G[g].ali);
	}
	chan_keys_free(&K);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
