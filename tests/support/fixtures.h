/*
 * fixtures - what processor tests build their cases from: orders, callback rows reserved
 * exactly as ingest reserves them (one autocommit INSERT, next_retry_at = NOW(3) + the
 * initial lease), their callback messages published as ingest publishes them (key
 * merchant|order), and reading topics and committed offsets back.
 */
#ifndef PAYCB_FIXTURES_H
#define PAYCB_FIXTURES_H

#include <librdkafka/rdkafka.h>
#include <stdint.h>

#include "conf.h"
#include "db.h"

/* Inserts an order; status is one of PENDING, PAID, CLOSED, ... Returns 0 or -1. */
int fx_order(struct db *db, const char *merchant, const char *order, const char *amount,
             const char *currency, const char *status);

/* Reserves a pay_callback_log row; returns its id, 0 on error. */
unsigned long long fx_pay_row(struct db *db, const struct conf *cf, const char *merchant,
                              const char *channel, const char *trade_no, const char *order,
                              const char *amount, const char *currency);
/* Reserves a refund_callback_log row; pay_trade_no may be "". Returns its id, 0 on error. */
unsigned long long fx_refund_row(struct db *db, const struct conf *cf, const char *merchant,
                                 const char *channel, const char *refund_no,
                                 const char *pay_trade_no, const char *order, const char *amount,
                                 int cumulative, const char *currency);
/* The same with the channel's event type and refund status (fx_refund_row: a WeChat Pay
 * REFUND.SUCCESS / SUCCESS). */
unsigned long long fx_refund_row_status(struct db *db, const struct conf *cf, const char *merchant,
                                        const char *channel, const char *refund_no,
                                        const char *pay_trade_no, const char *order,
                                        const char *amount, int cumulative, const char *currency,
                                        const char *event_type, const char *status);

struct msg_callback;
/* The callback message of row id (a refund row when refund is set), as ingest builds it;
 * fx_publish publishes it and inproc_apply hands it to the processor. */
void fx_message(struct msg_callback *m, int refund, unsigned long long id, const char *merchant,
                const char *channel, const char *order, int attempt);

/* A producer with the settings of kq.c (idempotent, acks=all, murmur2_random). */
struct fx_pub;
struct fx_pub *fx_pub_new(const struct conf *cf);
void fx_pub_free(struct fx_pub *p);

/* Where a published message landed. */
struct fx_pos {
	int32_t partition;
	int64_t offset;
	int64_t timestamp_ms;
};

/*
 * Publishes the callback message of a row on topic (NULL = <prefix>.callbacks) to partition
 * (RD_KAFKA_PARTITION_UA = by key, as ingest does). With pos non-NULL it waits for the
 * delivery report and fills pos. Returns 0 or -1.
 */
int fx_publish(struct fx_pub *p, const char *topic, int refund, unsigned long long id,
               const char *merchant, const char *channel, const char *order, int attempt,
               int32_t partition, struct fx_pos *pos);
/* Waits for every message published so far; returns 0 when all were delivered. */
int fx_pub_flush(struct fx_pub *p, int timeout_ms);

/* The committed offset of the processors' group (kafka.group_id) for a partition, -1 none. */
long long fx_committed(const struct conf *cf, const char *topic, int32_t partition);

/*
 * What a Kafka test's main starts with: harness_setup(cf, tag, NULL), then a test topic named
 * by conf_topic of tag (into topic) created with parts partitions if it is missing. Returns
 * 0, or -1 after printing why as a TAP comment.
 */
int fx_kafka_setup(struct conf *cf, const char *tag, int parts, char *topic, size_t len);
/*
 * A new kq producer with topic's metadata already learnt, so that a stopped broker is the only
 * reason for a late report. NULL (after a TAP comment) when either fails.
 */
struct kq_producer *fx_producer(const struct conf *cf, const char *topic);

/* The local broker's pid, from deploy/local/kafka.sh's pid file under PAYCB_VAR; 0 if none. */
int fx_broker_pid(void);
/* SIGSTOP to pid (the broker), returning once every thread of it is stopped: 0, or -1. */
int fx_broker_stop(int pid);
/* SIGCONT to the local broker; a cmocka teardown (state unused) for cases that stop it. */
int fx_broker_resume(void **state);

/*
 * Reads every message of topic up to the high watermarks taken at the start, calling cb
 * for each (cb returns non-zero to stop). Returns the number read or -1.
 */
long long fx_read_topic(const struct conf *cf, const char *topic,
                        int (*cb)(void *arg, const rd_kafka_message_t *m), void *arg);
/* An fx_read_topic callback that counts every message in the int arg points at. */
int fx_count_all(void *arg, const rd_kafka_message_t *m);

