/*
 * bench_ceiling - `paycb-bench dbceiling`: the plain-client measurements `make bench` sets
 * beside the pipeline's.
 *
 * `dbceiling --shape reserve` runs ingest's reservation, the very INSERT ingest runs
 * (cblog_reserve) with a body of a WeChat notification's size, from C connections at once:
 * the database's own ceiling for what ingest does per notification. `--shape process` runs
 * the statements the processor issues for one payment (processor_pay.c, _outbox.c: on a
 * connection with autocommit off, as the processor's, the row and its order locked FOR
 * UPDATE in one statement with its order's earlier callbacks counted, the conditional
 * UPDATE of the order and the row's done mark in one statement, both outbox events in one
 * INSERT, COMMIT), without Kafka: the ceiling for a processor's transaction.
 * The processor does more than that per callback (it consumes, publishes both events and
 * marks them sent, in batches, after the commit); none of it is in the ceiling.
 *
 * `--shape payment` is the database's work of a whole payment: the reservation INSERT,
 * then the processor's statements for that row, from one plain client per pair of
 * connections (ingest's autocommit one and the processor's; the ceiling the whole pipeline
 * is held against). `--shape publish` is what an
 * acknowledgement must cost: the reservation INSERT, then the callback message published
 * with the producer settings ingest uses and its delivery report waited for.
 * (`drain` is in bench_drain.c.)
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cblog.h"
#include "clock.h"
#include "daemon.h"
#include "kq.h"
#include "msg.h"
#include "bench.h"
#include "sim_lat.h"

/* The statements below are copies of the daemons' own; keep them in step (the reservation
 * is not: it is cblog_reserve itself). */
static const char *SQL_ORDER =
    "INSERT INTO orders (merchant_id, out_trade_no, amount, currency) VALUES (?, ?, ?, ?)";
static const char *SQL_LOCK =
    "SELECT c.merchant_id, c.channel, c.channel_trade_no, '', c.out_trade_no, CAST(c.amount AS "
    "CHAR), 0, c.currency, '', c.status, c.retry_count, LEFT(DATE_FORMAT(c.created_at, "
    "'%Y-%m-%d %H:%i:%s.%f'), 23), LEFT(DATE_FORMAT(NOW(3), '%Y-%m-%d %H:%i:%s.%f'), 23), "
    "(SELECT COUNT(*) FROM pay_callback_log e FORCE INDEX (idx_order) WHERE e.merchant_id = "
    "c.merchant_id AND e.out_trade_no = c.out_trade_no AND e.status = 0 AND (e.created_at < "
    "c.created_at OR (e.created_at = c.created_at AND e.id < c.id))), TIMESTAMPDIFF(MICROSECOND, "
    "c.created_at, NOW(3)) DIV 1000, IFNULL(o.id, 0), IFNULL(CAST(o.amount AS CHAR), ''), "
    "IFNULL(o.currency, ''), IFNULL(o.status, ''), IFNULL(o.channel, ''), "
    "IFNULL(o.channel_trade_no, ''), IFNULL(CAST(o.refunded_amount AS CHAR), '') FROM "
    "pay_callback_log c LEFT JOIN orders o ON o.merchant_id = c.merchant_id AND o.out_trade_no "
    "= c.out_trade_no WHERE c.id = ? FOR UPDATE";
static const char *SQL_PAID_DONE =
    "UPDATE orders o, pay_callback_log c SET o.status = 'PAID', o.paid_at = NOW(3), "
    "o.channel = ?, o.channel_trade_no = ?, c.status = 1, c.outcome = 'paid', "
    "c.done_at = NOW(3) WHERE o.id = ? AND o.status = 'PENDING' AND c.id = ? AND c.status = 0";
static const char *SQL_EVENTS_2 =
    "INSERT INTO order_events (event_id, merchant_id, out_trade_no, event_type, payload, "
    "callback_id) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)";
/*
 * After a run, untimed: its order events are marked sent. Nothing publishes them, and left
 * unsent the retrier's outbox sweep would relay every one of them in whatever `make bench`
 * measures next (26,000 events of the ceilings once did, in the end-to-end phase).
 */
