/*
 * cblog - the kind, table, reference and reservation of a callback row (see cblog.h).
 */
#include "cblog.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

const char *
cblog_name(enum cblog lg)
{
	return lg == CBLOG_REFUND ? "refund" : "pay";
}

int
cblog_from_name(const char *s, enum cblog *lg)
{
	if (strcmp(s, "pay") == 0)
		*lg = CBLOG_PAY;
	else if (strcmp(s, "refund") == 0)
		*lg = CBLOG_REFUND;
	else
		return -1;
	return 0;
}

const char *
cblog_table(enum cblog lg)
{
	return lg == CBLOG_REFUND ? CBLOG_TABLE_REFUND : CBLOG_TABLE_PAY;
}

char *
cblog_ref(char *buf, size_t len, enum cblog lg, unsigned long long id)
{
	snprintf(buf, len, "%s%llu", lg == CBLOG_REFUND ? "rf" : "cb", id);
	return buf;
}

int
cblog_ref_parse(const char *s, enum cblog *lg, unsigned long long *id)
{
	unsigned long long v = 0;
	const char *p = s;

	*lg = CBLOG_PAY;
	if (strncmp(s, "cb", 2) == 0) {
		p = s + 2;
	} else if (strncmp(s, "rf", 2) == 0) {
		*lg = CBLOG_REFUND;
		p = s + 2;
	}
	/* Eighteen digits always fit: no check for overflow is needed. */
	if (*p == '\0' || strlen(p) > 18)
		return -1;
	for (; *p; p++) {
		if (!isdigit((unsigned char)*p))
			return -1;
		v = v * 10 + (unsigned long long)(*p - '0');
	}
	if (v == 0)
		return -1;
	*id = v;
	return 0;
}

/*
 * The reservation INSERTs, by whether the row names its source and by log. A row that names
 * none gets the column's default, which is what a notification is.
 */
#define RESERVE_PAY(COL, VAL)                                                                      \
	"INSERT INTO " CBLOG_TABLE_PAY " (merchant_id, channel, channel_trade_no, out_trade_no, "  \
	"event_id, event_type, trade_status, amount, currency, raw_body, body_sha256, "            \
	"next_retry_at" COL ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NOW(3) + INTERVAL ? "      \
	"SECOND" VAL ")"
#define RESERVE_REFUND(COL, VAL)                                                                   \
	"INSERT INTO " CBLOG_TABLE_REFUND " (merchant_id, channel, refund_no, channel_trade_no, "  \
	"out_trade_no, event_id, event_type, refund_status, amount, amount_cumulative, "           \
	"currency, raw_body, body_sha256, next_retry_at" COL ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, "  \
	"?, ?, ?, ?, ?, NOW(3) + INTERVAL ? SECOND" VAL ")"

static const char *const SQL_RESERVE[2][CBLOG_N] = {
    {RESERVE_PAY("", ""), RESERVE_REFUND("", "")},
    {RESERVE_PAY(", source", ", ?"), RESERVE_REFUND(", source", ", ?")}};

enum db_rc
cblog_reserve(struct db *db, const struct cblog_row *r, unsigned long long *id)
{
	int refund = r->cblog == CBLOG_REFUND, n = 0;
	struct db_in p[15];

	/* The refund table has two columns more: the refund number and amount_cumulative. */
	p[n++] = DBI_STR(r->merchant_id);
	p[n++] = DBI_STR(r->channel);
	if (refund)
		p[n++] = DBI_STR(r->refund_no);
	p[n++] = DBI_STR(r->channel_trade_no);
	p[n++] = DBI_STR(r->out_trade_no);
	p[n++] = DBI_STR(r->event_id);
	p[n++] = DBI_STR(r->event_type);
	p[n++] = DBI_STR(r->status);
	p[n++] = DBI_STR(r->amount);
	if (refund)
		p[n++] = DBI_I64(r->cumulative ? 1 : 0);
	p[n++] = DBI_STR(r->currency);
	p[n++] = DBI_BIN(r->body, r->body_len);
	p[n++] = DBI_STR(r->body_sha256);
	p[n++] = DBI_I64(r->lease_s);
	if (r->source != NULL)
		p[n++] = DBI_STR(r->source);
	return db_exec(db, SQL_RESERVE[r->source != NULL][r->cblog], p, n, NULL, id);
}
