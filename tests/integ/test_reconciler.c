/*
 * test_reconciler - the real bin/paycb-reconciler against the simulator's channel API
 * (`paycb-sim api`: WeChat Pay APIv3, the Alipay gateway and the Stripe API, signatures and
 * keys checked both ways) and the real MariaDB. Every scenario runs once per channel (the
 * table CH): the merchant has all three, and the simulator keeps one ledger per channel. The
 * ledger is the judge: for every refund request it must hold exactly one refund of the
 * request's amount, and exactly one refund POST (a result that may have taken effect is
 * resolved by a query, never by sending again).
 *
 *   - faults: the refund applied and the connection dropped before the answer, 5xx, 429,
 *     a slow answer (timeout after sending), a forged answer: every request refunded once;
 *   - SIGKILL: the reconciler killed while a refund is in flight (applied, answer pending),
 *     and again at every new send mark over a batch: each refunded once;
 *   - the FAILED path: a final refusal makes the row FAILED with a refund_failed alert and
 *     nothing refunded;
 *   - approval: with reconciler.refund_approval on, an unapproved request is not sent until
 *     `paycbctl refund approve` (audited), then refunded once;
 *   - a payment whose notification never came is recovered by a query, and the late
 *     notification is a duplicate; a forged query answer pays nothing; a closed order is
 *     closed at the channel;
 *   - HTTPS with a test CA made at run time (tests/support/testca.c): a reconciler trusting
 *     another CA sends nothing and believes nothing (retried), then one trusting the right
 *     CA refunds once.
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
#include "cfg.h"
#include "chan_client.h"
#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "chan_notify.h"
#include "sim.h"
#include "testca.h"

#define WAIT_MS 60000

/* One channel of the table: its name in paycb and the simulator, a tag for order numbers,
 * and how its channel ids look. */
struct chan_case {
	const char *name, *tag, *txn_prefix;
};
static struct chan_case CH[3] = {
    {"wxpay", "wx", "4200"}, {"alipay", "ali", "2026"}, {"stripe", "st", "pi_"}};

static struct conf cf;
static struct db tdb;
static char dir[512], conf_path[640], appr_path[640], tls_path[640], badca_path[640], keys[600];
static int sim_port, sim_tls_port, sim_pid = -1, ingest_port, ingest_admin;
static int seq;
static struct sim_mfiles mfs; /* the merchant's key files */
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

