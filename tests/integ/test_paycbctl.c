/*
 * test_paycbctl - the real bin/paycbctl against MariaDB and Kafka: list and show never print
 * a raw body; a replay of a dead row resets it, publishes it on the first retry step's topic
 * (never the main topic) and writes an audit row; a replay of a done row changes nothing and
 * says so; a dry run changes nothing but is audited; --all replays a time window; errors
 * exit like the daemons' (78 for configuration, 64 for usage); `reconcile` makes a window's
 * PENDING orders due for a query now, and two real reconcilers against the simulator's
 * channel API query each once and recover the payments the channel has.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "kq.h"
#include "ladder.h"
#include "simapi.h"

#define MARKER "SECRET-BODY-MARKER"

static struct conf cf;
static struct db tdb;
static char dir[64], conf_path[128], out[65536];
static int seq;

/* ctl - runs paycbctl with env and args; output (stdout and stderr) into out; exit code. */
static int
ctl(const char *env, const char *fmt, ...)
{
	char args[1024], cmd[1400];
	size_t n;
	va_list ap;
	FILE *p;
	int st;

	va_start(ap, fmt);
	vsnprintf(args, sizeof(args), fmt, ap);
	va_end(ap);
	snprintf(cmd, sizeof(cmd), "env %s bin/paycbctl -c %s %s 2>&1", env ? env : "", conf_path,
	         args);
	assert_non_null(p = popen(cmd, "r"));
	n = fread(out, 1, sizeof(out) - 1, p);
	out[n] = '\0';
	st = pclose(p);
	printf("# $ paycbctl %s -> %d\n", args, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* add - a row of the payment (or refund) log with status and retry_count; dead rows are
 * dead since dead_ago_s and their dead letter was sent. */
static unsigned long long
add(int refund, int status, int retry_count, long long dead_ago_s)
{
	static const char *pay =
	    "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, out_trade_no, "
	    "amount, currency, raw_body, body_sha256, status, retry_count, next_retry_at, "
	    "last_error, dead_at, dead_reason, dlq_sent_at, done_at) VALUES ('m1', 'alipay', ?, ?, "
	    "'12.34', 'CNY', ?, SHA2(?, 256), ?, ?, NOW(3) + INTERVAL 1 HOUR, 'order not found', "
	    "IF(? = 2, NOW(3) - INTERVAL ? SECOND, NULL), IF(? = 2, 'ladder_exhausted', NULL), "
	    "IF(? = 2, NOW(3), NULL), IF(? = 1, NOW(3), NULL))";
	static const char *rf =
	    "INSERT INTO refund_callback_log (merchant_id, channel, refund_no, out_trade_no, "
	    "amount, currency, raw_body, body_sha256, status, retry_count, next_retry_at, "
	    "last_error, dead_at, dead_reason, dlq_sent_at, done_at) VALUES ('m1', 'stripe', ?, "
	    "?, '1.00', 'USD', ?, SHA2(?, 256), ?, ?, NOW(3) + INTERVAL 1 HOUR, 'no payment yet', "
	    "IF(? = 2, NOW(3) - INTERVAL ? SECOND, NULL), IF(? = 2, 'ladder_exhausted', NULL), "
	    "IF(? = 2, NOW(3), NULL), IF(? = 1, NOW(3), NULL))";
	char trade[32], order[32], body[96];
	unsigned long long id = 0;

	snprintf(trade, sizeof(trade), "T%06d", ++seq);
	snprintf(order, sizeof(order), "ctl-o%d", seq);
	snprintf(body, sizeof(body), "{\"order\":\"%s\",\"note\":\"%s\"}", order, MARKER);
	{
		struct db_in in[11] = {DBI_STR(trade),  DBI_STR(order),      DBI_STR(body),
		                       DBI_STR(body),   DBI_I64(status),     DBI_I64(retry_count),
		                       DBI_I64(status), DBI_I64(dead_ago_s), DBI_I64(status),
		                       DBI_I64(status), DBI_I64(status)};
		assert_int_equal(db_exec(&tdb, refund ? rf : pay, in, 11, NULL, &id), DB_OK);
	}
	return id;
}

/* fingerprint - a checksum of every column a replay could touch. */
static long long
fingerprint(const char *table, unsigned long long id)
{
	return fx_countf(
	    &cf,
	    "SELECT CRC32(CONCAT_WS('|', status, retry_count, next_retry_at, IFNULL(last_error, "
	    "''), IFNULL(dead_at, ''), IFNULL(dead_reason, ''), IFNULL(dlq_sent_at, ''), "
	    "IFNULL(replayed_at, ''), updated_at, IFNULL(raw_body, ''))) FROM %s WHERE id = %llu",
	    table, id);
}

struct topic_arg {
	unsigned long long id;
	const char *log;
	long long *attempt;
	int n;
};

static int
topic_cb(void *arg, const rd_kafka_message_t *m)
{
	struct topic_arg *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);

	if (o && (unsigned long long)json_integer_value(json_object_get(o, "id")) == a->id &&
	    strcmp(json_string_value(json_object_get(o, "log")), a->log) == 0) {
		a->n++;
		if (a->attempt)
			*a->attempt = json_integer_value(json_object_get(o, "attempt"));
	}
	json_decref(o);
	return 0;
}

/* on_topic - messages on topic whose "id" is id (and "log" is log); attempt of the last. */
static int
on_topic(const char *topic, unsigned long long id, const char *log, long long *attempt)
{
	struct topic_arg a = {id, log, attempt, 0};

	assert_true(fx_read_topic(&cf, topic, topic_cb, &a) >= 0);
	return a.n;
}

static void
list_and_show_print_no_body(void **state)
{
	unsigned long long pend = add(0, 0, 2, 0), done = add(0, 1, 0, 0), dead = add(0, 2, 4, 60);
	unsigned long long rdead = add(1, 2, 4, 60);
	char ref[32], sha[80];

	(void)state;
	assert_int_equal(ctl(NULL, "list"), 0);
	assert_null(strstr(out, MARKER));
	snprintf(ref, sizeof(ref), "cb%llu ", pend);
	assert_non_null(strstr(out, ref));
	snprintf(ref, sizeof(ref), "rf%llu ", rdead);
	assert_non_null(strstr(out, ref));
	assert_int_equal(ctl(NULL, "list --status dead --since 1h"), 0);
	snprintf(ref, sizeof(ref), "cb%llu ", dead);
	assert_non_null(strstr(out, ref));
	snprintf(ref, sizeof(ref), "cb%llu ", done);
	assert_null(strstr(out, ref));
	assert_non_null(strstr(out, "(2 rows)"));
	assert_int_equal(ctl(NULL, "list --limit 1"), 0);
	assert_non_null(strstr(out, "(1 rows)"));
	assert_int_equal(ctl(NULL, "list --status maybe"), 64);

	assert_int_equal(ctl(NULL, "show cb%llu", dead), 0);
	assert_null(strstr(out, MARKER));
	/* Every column, the body as length and hash only. */
	for (const char *col = "id merchant_id channel channel_trade_no out_trade_no amount "
	                       "currency body_sha256 status retry_count next_retry_at last_error "
	                       "created_at dead_at dead_reason dlq_sent_at replayed_at";
	     *col;) {
		char name[40];
		int k = 0;
		while (*col && *col != ' ')
			name[k++] = *col++;
		name[k] = '\0';
		while (*col == ' ')
			col++;
		snprintf(ref, sizeof(ref), "\n  %s ", name);
		if (strstr(out, ref) == NULL)
			printf("# column %s missing from show\n", name);
		assert_non_null(strstr(out, ref));
	}
	{
		struct db_out o[1] = {DBO_STR(sha, sizeof(sha))};
		struct db_in in[1] = {DBI_I64(dead)};
		assert_int_equal(db_query(&tdb,
		                          "SELECT SHA2(raw_body, 256) FROM pay_callback_log "
		                          "WHERE id = ?",
		                          in, 1, o, 1, NULL, NULL, NULL),
		                 DB_OK);
	}
	assert_non_null(strstr(out, sha));
	assert_non_null(strstr(out, "bytes, sha256"));
	assert_non_null(strstr(out, "12.34"));
	assert_non_null(strstr(out, "ladder_exhausted"));
	assert_int_equal(ctl(NULL, "show rf%llu", rdead), 0);
	assert_non_null(strstr(out, "refund_callback_log"));
	assert_non_null(strstr(out, "refund_no"));
	assert_null(strstr(out, MARKER));
	assert_int_equal(ctl(NULL, "show cb99999999"), 1);
	assert_non_null(strstr(out, "no such callback"));
	assert_int_equal(ctl(NULL, "dead --since 2h"), 0);
	snprintf(ref, sizeof(ref), "cb%llu ", dead);
	assert_non_null(strstr(out, ref));
	snprintf(ref, sizeof(ref), "rf%llu ", rdead);
	assert_non_null(strstr(out, ref));
	snprintf(ref, sizeof(ref), "cb%llu ", pend);
	assert_null(strstr(out, ref));
	assert_null(strstr(out, MARKER));
}

static void
replay_of_dead_row_goes_to_first_step_and_is_audited(void **state)
{
	unsigned long long id = add(0, 2, 4, 60);
	char main_topic[256], step1[256];
	long long attempt = 0, lease = ladder_delay(&cf.retry, 1) + cf.retry.lease_margin_s;

	(void)state;
	assert_int_equal(ctl(NULL, "--actor alice replay cb%llu", id), 0);
	assert_non_null(strstr(out, "replayed"));
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu AND status = 0 "
	              "AND retry_count = 0 AND replayed_at IS NOT NULL AND dead_at IS NULL "
	              "AND dlq_sent_at IS NULL AND TIMESTAMPDIFF(SECOND, NOW(3), "
	              "next_retry_at) BETWEEN %lld AND %lld",
	              id, lease - 5, lease),
	    1);
	ladder_topic(&cf, 1, step1, sizeof(step1));
	conf_topic(&cf, "callbacks", main_topic, sizeof(main_topic));
	assert_int_equal(on_topic(step1, id, "pay", &attempt), 1);
	assert_int_equal(attempt, 1);
	assert_int_equal(on_topic(main_topic, id, "pay", NULL), 0);
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM audit_log WHERE actor = 'alice' AND action = "
	              "'replay' AND target = 'cb%llu' AND dry_run = 0 AND result LIKE "
	              "'replayed%%'",
	              id),
	    1);
	/* Replaying it again: it is pending now, so nothing changes. */
	assert_int_equal(ctl(NULL, "replay %llu", id), 0);
	assert_non_null(strstr(out, "not dead; nothing changed"));
	assert_int_equal(on_topic(step1, id, "pay", NULL), 1);
}

