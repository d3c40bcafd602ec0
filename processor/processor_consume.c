/*
 * processor_consume - a worker's consumer loop, its rebalance callback, its holds, and the
 * request to stop the process that a worker (or the daemon) makes.
 *
 * A worker polls with a short timeout, then takes whatever else is ready without waiting:
 * a run of main-topic messages of one partition (up to PROC_BATCH_MAX) is applied in one
 * transaction (proc_handle_batch), and anything else one message at a time; of a batch that
 * does not apply, the message that ended it goes alone and the others in batches once more
 * (proc_flush). A message's offset is stored only once its work is committed (see
 * processor_handle.c), and librdkafka commits stored offsets every second and when
 * partitions are revoked.
 *
 * A message that must wait - a delay-topic message not yet due (its timestamp plus the
 * topic's delay, but never later than the delay after this worker first saw it, so a
 * message stamped in the future by a skewed clock holds its partition for one step at
 * most), or one that could not be processed because the database or the broker is
 * away - is "held": its partition is paused and the consumer seeks back to the message, so
 * the message is delivered again when the hold is released, while every other partition and
 * topic goes on flowing. Nothing ever sleeps in the poll loop. Holds are the worker's own
 * bookkeeping and are dropped for partitions a rebalance takes away; assigned partitions
 * are resumed explicitly, because librdkafka keeps an application pause across
 * re-assignment.
 */
#include "processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "daemon.h"
#include "ladder.h"
#include "log.h"

/* How long to wait for a seek to be applied by librdkafka's main thread. */
#define PROC_SEEK_TIMEOUT_MS 5000

static struct proc_hold *
proc_hold_find(struct proc_worker *w, const char *topic, int32_t partition)
{
	for (int i = 0; i < w->nholds; i++)
		if (w->holds[i].partition == partition && strcmp(w->holds[i].topic, topic) == 0)
			return &w->holds[i];
	return NULL;
}

static void
proc_hold_remove(struct proc_worker *w, struct proc_hold *h)
{
	*h = w->holds[--w->nholds];
}

/* proc_seek - points the partition's fetch position at offset; the partition is paused */
static int
proc_seek(struct proc_worker *w, const char *topic, int32_t partition, int64_t offset)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_error_t *e;
	int rc = -1;

	rd_kafka_topic_partition_list_add(l, topic, partition)->offset = offset;
	e = rd_kafka_seek_partitions(w->rk, l, PROC_SEEK_TIMEOUT_MS);
	if (e) {
		log_warn(NULL, "event=seek_failed topic=%s partition=%d offset=%lld error=\"%s\"",
		         topic, (int)partition, (long long)offset, rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	} else if (l->elems[0].err) {
		log_warn(NULL, "event=seek_failed topic=%s partition=%d offset=%lld error=\"%s\"",
		         topic, (int)partition, (long long)offset,
		         rd_kafka_err2str(l->elems[0].err));
	} else {
		rc = 0;
	}
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

static int
proc_pause(struct proc_worker *w, const char *topic, int32_t partition, int pause)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
	rd_kafka_resp_err_t e;

	rd_kafka_topic_partition_list_add(l, topic, partition);
	e = pause ? rd_kafka_pause_partitions(w->rk, l) : rd_kafka_resume_partitions(w->rk, l);
	if (e == RD_KAFKA_RESP_ERR_NO_ERROR)
		e = l->elems[0].err;
	rd_kafka_topic_partition_list_destroy(l);
	if (e) {
		log_warn(NULL, "event=%s_failed topic=%s partition=%d error=\"%s\"",
		         pause ? "pause" : "resume", topic, (int)partition, rd_kafka_err2str(e));
		return -1;
	}
	return 0;
}

/*
 * proc_hold - pauses m's partition and seeks back to m, to be delivered again at due_ms.
 *
 * The partition is paused before the seek: a seek issued before a pause is lost when the
 * pause records the fetch position.
 */
