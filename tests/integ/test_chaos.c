/*
 * test_chaos - the promise under faults: the whole pipeline (ingest, three processors, two
 * retriers) on a MariaDB and a Kafka of its own, loaded with signed notifications of the three
 * channels (duplicates, payments after close, double payments, amount mismatches, forged
 * requests), while faults are injected at moments drawn from a printed seed: SIGKILL and
 * restart of every daemon, SIGTERM drains, a processor joining and leaving, the broker and the
 * database killed and restarted, and row locks held past the lock-wait timeout.
 *
 * Refunds of every kind come too: full and partial Stripe refunds, a WeChat Pay refund
 * ABNORMAL then SUCCESS, one refund told by both Stripe families, the refund of a second
 * payment, a Stripe refund that fails after it succeeded, the refund of a payment made after
 * the order was closed, Alipay's cumulative refund totals, and a WeChat Pay partial refund
 * followed by a CLOSED one.
 *
 * The liveness faults (issue 17) come as well: the dead-letter topic made unwritable (deleted,
 * the broker's auto-create being off, then recreated), a retry topic deleted and recreated,
 * messages stamped a day ahead on a delay topic (a replay run from a host whose clock is a
 * day ahead), and one retrier restarted with another ladder (a step no processor consumes)
 * for a while. With PAYCB_CHAOS_BROKERS=3 (`make chaos CHAOS_BROKERS=3`) Kafka is a
 * three-broker cluster as in production (deploy/local/kafka-cluster.sh: replication factor 3,
 * min.insync.replicas 2): a broker is killed and restarted, or shut down and started again,
 * and its leaderships move to the others and back, under load.
 *
 * When the load stops and the pipeline is quiet, the database and the outbox are checked:
 * every acknowledged notification has a row, every row is done or dead, every paid order has
 * exactly its two order-paid events, every late or second payment exactly one refund request
 * (DONE once its refund came), every order the refunded amount its refunds moved (and its
 * order.refund events, less its order.refund_reversed ones, add up to it), and no forged
 * request left a row. Also: no row was pending past the end-to-end alarm's threshold without
 * its alarm (an old_pending alert), every dead letter was sent, none twice, and each order's
 * events reached the topic in commit order. The figures end with lost = 0, doubled = 0,
 * wrong = 0, unalarmed = 0, letters_doubled = 0 and reordered = 0.
 *
 * The outbound side runs too: two paycb-reconcilers against the simulator's channel API
 * (`paycb-sim api`: WeChat Pay, Alipay and Stripe, one ledger per channel) for a merchant of
 * the simulator's keys with all three channels, "recon". Its jobs are spread over the three
 * channels at random: payments the channel took but never notified (the reconciler queries
 * every channel of the merchant and must find each at its own), and refund requests of second
 * payments and payments after close (written as the processor writes them) that the
 * reconciler must refund (Stripe's in USD by PaymentIntent, the others in CNY). Its faults: a
 * reconciler killed, and each channel API's own all through the load (every 2 to 4 s, a few
 * of each, drawn for each channel): 5xx, 429 with Retry-After, answers slower than the call's
 * timeout (UNKNOWN), a refund applied and its answer dropped, forged answers (WeChat Pay and
 * Alipay: signed by a stranger; Stripe: about other objects). The ledger of each job's
 * channel is the judge: every refund request refunded exactly once there; every lost payment
 * found by exactly one query, at its channel, and never refunded; every channel had jobs and
 * its faults reached the reconcilers; and no refund request is left REQUESTED longer than the
 * refund ladder without its refund_stuck alert (the other merchant has no API credentials, so
 * its requests wait, alerted).
 *
 * PAYCB_CHAOS_SECONDS (default 40) sets the load time, PAYCB_CHAOS_SEED replays a run and
 * PAYCB_CHAOS_BROKERS=3 runs it on three brokers; `make chaos` runs it for 10 minutes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chan.h"
#include "fixtures.h"
#include "harness.h"
#include "httpc.h"
#include "simapi.h"
#include "topics.h"
#include "kq.h"
#include "ladder.h"
#include "money.h"
#include "msg.h"
#include "retrier.h"

/*
 * The scale-out run (test_scaleout.c builds this file with PAYCB_SCALEOUT) is the same load
 * on two ingest instances, three processors and two retriers, without faults, while
 * partitions are added to the callbacks topic; it adds orders that are paid and then
 * refunded, whose callbacks may cross the partition change.
 */
#ifdef PAYCB_SCALEOUT
#define NINGEST 2
#define TAG     "scale"
#else
#define NINGEST 1
#define TAG     "chaos"
#endif

/*
 * K_REFUND: Stripe, refunded in full by refund.created; K_PARTIAL: 4.00 of it; K_WX_ABNORMAL:
 * WeChat Pay REFUND.ABNORMAL then REFUND.SUCCESS of one refund_id; K_BOTH: Stripe
 * refund.created and charge.refunded for the same 10.00; K_TWICE_REFUND: Stripe paid twice,
 * the second payment refunded; K_REVERSED: Stripe refund.created, then refund.failed;
 * K_CLOSED_REFUND: WeChat Pay, a payment of a CLOSED order, then the channel's refund of it
 * (it settles the refund request, never the order); K_ALI_CUMULATIVE: Alipay, refund_fee
 * 4.00 then 10.00 (the trade's refunded total, the second closing it); K_WX_PARTIAL_CLOSED:
 * WeChat Pay, a refund of 4.00 SUCCESS, then another of 6.00 CLOSED (no money moved).
 */
enum kind {
	K_NORMAL,
	K_CLOSED,
	K_TWICE,
	K_MISMATCH,
	K_FORGED,
	K_REFUND,
	K_PARTIAL,
	K_WX_ABNORMAL,
	K_BOTH,
	K_TWICE_REFUND,
	K_REVERSED,
	K_CLOSED_REFUND,
	K_ALI_CUMULATIVE,
	K_WX_PARTIAL_CLOSED,
	/* The reconciler's (merchant "recon", any of the three channels through the simulator's
	 * channel API): paid at the channel, never notified; a second payment's refund request;
	 * a payment after close's refund request. */
	K_LOST,
	K_RR_TWICE,
	K_RR_CLOSED,
	K_NKINDS
};
static const char *const kind_names[] = {"normal",
                                         "closed",
                                         "twice",
                                         "mismatch",
                                         "forged",
                                         "refund",
                                         "partial",
                                         "wx_abnormal",
                                         "both_families",
                                         "twice_refund",
                                         "reversed",
                                         "closed_refund",
                                         "ali_cumulative",
                                         "wx_partial_closed",
                                         "lost_notification",
                                         "reconciler_refund_twice",
                                         "reconciler_refund_closed"};
enum fault {
	F_KILL_INGEST,
	F_KILL_PROCESSOR,
	F_KILL_RETRIER,
	F_TERM_PROCESSOR,
	F_TERM_RETRIER,
	F_JOIN_LEAVE,
	F_KAFKA_RESTART,
	F_DB_RESTART,
	F_LOCKS,
	F_DLQ_GONE,
	F_RETRY_GONE,
	F_FUTURE,
	F_LADDER,
	F_KILL_RECONCILER,
	F_BROKER_DRAIN, /* three brokers only */
	F_NFAULTS
};
static const char *const fault_names[] = {
    "kill_ingest",  "kill_processor",  "kill_retrier",          "term_processor",
    "term_retrier", "join_leave",      "kafka_restart",         "db_restart",
    "row_locks",    "dlq_unwritable",  "retry_topic_recreated", "future_stamped",
    "ladder_drift", "kill_reconciler", "broker_drain"};

/* The channels as paycb and the simulator name them, by struct job's channel. */
static const char *const chan_names[] = {"wxpay", "alipay", "stripe"};

struct job {
	enum kind kind;
	int channel; /* 0 wxpay, 1 alipay, 2 stripe */
	char order[48];
	char trade[3][48]; /* [0] the payment; then a second payment or a refund id */
	int nnotes;        /* notifications: the payment, then each in turn */
	int copies;
	atomic_int acked[3];
	atomic_int started; /* a sender took it before the load stopped */
};

struct daemon {
	const char *bin;
	char conf[300];
	char log[300];
	int pid;
};

static struct conf cf;
static struct chan_keys K;
static char var[128], conf_path[300];
static int ports[NINGEST], admin_ports[NINGEST];
static unsigned seed;
static int load_seconds;
static struct job *jobs;
static int njobs;
static atomic_int next_job, stop_load, sent, acked, refused_forged;
static int faults[F_NFAULTS];
static struct daemon ingests[NINGEST], procs[4], retriers[2], recons[2];
/* The simulator's channel API: its port and pid, and the reconcilers' configuration. */
static int api_port, api_pid = -1;
static char recon_conf[300];
/* The reconcilers' refund ladder (seconds) and lease, as recon_conf sets them. */
#define RECON_LADDER   "[1, 2, 4]"
#define RECON_LADDER_S 7
#define RECON_LEASE_S  3
static pthread_mutex_t daemons_mu = PTHREAD_MUTEX_INITIALIZER;
static long long t_start;
/* Kafka brokers (1, or 3 for a cluster), the bootstrap list, and the other ladder's config. */
static int nbrokers = 1;
static char brokers[256], drift_conf[300];
/* When the dead-letter topic was last recreated (wall ms): letters sent before are gone. */
static long long dlq_back_ms;

/* ---- services of our own ---------------------------------------------------------------- */

static int
services(const char *what)
{
	char cmd[512];

	snprintf(cmd, sizeof(cmd), "deploy/local/%s >>%s/services.log 2>&1", what, var);
	return system(cmd) == 0 ? 0 : -1;
}

/* Faults run on their own thread, where cmocka's asserts must not be used: failures are
 * printed and counted, and the invariants decide. */
static atomic_int fault_errors;

static void
start(struct daemon *d)
{
	d->pid = harness_spawn(d->bin, d->conf, d->log);
	if (d->pid <= 0) {
		printf("# cannot start %s\n", d->bin);
		atomic_fetch_add(&fault_errors, 1);
	}
}

static void
restart(struct daemon *d, int sig)
{
	harness_stop(d->pid, sig, 30000);
	start(d);
}

/* ---- load ------------------------------------------------------------------------------- */

