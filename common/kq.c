/*
 * kq - paycb's Kafka producer (see kq.h; consumers are in kq_consumer.c, the admin calls in
 * kq_admin.c).
 *
 * The producer is shared by all threads of a process. A poller thread serves delivery
 * reports; a caller that waits for its message blocks on a per-message completion, which is
 * reference-counted because the waiter may give up at its deadline before the report comes.
 * A caller that does not wait (kq_produce_then, kq_then.c) has its function called by the
 * poller thread with the report, or at its deadline, whichever is first. A producer told to
 * sleep destroys its librdkafka handle when idle, since an idle handle's threads and timers
 * cost about 0.15% of a core, and makes a new one for the next message.
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

int
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

/*
 * kq_open - under rkl held exclusive: makes the librdkafka handle from the template and tells
 * the poller. Returns 0 or -1 with err.
 */
static int
kq_open(struct kq_producer *p, char *err, size_t errlen)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_dup(p->tmpl);
	char e[256];

	if ((p->rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, e, sizeof(e))) == NULL) {
		rd_kafka_conf_destroy(conf);
		snprintf(err, errlen, "kafka producer: %s", e);
		return -1;
	}
	p->mainq = rd_kafka_queue_get_main(p->rk);
	atomic_fetch_add(&p->opens, 1);
	atomic_store(&p->last_us, clock_mono_us());
	pthread_mutex_lock(&p->smu);
	p->awake = 1;
	pthread_cond_signal(&p->scv);
	pthread_mutex_unlock(&p->smu);
	return 0;
}

/*
 * kq_use - holds rkl shared with a handle in it, making one if the producer slept. Returns 0
 * (release with kq_unuse) or -1 with err and nothing held.
 */
static int
kq_use(struct kq_producer *p, char *err, size_t errlen)
{
	long long slept_us;
	int rc = 0;

	for (;;) {
		pthread_rwlock_rdlock(&p->rkl);
		if (p->rk)
			return 0;
		pthread_rwlock_unlock(&p->rkl);
		pthread_rwlock_wrlock(&p->rkl);
		if (p->rk == NULL && atomic_load(&p->stop)) {
			snprintf(err, errlen, "the producer is stopping");
			rc = -1;
		} else if (p->rk == NULL && (rc = kq_open(p, err, errlen)) == 0) {
			slept_us = clock_mono_us() - p->slept_us;
			log_info(NULL, "event=kafka_producer_woken slept_ms=%lld opens=%llu",
			         slept_us / 1000, atomic_load(&p->opens));
		}
		pthread_rwlock_unlock(&p->rkl);
		if (rc != 0)
			return -1;
	}
}

static void
kq_unuse(struct kq_producer *p)
{
	atomic_store(&p->last_us, clock_mono_us());
	pthread_rwlock_unlock(&p->rkl);
}

/*
 * kq_sleep - on the poller thread: destroys the handle of a producer told to sleep once no
 * caller has used it for sleep_ms and nothing is queued, in flight or unreported. Taking rkl
 * exclusive proves that no caller is inside; a caller that wants it meanwhile waits for the
 * destroy and makes a new handle.
 */
static void
kq_sleep(struct kq_producer *p)
{
	long long ms = atomic_load(&p->sleep_ms);
	int none_pending;

	if (ms <= 0 || atomic_load(&p->fatal) ||
	    clock_mono_us() - atomic_load(&p->last_us) < ms * 1000)
		return;
	if (pthread_rwlock_trywrlock(&p->rkl) != 0)
		return;
	pthread_mutex_lock(&p->amu);
	none_pending = p->ahead == NULL;
	pthread_mutex_unlock(&p->amu);
	if (none_pending && rd_kafka_outq_len(p->rk) == 0 && !atomic_load(&p->stop)) {
		pthread_mutex_lock(&p->smu);
		p->awake = 0;
		pthread_mutex_unlock(&p->smu);
		rd_kafka_queue_destroy(p->mainq);
		rd_kafka_destroy(p->rk);
		p->rk = NULL;
		p->mainq = NULL;
		p->slept_us = clock_mono_us();
		log_info(NULL, "event=kafka_producer_asleep idle_ms=%lld delivered=%llu", ms,
		         atomic_load(&p->delivered));
	}
	pthread_rwlock_unlock(&p->rkl);
}

