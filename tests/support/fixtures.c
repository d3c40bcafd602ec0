/*
 * fixtures - orders, callback rows and callback messages for processor tests (see
 * fixtures.h).
 *
 * The rows are written with the very INSERT ingest uses (cblog_reserve in common/cblog.c),
 * raw body and hash included, so the processor sees nothing a test made up. The producer is a
 * plain librdkafka producer with kq.c's settings, because tests need the partition, the
 * offset and the timestamp a message got, which kq_produce_wait does not return.
 */
#include "fixtures.h"

#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cblog.h"
#include "digest.h"
#include "harness.h"
#include "kq.h"
#include "msg.h"

int
fx_order(struct db *db, const char *merchant, const char *order, const char *amount,
         const char *currency, const char *status)
{
	struct db_in in[5] = {DBI_STR(merchant), DBI_STR(order), DBI_STR(amount), DBI_STR(currency),
	                      DBI_STR(status)};

	if (db_exec(db,
	            "INSERT INTO orders (merchant_id, out_trade_no, amount, currency, status) "
	            "VALUES (?, ?, ?, ?, ?)",
	            in, 5, NULL, NULL) != DB_OK) {
		printf("# fixtures: order %s: %s\n", order, db->last_error);
		return -1;
	}
	return 0;
}

/*
 * fx_reserve - reserves r's row with ingest's own INSERT (cblog_reserve), its body hashed as
 * ingest hashes one. Returns 0 with *id set, or -1 with *id 0.
 */
static int
fx_reserve(struct db *db, struct cblog_row *r, unsigned long long *id)
{
	char sha[65];

	*id = 0;
	if (digest_sha256_hex(r->body, r->body_len, sha) != 0)
		return -1;
	r->body_sha256 = sha;
	if (cblog_reserve(db, r, id) != DB_OK) {
		*id = 0;
		return -1;
	}
	return 0;
}

unsigned long long
fx_pay_row(struct db *db, const struct conf *cf, const char *merchant, const char *channel,
           const char *trade_no, const char *order, const char *amount, const char *currency)
{
	char body[512], event_id[160];
	unsigned long long id = 0;

	snprintf(body, sizeof(body), "{\"fixture\":\"pay\",\"trade\":\"%s\",\"order\":\"%s\"}",
	         trade_no, order);
	snprintf(event_id, sizeof(event_id), "evt_%s", trade_no);
	struct cblog_row r = {.cblog = CBLOG_PAY,
	                      .merchant_id = merchant,
	                      .channel = channel,
	                      .channel_trade_no = trade_no,
	                      .out_trade_no = order,
	                      .event_id = event_id,
	                      .event_type = "TRANSACTION.SUCCESS",
	                      .status = "SUCCESS",
	                      .amount = amount,
	                      .currency = currency,
	                      .body = body,
	                      .body_len = strlen(body),
	                      .lease_s = cf->retry.initial_lease_s};

	if (fx_reserve(db, &r, &id) != 0)
		printf("# fixtures: pay row %s: %s\n", trade_no, db->last_error);
	return id;
}

unsigned long long
fx_refund_row(struct db *db, const struct conf *cf, const char *merchant, const char *channel,
              const char *refund_no, const char *pay_trade_no, const char *order,
              const char *amount, int cumulative, const char *currency)
{
	return fx_refund_row_status(db, cf, merchant, channel, refund_no, pay_trade_no, order,
	                            amount, cumulative, currency, "REFUND.SUCCESS", "SUCCESS");
}