/* stripe_refund - a Stripe refund object event: status, amount in cents, of payment pi */
static int
stripe_refund(const struct job *j, struct chan_note *n, const char *type, const char *re,
              const char *pi, long long cents, const char *status)
{
	char json[768];

	snprintf(json, sizeof(json),
	         "{\"id\":\"evt_%s_%s\",\"object\":\"event\",\"type\":\"%s\","
	         "\"livemode\":true,\"data\":{\"object\":{\"id\":\"%s\",\"object\":"
	         "\"refund\",\"amount\":%lld,\"currency\":\"usd\",\"status\":\"%s\","
	         "\"payment_intent\":\"%s\",\"metadata\":{\"order_id\":\"%s\"}}}}",
	         re, status, type, re, cents, status, pi, j->order);
	return chan_stripe_note(n, K.stripe_new, json, time(NULL));
}

/* wx_refund - a WeChat Pay refund notification of the payment: its id, fen, status */
static int
wx_refund(const struct job *j, struct chan_note *n, const char *id, long long fen,
          const char *status)
{
	char plain[768], event[32];

	snprintf(plain, sizeof(plain),
	         "{\"mchid\":\"1900000001\",\"out_trade_no\":\"%s\",\"transaction_id\":"
	         "\"%s\",\"out_refund_no\":\"R%s\",\"refund_id\":\"%s\",\"refund_status\":"
	         "\"%s\",\"user_received_account\":\"x\",\"amount\":{\"total\":1000,"
	         "\"refund\":%lld,\"payer_total\":1000,\"payer_refund\":%lld}}",
	         j->order, j->trade[0], id, id, status, fen, fen);
	snprintf(event, sizeof(event), "REFUND.%s", status);
	return chan_wx_note(&K, n, K.wx_cert_key, K.wx_serial, event, plain, time(NULL));
}

/* ali_refund - an Alipay refund notification: the trade's refunded total after request biz */
static int
ali_refund(const struct job *j, struct chan_note *n, const char *biz, const char *fee, int full)
{
	const char *k[] = {"notify_time",  "notify_type",  "notify_id",  "app_id",
	                   "charset",      "version",      "trade_no",   "out_trade_no",
	                   "trade_status", "total_amount", "out_biz_no", "refund_fee",
	                   "gmt_refund"};
	const char *v[] = {"2026-12-02 10:05:00",
	                   "trade_status_sync",
	                   biz,
	                   "2021000000000001",
	                   "utf-8",
	                   "1.0",
	                   j->trade[0],
	                   j->order,
	                   full ? "TRADE_CLOSED" : "TRADE_SUCCESS",
	                   "10.00",
	                   biz,
	                   fee,
	                   "2026-12-02 10:05:00"};

	return chan_ali_note(n, K.ali_key, k, v, 13);
}

static int
build(const struct job *j, int which, struct chan_note *n)
{
	char json[768];

	switch (which == 0 ? K_NORMAL : j->kind) {
	case K_REFUND:
	case K_BOTH:
		if (which == 2) { /* the same money as the charge's running total */
			snprintf(json, sizeof(json),
			         "{\"id\":\"evt_c%s\",\"object\":\"event\",\"type\":"
			         "\"charge.refunded\",\"data\":{\"object\":{\"id\":\"ch_%s\","
			         "\"object\":\"charge\",\"amount\":1000,\"amount_refunded\":"
			         "1000,\"refunded\":true,\"currency\":\"usd\",\"status\":"
			         "\"succeeded\",\"payment_intent\":\"%s\",\"metadata\":{"
			         "\"order_id\":\"%s\"}}}}",
			         j->trade[1], j->trade[0] + 3, j->trade[0], j->order);
			return chan_stripe_note(n, K.stripe_new, json, time(NULL));
		}
		return stripe_refund(j, n, "refund.created", j->trade[1], j->trade[0], 1000,
		                     "succeeded");
	case K_PARTIAL:
		return stripe_refund(j, n, "refund.created", j->trade[1], j->trade[0], 400,
		                     "succeeded");
	case K_REVERSED:
		return stripe_refund(j, n, which == 1 ? "refund.created" : "refund.failed",
		                     j->trade[1], j->trade[0], 1000,
		                     which == 1 ? "succeeded" : "failed");
	case K_WX_ABNORMAL:
		return wx_refund(j, n, j->trade[1], 1000, which == 1 ? "ABNORMAL" : "SUCCESS");
	case K_CLOSED_REFUND:
		return wx_refund(j, n, j->trade[1], 1000, "SUCCESS");
	case K_WX_PARTIAL_CLOSED:
		return which == 1 ? wx_refund(j, n, j->trade[1], 400, "SUCCESS")
		                  : wx_refund(j, n, j->trade[2], 600, "CLOSED");
	case K_ALI_CUMULATIVE:
		return which == 1 ? ali_refund(j, n, j->trade[1], "4.00", 0)
		                  : ali_refund(j, n, j->trade[2], "10.00", 1);
	case K_TWICE_REFUND:
		if (which == 2)
			return stripe_refund(j, n, "refund.created", j->trade[2], j->trade[1], 1000,
			                     "succeeded");
		break;
	default:
		break;
	}
	const char *trade = j->trade[which];
	long long fen = j->kind == K_MISMATCH ? 1001 : 1000;
	char amount[16];

	snprintf(amount, sizeof(amount), "%lld.%02lld", fen / 100, fen % 100);
	switch (j->channel) {
	case 0:
		return chan_wx_pay(&K, n, j->order, trade, fen, K.wx_cert_key, K.wx_serial,
		                   time(NULL));
	case 1:
		return chan_ali_pay(n, j->order, trade, amount, K.ali_key);
	default:
		return chan_stripe_pay(n, K.stripe_new, j->order, trade, fen, time(NULL));
	}
}

static const char *const paths[] = {"/pay/callback/wxpay", "/pay/callback/alipay",
                                    "/pay/callback/stripe"};

/* Sends one notification until the channel's success answer, as a channel does. */
static void
deliver(struct job *j, int which)
{
	long long deadline = harness_now_ms() + (load_seconds + 90) * 1000LL;
	struct chan_note n;
	struct httpc_resp r;

	while (harness_now_ms() < deadline) {
		if (build(j, which, &n) != 0)
			return;
		if (j->kind == K_FORGED)
			n.body[n.len / 2] ^= 1; /* a forgery: the signature cannot match */
		atomic_fetch_add(&sent, 1);
		int rc = chan_post(ports[(which + j->copies + (int)(j - jobs)) % NINGEST],
		                   paths[j->channel], &n, &r);
		free(n.body);
		if (j->kind == K_FORGED) {
			if (rc == 0 && r.status >= 400 && r.status < 500)
				atomic_fetch_add(&refused_forged, 1);
			if (rc == 0 && r.status != 0 && r.status != 503)
				return;
		} else if (rc == 0 && r.status >= 200 && r.status < 300 &&
		           (j->channel != 1 || strcmp(r.body, "success") == 0)) {
			atomic_store(&j->acked[which], 1);
			atomic_fetch_add(&acked, 1);
			return;
		}
		usleep(100 * 1000); /* a channel's re-push, compressed */
	}
}

/* recon_sql - one statement of a reconciler job, retried while the database restarts. */
static int
recon_sql(struct db *db, const char *sql, const struct db_in *in, int nin, long long deadline)
{
	while (harness_now_ms() < deadline) {
		if (db_exec(db, sql, in, nin, NULL, NULL) == DB_OK)
			return 0;
		usleep(200 * 1000);
	}
	return -1;
}

/*
 * recon_job - what the channel and the merchant hold for a reconciler job, in that order: the
 * payment in the channel's ledger, then the order (and the refund request the processor
 * would have written). acked[0] says it was all written; only then is it judged.
 */
static void
recon_job(struct job *j)
{
	long long deadline = harness_now_ms() + 60000;
	const char *ch = chan_names[j->channel], *cur = j->channel == 2 ? "USD" : "CNY";
	const char *paid = j->kind == K_RR_TWICE ? j->trade[1] : j->trade[0];
	const char *status = j->kind == K_LOST       ? "PENDING"
	                     : j->kind == K_RR_TWICE ? "PAID"
	                                             : "CLOSED";
	const char *trade = j->kind == K_RR_TWICE ? j->trade[0] : "";
	struct db_in oin[6] = {DBI_STR(j->order), DBI_STR(cur), DBI_STR(status),
	                       DBI_STR(status),   DBI_STR(ch),  DBI_STR(trade)};
	struct db_in rin[5] = {DBI_STR(ch), DBI_STR(paid), DBI_STR(j->order), DBI_STR(cur),
	                       DBI_STR(j->kind == K_RR_TWICE ? "paid_twice" : "paid_after_close")};
	struct db db;
	int ok = 0;

	while (simapi_order_at(api_port, ch, "recon", j->order, 1000, cur, "PAID", paid) != 0)
		if (harness_now_ms() >= deadline)
			return;
	/* A database restarting (the db_restart fault) is retried by recon_sql, which
	 * reconnects; only a refusal ends the job, and db_close frees what db_open kept. */
	if (db_open(&db, &cf.db) == DB_FATAL) {
		db_close(&db);
		return;
	}
	ok = recon_sql(&db,
	               "INSERT INTO orders (merchant_id, out_trade_no, amount, currency, status, "
	               "channel, channel_trade_no) VALUES ('recon', ?, 10.00, ?, ?, "
	               "IF(? = 'PAID', ?, NULL), NULLIF(?, ''))",
	               oin, 6, deadline) == 0;
	if (ok && j->kind != K_LOST)
		ok = recon_sql(
		         &db,
		         "INSERT INTO refund_requests (merchant_id, channel, channel_trade_no, "
		         "out_trade_no, amount, currency, reason) VALUES ('recon', ?, ?, ?, 10.00, "
		         "?, ?)",
		         rin, 5, deadline) == 0;
	db_close(&db);
	atomic_store(&j->acked[0], ok);
}

