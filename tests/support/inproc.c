/*
 * inproc - driving the processor in-process (see inproc.h).
 */
#include "inproc.h"

#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "msg.h"
#include "processor.h"

void
inproc_message(struct msg_callback *m, int refund, unsigned long long id, const char *merchant,
               const char *channel, const char *order, int attempt)
{
	memset(m, 0, sizeof(*m));
	m->cblog = refund ? CBLOG_REFUND : CBLOG_PAY;
	m->id = id;
	m->attempt = attempt;
	snprintf(m->merchant_id, sizeof(m->merchant_id), "%s", merchant);
	snprintf(m->channel, sizeof(m->channel), "%s", channel);
	snprintf(m->out_trade_no, sizeof(m->out_trade_no), "%s", order);
}

int
inproc_apply(struct proc *p, int refund, unsigned long long id, const char *merchant,
             const char *channel, const char *order, int attempt, const char **outcome)
{
	struct msg_callback m;

	inproc_message(&m, refund, id, merchant, channel, order, attempt);
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