/* fault - sets faults (form fields) on the channel of the case only. */
static int
fault(const struct chan_case *ch, const char *what)
{
	char form[200];

	snprintf(form, sizeof(form), "%s&channel=%s", what, ch->name);
	return sim_post("/_sim/fault", form);
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

/* A condition for harness_wait_until(): the simulator's counter k reached at least n. */
struct stat_wait {
	const char *k;
	long long n;
};

static int
stat_reached(void *arg)
{
	const struct stat_wait *w = arg;

	return stat_of(w->k) >= w->n;
}

/* ledger - the simulator's refunded amount, refund count and refund POSTs of an order. */
static int
ledger(const struct chan_case *ch, const char *order, long long *refunded, long long *nrefunds,
       long long *posts)
{
	char path[300];
	json_t *j;

	snprintf(path, sizeof(path), "/_sim/ledger?merchant=default&out_trade_no=%s&channel=%s",
	         order, ch->name);
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
/* at_channel - an order of cents at the case's channel, PAID or NOTPAY, with a fresh order
 * number and channel id (txn may be NULL). */
static int
at_channel(const struct chan_case *ch, const char *tag, long long cents, const char *state,
           char *order, size_t olen, char *txn, size_t tlen)
{
	char form[400], t[48];

	snprintf(order, olen, "%s-%s-%d-%d", tag, ch->tag, (int)getpid(), ++seq);
	snprintf(t, sizeof(t), "%s%d%06d", ch->txn_prefix, (int)getpid() % 10000, seq);
	if (txn != NULL)
		snprintf(txn, tlen, "%s", t);
	snprintf(form, sizeof(form),
	         "merchant=default&channel=%s&out_trade_no=%s&amount=%lld&currency=CNY&state=%s&"
	         "transaction_id=%s",
	         ch->name, order, cents, state, t);
	return sim_post("/_sim/order", form);
}

static long long
request(const struct chan_case *ch, const char *tag, long long cents, char *order, size_t olen)
{
	char amount[32], txn[48];
	unsigned long long rid = 0;

	if (at_channel(ch, tag, cents, "PAID", order, olen, txn, sizeof(txn)) != 0)
		return -1;
	snprintf(amount, sizeof(amount), "%lld.%02lld", cents / 100, cents % 100);
	{
		struct db_in in[5] = {DBI_STR(ch->name), DBI_STR(txn), DBI_STR(order),
		                      DBI_STR(amount), DBI_STR(tag)};

		if (db_exec(&tdb,
		            "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
		            "out_trade_no, amount, currency, reason) VALUES ('default', ?, ?, ?, "
		            "?, 'CNY', ?)",
		            in, 5, NULL, &rid) != DB_OK)
			return -1;
	}
	return (long long)rid;
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
assert_refunded(const struct chan_case *ch, const char *order, long long cents, int one_post)
{
	long long refunded = -1, n = -1, posts = -1;

	assert_int_equal(ledger(ch, order, &refunded, &n, &posts), 0);
	if (refunded != cents || n != 1 || posts != 1)
		print_message("# %s %s: refunded %lld of %lld in %lld refunds, %lld posts\n",
		              ch->name, order, refunded, cents, n, posts);
	assert_int_equal(refunded, cents);
	assert_int_equal(n, 1);
	if (one_post)
		assert_int_equal(posts, 1);
}

static int
reconciler_start(const char *conf, const char *name)
{
	char log[700], confbuf[1024];
	char *argv[] = {"bin/paycb-reconciler", "-c", confbuf, NULL};
	long long seen, end = harness_now_ms() + 20000;
	int pid;

	snprintf(confbuf, sizeof(confbuf), "%s", conf);
	snprintf(log, sizeof(log), "%s/%s.log", dir, name);
	seen = harness_file_count(log, "event=ready");
	if ((pid = kid(spawn(argv, log))) <= 0)
		return -1;
	/* Ready means its signal handlers are in place: a SIGTERM then drains. It polls every
	 * 5 ms, not harness_wait_until's 20: refunds_survive_sigkill kills a reconciler at its
	 * next step, and a slower start-up watch lets it take several steps unseen. */
	while (harness_file_count(log, "event=ready") == seen && harness_now_ms() < end)
		usleep(5 * 1000);
	return pid;
}

static void
refunds_survive_channel_faults(void **state)
{
	const struct chan_case *ch = *state;
	const char *faults[] = {"drop=1", "e5xx=2", "e429=1", "slow=1&slow_ms=2500", "forge=1"};
	char orders[5][64];
	long long ids[5], cents[5], bad0 = stat_of("bad_sig");
	int pid;

	assert_true((pid = reconciler_start(conf_path, "recon-faults")) > 0);
	/* One fault at a time, on the refund the reconciler sends next. */
	for (int i = 0; i < 5; i++) {
		cents[i] = 1000 + 111 * i;
		assert_int_equal(fault(ch, faults[i]), 0);
		assert_true((ids[i] = request(ch, "flt", cents[i], orders[i], sizeof(orders[i]))) >
		            0);
		assert_int_equal(wait_status(ids[i], "DONE"), 0);
	}
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	for (int i = 0; i < 5; i++)
		assert_refunded(ch, orders[i], cents[i], 1);
	/* Each was settled after a failed attempt: by a query, not by an answer that never
	 * came, and never by a second refund. */
	assert_int_equal(
	    q_i64("SELECT COUNT(*) FROM refund_requests WHERE id >= ? AND attempts > 0", ids[0]),
	    5);
	/* Every request the reconciler sent carried good credentials. */
	assert_int_equal(stat_of("bad_sig"), bad0);
}

static void
refunds_survive_sigkill(void **state)
{
	const struct chan_case *ch = *state;
	char orders[6][64], order_slow[64];
	long long ids[6], id_slow, sent = 0;
	int pid, kills = 0;

	/* 1. Killed while the refund is in flight: applied at the channel, answer not back. */
	assert_true((id_slow = request(ch, "kil", 4321, order_slow, sizeof(order_slow))) > 0);
	assert_int_equal(fault(ch, "slow=1&slow_ms=8000"), 0);
	{
		long long applied = stat_of("refunds_applied");
		struct stat_wait once = {"refunds_applied", applied + 1};
		struct db_in in[1] = {DBI_I64(id_slow)};

		assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
		assert_int_equal(
		    harness_wait_i64(&tdb,
		                     "SELECT COUNT(*) FROM refund_requests WHERE id = ? "
		                     "AND sent_at IS NOT NULL",
		                     in, 1, 1, WAIT_MS),
		    0);
		harness_wait_until(stat_reached, &once, WAIT_MS);
		assert_int_equal(stat_of("refunds_applied"), applied + 1);
		assert_int_equal(harness_stop(pid, SIGKILL, 10000), 128 + SIGKILL);
	}
	assert_int_equal(fault(ch, "slow=0&slow_ms=2500"), 0);
	assert_true((pid = reconciler_start(conf_path, "recon-kill")) > 0);
	assert_int_equal(wait_status(id_slow, "DONE"), 0);
	assert_int_equal(harness_stop(pid, SIGKILL, 10000), 128 + SIGKILL);
	assert_refunded(ch, order_slow, 4321, 1);

	/* 2. Killed at every step over a batch: after each claim's send mark, each SUBMITTED,
	 * each DONE, whichever comes next; restarted each time. */
	for (int i = 0; i < 6; i++)
		assert_true((ids[i] = request(ch, "kil", 2000 + i, orders[i], sizeof(orders[i]))) >
		            0);
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
		assert_refunded(ch, orders[i], 2000 + i, 0);
}

static void
final_refusal_fails_with_alert(void **state)
{
	const struct chan_case *ch = *state;
	char order[64];
	long long id, refunded = -1, n = -1, posts = -1;
	int pid;

	assert_true((id = request(ch, "fail", 777, order, sizeof(order))) > 0);
	assert_int_equal(fault(ch, "refund_final=1"), 0);
	assert_true((pid = reconciler_start(conf_path, "recon-fail")) > 0);
	assert_int_equal(wait_status(id, "FAILED"), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM alerts a JOIN refund_requests r ON "
	                       "a.out_trade_no = r.out_trade_no WHERE r.id = ? AND a.kind = "
	                       "'refund_failed'",
	                       id),
	                 1);
	assert_int_equal(ledger(ch, order, &refunded, &n, &posts), 0);
	assert_int_equal(refunded, 0);
	assert_int_equal(n, 0);
}

static void
approval_first(void **state)
{
	const struct chan_case *ch = *state;
	char order[64], order2[64], cmd[1200];
	long long id, id2;
	int pid;

	assert_true((id = request(ch, "apr", 555, order, sizeof(order))) > 0);
	assert_true((id2 = request(ch, "apr", 666, order2, sizeof(order2))) > 0);
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
	assert_refunded(ch, order, 555, 1);
	assert_refunded(ch, order2, 666, 1);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM audit_log WHERE action = 'refund_approve' AND "
	                       "target = CONCAT('refund_request:', ?)",
	                       id),
	                 1);
}