unsigned long long
fx_refund_row_status(struct db *db, const struct conf *cf, const char *merchant,
                     const char *channel, const char *refund_no, const char *pay_trade_no,
                     const char *order, const char *amount, int cumulative, const char *currency,
                     const char *event_type, const char *status)
{
	char body[512], event_id[200];
	unsigned long long id = 0;

	snprintf(body, sizeof(body),
	         "{\"fixture\":\"refund\",\"refund\":\"%s\",\"order\":\"%s\","
	         "\"status\":\"%s\"}",
	         refund_no, order, status);
	snprintf(event_id, sizeof(event_id), "evt_%s_%s", refund_no, status);
	struct cblog_row r = {.cblog = CBLOG_REFUND,
	                      .merchant_id = merchant,
	                      .channel = channel,
	                      .channel_trade_no = pay_trade_no,
	                      .out_trade_no = order,
	                      .refund_no = refund_no,
	                      .event_id = event_id,
	                      .event_type = event_type,
	                      .status = status,
	                      .amount = amount,
	                      .currency = currency,
	                      .cumulative = cumulative,
	                      .body = body,
	                      .body_len = strlen(body),
	                      .lease_s = cf->retry.initial_lease_s};

	if (fx_reserve(db, &r, &id) != 0)
		printf("# fixtures: refund row %s: %s\n", refund_no, db->last_error);
	return id;
}

/* ---- publishing ------------------------------------------------------------------- */

struct fx_pub {
	rd_kafka_t *rk;
	char topic[256];
};

struct fx_dr {
	int done;
	rd_kafka_resp_err_t err;
	struct fx_pos pos;
};

static void
fx_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct fx_dr *dr = m->_private;
	rd_kafka_timestamp_type_t tt;

	(void)rk;
	(void)opaque;
	if (dr == NULL)
		return;
	dr->err = m->err;
	dr->pos.partition = m->partition;
	dr->pos.offset = m->offset;
	dr->pos.timestamp_ms = rd_kafka_message_timestamp(m, &tt);
	dr->done = 1;
}

struct fx_pub *
fx_pub_new(const struct conf *cf)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	struct fx_pub *p = calloc(1, sizeof(*p));
	char err[256];

	if (p == NULL || kq_conf_common(conf, &cf->kafka, err, sizeof(err)) != 0 ||
	    rd_kafka_conf_set(conf, "enable.idempotence", "true", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "linger.ms", "1", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "partitioner", "murmur2_random", err, sizeof(err))) {
		printf("# fixtures: producer: %s\n", err);
		rd_kafka_conf_destroy(conf);
		free(p);
		return NULL;
	}
	rd_kafka_conf_set_dr_msg_cb(conf, fx_on_delivery);
	if ((p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, err, sizeof(err))) == NULL) {
		printf("# fixtures: producer: %s\n", err);
		rd_kafka_conf_destroy(conf);
		free(p);
		return NULL;
	}
	conf_topic(cf, "callbacks", p->topic, sizeof(p->topic));
	return p;
}

void
fx_pub_free(struct fx_pub *p)
{
	if (p == NULL)
		return;
	rd_kafka_flush(p->rk, 10000);
	rd_kafka_destroy(p->rk);
	free(p);
}

void
fx_message(struct msg_callback *m, int refund, unsigned long long id, const char *merchant,
           const char *channel, const char *order, int attempt)
{
	memset(m, 0, sizeof(*m));
	m->cblog = refund ? CBLOG_REFUND : CBLOG_PAY;
	m->id = id;
	m->attempt = attempt;
	snprintf(m->merchant_id, sizeof(m->merchant_id), "%s", merchant);
	snprintf(m->channel, sizeof(m->channel), "%s", channel);
	snprintf(m->out_trade_no, sizeof(m->out_trade_no), "%s", order);
}

