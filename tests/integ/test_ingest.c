/*
 * test_ingest - the real paycb-ingest daemon against the real MariaDB and Kafka, with channel
 * keys generated at test time: valid notifications of all three channels are stored, published
 * once and acknowledged; duplicates are absorbed; hostile requests get the right answer and
 * leave nothing behind while the daemon keeps serving; a broker that is unreachable does not
 * block acknowledgements past the budget. Hostile requests: test_hostile.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "chan_notify.h"
#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "kq.h"
#include "chan.h"

static struct conf cf;
static struct db db;
static int port, admin_port, dead_port, dead_admin_port;
static pid_t ingest_pid, dead_pid;

static struct chan_keys K;
static int seq;

/* Thin asserting wrappers over the channel fixtures (tests/support/chan.h). */
static void
write_conf(const char *path, const char *brokers, int p, int ap)
{
	assert_int_equal(chan_write_conf(&cf, &K, path, brokers, p, ap,
	                                 "max_body_bytes = 65536; max_inflight = 512; "
	                                 "max_unverified = 512;"),
	                 0);
}

static pid_t
spawn_ingest(const char *conf, const char *log, int ap)
{
	pid_t pid = chan_spawn_ingest(conf, log, ap);

	if (pid < 0)
		fail_msg("paycb-ingest did not become healthy; see %s", log);
	return pid;
}

#define stop_daemon chan_stop

static void
wx_note(struct chan_note *n, EVP_PKEY *key, const char *serial, const char *event,
        const char *plain, time_t ts)
{
	assert_int_equal(chan_wx_note(&K, n, key, serial, event, plain, ts), 0);
}

static void
wx_pay(struct chan_note *n, const char *order, const char *txn, long long fen, EVP_PKEY *key,
       const char *serial, time_t ts)
{
	assert_int_equal(chan_wx_pay(&K, n, order, txn, fen, key, serial, ts), 0);
}

static void
ali_note(struct chan_note *n, EVP_PKEY *key, const char *const *k, const char *const *v, size_t cnt)
{
	assert_int_equal(chan_ali_note(n, key, k, v, cnt), 0);
}

static void
ali_pay(struct chan_note *n, const char *order, const char *trade, const char *amount,
        EVP_PKEY *key)
{
	assert_int_equal(chan_ali_pay(n, order, trade, amount, key), 0);
}

static void
stripe_note(struct chan_note *n, const char *secret, const char *json, time_t t)
{
	assert_int_equal(chan_stripe_note(n, secret, json, t), 0);
}

static void
stripe_pay(struct chan_note *n, const char *secret, const char *order, const char *pi,
           long long cents, time_t t)
{
	assert_int_equal(chan_stripe_pay(n, secret, order, pi, cents, t), 0);
}

static int
post(const char *path, const struct chan_note *n, struct httpc_resp *r)
{
	return chan_post(port, path, n, r);
}

static long long
rows(const char *clause)
{
	long long v = chan_rows(&db, clause);

	assert_true(v >= 0);
	return v;
}

static long long
total_rows(void)
{
	return rows("pay_callback_log") + rows("refund_callback_log");
}

/* What count_messages looks for, and how often it was found. */
struct count_arg {
	char needle[64];
	int n;
};

static int
count_one(void *arg, const rd_kafka_message_t *m)
{
	struct count_arg *c = arg;

	c->n += memmem(m->payload, m->len, c->needle, strlen(c->needle)) != NULL;
	return 0;
}

/*
 * The number of messages for row id. Every answered publish waited for its delivery report,
 * so everything a request published is in the topic by the time it is answered: reading up
 * to the high watermarks is exact, and a second copy would be counted.
 */
static int
count_messages(unsigned long long id)
{
	struct count_arg c = {"", 0};
	char topic[256];

	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	snprintf(c.needle, sizeof(c.needle), "\"id\":%llu,", id);
	assert_true(fx_read_topic(&cf, topic, count_one, &c) >= 0);
	return c.n;
}

static unsigned long long
row_id(const char *table, const char *col, const char *val)
{
	return chan_row_id(&db, table, col, val);
}

static void
uniq(char *buf, size_t len, const char *prefix)
{
	snprintf(buf, len, "%s%d%04d", prefix, getpid(), ++seq);
}

/* ---- valid traffic ---------------------------------------------------------------------- */

