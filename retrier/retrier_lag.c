/*
 * retrier_lag - measures the processors' consumer lag on every topic they consume, the main
 * topic and each delay topic of the ladder, and exports it, so no external exporter is needed
 * and a stalled partition alarms.
 *
 * Every retrier.lag_interval_s the retrier reads the group's committed offsets
 * (kafka.group_id, the processors' group) and each partition's watermarks. A delay topic lags
 * by design: the processors hold each message until its timestamp plus the step's delay (at
 * most the delay after they first saw it). So for a partition that is behind, the retrier
 * fetches the message at the committed offset, the partition's head, and judges it: a head
 * whose hold is over and that is still not consumed is lag; a held head not yet due is not.
 * The hold's due time is min(timestamp, first seen here) + delay, the same cap the processors
 * apply, so a message stamped in the future is judged as they treat it.
 *
 * The handle that reads is a consumer of the processors' group that never joins it: it only
 * assigns partitions to itself for a moment to fetch their heads, with auto-commit off, so it
 * never commits an offset and never takes part in a rebalance. It exists only during a check:
 * kept between checks, its threads' timers and metadata refreshes cost more of an idle
 * retrier's CPU and requests than connecting again every lag_interval_s (docs/performance.md).
 *
 * Gauges per topic (label kind: main or delay): paycb_consumer_lag_messages (committed to
 * end), paycb_consumer_due_lag_messages (lag of the partitions whose head is due: on the main
 * topic all of it), paycb_consumer_head_overdue_seconds (the longest any partition's head has
 * been due and not consumed; on the main topic, the oldest unconsumed message's age), and
 * paycb_consumer_lag_check_ok.
 */
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "kq.h"
#include "ladder.h"
#include "log.h"
#include "metrics.h"
#include "retrier.h"

#define LAG_TIMEOUT_MS 5000
/* How long one check waits for the heads of the partitions that are behind. */
#define LAG_HEAD_WAIT_MS 3000

struct lag_part {
	long long lag;
	int64_t start; /* where the group would read next; -1 when not behind */
	int64_t head;  /* the head judged last time, and since when it is the head */
	long long first_seen_ms;
	long long ts_ms; /* the head's timestamp, -1 not fetched */
};

struct lag_topic {
	const char *name;
	long long delay_ms; /* 0 for the main topic */
	int nparts;
	struct lag_part *parts;
	struct metric *m_lag, *m_due, *m_overdue;
	long long lag, due_lag, overdue_ms; /* the last check's figures */
};

struct retrier_lag {
	rd_kafka_t *rk;
	int ntopics;
	struct lag_topic topics[CFG_LIST_MAX + 1];
	struct metric *m_ok;
	long long next_ms;
	int ok;
};

/* lag_open - the reading handle, for one check. */
static int
lag_open(struct retrier_lag *lg, const struct conf_kafka *cf)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	char err[256];

	if (kq_conf_common(conf, cf, err, sizeof(err)) != 0 ||
	    rd_kafka_conf_set(conf, "group.id", cf->group_id, err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "enable.auto.commit", "false", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "enable.auto.offset.store", "false", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "enable.partition.eof", "false", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "fetch.wait.max.ms", "100", err, sizeof(err)) ||
	    rd_kafka_conf_set(conf, "queued.max.messages.kbytes", "1024", err, sizeof(err))) {
		log_error(NULL, "event=lag_failed error=\"%s\"", err);
		rd_kafka_conf_destroy(conf);
		return -1;
	}
	if ((lg->rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof(err))) == NULL) {
		log_error(NULL, "event=lag_failed error=\"%s\"", err);
		rd_kafka_conf_destroy(conf);
		return -1;
	}
	return 0;
}

/* lag_close - the reading handle gone until the next check. */
static void
lag_close(struct retrier_lag *lg)
{
	if (lg->rk == NULL)
		return;
	rd_kafka_consumer_close(lg->rk);
	rd_kafka_destroy(lg->rk);
	lg->rk = NULL;
}