static void *
sender(void *arg)
{
	(void)arg;
	for (;;) {
		int i = atomic_fetch_add(&next_job, 1);
		if (i >= njobs || atomic_load(&stop_load))
			return NULL;
		struct job *j = &jobs[i];
		atomic_store(&j->started, 1);
		/* Jobs are spread over the load time, so faults and changes meet traffic. */
		long long due = t_start + (long long)i * load_seconds * 1000 / njobs;
		while (harness_now_ms() < due && !atomic_load(&stop_load))
			usleep(10 * 1000);
		if (j->kind >= K_LOST) {
			recon_job(j);
			continue;
		}
		for (int c = 0; c < j->copies; c++)
			deliver(j, 0);
		/* The rest in turn: each is sent once the one before was acknowledged. */
		for (int w = 1; w < j->nnotes; w++)
			deliver(j, w);
	}
}

/* ---- faults ----------------------------------------------------------------------------- */

static void
hold_locks(void)
{
	struct db db;

	/* Lock a slice of pending orders for longer than the processors' lock wait (5 s). */
	if (db_open(&db, &cf.db) != DB_OK) {
		atomic_fetch_add(&fault_errors, 1);
		db_close(&db);
		return;
	}
	db_begin(&db);
	db_exec(&db,
	        "SELECT id FROM orders WHERE status = 'PENDING' ORDER BY id DESC LIMIT 100 "
	        "FOR UPDATE",
	        NULL, 0, NULL, NULL);
	sleep(7);
	db_rollback(&db);
	db_close(&db);
}

/* ---- the liveness faults ------------------------------------------------------------------ */

static long long
wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* create_topic - creates topic again; right after a deletion the broker refuses the name
 * for a moment, so it tries until it may. */
static int
create_topic(const char *topic, int partitions)
{
	const char *names[1] = {topic};
	long long deadline = harness_now_ms() + 60000;
	char err[256];

	while (harness_now_ms() < deadline) {
		if (kq_create_topics(&cf.kafka, names, &partitions, NULL, 1, 10000, NULL, err,
		                     sizeof(err)) == 0)
			return 0;
		usleep(200 * 1000);
	}
	printf("# cannot create %s again: %s\n", topic, err);
	return -1;
}

/* topic_gone - a topic deleted for a few seconds, under load, then created again. */
static void
topic_gone(const char *suffix, int partitions)
{
	char topic[256];

	conf_topic(&cf, suffix, topic, sizeof(topic));
	if (topics_delete(&cf.kafka, (const char *const[]){topic}, 1, 30000) != 0) {
		atomic_fetch_add(&fault_errors, 1);
		return;
	}
	sleep(3);
	if (create_topic(topic, partitions) != 0)
		atomic_fetch_add(&fault_errors, 1);
}

/*
 * future_stamped - a replay run from a host whose clock is a day ahead: the callback messages
 * of the latest rows go on a delay topic stamped a day ahead. The processors hold each for
 * the step's delay at most, then the row decides (done rows are skipped, an attempt whose
 * failure is recorded already is stale).
 */
static void
future_stamped(void)
{
	struct msg_callback m = {0};
	char topic[256], buf[512], key[256], merchant[65], channel[17], order[129];
	struct db_out out[5] = {DBO_I64(), DBO_STR(merchant, sizeof(merchant)),
	                        DBO_STR(channel, sizeof(channel)), DBO_STR(order, sizeof(order)),
	                        DBO_I64()};
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_t *rk = NULL;
	struct db db;
	char err[256];
	int step = 1 + rand() % ladder_steps(&cf.retry), n = 0;

	ladder_topic(&cf, step, topic, sizeof(topic));
	if (kq_conf_common(c, &cf.kafka, err, sizeof(err)) != 0 ||
	    (rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err))) == NULL) {
		rd_kafka_conf_destroy(c);
		atomic_fetch_add(&fault_errors, 1);
		return;
	}
	if (db_open(&db, &cf.db) == DB_OK) {
		for (int off = 0; off < 10; off++) {
			struct db_in in[1] = {DBI_I64(off)};
			unsigned long long rows = 0;

			if (db_query(
			        &db,
			        "SELECT id, merchant_id, channel, out_trade_no, retry_count FROM "
			        "pay_callback_log ORDER BY id DESC LIMIT ?, 1",
			        in, 1, out, 5, NULL, NULL, &rows) != DB_OK ||
			    rows == 0)
				break;
			m.cblog = CBLOG_PAY;
			m.id = (unsigned long long)out[0].i;
			snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", merchant);
			snprintf(m.channel, sizeof(m.channel), "%s", channel);
			snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", order);
			m.attempt = (int)out[4].i + 1;
			if (msg_callback_encode(&m, buf, sizeof(buf)) < 0 ||
			    msg_callback_key(&m, key, sizeof(key)) < 0)
				continue;
			if (rd_kafka_producev(
			        rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)),
			        RD_KAFKA_V_VALUE(buf, strlen(buf)),
			        RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
			        RD_KAFKA_V_TIMESTAMP(wall_ms() + 86400000LL), RD_KAFKA_V_END) == 0)
				n++;
		}
	}
	db_close(&db);
	rd_kafka_flush(rk, 15000);
	printf("# %d messages stamped a day ahead on %s\n", n, topic);
	rd_kafka_destroy(rk);
}

/* ladder_drift - one retrier runs another ladder for a while: its last step is a delay whose
 * topic exists but no processor consumes (a ladder rolled out to the retriers first). */
static void
ladder_drift(void)
{
	struct daemon *d = &retriers[1];
	const char *conf = d->conf;

	harness_stop(d->pid, SIGTERM, 30000);
	snprintf(d->conf, sizeof(d->conf), "%s", drift_conf);
	start(d);
	sleep(8);
	harness_stop(d->pid, SIGTERM, 30000);
	snprintf(d->conf, sizeof(d->conf), "%s", conf_path);
	(void)conf;
	start(d);
}

/* broker - kafka-cluster.sh for one random broker: kill and up, or down and up. */
static int
broker_fault(const char *how)
{
	char cmd[64];
	int n = 1 + rand() % 3;

	snprintf(cmd, sizeof(cmd), "kafka-cluster.sh %s %d", how, n);
	if (services(cmd) != 0)
		return -1;
	snprintf(cmd, sizeof(cmd), "kafka-cluster.sh up %d", n);
	return services(cmd);
}

static int
fault_applies(enum fault f)
{
	return f != F_BROKER_DRAIN || nbrokers == 3;
}

static void
inject(enum fault f)
{
	pthread_mutex_lock(&daemons_mu);
	switch (f) {
	case F_KILL_INGEST:
		restart(&ingests[0], SIGKILL);
		break;
	case F_KILL_PROCESSOR:
		restart(&procs[rand() % 3], SIGKILL);
		break;
	case F_KILL_RETRIER:
		restart(&retriers[rand() % 2], SIGKILL);
		break;
	case F_TERM_PROCESSOR:
		restart(&procs[rand() % 3], SIGTERM);
		break;
	case F_TERM_RETRIER:
		restart(&retriers[rand() % 2], SIGTERM);
		break;
	case F_JOIN_LEAVE:
		start(&procs[3]);
		break;
	case F_KAFKA_RESTART:
		if (nbrokers == 3 ? broker_fault("kill") != 0
		                  : services("kafka.sh kill") != 0 || services("kafka.sh up") != 0)
			atomic_fetch_add(&fault_errors, 1);
		break;
	case F_BROKER_DRAIN:
		if (broker_fault("down") != 0)
			atomic_fetch_add(&fault_errors, 1);
		break;
	case F_DB_RESTART:
		if (services("mariadb.sh kill") != 0 || services("mariadb.sh up") != 0)
			atomic_fetch_add(&fault_errors, 1);
		break;
	case F_KILL_RECONCILER:
		restart(&recons[rand() % 2], SIGKILL);
		break;
	default:
		break;
	}
	pthread_mutex_unlock(&daemons_mu);
	if (f == F_LOCKS)
		hold_locks();
	if (f == F_DLQ_GONE) {
		topic_gone("callbacks.dlq", 3);
		dlq_back_ms = wall_ms();
	}
	if (f == F_RETRY_GONE) {
		char suffix[64];

		snprintf(suffix, sizeof(suffix), "callbacks.retry.%llds",
		         cf.retry.ladder_s.v[rand() % ladder_steps(&cf.retry)]);
		topic_gone(suffix, (int)cf.kafka.retry_partitions);
	}
	if (f == F_FUTURE)
		future_stamped();
	if (f == F_LADDER) {
		pthread_mutex_lock(&daemons_mu);
		ladder_drift();
		pthread_mutex_unlock(&daemons_mu);
	}
	if (f == F_JOIN_LEAVE) {
		sleep(4); /* the member takes part for a while, then drains and leaves */
		harness_stop(procs[3].pid, SIGTERM, 30000);
		procs[3].pid = 0;
	}
	faults[f]++;
	printf("# fault %s at +%llds\n", fault_names[f], (harness_now_ms() - t_start) / 1000);
}

/*
 * channel_weather - the channel API's own faults go on all through the load: every 2 to 4 s
 * the next requests of each channel fail in each of its ways (a few of each, drawn for each
 * channel), on a generator of its own.
 */
static __attribute__((unused)) void *
channel_weather(void *arg)
{
	unsigned r = seed ^ 0x5eedu;

	(void)arg;
	while (!atomic_load(&stop_load)) {
		for (int c = 0; c < 3; c++) {
			char what[200];

			snprintf(what, sizeof(what),
			         "channel=%s&e5xx=%d&e429=%d&slow=%d&slow_ms=2500&drop=%d&forge=%d",
			         chan_names[c], 1 + rand_r(&r) % 3, 1 + rand_r(&r) % 3,
			         1 + rand_r(&r) % 2, 1 + rand_r(&r) % 2, 1 + rand_r(&r) % 3);
			if (simapi_post(api_port, "/_sim/fault", what) != 0)
				atomic_fetch_add(&fault_errors, 1);
		}
		usleep((useconds_t)(2000 + rand_r(&r) % 2000) * 1000);
	}
	return NULL;
}