/*
 * kq_poll_wait - how long the poller may wait: until the first kq_produce_then deadline or
 * the idle wait, and no longer than until the handle may sleep, so it sleeps on time.
 */
static int
kq_poll_wait(struct kq_producer *p)
{
	long long ms = atomic_load(&p->sleep_ms), left;
	int wait = kq_then_expire(p);

	if (ms > 0) {
		left = (atomic_load(&p->last_us) + ms * 1000 - clock_mono_us()) / 1000 + 1;
		/* Past it, a handle still in use waits as usual: the check follows each poll. */
		if (left > 0 && left < wait)
			wait = (int)left;
	}
	return wait;
}

static void *
kq_poll_main(void *arg)
{
	struct kq_producer *p = arg;

	/*
	 * A delivery report ends the wait at once, and kq_producer_free wakes it by yielding
	 * the main queue, so the timeout only bounds an idle wait: a second, not the 50 ms that
	 * woke every idle process 20 times a second, or until the first deadline of a
	 * kq_produce_then message (kq_then.c). Without a handle (the producer sleeps) it waits
	 * for one. Only this thread destroys the handle, so it reads p->rk without rkl once smu
	 * said that a handle was made.
	 */
	for (;;) {
		pthread_mutex_lock(&p->smu);
		while (!p->awake && !atomic_load(&p->stop))
			pthread_cond_wait(&p->scv, &p->smu);
		pthread_mutex_unlock(&p->smu);
		if (atomic_load(&p->stop))
			break;
		rd_kafka_poll(p->rk, kq_poll_wait(p));
		kq_sleep(p);
	}
	return NULL;
}

/* kq_template - the settings every handle of the producer is made with. */
static rd_kafka_conf_t *
kq_template(const struct conf_kafka *cf, struct kq_producer *p, char *err, size_t errlen)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char tmo[32];

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
	    kq_set(conf, "partitioner", "murmur2_random", err, errlen)) {
		rd_kafka_conf_destroy(conf);
		return NULL;
	}
	rd_kafka_conf_set_opaque(conf, p);
	rd_kafka_conf_set_dr_msg_cb(conf, kq_on_delivery);
	rd_kafka_conf_set_error_cb(conf, kq_on_error);
	return conf;
}

/* kq_release - frees p once it has no handle and no poller: its template, locks and memory. */
static void
kq_release(struct kq_producer *p)
{
	if (p->tmpl)
		rd_kafka_conf_destroy(p->tmpl);
	pthread_rwlock_destroy(&p->rkl);
	pthread_cond_destroy(&p->scv);
	pthread_mutex_destroy(&p->smu);
	pthread_mutex_destroy(&p->amu);
	free(p);
}

