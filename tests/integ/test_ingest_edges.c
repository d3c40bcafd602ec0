/*
 * test_ingest_edges - the edges of what ingest stores, against the real paycb-ingest, MariaDB
 * and Kafka: Stripe refund objects keep their status (succeeded, failed, canceled) and their
 * own amount, and a refund whose status advances is a new row; notifications are bound to the
 * merchant whose endpoint received them (WeChat Pay mchid, partner sp_mchid and sub_mchid, app ids;
 * Alipay app_id and seller_id; Stripe Connect account and live mode); authentic notifications that
 * cannot be applied are answered with the channel's success, kept once in the unroutable table with
 * one alert, counted, and listed by paycbctl; with the database down they get 503 and are not
 * answered as kept. A stored payment whose delivery report does not come (the broker stopped with
 * SIGSTOP) is answered with success when ingest.publish_budget_ms has passed, not before and not
 * much after, and logged as publish_failed: the row is durable.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "chan.h"
#include "chan_notify.h"
#include "fixtures.h"
#include "harness.h"
#include "httpc.h"

#define MCHID     "1900000001"
#define SP_MCHID  "1230000109"
#define SUB_MCHID "1900000777"
#define WX_APPID  "wx0000000000000001"
#define ALI_APP   "2021000000000001"
#define SELLER    "2088000000000001"

static struct conf cf;
static struct db db;
static struct chan_keys K;
static int port, admin_port, seq;
static pid_t ingest_pid;
static char conf_path[300];

/* write_conf - the test's merchants, on the key files chan_merchants wrote, with db's port. */
static void
write_conf(const char *path, long long db_port, int p, int ap)
{
	char scratch[4096];
	FILE *fp;

	assert_int_equal(chan_merchants(&K, scratch, sizeof(scratch)), 0);
	assert_non_null(fp = fopen(path, "w"));
	fprintf(
	    fp,
	    "log_level = \"debug\";\n"
	    "database = { host = \"%s\"; port = %lld; user = \"%s\"; password_file = \"%s\";"
	    " name = \"%s\"; connect_timeout_s = 1; };\n"
	    "kafka = { brokers = \"%s\"; topic_prefix = \"%s\"; delivery_timeout_ms = 5000; };\n"
	    "ingest = { listen_port = %d; admin_port = %d; connection_timeout_s = 2;"
	    " publish_budget_ms = 1500; };\n"
	    "merchants = (\n"
	    "  { id = \"default\";\n"
	    "    wxpay = { mchid = \"" MCHID "\"; sp_mchid = \"" SP_MCHID "\";\n"
	    "      sub_mchids = [ \"" SUB_MCHID "\" ]; appids = [ \"" WX_APPID "\" ];\n"
	    "      apiv3_key_file = \"%s/apiv3.key\";\n"
	    "      keys = ( { file = \"%s/wx_cert.pem\"; } ); };\n"
	    "    alipay = { app_id = \"" ALI_APP "\"; seller_id = \"" SELLER "\";\n"
	    "      public_key_files = [ \"%s/ali_new.pub\" ]; };\n"
	    "    stripe = { secret_files = [ \"%s/stripe_new\" ];"
	    " connect_accounts = [ \"acct_ours\" ]; };\n"
	    "  },\n"
	    "  { id = \"shop.test-1\"; stripe = { secret_files = [ \"%s/stripe_new\" ];"
	    " test_mode = true; }; }\n"
	    ");\n",
	    cf.db.host, db_port, cf.db.user, cf.db.password_file, cf.db.name, cf.kafka.brokers,
	    cf.kafka.topic_prefix, p, ap, K.dir, K.dir, K.dir, K.dir, K.dir);
	assert_int_equal(fclose(fp), 0);
}

static void
uniq(char *buf, size_t len, const char *prefix)
{
	snprintf(buf, len, "%s%d%04d", prefix, getpid(), ++seq);
}

static long long
rows(const char *fmt, ...)
{
	char clause[1024];
	va_list ap;
	long long v;

	va_start(ap, fmt);
	vsnprintf(clause, sizeof(clause), fmt, ap);
	va_end(ap);
	v = chan_rows(&db, clause);
	assert_true(v >= 0);
	return v;
}

/* post_status - posts n to path on port and returns the status; frees the body. */
static int
post_status(int p, const char *path, struct chan_note *n)
{
	struct httpc_resp r;

	assert_int_equal(chan_post(p, path, n, &r), 0);
	free(n->body);
	n->body = NULL;
	return r.status;
}

