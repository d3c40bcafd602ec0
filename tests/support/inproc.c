/*
 * inproc - driving the processor in-process (see inproc.h).
 */
#include "inproc.h"

#include "fixtures.h"
#include "msg.h"
#include "processor.h"

int
inproc_apply(struct proc *p, int refund, unsigned long long id, const char *merchant,
             const char *channel, const char *order, int attempt, const char **outcome)
{
	struct msg_callback m;

	fx_message(&m, refund, id, merchant, channel, order, attempt);
	return (int)proc_apply(p, &m, outcome);
}

long long
inproc_row_status(struct db *db, int refund, unsigned long long id)
{
	struct db_in in[1] = {DBI_I64(id)};
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(db,
	             refund ? "SELECT status FROM refund_callback_log WHERE id = ?"
	                    : "SELECT status FROM pay_callback_log WHERE id = ?",
	             in, 1, out, 1, NULL, NULL, &rows) != DB_OK ||
	    rows == 0)
		return -1;
	return out[0].i;
}
