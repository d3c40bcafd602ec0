/*
 * test_reconciler - the real bin/paycb-reconciler against the simulator's channel API
 * (`paycb-sim api`, WeChat Pay APIv3 on loopback HTTP, signatures checked both ways) and the
 * real MariaDB. The simulator's ledger is the judge: for every refund request it must hold
 * exactly one refund of the request's amount, and exactly one refund POST (a result that may
 * have taken effect is resolved by a query, never by sending again).
 *
 *   - faults: the refund applied and the connection dropped before the answer, 5xx, 429,
 *     a slow answer (timeout after sending), a forged answer: every request refunded once;
 *   - SIGKILL: the reconciler killed while a refund is in flight (applied, answer pending),
 *     and again at every new send mark over a batch: each refunded once, posted once;
 *   - the FAILED path: a final refusal (403 NOT_ENOUGH) makes the row FAILED with a
 *     refund_failed alert and nothing refunded;
 *   - approval: with reconciler.refund_approval on, an unapproved request is not sent until
 *     `paycbctl refund approve` (audited), then refunded once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chan.h"
#include "chan_notify.h"
#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "sim.h"

#define WAIT_MS 60000

static struct conf cf;
static struct db tdb;
static char dir[512], conf_path[640], appr_path[640], keys[600];
static int sim_port, sim_pid = -1, ingest_port, ingest_admin;
static int seq;
/* Every process a test started, killed at teardown when a failed assertion left it. */
static int kids[64], nkids;

static int
kid(int pid)
{
	if (pid > 0 && nkids < 64)
		kids[nkids++] = pid;
	return pid;
}

/* spawn - starts argv with stdout and stderr appended to log. */
static int
spawn(char *const argv[], const char *log)
{
	pid_t pid;

	fflush(stdout);
	if ((pid = fork()) == 0) {
		FILE *fp = freopen(log, "a", stdout);

		if (fp == NULL || dup2(fileno(stdout), STDERR_FILENO) < 0)
			_exit(127);
		execv(argv[0], argv);
		_exit(127);
	}
	return (int)pid;
}

static int
sim_get(const char *path, json_t **out)
{
	static struct httpc_resp r;

	*out = NULL;
	if (httpc_request(sim_port, "GET", path, NULL, NULL, 0, 5000, &r) != 0 || r.status != 200)
		return -1;
	*out = json_loadb(r.body, r.body_len, 0, NULL);
	return *out != NULL ? 0 : -1;
}

static int
sim_post(const char *path, const char *form)
{
	static struct httpc_resp r;

	return httpc_request(sim_port, "POST", path,
	                     "Content-Type: application/x-www-form-urlencoded\r\n", form,
	                     strlen(form), 5000, &r) == 0 &&
	               r.status == 200
	           ? 0
	           : -1;
}

static int
sim_up(void *arg)
{
	json_t *j;

	(void)arg;
	if (sim_get("/_sim/stats", &j) != 0)
		return 0;
	json_decref(j);
	return 1;
}

static long long
stat_of(const char *k)
{
	json_t *j;
	long long v;

	if (sim_get("/_sim/stats", &j) != 0)
		return -1;
	v = json_integer_value(json_object_get(j, k));
	json_decref(j);
	return v;
}

/* ledger - the simulator's refunded amount, refund count and refund POSTs of an order. */
static int
ledger(const char *order, long long *refunded, long long *nrefunds, long long *posts)
{
	char path[300];
	json_t *j;

	snprintf(path, sizeof(path), "/_sim/ledger?merchant=default&out_trade_no=%s", order);
	if (sim_get(path, &j) != 0)
		return -1;
	*refunded = json_integer_value(json_object_get(j, "refunded"));
	*nrefunds = (long long)json_array_size(json_object_get(j, "refunds"));
	*posts = json_integer_value(json_object_get(j, "refund_posts"));
	json_decref(j);
	return 0;
}

/* request - a paid order at the channel and its refund request (what the processor writes
 * for a payment to give back); returns the request id. */