/* lag_new - one gauge set per topic; the handle is opened by each check. */
static struct retrier_lag *
lag_new(struct retrier *r)
{
	struct retrier_lag *lg = calloc(1, sizeof(*lg));

	if (lg == NULL)
		return NULL;
	for (int k = 0; k <= ladder_steps(&r->cf->retry); k++) {
		struct lag_topic *t = &lg->topics[lg->ntopics++];

		t->name = k == 0 ? r->topic_main : r->topic_step[k];
		t->delay_ms = k == 0 ? 0 : r->cf->retry.ladder_s.v[k - 1] * 1000;
		t->m_lag = retrier_mx.lag[k];
		t->m_due = retrier_mx.due_lag[k];
		t->m_overdue = retrier_mx.head_overdue_s[k];
	}
	lg->m_ok = retrier_mx.lag_ok;
	return lg;
}

/* lag_resize - t's per-partition state for n partitions (kept when the count is the same). */
static int
lag_resize(struct lag_topic *t, int n)
{
	struct lag_part *p;

	if (n == t->nparts)
		return 0;
	if ((p = calloc((size_t)(n ? n : 1), sizeof(*p))) == NULL)
		return -1;
	for (int i = 0; i < n; i++)
		p[i].head = -1;
	free(t->parts);
	t->parts = p;
	t->nparts = n;
	return 0;
}

/*
 * lag_partitions - every topic's partition count (its per-partition state resized), from one
 * Metadata request for the topics this handle knows, which are exactly the ones it measures:
 * one request per topic was 7 of the 10 requests a check sends.
 */
static int
lag_partitions(struct retrier_lag *lg)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt[CFG_LIST_MAX + 1] = {0};
	rd_kafka_resp_err_t e = RD_KAFKA_RESP_ERR_NO_ERROR;
	int rc = -1, i;

	for (i = 0; i < lg->ntopics; i++)
		if ((rkt[i] = rd_kafka_topic_new(lg->rk, lg->topics[i].name, NULL)) == NULL)
			goto done;
	if ((e = rd_kafka_metadata(lg->rk, 0, NULL, &md, LAG_TIMEOUT_MS)) != 0) {
		log_warn(NULL, "event=lag_failed step=metadata error=\"%s\"", rd_kafka_err2str(e));
		goto done;
	}
	for (i = 0; i < lg->ntopics; i++) {
		const rd_kafka_metadata_topic_t *mt = NULL;

		for (int k = 0; mt == NULL && k < md->topic_cnt; k++)
			if (strcmp(md->topics[k].topic, lg->topics[i].name) == 0)
				mt = &md->topics[k];
		if (mt == NULL || mt->err) {
			log_warn(NULL, "event=lag_topic_unknown topic=%s error=\"%s\"",
			         lg->topics[i].name,
			         rd_kafka_err2str(mt ? mt->err : RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC));
			goto done;
		}
		if (lag_resize(&lg->topics[i], mt->partition_cnt) != 0)
			goto done;
	}
	rc = 0;
done:
	if (md)
		rd_kafka_metadata_destroy(md);
	for (i = 0; i < lg->ntopics; i++)
		if (rkt[i])
			rd_kafka_topic_destroy(rkt[i]);
	return rc;
}

/*
 * lag_watermarks - every partition of l at its low (which = RD_KAFKA_OFFSET_BEGINNING) or
 * high (RD_KAFKA_OFFSET_END) watermark, in *out. One ListOffsets request per broker for all
 * partitions: asked one partition at a time (rd_kafka_query_watermark_offsets, two requests
 * each), a check of 7 topics of 12 partitions sent the broker 168 requests, most of what an
 * idle retrier cost it.
 */