static void
replay_of_done_row_changes_nothing(void **state)
{
	unsigned long long id = add(0, 1, 0, 0);
	long long before = fingerprint("pay_callback_log", id);
	char step1[256];

	(void)state;
	assert_int_equal(ctl("USER=carol SUDO_USER=", "replay cb%llu", id), 0);
	assert_non_null(strstr(out, "already done; nothing changed"));
	assert_int_equal(fingerprint("pay_callback_log", id), before);
	ladder_topic(&cf, 1, step1, sizeof(step1));
	assert_int_equal(on_topic(step1, id, "pay", NULL), 0);
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM audit_log WHERE actor = 'carol' AND target = "
	              "'cb%llu' AND result LIKE 'already done%%'",
	              id),
	    1);
}

static void
dry_run_changes_nothing_but_is_audited(void **state)
{
	unsigned long long id = add(1, 2, 4, 60);
	long long before = fingerprint("refund_callback_log", id);
	char step1[256];

	(void)state;
	assert_int_equal(ctl("SUDO_USER=bob USER=root", "replay --dry-run rf%llu", id), 0);
	assert_non_null(strstr(out, "dry run: would reset"));
	assert_int_equal(fingerprint("refund_callback_log", id), before);
	ladder_topic(&cf, 1, step1, sizeof(step1));
	assert_int_equal(on_topic(step1, id, "refund", NULL), 0);
	assert_int_equal(
	    fx_countf(&cf,
	              "SELECT COUNT(*) FROM audit_log WHERE actor = 'bob' AND target = "
	              "'rf%llu' AND dry_run = 1",
	              id),
	    1);
}