static long long
request(const char *tag, long long cents, char *order, size_t olen)
{
	char form[300], amount[32], txn[40];
	long long id;

	snprintf(order, olen, "%s-%d-%d", tag, (int)getpid(), ++seq);
	snprintf(txn, sizeof(txn), "4200%d%06d", (int)getpid() % 10000, seq);
	snprintf(amount, sizeof(amount), "%lld.%02lld", cents / 100, cents % 100);
	snprintf(form, sizeof(form),
	         "merchant=default&out_trade_no=%s&amount=%lld&currency=CNY&state=PAID&"
	         "transaction_id=%s",
	         order, cents, txn);
	if (sim_post("/_sim/order", form) != 0)
		return -1;
	{
		struct db_in in[4] = {DBI_STR(txn), DBI_STR(order), DBI_STR(amount), DBI_STR(tag)};
		unsigned long long rid = 0;

		if (db_exec(
		        &tdb,
		        "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
		        "out_trade_no, amount, currency, reason) VALUES ('default', 'wxpay', ?, ?, "
		        "?, 'CNY', ?)",
		        in, 4, NULL, &rid) != DB_OK)
			return -1;
		id = (long long)rid;
	}
	return id;
}

static long long
q_i64(const char *sql, long long id)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_query_i64(&tdb, sql, in, 1);
}

static int
wait_status(long long id, const char *status)
{
	struct db_in in[2] = {DBI_I64(id), DBI_STR(status)};

	return harness_wait_i64(&tdb,
	                        "SELECT COUNT(*) FROM refund_requests WHERE id = ? AND status = ?",
	                        in, 2, 1, WAIT_MS);
}

/*
 * assert_refunded_once - the ledger holds exactly one refund of cents for the order; with
 * one_post, the refund was also POSTed exactly once (every unknown result was resolved by a
 * query). After a SIGKILL a request still in a socket when the query came may legitimately
 * arrive twice; its key makes the second a no-op, which the refund count shows.
 */
static void
assert_refunded(const char *order, long long cents, int one_post)
{
	long long refunded = -1, n = -1, posts = -1;

	assert_int_equal(ledger(order, &refunded, &n, &posts), 0);
	if (refunded != cents || n != 1 || posts != 1)
		print_message("# %s: refunded %lld of %lld in %lld refunds, %lld posts\n", order,
		              refunded, cents, n, posts);
	assert_int_equal(refunded, cents);
	assert_int_equal(n, 1);
	if (one_post)
		assert_int_equal(posts, 1);
}

static int
reconciler_start(const char *conf, const char *name)
{
	char log[700];
	char *argv[] = {"bin/paycb-reconciler", "-c", (char *)conf, NULL};
	long long seen, end = harness_now_ms() + 20000;
	int pid;

	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	seen = harness_file_count(log, "event=ready");
	if ((pid = kid(spawn(argv, log))) <= 0)
		return -1;
	/* Ready means its signal handlers are in place: a SIGTERM then drains. */
	while (harness_file_count(log, "event=ready") == seen && harness_now_ms() < end)
		usleep(5 * 1000);
	return pid;
}

static void
refunds_survive_channel_faults(void **state)
{
	const char *faults[] = {"drop=1", "e5xx=2", "e429=1", "slow=1&slow_ms=2500", "forge=1"};
	char orders[5][64];
	long long ids[5], cents[5];
	int pid;

	(void)state;
	assert_true((pid = reconciler_start(conf_path, "recon-faults")) > 0);
	/* One fault at a time, on the refund the reconciler sends next. */
	for (int i = 0; i < 5; i++) {
		cents[i] = 1000 + 111 * i;
		assert_int_equal(sim_post("/_sim/fault", faults[i]), 0);
		assert_true((ids[i] = request("flt", cents[i], orders[i], sizeof(orders[i]))) > 0);
		assert_int_equal(wait_status(ids[i], "DONE"), 0);
	}
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	for (int i = 0; i < 5; i++)
		assert_refunded(orders[i], cents[i], 1);
	/* Each was settled after a failed attempt: by a query, not by an answer that never
	 * came, and never by a second refund. */
	assert_int_equal(
	    q_i64("SELECT COUNT(*) FROM refund_requests WHERE id >= ? AND attempts > 0", ids[0]),
	    5);
	assert_int_equal(stat_of("bad_sig"), 0);
}