static const char *SQL_EVENTS_SENT =
    "UPDATE order_events SET sent_at = NOW(3) WHERE merchant_id = 'default' AND out_trade_no "
    "LIKE CONCAT(?, '-%') AND sent_at IS NULL";
/* What one item of a ceiling run is (--shape). */
enum shape { SH_RESERVE, SH_PROCESS, SH_PAYMENT, SH_PUBLISH };
static const char *const SHAPES[] = {"reserve", "process", "payment", "publish"};
static const char *const SHAPE_ITEMS[] = {"INSERTs", "payment transactions",
                                          "reservations and payment transactions",
                                          "INSERTs each published and waited for"};

struct ceiling {
	const struct conf *cf;
	enum shape shape;
	int count, conc, index;
	char run[24];
	unsigned long long *rows; /* process: the callback row of each item */
	struct kq_producer *kp;   /* publish: the producer all threads share, as ingest's */
	const char *topic;
	struct sim_lat *lat;
	int failed;
	char err[256];
};

/* The options of one dbceiling run. */
struct ceiling_opts {
	const char *conf, *report;
	enum shape shape;
	int conc, count;
};

static char body[1200];

/* one_reserve - ingest's INSERT (cblog_reserve) for item i of run; *id gets the row id. */
static enum db_rc
one_reserve(struct db *db, const char *run, int i, unsigned long long *id)
{
	char trade[64];
	struct cblog_row r = {
	    .cblog = CBLOG_PAY,
	    .merchant_id = "default",
	    .channel = "wxpay",
	    .channel_trade_no = trade,
	    .out_trade_no = trade,
	    .event_id = trade,
	    .event_type = "TRANSACTION.SUCCESS",
	    .status = "SUCCESS",
	    .amount = "88.88",
	    .currency = "CNY",
	    .body = body,
	    .body_len = sizeof(body),
	    .body_sha256 = "0000000000000000000000000000000000000000000000000000000000000000",
	    .lease_s = 60};

	snprintf(trade, sizeof(trade), "%s-%d", run, i);
	return cblog_reserve(db, &r, id);
}

/* one_events - the two order-event outbox rows of the payment in row id, one INSERT. */
static enum db_rc
one_events(struct db *db, unsigned long long id, char s[22][160])
{
	static const char *const types[2] = {"order.paid.shipment", "order.paid.points"};
	char payload[2][1200], event_id[2][MSG_EVENT_ID_MAX + 1];
	struct db_in in[12];
	unsigned long long ev = 0;

	for (int k = 0; k < 2; k++) {
		if (msg_event_id(s[0], s[4], types[k], NULL, event_id[k], sizeof(event_id[k])) < 0)
			return DB_FATAL;
		snprintf(
		    payload[k], sizeof(payload[k]),
		    "{\"v\":1,\"event_id\":\"%s\",\"event_type\":\"%s\",\"merchant_id\":\"%s\","
		    "\"out_trade_no\":\"%s\",\"amount\":\"%s\",\"currency\":\"%s\","
		    "\"channel\":\"%s\",\"channel_trade_no\":\"%s\",\"callback_id\":%llu,"
		    "\"at\":\"%s\"}",
		    event_id[k], types[k], s[0], s[4], s[5], s[7], s[1], s[2], id, s[12]);
		in[6 * k] = DBI_STR(event_id[k]);
		in[6 * k + 1] = DBI_STR(s[0]);
		in[6 * k + 2] = DBI_STR(s[4]);
		in[6 * k + 3] = DBI_STR(types[k]);
		in[6 * k + 4] = DBI_STR(payload[k]);
		in[6 * k + 5] = DBI_I64(id);
	}
	return db_exec(db, SQL_EVENTS_2, in, 12, NULL, &ev);
}