int
fx_publish(struct fx_pub *p, const char *topic, int refund, unsigned long long id,
           const char *merchant, const char *channel, const char *order, int attempt,
           int32_t partition, struct fx_pos *pos)
{
	struct msg_callback m;
	struct fx_dr dr;
	char key[256], val[512];
	rd_kafka_resp_err_t e;
	int klen, vlen;

	memset(&dr, 0, sizeof(dr));
	fx_message(&m, refund, id, merchant, channel, order, attempt);
	if ((klen = msg_callback_key(&m, key, sizeof(key))) < 0 ||
	    (vlen = msg_callback_encode(&m, val, sizeof(val))) < 0)
		return -1;
	for (;;) {
		e = rd_kafka_producev(p->rk, RD_KAFKA_V_TOPIC(topic ? topic : p->topic),
		                      RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_KEY(key, klen),
		                      RD_KAFKA_V_VALUE(val, vlen),
		                      RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
		                      RD_KAFKA_V_OPAQUE(pos ? &dr : NULL), RD_KAFKA_V_END);
		if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL)
			break;
		rd_kafka_poll(p->rk, 100);
	}
	if (e) {
		printf("# fixtures: produce: %s\n", rd_kafka_err2str(e));
		return -1;
	}
	if (pos == NULL) {
		rd_kafka_poll(p->rk, 0);
		return 0;
	}
	/* The report lands on this stack frame: wait for it whatever happens. */
	while (!dr.done)
		rd_kafka_poll(p->rk, 100);
	if (dr.err) {
		printf("# fixtures: delivery: %s\n", rd_kafka_err2str(dr.err));
		return -1;
	}
	*pos = dr.pos;
	return 0;
}

int
fx_pub_flush(struct fx_pub *p, int timeout_ms)
{
	rd_kafka_flush(p->rk, timeout_ms);
	return rd_kafka_outq_len(p->rk) == 0 ? 0 : -1;
}

/* ---- reading back ------------------------------------------------------------------ */