static void
proc_hold(struct proc_worker *w, const rd_kafka_message_t *m, long long due_ms)
{
	const char *topic = rd_kafka_topic_name(m->rkt);
	struct proc_hold *h;

	if (proc_pause(w, topic, m->partition, 1) != 0) {
		/*
		 * Not assigned any more, most likely: the new owner reads m from the committed
		 * offset. Should the partition still be ours, the seek alone brings m back at
		 * once, so it is retried early rather than skipped.
		 */
		proc_seek(w, topic, m->partition, m->offset);
		return;
	}
	if (w->nholds == w->capholds) {
		int cap = w->capholds ? w->capholds * 2 : 16;
		struct proc_hold *n = realloc(w->holds, (size_t)cap * sizeof(*n));

		if (n == NULL) {
			/* Cannot keep the hold: give the partition back at once, unprocessed. */
			proc_seek(w, topic, m->partition, m->offset);
			proc_pause(w, topic, m->partition, 0);
			return;
		}
		w->holds = n;
		w->capholds = cap;
	}
	h = &w->holds[w->nholds++];
	snprintf(h->topic, sizeof(h->topic), "%s", topic);
	h->partition = m->partition;
	h->offset = m->offset;
	h->due_ms = due_ms;
	proc_seek(w, topic, m->partition, m->offset);
}

/*
 * proc_holds_release - resumes partitions whose hold is due. The seek is repeated first: a
 * partition resumes only once its position is known to be the held message, so a message
 * can never be skipped. A failed seek keeps the hold and is tried again a little later.
 */
static void
proc_holds_release(struct proc_worker *w)
{
	long long now = clock_wall_ms();

	for (int i = 0; i < w->nholds;) {
		struct proc_hold *h = &w->holds[i];

		if (h->due_ms > now) {
			i++;
			continue;
		}
		if (proc_seek(w, h->topic, h->partition, h->offset) != 0) {
			h->due_ms = now + PROC_BACKOFF_MIN_MS;
			i++;
			continue;
		}
		proc_pause(w, h->topic, h->partition, 0);
		proc_hold_remove(w, h);
	}
}

/*
 * proc_poll_ms - how long the next poll may wait: until the earliest hold is due, and at most
 * PROC_POLL_IDLE_MS. A message ends the wait at once, and so does a stop (proc_wake_workers),
 * so the bound only decides how often an idle worker wakes for nothing.
 */
static int
proc_poll_ms(const struct proc_worker *w)
{
	long long now = clock_wall_ms(), ms = PROC_POLL_IDLE_MS;

	for (int i = 0; i < w->nholds; i++)
		if (w->holds[i].due_ms - now < ms)
			ms = w->holds[i].due_ms - now;
	return ms < 0 ? 0 : (int)ms;
}

/*
 * proc_first_seen - when this worker first saw the message at offset of a delay-topic
 * partition: remembered while the partition's head is held, so the hold is recomputed
 * from the same moment when the message comes back. *fresh is set when it is seen now for
 * the first time. Without memory for the entry the answer is now (the hold is then only
 * bounded per delivery).
 */
static long long
proc_first_seen(struct proc_worker *w, const char *topic, int32_t partition, int64_t offset,
                long long now, int *fresh)
{
	struct proc_seen *e = NULL;

	*fresh = 0;
	for (int i = 0; i < w->nseen; i++)
		if (w->seen[i].partition == partition && strcmp(w->seen[i].topic, topic) == 0)
			e = &w->seen[i];
	if (e && e->offset == offset)
		return e->first_ms;
	if (e == NULL) {
		if (w->nseen == w->capseen) {
			int cap = w->capseen ? w->capseen * 2 : 16;
			struct proc_seen *n = realloc(w->seen, (size_t)cap * sizeof(*n));

			if (n == NULL)
				return now;
			w->seen = n;
			w->capseen = cap;
		}
		e = &w->seen[w->nseen++];
		snprintf(e->topic, sizeof(e->topic), "%s", topic);
		e->partition = partition;
	}
	e->offset = offset;
	e->first_ms = now;
	*fresh = 1;
	return now;
}

/*
 * proc_seen_drop - forgets the first-seen times of parts (all when parts and topic are
 * NULL), or of one partition when topic is set.
 */
static void
proc_seen_drop(struct proc_worker *w, const rd_kafka_topic_partition_list_t *parts,
               const char *topic, int32_t partition)
{
	if (parts == NULL && topic == NULL) {
		w->nseen = 0;
		return;
	}
	for (int i = 0; i < w->nseen;) {
		int hit = 0;

		if (topic)
			hit = w->seen[i].partition == partition &&
			      strcmp(w->seen[i].topic, topic) == 0;
		for (int k = 0; parts && !hit && k < parts->cnt; k++)
			hit = w->seen[i].partition == parts->elems[k].partition &&
			      strcmp(w->seen[i].topic, parts->elems[k].topic) == 0;
		if (hit)
			w->seen[i] = w->seen[--w->nseen];
		else
			i++;
	}
}