static void
replay_all_takes_the_window(void **state)
{
	unsigned long long in1 = add(0, 2, 4, 7200), in2 = add(1, 2, 4, 7300);
	unsigned long long out1 = add(0, 2, 4, 3 * 86400), pend = add(0, 0, 1, 0);
	long long audits = fx_countf(&cf, "SELECT COUNT(*) FROM audit_log");
	char step1[256];

	(void)state;
	/* Only rows that died between 4 h and 1 h ago; earlier tests' dead rows are younger. */
	assert_int_equal(ctl(NULL, "replay --all --from 4h --to 1h --dry-run"), 0);
	assert_non_null(strstr(out, "dry run: would replay 2 of 2 dead rows, 0 failed"));
	assert_int_equal(
	    fx_countf(&cf, "SELECT COUNT(*) FROM pay_callback_log WHERE id = %llu AND status = 2",
	              in1),
	    1);
	assert_int_equal(fx_countf(&cf, "SELECT COUNT(*) FROM audit_log"), audits + 3);
	assert_int_equal(ctl(NULL, "replay --all --from 4h --to 1h"), 0);
	assert_non_null(strstr(out, "replayed 2 of 2 dead rows, 0 failed"));
	assert_int_equal(fx_countf(&cf, "SELECT status FROM pay_callback_log WHERE id = %llu", in1),
	                 0);
	assert_int_equal(
	    fx_countf(&cf, "SELECT status FROM refund_callback_log WHERE id = %llu", in2), 0);
	assert_int_equal(
	    fx_countf(&cf, "SELECT status FROM pay_callback_log WHERE id = %llu", out1), 2);
	assert_int_equal(
	    fx_countf(&cf, "SELECT status FROM pay_callback_log WHERE id = %llu", pend), 0);
	assert_int_equal(fx_countf(&cf,
	                           "SELECT COUNT(*) FROM audit_log WHERE action = 'replay_all' AND "
	                           "dry_run = 0 AND result LIKE 'replayed 2 of 2%%'"),
	                 1);
	ladder_topic(&cf, 1, step1, sizeof(step1));
	assert_int_equal(on_topic(step1, in1, "pay", NULL), 1);
	assert_int_equal(on_topic(step1, in2, "refund", NULL), 1);
	assert_int_equal(on_topic(step1, out1, "pay", NULL), 0);
	assert_int_equal(ctl(NULL, "replay --all --from 4h"), 64);
}

