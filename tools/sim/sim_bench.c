/*
 * sim_bench - the plain-client measurements `make bench` sets beside the pipeline's.
 *
 * `dbceiling --shape reserve` runs ingest's reservation, the very INSERT ingest runs
 * (cblog_reserve) with a body of a WeChat notification's size, from C connections at once:
 * the database's own ceiling for what ingest does per notification. `--shape process` runs
 * the statements the processor issues for one payment (processor_handle.c, _pay.c,
 * _outbox.c: the unlocked look at the row and its order's earlier callbacks, then in one
 * transaction the row and the order locked FOR UPDATE, the conditional UPDATE, two outbox
 * INSERTs and the done mark), without Kafka: the ceiling for a processor's transaction.
 * The processor does more than that per callback (it consumes, publishes both events and
 * marks them sent, in batches, after the commit); none of it is in the ceiling.
 *
 * `drain` waits until a backlog of rows is finished and reports how fast the processors
 * finished it, from the rows' own done_at times, so the polling interval does not enter.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cblog.h"
#include "clock.h"
#include "daemon.h"
#include "msg.h"
#include "sim.h"

/* The statements below are copies of the daemons' own; keep them in step (the reservation
 * is not: it is cblog_reserve itself). */
static const char *SQL_ORDER =
    "INSERT INTO orders (merchant_id, out_trade_no, amount, currency) VALUES (?, ?, ?, ?)";
static const char *SQL_PRECHECK =
    "SELECT c.status, c.retry_count, (SELECT COUNT(*) FROM pay_callback_log e FORCE INDEX "
    "(idx_order) WHERE e.merchant_id = c.merchant_id AND e.out_trade_no = c.out_trade_no AND "
    "e.status = 0 AND e.retry_count = 0 AND (e.created_at < c.created_at OR (e.created_at = "
    "c.created_at AND e.id < c.id))) + (SELECT COUNT(*) FROM refund_callback_log e FORCE "
    "INDEX (idx_order) WHERE e.merchant_id = c.merchant_id AND e.out_trade_no = "
    "c.out_trade_no AND e.status = 0 AND e.retry_count = 0 AND e.created_at < c.created_at), "
    "TIMESTAMPDIFF(MICROSECOND, c.created_at, NOW(3)) DIV 1000 FROM pay_callback_log c WHERE "
    "c.id = ?";
static const char *SQL_LOCK_ROW =
    "SELECT merchant_id, channel, channel_trade_no, out_trade_no, CAST(amount AS CHAR), "
    "currency, status, retry_count, LEFT(DATE_FORMAT(created_at, '%Y-%m-%d %H:%i:%s.%f'), "
    "23), LEFT(DATE_FORMAT(NOW(3), '%Y-%m-%d %H:%i:%s.%f'), 23) FROM pay_callback_log "
    "WHERE id = ? FOR UPDATE";
static const char *SQL_LOCK_ORDER =
    "SELECT id, CAST(amount AS CHAR), currency, status, IFNULL(channel, ''), "
    "IFNULL(channel_trade_no, ''), CAST(refunded_amount AS CHAR) FROM orders WHERE "
    "merchant_id = ? AND out_trade_no = ? FOR UPDATE";
static const char *SQL_PAY_ORDER =
    "UPDATE orders SET status = 'PAID', paid_at = NOW(3), channel = ?, channel_trade_no = ? "
    "WHERE merchant_id = ? AND out_trade_no = ? AND status = 'PENDING'";
static const char *SQL_EVENT =
    "INSERT INTO order_events (event_id, merchant_id, out_trade_no, event_type, payload, "
    "callback_id) VALUES (?, ?, ?, ?, ?, ?)";
static const char *SQL_DONE =
    "UPDATE pay_callback_log SET status = 1, outcome = ?, done_at = NOW(3) WHERE id = ? AND "
    "status = 0";

struct ceiling {
	const struct conf *cf;
	int process;
	int count, conc, index;
	char run[24];
	unsigned long long *rows; /* process: the callback row of each item */
	struct sim_lat *lat;
	int failed;
	char err[256];
};

static char body[1200];