static __attribute__((unused)) void *
injector(void *arg)
{
	enum fault order[F_NFAULTS];
	long long end = harness_now_ms() + load_seconds * 1000LL;
	int k = 0, kinds = 0;

	(void)arg;
	/* Every kind that applies once, in a seeded order, then seeded draws until the load
	 * ends. */
	for (int i = 0; i < F_NFAULTS; i++)
		if (fault_applies((enum fault)i))
			order[kinds++] = (enum fault)i;
	for (int i = kinds - 1; i > 0; i--) {
		int r = rand() % (i + 1);
		enum fault t = order[i];
		order[i] = order[r];
		order[r] = t;
	}
	while (harness_now_ms() < end || k < kinds) {
		enum fault f = k < kinds ? order[k] : order[rand() % kinds];

		usleep((useconds_t)(500 + rand() % 2000) * 1000);
		inject(f);
		k++;
	}
	return NULL;
}

#ifdef PAYCB_SCALEOUT
static long long new_partition_messages;

/* Messages in partitions [from, to) of topic, from their high watermarks. */
static long long
messages_in(const char *topic, int from, int to)
{
	char err[256];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_t *rk;
	long long n = 0;

	if (kq_conf_common(c, &cf.kafka, err, sizeof(err)) != 0 ||
	    (rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof(err))) == NULL)
		return -1;
	for (int p = from; p < to; p++) {
		int64_t lo = 0, hi = 0;
		if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 5000) == 0)
			n += hi - lo;
	}
	rd_kafka_destroy(rk);
	return n;
}

/*
 * A third of the way into the load, the callbacks topic grows from its partitions to 16;
 * the load goes on until messages are seen on the new partitions (producers and consumers
 * pick up the change at their next metadata refresh) and its time is up.
 */
static void
add_partitions_under_load(void)
{
	char topic[256], err[512];
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_NewPartitions_t *np;
	rd_kafka_queue_t *qu;
	rd_kafka_event_t *ev;
	rd_kafka_t *rk;
	int before = (int)cf.kafka.partitions;
	long long end = harness_now_ms() + load_seconds * 1000LL;

	conf_topic(&cf, "callbacks", topic, sizeof(topic));
	usleep((useconds_t)load_seconds * 1000 * 333);
	assert_int_equal(kq_conf_common(c, &cf.kafka, err, sizeof(err)), 0);
	rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err));
	assert_non_null(rk);
	np = rd_kafka_NewPartitions_new(topic, 16, err, sizeof(err));
	qu = rd_kafka_queue_new(rk);
	rd_kafka_CreatePartitions(rk, &np, 1, NULL, qu);
	ev = rd_kafka_queue_poll(qu, 30000);
	assert_non_null(ev);
	assert_null(rd_kafka_event_error_string(ev) && rd_kafka_event_error(ev)
	                ? rd_kafka_event_error_string(ev)
	                : NULL);
	rd_kafka_event_destroy(ev);
	rd_kafka_NewPartitions_destroy(np);
	rd_kafka_queue_destroy(qu);
	rd_kafka_destroy(rk);
	printf("# partitions of %s: %d -> 16 at +%llds\n", topic, before,
	       (harness_now_ms() - t_start) / 1000);
	while (harness_now_ms() < end || messages_in(topic, before, 16) == 0) {
		if (harness_now_ms() > end + 30000)
			fail_msg("no message reached the new partitions within 30 s");
		usleep(200 * 1000);
	}
	new_partition_messages = messages_in(topic, before, 16);
	printf("# messages on the new partitions: %lld\n", new_partition_messages);
}

static void
partitions_were_added_under_load(void **state)
{
	(void)state;
	/* Checked by the load itself; reported as a case of its own for the record. */
	assert_true(new_partition_messages > 0);
}

static void
processors_shared_the_partitions(void **state)
{
	(void)state;
	/* Every member of the group handled callbacks: the partitions were shared. */
	for (int i = 0; i < 3; i++) {
		long long n = harness_file_count(procs[i].log, "event=processed");
		printf("# processor %d processed %lld callbacks\n", i, n);
		assert_true(n > 0);
	}
}
#endif

/* ---- the run and its invariants --------------------------------------------------------- */

static void
load_with_faults(void **state)
{
	pthread_t s[8], inj, weather;
	struct db db;

	(void)state;
	harness_db(&cf, &db);
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		struct db_in in[3] = {DBI_STR(j->order), DBI_STR(j->channel == 2 ? "USD" : "CNY"),
		                      DBI_STR(j->kind == K_CLOSED || j->kind == K_CLOSED_REFUND
		                                  ? "CLOSED"
		                                  : "PENDING")};
		if (j->kind == K_FORGED || j->kind >= K_LOST)
			continue;
		assert_int_equal(db_exec(&db,
		                         "INSERT INTO orders (merchant_id, out_trade_no, amount, "
		                         "currency, status) VALUES ('default', ?, 10.00, ?, ?)",
		                         in, 3, NULL, NULL),
		                 DB_OK);
	}
	db_close(&db);
	t_start = harness_now_ms();
	for (int i = 0; i < 8; i++)
		pthread_create(&s[i], NULL, sender, NULL);
#ifdef PAYCB_SCALEOUT
	(void)inj, (void)weather;
	add_partitions_under_load();
	atomic_store(&stop_load, 1);
	for (int i = 0; i < 8; i++)
		pthread_join(s[i], NULL);
#else
	pthread_create(&inj, NULL, injector, NULL);
	pthread_create(&weather, NULL, channel_weather, NULL);
	pthread_join(inj, NULL);
	atomic_store(&stop_load, 1);
	pthread_join(weather, NULL);
	for (int i = 0; i < 8; i++)
		pthread_join(s[i], NULL);
	for (int f = 0; f < F_NFAULTS; f++)
		assert_true(faults[f] >= 1 || !fault_applies((enum fault)f));
	assert_int_equal(atomic_load(&fault_errors), 0);
#endif
}

static long long
q(struct db *db, const char *clause)
{
	long long v = chan_rows(db, clause);

	assert_true(v >= 0);
	return v;
}

static int
quiet(void *arg)
{
	struct db *db = arg;

	/* Quiet: no pending row, the outbox has sent every event, and every dead letter. */
	return chan_rows(db, "pay_callback_log WHERE status = 0") == 0 &&
	       chan_rows(db, "refund_callback_log WHERE status = 0") == 0 &&
	       chan_rows(db, "order_events WHERE sent_at IS NULL") == 0 &&
	       chan_rows(db, "pay_callback_log WHERE status = 2 AND dlq_sent_at IS NULL") == 0 &&
	       chan_rows(db, "refund_callback_log WHERE status = 2 AND dlq_sent_at IS NULL") == 0 &&
	       chan_rows(db, "refund_requests WHERE merchant_id = 'recon' AND status <> 'DONE'") ==
	           0 &&
	       chan_rows(db, "orders WHERE merchant_id = 'recon' AND status = 'PENDING'") == 0;
}

/* What one order must end with, by the kind of its job. */
struct want {
	const char *status;
	long long refunded;             /* minor units */
	int paid;                       /* shipment and points, one each */
	int refund_min, refund_max;     /* order.refund events */
	int refunded_min, refunded_max; /* order.refunded events */
	int reversed_max;               /* order.refund_reversed events */
	int rr;                         /* refund requests, all in rr_status */
	const char *rr_status;
};

static void
want_of(enum kind k, struct want *w)
{
	memset(w, 0, sizeof(*w));
	w->status = "PAID";
	w->paid = 1;
	switch (k) {
	case K_CLOSED:
		*w = (struct want){"CLOSED", 0, 0, 0, 0, 0, 0, 0, 1, "REQUESTED"};
		break;
	case K_MISMATCH:
		*w = (struct want){"PENDING", 0, 0, 0, 0, 0, 0, 0, 0, NULL};
		break;
	case K_TWICE:
		w->rr = 1;
		w->rr_status = "REQUESTED";
		break;
	case K_TWICE_REFUND:
		w->rr = 1;
		w->rr_status = "DONE";
		break;
	case K_REFUND:
	case K_WX_ABNORMAL:
	case K_BOTH:
		*w = (struct want){"REFUNDED", 1000, 1, 1, 1, 1, 1, 0, 0, NULL};
		break;
	case K_PARTIAL:
	case K_WX_PARTIAL_CLOSED:
		*w = (struct want){"REFUNDING", 400, 1, 1, 1, 0, 0, 0, 0, NULL};
		break;
	case K_CLOSED_REFUND:
		/* Refunded by the channel, before or after its payment was processed. */
		*w = (struct want){"CLOSED", 0, 0, 0, 0, 0, 0, 0, 1, "DONE"};
		break;
	case K_ALI_CUMULATIVE:
		/* 4.00 then the rest: two order.refund events, or one if the total of 10.00 was
		 * applied first and the older 4.00 found covered. */
		*w = (struct want){"REFUNDED", 1000, 1, 1, 2, 1, 1, 0, 0, NULL};
		break;
	case K_REVERSED:
		/* Its failure may be processed before its success (a retried row is not held
		 * back by the ordering guard): then no money ever moved. Either way it ends
		 * PAID with nothing refunded, and its events add up to that. */
		*w = (struct want){"PAID", 0, 1, 0, 1, 0, 1, 1, 0, NULL};
		break;
	case K_RR_TWICE:
		/* The order was PAID by its first payment before the test began (no events). */
		*w = (struct want){"PAID", 0, 0, 0, 0, 0, 0, 0, 1, "DONE"};
		break;
	case K_RR_CLOSED:
		*w = (struct want){"CLOSED", 0, 0, 0, 0, 0, 0, 0, 1, "DONE"};
		break;
	default:
		break;
	}
}

/* What one order holds. */
struct facts {
	char status[16];
	char trade[129]; /* the payment the order recorded */
	long long refunded;
	int ship, points, refund, refunded_ev, reversed;
	long long net; /* order.refund amounts less order.refund_reversed amounts */
	int rr, rr_in_status;
	int bad_amounts;
};

static long long
minor(struct facts *f, const char *text)
{
	int64_t v = 0;
	char err[64];

	if (money_parse_decimal(text, 2, &v, err, sizeof(err)) != 0) {
		f->bad_amounts++;
		return 0;
	}
	return (long long)v;
}