/* wx_event_id - the envelope id of a signed WeChat Pay body. */
static void
wx_event_id(const struct chan_note *n, char *id, size_t len)
{
	json_t *env = json_loads(n->body, 0, NULL);

	assert_non_null(env);
	snprintf(id, len, "%s", json_string_value(json_object_get(env, "id")));
	json_decref(env);
}

/* kept - the number of unroutable rows (and of their alerts) for event id with reason. */
static void
assert_kept(const char *channel, const char *event_id, const char *reason)
{
	if (rows("unroutable WHERE channel = '%s' AND event_key = '%s' AND event_id = '%s' AND "
	         "reason = '%s' AND LENGTH(raw_body) > 0 AND body_sha256 = SHA2(raw_body, 256)",
	         channel, event_id, event_id, reason) != 1)
		fail_msg("%s %s: no unroutable row with reason %s", channel, event_id, reason);
	if (rows("alerts WHERE kind = 'unroutable' AND merchant_id = 'default' AND detail LIKE "
	         "'%%channel=%s event=%s %%reason=%s'",
	         channel, event_id, reason) != 1)
		fail_msg("%s %s: not exactly one alert", channel, event_id);
}

/* ---- Stripe refund objects ------------------------------------------------------------- */

static void
stripe_refund_objects_are_stored_with_their_status(void **state)
{
	static const struct {
		const char *type, *status;
		int trade_is_charge, stored;
	} cases[] = {
	    {"refund.created", "succeeded", 0, 1}, {"refund.failed", "failed", 0, 1},
	    {"refund.updated", "canceled", 0, 1},  {"charge.refund.updated", "failed", 1, 1},
	    {"refund.updated", "pending", 0, 0},   {"refund.created", "requires_action", 0, 0},
	};
	char order[64], json[1024], re[64];
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "SR");
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(re, sizeof(re), "re_%s_%zu", order, i);
		snprintf(
		    json, sizeof(json),
		    "{\"id\":\"evt_%s\",\"object\":\"event\",\"type\":\"%s\",\"livemode\":true,"
		    "\"data\":{\"object\":{\"id\":\"%s\",\"object\":\"refund\",\"amount\":250,"
		    "\"currency\":\"usd\",%s\"charge\":\"ch_%s\",\"status\":\"%s\","
		    "\"metadata\":{\"order_id\":\"%s\"}}}}",
		    re, cases[i].type, re,
		    cases[i].trade_is_charge ? "" : "\"payment_intent\":\"pi_sr\",", order,
		    cases[i].status, order);
		assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
		assert_int_equal(post_status(port, "/pay/callback/stripe", &n), 200);
		if (rows("refund_callback_log WHERE refund_no = '%s' AND refund_status = '%s' AND "
		         "amount = 2.50 AND amount_cumulative = 0 AND out_trade_no = '%s' AND "
		         "channel_trade_no = '%s%s' AND event_type = '%s'",
		         re, cases[i].status, order, cases[i].trade_is_charge ? "ch_" : "pi_sr",
		         cases[i].trade_is_charge ? order : "", cases[i].type) != cases[i].stored)
			fail_msg("%s %s: stored %d times, want %d", cases[i].type, cases[i].status,
			         (int)rows("refund_callback_log WHERE refund_no = '%s'", re),
			         cases[i].stored);
	}
	assert_int_equal(rows("refund_callback_log WHERE out_trade_no = '%s'", order), 4);
}

static void
wxpay_failed_refunds_keep_their_status(void **state)
{
	static const char *statuses[] = {"ABNORMAL", "CLOSED", "SUCCESS"};
	char order[64], plain[1024];
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "WR");
	for (int i = 0; i < 3; i++) {
		snprintf(
		    plain, sizeof(plain),
		    "{\"mchid\":\"" MCHID "\",\"out_trade_no\":\"%s\",\"transaction_id\":\"42%s\","
		    "\"out_refund_no\":\"R%s-%d\",\"refund_id\":\"503%s-%d\",\"refund_status\":"
		    "\"%s\",\"amount\":{\"total\":8888,\"refund\":888,\"payer_total\":8888,"
		    "\"payer_refund\":888}}",
		    order, order, order, i, order, i, statuses[i]);
		assert_int_equal(chan_wx_note(&K, &n, K.wx_cert_key, K.wx_serial,
		                              i == 2 ? "REFUND.SUCCESS" : "REFUND.ABNORMAL", plain,
		                              time(NULL)),
		                 0);
		assert_int_equal(post_status(port, "/pay/callback/wxpay", &n), 204);
		assert_int_equal(rows("refund_callback_log WHERE out_trade_no = '%s' AND "
		                      "refund_status = '%s' AND amount = 8.88",
		                      order, statuses[i]),
		                 1);
	}
}

