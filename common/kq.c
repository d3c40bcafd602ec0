/*
 * kq - Kafka producer and consumer helpers (see kq.h; the admin calls are in kq_admin.c).
 *
 * The producer is shared by all threads of a process. A poller thread serves delivery
 * reports; a caller that waits for its message blocks on a per-message completion, which is
 * reference-counted because the waiter may give up at its deadline before the report comes.
 * A caller that does not wait (kq_produce_then, kq_then.c) has its function called by the
 * poller thread with the report, or at its deadline, whichever is first.
 */
#include "kq.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "daemon.h"
#include "kq_int.h"
#include "log.h"

static int
kq_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err, size_t errlen)
{
	char e[256];

	if (rd_kafka_conf_set(conf, k, v, e, sizeof(e)) != RD_KAFKA_CONF_OK) {
		snprintf(err, errlen, "kafka setting %s: %s", k, e);
		return -1;
	}
	return 0;
}

int
kq_conf_common(rd_kafka_conf_t *conf, const struct conf_kafka *cf, char *err, size_t errlen)
{
	char *pw = NULL;
	size_t len;
	int rc = -1;

	if (kq_set(conf, "bootstrap.servers", cf->brokers, err, errlen) ||
	    kq_set(conf, "security.protocol", cf->security_protocol, err, errlen) ||
	    kq_set(conf, "client.id", "paycb", err, errlen) ||
	    /*
	     * Partitions added to a topic while paycb runs are used within 30 s, not 5 min. Not
	     * every 10 s: each refresh is a request to the broker and, in a consumer, a pass
	     * over every partition of its subscription (docs/performance.md, "Idle").
	     */
	    kq_set(conf, "topic.metadata.refresh.interval.ms", "30000", err, errlen))
		goto done;
	if (cf->ssl_ca_file[0] && kq_set(conf, "ssl.ca.location", cf->ssl_ca_file, err, errlen))
		goto done;
	if (cf->sasl_mechanism[0]) {
		if (kq_set(conf, "sasl.mechanisms", cf->sasl_mechanism, err, errlen) ||
		    kq_set(conf, "sasl.username", cf->sasl_username, err, errlen))
			goto done;
		if (cf->sasl_password_file[0]) {
			if (cfg_read_secret(cf->sasl_password_file, &pw, &len, err, errlen) != 0)
				goto done;
			if (kq_set(conf, "sasl.password", pw, err, errlen))
				goto done;
		}
	}
	rc = 0;
done:
	if (pw) {
		explicit_bzero(pw, strlen(pw));
		free(pw);
	}
	return rc;
}

static void
kq_wait_unref(struct kq_wait *w)
{
	int last;

	pthread_mutex_lock(&w->mu);
	last = --w->refs == 0;
	pthread_mutex_unlock(&w->mu);
	if (last) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
	}
}

static void
kq_on_delivery(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque)
{
	struct kq_producer *p = opaque;
	struct kq_wait *w = m->_private;

	(void)rk;
	if (m->err) {
		atomic_fetch_add(&p->failed, 1);
		log_warn(NULL, "event=kafka_delivery_failed topic=%s error=\"%s\"",
		         rd_kafka_topic_name(m->rkt), rd_kafka_err2str(m->err));
	} else {
		atomic_fetch_add(&p->delivered, 1);
		if (atomic_exchange(&p->down, 0))
			log_info(NULL, "event=kafka_up topic=%s", rd_kafka_topic_name(m->rkt));
	}
	if (w && w->fn) {
		kq_then_report(p, w, m->err);
	} else if (w) {
		pthread_mutex_lock(&w->mu);
		w->done = 1;
		w->err = m->err;
		pthread_cond_signal(&w->cv);
		pthread_mutex_unlock(&w->mu);
		kq_wait_unref(w);
	}
}

static void
kq_on_error(rd_kafka_t *rk, int err, const char *reason, void *opaque)
{
	struct kq_producer *p = opaque;
	char fatal[256];

	/* Most errors are informational: librdkafka recovers by itself. Fatal ones are not. */
	if (err == RD_KAFKA_RESP_ERR__FATAL) {
		rd_kafka_fatal_error(rk, fatal, sizeof(fatal));
		atomic_store(&p->fatal, 1);
		log_error(NULL, "event=kafka_fatal error=\"%s\"", fatal);
		/* Every daemon's loop watches kq_fatal and waits until woken. */
		daemon_wake();
		return;
	}
	/* Cleared by the next delivery, which is the proof that a broker is back. */
	if (err == RD_KAFKA_RESP_ERR__ALL_BROKERS_DOWN)
		atomic_store(&p->down, 1);
	log_warn(NULL, "event=kafka_error error=\"%s\"", reason);
}