static void
refunds_survive_sigkill(void **state)
{
	char orders[6][64], order_slow[64];
	long long ids[6], id_slow, sent = 0;
	int pid, kills = 0;

	(void)state;
	/* 1. Killed while the refund is in flight: applied at the channel, answer not back. */
	assert_true((id_slow = request("kil", 4321, order_slow, sizeof(order_slow))) > 0);
	assert_int_equal(sim_post("/_sim/fault", "slow=1&slow_ms=8000"), 0);
	{
		long long applied = stat_of("refunds_applied");
		struct db_in in[1] = {DBI_I64(id_slow)};

		assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
		assert_int_equal(
		    harness_wait_i64(&tdb,
		                     "SELECT COUNT(*) FROM refund_requests WHERE id = ? "
		                     "AND sent_at IS NOT NULL",
		                     in, 1, 1, WAIT_MS),
		    0);
		for (long long end = harness_now_ms() + WAIT_MS;
		     stat_of("refunds_applied") == applied && harness_now_ms() < end;)
			usleep(20 * 1000);
		assert_int_equal(stat_of("refunds_applied"), applied + 1);
		assert_int_equal(harness_stop(pid, SIGKILL, 10000), 128 + SIGKILL);
	}
	assert_int_equal(sim_post("/_sim/fault", "slow=0&slow_ms=2500"), 0);
	assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
	assert_int_equal(wait_status(id_slow, "DONE"), 0);
	assert_int_equal(harness_stop(pid, SIGKILL, 10000), 128 + SIGKILL);
	assert_refunded(order_slow, 4321, 1);

	/* 2. Killed at every step over a batch: after each claim's send mark, each SUBMITTED,
	 * each DONE, whichever comes next; restarted each time. */
	for (int i = 0; i < 6; i++)
		assert_true((ids[i] = request("kil", 2000 + i, orders[i], sizeof(orders[i]))) > 0);
	for (int round = 0; round < 40; round++) {
		struct db_in in[1] = {DBI_I64(ids[0])};
		static const char progress_sql[] = "SELECT SUM((sent_at IS NOT NULL) + (status IN "
		                                   "('SUBMITTED', 'DONE')) + (status = "
		                                   "'DONE')) FROM refund_requests WHERE id >= ?";
		long long now = sent;

		if (sent == 18)
			break;
		assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
		for (long long end = harness_now_ms() + WAIT_MS;
		     (now = harness_query_i64(&tdb, progress_sql, in, 1)) <= sent &&
		     harness_now_ms() < end;)
			usleep(1000);
		assert_true(now > sent);
		sent = now;
		assert_int_equal(harness_stop(pid, SIGKILL, 10000), 128 + SIGKILL);
		kills++;
	}
	print_message("# %d reconcilers killed at the next step of the batch\n", kills);
	assert_true(kills >= 6);
	assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
	for (int i = 0; i < 6; i++)
		assert_int_equal(wait_status(ids[i], "DONE"), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	for (int i = 0; i < 6; i++)
		assert_refunded(orders[i], 2000 + i, 0);
}

static void
final_refusal_fails_with_alert(void **state)
{
	char order[64];
	long long id, refunded = -1, n = -1, posts = -1;
	int pid;

	(void)state;
	assert_true((id = request("fail", 777, order, sizeof(order))) > 0);
	assert_int_equal(sim_post("/_sim/fault", "refund_final=1"), 0);
	assert_true((pid = reconciler_start(conf_path, "recon-fail")) > 0);
	assert_int_equal(wait_status(id, "FAILED"), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM alerts a JOIN refund_requests r ON "
	                       "a.out_trade_no = r.out_trade_no WHERE r.id = ? AND a.kind = "
	                       "'refund_failed'",
	                       id),
	                 1);
	assert_int_equal(ledger(order, &refunded, &n, &posts), 0);
	assert_int_equal(refunded, 0);
	assert_int_equal(n, 0);
}

static void
approval_first(void **state)
{
	char order[64], order2[64], cmd[1200];
	long long id, id2;
	int pid;

	(void)state;
	assert_true((id = request("apr", 555, order, sizeof(order))) > 0);
	assert_true((id2 = request("apr", 666, order2, sizeof(order2))) > 0);
	assert_true((pid = reconciler_start(appr_path, "recon-approve")) > 0);
	/* The second is approved first and refunded; the first, unapproved, is not touched. */
	snprintf(cmd, sizeof(cmd),
	         "bin/paycbctl -c %s --actor test refund approve %lld >>%s/paycbctl.log 2>&1",
	         appr_path, id2, dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(wait_status(id2, "DONE"), 0);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM refund_requests WHERE id = ? AND status = "
	                       "'REQUESTED' AND sent_at IS NULL AND out_refund_no IS NULL",
	                       id),
	                 1);
	snprintf(cmd, sizeof(cmd),
	         "bin/paycbctl -c %s --actor test refund approve %lld >>%s/paycbctl.log 2>&1",
	         appr_path, id, dir);
	assert_int_equal(system(cmd), 0);
	assert_int_equal(wait_status(id, "DONE"), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_refunded(order, 555, 1);
	assert_refunded(order2, 666, 1);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM audit_log WHERE action = 'refund_approve' AND "
	                       "target = CONCAT('refund_request:', ?)",
	                       id),
	                 1);
}