/*
 * The refund log's unique key includes the status (schema 006): the same refund id with a
 * status that advances is a new row, a copy of the same status is a duplicate.
 */
static void
a_refund_whose_status_advances_is_a_new_row(void **state)
{
	static const char *stripe_statuses[] = {"succeeded", "failed", "failed"};
	static const char *wx[][2] = {{"REFUND.ABNORMAL", "ABNORMAL"},
	                              {"REFUND.SUCCESS", "SUCCESS"},
	                              {"REFUND.SUCCESS", "SUCCESS"}};
	char order[64], json[1024], plain[1024];
	struct chan_note n;

	(void)state;
	uniq(order, sizeof(order), "SA");
	for (int i = 0; i < 3; i++) {
		snprintf(json, sizeof(json),
		         "{\"id\":\"evt_%s_%d\",\"object\":\"event\",\"type\":\"refund.updated\","
		         "\"data\":{\"object\":{\"id\":\"re_%s\",\"object\":\"refund\",\"amount\":"
		         "300,\"currency\":\"usd\",\"payment_intent\":\"pi_%s\",\"status\":\"%s\","
		         "\"metadata\":{\"order_id\":\"%s\"}}}}",
		         order, i, order, order, stripe_statuses[i], order);
		assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
		assert_int_equal(post_status(port, "/pay/callback/stripe", &n), 200);
	}
	assert_int_equal(rows("refund_callback_log WHERE refund_no = 're_%s'", order), 2);
	assert_int_equal(
	    rows("refund_callback_log WHERE refund_no = 're_%s' AND refund_status = 'failed'",
	         order),
	    1);
	for (int i = 0; i < 3; i++) {
		snprintf(
		    plain, sizeof(plain),
		    "{\"mchid\":\"" MCHID "\",\"out_trade_no\":\"%s\",\"transaction_id\":\"42%s\","
		    "\"out_refund_no\":\"R%s\",\"refund_id\":\"503%s\",\"refund_status\":\"%s\","
		    "\"amount\":{\"total\":8888,\"refund\":888,\"payer_total\":8888,"
		    "\"payer_refund\":888}}",
		    order, order, order, order, wx[i][1]);
		assert_int_equal(
		    chan_wx_note(&K, &n, K.wx_cert_key, K.wx_serial, wx[i][0], plain, time(NULL)),
		    0);
		assert_int_equal(post_status(port, "/pay/callback/wxpay", &n), 204);
	}
	assert_int_equal(rows("refund_callback_log WHERE refund_no = '503%s'", order), 2);
}

/* ---- merchant binding ------------------------------------------------------------------ */