/* pending - a PENDING order in paycb and, at the channel, the same order paid (no
 * notification is ever sent for it). */
static void
pending_paid_at_channel(const struct chan_case *ch, const char *tag, long long cents, char *order,
                        size_t olen, char *txn, size_t tlen)
{
	char amount[32];

	snprintf(amount, sizeof(amount), "%lld.%02lld", cents / 100, cents % 100);
	assert_int_equal(at_channel(ch, tag, cents, "PAID", order, olen, txn, tlen), 0);
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

/* wx_note - WeChat Pay's TRANSACTION.SUCCESS, signed with the platform key. */
static int
wx_note(const struct sim_merchant *m, const char *order, const char *txn, long long cents,
        struct chan_note *n)
{
	char plain[1024], tsh[24], nonce[40], *sig = NULL;

	snprintf(
	    plain, sizeof(plain),
	    "{\"mchid\":\"%s\",\"appid\":\"wx0000000000000001\",\"out_trade_no\":\"%s\","
	    "\"transaction_id\":\"%s\",\"trade_type\":\"NATIVE\",\"trade_state\":\"SUCCESS\","
	    "\"trade_state_desc\":\"ok\",\"bank_type\":\"OTHERS\",\"success_time\":"
	    "\"2026-12-02T10:34:56+08:00\",\"payer\":{\"openid\":\"o1\"},\"amount\":{\"total\":"
	    "%lld,\"payer_total\":%lld,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}",
	    m->mchid, order, txn, cents, cents);
	if (notify_wx_sign(m->wx_cert_key, m->wx_serial, m->apiv3, "TRANSACTION.SUCCESS", plain,
	                   time(NULL), &n->body, tsh, nonce, &sig) != 0)
		return -1;
	n->len = strlen(n->body);
	snprintf(n->headers, sizeof(n->headers),
	         "Content-Type: application/json\r\nWechatpay-Timestamp: %s\r\n"
	         "Wechatpay-Nonce: %s\r\nWechatpay-Signature: %s\r\nWechatpay-Serial: %s\r\n",
	         tsh, nonce, sig, m->wx_serial);
	free(sig);
	return 0;
}

/* late_notification - the real payment notification of the case's channel, signed as the
 * channel signs it with the simulator's keys, posted to ingest; returns the HTTP status. */
static int
late_notification(const struct chan_case *ch, const char *order, const char *txn, long long cents)
{
	struct conf lc;
	struct cfg_errors errs;
	struct sim_merchant *m = NULL;
	struct chan_note n = {0};
	struct httpc_resp *r = calloc(1, sizeof(*r));
	char err[256], path[128], amount[32];
	int nm = 0, status = -1, rc = -1;

	if (r == NULL || conf_load(conf_path, PROG_SIM, &lc, &errs) != 0 ||
	    sim_merchants_load(&lc, keys, &m, &nm, err, sizeof(err)) != 0)
		goto done;
	snprintf(amount, sizeof(amount), "%lld.%02lld", cents / 100, cents % 100);
	if (strcmp(ch->name, "wxpay") == 0)
		rc = wx_note(&m[0], order, txn, cents, &n);
	else if (strcmp(ch->name, "alipay") == 0)
		rc = chan_ali_pay(&n, order, txn, amount, m[0].ali_key);
	else
		rc = chan_stripe_pay(&n, (const char *)m[0].stripe[m[0].nstripe - 1], order, txn,
		                     cents, time(NULL));
	snprintf(path, sizeof(path), "/pay/callback/%s/default", ch->name);
	if (rc == 0 && chan_post(ingest_port, path, &n, r) == 0)
		status = r->status;
done:
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
	const struct chan_case *ch = *state;
	char order[64], txn[48], plog[700], ilog[700];
	int pid, ppid, ipid;

	pending_paid_at_channel(ch, "lost", 1234, order, sizeof(order), txn, sizeof(txn));
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
	{
		long long dup0 = harness_file_count(ilog, "event=duplicate");
		int st = late_notification(ch, order, txn, 1234);

		/* Each channel's success answer: 200 (WeChat Pay also 204 without a body). */
		assert_true(st == 200 || st == 204);
		assert_int_equal(chan_stop(ipid), 0);
		assert_true(harness_file_count(ilog, "event=duplicate") > dup0);
	}
	assert_int_equal(
	    rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ?", order), 1);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM order_events WHERE out_trade_no = ? AND "
	                         "event_type = 'order.paid.shipment'",
	                         order),
	                 1);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_int_equal(harness_stop(ppid, SIGTERM, 30000), 0);
}