/* pending - a PENDING order in paycb and, at the channel, the same order paid (no
 * notification is ever sent for it). */
static void
pending_paid_at_channel(const char *tag, long long cents, char *order, size_t olen, char *txn,
                        size_t tlen)
{
	char form[300], amount[32];

	snprintf(order, olen, "%s-%d-%d", tag, (int)getpid(), ++seq);
	snprintf(txn, tlen, "4300%d%06d", (int)getpid() % 10000, seq);
	snprintf(amount, sizeof(amount), "%lld.%02lld", cents / 100, cents % 100);
	snprintf(form, sizeof(form),
	         "merchant=default&out_trade_no=%s&amount=%lld&currency=CNY&state=PAID&"
	         "transaction_id=%s",
	         order, cents, txn);
	assert_int_equal(sim_post("/_sim/order", form), 0);
	assert_int_equal(fx_order(&tdb, "default", order, amount, "CNY", "PENDING"), 0);
}

static long long
rows_of(const char *sql, const char *order)
{
	struct db_in in[1] = {DBI_STR(order)};

	return harness_query_i64(&tdb, sql, in, 1);
}

static int
wait_order(const char *order, const char *status)
{
	struct db_in in[2] = {DBI_STR(order), DBI_STR(status)};

	return harness_wait_i64(&tdb,
	                        "SELECT COUNT(*) FROM orders WHERE merchant_id = 'default' AND "
	                        "out_trade_no = ? AND status = ?",
	                        in, 2, 1, WAIT_MS);
}

/* late_notification - the real TRANSACTION.SUCCESS notification, signed as WeChat Pay signs
 * it with the simulator's platform key, posted to ingest; returns the HTTP status. */
static int
late_notification(const char *order, const char *txn, long long cents)
{
	struct conf lc;
	struct cfg_errors errs;
	struct sim_merchant *m = NULL;
	struct chan_note n = {0};
	struct httpc_resp *r = calloc(1, sizeof(*r));
	char err[256], plain[1024], tsh[24], nonce[40], *sig = NULL;
	int nm = 0, status = -1;

	if (r == NULL || conf_load(conf_path, PROC_SIM, &lc, &errs) != 0 ||
	    sim_merchants_load(&lc, keys, &m, &nm, err, sizeof(err)) != 0)
		goto done;
	snprintf(
	    plain, sizeof(plain),
	    "{\"mchid\":\"%s\",\"appid\":\"wx0000000000000001\",\"out_trade_no\":\"%s\","
	    "\"transaction_id\":\"%s\",\"trade_type\":\"NATIVE\",\"trade_state\":\"SUCCESS\","
	    "\"trade_state_desc\":\"ok\",\"bank_type\":\"OTHERS\",\"success_time\":"
	    "\"2026-12-02T10:34:56+08:00\",\"payer\":{\"openid\":\"o1\"},\"amount\":{\"total\":"
	    "%lld,\"payer_total\":%lld,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}",
	    m[0].mchid, order, txn, cents, cents);
	if (wx_sign_notify(m[0].wx_cert_key, m[0].wx_serial, m[0].apiv3, "TRANSACTION.SUCCESS",
	                   plain, time(NULL), &n.body, tsh, nonce, &sig) != 0)
		goto done;
	n.len = strlen(n.body);
	snprintf(n.headers, sizeof(n.headers),
	         "Content-Type: application/json\r\nWechatpay-Timestamp: %s\r\n"
	         "Wechatpay-Nonce: %s\r\nWechatpay-Signature: %s\r\nWechatpay-Serial: %s\r\n",
	         tsh, nonce, sig, m[0].wx_serial);
	if (chan_post(ingest_port, "/pay/callback/wxpay/default", &n, r) == 0)
		status = r->status;
done:
	free(sig);
	free(n.body);
	free(r);
	if (m != NULL)
		sim_merchants_free(m, nm);
	conf_free(&lc);
	return status;
}

