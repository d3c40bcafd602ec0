/*
 * kq_admin - the topic administration paycb-migrate needs (see kq.h): create the topics
 * that are missing and grow the ones that have fewer partitions than configured.
 *
 * Growing is how an operator scales processors past the partition count: raise
 * kafka.partitions (kafka.retry_partitions for the delay topics) and run paycb-migrate again.
 * Kafka cannot take partitions away, so a topic with more than asked is left alone. Keys map
 * to other partitions afterwards; the processor's per-order ordering guard
 * (processor_handle.c) keeps one order's callbacks in order across the change.
 */
#include "kq.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"

/* kq_admin_wait - polls q for the result event of an admin call; NULL with err set. */
static rd_kafka_event_t *
kq_admin_wait(rd_kafka_queue_t *q, const char *what, int timeout_ms, char *err, size_t errlen)
{
	rd_kafka_event_t *ev = rd_kafka_queue_poll(q, timeout_ms);

	if (ev == NULL) {
		snprintf(err, errlen, "%s: no answer within %d ms", what, timeout_ms);
		return NULL;
	}
	if (rd_kafka_event_error(ev)) {
		snprintf(err, errlen, "%s: %s", what, rd_kafka_event_error_string(ev));
		rd_kafka_event_destroy(ev);
		return NULL;
	}
	return ev;
}

/* kq_admin_check - the per-topic results of an admin call; skip is an error that is fine. */
static int
kq_admin_check(const rd_kafka_topic_result_t **tr, size_t cnt, rd_kafka_resp_err_t skip,
               const char *what, char *err, size_t errlen)
{
	for (size_t i = 0; i < cnt; i++) {
		rd_kafka_resp_err_t e = rd_kafka_topic_result_error(tr[i]);
		if (e && e != skip) {
			snprintf(err, errlen, "%s %s: %s", what, rd_kafka_topic_result_name(tr[i]),
			         rd_kafka_topic_result_error_string(tr[i]));
			return -1;
		}
	}
	return 0;
}

/* kq_partition_count - partitions of topic as the cluster reports it; -1 when unknown. */
static int
kq_partition_count(rd_kafka_t *rk, const char *topic, int timeout_ms)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	int n = -1;

	if (rkt == NULL)
		return -1;
	if (rd_kafka_metadata(rk, 0, rkt, &md, timeout_ms) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR)
		n = md->topics[0].partition_cnt;
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	return n;
}

/* kq_topic_ready - the cluster reports topic with at least want partitions, each led. */
static int
kq_topic_ready(rd_kafka_t *rk, const char *topic, int want)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_topic_t *rkt = rd_kafka_topic_new(rk, topic, NULL);
	int ok = 0;

	if (rkt == NULL)
		return 0;
	if (rd_kafka_metadata(rk, 0, rkt, &md, 5000) == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    md->topic_cnt == 1 && md->topics[0].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
	    md->topics[0].partition_cnt >= want) {
		ok = 1;
		for (int i = 0; i < md->topics[0].partition_cnt; i++)
			ok &= md->topics[0].partitions[i].err == RD_KAFKA_RESP_ERR_NO_ERROR &&
			      md->topics[0].partitions[i].leader >= 0;
	}
	if (md)
		rd_kafka_metadata_destroy(md);
	rd_kafka_topic_destroy(rkt);
	return ok;
}

/*
 * kq_wait_ready - waits until every topic of names[] has its partitions and a leader for
 * each. A broker that started a moment ago accepts a CreateTopics seconds before it leads the
 * new partitions; "ensured" must mean usable, or the first publishes wait for the topic.
 */
static int
kq_wait_ready(rd_kafka_t *rk, const char *const *names, const int *partitions, int n,
              int timeout_ms, char *err, size_t errlen)
{
	struct timespec dl;

	clock_deadline(&dl, timeout_ms);
	for (int i = 0; i < n; i++)
		while (!kq_topic_ready(rk, names[i], partitions[i])) {
			if (clock_deadline_passed(&dl)) {
				snprintf(err, errlen,
				         "topic %s: no leader for every partition within %d ms",
				         names[i], timeout_ms);
				return -1;
			}
			rd_kafka_poll(rk, 100);
		}
	return 0;
}

