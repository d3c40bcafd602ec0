/*
 * bench_drain - `paycb-bench drain`: waits until a backlog of rows is finished and reports how
 * fast the processors finished it, from the rows' own done_at times, so the polling
 * interval does not enter; `--mark` prints the newest row id, the backlog's start.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "bench.h"
#include "sim_lat.h"

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

/* drain_opts - parses drain's options; returns 0 or EXIT_USAGE (usage printed). */
static int
drain_opts(int argc, char **argv, const char **conf, const char **report, int *mark,
           long long *after, long long *count, int *wait_s)
{
	static const struct option lo[] = {{"mark", 0, NULL, 'm'},   {"after-id", 1, NULL, 'a'},
	                                   {"count", 1, NULL, 'n'},  {"wait", 1, NULL, 'w'},
	                                   {"report", 1, NULL, 'r'}, {NULL, 0, NULL, 0}};
	int opt, bad = 0;

	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1) {
		if (opt == 'c')
			*conf = optarg;
		else if (opt == 'm')
			*mark = 1;
		else if (opt == 'a')
			*after = atoll(optarg);
		else if (opt == 'n')
			*count = atoll(optarg);
		else if (opt == 'w')
			*wait_s = atoi(optarg);
		else if (opt == 'r')
			*report = optarg;
		else
			bad = 1;
	}
	if (bad || *conf == NULL || (!*mark && (*after < 0 || *count < 2))) {
		fprintf(stderr,
		        "usage: paycb-bench drain -c CONF (--mark | --after-id ID --count N) "
		        "[--wait S] [--report FILE]\n");
		return EXIT_USAGE;
	}
	return 0;
}

/* drain_wait - waits until count rows after after are done (or wait_s); *n gets how many. */
static int
drain_wait(struct db *db, long long after, long long count, int wait_s, long long *n)
{
	long long deadline = clock_mono_us() + (long long)wait_s * 1000000;
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	for (;;) {
		struct db_in in[1] = {DBI_I64(after)};
		/*
		 * Half a second between looks: each one counts the whole backlog, and at 100 ms
		 * the looks took a few percent of the database's CPU from what is measured. The
		 * rate below comes from done_at, so the interval never enters it.
		 */
		struct timespec ts = {0, 500 * 1000000L};

		if (db_query(db, SQL_DRAINED, in, 1, out, 1, NULL, NULL, &rows) != DB_OK) {
			fprintf(stderr, "paycb-bench drain: %s\n", db->last_error);
			return EXIT_UNAVAILABLE;
		}
		*n = out[0].i;
		if (*n >= count || clock_mono_us() >= deadline)
			return 0;
		nanosleep(&ts, NULL);
	}
}

/*
 * drain_report - the rate of the n finished rows, taken between the 10th and the 90th
 * percentile of their done_at: the consumer group's first rebalances (every processor joins
 * at once) and the last partitions' tails stay out of it, and the polling interval never
 * enters. Returns the exit code.
 */
static int
drain_report(struct db *db, const char *report, long long after, long long count, long long n)
{
	long long k10 = n / 10, k90 = n - 1 - n / 10;
	long long first = nth_done_us(db, after, 0), last = nth_done_us(db, after, n - 1);
	long long t10 = nth_done_us(db, after, k10), t90 = nth_done_us(db, after, k90);
	long long span = last - first, mid = t90 - t10;
	long long rate = mid > 0 ? (k90 - k10) * 1000000 / mid : 0, gap = -1;
	struct db_in in[1] = {DBI_I64(after)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(db, SQL_MAX_GAP, in, 1, out, 1, NULL, NULL, &rows) == DB_OK && rows)
		gap = out[0].i;
	printf("drain: %lld of %lld rows finished in %lld.%03lld s (first to last); "
	       "%lld/s between the 10th and 90th percentile; longest pause %lld ms\n",
	       n, count, span / 1000000, span % 1000000 / 1000, rate, gap / 1000);
	sim_report_kv(report, NULL, "drain_rows", n);
	sim_report_kv(report, NULL, "drain_span_us", span);
	sim_report_kv(report, NULL, "drain_rate", rate);
	sim_report_kv(report, NULL, "drain_max_gap_us", gap);
	return n >= count && first > 0 ? 0 : BENCH_EXIT_MISMATCH;
}

int
bench_drain_main(int argc, char **argv)
{
	const char *conf = getenv("PAYCB_CONF"), *report = NULL;
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;
	long long after = -1, count = 0, n = 0;
	struct conf cf;
	struct db db;
	int mark = 0, wait_s = 120, rc, up = 0;

	memset(&cf, 0, sizeof(cf));
	if ((rc = drain_opts(argc, argv, &conf, &report, &mark, &after, &count, &wait_s)) != 0)
		goto done;
	if ((rc = conf_bootstrap(conf, BENCH_PROG, &cf, "paycb-bench")) != 0) {
		goto done;
	}
	if (db_open(&db, &cf.db) != DB_OK) {
		fprintf(stderr, "paycb-bench drain: %s\n", db.last_error);
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
	if ((rc = drain_wait(&db, after, count, wait_s, &n)) == 0)
		rc = drain_report(&db, report, after, count, n);
done:
	if (up)
		db_close(&db);
	conf_free(&cf);
	return rc;
}