static int
on_event_type(void *arg, struct db_out *o)
{
	struct facts *f = arg;
	int n = (int)o[1].i;

	if (strcmp(o[0].buf, "order.paid.shipment") == 0)
		f->ship += n;
	else if (strcmp(o[0].buf, "order.paid.points") == 0)
		f->points += n;
	else if (strcmp(o[0].buf, "order.refunded") == 0)
		f->refunded_ev += n;
	else if (strcmp(o[0].buf, "order.refund") == 0) {
		f->refund += n;
		f->net += minor(f, o[2].buf);
	} else if (strcmp(o[0].buf, "order.refund_reversed") == 0) {
		f->reversed += n;
		f->net -= minor(f, o[2].buf);
	}
	return 0;
}

/* order_facts - the order's status and refunded amount, its events by type and its refund
 * requests (those in status rr_status counted apart). */
static void
order_facts(struct db *db, const char *merchant, const char *order, const char *rr_status,
            struct facts *f)
{
	char st[16] = "", amount[48] = "0.00", trade[129] = "", type[48], sum[48];
	struct db_in in[2] = {DBI_STR(merchant), DBI_STR(order)};
	struct db_out oo[3] = {DBO_STR(st, sizeof(st)), DBO_STR(amount, sizeof(amount)),
	                       DBO_STR(trade, sizeof(trade))};
	struct db_out eo[3] = {DBO_STR(type, sizeof(type)), DBO_I64(), DBO_STR(sum, sizeof(sum))};
	struct db_out ro[2] = {DBO_STR(st, sizeof(st)), DBO_I64()};
	unsigned long long n = 0;

	memset(f, 0, sizeof(*f));
	assert_int_equal(db_query(db,
	                          "SELECT CAST(status AS CHAR), CAST(refunded_amount AS CHAR), "
	                          "IFNULL(channel_trade_no, '') FROM orders WHERE "
	                          "merchant_id = ? AND out_trade_no = ?",
	                          in, 2, oo, 3, NULL, NULL, &n),
	                 DB_OK);
	snprintf(f->status, sizeof(f->status), "%s", n ? st : "missing");
	snprintf(f->trade, sizeof(f->trade), "%s", n ? trade : "");
	f->refunded = minor(f, amount);
	assert_int_equal(
	    db_query(db,
	             "SELECT event_type, COUNT(*), CAST(IFNULL(SUM(CAST(JSON_UNQUOTE(JSON_EXTRACT("
	             "payload, '$.amount')) AS DECIMAL(18,2))), 0) AS CHAR) FROM order_events "
	             "WHERE merchant_id = ? AND out_trade_no = ? GROUP BY event_type",
	             in, 2, eo, 3, on_event_type, f, &n),
	    DB_OK);
	for (int k = 0; k < 4; k++) {
		static const char *const sts[] = {"REQUESTED", "SUBMITTED", "DONE", "FAILED"};
		struct db_in rin[3] = {DBI_STR(merchant), DBI_STR(order), DBI_STR(sts[k])};
		unsigned long long c = 0;

		assert_int_equal(db_query(db,
		                          "SELECT status, COUNT(*) FROM refund_requests WHERE "
		                          "merchant_id = ? AND out_trade_no = ? AND status = ? "
		                          "GROUP BY status",
		                          rin, 3, ro, 2, NULL, NULL, &c),
		                 DB_OK);
		if (c == 0)
			continue;
		f->rr += (int)ro[1].i;
		if (rr_status != NULL && strcmp(sts[k], rr_status) == 0)
			f->rr_in_status += (int)ro[1].i;
	}
}

/* note_has_row - whether notification w of job j has its callback row. */
static int
note_has_row(struct db *db, const struct job *j, int w)
{
	const char *status = "", *no = j->trade[w];
	char charge[64];
	unsigned long long n = 0;
	struct db_out out[1] = {DBO_I64()};

	if (w == 0 || ((j->kind == K_TWICE || j->kind == K_TWICE_REFUND) && w == 1)) {
		struct db_in in[1] = {DBI_STR(j->trade[w])};

		return db_query(db, "SELECT id FROM pay_callback_log WHERE channel_trade_no = ?",
		                in, 1, out, 1, NULL, NULL, &n) == DB_OK &&
		       n > 0;
	}
	/* One refund id can have rows of several statuses: the one this notification said. */
	if (j->kind == K_WX_ABNORMAL) {
		no = j->trade[1];
		status = w == 1 ? "ABNORMAL" : "SUCCESS";
	} else if (j->kind == K_REVERSED) {
		no = j->trade[1];
		status = w == 1 ? "succeeded" : "failed";
	} else if (j->kind == K_BOTH && w == 2) {
		snprintf(charge, sizeof(charge), "ch_%s:1000", j->trade[0] + 3);
		no = charge;
	}
	struct db_in in[3] = {DBI_STR(no), DBI_STR(status), DBI_STR(status)};

	return db_query(db,
	                "SELECT id FROM refund_callback_log WHERE refund_no = ? AND (? = '' OR "
	                "refund_status = ?)",
	                in, 3, out, 1, NULL, NULL, &n) == DB_OK &&
	       n > 0;
}

/*
 * recon_judge - a reconciler job by its channel's ledger: a refund request refunded exactly
 * once, of its amount (a second refund is a doubled effect); a lost payment found by exactly
 * one query, at its channel, reserved once and never refunded. Counts the job's channel's
 * judged jobs and refunds in judged[channel][0] and [1].
 */
static void
recon_judge(struct db *db, const struct job *j, long long *doubled, long long *wrong,
            long long judged[3][2])
{
	const char *ch = chan_names[j->channel];
	long long refunded = -1, n = -1, posts = -1, want = j->kind == K_LOST ? 0 : 1;

	judged[j->channel][0]++;
	if (j->kind == K_LOST) {
		struct db_in in[2] = {DBI_STR(j->order), DBI_STR(ch)};
		long long found =
		    harness_query_i64(db,
		                      "SELECT COUNT(*) FROM pay_callback_log WHERE merchant_id = "
		                      "'recon' AND out_trade_no = ? AND source = 'query'",
		                      in, 1);
		long long there =
		    harness_query_i64(db,
		                      "SELECT COUNT(*) FROM pay_callback_log WHERE merchant_id = "
		                      "'recon' AND out_trade_no = ? AND source = 'query' AND "
		                      "channel = ?",
		                      in, 2);

		if (found != 1 || there != 1) {
			printf("# wrong: lost payment %s (%s) found by %lld queries, %lld at its "
			       "channel\n",
			       j->order, ch, found, there);
			(*wrong)++;
		}
	}
	if (simapi_ledger(api_port, ch, "recon", j->order, &refunded, &n, &posts) != 0) {
		printf("# wrong: order %s has no ledger at %s\n", j->order, ch);
		(*wrong)++;
		return;
	}
	judged[j->channel][1] += n;
	if (n > want)
		*doubled += n - want;
	if (n != want || refunded != 1000 * want) {
		printf("# wrong: order %s refunded %lld in %lld refunds (%lld posts) at %s, "
		       "expected %lld in %lld\n",
		       j->order, refunded, n, posts, ch, 1000 * want, want);
		(*wrong)++;
	}
}

/*
 * channel_answers - lines of the reconcilers' logs about a call to channel ch whose outcome
 * was out (the refund_sent, query_failed and close lines name both).
 */
static long long
channel_answers(const char *ch, const char *out)
{
	char chk[40], outk[40], *line = NULL;
	size_t cap = 0;
	long long n = 0;

	snprintf(chk, sizeof(chk), "channel=%s ", ch);
	snprintf(outk, sizeof(outk), "outcome=%s ", out);
	for (int i = 0; i < 2; i++) {
		FILE *fp = fopen(recons[i].log, "r");

		if (fp == NULL)
			continue;
		while (getline(&line, &cap, fp) > 0)
			n += strstr(line, chk) != NULL && strstr(line, outk) != NULL;
		fclose(fp);
	}
	free(line);
	return n;
}