/* proc_holds_drop - forgets holds of parts (all holds when parts is NULL) */
static void
proc_holds_drop(struct proc_worker *w, const rd_kafka_topic_partition_list_t *parts)
{
	proc_seen_drop(w, parts, NULL, 0);
	if (parts == NULL) {
		w->nholds = 0;
		return;
	}
	for (int i = 0; i < parts->cnt; i++) {
		struct proc_hold *h =
		    proc_hold_find(w, parts->elems[i].topic, parts->elems[i].partition);
		if (h)
			proc_hold_remove(w, h);
	}
}

/*
 * proc_rebalance - assigns and revokes for both protocols.
 *
 * The worker handles messages in the thread that polls, so this callback (served inside
 * rd_kafka_consumer_poll or rd_kafka_consumer_close) never runs while a message is in flight:
 * the previous message is finished and its offset stored before the next poll. On revoke
 * librdkafka commits the stored offsets of the revoked partitions; a held message was never
 * stored and is read again by the next owner.
 */
void
proc_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
               void *opaque)
{
	struct proc_worker *w = opaque;
	int coop = strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE") == 0;
	rd_kafka_error_t *e = NULL;

	if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
		proc_holds_drop(w, coop ? parts : NULL);
		if (coop)
			e = rd_kafka_incremental_assign(rk, parts);
		else
			rd_kafka_assign(rk, parts);
		/* librdkafka keeps an application pause across re-assignment; undo it. */
		rd_kafka_resume_partitions(rk, parts);
		log_info(NULL, "event=assigned thread=%d partitions=%d protocol=%s", w->index,
		         parts->cnt, coop ? "cooperative" : "eager");
	} else {
		proc_holds_drop(w, coop ? parts : NULL);
		if (coop)
			e = rd_kafka_incremental_unassign(rk, parts);
		else
			rd_kafka_assign(rk, NULL);
		log_info(NULL, "event=revoked thread=%d partitions=%d lost=%d", w->index,
		         parts->cnt, rd_kafka_assignment_lost(rk));
	}
	if (e) {
		log_error(NULL, "event=rebalance_failed thread=%d error=\"%s\"", w->index,
		          rd_kafka_error_string(e));
		rd_kafka_error_destroy(e);
	}
}

/*
 * proc_consume - one message: hold it, or handle it and store its offset. known is the
 * message already decoded (by proc_batchable, for a run that fell back), or NULL to decode
 * it here: a message is decoded once on its way through.
 */
static void
proc_consume(struct proc_worker *w, const rd_kafka_message_t *m, const struct msg_callback *known)
{
	const struct conf *cf = w->p->cf;
	const char *topic = rd_kafka_topic_name(m->rkt);
	struct msg_callback cb;
	long long delay_s = 0, ts;
	rd_kafka_timestamp_type_t tstype;
	char err[256];
	enum proc_rc rc;

	/* A message of a held partition was fetched before the pause; it comes again later. */
	if (proc_hold_find(w, topic, m->partition))
		return;
	if (known != NULL) {
		cb = *known;
	} else if (msg_callback_decode(m->payload, m->len, &cb, err, sizeof(err)) != 0) {
		/* It can never become valid; keeping it would stop its partition for good. */
		log_error(NULL, "event=bad_message topic=%s partition=%d offset=%lld error=\"%s\"",
		          topic, (int)m->partition, (long long)m->offset, err);
		kq_store(w->rk, m);
		return;
	}
	if (ladder_step_of_topic(cf, topic, &delay_s) > 0 &&
	    (ts = rd_kafka_message_timestamp(m, &tstype)) >= 0) {
		long long now = clock_wall_ms(), due = ts + delay_s * 1000;
		char id[24];
		int fresh;

		if (due > now) {
			long long first =
			    proc_first_seen(w, topic, m->partition, m->offset, now, &fresh);

			/* Never longer than the delay from when this worker first saw it. */
			if (first + delay_s * 1000 < due) {
				due = first + delay_s * 1000;
				if (fresh)
					log_warn(cblog_ref(id, sizeof(id), cb.cblog, cb.id),
					         "event=hold_capped topic=%s partition=%d "
					         "offset=%lld timestamp_ahead_ms=%lld",
					         topic, (int)m->partition, (long long)m->offset,
					         ts - now);
			}
		}
		if (due > now) {
			log_debug(cblog_ref(id, sizeof(id), cb.cblog, cb.id),
			          "event=held topic=%s partition=%d offset=%lld due_in_ms=%lld",
			          topic, (int)m->partition, (long long)m->offset, due - now);
			proc_hold(w, m, due);
			return;
		}
		proc_seen_drop(w, NULL, topic, m->partition);
	}
	rc = proc_handle(w, &cb);
	if (rc == PROC_DONE) {
		w->backoff_ms = PROC_BACKOFF_MIN_MS;
		w->outage_since_ms = 0;
		if (kq_store(w->rk, m) != 0)
			log_warn(NULL, "event=store_failed topic=%s partition=%d offset=%lld",
			         topic, (int)m->partition, (long long)m->offset);
		return;
	}
	if (rc == PROC_DB_DOWN && w->outage_since_ms == 0)
		w->outage_since_ms = clock_mono_ms();
	proc_hold(w, m, clock_wall_ms() + w->backoff_ms);
	w->backoff_ms =
	    w->backoff_ms * 2 > PROC_BACKOFF_MAX_MS ? PROC_BACKOFF_MAX_MS : w->backoff_ms * 2;
}