static void *
kq_poll_main(void *arg)
{
	struct kq_producer *p = arg;

	/*
	 * A delivery report ends the wait at once, and kq_producer_free wakes it by yielding
	 * the main queue, so the timeout only bounds an idle wait: a second, not the 50 ms that
	 * woke every idle process 20 times a second, or until the first deadline of a
	 * kq_produce_then message (kq_then.c).
	 */
	while (!atomic_load(&p->stop))
		rd_kafka_poll(p->rk, kq_then_expire(p));
	return NULL;
}

int
kq_producer_new(const struct conf_kafka *cf, struct kq_producer **out, char *err, size_t errlen)
{
	struct kq_producer *p = NULL;
	rd_kafka_conf_t *conf = NULL;
	char tmo[32], e[256];

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto fail;
	}
	pthread_mutex_init(&p->amu, NULL);
	atomic_store(&p->idle_poll_ms, 1000);
	conf = rd_kafka_conf_new();
	snprintf(tmo, sizeof(tmo), "%lld", cf->delivery_timeout_ms);
	/*
	 * Idempotence implies acks=all and bounded in-flight requests: no duplicates, no
	 * reordering within a partition, even across broker retries. No linger: a message goes
	 * out as soon as the connection has room, and while 5 requests are in flight the
	 * messages that arrive meanwhile wait in their partition's queue and share the next
	 * one, so batches still grow with load. A 1 ms linger was ~0.9 ms of every
	 * acknowledgement at 8 clients, the largest part paycb chose (docs/performance.md).
	 */
	if (kq_conf_common(conf, cf, err, errlen) ||
	    kq_set(conf, "enable.idempotence", "true", err, errlen) ||
	    kq_set(conf, "acks", "all", err, errlen) ||
	    kq_set(conf, "message.timeout.ms", tmo, err, errlen) ||
	    kq_set(conf, "linger.ms", "0", err, errlen) ||
	    kq_set(conf, "partitioner", "murmur2_random", err, errlen))
		goto fail;
	rd_kafka_conf_set_opaque(conf, p);
	rd_kafka_conf_set_dr_msg_cb(conf, kq_on_delivery);
	rd_kafka_conf_set_error_cb(conf, kq_on_error);
	if ((p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e))) == NULL) {
		snprintf(err, errlen, "kafka producer: %s", e);
		goto fail;
	}
	conf = NULL; /* rd_kafka_new() took ownership. */
	p->mainq = rd_kafka_queue_get_main(p->rk);
	if (pthread_create(&p->poller, NULL, kq_poll_main, p) != 0) {
		snprintf(err, errlen, "cannot start the kafka poller thread");
		rd_kafka_queue_destroy(p->mainq);
		rd_kafka_destroy(p->rk);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	if (conf)
		rd_kafka_conf_destroy(conf);
	free(p);
	return -1;
}

static int
kq_send(struct kq_producer *p, const char *topic, const void *key, size_t klen, const void *val,
        size_t vlen, struct kq_wait *w, char *err, size_t errlen)
{
	rd_kafka_resp_err_t e;

	for (int tries = 0;; tries++) {
		/* librdkafka takes key and value as void * for the F_FREE case; with F_COPY it only
		 * reads them, so dropping const through uintptr_t is safe here. */
		e = rd_kafka_producev(
		    p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY((void *)(uintptr_t)key, klen),
		    RD_KAFKA_V_VALUE((void *)(uintptr_t)val, vlen),
		    RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_OPAQUE(w), RD_KAFKA_V_END);
		/* A full queue drains as the poller serves reports; wait a little, bounded. */
		if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL && tries < 50) {
			struct timespec ts = {0, 10 * 1000 * 1000};
			nanosleep(&ts, NULL);
			continue;
		}
		break;
	}
	if (e) {
		snprintf(err, errlen, "produce to %s: %s", topic, rd_kafka_err2str(e));
		return -1;
	}
	return 0;
}