/*
 * forged_query_answer_pays_nothing - while every answer of the channel is forged (WeChat Pay
 * and Alipay: signed by a stranger; Stripe: about other objects), the paid order is queried
 * and nothing is reserved; with authentic answers again it is recovered.
 */
static void
forged_query_answer_pays_nothing(void **state)
{
	const struct chan_case *ch = *state;
	char order[64], txn[48], log[700];
	long long forged0, served0;
	int pid, stripe = strcmp(ch->name, "stripe") == 0, need = stripe ? 1 : 2;

	snprintf(log, sizeof(log), "%s/recon-forged.log", dir);
	forged0 = harness_file_count(log, "outcome=forged");
	served0 = stat_of("forged");
	assert_int_equal(fault(ch, "forge=1000"), 0);
	pending_paid_at_channel(ch, "forg", 999, order, sizeof(order), txn, sizeof(txn));
	assert_true((pid = reconciler_start(conf_path, "recon-forged")) > 0);
	/* Forged answers served (two for the signed channels, each refused and queried again),
	 * and nothing reserved for them. */
	harness_wait_until(stat_reached, &(struct stat_wait){"forged", served0 + need}, WAIT_MS);
	assert_true(stat_of("forged") >= served0 + need);
	assert_int_equal(
	    rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ?", order), 0);
	if (stripe) {
		/* Stripe signs nothing: an answer about other PaymentIntents reads as "none of
		 * this order's", so the step is done; an operator re-arms the query (the
		 * UPDATE docs/operations.md gives). */
		assert_int_equal(fault(ch, "forge=0"), 0);
		assert_int_equal(
		    harness_wait_i64(&tdb,
		                     "SELECT COUNT(*) FROM orders WHERE out_trade_no = ? "
		                     "AND status = 'PENDING' AND recon_step = 1",
		                     (struct db_in[]){DBI_STR(order)}, 1, 1, WAIT_MS),
		    0);
		assert_int_equal(
		    db_exec(&tdb,
		            "UPDATE orders SET recon_step = 0, recon_next_at = NOW(3) WHERE "
		            "out_trade_no = ? AND status = 'PENDING'",
		            (struct db_in[]){DBI_STR(order)}, 1, NULL, NULL),
		    DB_OK);
	} else {
		/* Signed channels name the refusal, and the step is tried again. */
		assert_true(harness_file_count(log, "outcome=forged") >= forged0 + 2);
		assert_int_equal(rows_of("SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND "
		                         "status = 'PENDING' AND recon_step = 0",
		                         order),
		                 1);
	}
	/* Authentic answers again: the same order is recovered. */
	assert_int_equal(fault(ch, "forge=0"), 0);
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
	const struct chan_case *ch = *state;
	char order[64], cmd[1200], path[300];
	json_t *j = NULL;
	int pid;

	assert_int_equal(at_channel(ch, "cls", 500, "NOTPAY", order, sizeof(order), NULL, 0), 0);
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
	snprintf(path, sizeof(path), "/_sim/ledger?merchant=default&out_trade_no=%s&channel=%s",
	         order, ch->name);
	assert_int_equal(sim_get(path, &j), 0);
	assert_string_equal(json_string_value(json_object_get(j, "state")), "CLOSED");
	assert_int_equal(json_integer_value(json_object_get(j, "closes")), 1);
	json_decref(j);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM audit_log WHERE action = 'order_close' AND "
	                         "target = CONCAT('order:default|', ?)",
	                         order),
	                 1);
}