static void
wxpay_notifications_are_bound_to_the_merchant(void **state)
{
	static const struct {
		const char *ids, *why; /* why: "" = applied */
	} cases[] = {
	    {"\"mchid\":\"" MCHID "\",\"appid\":\"" WX_APPID "\"", ""},
	    {"\"mchid\":\"1999999999\",\"appid\":\"" WX_APPID "\"", "foreign_mchid"},
	    {"\"mchid\":\"" MCHID "\",\"appid\":\"wx9999999999999999\"", "foreign_appid"},
	    {"\"sp_mchid\":\"" SP_MCHID "\",\"sub_mchid\":\"" SUB_MCHID "\",\"sp_appid\":"
	     "\"wx5555555555555555\",\"sub_appid\":\"" WX_APPID "\"",
	     ""},
	    {"\"sp_mchid\":\"" SP_MCHID "\",\"sub_mchid\":\"" MCHID "\",\"sp_appid\":\"" WX_APPID
	     "\"",
	     ""},
	    {"\"sp_mchid\":\"" SP_MCHID "\",\"sub_mchid\":\"1900000888\",\"sub_appid\":\"" WX_APPID
	     "\"",
	     "foreign_sub_mchid"},
	    {"\"sp_mchid\":\"1230000999\",\"sub_mchid\":\"" SUB_MCHID "\",\"sub_appid\":\"" WX_APPID
	     "\"",
	     "foreign_sp_mchid"},
	};
	char order[64], plain[1024], ev[128];
	struct chan_note n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uniq(order, sizeof(order), "WB");
		snprintf(plain, sizeof(plain),
		         "{%s,\"out_trade_no\":\"%s\",\"transaction_id\":\"42%s\",\"trade_type\":"
		         "\"JSAPI\",\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":100,"
		         "\"currency\":\"CNY\"}}",
		         cases[i].ids, order, order);
		assert_int_equal(chan_wx_note(&K, &n, K.wx_cert_key, K.wx_serial,
		                              "TRANSACTION.SUCCESS", plain, time(NULL)),
		                 0);
		wx_event_id(&n, ev, sizeof(ev));
		assert_int_equal(post_status(port, "/pay/callback/wxpay", &n), 204);
		assert_int_equal(rows("pay_callback_log WHERE out_trade_no = '%s'", order),
		                 cases[i].why[0] == '\0');
		if (cases[i].why[0] != '\0')
			assert_kept("wxpay", ev, cases[i].why);
		else
			assert_int_equal(rows("unroutable WHERE event_id = '%s'", ev), 0);
	}
}

static void
alipay_notifications_are_bound_to_the_app_and_seller(void **state)
{
	static const struct {
		const char *app, *seller, *why;
	} cases[] = {
	    {ALI_APP, SELLER, ""},
	    {ALI_APP, "2088000000000999", "foreign_seller_id"},
	    {ALI_APP, NULL, "foreign_seller_id"},
	    {"2021000000000999", SELLER, "foreign_app_id"},
	};
	char order[64], nid[64];
	struct chan_note n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *k[] = {"notify_type",  "notify_id",    "app_id",
		                   "trade_no",     "out_trade_no", "trade_status",
		                   "total_amount", "charset",      "seller_id"};
		const char *v[9];

		uniq(order, sizeof(order), "AB");
		snprintf(nid, sizeof(nid), "nid-%s", order);
		v[0] = "trade_status_sync";
		v[1] = nid;
		v[2] = cases[i].app;
		v[3] = order;
		v[4] = order;
		v[5] = "TRADE_SUCCESS";
		v[6] = "1.00";
		v[7] = "utf-8";
		v[8] = cases[i].seller;
		assert_int_equal(chan_ali_note(&n, K.ali_key, k, v, cases[i].seller ? 9 : 8), 0);
		assert_int_equal(post_status(port, "/pay/callback/alipay", &n), 200);
		assert_int_equal(rows("pay_callback_log WHERE out_trade_no = '%s'", order),
		                 cases[i].why[0] == '\0');
		if (cases[i].why[0] != '\0')
			assert_kept("alipay", nid, cases[i].why);
	}
}

static void
stripe_connect_and_test_mode_events_are_not_applied(void **state)
{
	static const struct {
		const char *merchant, *extra, *why;
	} cases[] = {
	    {"", ",\"livemode\":true", ""},
	    {"", "", ""}, /* no livemode: live */
	    {"", ",\"livemode\":true,\"account\":\"acct_ours\"", ""},
	    /* A connected account's own PaymentIntent naming our order never pays it. */
	    {"", ",\"livemode\":true,\"account\":\"acct_evil\"", "foreign_account"},
	    {"", ",\"livemode\":false", "test_mode"},
	    {"/shop.test-1", ",\"livemode\":false", ""},
	};
	char order[64], json[1024], path[64], ev[64];
	struct chan_note n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uniq(order, sizeof(order), "SB");
		snprintf(ev, sizeof(ev), "evt_%s", order);
		snprintf(
		    json, sizeof(json),
		    "{\"id\":\"%s\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\""
		    "%s,\"data\":{\"object\":{\"id\":\"pi_%s\",\"object\":\"payment_intent\","
		    "\"amount\":500,\"amount_received\":500,\"currency\":\"usd\",\"metadata\":{"
		    "\"order_id\":\"%s\"},\"status\":\"succeeded\"}}}",
		    ev, cases[i].extra, order, order);
		snprintf(path, sizeof(path), "/pay/callback/stripe%s", cases[i].merchant);
		assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
		assert_int_equal(post_status(port, path, &n), 200);
		assert_int_equal(rows("pay_callback_log WHERE out_trade_no = '%s'", order),
		                 cases[i].why[0] == '\0');
		if (cases[i].why[0] != '\0')
			assert_kept("stripe", ev, cases[i].why);
	}
	assert_int_equal(rows("pay_callback_log WHERE merchant_id = 'shop.test-1'"), 1);
}

