/*
 * test_hostile_forge - hostile input that is validly signed, hostile files and the admin port,
 * against the live paycb-ingest daemon (issue 18, items 3 to 6):
 *
 *   - an Alipay body re-split from a validly signed one (a subject holding
 *     "&total_amount=0.01&trade_no=..." turned into parameters, the real ones folded into a
 *     new parameter) and the signed original itself: both answered "fail", nothing stored,
 *     counted as reason "ambiguous"; so is a signed body with a repeated parameter;
 *   - a signed Stripe event whose type carries " event=reserved merchant=evil": acknowledged
 *     (an ignored type), nothing stored, and its log line gains no key=value pair;
 *   - secret files readable by group or others, or owned by another user: ingest exits 78
 *     with an error naming the file;
 *   - /readyz with the database down answers the fixed "not ready" (the reason goes to the
 *     log), and ready again once it is back; with admin_token_file every admin path asks for
 *     the bearer token.
 *
 * The forged Alipay bodies and log values are sent again and again for 1.5 s while genuine
 * notifications of all three channels are sent beside them (tests/support/genuine.c): every
 * genuine one must be stored and answered within the channel's budget.
 *
 * The database is reached through a TCP proxy in this program that can be cut (the same
 * proxy as test_processor_outage's), so the real server, which others use, is never touched.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "genuine.h"
#include "harness.h"

static struct conf cf;
static struct db db;
static struct chan_keys K;
static int port, admin_port;
static pid_t ingest_pid;
static char conf_path[300], log_path[300];
static struct httpc_resp R; /* one request at a time */

/* ---- a TCP proxy to the database that can be cut ----------------------------------------- */

static struct {
	int lfd, port, target;
	atomic_int down, stop;
	pthread_t th;
	pthread_mutex_t mu;
	int fds[256], nfds;
} px;

static void
px_track(int fd, int add)
{
	pthread_mutex_lock(&px.mu);
	if (add && px.nfds < 256) {
		px.fds[px.nfds++] = fd;
	} else if (!add) {
		for (int i = 0; i < px.nfds; i++)
			if (px.fds[i] == fd) {
				px.fds[i] = px.fds[--px.nfds];
				break;
			}
	}
	pthread_mutex_unlock(&px.mu);
}

static void *
px_pump(void *arg)
{
	int *p = arg, a = p[0], b = p[1];
	char buf[16384];

	free(arg);
	while (!atomic_load(&px.stop)) {
		struct pollfd pf[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
		ssize_t n;
		int from;

		if (poll(pf, 2, 200) <= 0)
			continue;
		from = pf[0].revents ? a : b;
		n = recv(from, buf, sizeof(buf), 0);
		if (n <= 0 || send(from == a ? b : a, buf, (size_t)n, MSG_NOSIGNAL) != n)
			break;
	}
	px_track(a, 0);
	px_track(b, 0);
	close(a);
	close(b);
	return NULL;
}

static void *
px_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&px.stop)) {
		struct pollfd pf = {px.lfd, POLLIN, 0};
		struct sockaddr_in sa;
		pthread_t t;
		int c, s, *p;

		if (poll(&pf, 1, 100) <= 0 || (c = accept(px.lfd, NULL, NULL)) < 0)
			continue;
		if (atomic_load(&px.down)) {
			close(c); /* the database is away: the handshake is lost */
			continue;
		}
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)px.target);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(c);
			if (s >= 0)
				close(s);
			continue;
		}
		p = malloc(2 * sizeof(int));
		p[0] = c;
		p[1] = s;
		px_track(c, 1);
		px_track(s, 1);
		if (pthread_create(&t, NULL, px_pump, p) == 0)
			pthread_detach(t);
	}
	return NULL;
}

