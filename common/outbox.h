/*
 * outbox - the order_events outbox rows as both of their publishers mark them.
 *
 * The processor writes an order_events row in the transaction that changes the order; its
 * relay publishes the row right after the commit, and the retrier's sweep publishes the rows
 * the relay left unsent. Both mark a row sent here, and only after its delivery report said
 * it was delivered.
 */
#ifndef PAYCB_OUTBOX_H
#define PAYCB_OUTBOX_H

#include "db.h"

/* How many rows one sent-mark statement takes. */
#define OUTBOX_MARK_IDS 32

/*
 * OUTBOX_ID_PLACES - OUTBOX_MARK_IDS placeholders for an "id IN (...)" list, for the
 * statements that take outbox row ids in chunks of that size (the marks and the relay's
 * order check).
 */
#define OUTBOX_Q4 "?, ?, ?, ?"
#define OUTBOX_ID_PLACES                                                                           \
	OUTBOX_Q4 ", " OUTBOX_Q4 ", " OUTBOX_Q4 ", " OUTBOX_Q4 ", " OUTBOX_Q4 ", " OUTBOX_Q4       \
	          ", " OUTBOX_Q4 ", " OUTBOX_Q4

/*
 * outbox_mark_sent - sets sent_at on the unsent rows ids[0..n), OUTBOX_MARK_IDS to a
 * statement, each statement committed by itself. A statement that fails is logged and its
 * rows stay unsent, which only means the sweep publishes them again (consumers deduplicate on
 * the event id). ok, when not NULL, gets 1 for each row whose statement succeeded, 0 for the
 * others. Returns 0, or -1 when a statement failed.
 */
int outbox_mark_sent(struct db *db, const unsigned long long *ids, int n, unsigned char *ok);

#endif