static rd_kafka_t *
fx_consumer(const struct conf *cf, const char *group)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];
	rd_kafka_t *rk;

	if (kq_conf_common(conf, &cf->kafka, err, sizeof(err)) != 0 ||
	    rd_kafka_conf_set(conf, "group.id", group, err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "enable.partition.eof", "false", err, sizeof(err))) {
		printf("# fixtures: consumer: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	if ((rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err))) == NULL) {
		printf("# fixtures: consumer: %s\n", err);
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	return rk;
}

long long
fx_committed(const struct conf *cf, const char *topic, int32_t partition)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_t *rk = fx_consumer(cf, cf->kafka.group_id);
	long long off = -1;

	rd_kafka_topic_partition_list_add(l, topic, partition);
	if (rk && rd_kafka_committed(rk, l, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    l->elems[0].err == RD_KAFKA_RESP_ERR_NO_ERROR && l->elems[0].offset >= 0)
		off = l->elems[0].offset;
	rd_kafka_topic_partition_list_destroy(l);
	if (rk)
		rd_kafka_destroy(rk);
	return off;
}

/* Errors of a topic whose partitions have no leader yet; NO_ERROR is not one. */
static int
fx_transient(rd_kafka_resp_err_t e)
{
	return e == RD_KAFKA_RESP_ERR_LEADER_NOT_AVAILABLE ||
	       e == RD_KAFKA_RESP_ERR_NOT_LEADER_FOR_PARTITION ||
	       e == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
	       e == RD_KAFKA_RESP_ERR__UNKNOWN_PARTITION || e == RD_KAFKA_RESP_ERR__TRANSPORT;
}

struct kq_producer *
fx_producer(const struct conf *cf, const char *topic)
{
	struct kq_producer *p = NULL;
	char err[256];

	if (kq_producer_new(&cf->kafka, &p, err, sizeof(err)) != 0) {
		printf("# producer: %s\n", err);
		return NULL;
	}
	if (kq_producer_warm(p, topic, 10000) != 0) {
		printf("# producer: no metadata for %s within 10 s\n", topic);
		kq_producer_free(p);
		return NULL;
	}
	return p;
}

int
fx_kafka_setup(struct conf *cf, const char *tag, int parts, char *topic, size_t len)
{
	const char *names[1] = {topic};
	char err[256];

	if (harness_setup(cf, tag, NULL) != 0)
		return -1;
	conf_topic(cf, tag, topic, len);
	if (kq_create_topics(&cf->kafka, names, &parts, NULL, 1, 30000, NULL, err, sizeof(err)) !=
	    0) {
		printf("# topic %s: %s\n", topic, err);
		return -1;
	}
	return 0;
}

int
fx_broker_pid(void)
{
	char path[1024];
	FILE *f;
	int pid = 0;

	snprintf(path, sizeof(path), "%s/kafka/kafka.pid",
	         getenv("PAYCB_VAR") ? getenv("PAYCB_VAR") : "var");
	if ((f = fopen(path, "r")) == NULL)
		return 0;
	if (fscanf(f, "%d", &pid) != 1)
		pid = 0;
	fclose(f);
	return pid;
}

/* fx_broker_stopped - every thread of process *arg is stopped (state T). */
static int
fx_broker_stopped(void *arg)
{
	char path[64], line[512];
	struct dirent *d;
	int all = 1, n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", *(int *)arg);
	if ((dir = opendir(path)) == NULL)
		return 0;
	while (all && (d = readdir(dir)) != NULL) {
		const char *st;
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", *(int *)arg, d->d_name);
		if ((f = fopen(path, "r")) == NULL)
			continue;
		if (fgets(line, sizeof(line), f) != NULL && (st = strrchr(line, ')')) != NULL) {
			all = st[1] == ' ' && st[2] == 'T';
			n++;
		}
		fclose(f);
	}
	closedir(dir);
	return all && n > 0;
}

int
fx_broker_stop(int pid)
{
	if (pid <= 0 || kill(pid, SIGSTOP) != 0)
		return -1;
	return harness_wait_until(fx_broker_stopped, &pid, 5000);
}

int
fx_broker_resume(void **state)
{
	int pid = fx_broker_pid();

	(void)state;
	if (pid > 0)
		kill(pid, SIGCONT);
	return 0;
}

int
fx_count_all(void *arg, const rd_kafka_message_t *m)
{
	(void)m;
	(*(int *)arg)++;
	return 0;
}

long long
fx_read_topic(const struct conf *cf, const char *topic,
              int (*cb)(void *arg, const rd_kafka_message_t *m), void *arg)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_partition_list_t *l = NULL;
	rd_kafka_topic_t *rkt = NULL;
	rd_kafka_t *rk = fx_consumer(cf, "fixtures-reader");
	int64_t *high = NULL, *next = NULL;
	long long n = -1, got = 0;
	int np = 0, left = 0;
	rd_kafka_resp_err_t e;

	if (rk == NULL)
		return -1;
	rkt = rd_kafka_topic_new(rk, topic, NULL);
	/* A topic created a moment ago may not have its leaders yet, on a broker that has just
	 * started for seconds: such errors are waited out (up to 20 tries of 10 s at most),
	 * anything else fails at once. */
	for (int tries = 0;; tries++) {
		e = rd_kafka_metadata(rk, 0, rkt, &md, 10000);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR && md->topic_cnt == 1)
			e = md->topics[0].err;
		if (!fx_transient(e) || tries >= 20)
			break;
		if (md)
			rd_kafka_metadata_destroy(md);
		md = NULL;
		rd_kafka_poll(rk, 100);
	}
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR || md->topic_cnt != 1) {
		printf("# fixtures: metadata of %s failed: %s\n", topic, rd_kafka_err2str(e));
		goto done;
	}
	np = md->topics[0].partition_cnt;
	high = calloc((size_t)np, sizeof(*high));
	next = calloc((size_t)np, sizeof(*next));
	l = rd_kafka_topic_partition_list_new(np);
	for (int i = 0; i < np; i++) {
		int64_t lo = 0, hi = 0;

		/* A topic created a moment ago may not have its leader yet: such errors are
		 * waited out (up to 20 tries of 10 s at most), anything else fails at once. */
		for (int tries = 0;; tries++) {
			e = rd_kafka_query_watermark_offsets(rk, topic, i, &lo, &hi, 10000);
			if (!fx_transient(e) || tries >= 20)
				break;
			rd_kafka_poll(rk, 100);
		}
		if (e) {
			printf("# fixtures: watermarks of %s [%d] failed: %s\n", topic, i,
			       rd_kafka_err2str(e));
			goto done;
		}
		high[i] = hi;
		next[i] = lo;
		if (hi > lo) {
			rd_kafka_topic_partition_list_add(l, topic, i)->offset = lo;
			left++;
		}
	}
	if (rd_kafka_assign(rk, l) != RD_KAFKA_RESP_ERR_NO_ERROR)
		goto done;
	{
		long long end = 0;
		rd_kafka_message_t *m;
		struct timespec ts;

		clock_gettime(CLOCK_MONOTONIC, &ts);
		end = (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + 60000;
		while (left > 0) {
			clock_gettime(CLOCK_MONOTONIC, &ts);
			if ((long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 > end) {
				printf("# fixtures: reading %s timed out\n", topic);
				goto done;
			}
			if ((m = rd_kafka_consumer_poll(rk, 200)) == NULL)
				continue;
			if (!m->err && m->partition < np && m->offset >= next[m->partition] &&
			    m->offset < high[m->partition]) {
				got++;
				next[m->partition] = m->offset + 1;
				if (next[m->partition] == high[m->partition])
					left--;
				if (cb && cb(arg, m)) {
					rd_kafka_message_destroy(m);
					break;
				}
			}
			rd_kafka_message_destroy(m);
		}
	}
	n = got;
done:
	if (md)
		rd_kafka_metadata_destroy(md);
	if (l)
		rd_kafka_topic_partition_list_destroy(l);
	if (rkt)
		rd_kafka_topic_destroy(rkt);
	free(high);
	free(next);
	rd_kafka_destroy(rk);
	return n;
}

/* ---- the processor daemon ---------------------------------------------------------- */

const char *
fx_dir(void)
{
	static char dir[512];
	const char *var = getenv("PAYCB_VAR");

	if (!dir[0])
		snprintf(dir, sizeof(dir), "%s", var ? var : "/tmp");
	return dir;
}

long long
fx_countf(const struct conf *cf, const char *fmt, ...)
{
	char sql[1024];
	struct db d;
	va_list ap;
	long long v;

	va_start(ap, fmt);
	vsnprintf(sql, sizeof(sql), fmt, ap);
	va_end(ap);
	/* A connection per query: the statement cache is keyed by the SQL's address. */
	harness_db(cf, &d);
	v = harness_count(&d, sql);
	db_close(&d);
	return v;
}

int
fx_processor_conf(struct conf *cf, const char *tag, const char *ladder, int threads)
{
	char group[256];

	if (harness_setup(cf, tag, ladder) != 0)
		return -1;
	snprintf(group, sizeof(group), "%s.processor", cf->kafka.topic_prefix);
	harness_set(&cf->kafka.group_id, group);
	cf->processor.threads = threads;
	return 0;
}

int
fx_log_has(void *arg)
{
	struct fx_logwait *w = arg;

	return harness_file_count(w->file, w->needle) >= w->n;
}

int
fx_wait_log(const char *file, const char *needle, long long n, long long timeout_ms)
{
	struct fx_logwait w = {file, needle, n};

	return harness_wait_until(fx_log_has, &w, timeout_ms);
}

int
fx_wait_row(struct db *db, int refund, unsigned long long id, int status, long long timeout_ms)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_wait_i64(db,
	                        refund ? "SELECT status FROM refund_callback_log WHERE id = ?"
	                               : "SELECT status FROM pay_callback_log WHERE id = ?",
	                        in, 1, status, timeout_ms);
}