/* one_process - the processor's statements for the payment in row id (db: autocommit off). */
static enum db_rc
one_process(struct db *db, unsigned long long id)
{
	static const char ints[] = {6, 9, 10, 13, 14, 15};
	char s[22][160];
	struct db_in in1[1] = {DBI_I64(id)};
	struct db_out row[22];
	unsigned long long n = 0;
	enum db_rc rc;

	for (int k = 0; k < 22; k++)
		row[k] = memchr(ints, k, sizeof(ints)) ? DBO_I64() : DBO_STR(s[k], sizeof(s[k]));
	if ((rc = db_begin(db)) != DB_OK ||
	    (rc = db_query(db, SQL_LOCK, in1, 1, row, 22, NULL, NULL, &n)) != DB_OK)
		goto fail;
	{
		struct db_in in[4] = {DBI_STR(s[1]), DBI_STR(s[2]), DBI_I64(row[15].i),
		                      DBI_I64(id)};
		if ((rc = db_exec(db, SQL_PAID_DONE, in, 4, &n, NULL)) != DB_OK)
			goto fail;
	}
	if ((rc = one_events(db, id, s)) != DB_OK || (rc = db_commit(db)) != DB_OK)
		goto fail;
	return DB_OK;
fail:
	if (!db->broken)
		db_rollback(db);
	return rc;
}

/*
 * one_publish - what an acknowledgement must cost at least: ingest's INSERT, then the
 * callback message published and its delivery report waited for (acks=all, idempotent),
 * as ingest does before it answers.
 */
static enum db_rc
one_publish(struct ceiling *c, struct db *db, int i)
{
	struct msg_callback m = {.cblog = CBLOG_PAY, .channel = "wxpay", .attempt = 1};
	char key[256], val[512], err[256];
	int klen, vlen;
	enum db_rc rc;

	if ((rc = one_reserve(db, c->run, i, &m.id)) != DB_OK)
		return rc;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "default");
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s-%d", c->run, i);
	klen = msg_callback_key(&m, key, sizeof(key));
	vlen = msg_callback_encode(&m, val, sizeof(val));
	if (klen < 0 || vlen < 0 ||
	    kq_produce_wait(c->kp, c->topic, key, (size_t)klen, val, (size_t)vlen,
	                    (int)c->cf->ingest.publish_budget_ms, err, sizeof(err)) != 0) {
		snprintf(db->last_error, sizeof(db->last_error), "publish: %s",
		         klen < 0 || vlen < 0 ? "cannot encode" : err);
		return DB_FATAL;
	}
	return DB_OK;
}

/* one_item - item i of the run, in its shape (pdb: the processor's connection). */
static enum db_rc
one_item(struct ceiling *c, struct db *db, struct db *pdb, int i)
{
	unsigned long long id;
	enum db_rc rc;

	switch (c->shape) {
	case SH_PROCESS:
		return one_process(pdb, c->rows[i]);
	case SH_PAYMENT:
		if ((rc = one_reserve(db, c->run, i, &id)) != DB_OK)
			return rc;
		return one_process(pdb, id);
	case SH_PUBLISH:
		return one_publish(c, db, i);
	case SH_RESERVE:
		break;
	}
	return one_reserve(db, c->run, i, &id);
}

static void *
ceiling_thread(void *arg)
{
	struct ceiling *c = arg;
	struct db db, pdb;
	int two = c->shape == SH_PROCESS || c->shape == SH_PAYMENT;

	memset(&pdb, 0, sizeof(pdb));
	/* The processor's statements run on a connection of their own with autocommit off, as
	 * a processor worker's (processor_core.c); the reservation on ingest's kind. */
	if (db_open(&db, &c->cf->db) != DB_OK ||
	    (two && (db_open(&pdb, &c->cf->db) != DB_OK || db_manual_commit(&pdb) != DB_OK))) {
		snprintf(c->err, sizeof(c->err), "%s",
		         db.last_error[0] ? db.last_error : pdb.last_error);
		c->failed = c->count;
		goto done;
	}
	for (int i = c->index; i < c->count; i += c->conc) {
		long long t0 = clock_mono_us();

		if (one_item(c, &db, &pdb, i) != DB_OK) {
			c->failed++;
			snprintf(c->err, sizeof(c->err), "%s",
			         pdb.last_error[0] ? pdb.last_error : db.last_error);
			continue;
		}
		sim_lat_add(c->lat, clock_mono_us() - t0);
	}
done:
	db_close(&db);
	if (two)
		db_close(&pdb);
	return NULL;
}