int
kq_produce_then(struct kq_producer *p, const char *topic, const void *key, size_t klen,
                const void *val, size_t vlen, int timeout_ms, kq_done_fn fn, void *arg, char *err,
                size_t errlen)
{
	struct kq_wait *w;

	if ((w = kq_then_new(p, timeout_ms, fn, arg)) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	if (kq_send(p, topic, key, klen, val, vlen, w, err, errlen) != 0) {
		free(w);
		return -1;
	}
	kq_then_list(p, w);
	return 0;
}

int
kq_produce(struct kq_producer *p, const char *topic, const void *key, size_t klen, const void *val,
           size_t vlen, char *err, size_t errlen)
{
	return kq_send(p, topic, key, klen, val, vlen, NULL, err, errlen);
}

struct kq_wait *
kq_produce_start(struct kq_producer *p, const char *topic, const void *key, size_t klen,
                 const void *val, size_t vlen, char *err, size_t errlen)
{
	struct kq_wait *w;

	if ((w = calloc(1, sizeof(*w))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return NULL;
	}
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->refs = 2; /* the waiter and the delivery report */
	if (kq_send(p, topic, key, klen, val, vlen, w, err, errlen) != 0) {
		w->refs = 1;
		kq_wait_unref(w);
		return NULL;
	}
	return w;
}

int
kq_wait_end(struct kq_wait *w, const struct timespec *dl, char *err, size_t errlen)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	while (!w->done)
		if (pthread_cond_timedwait(&w->cv, &w->mu, dl) == ETIMEDOUT)
			break;
	if (!w->done) {
		rc = -2;
		snprintf(err, errlen, "no delivery report by the deadline");
	} else if (w->err) {
		rc = -1;
		snprintf(err, errlen, "delivery failed: %s", rd_kafka_err2str(w->err));
	} else {
		rc = 0;
	}
	pthread_mutex_unlock(&w->mu);
	kq_wait_unref(w);
	return rc;
}

int
kq_produce_wait(struct kq_producer *p, const char *topic, const void *key, size_t klen,
                const void *val, size_t vlen, int timeout_ms, char *err, size_t errlen)
{
	struct kq_wait *w;
	struct timespec dl;
	char e[200];
	int rc;

	if ((w = kq_produce_start(p, topic, key, klen, val, vlen, err, errlen)) == NULL)
		return -1;
	clock_deadline(&dl, timeout_ms);
	if ((rc = kq_wait_end(w, &dl, e, sizeof(e))) == -2)
		snprintf(err, errlen, "no delivery report within %d ms", timeout_ms);
	else if (rc != 0)
		snprintf(err, errlen, "delivery to %s failed: %s", topic, e);
	return rc;
}

int
kq_flush(struct kq_producer *p, int timeout_ms)
{
	rd_kafka_flush(p->rk, timeout_ms);
	return rd_kafka_outq_len(p->rk);
}

unsigned long long
kq_delivered(const struct kq_producer *p)
{
	return atomic_load(&p->delivered);
}

unsigned long long
kq_failed(const struct kq_producer *p)
{
	return atomic_load(&p->failed);
}

int
kq_brokers_down(const struct kq_producer *p)
{
	return atomic_load(&p->down);
}

int
kq_fatal(const struct kq_producer *p)
{
	return atomic_load(&p->fatal);
}

int
kq_producer_ping(struct kq_producer *p, int timeout_ms)
{
	const struct rd_kafka_metadata *md;

	if (rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return -1;
	rd_kafka_metadata_destroy(md);
	return 0;
}

int
kq_producer_warm(struct kq_producer *p, const char *topic, int timeout_ms)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(p->rk, topic, NULL);
	rd_kafka_resp_err_t e;

	if (rkt == NULL)
		return -1;
	e = rd_kafka_metadata(p->rk, 0, rkt, &md, timeout_ms);
	if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	return e == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}

void
kq_producer_free(struct kq_producer *p)
{
	if (p == NULL)
		return;
	/*
	 * Messages still queued (the caller flushed with a deadline, or gave up) are purged so
	 * their delivery reports run now and release their waiters' completions; the poller
	 * thread serves those reports until the queue is empty.
	 */
	rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
	for (int i = 0; i < 100 && rd_kafka_outq_len(p->rk) > 0; i++)
		rd_kafka_poll(p->rk, 50);
	atomic_store(&p->stop, 1);
	/* rd_kafka_yield only works from inside a callback: the queue's yield wakes the
	 * poller from here. */
	rd_kafka_queue_yield(p->mainq);
	pthread_join(p->poller, NULL);
	rd_kafka_queue_destroy(p->mainq);
	rd_kafka_destroy(p->rk);
	pthread_mutex_destroy(&p->amu);
	free(p);
}

static void
kq_default_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque)
{
	int coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;

	(void)opaque;
	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		if (coop)
			rd_kafka_error_destroy(rd_kafka_incremental_assign(rk, parts));
		else
			rd_kafka_assign(rk, parts);
	} else {
		if (coop)
			rd_kafka_error_destroy(rd_kafka_incremental_unassign(rk, parts));
		else
			rd_kafka_assign(rk, NULL);
	}
}

