/*
 * test_retrier_daemon - the real bin/paycb-retrier processes against MariaDB and Kafka:
 *
 *   - the stuck-row alarm: with no retrier running a row stays due past the threshold; the
 *     retrier that starts raises the alert (alerts row, log line) and /metrics shows the
 *     gauge, which falls back to 0 once the row is leased;
 *   - three retriers racing over 10,000 due rows: each row is republished exactly once per
 *     due period (messages on the step topic counted by id), in two periods, the second one
 *     interrupted by SIGTERM in the middle of the sweeps (each process finishes its sweep,
 *     flushes and exits 0, and every row it leased was published).
 *
 * Daemons are started with harness_spawn from configs written by harness_write_conf; topics
 * are read with fx_read_topic.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "kq.h"
#include "ladder.h"

#define NROWS 10000
#define NRET  3

static struct conf cf;
static struct db tdb;
static char dir[64];

/* log_sum - the sum of the integers after key on the lines of file containing it. */
static long long
log_sum(const char *file, const char *key)
{
	char line[4096], *p;
	long long n = 0;
	FILE *fp = fopen(file, "r");

	if (fp == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp))
		if ((p = strstr(line, key)) != NULL)
			n += atoll(p + strlen(key));
	fclose(fp);
	return n;
}

static long long
q(const char *sql)
{
	struct db d;
	long long v;

	/* A connection per query: the statement cache is keyed by the SQL's address. */
	harness_db(&cf, &d);
	v = harness_count(&d, sql);
	db_close(&d);
	return v;
}

/* http_get - GET path on 127.0.0.1:port into buf; returns the body length or -1. */
static long
http_get(int port, const char *path, char *buf, size_t cap)
{
	struct sockaddr_in sa;
	char req[256];
	size_t got = 0;
	ssize_t n;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	char *body;

	if (fd < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((unsigned short)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		close(fd);
		return -1;
	}
	while (got + 1 < cap && (n = read(fd, buf + got, cap - 1 - got)) > 0)
		got += (size_t)n;
	close(fd);
	buf[got] = '\0';
	if ((body = strstr(buf, "\r\n\r\n")) == NULL)
		return -1;
	memmove(buf, body + 4, strlen(body + 4) + 1);
	return (long)strlen(buf);
}

struct ids_arg {
	unsigned long long lo;
	int *counts, n;
};

static int
ids_cb(void *arg, const rd_kafka_message_t *m)
{
	struct ids_arg *a = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);
	long long id = o ? json_integer_value(json_object_get(o, "id")) : 0;

	if (id >= (long long)a->lo && id < (long long)a->lo + a->n)
		a->counts[id - (long long)a->lo]++;
	json_decref(o);
	return 0;
}

/* scan_ids - counts messages per row id on topic (ids in [lo, lo + n)); returns the total. */
static long long
scan_ids(const char *topic, unsigned long long lo, int *counts, int n)
{
	struct ids_arg a = {lo, counts, n};
	long long total;

	memset(counts, 0, sizeof(int) * (size_t)n);
	total = fx_read_topic(&cf, topic, ids_cb, &a);
	assert_true(total >= 0);
	return total;
}

/* write_conf - cf with these retrier settings, for the daemons. */
static void
write_conf(const char *path, long long interval, long long stuck_after, int admin_port)
{
	cf.retrier.sweep_interval_s = interval;
	cf.retrier.stuck_after_s = stuck_after;
	cf.retrier.admin_port = admin_port;
	cf.retrier.batch = 500;
	assert_int_equal(harness_write_conf(&cf, path, NULL), 0);
}