static void
lost_notification_recovered_by_query(void **state)
{
	char order[64], txn[40], plog[700], ilog[700];
	int pid, ppid, ipid;

	(void)state;
	pending_paid_at_channel("lost", 1234, order, sizeof(order), txn, sizeof(txn));
	assert_true((ppid = kid(fx_processor_start(&cf, "recon-proc", plog, sizeof(plog)))) > 0);
	assert_true((pid = reconciler_start(conf_path, "recon-query")) > 0);
	assert_int_equal(wait_order(order, "PAID"), 0);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ? AND "
	                         "source = 'query' AND event_type = 'query' AND status = 1 AND "
	                         "LOCATE(channel_trade_no, raw_body) > 0",
	                         order),
	                 1);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM alerts WHERE out_trade_no = ? AND kind = "
	                         "'notification_lost'",
	                         order),
	                 1);
	/* The real notification, days late: ingest acknowledges it as a duplicate. */
	snprintf(ilog, sizeof(ilog), "%s/ingest.log", dir);
	assert_true((ipid = kid(chan_spawn_ingest(conf_path, ilog, ingest_admin))) > 0);
	/* WeChat Pay's success answer: 200 or 204 without a body. */
	{
		int st = late_notification(order, txn, 1234);

		assert_true(st == 200 || st == 204);
	}
	assert_int_equal(chan_stop(ipid), 0);
	assert_int_equal(
	    rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ?", order), 1);
	assert_true(harness_file_count(ilog, "event=duplicate") >= 1);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                         "event_type = 'order.paid.shipment'",
	                         order),
	                 1);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_int_equal(harness_stop(ppid, SIGTERM, 30000), 0);
}

static void
forged_query_answer_pays_nothing(void **state)
{
	char order[64], txn[40], log[700];
	long long forged0;
	int pid;

	(void)state;
	snprintf(log, sizeof(log), "%s/recon-forged.log", dir);
	forged0 = harness_file_count(log, "outcome=forged");
	assert_int_equal(sim_post("/_sim/fault", "forge=1000"), 0);
	pending_paid_at_channel("forg", 999, order, sizeof(order), txn, sizeof(txn));
	assert_true((pid = reconciler_start(conf_path, "recon-forged")) > 0);
	/* Two forged answers, each refused, and nothing reserved for them. */
	for (long long end = harness_now_ms() + WAIT_MS;
	     harness_file_count(log, "outcome=forged") < forged0 + 2 && harness_now_ms() < end;)
		usleep(20 * 1000);
	assert_true(harness_file_count(log, "outcome=forged") >= forged0 + 2);
	assert_int_equal(
	    rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ?", order), 0);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND status = "
	                         "'PENDING' AND recon_step = 0",
	                         order),
	                 1);
	/* Authentic answers again: the same order is recovered. */
	assert_int_equal(sim_post("/_sim/fault", "forge=0"), 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                  "out_trade_no = ? AND source = 'query'",
	                                  (struct db_in[]){DBI_STR(order)}, 1, 1, WAIT_MS),
	                 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
}

static void
closed_order_closed_at_channel(void **state)
{
	char order[64], form[300], cmd[1200], path[300];
	json_t *j = NULL;
	int pid;

	(void)state;
	snprintf(order, sizeof(order), "cls-%d-%d", (int)getpid(), ++seq);
	snprintf(form, sizeof(form),
	         "merchant=default&out_trade_no=%s&amount=500&currency=CNY&state=NOTPAY", order);
	assert_int_equal(sim_post("/_sim/order", form), 0);
	assert_int_equal(fx_order(&tdb, "default", order, "5.00", "CNY", "PENDING"), 0);
	snprintf(cmd, sizeof(cmd),
	         "bin/paycbctl -c %s --actor test order close default %s >>%s/paycbctl.log 2>&1",
	         conf_path, order, dir);
	assert_int_equal(system(cmd), 0);
	assert_true((pid = reconciler_start(conf_path, "recon-close")) > 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND "
	                                  "status = 'CLOSED' AND channel_closed_at IS NOT NULL",
	                                  (struct db_in[]){DBI_STR(order)}, 1, 1, WAIT_MS),
	                 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	snprintf(path, sizeof(path), "/_sim/ledger?merchant=default&out_trade_no=%s", order);
	assert_int_equal(sim_get(path, &j), 0);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "CLOSED");
	assert_int_equal(json_integer_value(json_object_get(j, "closes")), 1);
	json_decref(j);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM audit_log WHERE action = 'order_close' AND "
	                         "target = CONCAT('order:default|', ?)",
	                         order),
	                 1);
}