/* wait_log - until the log has a line with needle (the reconciler logs each failed call). */
static long long
wait_log(const char *log, const char *needle)
{
	fx_wait_log(log, needle, 1, WAIT_MS);
	return harness_file_count(log, needle);
}

/*
 * wrong_ca_then_https - over HTTPS, a reconciler trusting another CA cannot finish a TLS
 * handshake: nothing reaches the channel, the refund is retried (never FAILED) and the paid
 * order's query fails (nothing reserved): no decision is made from the impostor. A reconciler
 * trusting the test CA then refunds once and recovers the payment.
 */
static void
wrong_ca_then_https(void **state)
{
	const struct chan_case *ch = *state;
	char order[64], paid[64], txn[48], log[700], needle[100];
	long long id, requests0, refunded = -1, n = -1, posts = -1;
	struct db_in in[1];
	int pid;

	assert_true((id = request(ch, "tls", 3210, order, sizeof(order))) > 0);
	pending_paid_at_channel(ch, "tlsq", 4321, paid, sizeof(paid), txn, sizeof(txn));
	in[0] = (struct db_in)DBI_I64(id);
	requests0 = stat_of("requests");
	snprintf(log, sizeof(log), "%s/recon-badca.log", dir);
	snprintf(needle, sizeof(needle), "order=%s channel=%s outcome=retry", paid, ch->name);
	assert_true((pid = reconciler_start(badca_path, "recon-badca")) > 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM refund_requests WHERE id = ? AND "
	                                  "attempts >= 2 AND status = 'REQUESTED'",
	                                  in, 1, 1, WAIT_MS),
	                 0);
	assert_true(wait_log(log, needle) >= 1);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_int_equal(stat_of("requests"), requests0);
	assert_int_equal(ledger(ch, order, &refunded, &n, &posts), 0);
	assert_int_equal(posts, 0);
	assert_int_equal(n, 0);
	assert_true(harness_file_count(log, "code=tls") >= 3);
	assert_int_equal(q_i64("SELECT COUNT(*) FROM alerts a JOIN refund_requests r ON "
	                       "a.out_trade_no = r.out_trade_no WHERE r.id = ?",
	                       id),
	                 0);
	assert_int_equal(
	    rows_of("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no = ?", paid), 0);
	assert_int_equal(rows_of("SELECT COUNT(*) FROM orders WHERE out_trade_no = ? AND status = "
	                         "'PENDING' AND recon_step = 0",
	                         paid),
	                 1);
	assert_true((pid = reconciler_start(tls_path, "recon-tls")) > 0);
	assert_int_equal(wait_status(id, "DONE"), 0);
	assert_int_equal(harness_wait_i64(&tdb,
	                                  "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                  "out_trade_no = ? AND source = 'query'",
	                                  (struct db_in[]){DBI_STR(paid)}, 1, 1, WAIT_MS),
	                 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 20000), 0);
	assert_refunded(ch, order, 3210, 1);
}