/* one_reserve - ingest's INSERT (cblog_reserve) for item i of run; *id gets the row id. */
static enum db_rc
one_reserve(struct db *db, const char *run, int i, unsigned long long *id)
{
	char trade[64];
	struct cblog_row r = {
	    .log = CBLOG_PAY, .merchant_id = "default", .channel = "wxpay",
	    .channel_trade_no = trade, .out_trade_no = trade, .event_id = trade,
	    .event_type = "TRANSACTION.SUCCESS", .status = "SUCCESS", .amount = "88.88",
	    .currency = "CNY", .body = body, .body_len = sizeof(body),
	    .body_sha256 = "0000000000000000000000000000000000000000000000000000000000000000",
	    .lease_s = 60};

	snprintf(trade, sizeof(trade), "%s-%d", run, i);
	return cblog_reserve(db, &r, id);
}

/* one_process - the processor's statements for the payment in row id. */
static enum db_rc
one_process(struct db *db, unsigned long long id)
{
	char s[10][160], o[7][160], payload[1200], event_id[MSG_EVENT_ID_MAX + 1];
	struct db_in in1[1] = {DBI_I64(id)};
	struct db_out st[4] = {DBO_I64(), DBO_I64(), DBO_I64(), DBO_I64()};
	struct db_out row[10], ord[7];
	unsigned long long n = 0, ev[2] = {0, 0};
	static const char *const types[2] = {"order.paid.shipment", "order.paid.points"};
	enum db_rc rc;

	for (int k = 0; k < 10; k++)
		row[k] = k == 6 || k == 7 ? DBO_I64() : DBO_STR(s[k], sizeof(s[k]));
	for (int k = 0; k < 7; k++)
		ord[k] = k == 0 ? DBO_I64() : DBO_STR(o[k], sizeof(o[k]));
	if ((rc = db_query(db, SQL_PRECHECK, in1, 1, st, 4, NULL, NULL, &n)) != DB_OK ||
	    (rc = db_begin(db)) != DB_OK ||
	    (rc = db_query(db, SQL_LOCK_ROW, in1, 1, row, 10, NULL, NULL, &n)) != DB_OK)
		goto fail;
	{
		struct db_in in[2] = {DBI_STR(s[0]), DBI_STR(s[3])};
		if ((rc = db_query(db, SQL_LOCK_ORDER, in, 2, ord, 7, NULL, NULL, &n)) != DB_OK)
			goto fail;
	}
	{
		struct db_in in[4] = {DBI_STR(s[1]), DBI_STR(s[2]), DBI_STR(s[0]), DBI_STR(s[3])};
		if ((rc = db_exec(db, SQL_PAY_ORDER, in, 4, &n, NULL)) != DB_OK)
			goto fail;
	}
	for (int k = 0; k < 2; k++) {
		if (msg_event_id(s[0], s[3], types[k], NULL, event_id, sizeof(event_id)) < 0) {
			rc = DB_FATAL;
			goto fail;
		}
		snprintf(
		    payload, sizeof(payload),
		    "{\"v\":1,\"event_id\":\"%s\",\"event_type\":\"%s\",\"merchant_id\":\"%s\","
		    "\"out_trade_no\":\"%s\",\"amount\":\"%s\",\"currency\":\"%s\","
		    "\"channel\":\"%s\",\"channel_trade_no\":\"%s\",\"callback_id\":%llu,"
		    "\"at\":\"%s\"}",
		    event_id, types[k], s[0], s[3], s[4], s[5], s[1], s[2], id, s[9]);
		struct db_in in[6] = {DBI_STR(event_id), DBI_STR(s[0]),    DBI_STR(s[3]),
		                      DBI_STR(types[k]), DBI_STR(payload), DBI_I64(id)};
		if ((rc = db_exec(db, SQL_EVENT, in, 6, NULL, &ev[k])) != DB_OK)
			goto fail;
	}
	{
		struct db_in in[2] = {DBI_STR("paid"), DBI_I64(id)};
		if ((rc = db_exec(db, SQL_DONE, in, 2, &n, NULL)) != DB_OK ||
		    (rc = db_commit(db)) != DB_OK)
			goto fail;
	}
	return DB_OK;
fail:
	if (!db->broken)
		db_rollback(db);
	return rc;
}