static int
setup(void **state)
{
	struct sim_mfiles mf;
	char base[640], err[512], log[640], port[16], iport[64], iadmin[64];
	char *sets[12];
	int nsets = 0;

	(void)state;
	if (harness_setup(&cf, "recon", NULL) != 0)
		return -1;
	harness_db(&cf, &tdb);
	{
		char group[128];

		snprintf(group, sizeof(group), "%s.processor", cf.kafka.topic_prefix);
		harness_set(&cf.kafka.group_id, group);
	}
	snprintf(dir, sizeof(dir), "%s/test-logs/%s-recon", fx_dir(), cf.kafka.topic_prefix);
	mkdir(dir, 0700);
	snprintf(keys, sizeof(keys), "%s/keys", dir);
	snprintf(base, sizeof(base), "%s/base.conf", dir);
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", dir);
	snprintf(appr_path, sizeof(appr_path), "%s/approve.conf", dir);
	sim_port = httpc_free_port();
	if (sim_keys_make(keys, "default", 0, &mf, err, sizeof(err)) != 0) {
		print_message("# %s\n", err);
		return -1;
	}
	snprintf(mf.wx_api_base, sizeof(mf.wx_api_base), "http://127.0.0.1:%d/wx", sim_port);
	sets[nsets++] = "reconciler.allow_http=true";
	sets[nsets++] = "reconciler.sweep_interval_s=1";
	sets[nsets++] = "reconciler.refund_ladder_s=[1, 1, 2]";
	sets[nsets++] = "reconciler.admin_port=0";
	sets[nsets++] = "reconciler.total_timeout_ms=1000";
	sets[nsets++] = "reconciler.lease_s=2";
	sets[nsets++] = "reconciler.query_steps_s=[1, 600]";
	ingest_port = httpc_free_port();
	ingest_admin = httpc_free_port();
	snprintf(iport, sizeof(iport), "ingest.listen_port=%d", ingest_port);
	snprintf(iadmin, sizeof(iadmin), "ingest.admin_port=%d", ingest_admin);
	sets[nsets++] = iport;
	sets[nsets++] = iadmin;
	if (harness_write_conf(&cf, base, NULL) != 0 ||
	    sim_conf_write(base, conf_path, &mf, 1, sets, nsets, err, sizeof(err)) != 0) {
		print_message("# %s\n", err);
		return -1;
	}
	sets[nsets++] = "reconciler.refund_approval=true";
	if (sim_conf_write(base, appr_path, &mf, 1, sets, nsets, err, sizeof(err)) != 0) {
		print_message("# %s\n", err);
		return -1;
	}
	snprintf(log, sizeof(log), "%s/sim-api.log", dir);
	snprintf(port, sizeof(port), "%d", sim_port);
	{
		char *argv[] = {"bin/paycb-sim", "api", "-c", conf_path, "--keys", keys,
		                "--port",        port,  NULL};

		sim_pid = spawn(argv, log);
	}
	if (sim_pid <= 0 || harness_wait_until(sim_up, NULL, 20000) != 0) {
		print_message("# the simulator's API did not come up (%s)\n", log);
		return -1;
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (int i = 0; i < nkids; i++)
		if (kill((pid_t)kids[i], 0) == 0)
			harness_stop(kids[i], SIGKILL, 10000);
	if (sim_pid > 0)
		harness_stop(sim_pid, SIGTERM, 10000);
	db_close(&tdb);
	harness_teardown(&cf);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(refunds_survive_channel_faults),
	    cmocka_unit_test(refunds_survive_sigkill),
	    cmocka_unit_test(final_refusal_fails_with_alert),
	    cmocka_unit_test(approval_first),
	    cmocka_unit_test(lost_notification_recovered_by_query),
	    cmocka_unit_test(forged_query_answer_pays_nothing),
	    cmocka_unit_test(closed_order_closed_at_channel),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