/* kq_grow - CreatePartitions for the topics of names[] whose had[] is below partitions[]. */
static int
kq_grow(rd_kafka_t *rk, const char *const *names, const int *partitions, const int *had, int n,
        int timeout_ms, char *err, size_t errlen)
{
	rd_kafka_NewPartitions_t **np = calloc((size_t)n, sizeof(*np));
	rd_kafka_queue_t *q = NULL;
	rd_kafka_event_t *ev = NULL;
	char es[256];
	int k = 0, rc = -1;

	if (np == NULL) {
		snprintf(err, errlen, "grow topics: out of memory");
		return -1;
	}
	for (int i = 0; i < n; i++) {
		if (had[i] <= 0 || had[i] >= partitions[i])
			continue;
		if ((np[k] = rd_kafka_NewPartitions_new(names[i], (size_t)partitions[i], es,
		                                        sizeof(es))) == NULL) {
			snprintf(err, errlen, "topic %s: %s", names[i], es);
			goto done;
		}
		k++;
	}
	if (k == 0) {
		rc = 0;
		goto done;
	}
	q = rd_kafka_queue_new(rk);
	rd_kafka_CreatePartitions(rk, np, (size_t)k, NULL, q);
	if ((ev = kq_admin_wait(q, "grow topics", timeout_ms, err, errlen)) == NULL)
		goto done;
	{
		size_t cnt;
		const rd_kafka_topic_result_t **tr = rd_kafka_CreatePartitions_result_topics(
		    rd_kafka_event_CreatePartitions_result(ev), &cnt);
		rc = kq_admin_check(tr, cnt, RD_KAFKA_RESP_ERR_NO_ERROR, "grow topic", err, errlen);
	}
done:
	if (ev)
		rd_kafka_event_destroy(ev);
	if (q)
		rd_kafka_queue_destroy(q);
	for (int i = 0; i < k; i++)
		rd_kafka_NewPartitions_destroy(np[i]);
	free(np);
	return rc;
}

/*
 * kq_existing - from a CreateTopics result, the partition counts of the topics that were
 * there already into was[] (0 for the ones just created). Returns 0 or -1 with err.
 */
static int
kq_existing(rd_kafka_t *rk, rd_kafka_event_t *ev, const char *const *names, int n, int *was,
            int timeout_ms, char *err, size_t errlen)
{
	size_t cnt;
	const rd_kafka_topic_result_t **tr =
	    rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &cnt);

	if (kq_admin_check(tr, cnt, RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS, "create topic", err,
	                   errlen) != 0)
		return -1;
	for (size_t i = 0; i < cnt; i++) {
		if (rd_kafka_topic_result_error(tr[i]) == RD_KAFKA_RESP_ERR_NO_ERROR)
			continue;
		for (int j = 0; j < n; j++) {
			if (strcmp(names[j], rd_kafka_topic_result_name(tr[i])) != 0)
				continue;
			if ((was[j] = kq_partition_count(rk, names[j], timeout_ms)) < 0) {
				snprintf(err, errlen, "topic %s: no metadata", names[j]);
				return -1;
			}
		}
	}
	return 0;
}

int
kq_create_topics(const struct conf_kafka *cf, const char *const *names, const int *partitions,
                 const long long *retention_ms, int n, int timeout_ms, int *had, char *err,
                 size_t errlen)
{
	rd_kafka_conf_t *conf = rd_kafka_conf_new();
	rd_kafka_NewTopic_t **nt = calloc((size_t)n, sizeof(*nt));
	int *was = calloc((size_t)n, sizeof(*was));
	rd_kafka_queue_t *q = NULL;
	rd_kafka_event_t *ev = NULL;
	rd_kafka_t *rk = NULL;
	char es[256], ret[32];
	int rc = -1;

	if (nt == NULL || was == NULL) {
		snprintf(err, errlen, "create topics: out of memory");
		goto done;
	}
	if (kq_conf_common(conf, cf, err, errlen))
		goto done;
	if ((rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, es, sizeof(es))) == NULL) {
		snprintf(err, errlen, "kafka admin: %s", es);
		goto done;
	}
	conf = NULL;
	for (int i = 0; i < n; i++) {
		nt[i] = rd_kafka_NewTopic_new(names[i], partitions[i], 1, es, sizeof(es));
		if (nt[i] == NULL) {
			snprintf(err, errlen, "topic %s: %s", names[i], es);
			goto done;
		}
		if (retention_ms && retention_ms[i] > 0) {
			snprintf(ret, sizeof(ret), "%lld", retention_ms[i]);
			rd_kafka_NewTopic_set_config(nt[i], "retention.ms", ret);
		}
	}
	q = rd_kafka_queue_new(rk);
	rd_kafka_CreateTopics(rk, nt, (size_t)n, NULL, q);
	if ((ev = kq_admin_wait(q, "create topics", timeout_ms, err, errlen)) == NULL)
		goto done;
	if (kq_existing(rk, ev, names, n, was, timeout_ms, err, errlen) != 0)
		goto done;
	if (kq_grow(rk, names, partitions, was, n, timeout_ms, err, errlen) != 0 ||
	    kq_wait_ready(rk, names, partitions, n, timeout_ms, err, errlen) != 0)
		goto done;
	if (had)
		memcpy(had, was, (size_t)n * sizeof(*had));
	rc = 0;
done:
	if (ev)
		rd_kafka_event_destroy(ev);
	if (q)
		rd_kafka_queue_destroy(q);
	for (int i = 0; nt && i < n; i++)
		if (nt[i])
			rd_kafka_NewTopic_destroy(nt[i]);
	free(nt);
	free(was);
	if (rk)
		rd_kafka_destroy(rk);
	if (conf)
		rd_kafka_conf_destroy(conf);
	return rc;
}