static void *
ceiling_thread(void *arg)
{
	struct ceiling *c = arg;
	struct db db;

	if (db_open(&db, &c->cf->db) != DB_OK) {
		snprintf(c->err, sizeof(c->err), "%s", db.last_error);
		c->failed = c->count;
		return NULL;
	}
	for (int i = c->index; i < c->count; i += c->conc) {
		long long t0 = clock_mono_us();
		unsigned long long id;
		enum db_rc rc =
		    c->process ? one_process(&db, c->rows[i]) : one_reserve(&db, c->run, i, &id);

		if (rc != DB_OK) {
			c->failed++;
			snprintf(c->err, sizeof(c->err), "%s", db.last_error);
			continue;
		}
		sim_lat_add(c->lat, clock_mono_us() - t0);
	}
	db_close(&db);
	return NULL;
}

/* prepare_backlog - orders and pending rows for the process shape, untimed. */
static int
prepare_backlog(const struct conf *cf, const char *run, int count, unsigned long long *rows,
                char *err, size_t errlen)
{
	struct db db;
	int rc = -1;

	if (db_open(&db, &cf->db) != DB_OK) {
		snprintf(err, errlen, "%s", db.last_error);
		return -1;
	}
	for (int i = 0; i < count; i++) {
		char trade[64];

		snprintf(trade, sizeof(trade), "%s-%d", run, i);
		struct db_in in[4] = {DBI_STR("default"), DBI_STR(trade), DBI_STR("88.88"),
		                      DBI_STR("CNY")};
		if (i % 500 == 0 && db_begin(&db) != DB_OK)
			goto done;
		if (db_exec(&db, SQL_ORDER, in, 4, NULL, NULL) != DB_OK ||
		    one_reserve(&db, run, i, &rows[i]) != DB_OK)
			goto done;
		if ((i % 500 == 499 || i == count - 1) && db_commit(&db) != DB_OK)
			goto done;
	}
	rc = 0;
done:
	if (rc != 0)
		snprintf(err, errlen, "preparing the backlog: %s", db.last_error);
	db_close(&db);
	return rc;
}

