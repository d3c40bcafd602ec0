/*
 * msg - the Kafka messages paycb writes (their JSON schemas are in schemas/kafka/): the
 * callback message, the dead letter and the order event, and the key all of them share.
 *
 * A callback message names a row; the row, not the message, holds the truth, so a message
 * carries only what routing and logging need. Every message's key is
 * "merchant_id|out_trade_no" (msg_key), so all messages of one order land on one partition
 * and are processed in order. Each format is written here and nowhere else, so a change of
 * format is one change of this file and its schema.
 */
#ifndef PAYCB_MSG_H
#define PAYCB_MSG_H

#include <stddef.h>

#include "cblog.h"

struct msg_callback {
	enum cblog cblog;
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
/* The partition key of m (msg_key). */
int msg_callback_key(const struct msg_callback *m, char *buf, size_t len);

/* The partition key of an order's messages, "merchant|order"; returns the length or -1. */
int msg_key(const char *merchant, const char *order, char *buf, size_t len);

/* A dead letter (dlq.schema.json): a callback row that became dead, as the row reads. */
struct msg_dead_letter {
	enum cblog cblog;
	unsigned long long id;
	const char *merchant_id, *channel;
	const char *channel_trade_no; /* payments: the trade number; refunds: the refund number */
	const char *out_trade_no;
	long long retry_count;
	const char *last_error, *reason, *created_at, *dead_at;
};

/*
 * Encodes d as JSON; returns a NUL-terminated string of *len bytes to free(), or NULL. The
 * string is allocated because last_error may take six bytes a character once escaped.
 */
char *msg_dead_letter_encode(const struct msg_dead_letter *d, size_t *len);

/* An order event (order-event.schema.json), one business effect of a callback. */
struct msg_order_event {
	const char *event_id; /* msg_event_id */
	const char *event_type, *merchant_id, *out_trade_no, *amount, *currency, *channel;
	const char *channel_trade_no;
	unsigned long long callback_id;
	const char *at; /* UTC, YYYY-MM-DD HH:MM:SS.mmm */
};

/* Encodes e as JSON into buf, NUL-terminated; returns the length or -1. */
int msg_order_event_encode(const struct msg_order_event *e, char *buf, size_t len);

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
int msg_event_id(const char *merchant, const char *order, const char *event_type, const char *ref,
                 char *buf, size_t len);

#endif