static void
stuck_alarm_raised_by_the_retrier_that_starts(void **state)
{
	char conf[128], log[128], *body = malloc(1 << 20);
	int port = httpc_free_port(), up = 0;
	long long end;
	int pid;

	(void)state;
	assert_non_null(body);
	/* No retrier has run: the row has been due for two minutes, past the 60 s threshold. */
	assert_int_equal(
	    db_exec(&tdb,
	            "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, "
	            "out_trade_no, amount, currency, body_sha256, retry_count, next_retry_at) "
	            "VALUES ('m1', 'alipay', 'stuck-1', 'o-stuck', '1.00', 'CNY', REPEAT('0', 64), "
	            "1, NOW(3) - INTERVAL 120 SECOND)",
	            NULL, 0, NULL, NULL),
	    DB_OK);
	snprintf(conf, sizeof(conf), "%s/stuck.conf", dir);
	snprintf(log, sizeof(log), "%s/stuck.log", dir);
	write_conf(conf, 5, 60, port);
	pid = harness_spawn("bin/paycb-retrier", conf, log);
	for (end = harness_now_ms() + 20000;
	     harness_now_ms() < end &&
	     q("SELECT COUNT(*) FROM alerts WHERE kind = 'stuck_rows'") < 1;)
		usleep(50 * 1000);
	assert_int_equal(q("SELECT COUNT(*) FROM alerts WHERE kind = 'stuck_rows'"), 1);
	assert_int_equal(harness_file_count(log, "level=error event=alert kind=stuck_rows rows=1"),
	                 1);
	/* The gauge holds until the next check, one sweep interval later. */
	for (end = harness_now_ms() + 4000; harness_now_ms() < end && !up;)
		if (http_get(port, "/metrics", body, 1 << 20) > 0 &&
		    strstr(body, "paycb_retrier_stuck_rows{log=\"pay\"} 1\n"))
			up = 1;
	assert_true(up);
	assert_non_null(strstr(body, "paycb_retrier_sweep_seconds_count"));
	assert_non_null(strstr(body, "paycb_retrier_pending_rows{log=\"pay\",step=\"1\"}"));
	assert_non_null(strstr(body, "paycb_retrier_dead_rows{log=\"pay\"} 0"));
	/* The cycle leased it, so the next check clears the alarm. */
	for (end = harness_now_ms() + 15000;
	     harness_now_ms() < end &&
	     harness_file_count(log, "event=alarm_cleared kind=stuck_rows") == 0;)
		usleep(50 * 1000);
	assert_int_equal(harness_file_count(log, "event=alarm_cleared kind=stuck_rows"), 1);
	assert_true(http_get(port, "/metrics", body, 1 << 20) > 0);
	assert_non_null(strstr(body, "paycb_retrier_stuck_rows{log=\"pay\"} 0\n"));
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);
	assert_int_equal(db_exec(&tdb, "DELETE FROM pay_callback_log", NULL, 0, NULL, NULL), DB_OK);
	free(body);
}

/* race_round - runs NRET retriers until every row is leased (or, with stop_early,
 * until the first republish is logged), then SIGTERMs them; returns republished lines. */
static long long
race_round(const char *conf, int round, int stop_early, long long *per)
{
	char log[NRET][128];
	int pid[NRET];
	long long end, total = 0, lost = 0;

	for (int i = 0; i < NRET; i++) {
		snprintf(log[i], sizeof(log[i]), "%s/race%d-%d.log", dir, round, i);
		pid[i] = harness_spawn("bin/paycb-retrier", conf, log[i]);
	}
	for (end = harness_now_ms() + 60000; harness_now_ms() < end;) {
		if (stop_early) {
			long long n = 0;
			for (int i = 0; i < NRET; i++)
				n += harness_file_count(log[i], "event=republished");
			if (n > 0)
				break;
		} else if (q("SELECT COUNT(*) FROM pay_callback_log WHERE status = 0 AND "
		             "next_retry_at <= NOW(3)") == 0) {
			break;
		}
		usleep(20 * 1000);
	}
	/* Each process finishes the sweep it is in, flushes and exits 0. */
	for (int i = 0; i < NRET; i++)
		assert_int_equal(harness_stop(pid[i], SIGTERM, 30000), 0);
	for (int i = 0; i < NRET; i++) {
		per[i] = harness_file_count(log[i], "event=republished");
		total += per[i];
		lost += log_sum(log[i], " lost_race=");
		assert_int_equal(harness_file_count(log[i], "event=republish_failed"), 0);
	}
	printf("# round %d: republished %lld + %lld + %lld = %lld; leases lost to another "
	       "retrier: %lld\n",
	       round, per[0], per[1], per[2], total, lost);
	return total;
}

