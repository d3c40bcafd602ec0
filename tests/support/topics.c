/*
 * topics - deleting a test's Kafka topics. Every test program creates a dozen topics under
 * its own prefix; left behind, they pile up on a developer's broker run after run until it
 * spends minutes loading thousands of partitions at start, or runs out of heap doing so.
 * harness_teardown deletes them, and the tests that take a topic away on purpose (a lost
 * dead-letter or event topic) use the same call.
 */
#include "topics.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <librdkafka/rdkafka.h>

#include "kq.h"

int
topics_delete(const struct conf_kafka *cf, const char *const *names, int n, int timeout_ms)
{
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	rd_kafka_DeleteTopic_t **dt = calloc((size_t)(n > 0 ? n : 1), sizeof(*dt));
	rd_kafka_queue_t *q = NULL;
	rd_kafka_event_t *ev = NULL;
	rd_kafka_t *rk = NULL;
	char err[256];
	int rc = -1;

	if (dt == NULL || kq_conf_common(c, cf, err, sizeof(err)) != 0)
		goto done;
	if ((rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err))) == NULL)
		goto done;
	c = NULL;
	for (int i = 0; i < n; i++)
		dt[i] = rd_kafka_DeleteTopic_new(names[i]);
	q = rd_kafka_queue_new(rk);
	rd_kafka_DeleteTopics(rk, dt, (size_t)n, NULL, q);
	if ((ev = rd_kafka_queue_poll(q, timeout_ms)) == NULL) {
		printf("# topics: no answer to the deletion within %d ms\n", timeout_ms);
		goto done;
	}
	if (rd_kafka_event_error(ev)) {
		printf("# topics: delete: %s\n", rd_kafka_event_error_string(ev));
		goto done;
	}
	{
		size_t cnt = 0;
		const rd_kafka_topic_result_t **tr = rd_kafka_DeleteTopics_result_topics(
		    rd_kafka_event_DeleteTopics_result(ev), &cnt);

		for (size_t i = 0; i < cnt; i++)
			if (rd_kafka_topic_result_error(tr[i])) {
				printf("# topics: delete %s: %s\n",
				       rd_kafka_topic_result_name(tr[i]),
				       rd_kafka_topic_result_error_string(tr[i]));
				goto done;
			}
		if (cnt != (size_t)n)
			goto done;
	}
	rc = 0;
done:
	if (ev)
		rd_kafka_event_destroy(ev);
	for (int i = 0; dt && i < n; i++)
		if (dt[i])
			rd_kafka_DeleteTopic_destroy(dt[i]);
	free(dt);
	if (q)
		rd_kafka_queue_destroy(q);
	if (rk)
		rd_kafka_destroy(rk);
	if (c)
		rd_kafka_conf_destroy(c);
	return rc;
}

int
topics_drop_prefix(const struct conf_kafka *cf, int timeout_ms)
{
	const struct rd_kafka_metadata *md = NULL;
	rd_kafka_conf_t *c = rd_kafka_conf_new();
	size_t plen = strlen(cf->topic_prefix);
	const char **names = NULL;
	rd_kafka_t *rk = NULL;
	char err[256];
	int n = 0, rc = -1;

	if (plen == 0 || kq_conf_common(c, cf, err, sizeof(err)) != 0)
		goto done;
	if ((rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof(err))) == NULL)
		goto done;
	c = NULL;
	if (rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR) {
		md = NULL;
		goto done;
	}
	if ((names = calloc((size_t)md->topic_cnt + 1, sizeof(*names))) == NULL)
		goto done;
	/* Only this test's own topics: the prefix, then the dot that ends it. */
	for (int i = 0; i < md->topic_cnt; i++) {
		const char *t = md->topics[i].topic;
		if (strncmp(t, cf->topic_prefix, plen) == 0 && t[plen] == '.')
			names[n++] = t;
	}
	rc = n == 0 ? 0 : topics_delete(cf, names, n, timeout_ms);
done:
	free(names);
	if (md)
		rd_kafka_metadata_destroy(md);
	if (rk)
		rd_kafka_destroy(rk);
	if (c)
		rd_kafka_conf_destroy(c);
	return rc;
}