static int
lag_watermarks(struct retrier_lag *lg, const rd_kafka_topic_partition_list_t *l, int64_t which,
               rd_kafka_topic_partition_list_t **out)
{
	rd_kafka_topic_partition_list_t *w = rd_kafka_topic_partition_list_copy(l);
	rd_kafka_resp_err_t e;
	int bad = -1;

	for (int k = 0; k < w->cnt; k++)
		w->elems[k].offset = which;
	e = rd_kafka_offsets_for_times(lg->rk, w, LAG_TIMEOUT_MS);
	for (int k = 0; e == RD_KAFKA_RESP_ERR_NO_ERROR && k < w->cnt; k++)
		if ((e = w->elems[k].err) != RD_KAFKA_RESP_ERR_NO_ERROR)
			bad = k;
	if (e != RD_KAFKA_RESP_ERR_NO_ERROR) {
		log_warn(NULL,
		         "event=lag_failed step=watermarks topic=%s partition=%d error=\"%s\"",
		         bad >= 0 ? w->elems[bad].topic : "-",
		         bad >= 0 ? (int)w->elems[bad].partition : -1, rd_kafka_err2str(e));
		rd_kafka_topic_partition_list_destroy(w);
		return -1;
	}
	*out = w;
	return 0;
}

/* lag_offsets - each partition's lag and start from the committed offsets and watermarks. */
static int
lag_offsets(struct retrier_lag *lg)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(64);
	rd_kafka_topic_partition_list_t *low = NULL, *high = NULL;
	rd_kafka_resp_err_t e;
	int rc = -1, k = 0;

	for (int i = 0; i < lg->ntopics; i++)
		for (int p = 0; p < lg->topics[i].nparts; p++)
			rd_kafka_topic_partition_list_add(l, lg->topics[i].name, p);
	if ((e = rd_kafka_committed(lg->rk, l, LAG_TIMEOUT_MS)) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		log_warn(NULL, "event=lag_failed step=committed error=\"%s\"", rd_kafka_err2str(e));
		goto done;
	}
	if (lag_watermarks(lg, l, RD_KAFKA_OFFSET_BEGINNING, &low) != 0 ||
	    lag_watermarks(lg, l, RD_KAFKA_OFFSET_END, &high) != 0)
		goto done;
	for (int i = 0; i < lg->ntopics; i++) {
		struct lag_topic *t = &lg->topics[i];

		for (int p = 0; p < t->nparts; p++, k++) {
			struct lag_part *pp = &t->parts[p];
			int64_t lo = low->elems[k].offset, hi = high->elems[k].offset;
			int64_t c = l->elems[k].err ? -1 : l->elems[k].offset;

			/* No commit yet, or out of range (retention, a recreated topic): the
			 * group starts at the earliest offset (auto.offset.reset). */
			if (c < lo || c > hi)
				c = lo;
			pp->lag = hi - c;
			pp->start = pp->lag > 0 ? c : -1;
			pp->ts_ms = -1;
		}
	}
	rc = 0;
done:
	if (low)
		rd_kafka_topic_partition_list_destroy(low);
	if (high)
		rd_kafka_topic_partition_list_destroy(high);
	rd_kafka_topic_partition_list_destroy(l);
	return rc;
}

/* lag_heads - fetches the message at each lagging partition's start (its timestamp). */
static void
lag_heads(struct retrier_lag *lg)
{
	rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(64);
	long long deadline = clock_mono_ms() + LAG_HEAD_WAIT_MS;
	int want = 0;

	for (int i = 0; i < lg->ntopics; i++)
		for (int p = 0; p < lg->topics[i].nparts; p++)
			if (lg->topics[i].parts[p].start >= 0) {
				rd_kafka_topic_partition_list_add(l, lg->topics[i].name, p)
				    ->offset = lg->topics[i].parts[p].start;
				want++;
			}
	if (want == 0 || rd_kafka_assign(lg->rk, l) != RD_KAFKA_RESP_ERR_NO_ERROR)
		goto done;
	while (want > 0 && clock_mono_ms() < deadline) {
		rd_kafka_message_t *m = rd_kafka_consumer_poll(lg->rk, 100);
		const char *name;

		if (m == NULL)
			continue;
		name = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL;
		for (int i = 0; name && m->err == 0 && i < lg->ntopics; i++) {
			struct lag_topic *t = &lg->topics[i];
			rd_kafka_timestamp_type_t tt;

			if (strcmp(t->name, name) != 0 || m->partition >= t->nparts ||
			    t->parts[m->partition].ts_ms >= 0)
				continue;
			t->parts[m->partition].ts_ms = rd_kafka_message_timestamp(m, &tt);
			want--;
		}
		rd_kafka_message_destroy(m);
	}
	rd_kafka_assign(lg->rk, NULL);
done:
	rd_kafka_topic_partition_list_destroy(l);
}