int
fx_wait_retry(struct db *db, int refund, unsigned long long id, int retry_count,
              long long timeout_ms)
{
	struct db_in in[1] = {DBI_I64(id)};

	return harness_wait_i64(db,
	                        refund ? "SELECT retry_count FROM refund_callback_log WHERE id = ?"
	                               : "SELECT retry_count FROM pay_callback_log WHERE id = ?",
	                        in, 1, retry_count, timeout_ms);
}

/* ---- loads --------------------------------------------------------------------------- */

int
fx_load_create(struct db *db, const struct conf *cf, struct fx_load *l, const char *prefix, int n)
{
	char order[64], trade[80], rno[80];

	memset(l, 0, sizeof(*l));
	snprintf(l->prefix, sizeof(l->prefix), "%s", prefix);
	l->n = n;
	l->pay_ids = calloc((size_t)n, sizeof(*l->pay_ids));
	l->refund_ids = calloc((size_t)n, sizeof(*l->refund_ids));
	if (l->pay_ids == NULL || l->refund_ids == NULL)
		return -1;
	for (int i = 0; i < n; i++) {
		snprintf(order, sizeof(order), "%s-%d", prefix, i);
		snprintf(trade, sizeof(trade), "T-%s", order);
		snprintf(rno, sizeof(rno), "R-%s", order);
		if (fx_order(db, "default", order, "10.00", "CNY", "PENDING") != 0 ||
		    (l->pay_ids[i] = fx_pay_row(db, cf, "default", "wxpay", trade, order, "10.00",
		                                "CNY")) == 0 ||
		    (l->refund_ids[i] = fx_refund_row(db, cf, "default", "wxpay", rno, trade, order,
		                                      "1.00", 0, "CNY")) == 0)
			return -1;
	}
	return 0;
}