/*
 * prepare_backlog - the orders (and for the process shape their pending rows) of the run,
 * untimed; rows is NULL when only the orders are wanted.
 */
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
		    (rows && one_reserve(&db, run, i, &rows[i]) != DB_OK))
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

/* events_sent - marks the run's order events sent (see SQL_EVENTS_SENT); best effort. */
static void
events_sent(const struct conf *cf, const char *run)
{
	struct db_in in[1] = {DBI_STR(run)};
	struct db db;

	if (db_open(&db, &cf->db) != DB_OK)
		return;
	if (db_exec(&db, SQL_EVENTS_SENT, in, 1, NULL, NULL) != DB_OK)
		fprintf(stderr, "paycb-bench dbceiling: marking the run's events sent: %s\n",
		        db.last_error);
	db_close(&db);
}

/* ceiling_opts - parses dbceiling's options; returns 0, or the exit code to end with. */
static int
ceiling_opts(int argc, char **argv, struct ceiling_opts *o)
{
	static const struct option lo[] = {{"shape", 1, NULL, 's'}, {"concurrency", 1, NULL, 'C'},
	                                   {"count", 1, NULL, 'n'}, {"report", 1, NULL, 'r'},
	                                   {"help", 0, NULL, 'h'},  {NULL, 0, NULL, 0}};
	const char *shape = "reserve";
	int opt, known = 0;

	*o = (struct ceiling_opts){.conf = getenv("PAYCB_CONF"), .conc = 8, .count = 5000};
	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1) {
		if (opt == 'c')
			o->conf = optarg;
		else if (opt == 's')
			shape = optarg;
		else if (opt == 'C')
			o->conc = atoi(optarg);
		else if (opt == 'n')
			o->count = atoi(optarg);
		else if (opt == 'r')
			o->report = optarg;
		else {
			fprintf(stderr, "usage: paycb-bench dbceiling -c CONF "
			                "[--shape reserve|process|payment|publish] "
			                "[--concurrency C] [--count N] [--report FILE]\n");
			return opt == 'h' ? -1 : EXIT_USAGE;
		}
	}
	for (size_t k = 0; k < sizeof(SHAPES) / sizeof(SHAPES[0]); k++)
		if (strcmp(shape, SHAPES[k]) == 0) {
			o->shape = (enum shape)k;
			known = 1;
		}
	if (o->conf == NULL || o->conc < 1 || o->conc > 1024 || o->count < o->conc || !known) {
		fprintf(stderr, "paycb-bench dbceiling: need -c CONF, --shape "
		                "reserve|process|payment|publish, 1 <= concurrency <= count\n");
		return EXIT_USAGE;
	}
	return 0;
}

/* ceiling_report - the run's one line and its key=value report; returns the exit code. */
static int
ceiling_report(const struct ceiling_opts *o, const struct ceiling *c, struct sim_lat *lat,
               long long us, long long run_cpu_ms, int failed)
{
	long long rate = (long long)(o->count - failed) * 1000000 / (us > 0 ? us : 1);
	char a[32], b[32], d[32];

	printf("dbceiling %s: %d %s at concurrency %d in %lld ms: %lld/s, p50 %s, p99 %s, "
	       "p99.9 %s%s%s\n",
	       SHAPES[o->shape], o->count - failed, SHAPE_ITEMS[o->shape], o->conc, us / 1000, rate,
	       sim_fmt_us(sim_lat_pct(lat, 500), a, 32), sim_fmt_us(sim_lat_pct(lat, 990), b, 32),
	       sim_fmt_us(sim_lat_pct(lat, 999), d, 32), failed ? "; failures: " : "",
	       failed ? c[0].err : "");
	sim_report_kv(o->report, NULL, "rate", rate);
	sim_report_kv(o->report, NULL, "p50_us", sim_lat_pct(lat, 500));
	sim_report_kv(o->report, NULL, "p99_us", sim_lat_pct(lat, 990));
	sim_report_kv(o->report, NULL, "p999_us", sim_lat_pct(lat, 999));
	sim_report_kv(o->report, NULL, "failed", failed);
	/* The whole command's, set-up included, as tools/bench.sh takes MariaDB's around it. */
	sim_report_kv(o->report, NULL, "cpu_ms", sim_cpu_ms());
	/* The timed window's alone: the client's side of what an operation costs. */
	sim_report_kv(o->report, NULL, "run_cpu_ms", run_cpu_ms);
	return failed ? BENCH_EXIT_MISMATCH : 0;
}