static void
invariants_hold_when_quiet(void **state)
{
	long long lost = 0, doubled = 0, wrong = 0, unsent = 0, swapped = 0, processed, dead;
	long long judged[3][2] = {{0}};
	struct db db;

	(void)state;
	harness_db(&cf, &db);
	if (harness_wait_until(quiet, &db, 120000) != 0)
		printf("# still pending after 120 s: %lld rows, %lld unsent events\n",
		       chan_rows(&db, "pay_callback_log WHERE status = 0"),
		       chan_rows(&db, "order_events WHERE sent_at IS NULL"));
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		struct facts f;
		struct want w;

		for (int k = 0; k < j->nnotes; k++)
			if (atomic_load(&j->acked[k]) && !note_has_row(&db, j, k))
				lost++;
		/*
		 * Senders held up by faults fall behind the schedule, and the jobs not yet taken
		 * when the load stops are never sent: nothing can be expected of their orders.
		 */
		if (!atomic_load(&j->started)) {
			unsent++;
			continue;
		}
		if (j->kind == K_FORGED)
			continue;
		want_of(j->kind, &w);
		order_facts(&db, j->kind >= K_LOST ? "recon" : "default", j->order, w.rr_status,
		            &f);
		if (j->kind >= K_LOST) {
			/* Written by the test (or not, when the database stayed away): judged only
			 * when all of it was, and then by the channel's ledger too. */
			if (!atomic_load(&j->acked[0])) {
				unsent++;
				continue;
			}
			recon_judge(&db, j, &doubled, &wrong, judged);
		}
		/*
		 * Of two payments the first applied is the order's payment. The ordering guard
		 * keeps that the first received, but when both failed (the database away) their
		 * retries can meet in either order. Then the channel's refund of the second
		 * payment is a refund of the order's own payment: the order is refunded and the
		 * first payment is the duplicate, waiting for its refund.
		 */
		if (j->kind == K_TWICE_REFUND && strcmp(f.trade, j->trade[1]) == 0) {
			w = (struct want){"REFUNDED", 1000, 1, 1, 1, 1, 1, 0, 1, "REQUESTED"};
			order_facts(&db, "default", j->order, w.rr_status, &f);
			swapped++;
		}
		/* An effect applied more than once. */
		long long twice =
		    (f.ship > 1 ? f.ship - 1 : 0) + (f.points > 1 ? f.points - 1 : 0) +
		    (f.refund > w.refund_max ? f.refund - w.refund_max : 0) +
		    (f.refunded_ev > w.refunded_max ? f.refunded_ev - w.refunded_max : 0) +
		    (f.reversed > w.reversed_max ? f.reversed - w.reversed_max : 0) +
		    (f.rr > 1 ? f.rr - 1 : 0);
		/* Anything else not as the kind requires, money first. */
		int bad = strcmp(f.status, w.status) != 0 || f.refunded != w.refunded ||
		          f.net != f.refunded || f.bad_amounts != 0 || f.ship != w.paid ||
		          f.points != w.paid || f.refund < w.refund_min ||
		          f.refund > w.refund_max || f.refunded_ev < w.refunded_min ||
		          f.refunded_ev > w.refunded_max || f.reversed > w.reversed_max ||
		          f.rr != w.rr || f.rr_in_status != w.rr;

		doubled += twice;
		wrong += bad;
		if (bad && wrong <= 20) /* the first few, to start from */
			printf(
			    "# wrong: order %s kind %d status=%s refunded=%lld (events net %lld) "
			    "shipment=%d points=%d refund=%d refunded=%d reversed=%d "
			    "refund_requests=%d (%d %s)\n",
			    j->order, j->kind, f.status, f.refunded, f.net, f.ship, f.points,
			    f.refund, f.refunded_ev, f.reversed, f.rr, f.rr_in_status,
			    w.rr_status ? w.rr_status : "-");
	}
	processed = q(&db, "pay_callback_log WHERE status = 1");
	dead = q(&db, "pay_callback_log WHERE status = 2");
	printf("# seed=%u load_seconds=%d\n# faults:", seed, load_seconds);
	for (int f = 0; f < F_NFAULTS; f++)
		printf(" %s=%d", fault_names[f], faults[f]);
	printf("\n# kinds:");
	for (int k = 0; k < K_NKINDS; k++) {
		int n = 0;

		for (int i = 0; i < njobs; i++)
			n += jobs[i].kind == (enum kind)k;
		printf(" %s=%d", kind_names[k], n);
	}
	printf("\n# jobs=%d not_sent=%lld sent=%d acknowledged=%d processed=%lld "
	       "dead_lettered=%lld forged_refused=%d pending=%lld lost=%lld doubled=%lld "
	       "wrong=%lld second_payment_first=%lld\n",
	       njobs, unsent, atomic_load(&sent), atomic_load(&acked), processed, dead,
	       atomic_load(&refused_forged), q(&db, "pay_callback_log WHERE status = 0"), lost,
	       doubled, wrong, swapped);
	printf("# reconciler jobs judged by channel (jobs/refunds in its ledger): wxpay=%lld/%lld "
	       "alipay=%lld/%lld stripe=%lld/%lld\n",
	       judged[0][0], judged[0][1], judged[1][0], judged[1][1], judged[2][0], judged[2][1]);
	assert_int_equal(lost, 0);
	assert_int_equal(doubled, 0);
	assert_int_equal(wrong, 0);
	/* The reconciler's jobs ran on every channel. */
	for (int c = 0; c < 3; c++)
		assert_true(judged[c][0] > 0);
	/* Most of the load must have run, or the invariants say little. */
	assert_true(unsent * 4 < njobs);
	assert_int_equal(q(&db, "pay_callback_log WHERE status = 0"), 0);
	assert_int_equal(q(&db, "refund_callback_log WHERE status = 0"), 0);
	assert_int_equal(q(&db, "pay_callback_log WHERE out_trade_no LIKE 'FORGED%'"), 0);
	assert_int_equal(q(&db, "order_events WHERE sent_at IS NULL"), 0);
	{
		/* No refund request waits past the ladder unalarmed: past its last step (plus
		 * leases and the slack of the faults) it has its refund_stuck alert. */
		struct db_in in[1] = {DBI_I64(RECON_LADDER_S + 2 * RECON_LEASE_S + 20)};
		long long waiting = harness_query_i64(
		    &db,
		    "SELECT COUNT(*) FROM refund_requests r WHERE r.status = 'REQUESTED' AND "
		    "r.created_at < NOW(3) - INTERVAL ? SECOND AND (r.alerted_at IS NULL OR NOT "
		    "EXISTS (SELECT 1 FROM alerts a WHERE a.kind = 'refund_stuck' AND "
		    "a.merchant_id = r.merchant_id AND a.out_trade_no = r.out_trade_no))",
		    in, 1);
		long long alerted =
		    q(&db, "refund_requests WHERE status = 'REQUESTED' AND alerted_at IS NOT NULL");

		printf("# refunds: requested_unalarmed=%lld requested_alerted=%lld done=%lld "
		       "failed=%lld channel_refunds=%lld channel_refund_posts=%lld\n",
		       waiting, alerted, q(&db, "refund_requests WHERE status = 'DONE'"),
		       q(&db, "refund_requests WHERE status = 'FAILED'"),
		       simapi_stat(api_port, "refunds_applied"),
		       simapi_stat(api_port, "refund_posts"));
		/* What each channel's faults did to the reconcilers' calls (for the record). */
		{
			static const char *const outcomes[] = {"retry", "unknown", "forged"};
			long long v[3][3] = {{0}};

			printf("# reconciler answers by channel (retry/unknown/forged):");
			for (int c = 0; c < 3; c++) {
				for (int k = 0; k < 3; k++)
					v[c][k] = channel_answers(chan_names[c], outcomes[k]);
				printf(" %s=%lld/%lld/%lld", chan_names[c], v[c][0], v[c][1],
				       v[c][2]);
			}
			printf("\n");
#ifndef PAYCB_SCALEOUT
			/* Each channel's faults reached the reconcilers (or the run says little).
			 */
			for (int c = 0; c < 3; c++)
				assert_true(v[c][1] + v[c][2] > 0);
#endif
		}
		assert_int_equal(waiting, 0);
		assert_int_equal(q(&db, "refund_requests WHERE status = 'FAILED'"), 0);
	}
	db_close(&db);
}

/* ---- the liveness invariants ------------------------------------------------------------ */

/* Dead letters on the topic, counted per log and row id. */
struct letters {
	unsigned long long ids[2][8192];
	int counts[2][8192];
	int n[2];
};

static int
letter_cb(void *arg, const rd_kafka_message_t *m)
{
	struct letters *l = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);
	const char *log = o ? json_string_value(json_object_get(o, "log")) : NULL;
	unsigned long long id =
	    o ? (unsigned long long)json_integer_value(json_object_get(o, "id")) : 0;
	int lg = log && strcmp(log, "refund") == 0, i;

	if (o == NULL || log == NULL) {
		json_decref(o);
		return 0;
	}
	for (i = 0; i < l->n[lg] && l->ids[lg][i] != id; i++)
		;
	if (i == l->n[lg] && l->n[lg] < 8192)
		l->ids[lg][l->n[lg]++] = id;
	if (i < 8192)
		l->counts[lg][i]++;
	json_decref(o);
	return 0;
}

static int
letter_count(const struct letters *l, int lg, unsigned long long id)
{
	for (int i = 0; i < l->n[lg]; i++)
		if (l->ids[lg][i] == id)
			return l->counts[lg][i];
	return 0;
}

/* The outbox rows: event id, its row, and its transaction's rank (see events_cb). */
struct ev_row {
	char event_id[400];
	char key[200];
	unsigned long long id, rank;
	int seen;
};
struct ev_set {
	struct ev_row *rows;
	int n, cap;
	/* Per key, the highest rank whose first copy was seen; keys in rows[].key order. */
	long long reordered, copies;
};

static int
ev_cmp(const void *a, const void *b)
{
	return strcmp(((const struct ev_row *)a)->event_id, ((const struct ev_row *)b)->event_id);
}

static int
ev_collect(void *arg, struct db_out *o)
{
	struct ev_set *s = arg;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 4096;
		s->rows = realloc(s->rows, (size_t)s->cap * sizeof(*s->rows));
		assert_non_null(s->rows);
	}
	snprintf(s->rows[s->n].event_id, sizeof(s->rows[0].event_id), "%s", o[0].buf);
	assert_true(msg_key(o[1].buf, o[2].buf, s->rows[s->n].key, sizeof(s->rows[0].key)) > 0);
	s->rows[s->n].id = (unsigned long long)o[3].i;
	s->rows[s->n].rank = (unsigned long long)o[4].i;
	s->rows[s->n].seen = 0;
	s->n++;
	return 0;
}

/* Per key the highest rank seen so far (a small open list; keys are orders). */
struct key_max {
	char key[200];
	unsigned long long rank;
};
static struct key_max *kmax;
static int nkmax, capkmax;

static unsigned long long *
key_slot(const char *key)
{
	for (int i = 0; i < nkmax; i++)
		if (strcmp(kmax[i].key, key) == 0)
			return &kmax[i].rank;
	if (nkmax == capkmax) {
		capkmax = capkmax ? 2 * capkmax : 1024;
		kmax = realloc(kmax, (size_t)capkmax * sizeof(*kmax));
		assert_non_null(kmax);
	}
	snprintf(kmax[nkmax].key, sizeof(kmax[0].key), "%s", key);
	kmax[nkmax].rank = 0;
	return &kmax[nkmax++].rank;
}

/* events_cb - the first copy of each event must not come after a later transaction's. */
static int
events_cb(void *arg, const rd_kafka_message_t *m)
{
	struct ev_set *s = arg;
	json_t *o = json_loadb(m->payload, m->len, 0, NULL);
	const char *eid = o ? json_string_value(json_object_get(o, "event_id")) : NULL;
	struct ev_row k, *r;
	unsigned long long *mx;

	s->copies++;
	if (eid == NULL) {
		json_decref(o);
		return 0;
	}
	snprintf(k.event_id, sizeof(k.event_id), "%s", eid);
	json_decref(o);
	r = bsearch(&k, s->rows, (size_t)s->n, sizeof(*s->rows), ev_cmp);
	if (r == NULL || r->seen++)
		return 0;
	mx = key_slot(r->key);
	if (r->rank < *mx) {
		if (s->reordered++ < 10)
			printf("# reordered: %s (row %llu) after a later event of %s\n",
			       r->event_id, r->id, r->key);
	} else {
		*mx = r->rank;
	}
	return 0;
}

/* Dead rows whose letter was confirmed after the topic was last recreated but is not on it. */
struct missing_arg {
	const struct letters *l;
	int lg;
	long long missing;
};