void
fx_load_free(struct fx_load *l)
{
	free(l->pay_ids);
	free(l->refund_ids);
	memset(l, 0, sizeof(*l));
}

int
fx_load_publish(struct fx_pub *p, const struct fx_load *l, int from, int to)
{
	char order[64];

	for (int i = from; i < to && i < l->n; i++) {
		snprintf(order, sizeof(order), "%s-%d", l->prefix, i);
		if (fx_publish(p, NULL, 0, l->pay_ids[i], "default", "wxpay", order, 1,
		               RD_KAFKA_PARTITION_UA, NULL) != 0 ||
		    fx_publish(p, NULL, 1, l->refund_ids[i], "default", "wxpay", order, 1,
		               RD_KAFKA_PARTITION_UA, NULL) != 0)
			return -1;
	}
	return fx_pub_flush(p, 30000);
}

long long
fx_load_done(struct db *db, const struct fx_load *l)
{
	struct db_in in[2] = {DBI_STR(l->prefix), DBI_STR(l->prefix)};

	return harness_query_i64(db,
	                         "SELECT (SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no "
	                         "LIKE CONCAT(?, '-%') AND status = 1) + (SELECT COUNT(*) FROM "
	                         "refund_callback_log WHERE out_trade_no LIKE CONCAT(?, '-%') AND "
	                         "status = 1)",
	                         in, 2);
}

int
fx_load_done_at_least(void *arg)
{
	struct fx_progress *p = arg;

	return fx_load_done(p->db, p->l) >= p->want;
}

/* fx_log_applied - counts "event=processed" lines per callback id in a processor log */
static void
fx_log_applied(const char *path, int *pay, int *ref, unsigned long long max, long long *skipped)
{
	char line[4096];
	FILE *fp;

	if ((fp = fopen(path, "r")) == NULL)
		return;
	while (fgets(line, sizeof(line), fp)) {
		char *p = strstr(line, "]: "), cbid[CBLOG_REF_MAX];
		unsigned long long id;
		enum cblog lg;
		size_t n;

		if (p == NULL)
			continue;
		p += 3;
		/* The line's id, "cb42" or "rf7", ends at the first ':'. */
		if ((n = strcspn(p, ":")) >= sizeof(cbid))
			continue;
		memcpy(cbid, p, n);
		cbid[n] = '\0';
		if (cblog_ref_parse(cbid, &lg, &id) != 0 || id > max)
			continue;
		if (strstr(p, " event=processed "))
			(lg == CBLOG_REFUND ? ref : pay)[id]++;
		else if (strstr(p, " event=skipped "))
			(*skipped)++;
	}
	fclose(fp);
}

