/*
 * msg - encoding of paycb's Kafka messages and strict decoding of callback messages (see
 * msg.h).
 */
#include "msg.h"

#include "digest.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

int
msg_callback_encode(const struct msg_callback *m, char *buf, size_t len)
{
	json_t *o = json_pack("{s:i,s:s,s:I,s:s,s:s,s:s,s:i}", "v", 1, "log", cblog_name(m->cblog),
	                      "id", (json_int_t)m->id, "merchant_id", m->merchant_id, "channel",
	                      m->channel, "out_trade_no", m->out_trade_no, "attempt", m->attempt);
	size_t n;

	if (o == NULL)
		return -1;
	n = json_dumpb(o, buf, len, JSON_COMPACT);
	json_decref(o);
	return n == 0 || n >= len ? -1 : (int)n;
}

static int
msg_copy(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		return -1;
	memcpy(dst, src, n + 1);
	return 0;
}

int
msg_callback_decode(const void *data, size_t len, struct msg_callback *m, char *err, size_t errlen)
{
	const char *log = NULL, *merchant = NULL, *channel = NULL, *order = NULL;
	json_int_t id = 0;
	int v = 0, attempt = 1, rc = -1;
	json_error_t je;
	json_t *o;

	memset(m, 0, sizeof(*m));
	if ((o = json_loadb(data, len, JSON_REJECT_DUPLICATES, &je)) == NULL) {
		snprintf(err, errlen, "not JSON: %s", je.text);
		return -1;
	}
	if (json_unpack_ex(o, &je, 0, "{s:i,s:s,s:I,s:s,s:s,s:s,s?i}", "v", &v, "log", &log, "id",
	                   &id, "merchant_id", &merchant, "channel", &channel, "out_trade_no",
	                   &order, "attempt", &attempt) != 0) {
		snprintf(err, errlen, "bad callback message: %s", je.text);
		goto done;
	}
	if (v != 1 || id <= 0 || attempt < 1 || cblog_from_name(log, &m->cblog) != 0) {
		snprintf(err, errlen, "bad callback message: v=%d id=%lld log=%s", v, (long long)id,
		         log);
		goto done;
	}
	m->id = (unsigned long long)id;
	m->attempt = attempt;
	if (msg_copy(m->merchant_id, sizeof(m->merchant_id), merchant) ||
	    msg_copy(m->channel, sizeof(m->channel), channel) ||
	    msg_copy(m->out_trade_no, sizeof(m->out_trade_no), order)) {
		snprintf(err, errlen, "bad callback message: field too long");
		goto done;
	}
	rc = 0;
done:
	json_decref(o);
	return rc;
}

int
msg_key(const char *merchant, const char *order, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s|%s", merchant, order);

	return n < 0 || (size_t)n >= len ? -1 : n;
}

int
msg_callback_key(const struct msg_callback *m, char *buf, size_t len)
{
	return msg_key(m->merchant_id, m->out_trade_no, buf, len);
}

char *
msg_dead_letter_encode(const struct msg_dead_letter *d, size_t *len)
{
	json_t *o;
	char *s;

	o = json_pack("{s:i,s:s,s:I,s:s,s:s,s:s,s:s,s:I,s:s,s:s,s:s,s:s}", "v", 1, "log",
	              cblog_name(d->cblog), "id", (json_int_t)d->id, "merchant_id", d->merchant_id,
	              "channel", d->channel, "channel_trade_no", d->channel_trade_no,
	              "out_trade_no", d->out_trade_no, "retry_count", (json_int_t)d->retry_count,
	              "last_error", d->last_error, "reason", d->reason, "created_at", d->created_at,
	              "dead_at", d->dead_at);
	if (o == NULL)
		return NULL;
	s = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (s != NULL)
		*len = strlen(s);
	return s;
}

int
msg_order_event_encode(const struct msg_order_event *e, char *buf, size_t len)
{
	json_t *o =
	    json_pack("{s:i,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:I,s:s}", "v", 1, "event_id",
	              e->event_id, "event_type", e->event_type, "merchant_id", e->merchant_id,
	              "out_trade_no", e->out_trade_no, "amount", e->amount, "currency", e->currency,
	              "channel", e->channel, "channel_trade_no", e->channel_trade_no, "callback_id",
	              (json_int_t)e->callback_id, "at", e->at);
	size_t n;

	if (o == NULL)
		return -1;
	n = json_dumpb(o, buf, len, JSON_COMPACT);
	json_decref(o);
	if (n == 0 || n >= len)
		return -1;
	buf[n] = '\0';
	return (int)n;
}

/* msg_escape - appends src to buf at *at with '%' and '|' percent-escaped */
static int
msg_escape(char *buf, size_t len, size_t *at, const char *src)
{
	for (; *src != '\0'; src++) {
		const char *put = *src == '%' ? "%25" : *src == '|' ? "%7C" : NULL;
		size_t n = put != NULL ? 3 : 1;

		if (*at + n >= len)
			return -1;
		memcpy(buf + *at, put != NULL ? put : src, n);
		*at += n;
	}
	buf[*at] = '\0';
	return 0;
}

int
msg_event_id(const char *merchant, const char *order, const char *event_type, const char *ref,
             char *buf, size_t len)
{
	/* Every part at its column's width, each byte escaped: 64 + 3 * 128 + 48 + 3 * 160. */
	char full[1100], digest[65];
	size_t at = 0;
	int n;

	n = snprintf(full, sizeof(full), "%s|", merchant);
	if (n < 0 || (size_t)n >= sizeof(full))
		return -1;
	at = (size_t)n;
	if (msg_escape(full, sizeof(full), &at, order) != 0)
		return -1;
	n = snprintf(full + at, sizeof(full) - at, "|%s", event_type);
	if (n < 0 || (size_t)n >= sizeof(full) - at)
		return -1;
	at += (size_t)n;
	if (ref != NULL) {
		if (at + 1 >= sizeof(full))
			return -1;
		full[at++] = '|';
		if (msg_escape(full, sizeof(full), &at, ref) != 0)
			return -1;
	}
	if (at <= MSG_EVENT_ID_MAX) {
		n = snprintf(buf, len, "%s", full);
	} else {
		if (digest_sha256_hex(full, at, digest) != 0)
			return -1;
		n = snprintf(buf, len, "%s|%s|sha256:%s", merchant, event_type, digest);
	}
	return n < 0 || (size_t)n >= len ? -1 : n;
}