/* ---- unroutable ------------------------------------------------------------------------ */

static void
unroutable_is_kept_once_alerted_once_and_counted(void **state)
{
	char order[64], json[1024], ev[64], inv[64];
	struct httpc_resp r;
	struct chan_note n;

	(void)state;
	/* A refund made in the Dashboard: authentic, empty metadata. Three deliveries. */
	uniq(order, sizeof(order), "UD");
	snprintf(ev, sizeof(ev), "evt_%s", order);
	snprintf(
	    json, sizeof(json),
	    "{\"id\":\"%s\",\"object\":\"event\",\"type\":\"refund.created\",\"livemode\":true,"
	    "\"data\":{\"object\":{\"id\":\"re_%s\",\"object\":\"refund\",\"amount\":100,"
	    "\"currency\":\"usd\",\"payment_intent\":\"pi_%s\",\"status\":\"succeeded\","
	    "\"metadata\":{}}}}",
	    ev, order, order);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL) - i), 0);
		assert_int_equal(post_status(port, "/pay/callback/stripe", &n), 200);
	}
	assert_kept("stripe", ev, "no_order");
	assert_int_equal(rows("refund_callback_log WHERE channel_trade_no = 'pi_%s'", order), 0);
	/* A PaymentIntent of an invoice has no order number either. */
	snprintf(inv, sizeof(inv), "evt_inv_%s", order);
	snprintf(json, sizeof(json),
	         "{\"id\":\"%s\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\","
	         "\"data\":{\"object\":{\"id\":\"pi_inv_%s\",\"object\":\"payment_intent\","
	         "\"amount\":900,\"amount_received\":900,\"currency\":\"usd\",\"invoice\":"
	         "\"in_1\",\"metadata\":{},\"status\":\"succeeded\"}}}",
	         inv, order);
	assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
	assert_int_equal(post_status(port, "/pay/callback/stripe", &n), 200);
	assert_kept("stripe", inv, "no_order");
	assert_int_equal(httpc_request(admin_port, "GET", "/metrics", NULL, "", 0, 5000, &r), 0);
	assert_int_equal(r.status, 200);
	{
		const char *m = strstr(r.body, "paycb_ingest_requests_total{channel=\"stripe\","
		                               "outcome=\"unroutable\"} ");

		assert_non_null(m);
		assert_true(atoll(strchr(m, '}') + 2) >= 4);
	}
}

static void
paycbctl_lists_unroutable_without_bodies(void **state)
{
	char cmd[1024], line[1024];
	int found = 0, bodies = 0;
	FILE *p;

	(void)state;
	snprintf(cmd, sizeof(cmd), "bin/paycbctl -c %s unroutable --since 1h --limit 100 2>&1",
	         conf_path);
	assert_non_null(p = popen(cmd, "r"));
	while (fgets(line, sizeof(line), p) != NULL) {
		printf("# %s", line);
		found += strstr(line, "no_order") != NULL &&
		         strstr(line, "refund.created") != NULL && strstr(line, "stripe") != NULL;
		bodies += strstr(line, "metadata") != NULL || strstr(line, "ciphertext") != NULL;
	}
	assert_int_equal(WEXITSTATUS(pclose(p)), 0);
	assert_int_equal(found, 1);
	assert_int_equal(bodies, 0);
}

/* ---- The answer of a stored payment waits for its report, up to the budget ---------------- */

static int
publish_failed_logged(void *arg)
{
	return harness_file_count(arg, "event=publish_failed") >= 1;
}

