/*
 * msg - the Kafka messages paycb writes (their JSON schemas are in schemas/kafka/).
 *
 * A callback message names a row; the row, not the message, holds the truth, so a message
 * carries only what routing and logging need. Its key is "merchant_id|out_trade_no", so all
 * callbacks of one order land on one partition and are processed in order.
 */
#ifndef PAYCB_MSG_H
#define PAYCB_MSG_H

#include <stddef.h>

#include "cblog.h"

struct msg_callback {
	enum cblog log;
	unsigned long long id;
	char merchant_id[65];
	char channel[17];
	char out_trade_no[129];
	int attempt; /* 1 = first processing; k+1 after failure k */
};

/* Encodes m as JSON into buf; returns the length or -1. */
int msg_callback_encode(const struct msg_callback *m, char *buf, size_t len);
/* Decodes a message; returns 0 or -1 with err naming the problem (hostile input). */
int msg_callback_decode(const void *data, size_t len, struct msg_callback *m, char *err,
			size_t errlen);
/* The partition key. */
int msg_callback_key(const struct msg_callback *m, char *buf, size_t len);

/* The width of order_events.event_id (schemas/006_refund_ledger.sql). */
#define MSG_EVENT_ID_MAX 400

/*
 * The stable id of an order event, which downstream consumers deduplicate on:
 * "<merchant_id>|<out_trade_no>|<event_type>", then "|<ref>" when ref is not NULL. The
 * order number and ref are chosen by merchants and channels (WeChat Pay allows '|' in
 * out_trade_no), so '%' and '|' in them are written as %25 and %7C: two different events
 * can never share an id. An id longer than MSG_EVENT_ID_MAX becomes
 * "<merchant_id>|<event_type>|sha256:<digest of the long id>". buf needs
 * MSG_EVENT_ID_MAX + 1 bytes; returns the length or -1.
 */
int msg_event_id(const char *merchant, const char *order, const char *event_type,
		 const char *ref, char *buf, size_t len);

#endif
