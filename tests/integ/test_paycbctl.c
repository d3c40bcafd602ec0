/*
 * test_paycbctl - the real bin/paycbctl against MariaDB and Kafka: list and show never print
 * a raw body; a replay of a dead row resets it, publishes it on the first retry step's topic
 * (never the main topic) and writes an audit row; a replay of a done row changes nothing and
 * says so; a dry run changes nothing but is audited; --all replays a time window; errors
 * exit like the daemons' (78 for configuration, 64 for usage).
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
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"
#include "kq.h"
#include "ladder.h"

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
