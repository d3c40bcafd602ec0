/*
 * cblog - the two callback tables, pay_callback_log and refund_callback_log, as one concept.
 *
 * A payment notification is kept as a row of pay_callback_log and a refund notification as
 * a row of refund_callback_log; everything else about them (the ladder, the dead letter, the
 * messages that name them) is the same. This module names the split once: the kind of log,
 * its name in messages and metrics, its table, the "cb42"/"rf7" reference that logs and
 * paycbctl use for a row, and the reservation INSERT that creates a row, which ingest runs
 * and the reconciler and the tests' fixtures run too, so a row is made the same way whoever
 * learnt of the callback.
 */
#ifndef PAYCB_CBLOG_H
#define PAYCB_CBLOG_H

#include <stddef.h>

#include "db.h"

enum cblog { CBLOG_PAY = 0, CBLOG_REFUND = 1 };
#define CBLOG_N 2

/*
 * The table names as literals, for SQL that is put together at compile time; cblog_table
 * gives the same at run time.
 */
#define CBLOG_TABLE_PAY    "pay_callback_log"
#define CBLOG_TABLE_REFUND "refund_callback_log"
/* The per-log array of a statement that macro M builds from a table name, by enum cblog. */
/* The initializer reads better on one line than as the block clang-format would make. */
/* clang-format off */
#define CBLOG_SQL(M) {M(CBLOG_TABLE_PAY), M(CBLOG_TABLE_REFUND)}
/* clang-format on */

/* The room a reference needs: "rf", 20 digits and the NUL. */
#define CBLOG_REF_MAX 24

/* "pay" or "refund", as messages (schemas/kafka/) and metrics labels spell the kind. */
const char *cblog_name(enum cblog lg);
/* The kind named s ("pay", "refund"): 0, or -1 when s names neither. */
int cblog_from_name(const char *s, enum cblog *lg);
/* The table of the kind. */
const char *cblog_table(enum cblog lg);

/* Formats the reference of row id ("cb42", "rf7") into buf; returns buf. */
char *cblog_ref(char *buf, size_t len, enum cblog lg, unsigned long long id);
/*
 * Parses a reference: "cb42" or a bare "42" is payment row 42, "rf7" refund row 7, and
 * nothing may follow the digits. Returns 0, or -1 for anything else (zero, more than 18
 * digits).
 */
int cblog_ref_parse(const char *s, enum cblog *lg, unsigned long long *id);

/*
 * A notification to reserve a row for. refund_no and cumulative are for refunds only;
 * body_sha256 is the lowercase hex SHA-256 of the body.
 */
struct cblog_row {
	enum cblog cblog;
	const char *merchant_id, *channel, *channel_trade_no, *out_trade_no, *refund_no;
	const char *event_id, *event_type, *status, *amount, *currency;
	int cumulative;
	const void *body;
	size_t body_len;
	const char *body_sha256;
	/* next_retry_at is now plus this: the retrier leaves the row alone till then. */
	long long lease_s;
	const char *source; /* the source column ('query' for the reconciler); NULL: the default */
};

/*
 * cblog_reserve - the reservation INSERT, autocommit: one row, with *id set on DB_OK. A copy
 * of a notification stored before fails on the table's unique key (DB_DUPLICATE), which is
 * how ingest tells a copy from a new notification.
 */
enum db_rc cblog_reserve(struct db *db, const struct cblog_row *r, unsigned long long *id);

#endif