/*
 * proc_batchable - whether m may join a batch (decoded into cb): a message of the main topic
 * (a delay topic's may have to be held), of a partition not held, that decodes. Anything
 * else goes through proc_consume alone.
 */
static int
proc_batchable(struct proc_worker *w, const rd_kafka_message_t *m, struct msg_callback *cb)
{
	char err[256];
	const char *topic;

	if (m->err)
		return 0;
	topic = rd_kafka_topic_name(m->rkt);
	return strcmp(topic, w->p->topic_main) == 0 &&
	       proc_hold_find(w, topic, m->partition) == NULL &&
	       msg_callback_decode(m->payload, m->len, cb, err, sizeof(err)) == 0;
}

/*
 * proc_one - one polled message alone: a consumer error is logged, a message consumed (cb,
 * when not NULL, is the message decoded already).
 */
static void
proc_one(struct proc_worker *w, rd_kafka_message_t *m, const struct msg_callback *cb)
{
	if (m->err) {
		/* Consumer errors are informational: librdkafka recovers by itself. */
		if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
			log_warn(NULL, "event=consumer_error thread=%d error=\"%s\"", w->index,
			         rd_kafka_message_errstr(m));
	} else {
		proc_consume(w, m, cb);
	}
	rd_kafka_message_destroy(m);
}

/*
 * proc_flush - the n messages of one partition collected in ms: applied in one transaction
 * and their offsets stored after its commit. When the batch does not apply (nothing of it
 * was applied, so nothing is done twice), the message that ended it is handled alone and,
 * when again is set, the messages before it and after it each form a batch once more, in
 * order; a batch that falls back a second time is handled one message at a time. The one
 * more try is the bound: copies of done rows redelivered after a rebalance would end every
 * retried batch at its first message. A hold the lone message leaves on its partition (the
 * database went away) stops the rest, which are read again after it, as it always did.
 */
static void
proc_flush(struct proc_worker *w, rd_kafka_message_t **ms, const struct msg_callback *cbs, int n,
           int again)
{
	int at = 0;

	if (n <= 0)
		return;
	if (n == 1 || proc_hold_find(w, rd_kafka_topic_name(ms[0]->rkt), ms[0]->partition)) {
		/* Alone, or a held partition's: proc_consume leaves those to come again. */
		for (int i = 0; i < n; i++)
			proc_one(w, ms[i], &cbs[i]);
		return;
	}
	if (proc_handle_batch(w, cbs, n, &at)) {
		w->backoff_ms = PROC_BACKOFF_MIN_MS;
		w->outage_since_ms = 0;
		for (int i = 0; i < n; i++) {
			if (kq_store(w->rk, ms[i]) != 0)
				log_warn(NULL,
				         "event=store_failed topic=%s partition=%d offset=%lld",
				         rd_kafka_topic_name(ms[i]->rkt), (int)ms[i]->partition,
				         (long long)ms[i]->offset);
			rd_kafka_message_destroy(ms[i]);
		}
		return;
	}
	if (!again) {
		for (int i = 0; i < n; i++)
			proc_one(w, ms[i], &cbs[i]);
		return;
	}
	proc_flush(w, ms, cbs, at, 0);
	proc_one(w, ms[at], &cbs[at]);
	proc_flush(w, ms + at + 1, cbs + at + 1, n - at - 1, 0);
}