static void
errors_exit_like_the_daemons(void **state)
{
	char cmd[256];
	int st;

	(void)state;
	snprintf(cmd, sizeof(cmd), "bin/paycbctl -c %s/missing.conf list >/dev/null 2>&1", dir);
	st = system(cmd);
	assert_int_equal(WEXITSTATUS(st), 78);
	assert_int_equal(ctl(NULL, "frobnicate"), 64);
	assert_int_equal(ctl(NULL, "replay"), 64);
	assert_int_equal(ctl(NULL, "replay cbX"), 64);
	assert_int_equal(ctl(NULL, "replay rf99999999"), 1);
	assert_non_null(strstr(out, "no such callback"));
}

/* refund_list_and_show - a request in the list by status, and shown with its alert. */
static void
refund_list_and_show(void **state)
{
	unsigned long long id = 0;
	char detail[160], ref[32];

	(void)state;
	assert_int_equal(
	    db_exec(&tdb,
	            "INSERT INTO refund_requests (merchant_id, channel, "
	            "channel_trade_no, out_trade_no, amount, currency, reason, status, "
	            "last_error) VALUES ('m1', 'wxpay', 'T-rr-show', 'ctl-rr', "
	            "'7.50', 'CNY', 'paid_twice', 'FAILED', 'NOT_ENOUGH')",
	            NULL, 0, NULL, &id),
	    DB_OK);
	snprintf(detail, sizeof(detail), "refund request %llu (7.50 CNY wxpay) failed", id);
	assert_int_equal(db_exec(&tdb,
	                         "INSERT INTO alerts (kind, merchant_id, out_trade_no, detail) "
	                         "VALUES ('refund_failed', 'm1', 'ctl-rr', ?)",
	                         (struct db_in[]){DBI_STR(detail)}, 1, NULL, NULL),
	                 DB_OK);
	snprintf(ref, sizeof(ref), "rr%llu ", id);
	assert_int_equal(ctl(NULL, "refund list --status failed"), 0);
	assert_non_null(strstr(out, ref));
	assert_non_null(strstr(out, "NOT_ENOUGH"));
	assert_int_equal(ctl(NULL, "refund list --status requested --limit 1000"), 0);
	assert_null(strstr(out, ref));
	assert_int_equal(ctl(NULL, "refund show rr%llu", id), 0);
	assert_non_null(strstr(out, "paid_twice"));
	assert_non_null(strstr(out, "refund_failed"));
	assert_int_equal(ctl(NULL, "refund show rr99999999"), 1);
	assert_int_equal(ctl(NULL, "refund list --status nope"), 64);
}