rd_kafka_t *
kq_consumer_new(const struct conf_kafka *cf, const char *group, const char *const *topics,
                int ntopics,
                void (*rebalance_cb)(rd_kafka_t *, rd_kafka_resp_err_t,
                                     rd_kafka_topic_partition_list_t *, void *),
                void *opaque, char *err, size_t errlen)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_topic_partition_list_t *subs = NULL;
	rd_kafka_t *rk = NULL;
	rd_kafka_resp_err_t e;
	char es[256];

	if (kq_conf_common(conf, cf, err, errlen) || kq_set(conf, "group.id", group, err, errlen) ||
	    kq_set(conf, "enable.auto.offset.store", "false", err, errlen) ||
	    kq_set(conf, "enable.auto.commit", "true", err, errlen) ||
	    kq_set(conf, "auto.commit.interval.ms", "1000", err, errlen) ||
	    kq_set(conf, "auto.offset.reset", "earliest", err, errlen) ||
	    /*
	     * A dead member is noticed after the session (10 s, unchanged), so failover does
	     * not wait for longer. A heartbeat every 3 s, not every 1 s: a third of the
	     * requests an idle consumer sends besides its fetches, at the cost of a live member
	     * learning of a rebalance up to 3 s later (its next heartbeat); three heartbeats
	     * still fit in a session.
	     */
	    kq_set(conf, "session.timeout.ms", "10000", err, errlen) ||
	    kq_set(conf, "heartbeat.interval.ms", "3000", err, errlen) ||
	    /*
	     * An idle consumer's fetch waits at the broker this long for a message (one arrives
	     * and the fetch returns at once), so it bounds idle fetches, not latency: 500 ms made
	     * two empty fetches a second per consumer. A partition resumed or sought while a
	     * fetch waits joins the next one, so a hold's release can be late by up to this.
	     */
	    kq_set(conf, "fetch.wait.max.ms", "1000", err, errlen) ||
	    kq_set(conf, "enable.partition.eof", "false", err, errlen))
		goto fail;
	rd_kafka_conf_set_opaque(conf, opaque);
	rd_kafka_conf_set_rebalance_cb(conf, rebalance_cb ? rebalance_cb : kq_default_rebalance);
	if ((rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, es, sizeof(es))) == NULL) {
		snprintf(err, errlen, "kafka consumer: %s", es);
		goto fail;
	}
	conf = NULL;
	rd_kafka_poll_set_consumer(rk);
	subs = rd_kafka_topic_partition_list_new(ntopics);
	for (int i = 0; i < ntopics; i++)
		rd_kafka_topic_partition_list_add(subs, topics[i], RD_KAFKA_PARTITION_UA);
	if ((e = rd_kafka_subscribe(rk, subs)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		snprintf(err, errlen, "subscribe: %s", rd_kafka_err2str(e));
		goto fail;
	}
	rd_kafka_topic_partition_list_destroy(subs);
	return rk;
fail:
	if (subs)
		rd_kafka_topic_partition_list_destroy(subs);
	if (rk)
		rd_kafka_destroy(rk);
	if (conf)
		rd_kafka_conf_destroy(conf);
	return NULL;
}

int
kq_store(rd_kafka_t *rk, const rd_kafka_message_t *m)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_resp_err_t e;

	rd_kafka_topic_partition_list_add(l, rd_kafka_topic_name(m->rkt), m->partition)->offset =
	    m->offset + 1;
	e = rd_kafka_offsets_store(rk, l);
	rd_kafka_topic_partition_list_destroy(l);
	return e == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}