static int
px_start(int target)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	pthread_mutex_init(&px.mu, NULL);
	px.target = target;
	if ((px.lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(px.lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(px.lfd, 64) != 0 ||
	    getsockname(px.lfd, (struct sockaddr *)&sa, &len) != 0)
		return -1;
	px.port = ntohs(sa.sin_port);
	return pthread_create(&px.th, NULL, px_main, NULL) == 0 ? 0 : -1;
}

/* Every open connection breaks and new ones are dropped at once. */
static void
px_cut(int down)
{
	atomic_store(&px.down, down);
	if (!down)
		return;
	pthread_mutex_lock(&px.mu);
	for (int i = 0; i < px.nfds; i++)
		shutdown(px.fds[i], SHUT_RDWR);
	pthread_mutex_unlock(&px.mu);
}

static int
px_idle(void *arg)
{
	int n;

	(void)arg;
	pthread_mutex_lock(&px.mu);
	n = px.nfds;
	pthread_mutex_unlock(&px.mu);
	return n == 0;
}

static void
px_stop(void)
{
	atomic_store(&px.stop, 1);
	pthread_join(px.th, NULL);
	close(px.lfd);
	harness_wait_until(px_idle, NULL, 5000);
}

/* ---- helpers ----------------------------------------------------------------------------- */

static long long
stored_rows(void)
{
	return chan_rows(&db, "pay_callback_log WHERE " GENUINE_NOT) +
	       chan_rows(&db, "refund_callback_log") + chan_rows(&db, "unroutable");
}

/* The value of the metric line starting with name{labels} on ingest's /metrics, or -1. */
static long long
metric(const char *series)
{
	const char *p;

	if (httpc_request(admin_port, "GET", "/metrics", NULL, "", 0, 5000, &R) != 0 ||
	    R.status != 200 || (p = strstr(R.body, series)) == NULL)
		return -1;
	return atoll(p + strlen(series) + 1);
}

#define AMBIGUOUS "paycb_ingest_verify_failures_total{channel=\"alipay\",reason=\"ambiguous\"}"

static void
post_alipay(const char *body)
{
	assert_int_equal(httpc_request(port, "POST", "/pay/callback/alipay",
	                               "Content-Type: application/x-www-form-urlencoded\r\n", body,
	                               strlen(body), 10000, &R),
	                 0);
}

/* Percent-encodes every byte but letters and digits. */
static void
pct(char *out, size_t cap, const char *s)
{
	size_t o = 0;

	for (; *s && o + 4 < cap; s++) {
		unsigned char c = (unsigned char)*s;

		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
			out[o++] = (char)c;
		else
			o += (size_t)snprintf(out + o, cap - o, "%%%02X", c);
	}
	out[o] = '\0';
}

/* Each forged request is sent again and again for this long while genuine notifications are
 * sent beside it (tests/support/genuine.c), so both meet in ingest. */
#define ATTACK_MS 1500

/* ---- Alipay: one signature, one meaning -------------------------------------------------- */

static void
alipay_resplit_of_a_signed_body_is_refused(void **state)
{
	const char *k[] = {"app_id",  "notify_id",    "notify_type", "out_trade_no",
	                   "subject", "total_amount", "trade_no",    "trade_status"};
	const char *v[] = {"2021000000000001",
	                   "N-RS",
	                   "trade_status_sync",
	                   "O-RS-1",
	                   "x&total_amount=0.01&trade_no=T-FAKE&trade_status=TRADE_SUCCESS&u=",
	                   "88.88",
	                   "T-REAL",
	                   "TRADE_SUCCESS"};
	char tail[512], body[4096];
	const char *sign, *stype;
	struct chan_note n;
	struct genuine g;
	long long rows = stored_rows(), refused = metric(AMBIGUOUS), end;
	int rounds = 0;

	(void)state;
	refused = refused < 0 ? 0 : refused; /* the series appears with its first count */
	/* A merchant-set subject holding "&name=value": Alipay signs it as it is. */
	assert_int_equal(chan_ali_note(&n, K.ali_key, k, v, 8), 0);
	assert_non_null(sign = strstr(n.body, "&sign="));
	stype = strstr(n.body, "sign_type=RSA2") ? "&sign_type=RSA2" : "";
	/* The same signed string read another way: the subject's text becomes the amount and
	 * trade number, and a new parameter u swallows the real ones. */
	pct(tail, sizeof(tail), "&total_amount=88.88&trade_no=T-REAL&trade_status=TRADE_SUCCESS");
	snprintf(body, sizeof(body),
	         "app_id=2021000000000001&notify_id=N-RS&notify_type=trade_status_sync&"
	         "out_trade_no=O-RS-1&subject=x&total_amount=0.01&trade_no=T-FAKE&"
	         "trade_status=TRADE_SUCCESS&u=%s%s%s",
	         tail, stype, sign);
	genuine_start(&g, &K, port, "r");
	end = harness_now_ms() + ATTACK_MS;
	do {
		post_alipay(body);
		if (R.status != 400 || strcmp(R.body, "fail") != 0)
			fail_msg("re-split body: got %d '%s', want 400 'fail'", R.status, R.body);
		/* The signed original is refused too: which reading was meant cannot be told. */
		post_alipay(n.body);
		if (R.status != 400 || strcmp(R.body, "fail") != 0)
			fail_msg("signed original: got %d '%s', want 400 'fail'", R.status, R.body);
		rounds++;
	} while (harness_now_ms() < end);
	genuine_check(&g, &db, 5, "re-split Alipay bodies");
	assert_int_equal(stored_rows(), rows);
	assert_int_equal(metric(AMBIGUOUS), refused + 2 * rounds);
	free(n.body);
}

static void
alipay_repeated_parameter_is_refused(void **state)
{
	struct chan_note n;
	struct genuine g;
	char *body;
	long long rows = stored_rows(), refused = metric(AMBIGUOUS), end;
	int rounds = 0;

	(void)state;
	refused = refused < 0 ? 0 : refused;
	assert_int_equal(chan_ali_pay(&n, "O-REP-1", "T-REP-1", "1.00", K.ali_key), 0);
	body = malloc(n.len + 64);
	snprintf(body, n.len + 64, "%s&out_trade_no=O-REP-2", n.body);
	genuine_start(&g, &K, port, "p");
	end = harness_now_ms() + ATTACK_MS;
	do {
		post_alipay(body);
		if (R.status != 400 || strcmp(R.body, "fail") != 0)
			fail_msg("repeated parameter: got %d '%s', want 400 'fail'", R.status,
			         R.body);
		rounds++;
	} while (harness_now_ms() < end);
	genuine_check(&g, &db, 5, "repeated Alipay parameters");
	assert_int_equal(stored_rows(), rows);
	assert_int_equal(metric(AMBIGUOUS), refused + rounds);
	free(body);
	free(n.body);
}

/* ---- logs -------------------------------------------------------------------------------- */

static void
signed_value_cannot_forge_log_pairs(void **state)
{
	static const char json[] =
	    "{\"id\":\"evt_forge\",\"object\":\"event\","
	    "\"type\":\"customer.created event=reserved merchant=evil amount=1000000\","
	    "\"data\":{\"object\":{\"id\":\"cus_1\",\"object\":\"customer\"}}}";
	struct chan_note n;
	struct genuine g;
	long long rows = stored_rows(), end;
	char *text = NULL;
	size_t cap = 0;
	FILE *fp;
	int lines = 0, forged = 0, escaped = 0, rounds = 0;
	ssize_t len;

	(void)state;
	genuine_start(&g, &K, port, "l");
	end = harness_now_ms() + ATTACK_MS;
	do {
		assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
		assert_int_equal(chan_post(port, "/pay/callback/stripe", &n, &R), 0);
		assert_int_equal(R.status, 200); /* authentic, of a type paycb ignores */
		free(n.body);
		rounds++;
	} while (harness_now_ms() < end);
	genuine_check(&g, &db, 5, "forged log values");
	assert_int_equal(stored_rows(), rows);
	assert_non_null(fp = fopen(log_path, "r"));
	while ((len = getline(&text, &cap, fp)) > 0) {
		if (strstr(text, "event=ignored") == NULL)
			continue;
		lines++;
		forged +=
		    strstr(text, " merchant=evil") != NULL || strstr(text, " amount=") != NULL;
		escaped +=
		    strstr(text, "type=customer.created%20event%3Dreserved%20merchant%3Devil") !=
		    NULL;
	}
	fclose(fp);
	free(text);
	assert_true(lines >= rounds);
	assert_int_equal(forged, 0);
	assert_int_equal(escaped, rounds);
}

/* ---- secret files ------------------------------------------------------------------------ */

/* Runs ingest on conf until it exits (it must, within 20 s); its status, stderr in log. */
static int
run_ingest(const char *conf, const char *log)
{
	int st = 0;
	pid_t pid = fork();

	if (pid == 0) {
		if (freopen(log, "w", stderr) == NULL)
			_exit(126);
		alarm(20);
		execl("bin/paycb-ingest", "paycb-ingest", "-c", conf, (char *)NULL);
		_exit(127);
	}
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int
log_has(const char *log, const char *needle)
{
	return harness_file_count(log, needle) > 0;
}

static void
shared_or_foreign_secret_files_stop_ingest(void **state)
{
	char conf[300], log[300], secret[300];

	(void)state;
	snprintf(conf, sizeof(conf), "%s/paycb-secrets.conf", K.dir);
	snprintf(log, sizeof(log), "%s/ingest-secrets.log", K.dir);
	snprintf(secret, sizeof(secret), "%s/stripe_new", K.dir);
	assert_int_equal(chan_write_conf(&cf, &K, conf, cf.kafka.brokers, httpc_free_port(),
	                                 httpc_free_port(), NULL),
	                 0);
	assert_int_equal(access(secret, R_OK), 0);
	/* Readable by the group. */
	assert_int_equal(chmod(secret, 0640), 0);
	assert_int_equal(run_ingest(conf, log), 78);
	assert_true(log_has(log, secret));
	assert_true(log_has(log, "readable or writable by group or others (mode 0640)"));
	/* Readable by everyone. */
	assert_int_equal(chmod(secret, 0644), 0);
	assert_int_equal(run_ingest(conf, log), 78);
	assert_true(log_has(log, secret));
	assert_int_equal(chmod(secret, 0600), 0);
	if (geteuid() == 0) {
		/* Owned by another user (only root can give a file away). */
		assert_int_equal(chown(secret, 65534, (gid_t)-1), 0);
		assert_int_equal(run_ingest(conf, log), 78);
		assert_true(log_has(log, secret));
		assert_true(log_has(log, "is owned by uid 65534"));
		assert_int_equal(chown(secret, 0, (gid_t)-1), 0);
	} else {
		printf("# not root: the owner case needs chown, skipped\n");
	}
}

/* ---- the admin port ---------------------------------------------------------------------- */

static int
readyz_is(void *arg)
{
	return httpc_request(admin_port, "GET", "/readyz", NULL, "", 0, 8000, &R) == 0 &&
	       R.status == *(int *)arg;
}

static void
readyz_with_the_database_down_answers_fixed_text(void **state)
{
	int want;

	(void)state;
	want = 200;
	assert_int_equal(harness_wait_until(readyz_is, &want, 20000), 0);
	assert_string_equal(R.body, "ready\n");
	px_cut(1);
	want = 503;
	assert_int_equal(harness_wait_until(readyz_is, &want, 20000), 0);
	/* Fixed text: no host name, no server message. */
	assert_string_equal(R.body, "not ready\n");
	assert_true(log_has(log_path, "event=not_ready detail=\"database: "));
	px_cut(0);
	want = 200;
	assert_int_equal(harness_wait_until(readyz_is, &want, 30000), 0);
	assert_string_equal(R.body, "ready\n");
}

static void
admin_token_guards_every_admin_path(void **state)
{
	static const char *const paths[] = {"/healthz", "/readyz", "/metrics", "/nothing"};
	char conf[300], log[300], tokfile[300], hdr[128];
	int p2 = httpc_free_port(), a2 = httpc_free_port(), st;
	long long end;
	FILE *fp;
	pid_t pid;

	(void)state;
	snprintf(conf, sizeof(conf), "%s/paycb-token.conf", K.dir);
	snprintf(log, sizeof(log), "%s/ingest-token.log", K.dir);
	snprintf(tokfile, sizeof(tokfile), "%s/admin_token", K.dir);
	assert_non_null(fp = fopen(tokfile, "w"));
	fputs("t0ken-for-the-admin-port\n", fp);
	fclose(fp);
	assert_int_equal(chmod(tokfile, 0600), 0);
	assert_int_equal(chan_write_conf(&cf, &K, conf, cf.kafka.brokers, p2, a2, NULL), 0);
	assert_non_null(fp = fopen(conf, "a"));
	fprintf(fp, "admin_token_file = \"%s\";\n", tokfile);
	fclose(fp);
	if ((pid = fork()) == 0) {
		if (freopen(log, "w", stderr) == NULL)
			_exit(126);
		execl("bin/paycb-ingest", "paycb-ingest", "-c", conf, (char *)NULL);
		_exit(127);
	}
	assert_true(pid > 0);
	/* Up when the admin listener answers at all (here: 401 without the token). */
	for (end = harness_now_ms() + 20000; harness_now_ms() < end;)
		if (httpc_request(a2, "GET", "/healthz", NULL, "", 0, 1000, &R) == 0 && R.status)
			break;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		assert_int_equal(httpc_request(a2, "GET", paths[i], NULL, "", 0, 5000, &R), 0);
		assert_int_equal(R.status, 401);
		assert_int_equal(httpc_request(a2, "GET", paths[i],
		                               "Authorization: Bearer t0ken-for-the-admin-por\r\n",
		                               "", 0, 5000, &R),
		                 0);
		assert_int_equal(R.status, 401);
	}
	snprintf(hdr, sizeof(hdr), "Authorization: Bearer t0ken-for-the-admin-port\r\n");
	assert_int_equal(httpc_request(a2, "GET", "/healthz", hdr, "", 0, 5000, &R), 0);
	assert_int_equal(R.status, 200);
	assert_int_equal(httpc_request(a2, "GET", "/metrics", hdr, "", 0, 5000, &R), 0);
	assert_int_equal(R.status, 200);
	assert_int_equal(httpc_request(a2, "GET", "/nothing", hdr, "", 0, 5000, &R), 0);
	assert_int_equal(R.status, 404);
	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(alipay_resplit_of_a_signed_body_is_refused),
	    cmocka_unit_test(alipay_repeated_parameter_is_refused),
	    cmocka_unit_test(signed_value_cannot_forge_log_pairs),
	    cmocka_unit_test(readyz_with_the_database_down_answers_fixed_text),
	    cmocka_unit_test(admin_token_guards_every_admin_path),
	    cmocka_unit_test(shared_or_foreign_secret_files_stop_ingest),
	};
	long long db_port;
	int rc;

	if (harness_setup(&cf, "hostile_forge", NULL) != 0 || chan_keys_new(&K) != 0)
		return 1;
	harness_db(&cf, &db);
	if (px_start((int)cf.db.port) != 0)
		return 1;
	port = httpc_free_port();
	admin_port = httpc_free_port();
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", K.dir);
	snprintf(log_path, sizeof(log_path), "%s/ingest.log", K.dir);
	/* This daemon reaches the database through the proxy. */
	db_port = cf.db.port;
	cf.db.port = px.port;
	rc = chan_write_conf(&cf, &K, conf_path, cf.kafka.brokers, port, admin_port, NULL);
	cf.db.port = db_port;
	if (rc != 0 || (ingest_pid = chan_spawn_ingest(conf_path, log_path, admin_port)) < 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (ingest_pid > 0 && chan_stop(ingest_pid) != 0 && rc == 0)
		rc = 1;
	px_stop();
	chan_keys_free(&K);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
