/*
 * outbox - marks order_events rows sent after their confirmed delivery (see outbox.h).
 *
 * The marks go OUTBOX_MARK_IDS rows to a statement: an UPDATE per event added two round trips
 * per payment to the processor's transaction of nine, and round trips are most of what the
 * database spends its CPU on there. The condition sent_at IS NULL keeps the first mark's time
 * when the relay and the sweep both published a row.
 */
#include "outbox.h"

#include "log.h"

static const char SQL_MARK_SENT[] =
    "UPDATE order_events SET sent_at = NOW(3) WHERE sent_at IS NULL AND id IN (" OUTBOX_ID_PLACES
    ")";

_Static_assert(OUTBOX_MARK_IDS == 32, "SQL_MARK_SENT has 32 places");

int
outbox_mark_sent(struct db *db, const unsigned long long *ids, int n, unsigned char *ok)
{
	int rc = 0;

	for (int done = 0; done < n;) {
		struct db_in in[OUTBOX_MARK_IDS];
		int first = done, k = 0, good;

		for (; done < n && k < OUTBOX_MARK_IDS; done++)
			in[k++] = DBI_I64(ids[done]);
		/* Unused places repeat the chunk's first id. */
		for (int j = k; j < OUTBOX_MARK_IDS; j++)
			in[j] = in[0];
		good = db_exec(db, SQL_MARK_SENT, in, OUTBOX_MARK_IDS, NULL, NULL) == DB_OK;
		if (!good) {
			log_warn(NULL, "event=outbox_mark_failed rows=%d error=\"%s\"", k,
			         db->last_error);
			rc = -1;
		}
		for (int j = first; ok && j < done; j++)
			ok[j] = (unsigned char)good;
	}
	return rc;
}