static void
wxpay_payment_is_stored_published_and_acknowledged(void **state)
{
	char order[64], txn[64];
	struct httpc_resp r;
	struct chan_note n;
	unsigned long long id;

	(void)state;
	uniq(order, sizeof(order), "WX");
	uniq(txn, sizeof(txn), "42000");
	wx_pay(&n, order, txn, 8888, K.wx_cert_key, K.wx_serial, time(NULL));
	assert_int_equal(post("/pay/callback/wxpay", &n, &r), 0);
	assert_int_equal(r.status, 204);
	id = row_id("pay_callback_log", "channel_trade_no", txn);
	assert_true(id > 0);
	assert_int_equal(
	    rows("pay_callback_log WHERE amount = 88.88 AND currency = 'CNY' AND "
	         "merchant_id = 'default' AND channel = 'wxpay' AND status = 0 AND "
	         "next_retry_at > NOW(3) + INTERVAL 30 SECOND AND raw_body IS NOT NULL"),
	    rows("pay_callback_log WHERE channel = 'wxpay'"));
	assert_int_equal(count_messages(id), 1);
	free(n.body);
}

static void
wxpay_public_key_mode_is_accepted_too(void **state)
{
	char order[64], txn[64];
	struct httpc_resp r;
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "WXP");
	uniq(txn, sizeof(txn), "42001");
	wx_pay(&n, order, txn, 1, K.wx_pub_key, K.wx_pubkey_id, time(NULL));
	assert_int_equal(post("/pay/callback/wxpay/default", &n, &r), 0);
	assert_int_equal(r.status, 204);
	assert_true(row_id("pay_callback_log", "channel_trade_no", txn) > 0);
	free(n.body);
}

static void
alipay_payment_with_old_and_new_key(void **state)
{
	char order[64], trade[64];
	struct httpc_resp r;
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "ALI");
	uniq(trade, sizeof(trade), "2026120222001");
	ali_pay(&n, order, trade, "88.88", K.ali_key);
	assert_int_equal(post("/pay/callback/alipay", &n, &r), 0);
	assert_int_equal(r.status, 200);
	assert_string_equal(r.body, "success");
	assert_true(row_id("pay_callback_log", "channel_trade_no", trade) > 0);
	free(n.body);
	/* The rotated-out key still verifies while it is configured. */
	uniq(order, sizeof(order), "ALI");
	uniq(trade, sizeof(trade), "2026120222001");
	ali_pay(&n, order, trade, "0.10", K.ali_key_old);
	assert_int_equal(post("/pay/callback/alipay", &n, &r), 0);
	assert_string_equal(r.body, "success");
	assert_int_equal(rows("pay_callback_log WHERE channel = 'alipay' AND amount = 0.10"), 1);
	free(n.body);
}

static void
stripe_payment_with_rotated_secrets(void **state)
{
	char order[64], pi[64];
	struct httpc_resp r;
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "ST");
	uniq(pi, sizeof(pi), "pi_");
	stripe_pay(&n, K.stripe_old, order, pi, 1999, time(NULL));
	assert_int_equal(post("/pay/callback/stripe", &n, &r), 0);
	assert_int_equal(r.status, 200);
	free(n.body);
	uniq(order, sizeof(order), "ST");
	uniq(pi, sizeof(pi), "pi_");
	stripe_pay(&n, K.stripe_new, order, pi, 2000, time(NULL));
	assert_int_equal(post("/pay/callback/stripe", &n, &r), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(rows("pay_callback_log WHERE channel = 'stripe' AND currency = 'USD' AND "
	                      "amount IN (19.99, 20.00)"),
	                 2);
	free(n.body);
	/* shop2 knows only the new secret: the old one is rejected there. */
	uniq(pi, sizeof(pi), "pi_");
	stripe_pay(&n, K.stripe_old, order, pi, 2000, time(NULL));
	assert_int_equal(post("/pay/callback/stripe/shop2", &n, &r), 0);
	assert_int_equal(r.status, 400);
	free(n.body);
}