/* lag_judge - the figures of one topic from its partitions' heads. */
static void
lag_judge(struct lag_topic *t, long long now)
{
	t->lag = t->due_lag = t->overdue_ms = 0;
	for (int p = 0; p < t->nparts; p++) {
		struct lag_part *pp = &t->parts[p];
		long long due;

		if (pp->start < 0) {
			pp->head = -1;
			continue;
		}
		if (pp->head != pp->start) {
			pp->head = pp->start;
			pp->first_seen_ms = now;
		}
		t->lag += pp->lag;
		/* A head not fetched is judged from when it was first seen here. */
		due =
		    pp->ts_ms >= 0 && pp->ts_ms < pp->first_seen_ms ? pp->ts_ms : pp->first_seen_ms;
		due += t->delay_ms;
		if (now < due)
			continue;
		t->due_lag += pp->lag;
		if (now - due > t->overdue_ms)
			t->overdue_ms = now - due;
	}
}

int
retrier_lag_check(struct retrier *r)
{
	struct retrier_lag *lg = r->lag;
	long long now;
	int rc = -1;

	if (lg == NULL && (lg = r->lag = lag_new(r)) == NULL)
		return -1;
	if (lag_open(lg, &r->cf->kafka) != 0 || lag_partitions(lg) != 0)
		goto done;
	if (lag_offsets(lg) != 0)
		goto done;
	lag_heads(lg);
	now = clock_mono_ms();
	for (int i = 0; i < lg->ntopics; i++) {
		struct lag_topic *t = &lg->topics[i];

		lag_judge(t, now);
		metrics_set(t->m_lag, t->lag);
		metrics_set(t->m_due, t->due_lag);
		metrics_set(t->m_overdue, t->overdue_ms / 1000);
		if (t->overdue_ms >= 60000)
			log_warn(NULL,
			         "event=partition_stalled topic=%s lag=%lld due_lag=%lld "
			         "overdue_s=%lld",
			         t->name, t->lag, t->due_lag, t->overdue_ms / 1000);
	}
	rc = 0;
done:
	lag_close(lg);
	lg->ok = rc == 0;
	metrics_set(lg->m_ok, lg->ok);
	return rc;
}

int
retrier_lag_due(struct retrier *r)
{
	long long every = r->cf->retrier.lag_interval_s * 1000, now = clock_mono_ms();
	long long next = r->lag ? r->lag->next_ms : 0;

	if (every <= 0 || now < next)
		return 0;
	retrier_lag_check(r);
	if (r->lag)
		r->lag->next_ms = now + every;
	return 1;
}

int
retrier_lag_topic(const struct retrier *r, const char *topic, long long *lag, long long *due_lag,
                  long long *overdue_ms)
{
	for (int i = 0; r->lag && i < r->lag->ntopics; i++) {
		const struct lag_topic *t = &r->lag->topics[i];

		if (strcmp(t->name, topic) != 0)
			continue;
		*lag = t->lag;
		*due_lag = t->due_lag;
		*overdue_ms = t->overdue_ms;
		return 0;
	}
	return -1;
}

void
retrier_lag_free(struct retrier *r)
{
	struct retrier_lag *lg = r->lag;

	if (lg == NULL)
		return;
	lag_close(lg);
	for (int i = 0; i < lg->ntopics; i++)
		free(lg->topics[i].parts);
	free(lg);
	r->lag = NULL;
}