/* ali_client - an Alipay client of the merchant against the simulator, signing with key. */
static struct chan_client *
ali_client(EVP_PKEY *key, EVP_PKEY **alipay)
{
	char url[128], err[256];
	struct chan_client *c = NULL;
	struct chan_client_conf cc = {.channel = CHAN_ALIPAY,
	                              .merchant_id = "sim-check",
	                              .base_url = url,
	                              .allow_http = 1,
	                              .rate_per_s = 100};

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/ali/gateway.do", sim_port);
	cc.ali = (struct chan_ali_cred){mfs.app_id, key, alipay, 1};
	if (chan_client_new(&cc, &c, err, sizeof(err)) != 0)
		print_message("# %s\n", err);
	return c;
}

/* stripe_post - a raw POST to the simulator's Stripe API with a key and an Idempotency-Key. */
static int
stripe_post(const char *key, const char *idem, const char *form, struct httpc_resp *r)
{
	char hdrs[400];

	snprintf(hdrs, sizeof(hdrs),
	         "Authorization: Bearer %s\r\nIdempotency-Key: %s\r\nContent-Type: "
	         "application/x-www-form-urlencoded\r\n",
	         key, idem);
	return httpc_request(sim_port, "POST", "/stripe/v1/refunds", hdrs, form, strlen(form), 5000,
	                     r);
}

/*
 * simulator_answers_as_the_channels - what the other cases rely on: Alipay gives one refund
 * per out_request_no (a repeat says fund_change=N) and refuses a request signed with another
 * app key with a signed isv.invalid-signature; Stripe replays an Idempotency-Key's answer for
 * the same parameters, refuses other parameters with idempotency_error, deduplicates nothing
 * else, and refuses a wrong secret key.
 */