static void
refunds_of_each_channel_go_to_the_refund_log(void **state)
{
	char plain[1024], order[64], json[1024];
	struct httpc_resp r;
	struct chan_note n;
	long long before = rows("refund_callback_log");

	(void)state;
	uniq(order, sizeof(order), "RF");
	snprintf(plain, sizeof(plain),
	         "{\"mchid\":\"1900000001\",\"out_trade_no\":\"%s\",\"transaction_id\":\"4200R%s\","
	         "\"out_refund_no\":\"R%s\",\"refund_id\":\"5030%s\",\"refund_status\":\"SUCCESS\","
	         "\"success_time\":\"2026-12-02T10:00:00+08:00\",\"user_received_account\":\"x\","
	         "\"amount\":{\"total\":8888,\"refund\":888,\"payer_total\":8888,\"payer_refund\":"
	         "888}}",
	         order, order, order, order);
	wx_note(&n, K.wx_cert_key, K.wx_serial, "REFUND.SUCCESS", plain, time(NULL));
	assert_int_equal(post("/pay/callback/wxpay", &n, &r), 0);
	assert_int_equal(r.status, 204);
	free(n.body);
	{
		const char *k[] = {"notify_type", "notify_id",    "app_id",       "charset",
		                   "trade_no",    "out_trade_no", "trade_status", "total_amount",
		                   "refund_fee",  "out_biz_no",   "gmt_refund"};
		const char *v[] = {"trade_status_sync",
		                   "nid-r",
		                   "2021000000000001",
		                   "utf-8",
		                   "T-R1",
		                   order,
		                   "TRADE_SUCCESS",
		                   "88.88",
		                   "8.88",
		                   "BIZ-R1",
		                   "2026-12-02 10:00:00"};
		ali_note(&n, K.ali_key, k, v, 11);
		assert_int_equal(post("/pay/callback/alipay", &n, &r), 0);
		assert_string_equal(r.body, "success");
		free(n.body);
	}
	snprintf(json, sizeof(json),
	         "{\"id\":\"evt_r%s\",\"object\":\"event\",\"type\":\"refund.created\",\"data\":{"
	         "\"object\":{\"id\":\"re_%s\",\"object\":\"refund\",\"amount\":500,\"currency\":"
	         "\"usd\",\"status\":\"succeeded\",\"payment_intent\":\"pi_r%s\",\"metadata\":{"
	         "\"order_id\":\"%s\"}}}}",
	         order, order, order, order);
	stripe_note(&n, K.stripe_new, json, time(NULL));
	assert_int_equal(post("/pay/callback/stripe", &n, &r), 0);
	assert_int_equal(r.status, 200);
	free(n.body);
	assert_int_equal(rows("refund_callback_log") - before, 3);
	assert_int_equal(rows("refund_callback_log WHERE channel = 'alipay' AND amount = 8.88 AND "
	                      "amount_cumulative = 1"),
	                 1);
	assert_int_equal(rows("refund_callback_log WHERE channel = 'wxpay' AND amount = 8.88"), 1);
}