/*
 * proc_take - m and whatever else is ready at once (a poll without waiting), in runs of one
 * partition's messages of up to PROC_BATCH_MAX: each run is one batch. A fetch delivers a
 * partition's messages together, so under load the runs are long and idle it is one message
 * at a time, as before. At most PROC_TAKE_MAX messages per call, so the loop still checks
 * its stop flag and releases its holds under a backlog.
 */
#define PROC_TAKE_MAX (4 * PROC_BATCH_MAX)
static void
proc_take(struct proc_worker *w, rd_kafka_message_t *m)
{
	rd_kafka_message_t *ms[PROC_BATCH_MAX];
	struct msg_callback cbs[PROC_BATCH_MAX], cb;
	int n = 0, taken = 0;

	while (m != NULL) {
		/*
		 * The run ends before m is looked at: a run that falls back may hold its
		 * partition, and m, of another partition or after a full run, must be judged
		 * against that hold (a held partition's later messages are never applied).
		 */
		if (n > 0 && (m->err || n == PROC_BATCH_MAX || m->rkt != ms[0]->rkt ||
		              m->partition != ms[0]->partition)) {
			proc_flush(w, ms, cbs, n, 1);
			n = 0;
		}
		if (!proc_batchable(w, m, &cb)) {
			proc_flush(w, ms, cbs, n, 1);
			proc_one(w, m, NULL);
			return;
		}
		cbs[n] = cb;
		ms[n++] = m;
		m = ++taken < PROC_TAKE_MAX ? rd_kafka_consumer_poll(w->rk, 0) : NULL;
	}
	proc_flush(w, ms, cbs, n, 1);
}

void
proc_wake_workers(struct proc *p)
{
	/*
	 * The consumer queue is the one rd_kafka_consumer_poll waits on; yielding it ends that
	 * wait now. rd_kafka_yield, which yields the main queue, does not reach it.
	 */
	for (int i = 0; i < p->nworkers; i++) {
		rd_kafka_queue_t *q;

		if (p->workers[i].rk == NULL ||
		    (q = rd_kafka_queue_get_consumer(p->workers[i].rk)) == NULL)
			continue;
		rd_kafka_queue_yield(q);
		rd_kafka_queue_destroy(q);
	}
}

/*
 * proc_request_exit - asks the whole process to stop with exit code code. It lives with the
 * workers, which are its first callers, so the daemon calls down into this module and this
 * module never calls up into the daemon.
 */
void
proc_request_exit(struct proc *p, int code)
{
	int none = 0;

	/* The first reason wins; every worker then stops. */
	atomic_compare_exchange_strong(&p->exit_code, &none, code);
	atomic_store(&p->stop, 1);
	proc_wake_workers(p);
	/* The loop waits until woken: this is what tells it. */
	daemon_wake();
}

void *
proc_worker_main(void *arg)
{
	struct proc_worker *w = arg;
	struct proc *p = w->p;
	long long max_ms = p->cf->processor.db_outage_max_s * 1000;

	while (!atomic_load(&p->stop) && !daemon_stopping()) {
		rd_kafka_message_t *m;

		if (w->outage_since_ms && clock_mono_ms() - w->outage_since_ms >= max_ms) {
			log_error(NULL, "event=db_outage thread=%d seconds=%lld action=exit",
			          w->index, p->cf->processor.db_outage_max_s);
			proc_request_exit(p, EXIT_UNAVAILABLE);
			break;
		}
		proc_holds_release(w);
		if ((m = rd_kafka_consumer_poll(w->rk, proc_poll_ms(w))) == NULL)
			continue;
		proc_take(w, m);
	}
	/* Commits the stored offsets and leaves the group (the revoke runs the callback). */
	rd_kafka_consumer_close(w->rk);
	log_info(NULL, "event=worker_stopped thread=%d", w->index);
	return NULL;
}