/*
 * Formats a query (printf style) and returns the number its first column gives. Each call
 * opens and closes a connection of its own to cf's database, because the statement cache is
 * keyed by the SQL's address and every formatted query lands in the same stack buffer.
 */
long long fx_countf(const struct conf *cf, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Where tests keep their files: $PAYCB_VAR (tests/run.sh sets it), else /tmp. */
const char *fx_dir(void);
/*
 * Sets up the configuration every processor test starts from: harness_setup(cf, tag,
 * ladder), the processors' consumer group "<prefix>.processor" and the number of worker
 * threads. The caller still opens its database with harness_db() itself, because some tests
 * change cf (timeouts, a proxy, the log level) in between. Returns 0, or -1 when
 * harness_setup fails.
 */
int fx_processor_conf(struct conf *cf, const char *tag, const char *ladder, int threads);
/*
 * The processor daemon (fixtures_daemon.c, which links the simulator's archive through
 * harness_write_conf).
 *
 * Writes cf to <dir>/test-logs/<prefix>-<name>.conf and starts bin/paycb-processor (or
 * $PAYCB_PROCESSOR_BIN) with it; its log goes to <dir>/test-logs/<prefix>-<name>.log, whose
 * path is returned in log. Returns the pid or -1. Stop it with harness_stop().
 */
int fx_processor_start(const struct conf *cf, const char *name, char *log, size_t loglen);
/*
 * What a group of processor cases starts with: a new publisher in *pub and the processor
 * "processor" (fx_processor_start) in *pid, waited for until it owns its partitions, so what
 * a case publishes is consumed at once. Returns 0, or -1 as a cmocka group setup wants
 * (*pub and *pid then say what was made, for the teardown).
 */
int fx_processor_up(const struct conf *cf, struct fx_pub **pub, int *pid, char *log, size_t loglen,
                    long long timeout_ms);
/*
 * Frees pub and stops the processor pid with SIGTERM (it drains and must exit 0; the
 * sanitizer build reports leaks as a failure here), printing how it exited and its log.
 * Returns 0 when it exited 0, else -1, as a cmocka group teardown wants.
 */
int fx_processor_stop(struct fx_pub *pub, int pid, const char *log);

struct fx_load;
/* A condition for harness_wait_until(): file holds needle at least n times. */
struct fx_logwait {
	const char *file, *needle;
	long long n;
};
int fx_log_has(void *arg);
/* Waits until file holds needle at least n times; 0, or -1 at the deadline. */
int fx_wait_log(const char *file, const char *needle, long long n, long long timeout_ms);

/* A condition for harness_wait_until(): at least want callbacks of load l are done in db. */
struct fx_progress {
	struct db *db;
	const struct fx_load *l;
	long long want;
};
int fx_load_done_at_least(void *arg);

/* Waits until a callback row's status (or retry_count) is the wanted one; 0 or -1. */
int fx_wait_row(struct db *db, int refund, unsigned long long id, int status, long long timeout_ms);
int fx_wait_retry(struct db *db, int refund, unsigned long long id, int retry_count,
                  long long timeout_ms);

/*
 * A load: n orders "<prefix>-<i>" of 10.00 CNY, each with a payment row (trade
 * "T-<prefix>-<i>") and a partial refund row of 1.00 ("R-<prefix>-<i>"), 2n callbacks.
 */
struct fx_load {
	char prefix[32];
	int n;
	unsigned long long *pay_ids, *refund_ids;
};
int fx_load_create(struct db *db, const struct conf *cf, struct fx_load *l, const char *prefix,
                   int n);
void fx_load_free(struct fx_load *l);
/* Publishes the callbacks of orders [from, to): each payment, then its refund (one key, so
 * one partition, in this order). Waits for all deliveries. Returns 0 or -1. */
int fx_load_publish(struct fx_pub *p, const struct fx_load *l, int from, int to);
/* Callback rows of the load that are done (both logs). */
long long fx_load_done(struct db *db, const struct fx_load *l);
/*
 * Checks that every callback of the load had exactly one effect: each order REFUNDING with
 * exactly 1.00 refunded and paid by its own trade, 2 events per order, one order_refunds
 * row, rows done with outcomes paid / refund_partial and no failure, no refund request and
 * no alert; and that no processor log (of nlogs) shows a callback applied twice. Prints
 * what is wrong; returns 0 when all holds. *skipped gets the deliveries the logs show as
 * skipped (redelivered after their effect committed).
 */
int fx_load_check(struct db *db, const struct fx_load *l, char logs[][1024], int nlogs,
                  long long *skipped);

#endif