int
sim_dbceiling_main(int argc, char **argv)
{
	static const struct option lo[] = {{"shape", 1, NULL, 's'}, {"concurrency", 1, NULL, 'C'},
	                                   {"count", 1, NULL, 'n'}, {"report", 1, NULL, 'r'},
	                                   {"help", 0, NULL, 'h'},  {NULL, 0, NULL, 0}};
	const char *conf = getenv("PAYCB_CONF"), *shape = "reserve", *report = NULL;
	struct ceiling *c = NULL;
	pthread_t *t = NULL;
	unsigned long long *rows = NULL;
	struct sim_lat lat;
	struct conf cf;
	char err[512], a[32], b[32], d[32];
	int conc = 8, count = 5000, failed = 0, opt, rc = EXIT_SOFTWARE;
	long long t0, us, t_run;

	memset(&cf, 0, sizeof(cf));
	sim_lat_init(&lat);
	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf = optarg;
			break;
		case 's':
			shape = optarg;
			break;
		case 'C':
			conc = atoi(optarg);
			break;
		case 'n':
			count = atoi(optarg);
			break;
		case 'r':
			report = optarg;
			break;
		default:
			fprintf(stderr,
			        "usage: paycb-sim dbceiling -c CONF [--shape reserve|process] "
			        "[--concurrency C] [--count N] [--report FILE]\n");
			rc = opt == 'h' ? 0 : EXIT_USAGE;
			goto done;
		}
	}
	if (conf == NULL || conc < 1 || conc > 1024 || count < conc ||
	    (strcmp(shape, "reserve") != 0 && strcmp(shape, "process") != 0)) {
		fprintf(stderr, "paycb-sim dbceiling: need -c CONF, --shape reserve|process, "
		                "1 <= concurrency <= count\n");
		rc = EXIT_USAGE;
		goto done;
	}
	if (conf_bootstrap(conf, PROC_SIM, &cf, "paycb-sim") != 0) {
		rc = EXIT_CONFIG;
		goto done;
	}
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (char)('a' + i % 26);
	t_run = clock_wall_us();
	if ((c = calloc((size_t)conc, sizeof(*c))) == NULL ||
	    (t = calloc((size_t)conc, sizeof(*t))) == NULL ||
	    (rows = calloc((size_t)count, sizeof(*rows))) == NULL)
		goto done;
	for (int i = 0; i < conc; i++) {
		c[i] = (struct ceiling){.cf = &cf,
		                        .process = strcmp(shape, "process") == 0,
		                        .count = count,
		                        .conc = conc,
		                        .index = i,
		                        .rows = rows,
		                        .lat = &lat};
		/* One run id for all threads: item i is unique across them. */
		snprintf(c[i].run, sizeof(c[i].run), "DBC%llx", (unsigned long long)t_run);
	}
	if (c[0].process && prepare_backlog(&cf, c[0].run, count, rows, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim dbceiling: %s\n", err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	t0 = clock_mono_us();
	for (int i = 0; i < conc; i++)
		if (pthread_create(&t[i], NULL, ceiling_thread, &c[i]) != 0)
			goto done;
	for (int i = 0; i < conc; i++) {
		pthread_join(t[i], NULL);
		failed += c[i].failed;
	}
	us = clock_mono_us() - t0;
	printf("dbceiling %s: %d %s at concurrency %d in %lld ms: %lld/s, p50 %s, p99 %s, "
	       "p99.9 %s%s%s\n",
	       shape, count - failed, c[0].process ? "payment transactions" : "INSERTs", conc,
	       us / 1000, (long long)(count - failed) * 1000000 / (us > 0 ? us : 1),
	       sim_fmt_us(sim_lat_pct(&lat, 500), a, 32), sim_fmt_us(sim_lat_pct(&lat, 990), b, 32),
	       sim_fmt_us(sim_lat_pct(&lat, 999), d, 32), failed ? "; failures: " : "",
	       failed ? c[0].err : "");
	sim_report_kv(report, NULL, "rate", (long long)(count - failed) * 1000000 / (us ? us : 1));
	sim_report_kv(report, NULL, "p50_us", sim_lat_pct(&lat, 500));
	sim_report_kv(report, NULL, "p99_us", sim_lat_pct(&lat, 990));
	sim_report_kv(report, NULL, "p999_us", sim_lat_pct(&lat, 999));
	sim_report_kv(report, NULL, "failed", failed);
	rc = failed ? SIM_EXIT_MISMATCH : 0;
done:
	free(c);
	free(t);
	free(rows);
	sim_lat_free(&lat);
	conf_free(&cf);
	return rc;
}

/* ---- drain ----------------------------------------------------------------------------- */

static const char *SQL_MAX_ID = "SELECT IFNULL(MAX(id), 0) FROM pay_callback_log";
static const char *SQL_DRAINED =
    "SELECT COUNT(*) FROM pay_callback_log WHERE id > ? AND status <> 0";
/* The k-th finished row's done_at in microseconds since the epoch. */
static const char *SQL_NTH_DONE =
    "SELECT CAST(UNIX_TIMESTAMP(done_at) * 1000000 AS SIGNED) FROM pay_callback_log "
    "WHERE id > ? AND status <> 0 ORDER BY done_at LIMIT 1 OFFSET ?";

/*
 * The longest time between two consecutive finished rows: a stall (a rebalance, a held
 * partition, a database pause) shows here even when the rate hides where it went.
 */
static const char *SQL_MAX_GAP =
    "SELECT IFNULL(MAX(g), 0) FROM (SELECT TIMESTAMPDIFF(MICROSECOND, LAG(done_at) OVER "
    "(ORDER BY done_at), done_at) AS g FROM pay_callback_log WHERE id > ? AND status <> 0) t";

/* nth_done_us - when the k-th (0-based) row of the backlog was finished, or -1. */
static long long
nth_done_us(struct db *db, long long after, long long k)
{
	struct db_in in[2] = {DBI_I64(after), DBI_I64(k)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(db, SQL_NTH_DONE, in, 2, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0)
		return -1;
	return out[0].i;
}

int
sim_drain_main(int argc, char **argv)
{
	static const struct option lo[] = {{"mark", 0, NULL, 'm'},   {"after-id", 1, NULL, 'a'},
	                                   {"count", 1, NULL, 'n'},  {"wait", 1, NULL, 'w'},
	                                   {"report", 1, NULL, 'r'}, {NULL, 0, NULL, 0}};
	const char *conf = getenv("PAYCB_CONF"), *report = NULL;
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;
	long long after = -1, count = 0, deadline, t0;
	struct conf cf;
	struct db db;
	int mark = 0, wait_s = 120, opt, rc = EXIT_USAGE, up = 0;

	memset(&cf, 0, sizeof(cf));
	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1) {
		switch (opt) {
		case 'c':
			conf = optarg;
			break;
		case 'm':
			mark = 1;
			break;
		case 'a':
			after = atoll(optarg);
			break;
		case 'n':
			count = atoll(optarg);
			break;
		case 'w':
			wait_s = atoi(optarg);
			break;
		case 'r':
			report = optarg;
			break;
		default:
			goto usage;
		}
	}
	if (conf == NULL || (!mark && (after < 0 || count < 2)))
		goto usage;
	if (conf_bootstrap(conf, PROC_SIM, &cf, "paycb-sim") != 0) {
		rc = EXIT_CONFIG;
		goto done;
	}
	if (db_open(&db, &cf.db) != DB_OK) {
		fprintf(stderr, "paycb-sim drain: %s\n", db.last_error);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	up = 1;
	if (mark) {
		rc =
		    db_query(&db, SQL_MAX_ID, NULL, 0, out, 1, NULL, NULL, &rows) == DB_OK ? 0 : 69;
		if (rc == 0)
			printf("%lld\n", out[0].i);
		goto done;
	}
	t0 = clock_mono_us();
	deadline = t0 + (long long)wait_s * 1000000;
	for (;;) {
		struct db_in in[1] = {DBI_I64(after)};
		/*
		 * Half a second between looks: each one counts the whole backlog, and at 100 ms
		 * the looks took a few percent of the database's CPU from what is measured. The
		 * rate below comes from done_at, so the interval never enters it.
		 */
		struct timespec ts = {0, 500 * 1000000L};

		if (db_query(&db, SQL_DRAINED, in, 1, out, 1, NULL, NULL, &rows) != DB_OK) {
			fprintf(stderr, "paycb-sim drain: %s\n", db.last_error);
			rc = EXIT_UNAVAILABLE;
			goto done;
		}
		if (out[0].i >= count || clock_mono_us() >= deadline)
			break;
		nanosleep(&ts, NULL);
	}
	/*
	 * The rate is taken between the 10th and the 90th percentile of the rows' done_at: the
	 * consumer group's first rebalances (every processor joins at once) and the last
	 * partitions' tails stay out of it, and the polling interval never enters.
	 */
	{
		long long n = out[0].i, k10 = n / 10, k90 = n - 1 - n / 10;
		long long first = nth_done_us(&db, after, 0), last = nth_done_us(&db, after, n - 1);
		long long t10 = nth_done_us(&db, after, k10), t90 = nth_done_us(&db, after, k90);
		long long span = last - first, mid = t90 - t10;
		long long rate = mid > 0 ? (k90 - k10) * 1000000 / mid : 0, gap = -1;
		struct db_in in[1] = {DBI_I64(after)};

		if (db_query(&db, SQL_MAX_GAP, in, 1, out, 1, NULL, NULL, &rows) == DB_OK && rows)
			gap = out[0].i;
		printf("drain: %lld of %lld rows finished in %lld.%03lld s (first to last); "
		       "%lld/s between the 10th and 90th percentile; longest pause %lld ms\n",
		       n, count, span / 1000000, span % 1000000 / 1000, rate, gap / 1000);
		sim_report_kv(report, NULL, "drain_rows", n);
		sim_report_kv(report, NULL, "drain_span_us", span);
		sim_report_kv(report, NULL, "drain_rate", rate);
		sim_report_kv(report, NULL, "drain_max_gap_us", gap);
		rc = n >= count && first > 0 ? 0 : SIM_EXIT_MISMATCH;
	}
	goto done;
usage:
	fprintf(stderr, "usage: paycb-sim drain -c CONF (--mark | --after-id ID --count N) "
	                "[--wait S] [--report FILE]\n");
done:
	if (up)
		db_close(&db);
	conf_free(&cf);
	return rc;
}