static int
missing_cb(void *arg, struct db_out *o)
{
	struct missing_arg *a = arg;

	if (letter_count(a->l, a->lg, (unsigned long long)o[0].i) == 0 && a->missing++ < 10)
		printf("# dead letter of %s row %lld not on the topic\n", a->lg ? "refund" : "pay",
		       o[0].i);
	return 0;
}

static long long
dead_letters_missing(struct db *db, const struct letters *l)
{
	struct missing_arg a = {l, 0, 0};
	struct db_in in[1] = {DBI_I64(dlq_back_ms + 1000)};
	struct db_out out[1] = {DBO_I64()};

	for (a.lg = 0; a.lg < 2; a.lg++)
		assert_int_equal(
		    db_query(db,
		             a.lg ? "SELECT id FROM refund_callback_log WHERE status = 2 AND "
		                    "UNIX_TIMESTAMP(dlq_sent_at) * 1000 > ?"
		                  : "SELECT id FROM pay_callback_log WHERE status = 2 AND "
		                    "UNIX_TIMESTAMP(dlq_sent_at) * 1000 > ?",
		             in, 1, out, 1, missing_cb, &a, NULL),
		    DB_OK);
	return a.missing;
}

static void
no_silent_row_letters_once_events_in_order(void **state)
{
	long long after_s = retrier_old_after_s(&cf), unalarmed = 0, unsent_letters = 0;
	long long letters_doubled = 0, letters_missing = 0, dead = 0;
	static struct letters l;
	struct ev_set ev = {0};
	char topic[256];
	struct db db;

	(void)state;
	harness_db(&cf, &db);
	/*
	 * No row pending past the end-to-end threshold without its alarm. A row is alarmed by
	 * a retrier's cycle (every second here), so one that crossed the threshold by more than
	 * a few cycles (the slack covers the database's own restart) must have its alert.
	 */
	{
		struct db_in in[2] = {DBI_I64(after_s + 15), DBI_I64(after_s + 15)};

		unalarmed = harness_query_i64(
		    &db,
		    "SELECT (SELECT COUNT(*) FROM pay_callback_log c WHERE TIMESTAMPDIFF(SECOND, "
		    "c.created_at, IFNULL(c.done_at, NOW(3))) > ? AND NOT EXISTS (SELECT 1 FROM "
		    "alerts a WHERE a.kind = 'old_pending' AND a.callback_id = c.id AND "
		    "a.out_trade_no = c.out_trade_no)) + (SELECT COUNT(*) FROM refund_callback_log "
		    "c "
		    "WHERE TIMESTAMPDIFF(SECOND, c.created_at, IFNULL(c.done_at, NOW(3))) > ? AND "
		    "NOT EXISTS (SELECT 1 FROM alerts a WHERE a.kind = 'old_pending' AND "
		    "a.callback_id = c.id AND a.out_trade_no = c.out_trade_no))",
		    in, 2);
	}
	/* Each dead letter sent, and none twice. Letters sent before the dead-letter topic was
	 * last recreated went with it; those sent after are all on it, once. */
	dead = q(&db, "pay_callback_log WHERE status = 2") +
	       q(&db, "refund_callback_log WHERE status = 2");
	unsent_letters = q(&db, "pay_callback_log WHERE status = 2 AND dlq_sent_at IS NULL") +
	                 q(&db, "refund_callback_log WHERE status = 2 AND dlq_sent_at IS NULL");
	conf_topic(&cf, "callbacks.dlq", topic, sizeof(topic));
	assert_true(fx_read_topic(&cf, topic, letter_cb, &l) >= 0);
	for (int lg = 0; lg < 2; lg++)
		for (int i = 0; i < l.n[lg]; i++)
			letters_doubled += l.counts[lg][i] > 1 ? l.counts[lg][i] - 1 : 0;
	letters_missing = dead_letters_missing(&db, &l);
	/* Events of each order in commit order: the first copy of each event on the topic comes
	 * after every event of an earlier transaction of its order. An event's rank is its row
	 * id, the paid events of one transaction sharing the smaller of their ids. */
	{
		char b_event[400], b_merchant[65], b_order[129];
		struct db_out out[5] = {DBO_STR(b_event, sizeof(b_event)),
		                        DBO_STR(b_merchant, sizeof(b_merchant)),
		                        DBO_STR(b_order, sizeof(b_order)), DBO_I64(), DBO_I64()};

		assert_int_equal(
		    db_query(
		        &db,
		        "SELECT e.event_id, e.merchant_id, e.out_trade_no, e.id, IF(e.event_type "
		        "LIKE 'order.paid.%', (SELECT MIN(p.id) FROM order_events p WHERE "
		        "p.merchant_id = e.merchant_id AND p.out_trade_no = e.out_trade_no AND "
		        "p.event_type LIKE 'order.paid.%'), e.id) FROM order_events e",
		        NULL, 0, out, 5, ev_collect, &ev, NULL),
		    DB_OK);
	}
	qsort(ev.rows, (size_t)ev.n, sizeof(*ev.rows), ev_cmp);
	conf_topic(&cf, "order-events", topic, sizeof(topic));
	assert_true(fx_read_topic(&cf, topic, events_cb, &ev) >= 0);
	printf("# liveness: threshold=%llds unalarmed=%lld dead=%lld letters_unsent=%lld "
	       "letters_doubled=%lld letters_missing=%lld events=%d event_copies=%lld "
	       "reordered=%lld\n",
	       after_s, unalarmed, dead, unsent_letters, letters_doubled, letters_missing, ev.n,
	       ev.copies, ev.reordered);
	assert_int_equal(unalarmed, 0);
	assert_int_equal(unsent_letters, 0);
	assert_int_equal(letters_doubled, 0);
	assert_int_equal(letters_missing, 0);
	assert_int_equal(ev.reordered, 0);
	free(ev.rows);
	free(kmax);
	db_close(&db);
}