/* ceiling_run - the threads of one run over c[0..conc); returns the exit code. */
static int
ceiling_run(const struct ceiling_opts *o, struct ceiling *c, struct sim_lat *lat)
{
	pthread_t *t = calloc((size_t)o->conc, sizeof(*t));
	int failed = 0, started = 0, rc = EXIT_SOFTWARE;
	long long t0 = clock_mono_us(), cpu0 = sim_cpu_ms();

	if (t == NULL)
		return rc;
	for (; started < o->conc; started++)
		if (pthread_create(&t[started], NULL, ceiling_thread, &c[started]) != 0)
			break;
	for (int i = 0; i < started; i++) {
		pthread_join(t[i], NULL);
		failed += c[i].failed;
	}
	if (started == o->conc)
		rc = ceiling_report(o, c, lat, clock_mono_us() - t0, sim_cpu_ms() - cpu0, failed);
	free(t);
	return rc;
}

int
bench_dbceiling_main(int argc, char **argv)
{
	struct ceiling_opts o;
	struct ceiling *c = NULL;
	struct kq_producer *kp = NULL;
	unsigned long long *rows = NULL;
	struct sim_lat lat;
	struct conf cf;
	char err[512], topic[256];
	int rc;

	memset(&cf, 0, sizeof(cf));
	sim_lat_init(&lat);
	if ((rc = ceiling_opts(argc, argv, &o)) != 0) {
		rc = rc < 0 ? 0 : rc;
		goto done;
	}
	if ((rc = conf_bootstrap(o.conf, BENCH_PROG, &cf, "paycb-bench")) != 0) {
		goto done;
	}
	for (size_t i = 0; i < sizeof(body); i++)
		body[i] = (char)('a' + i % 26);
	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	rc = EXIT_SOFTWARE;
	if ((c = calloc((size_t)o.conc, sizeof(*c))) == NULL ||
	    (rows = calloc((size_t)o.count, sizeof(*rows))) == NULL)
		goto done;
	if (o.shape == SH_PUBLISH && (kq_producer_new(&cf.kafka, &kp, err, sizeof(err)) != 0 ||
	                              kq_producer_warm(kp, topic, 5000) != 0)) {
		fprintf(stderr, "paycb-bench dbceiling: %s\n", kp ? "the broker is away" : err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	for (int i = 0; i < o.conc; i++) {
		c[i] = (struct ceiling){.cf = &cf,
		                        .shape = o.shape,
		                        .count = o.count,
		                        .conc = o.conc,
		                        .index = i,
		                        .rows = rows,
		                        .kp = kp,
		                        .topic = topic,
		                        .lat = &lat};
		/* One run id for all threads: item i is unique across them. */
		snprintf(c[i].run, sizeof(c[i].run), "DBC%llx",
		         (unsigned long long)clock_wall_us());
		if (i > 0)
			memcpy(c[i].run, c[0].run, sizeof(c[i].run));
	}
	if ((o.shape == SH_PROCESS || o.shape == SH_PAYMENT) &&
	    prepare_backlog(&cf, c[0].run, o.count, o.shape == SH_PROCESS ? rows : NULL, err,
	                    sizeof(err)) != 0) {
		fprintf(stderr, "paycb-bench dbceiling: %s\n", err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	rc = ceiling_run(&o, c, &lat);
	if (o.shape == SH_PROCESS || o.shape == SH_PAYMENT)
		events_sent(&cf, c[0].run);
done:
	if (kp)
		kq_producer_free(kp);
	free(c);
	free(rows);
	sim_lat_free(&lat);
	conf_free(&cf);
	return rc;
}