/* rec_conf - a configuration with merchant ctlrec whose WeChat Pay API is the simulator. */
static int
rec_conf(char *path, size_t len, char *keys, size_t klen, int port)
{
	char base[160], err[512] = "";
	char *sets[] = {
	    "reconciler.allow_http=true",       "reconciler.sweep_interval_s=1",
	    "reconciler.admin_port=0",          "reconciler.lease_s=2",
	    "reconciler.total_timeout_ms=1000", "reconciler.query_steps_s=[3600, 7200]"};

	snprintf(keys, klen, "%s/keys", dir);
	snprintf(base, sizeof(base), "%s/base.conf", dir);
	snprintf(path, len, "%s/reconcile.conf", dir);
	if (harness_write_conf(&cf, base, NULL) != 0 ||
	    simapi_conf(base, keys, "ctlrec", port, sets, 6, path, err, sizeof(err)) != 0) {
		print_message("# %s\n", err);
		return -1;
	}
	return 0;
}

/* rec_order - a PENDING order of ctlrec created at `at`, with its reconciliation state. */
static void
rec_order(const char *order, const char *at, int step, const char *next)
{
	assert_int_equal(fx_order(&tdb, "ctlrec", order, "12.34", "CNY", "PENDING"), 0);
	assert_int_equal(fx_countf(&cf,
	                           "SELECT COUNT(*) FROM orders WHERE merchant_id = 'ctlrec' AND "
	                           "out_trade_no = '%s'",
	                           order),
	                 1);
	{
		struct db_in in[4] = {DBI_STR(at), DBI_I64(step), next ? DBI_STR(next) : DBI_NULL,
		                      DBI_STR(order)};

		assert_int_equal(db_exec(&tdb,
		                         "UPDATE orders SET created_at = ?, recon_step = ?, "
		                         "recon_next_at = ? WHERE merchant_id = 'ctlrec' AND "
		                         "out_trade_no = ?",
		                         in, 4, NULL, NULL),
		                 DB_OK);
	}
}

static long long
query_rows(const char *order)
{
	return fx_countf(&cf,
	                 "SELECT COUNT(*) FROM pay_callback_log WHERE merchant_id = 'ctlrec' AND "
	                 "out_trade_no = '%s' AND source = 'query'",
	                 order);
}

/*
 * reconcile_window_by_hand - orders A (paid at the channel), B (not paid) and D (paid, past
 * the last step) were created in the window, C (paid) before it; none is due by itself. The
 * command makes A, B and D due; two reconcilers query each, recover A and D, leave C alone.
 */