static void
three_retriers_publish_each_due_row_once_per_period(void **state)
{
	static int counts[NROWS];
	char conf[128], topic[256];
	long long per[NRET], t0, lo, leased, r2, r3, total, base;
	int ones = 0, twos = 0, bad = 0;

	(void)state;
	assert_int_equal(
	    db_exec(
	        &tdb,
	        "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, "
	        "out_trade_no, amount, currency, body_sha256, retry_count, next_retry_at, "
	        "raw_body) SELECT 'm1', 'wxpay', CONCAT('race', seq), CONCAT('o', seq % 997), "
	        "'1.00', 'CNY', REPEAT('0', 64), 1, NOW(3) - INTERVAL (seq % 7) SECOND, 'x' FROM "
	        "seq_1_to_10000",
	        NULL, 0, NULL, NULL),
	    DB_OK);
	lo = q("SELECT MIN(id) FROM pay_callback_log");
	assert_int_equal(q("SELECT MAX(id) - MIN(id) + 1 FROM pay_callback_log"), NROWS);
	snprintf(conf, sizeof(conf), "%s/race.conf", dir);
	/* The lease (step 1's delay + 120 s) outlasts the test: one due period per round. */
	write_conf(conf, 1, 3600, 0);
	ladder_topic(&cf, 1, topic, sizeof(topic));
	/* Earlier tests' messages stay on the topic; only this test's ids are counted. */
	base = scan_ids(topic, (unsigned long long)lo, counts, NROWS);

	t0 = harness_now_ms();
	assert_int_equal(race_round(conf, 1, 0, per), NROWS);
	printf("# round 1: all %d rows leased and published by %d retriers in %lld ms\n", NROWS,
	       NRET, harness_now_ms() - t0);
	assert_int_equal(scan_ids(topic, (unsigned long long)lo, counts, NROWS), base + NROWS);
	for (int i = 0; i < NROWS; i++)
		ones += counts[i] == 1;
	assert_int_equal(ones, NROWS);

	/* Second period: every lease expires at once (their messages were lost), and the
	 * retriers are stopped in the middle of their sweeps. */
	assert_int_equal(db_exec(&tdb,
	                         "UPDATE pay_callback_log SET next_retry_at = NOW(3) - "
	                         "INTERVAL 1 SECOND",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	r2 = race_round(conf, 2, 1, per);
	leased = q("SELECT COUNT(*) FROM pay_callback_log WHERE next_retry_at > NOW(3)");
	printf("# round 2 stopped by SIGTERM: %lld rows leased, %lld republished\n", leased, r2);
	assert_int_equal(r2, leased);
	total = scan_ids(topic, (unsigned long long)lo, counts, NROWS);
	assert_int_equal(total, base + NROWS + leased);
	/* What round 2 did not reach, round 3 does; then every row has exactly two. */
	r3 = race_round(conf, 3, 0, per);
	assert_int_equal(r2 + r3, NROWS);
	total = scan_ids(topic, (unsigned long long)lo, counts, NROWS);
	assert_int_equal(total, base + 2 * NROWS);
	for (int i = 0; i < NROWS; i++) {
		twos += counts[i] == 2;
		bad += counts[i] != 2;
	}
	printf("# after two periods: %d rows with exactly 2 messages, %d otherwise\n", twos, bad);
	assert_int_equal(twos, NROWS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(stuck_alarm_raised_by_the_retrier_that_starts),
	    cmocka_unit_test(three_retriers_publish_each_due_row_once_per_period),
	};
	char cmd[128];
	int rc;

	if (harness_setup(&cf, "rdaemon", "1 2 3") != 0)
		return 1;
	cf.retry.lease_margin_s = 120;
	cf.retry.initial_lease_s = 60;
	snprintf(dir, sizeof(dir), "/tmp/paycb-retrier-XXXXXX");
	if (mkdtemp(dir) == NULL)
		return 1;
	harness_db(&cf, &tdb);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&tdb);
	harness_teardown(&cf);
	if (getenv("PAYCB_KEEP_TEST_FILES") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			printf("# cannot remove %s\n", dir);
	} else {
		printf("# logs kept in %s\n", dir);
	}
	return rc;
}
