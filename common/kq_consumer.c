/*
 * kq_consumer - paycb's Kafka consumers (see kq.h): offsets stored only when the caller says
 * its database work is committed, and a cheap check that the cluster answers.
 */
#include <stdio.h>
#include <string.h>

#include "kq.h"
#include "kq_int.h"

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

int
kq_consumer_ping(rd_kafka_t *rk, int timeout_ms)
{
	const struct rd_kafka_metadata *md;

	if (rd_kafka_metadata(rk, 0, NULL, &md, timeout_ms) != RD_KAFKA_RESP_ERR_NO_ERROR)
		return -1;
	rd_kafka_metadata_destroy(md);
	return 0;
}