static void
simulator_answers_as_the_channels(void **state)
{
	static struct httpc_resp a, b;
	char order[64], txn[48], err[256], form[300], *key = NULL;
	const struct chan_refund_req q = {{NULL, NULL}, "chk-1", 100, 500, "CNY", NULL, NULL};
	struct chan_refund_req rq = q;
	EVP_PKEY *app = NULL, *alipay = NULL, *stranger = EVP_RSA_gen(2048);
	struct chan_client *good, *bad;
	struct chan_refund f;
	struct chan_payment p;
	struct chan_result res;
	long long refunded, n, posts;
	size_t len;

	(void)state;
	assert_int_equal(at_channel(&CH[1], "chk", 500, "PAID", order, sizeof(order), NULL, 0), 0);
	assert_int_equal(crypto_load_privkey_file(mfs.ali_app_key, &app, err, sizeof(err)), 0);
	assert_int_equal(crypto_load_pubkey_file(mfs.ali_pub, &alipay, err, sizeof(err)), 0);
	assert_non_null(good = ali_client(app, &alipay));
	assert_non_null(bad = ali_client(stranger, &alipay));
	rq.order.out_trade_no = order;
	assert_int_equal(chan_refund(good, &rq, &f, &res), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	assert_int_equal(chan_refund(good, &rq, &f, &res), 0);
	assert_int_equal(f.state, CHAN_REFUND_PENDING); /* fund_change=N: not this call's */
	assert_string_equal(f.status, "fund_change=N");
	assert_int_equal(ledger(&CH[1], order, &refunded, &n, &posts), 0);
	assert_true(refunded == 100 && n == 1 && posts == 2);
	chan_query_payment(bad, &rq.order, &p, &res);
	assert_int_equal(res.outcome, CHAN_FINAL);
	assert_string_equal(res.code, "isv.invalid-signature");
	assert_int_equal(res.authenticated, 1);
	chan_client_free(good);
	chan_client_free(bad);

	assert_int_equal(
	    at_channel(&CH[2], "chk", 500, "PAID", order, sizeof(order), txn, sizeof(txn)), 0);
	assert_int_equal(cfg_read_secret(mfs.stripe_api_key, &key, &len, err, sizeof(err)), 0);
	snprintf(form, sizeof(form), "payment_intent=%s&amount=100&metadata[paycb_refund_no]=x1",
	         txn);
	assert_int_equal(stripe_post(key, "k1", form, &a), 0);
	assert_int_equal(a.status, 200);
	assert_int_equal(stripe_post(key, "k1", form, &b), 0);
	assert_int_equal(b.status, 200);
	assert_true(a.body_len == b.body_len && memcmp(a.body, b.body, a.body_len) == 0);
	snprintf(form, sizeof(form), "payment_intent=%s&amount=200&metadata[paycb_refund_no]=x1",
	         txn);
	assert_int_equal(stripe_post(key, "k1", form, &b), 0);
	assert_int_equal(b.status, 400);
	assert_non_null(memmem(b.body, b.body_len, "idempotency_error", 17));
	assert_int_equal(stripe_post(key, "k2", form, &b), 0);
	assert_int_equal(b.status, 200);
	assert_int_equal(stripe_post("sk_test_wrong", "k3", form, &b), 0);
	assert_int_equal(b.status, 401);
	assert_int_equal(ledger(&CH[2], order, &refunded, &n, &posts), 0);
	/* Four POSTs reached the ledger (the wrong key's did not); two refunds were made. */
	assert_true(refunded == 300 && n == 2 && posts == 4);
	free(key);
	EVP_PKEY_free(app);
	EVP_PKEY_free(alipay);
	EVP_PKEY_free(stranger);
}

/* write_confs - the plain-HTTP configuration (and its approval twin), and the HTTPS ones
 * trusting the test CA and the other CA. */
static int
write_confs(struct sim_mfiles *mf, const struct testca *ca, char *err, size_t errlen)
{
	char base[640], iport[64], iadmin[64], cafile[800], badfile[800], url[64];
	char *sets[12] = {"reconciler.sweep_interval_s=1",
	                  "reconciler.refund_ladder_s=[1, 1, 2]",
	                  "reconciler.admin_port=0",
	                  "reconciler.total_timeout_ms=1000",
	                  "reconciler.lease_s=2",
	                  "reconciler.query_steps_s=[1, 600]",
	                  iport,
	                  iadmin,
	                  "reconciler.allow_http=true"};
	int nsets = 9;

	mfs = *mf;
	snprintf(base, sizeof(base), "%s/base.conf", dir);
	snprintf(iport, sizeof(iport), "ingest.listen_port=%d", ingest_port);
	snprintf(iadmin, sizeof(iadmin), "ingest.admin_port=%d", ingest_admin);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", sim_port);
	sim_mfiles_api(mf, url);
	if (harness_write_conf(&cf, base, NULL) != 0 ||
	    sim_conf_write(base, conf_path, mf, 1, sets, nsets, err, errlen) != 0)
		return -1;
	sets[nsets] = "reconciler.refund_approval=true";
	if (sim_conf_write(base, appr_path, mf, 1, sets, nsets + 1, err, errlen) != 0)
		return -1;
	/* HTTPS only: plain HTTP is not allowed there. */
	snprintf(url, sizeof(url), "https://127.0.0.1:%d", sim_tls_port);
	sim_mfiles_api(mf, url);
	snprintf(cafile, sizeof(cafile), "reconciler.ca_file=\"%s\"", ca->ca);
	snprintf(badfile, sizeof(badfile), "reconciler.ca_file=\"%s\"", ca->other_ca);
	sets[nsets - 1] = cafile;
	if (sim_conf_write(base, tls_path, mf, 1, sets, nsets, err, errlen) != 0)
		return -1;
	sets[nsets - 1] = badfile;
	return sim_conf_write(base, badca_path, mf, 1, sets, nsets, err, errlen);
}

static int
setup(void **state)
{
	struct sim_mfiles mf;
	struct testca ca;
	char err[512], log[640], port[16], tport[16];

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
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", dir);
	snprintf(appr_path, sizeof(appr_path), "%s/approve.conf", dir);
	snprintf(tls_path, sizeof(tls_path), "%s/tls.conf", dir);
	snprintf(badca_path, sizeof(badca_path), "%s/badca.conf", dir);
	sim_port = httpc_free_port();
	sim_tls_port = httpc_free_port();
	ingest_port = httpc_free_port();
	ingest_admin = httpc_free_port();
	if (sim_keys_make(keys, "default", 0, &mf, err, sizeof(err)) != 0 ||
	    testca_make(dir, &ca, err, sizeof(err)) != 0 ||
	    write_confs(&mf, &ca, err, sizeof(err)) != 0) {
		print_message("# %s\n", err);
		return -1;
	}
	snprintf(log, sizeof(log), "%s/sim-api.log", dir);
	snprintf(port, sizeof(port), "%d", sim_port);
	snprintf(tport, sizeof(tport), "%d", sim_tls_port);
	{
		char *argv[] = {"bin/paycb-sim", "api",  "-c",         conf_path,
		                "--keys",        keys,   "--port",     port,
		                "--tls-port",    tport,  "--tls-cert", ca.cert,
		                "--tls-key",     ca.key, NULL};

		sim_pid = spawn(argv, log);
	}
	if (sim_pid <= 0 || harness_wait_until(sim_up, NULL, 20000) != 0) {
		print_message("# the simulator's API did not come up (%s)\n", log);
		return -1;
	}
	return 0;
}

/* case_teardown - whatever a failed case left: its processes and its faults. */
static int
case_teardown(void **state)
{
	(void)state;
	for (int i = 0; i < nkids; i++)
		if (kill((pid_t)kids[i], 0) == 0)
			harness_stop(kids[i], SIGKILL, 10000);
	nkids = 0;
	return sim_post("/_sim/fault", "drop=0&e5xx=0&e429=0&slow=0&forge=0&refund_final=0");
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

/* One test per scenario and channel, named "scenario channel". */
#define PER_CHANNEL(f)                                                                             \
	{#f " wxpay", f, NULL, case_teardown, &CH[0]},                                             \
	    {#f " alipay", f, NULL, case_teardown, &CH[1]},                                        \
	{                                                                                          \
#f " stripe", f, NULL, case_teardown, &CH[2]                                       \
	}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_teardown(simulator_answers_as_the_channels, case_teardown),
	    PER_CHANNEL(refunds_survive_channel_faults),
	    PER_CHANNEL(refunds_survive_sigkill),
	    PER_CHANNEL(final_refusal_fails_with_alert),
	    PER_CHANNEL(approval_first),
	    PER_CHANNEL(lost_notification_recovered_by_query),
	    PER_CHANNEL(forged_query_answer_pays_nothing),
	    PER_CHANNEL(closed_order_closed_at_channel),
	    PER_CHANNEL(wrong_ca_then_https),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