static void
stored_payment_is_answered_at_the_budget_without_a_report(void **state)
{
	char order[64], pi[64], log[320], needle[128];
	struct chan_note n;
	struct httpc_resp r;
	long long t0, took;
	int pid = fx_broker_pid();

	(void)state;
	assert_true(pid > 0);
	uniq(order, sizeof(order), "PB");
	snprintf(pi, sizeof(pi), "pi_%s", order);
	assert_int_equal(chan_stripe_pay(&n, K.stripe_new, order, pi, 1234, time(NULL)), 0);
	printf("# stopping the broker (pid %d) with SIGSTOP\n", pid);
	assert_int_equal(fx_broker_stop(pid), 0);
	t0 = harness_now_ms();
	assert_int_equal(chan_post(port, "/pay/callback/stripe", &n, &r), 0);
	took = harness_now_ms() - t0;
	fx_broker_resume(NULL);
	free(n.body);
	printf("# answered %d after %lld ms (publish_budget_ms 1500)\n", r.status, took);
	assert_int_equal(r.status, 200);
	assert_true(took >= 1500);
	assert_true(took < 2500);
	assert_int_equal(
	    rows("pay_callback_log WHERE channel = 'stripe' AND out_trade_no = '%s'", order), 1);
	snprintf(log, sizeof(log), "%s/ingest.log", K.dir);
	snprintf(needle, sizeof(needle), "order=%s ", order);
	assert_int_equal(harness_file_count(log, needle), 1);
	/* The line is written just after the answer is handed to the connection. */
	assert_int_equal(harness_wait_until(publish_failed_logged, log, 5000), 0);
}

static void
unroutable_with_the_database_down_gets_503(void **state)
{
	char conf[320], log[320], json[512], order[64];
	int p = httpc_free_port(), ap = httpc_free_port(), dead_db = httpc_free_port();
	struct httpc_resp r;
	struct chan_note n;
	pid_t pid;

	(void)state;
	snprintf(conf, sizeof(conf), "%s/nodb.conf", K.dir);
	snprintf(log, sizeof(log), "%s/nodb.log", K.dir);
	write_conf(conf, dead_db, p, ap);
	pid = chan_spawn_ingest(conf, log, ap);
	if (pid < 0)
		fail_msg("paycb-ingest without a database did not start; see %s", log);
	uniq(order, sizeof(order), "UX");
	snprintf(json, sizeof(json),
	         "{\"id\":\"evt_%s\",\"object\":\"event\",\"type\":\"refund.created\","
	         "\"data\":{\"object\":{\"id\":\"re_%s\",\"amount\":100,\"currency\":\"usd\","
	         "\"status\":\"succeeded\",\"metadata\":{}}}}",
	         order, order);
	assert_int_equal(chan_stripe_note(&n, K.stripe_new, json, time(NULL)), 0);
	assert_int_equal(chan_post(p, "/pay/callback/stripe", &n, &r), 0);
	free(n.body);
	assert_int_equal(r.status, 503);
	assert_int_equal(chan_stop(pid), 0);
	assert_int_equal(rows("unroutable WHERE event_id = 'evt_%s'", order), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stripe_refund_objects_are_stored_with_their_status),
	    cmocka_unit_test(wxpay_failed_refunds_keep_their_status),
	    cmocka_unit_test(a_refund_whose_status_advances_is_a_new_row),
	    cmocka_unit_test(wxpay_notifications_are_bound_to_the_merchant),
	    cmocka_unit_test(alipay_notifications_are_bound_to_the_app_and_seller),
	    cmocka_unit_test(stripe_connect_and_test_mode_events_are_not_applied),
	    cmocka_unit_test(unroutable_is_kept_once_alerted_once_and_counted),
	    cmocka_unit_test(paycbctl_lists_unroutable_without_bodies),
	    cmocka_unit_test(unroutable_with_the_database_down_gets_503),
	    cmocka_unit_test_teardown(stored_payment_is_answered_at_the_budget_without_a_report,
	                              fx_broker_resume),
	};
	char log[300];
	int rc;

	if (harness_setup(&cf, "edges", NULL) != 0 || chan_keys_new(&K) != 0)
		return 1;
	harness_db(&cf, &db);
	port = httpc_free_port();
	admin_port = httpc_free_port();
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", K.dir);
	snprintf(log, sizeof(log), "%s/ingest.log", K.dir);
	write_conf(conf_path, cf.db.port, port, admin_port);
	if ((ingest_pid = chan_spawn_ingest(conf_path, log, admin_port)) < 0) {
		printf("not ok 1 - paycb-ingest did not become healthy; see %s\n", log);
		return 1;
	}
	printf("# ingest log: %s\n", log);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	if (ingest_pid > 0 && chan_stop(ingest_pid) != 0)
		rc = 1;
	chan_keys_free(&K);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
