/*
 * inproc - driving the processor in-process: a callback message built as ingest builds it
 * (fx_message) and handed to proc_apply (processor.h), the function the daemon's consumer path runs
 * for each message, with no consumer and no daemon to spawn and poll.
 */
#ifndef PAYCB_INPROC_H
#define PAYCB_INPROC_H

#include "db.h"
#include "msg.h"

struct proc;

/*
 * Applies the callback message of row id (a refund row when refund is set) through p, as
 * the daemon would handle it when delivered on the main topic. *outcome, when outcome is
 * not NULL, is what became of it (proc_apply). Returns the enum proc_rc.
 */
int inproc_apply(struct proc *p, int refund, unsigned long long id, const char *merchant,
                 const char *channel, const char *order, int attempt, const char **outcome);

/* The status of row id of either log (0 pending, 1 done, 2 dead), -1 when there is none. */
long long inproc_row_status(struct db *db, int refund, unsigned long long id);

#endif