static void
other_stripe_events_are_acknowledged_not_stored(void **state)
{
	struct httpc_resp r;
	struct chan_note n;
	long long before = total_rows();

	(void)state;
	stripe_note(&n, K.stripe_new,
	            "{\"id\":\"evt_x\",\"object\":\"event\",\"type\":\"customer.created\","
	            "\"data\":{\"object\":{\"id\":\"cus_1\",\"object\":\"customer\"}}}",
	            time(NULL));
	assert_int_equal(post("/pay/callback/stripe", &n, &r), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(total_rows(), before);
	free(n.body);
}

/* ---- duplicates ------------------------------------------------------------------------- */

struct storm {
	const struct chan_note *n;
	int status;
	long long ms;
};

static void *
storm_one(void *arg)
{
	struct storm *s = arg;
	struct httpc_resp r;
	int status = -1; /* answered with nothing */

	r.elapsed_ms = 0;
	if (httpc_request(port, "POST", "/pay/callback/wxpay", s->n->headers, s->n->body, s->n->len,
	                  15000, &r) == 0 &&
	    r.status > 0)
		status = r.status;
	s->ms = r.elapsed_ms;
	/* Atomic: a test may watch it while the thread runs. */
	__atomic_store_n(&s->status, status, __ATOMIC_RELEASE);
	return NULL;
}

static void
two_hundred_concurrent_copies_one_row_one_message(void **state)
{
	enum { N = 200 };
	static struct storm s[N];
	pthread_t t[N];
	char order[64], txn[64];
	unsigned long long id;
	struct chan_note n;
	int ok = 0;

	(void)state;
	uniq(order, sizeof(order), "STORM");
	uniq(txn, sizeof(txn), "42009");
	wx_pay(&n, order, txn, 100, K.wx_cert_key, K.wx_serial, time(NULL));
	for (int i = 0; i < N; i++) {
		s[i].n = &n;
		s[i].status = 0;
		assert_int_equal(pthread_create(&t[i], NULL, storm_one, &s[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ok += s[i].status == 204;
	}
	assert_int_equal(ok, N);
	assert_int_equal(rows("pay_callback_log WHERE out_trade_no LIKE 'STORM%'"), 1);
	id = row_id("pay_callback_log", "channel_trade_no", txn);
	assert_int_equal(count_messages(id), 1);
	free(n.body);
}

/* metric - the value of one unlabelled metric of ingest's /metrics, -1 when absent. */
static long long
metric(const char *name)
{
	struct httpc_resp r;
	char needle[128];
	const char *at;

	if (httpc_request(admin_port, "GET", "/metrics", NULL, "", 0, 5000, &r) != 0)
		return -1;
	snprintf(needle, sizeof(needle), "\n%s ", name);
	if ((at = strstr(r.body, needle)) == NULL)
		return -1;
	return strtoll(at + strlen(needle), NULL, 10);
}

struct gauge_want {
	const char *name;
	long long want;
};

static int
gauge_reached(void *arg)
{
	struct gauge_want *g = arg;

	return metric(g->name) >= g->want;
}

/*
 * hold_key - an uncommitted INSERT of the test's own on the unique key of (txn, order): an
 * INSERT by ingest on the same key blocks on it until the test rolls back.
 */
static void
hold_key(struct db *hold, const char *txn, const char *order)
{
	struct db_in in[3] = {DBI_STR("default"), DBI_STR(txn), DBI_STR(order)};

	harness_db(&cf, hold);
	assert_int_equal(db_begin(hold), DB_OK);
	assert_int_equal(db_exec(hold,
	                         "INSERT INTO pay_callback_log (merchant_id, channel, "
	                         "channel_trade_no, out_trade_no, amount, currency, "
	                         "body_sha256, next_retry_at) VALUES (?, 'wxpay', ?, ?, "
	                         "'1.00', 'CNY', REPEAT('0', 64), NOW(3))",
	                         in, 3, NULL, NULL),
	                 DB_OK);
}

/*
 * Copies of one notification that arrive while a copy's INSERT is running wait for that
 * INSERT's answer instead of queueing INSERTs on the same key. The test holds the unique-key
 * entry with an uncommitted INSERT of its own, so the first copy's INSERT blocks on it and
 * every other copy is certainly in flight with it; then it rolls back. The first copy's INSERT
 * goes through; all copies are answered success; one row, one message, and N-1 copies
 * answered by the one INSERT (paycb_ingest_coalesced_total).
 */
static void
copies_in_flight_are_answered_by_one_insert(void **state)
{
	enum { N = 20 };
	static struct storm s[N];
	pthread_t t[N];
	char order[64], txn[64];
	struct gauge_want g = {"paycb_ingest_coalescing", N - 1};
	long long before;
	unsigned long long id;
	struct chan_note n;
	struct db hold;
	int ok = 0;

	(void)state;
	uniq(order, sizeof(order), "FLIGHT");
	uniq(txn, sizeof(txn), "42010");
	wx_pay(&n, order, txn, 100, K.wx_cert_key, K.wx_serial, time(NULL));
	before = metric("paycb_ingest_coalesced_total");
	assert_true(before >= 0);
	hold_key(&hold, txn, order);
	for (int i = 0; i < N; i++) {
		s[i].n = &n;
		s[i].status = 0;
		assert_int_equal(pthread_create(&t[i], NULL, storm_one, &s[i]), 0);
	}
	/* One copy is blocked in its INSERT; the others wait for it. */
	assert_int_equal(harness_wait_until(gauge_reached, &g, 10000), 0);
	assert_int_equal(db_rollback(&hold), DB_OK);
	db_close(&hold);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		ok += s[i].status == 204;
	}
	assert_int_equal(ok, N);
	assert_int_equal(metric("paycb_ingest_coalesced_total") - before, N - 1);
	assert_int_equal(rows("pay_callback_log WHERE out_trade_no LIKE 'FLIGHT%'"), 1);
	id = row_id("pay_callback_log", "channel_trade_no", txn);
	assert_int_equal(count_messages(id), 1);
	free(n.body);
}

/*
 * A condition: the leader *arg was answered, or one of ingest's INSERTs is running (which
 * here means blocked on the held key).
 */
static int
leader_blocked_or_answered(void *arg)
{
	const struct storm *leader = arg;

	return __atomic_load_n(&leader->status, __ATOMIC_ACQUIRE) != 0 ||
	       rows("information_schema.PROCESSLIST WHERE COMMAND = 'Execute' AND "
	            "INFO LIKE 'INSERT INTO pay_callback_log%'") > 0;
}

/* A condition: the ten copies after the leader s[0] of the array *arg were answered. */
static int
copies_answered(void *arg)
{
	const struct storm *s = arg;

	for (int i = 1; i <= 10; i++)
		if (__atomic_load_n(&s[i].status, __ATOMIC_ACQUIRE) == 0)
			return 0;
	return 1;
}

/* A condition: the wall clock has reached the second *arg. */
static int
second_reached(void *arg)
{
	return time(NULL) >= *(time_t *)arg;
}

/*
 * A parked copy takes its leader's verdict only for the seconds that verdict covers. The
 * leader's WeChat timestamp is 299 s old, the tolerance's last second; it is verified and
 * blocked in its INSERT on a held key. Copies sent from the next second on must be judged by
 * themselves: each is refused (401, timestamp), though the leader is stored and answered
 * success. The cheap checks see their stale timestamp before they could park, so they are
 * refused while the leader still waits. If the clock ticked between the leader's send and its
 * verification, the leader never reaches its INSERT, and the round is tried again.
 */
static void
copies_past_the_leaders_time_window_run_alone(void **state)
{
	enum { N = 10 };
	static struct storm s[N + 1];
	pthread_t t[N + 1];
	char order[64], txn[64];
	struct chan_note n;
	struct db hold;
	time_t ts, late;
	int round, refused = 0;

	(void)state;
	for (round = 0; round < 3; round++) {
		uniq(order, sizeof(order), "EDGE");
		uniq(txn, sizeof(txn), "42011");
		ts = time(NULL) - 299;
		wx_pay(&n, order, txn, 100, K.wx_cert_key, K.wx_serial, ts);
		hold_key(&hold, txn, order);
		s[0] = (struct storm){&n, 0, 0};
		assert_int_equal(pthread_create(&t[0], NULL, storm_one, &s[0]), 0);
		assert_int_equal(harness_wait_until(leader_blocked_or_answered, &s[0], 10000), 0);
		if (__atomic_load_n(&s[0].status, __ATOMIC_ACQUIRE) == 0)
			break;
		assert_int_equal(db_rollback(&hold), DB_OK);
		db_close(&hold);
		pthread_join(t[0], NULL);
		assert_int_equal(s[0].status, 401);
		free(n.body);
	}
	assert_true(round < 3);
	late = ts + 300;
	assert_int_equal(harness_wait_until(second_reached, &late, 3000), 0);
	for (int i = 1; i <= N; i++) {
		s[i] = (struct storm){&n, 0, 0};
		assert_int_equal(pthread_create(&t[i], NULL, storm_one, &s[i]), 0);
	}
	assert_int_equal(harness_wait_until(copies_answered, s, 10000), 0);
	assert_int_equal(db_rollback(&hold), DB_OK);
	db_close(&hold);
	for (int i = 0; i <= N; i++)
		pthread_join(t[i], NULL);
	assert_int_equal(s[0].status, 204);
	for (int i = 1; i <= N; i++)
		refused += s[i].status == 401;
	assert_int_equal(refused, N);
	assert_int_equal(rows("pay_callback_log WHERE out_trade_no LIKE 'EDGE%'"), 1);
	free(n.body);
}

/* Hostile input has its own catalog: tests/integ/test_hostile.c. */

/* ---- the broker unreachable ------------------------------------------------------------- */

/* A condition: the log at arg has librdkafka's "all brokers are down". */
static int
brokers_down_logged(void *arg)
{
	return harness_file_count(arg, "brokers are down") > 0;
}

static void
unreachable_broker_still_stores_and_acknowledges_within_budget(void **state)
{
	char conf[300], log[300], brokers[64], order[64], txn[64];
	struct httpc_resp r;
	struct chan_note n;
	int save = port;

	(void)state;
	/* Nothing listens on a fresh free port: the producer cannot reach any broker. */
	snprintf(brokers, sizeof(brokers), "127.0.0.1:%d", httpc_free_port());
	snprintf(conf, sizeof(conf), "%s/dead.conf", K.dir);
	snprintf(log, sizeof(log), "%s/ingest-dead.log", K.dir);
	write_conf(conf, brokers, dead_port, dead_admin_port);
	dead_pid = spawn_ingest(conf, log, dead_admin_port);
	port = dead_port;
	uniq(order, sizeof(order), "NOKAFKA");
	uniq(txn, sizeof(txn), "42777");
	wx_pay(&n, order, txn, 100, K.wx_cert_key, K.wx_serial, time(NULL));
	assert_int_equal(post("/pay/callback/wxpay", &n, &r), 0);
	assert_int_equal(r.status, 204);
	/* The budget is 1500 ms; the answer must not wait much past it. */
	assert_true(r.elapsed_ms < 3000);
	/*
	 * Once librdkafka has said that every broker is down, no request waits for a delivery
	 * report at all: 20 at once are each answered in well under the budget, where waiting
	 * would have held each for all of it.
	 */
	assert_int_equal(harness_wait_until(brokers_down_logged, log, 5000), 0);
	{
		enum { M = 20 };
		static struct chan_note ns[M];
		static struct storm s[M];
		pthread_t t[M];

		for (int i = 0; i < M; i++) {
			uniq(order, sizeof(order), "NOKAFKA");
			uniq(txn, sizeof(txn), "42778");
			wx_pay(&ns[i], order, txn, 100, K.wx_cert_key, K.wx_serial, time(NULL));
			s[i] = (struct storm){&ns[i], 0, 0};
			assert_int_equal(pthread_create(&t[i], NULL, storm_one, &s[i]), 0);
		}
		for (int i = 0; i < M; i++) {
			pthread_join(t[i], NULL);
			assert_int_equal(s[i].status, 204);
			assert_true(s[i].ms < 750);
			free(ns[i].body);
		}
	}
	port = save;
	assert_int_equal(rows("pay_callback_log WHERE out_trade_no LIKE 'NOKAFKA%' AND status = 0"),
	                 21);
	assert_int_equal(stop_daemon(dead_pid), 0);
	dead_pid = 0;
	free(n.body);
}

static void
metrics_and_readiness_are_served(void **state)
{
	struct httpc_resp r;

	(void)state;
	assert_int_equal(httpc_request(admin_port, "GET", "/readyz", NULL, "", 0, 5000, &r), 0);
	assert_int_equal(r.status, 200);
	assert_int_equal(httpc_request(admin_port, "GET", "/metrics", NULL, "", 0, 5000, &r), 0);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "paycb_ingest_requests_total{channel=\"wxpay\","
	                               "outcome=\"stored\"}"));
	/* Every earlier request was answered, so none waits for a worker. */
	assert_non_null(strstr(r.body, "\npaycb_ingest_queued 0\n"));
}

static void
sigterm_drains_and_exits_zero(void **state)
{
	(void)state;
	assert_int_equal(stop_daemon(ingest_pid), 0);
	ingest_pid = 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wxpay_payment_is_stored_published_and_acknowledged),
	    cmocka_unit_test(wxpay_public_key_mode_is_accepted_too),
	    cmocka_unit_test(alipay_payment_with_old_and_new_key),
	    cmocka_unit_test(stripe_payment_with_rotated_secrets),
	    cmocka_unit_test(refunds_of_each_channel_go_to_the_refund_log),
	    cmocka_unit_test(other_stripe_events_are_acknowledged_not_stored),
	    cmocka_unit_test(two_hundred_concurrent_copies_one_row_one_message),
	    cmocka_unit_test(copies_in_flight_are_answered_by_one_insert),
	    cmocka_unit_test(copies_past_the_leaders_time_window_run_alone),
	    cmocka_unit_test(unreachable_broker_still_stores_and_acknowledges_within_budget),
	    cmocka_unit_test(metrics_and_readiness_are_served),
	    cmocka_unit_test(sigterm_drains_and_exits_zero),
	};
	char conf[300], log[300];
	int rc;

	if (harness_setup(&cf, "ingest", NULL) != 0 || chan_keys_new(&K) != 0)
		return 1;
	harness_db(&cf, &db);
	port = httpc_free_port();
	admin_port = httpc_free_port();
	dead_port = httpc_free_port();
	dead_admin_port = httpc_free_port();
	snprintf(conf, sizeof(conf), "%s/paycb.conf", K.dir);
	snprintf(log, sizeof(log), "%s/ingest.log", K.dir);
	write_conf(conf, cf.kafka.brokers, port, admin_port);
	ingest_pid = spawn_ingest(conf, log, admin_port);
	printf("# ingest log: %s\n", log);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (ingest_pid > 0)
		stop_daemon(ingest_pid);
	if (dead_pid > 0)
		stop_daemon(dead_pid);
	chan_keys_free(&K);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