static void
daemons_drain_and_exit_zero(void **state)
{
	(void)state;
	for (int i = 0; i < NINGEST; i++) {
		assert_int_equal(harness_stop(ingests[i].pid, SIGTERM, 30000), 0);
		ingests[i].pid = 0;
	}
	for (int i = 0; i < 3; i++)
		assert_int_equal(harness_stop(procs[i].pid, SIGTERM, 30000), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(harness_stop(retriers[i].pid, SIGTERM, 30000), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(harness_stop(recons[i].pid, SIGTERM, 30000), 0);
	memset(procs, 0, sizeof(procs));
	memset(retriers, 0, sizeof(retriers));
	memset(recons, 0, sizeof(recons));
}

/*
 * setup_reconcilers - the merchant "recon" with the simulator's keys, its channel API and two
 * reconcilers. Their configuration is the pipeline's with "recon" as the only merchant (the
 * processors need no merchant to apply its rows; the simulator needs every merchant's keys).
 */
static int
setup_reconcilers(void)
{
	char keys[300], log[300], err[512];
	char *sets[] = {"reconciler.allow_http=true", "reconciler.sweep_interval_s=1",
	                "reconciler.admin_port=0",    "reconciler.refund_ladder_s=" RECON_LADDER,
	                "reconciler.lease_s=3",       "reconciler.total_timeout_ms=1000",
	                "reconciler.rate_per_s=200",  "reconciler.query_steps_s=[2, 4, 8, 16, 32]"};

	api_port = httpc_free_port();
	snprintf(keys, sizeof(keys), "%s/simkeys", K.dir);
	snprintf(recon_conf, sizeof(recon_conf), "%s/reconciler.conf", K.dir);
	if (simapi_conf(conf_path, keys, "recon", api_port, sets, 8, recon_conf, err,
	                sizeof(err)) != 0)
		goto fail;
	snprintf(log, sizeof(log), "%s/channel-api.log", K.dir);
	if ((api_pid = simapi_start(recon_conf, keys, api_port, log)) <= 0) {
		snprintf(err, sizeof(err), "the channel API did not come up (%s)", log);
		goto fail;
	}
	for (int i = 0; i < 2; i++) {
		recons[i].bin = "bin/paycb-reconciler";
		snprintf(recons[i].conf, sizeof(recons[i].conf), "%s", recon_conf);
		snprintf(recons[i].log, sizeof(recons[i].log), "%s/reconciler-%d.log", K.dir, i);
		if ((recons[i].pid = harness_spawn(recons[i].bin, recon_conf, recons[i].log)) < 0)
			return -1;
	}
	return 0;
fail:
	printf("# reconcilers: %s\n", err);
	return -1;
}

static int
setup_pipeline(void)
{
	char env[512], merchants[4096], extra[4608];

	seed = getenv("PAYCB_CHAOS_SEED") ? (unsigned)atoi(getenv("PAYCB_CHAOS_SEED"))
	                                  : (unsigned)time(NULL);
	load_seconds = getenv("PAYCB_CHAOS_SECONDS") ? atoi(getenv("PAYCB_CHAOS_SECONDS")) : 40;
	srand(seed);
	printf("# %s seed %u (replay with PAYCB_CHAOS_SEED=%u)\n", TAG, seed, seed);
	/* A MariaDB and a Kafka of our own, on free ports, so killing them harms nobody else. */
	snprintf(var, sizeof(var), "/tmp/paycb-chaos-%ld", (long)getpid());
	if (mkdir(var, 0700) != 0)
		return -1;
	setenv("PAYCB_VAR", var, 1);
	snprintf(env, sizeof(env), "%d", httpc_free_port());
	setenv("PAYCB_DB_PORT", env, 1);
	snprintf(env, sizeof(env), "%d", httpc_free_port());
	setenv("PAYCB_KAFKA_PORT", env, 1);
	snprintf(env, sizeof(env), "%d", httpc_free_port());
	setenv("PAYCB_KAFKA_CONTROLLER_PORT", env, 1);
	if (getenv("PAYCB_CHAOS_BROKERS") && atoi(getenv("PAYCB_CHAOS_BROKERS")) == 3)
		nbrokers = 3;
	if (nbrokers == 3) {
		/* Three brokers as in production; the configuration's bootstrap list names all. */
		int p[6];
		char cp[64];

		for (int i = 0; i < 6; i++)
			p[i] = httpc_free_port();
		snprintf(env, sizeof(env), "%d %d %d", p[0], p[1], p[2]);
		setenv("PAYCB_KAFKA_CLUSTER_PORTS", env, 1);
		snprintf(cp, sizeof(cp), "%d %d %d", p[3], p[4], p[5]);
		setenv("PAYCB_KAFKA_CLUSTER_CONTROLLER_PORTS", cp, 1);
		snprintf(env, sizeof(env), "%d", p[0]);
		setenv("PAYCB_KAFKA_PORT", env, 1);
		snprintf(brokers, sizeof(brokers), "127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d", p[0],
		         p[1], p[2]);
		if (services("mariadb.sh up") != 0 || services("kafka-cluster.sh up") != 0 ||
		    services("services.sh config") != 0) {
			printf("# cannot start the chaos services; see %s/services.log\n", var);
			return -1;
		}
		printf("# Kafka: three brokers %s (replication 3, min.insync.replicas 2)\n",
		       brokers);
	} else if (services("services.sh up") != 0) {
		printf("# cannot start the chaos services; see %s/services.log\n", var);
		return -1;
	}
	snprintf(env, sizeof(env), "%s/paycb.conf", var);
	setenv("PAYCB_TEST_CONF", env, 1);
	if (harness_setup(&cf, TAG, "1 2 3 4") != 0 || chan_keys_new(&K) != 0)
		return -1;
	cf.ingest.publish_budget_ms = 1500;
	cf.ingest.connection_timeout_s = 5;
	cf.retry.initial_lease_s = 3;
	cf.retry.lease_margin_s = 2;
	cf.retrier.sweep_interval_s = 1;
	cf.retrier.outbox_after_s = 2;
	cf.retrier.admin_port = 0;
	cf.processor.admin_port = 0;
	cf.kafka.delivery_timeout_ms = 10000;
	/* The end-to-end alarm's threshold: 10 s, raised by the ladder to about 23 s. */
	cf.retrier.stuck_after_s = 10;
	if (nbrokers == 3)
		harness_set(&cf.kafka.brokers, brokers);
	snprintf(env, sizeof(env), "%s-processors", cf.kafka.topic_prefix);
	harness_set(&cf.kafka.group_id, env);
	if (chan_merchants(&K, merchants, sizeof(merchants)) != 0)
		return -1;
	snprintf(extra, sizeof(extra), "%s", merchants);
	/* One configuration per ingest instance (its ports); the others share the first. */
	for (int i = 0; i < NINGEST; i++) {
		ports[i] = httpc_free_port();
		admin_ports[i] = httpc_free_port();
		cf.ingest.listen_port = ports[i];
		cf.ingest.admin_port = admin_ports[i];
		ingests[i].bin = "bin/paycb-ingest";
		snprintf(ingests[i].conf, sizeof(ingests[i].conf), "%s/ingest-%d.conf", K.dir, i);
		snprintf(ingests[i].log, sizeof(ingests[i].log), "%s/ingest-%d.log", K.dir, i);
		if (harness_write_conf(&cf, ingests[i].conf, extra) != 0)
			return -1;
	}
	snprintf(conf_path, sizeof(conf_path), "%s", ingests[0].conf);
	/* The drifted ladder: its last step is 6 s, a topic that exists but no processor reads. */
	{
		struct conf dc = cf;
		char t6[256];
		int parts = (int)cf.kafka.retry_partitions;
		const char *names[1] = {t6};
		char err[256];

		dc.retry.ladder_s.v[ladder_steps(&cf.retry) - 1] = 6;
		ladder_topic(&dc, ladder_steps(&dc.retry), t6, sizeof(t6));
		if (kq_create_topics(&cf.kafka, names, &parts, NULL, 1, 30000, NULL, err,
		                     sizeof(err)) != 0) {
			printf("# cannot create %s: %s\n", t6, err);
			return -1;
		}
		snprintf(drift_conf, sizeof(drift_conf), "%s/retrier-drift.conf", K.dir);
		if (harness_write_conf(&dc, drift_conf, extra) != 0)
			return -1;
	}
	for (int i = 0; i < 4; i++) {
		procs[i].bin = "bin/paycb-processor";
		snprintf(procs[i].conf, sizeof(procs[i].conf), "%s", conf_path);
		snprintf(procs[i].log, sizeof(procs[i].log), "%s/processor-%d.log", K.dir, i);
	}
	for (int i = 0; i < 2; i++) {
		retriers[i].bin = "bin/paycb-retrier";
		snprintf(retriers[i].conf, sizeof(retriers[i].conf), "%s", conf_path);
		snprintf(retriers[i].log, sizeof(retriers[i].log), "%s/retrier-%d.log", K.dir, i);
	}
	for (int i = 0; i < NINGEST; i++)
		if ((ingests[i].pid =
		         chan_spawn_ingest(ingests[i].conf, ingests[i].log, admin_ports[i])) < 0)
			return -1;
	for (int i = 0; i < 3; i++)
		if ((procs[i].pid = harness_spawn(procs[i].bin, conf_path, procs[i].log)) < 0)
			return -1;
	for (int i = 0; i < 2; i++)
		if ((retriers[i].pid = harness_spawn(retriers[i].bin, conf_path, retriers[i].log)) <
		    0)
			return -1;
	if (setup_reconcilers() != 0)
		return -1;
	printf("# logs under %s\n", K.dir);

	njobs = load_seconds * 12;
	jobs = calloc((size_t)njobs, sizeof(*jobs));
	for (int i = 0; i < njobs; i++) {
		struct job *j = &jobs[i];
		int r = rand() % 32;
		static const enum kind by_draw[] = {K_CLOSED,
		                                    K_TWICE,
		                                    K_MISMATCH,
		                                    K_FORGED,
		                                    K_REFUND,
		                                    K_PARTIAL,
		                                    K_WX_ABNORMAL,
		                                    K_BOTH,
		                                    K_TWICE_REFUND,
		                                    K_REVERSED,
		                                    K_CLOSED_REFUND,
		                                    K_ALI_CUMULATIVE,
		                                    K_WX_PARTIAL_CLOSED,
		                                    K_LOST,
		                                    K_RR_TWICE,
		                                    K_RR_CLOSED};
		j->kind = r < (int)(sizeof(by_draw) / sizeof(by_draw[0])) ? by_draw[r] : K_NORMAL;
		/* The Stripe refund kinds are Stripe's, the ABNORMAL, CLOSED and paid-after-close
		 * ones WeChat Pay's, the cumulative one Alipay's; the others (the reconciler's
		 * too) any of the three. */
		j->channel = j->kind == K_WX_ABNORMAL || j->kind == K_CLOSED_REFUND ||
		                     j->kind == K_WX_PARTIAL_CLOSED
		                 ? 0
		             : j->kind == K_ALI_CUMULATIVE ? 1
		             : j->kind == K_REFUND || j->kind == K_PARTIAL || j->kind == K_BOTH ||
		                     j->kind == K_TWICE_REFUND || j->kind == K_REVERSED
		                 ? 2
		                 : rand() % 3;
		j->nnotes = j->kind >= K_LOST ? 0
		            : j->kind == K_TWICE || j->kind == K_REFUND || j->kind == K_PARTIAL ||
		                    j->kind == K_CLOSED_REFUND
		                ? 2
		            : j->kind == K_WX_ABNORMAL || j->kind == K_BOTH ||
		                    j->kind == K_TWICE_REFUND || j->kind == K_REVERSED ||
		                    j->kind == K_ALI_CUMULATIVE || j->kind == K_WX_PARTIAL_CLOSED
		                ? 3
		                : 1;
		j->copies = 1 + rand() % 3;
		snprintf(j->order, sizeof(j->order), "%s%d-%d",
		         j->kind == K_FORGED ? "FORGED"
		         : j->kind >= K_LOST ? "R"
		                             : "C",
		         getpid(), i);
		snprintf(j->trade[0], sizeof(j->trade[0]), "%s%d-%d-a",
		         j->channel == 2 ? "pi_" : "T", getpid(), i);
		/* The second: a payment (paid twice), or the refund's id. */
		snprintf(j->trade[1], sizeof(j->trade[1]), "%s%d-%d-b",
		         j->kind == K_TWICE || j->kind == K_TWICE_REFUND || j->kind >= K_LOST
		             ? (j->channel == 2 ? "pi_" : "T")
		         : j->channel == 2 ? "re_"
		                           : "5030",
		         getpid(), i);
		snprintf(j->trade[2], sizeof(j->trade[2]), "re_%d-%d-c", getpid(), i);
	}
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(load_with_faults),
	    cmocka_unit_test(invariants_hold_when_quiet),
	    cmocka_unit_test(no_silent_row_letters_once_events_in_order),
#ifdef PAYCB_SCALEOUT
	    cmocka_unit_test(processors_shared_the_partitions),
	    cmocka_unit_test(partitions_were_added_under_load),
#endif
	    cmocka_unit_test(daemons_drain_and_exit_zero),
	};
	int rc = 1;

	if (setup_pipeline() == 0)
		rc = cmocka_run_group_tests(tests, NULL, NULL);
	else
		printf("not ok 1 - the chaos pipeline starts\n");
	for (int i = 0; i < 4; i++)
		if (procs[i].pid > 0)
			harness_stop(procs[i].pid, SIGKILL, 5000);
	for (int i = 0; i < 2; i++)
		if (retriers[i].pid > 0)
			harness_stop(retriers[i].pid, SIGKILL, 5000);
	for (int i = 0; i < NINGEST; i++)
		if (ingests[i].pid > 0)
			harness_stop(ingests[i].pid, SIGKILL, 5000);
	for (int i = 0; i < 2; i++)
		if (recons[i].pid > 0)
			harness_stop(recons[i].pid, SIGKILL, 5000);
	if (api_pid > 0)
		harness_stop(api_pid, SIGTERM, 10000);
	harness_teardown(&cf);
	chan_keys_free(&K);
	if (nbrokers == 3) {
		services("kafka-cluster.sh clean");
		services("mariadb.sh clean");
	} else {
		services("services.sh clean");
	}
	if (getenv("PAYCB_KEEP_TEST_FILES") == NULL) {
		char cmd[256];
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", var);
		if (system(cmd) != 0)
			rc = rc ? rc : 1;
	}
	free(jobs);
	return rc;
}
