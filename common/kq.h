/*
 * kq - Kafka for paycb on librdkafka: an idempotent producer (acks=all) whose callers can wait
 * for one message's delivery report with a deadline, or publish a batch and wait for all its
 * reports against one deadline (kq_publish_batch, the path every confirmed publish takes), a
 * consumer that stores offsets only when told, and topic creation.
 */
#ifndef PAYCB_KQ_H
#define PAYCB_KQ_H

#include <librdkafka/rdkafka.h>
#include <stddef.h>
#include <time.h>

#include "conf.h"

struct kq_producer;

/* Applies brokers and security settings of cf to conf. Returns 0 or -1 with err. */
int kq_conf_common(rd_kafka_conf_t *conf, const struct conf_kafka *cf, char *err, size_t errlen);

int kq_producer_new(const struct conf_kafka *cf, struct kq_producer **out, char *err,
                    size_t errlen);
/*
 * Produces one message and waits up to timeout_ms for its delivery report.
 * Returns 0 when delivered, -1 when it failed (err says why), -2 when the deadline passed
 * first (the message may still be delivered later).
 */
int kq_produce_wait(struct kq_producer *p, const char *topic, const void *key, size_t klen,
                    const void *val, size_t vlen, int timeout_ms, char *err, size_t errlen);
/*
 * The two halves of kq_produce_wait, for callers with several messages in flight at once:
 * kq_produce_start queues one message and returns its completion (NULL with err when it
 * could not be queued); kq_wait_end waits for it until the absolute deadline dl (from
 * clock_deadline) and releases it, returning as kq_produce_wait does.
 */
struct kq_wait;
struct kq_wait *kq_produce_start(struct kq_producer *p, const char *topic, const void *key,
                                 size_t klen, const void *val, size_t vlen, char *err,
                                 size_t errlen);
int kq_wait_end(struct kq_wait *w, const struct timespec *dl, char *err, size_t errlen);
/*
 * Produces one message without waiting: fn(arg, rc, err) is called once, on the producer's
 * poller thread (or a thread in kq_flush), with the delivery report or when timeout_ms have
 * passed without one, rc as kq_produce_wait returns it; it must not block, and it may run
 * before kq_produce_then returns. Returns 0 when the message was queued, else -1 with err and
 * fn is never called.
 */
typedef void (*kq_done_fn)(void *arg, int rc, const char *err);
int kq_produce_then(struct kq_producer *p, const char *topic, const void *key, size_t klen,
                    const void *val, size_t vlen, int timeout_ms, kq_done_fn fn, void *arg,
                    char *err, size_t errlen);
/*
 * One message of kq_publish_batch, and what became of it: delivered (its report said so),
 * failed (it was not queued, or its report said it was not written) or unknown (no report by
 * the deadline: it may still be delivered, so only a later publish of the same message, which
 * its consumers deduplicate, is safe).
 */
struct kq_msg {
	const char *topic;
	const void *key;
	size_t klen;
	const void *val;
	size_t vlen;
};
enum kq_outcome { KQ_DELIVERED = 0, KQ_FAILED = -1, KQ_UNKNOWN = -2 };
struct kq_result {
	int rc; /* enum kq_outcome, the values kq_wait_end returns */
	char err[256];
};
/*
 * Queues msgs[0..n) and waits once, until timeout_ms after the last was queued, for all their
 * delivery reports; res[i] says what became of msgs[i]. Returns how many were delivered. In
 * kq_batch.c.
 */
int kq_publish_batch(struct kq_producer *p, const struct kq_msg *msgs, int n, int timeout_ms,
                     struct kq_result *res);
/* Produces without waiting; failures are counted and logged by the delivery callback. */
int kq_produce(struct kq_producer *p, const char *topic, const void *key, size_t klen,
               const void *val, size_t vlen, char *err, size_t errlen);
/* Flushes; returns the number of messages still undelivered after timeout_ms. */
int kq_flush(struct kq_producer *p, int timeout_ms);
/* Counters since start. */
unsigned long long kq_delivered(const struct kq_producer *p);
unsigned long long kq_failed(const struct kq_producer *p);
/*
 * True from librdkafka's "all brokers are down" until the next successful delivery: a
 * delivery report cannot come soon, and a caller with a budget need not wait for one.
 */
int kq_brokers_down(const struct kq_producer *p);
/* True after a fatal producer error (the idempotence guarantee is gone). */
int kq_fatal(const struct kq_producer *p);
void kq_producer_free(struct kq_producer *p);
/*
 * Learns a topic's metadata now. Without it librdkafka holds the first message to a topic it
 * has not used yet for about a second, half of ingest's publish budget.
 */
int kq_producer_warm(struct kq_producer *p, const char *topic, int timeout_ms);
/* Checks that the cluster answers a metadata request within timeout_ms (waking p). */
int kq_producer_ping(struct kq_producer *p, int timeout_ms);
/*
 * Lets p sleep: once no message was produced for idle_ms and none is queued, in flight or
 * unreported, its librdkafka handle (connections, threads, timers) is destroyed, and the next
 * message, ping or warm-up makes a new one, which starts a new idempotent producer session
 * (one InitProducerId request). kq_flush does not wake it. 0 (the default) never sleeps.
 */
void kq_producer_sleep_after(struct kq_producer *p, int idle_ms);
/* True while p has no handle; the handles made so far, the first included. */
int kq_producer_asleep(struct kq_producer *p);
unsigned long long kq_producer_opens(const struct kq_producer *p);

/*
 * Consumers (kq_consumer.c). Creates a consumer in group with enable.auto.offset.store=false
 * (offsets are stored only by kq_store), auto commit of stored offsets, earliest reset, and
 * subscribes to topics. rebalance_cb may be NULL (the default assign/unassign, for both
 * protocols).
 */
rd_kafka_t *kq_consumer_new(const struct conf_kafka *cf, const char *group,
                            const char *const *topics, int ntopics,
                            void (*rebalance_cb)(rd_kafka_t *, rd_kafka_resp_err_t,
                                                 rd_kafka_topic_partition_list_t *, void *),
                            void *opaque, char *err, size_t errlen);
/* Stores the offset after m (m's offset + 1) for the next commit. */
int kq_store(rd_kafka_t *rk, const rd_kafka_message_t *m);
/* Checks that the cluster answers a consumer's metadata request within timeout_ms. */
int kq_consumer_ping(rd_kafka_t *rk, int timeout_ms);

/*
 * Creates the topics that are missing and grows an existing topic that has fewer partitions
 * than asked to that many (one with more is left alone: Kafka cannot shrink a topic).
 * had, if not NULL, gets for each topic the partitions it had before (0: it was created).
 * Returns 0 or -1 with err. In kq_admin.c.
 */
int kq_create_topics(const struct conf_kafka *cf, const char *const *names, const int *partitions,
                     const long long *retention_ms, int n, int timeout_ms, int *had, char *err,
                     size_t errlen);

#endif