int
fx_load_check(struct db *db, const struct fx_load *l, char logs[][1024], int nlogs,
              long long *skipped)
{
	struct db_in in[1] = {DBI_STR(l->prefix)};
	unsigned long long max = 0;
	int *pay = NULL, *ref = NULL, bad = 0;
	long long v;

#define FX_WANT(sql, want)                                                                         \
	do {                                                                                       \
		if ((v = harness_query_i64(db, sql, in, 1)) != (want)) {                           \
			printf("# load check: %lld, want %lld: %s\n", v, (long long)(want), sql);  \
			bad++;                                                                     \
		}                                                                                  \
	} while (0)
	FX_WANT("SELECT COUNT(*) FROM orders WHERE out_trade_no LIKE CONCAT(?, '-%') AND status "
	        "= 'REFUNDING' AND refunded_amount = 1.00 AND channel_trade_no = CONCAT('T-', "
	        "out_trade_no)",
	        l->n);
	FX_WANT("SELECT COUNT(*) FROM order_events WHERE out_trade_no LIKE CONCAT(?, '-%') AND "
	        "event_type IN ('order.paid.shipment', 'order.paid.points')",
	        2 * l->n);
	/* and one order.refund per order for its partial refund */
	FX_WANT("SELECT COUNT(*) FROM order_events WHERE out_trade_no LIKE CONCAT(?, '-%')",
	        3 * l->n);
	FX_WANT("SELECT COUNT(*) FROM order_refunds WHERE out_trade_no LIKE CONCAT(?, '-%') AND "
	        "amount = 1.00",
	        l->n);
	FX_WANT("SELECT COUNT(*) FROM pay_callback_log WHERE out_trade_no LIKE CONCAT(?, '-%') "
	        "AND status = 1 AND outcome = 'paid' AND retry_count = 0",
	        l->n);
	FX_WANT("SELECT COUNT(*) FROM refund_callback_log WHERE out_trade_no LIKE CONCAT(?, '-%') "
	        "AND status = 1 AND outcome = 'refund_partial' AND retry_count = 0",
	        l->n);
	FX_WANT("SELECT COUNT(*) FROM refund_requests WHERE out_trade_no LIKE CONCAT(?, '-%')", 0);
	FX_WANT("SELECT COUNT(*) FROM alerts WHERE out_trade_no LIKE CONCAT(?, '-%')", 0);
#undef FX_WANT
	for (int i = 0; i < l->n; i++) {
		if (l->pay_ids[i] > max)
			max = l->pay_ids[i];
		if (l->refund_ids[i] > max)
			max = l->refund_ids[i];
	}
	pay = calloc(max + 1, sizeof(*pay));
	ref = calloc(max + 1, sizeof(*ref));
	*skipped = 0;
	for (int k = 0; pay && ref && k < nlogs; k++)
		fx_log_applied(logs[k], pay, ref, max, skipped);
	for (int i = 0; pay && ref && i < l->n; i++) {
		if (pay[l->pay_ids[i]] > 1 || ref[l->refund_ids[i]] > 1) {
			printf("# load check: cb%llu applied %d times, rf%llu %d times\n",
			       l->pay_ids[i], pay[l->pay_ids[i]], l->refund_ids[i],
			       ref[l->refund_ids[i]]);
			bad++;
		}
	}
	free(pay);
	free(ref);
	return bad ? -1 : 0;
}