static void
reconcile_window_by_hand(void **state)
{
	const char *win = "--merchant ctlrec --from '2001-02-03 04:00' --to '2001-02-03 05:00'";
	char rconf[160], keys[160], log[200], o[4][48];
	int port = httpc_free_port(), api, r1, r2;

	(void)state;
	assert_int_equal(rec_conf(rconf, sizeof(rconf), keys, sizeof(keys), port), 0);
	snprintf(log, sizeof(log), "%s/sim-api.log", dir);
	assert_true((api = simapi_start(rconf, keys, port, log)) > 0);
	for (int i = 0; i < 4; i++) {
		snprintf(o[i], sizeof(o[i]), "rec%c-%d", 'A' + i, (int)getpid());
		if (i != 1)
			assert_int_equal(
			    simapi_order(port, "ctlrec", o[i], 1234, "CNY", "PAID", NULL), 0);
	}
	rec_order(o[0], "2001-02-03 04:05:06", 0, "2099-01-01 00:00:00");
	rec_order(o[1], "2001-02-03 04:30:00", 0, "2099-01-01 00:00:00");
	rec_order(o[2], "2001-02-03 03:00:00", 2, NULL);
	rec_order(o[3], "2001-02-03 04:59:59.999", 2, NULL);
	assert_int_equal(ctl(NULL, "-c %s reconcile %s --dry-run", rconf, win), 0);
	assert_non_null(strstr(out, "dry run: 3 PENDING orders would be queried"));
	snprintf(log, sizeof(log), "%s/reconciler.log", dir);
	assert_true((r1 = harness_spawn("bin/paycb-reconciler", rconf, log)) > 0);
	assert_true((r2 = harness_spawn("bin/paycb-reconciler", rconf, log)) > 0);
	assert_int_equal(ctl(NULL, "-c %s reconcile %s --wait=60", rconf, win), 0);
	print_message("%s", out);
	assert_non_null(strstr(out, "3 PENDING orders due for a reconciliation query"));
	assert_non_null(strstr(out, "queried 3 of 3"));
	assert_non_null(strstr(out, "3 orders queried: 2 found paid (2 recovered by the query"));
	assert_int_equal(query_rows(o[0]), 1);
	assert_int_equal(query_rows(o[1]), 0);
	assert_int_equal(query_rows(o[2]), 0);
	assert_int_equal(query_rows(o[3]), 1);
	assert_int_equal(fx_countf(&cf,
	                           "SELECT COUNT(*) FROM orders WHERE out_trade_no = '%s' AND "
	                           "recon_step = 2 AND recon_next_at IS NULL",
	                           o[2]),
	                 1);
	assert_int_equal(fx_countf(&cf,
	                           "SELECT COUNT(*) FROM audit_log WHERE action = 'reconcile' AND "
	                           "target = 'orders:ctlrec|2001-02-03 04:00:00.000..2001-02-03 "
	                           "05:00:00.000' AND dry_run = %d",
	                           0),
	                 1);
	assert_int_equal(harness_stop(r1, SIGTERM, 20000), 0);
	assert_int_equal(harness_stop(r2, SIGTERM, 20000), 0);
	assert_int_equal(harness_stop(api, SIGTERM, 10000), 0);
	/* The tool's refusals: an unknown merchant, a window that ends before it starts. */
	assert_int_equal(ctl(NULL, "-c %s reconcile --merchant nobody --from 1h --to now", rconf),
	                 1);
	assert_int_equal(ctl(NULL, "-c %s reconcile --merchant ctlrec --from now --to 1h", rconf),
	                 64);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(list_and_show_print_no_body),
	    cmocka_unit_test(replay_of_dead_row_goes_to_first_step_and_is_audited),
	    cmocka_unit_test(replay_of_done_row_changes_nothing),
	    cmocka_unit_test(dry_run_changes_nothing_but_is_audited),
	    cmocka_unit_test(replay_all_takes_the_window),
	    cmocka_unit_test(errors_exit_like_the_daemons),
	    cmocka_unit_test(refund_list_and_show),
	    cmocka_unit_test(reconcile_window_by_hand),
	};
	char cmd[128];
	int rc;

	if (harness_setup(&cf, "ctl", "1 2 3") != 0)
		return 1;
	cf.retry.lease_margin_s = 30;
	snprintf(dir, sizeof(dir), "/tmp/paycb-ctl-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", dir);
	harness_db(&cf, &tdb);
	if (harness_write_conf(&cf, conf_path, NULL) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	harness_teardown(&cf);
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd) != 0)
		printf("# cannot remove %s\n", dir);
	return rc;
}