int
kq_producer_new(const struct conf_kafka *cf, struct kq_producer **out, char *err, size_t errlen)
{
	struct kq_producer *p = NULL;

	if ((p = calloc(1, sizeof(*p))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	pthread_mutex_init(&p->amu, NULL);
	pthread_mutex_init(&p->smu, NULL);
	pthread_cond_init(&p->scv, NULL);
	pthread_rwlock_init(&p->rkl, NULL);
	atomic_store(&p->idle_poll_ms, 1000);
	if ((p->tmpl = kq_template(cf, p, err, errlen)) == NULL || kq_open(p, err, errlen) != 0)
		goto fail;
	if (pthread_create(&p->poller, NULL, kq_poll_main, p) != 0) {
		snprintf(err, errlen, "cannot start the kafka poller thread");
		rd_kafka_queue_destroy(p->mainq);
		rd_kafka_destroy(p->rk);
		goto fail;
	}
	*out = p;
	return 0;
fail:
	kq_release(p);
	return -1;
}

void
kq_producer_sleep_after(struct kq_producer *p, int idle_ms)
{
	atomic_store(&p->sleep_ms, idle_ms);
}

int
kq_producer_asleep(struct kq_producer *p)
{
	int asleep;

	pthread_mutex_lock(&p->smu);
	asleep = !p->awake;
	pthread_mutex_unlock(&p->smu);
	return asleep;
}

unsigned long long
kq_producer_opens(const struct kq_producer *p)
{
	return atomic_load(&p->opens);
}

/* kq_send - queues one message; the caller holds the handle (kq_use). */
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
	if (kq_use(p, err, errlen) != 0) {
		free(w);
		return -1;
	}
	if (kq_send(p, topic, key, klen, val, vlen, w, err, errlen) != 0) {
		kq_unuse(p);
		free(w);
		return -1;
	}
	/* Listed before the handle is released: a handle with a pending message stays. */
	kq_then_list(p, w);
	kq_unuse(p);
	return 0;
}

int
kq_produce(struct kq_producer *p, const char *topic, const void *key, size_t klen, const void *val,
           size_t vlen, char *err, size_t errlen)
{
	int rc;

	if (kq_use(p, err, errlen) != 0)
		return -1;
	rc = kq_send(p, topic, key, klen, val, vlen, NULL, err, errlen);
	kq_unuse(p);
	return rc;
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
	if (kq_use(p, err, errlen) != 0 ||
	    (kq_send(p, topic, key, klen, val, vlen, w, err, errlen) != 0 && (kq_unuse(p), 1))) {
		w->refs = 1;
		kq_wait_unref(w);
		return NULL;
	}
	kq_unuse(p);
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
	int left = 0;

	/* A producer asleep has nothing queued: it is not woken to say so. */
	pthread_rwlock_rdlock(&p->rkl);
	if (p->rk) {
		rd_kafka_flush(p->rk, timeout_ms);
		left = rd_kafka_outq_len(p->rk);
	}
	pthread_rwlock_unlock(&p->rkl);
	return left;
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
	rd_kafka_resp_err_t e;
	char err[256];

	if (kq_use(p, err, sizeof(err)) != 0)
		return -1;
	e = rd_kafka_metadata(p->rk, 0, NULL, &md, timeout_ms);
	kq_unuse(p);
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR)
		return -1;
	rd_kafka_metadata_destroy(md);
	return 0;
}

int
kq_producer_warm(struct kq_producer *p, const char *topic, int timeout_ms)
{
	const struct rd_kafka_metadata *md;
	rd_kafka_topic_t *rkt;
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR__FAIL;
	char err[256];

	if (kq_use(p, err, sizeof(err)) != 0)
		return -1;
	if ((rkt = rd_kafka_topic_new(p->rk, topic, NULL)) != NULL) {
		e = rd_kafka_metadata(p->rk, 0, rkt, &md, timeout_ms);
		if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
			rd_kafka_metadata_destroy(md);
		rd_kafka_topic_destroy(rkt);
	}
	kq_unuse(p);
	return e == RD_KAFKA_RESP_ERR_NO_ERROR ? 0 : -1;
}

void
kq_producer_free(struct kq_producer *p)
{
	if (p == NULL)
		return;
	/*
	 * The poller stops first, so it neither destroys the handle nor serves reports from
	 * here on. rd_kafka_yield only works from inside a callback: the queue's yield wakes a
	 * poller that waits in rd_kafka_poll, the condition one that waits for a handle.
	 */
	atomic_store(&p->stop, 1);
	pthread_mutex_lock(&p->smu);
	pthread_cond_signal(&p->scv);
	pthread_mutex_unlock(&p->smu);
	pthread_rwlock_rdlock(&p->rkl);
	if (p->mainq)
		rd_kafka_queue_yield(p->mainq);
	pthread_rwlock_unlock(&p->rkl);
	pthread_join(p->poller, NULL);
	/*
	 * Messages still queued (the caller flushed with a deadline, or gave up) are purged so
	 * their delivery reports run now, served here, and release their waiters' completions.
	 */
	if (p->rk) {
		rd_kafka_purge(p->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
		for (int i = 0; i < 100 && rd_kafka_outq_len(p->rk) > 0; i++)
			rd_kafka_poll(p->rk, 50);
		rd_kafka_queue_destroy(p->mainq);
		rd_kafka_destroy(p->rk);
	}
	kq_release(p);
}
