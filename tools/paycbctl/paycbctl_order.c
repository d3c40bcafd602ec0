/*
 * paycbctl_order - `paycbctl order close MERCHANT ORDER...`: the merchant closes an unpaid
 * order. One conditional UPDATE (PENDING to CLOSED, close_requested_at set) and its
 * audit_log row, in one transaction; paycb-reconciler then closes the order at every channel
 * the merchant has, so the user can no longer pay it. An order that is not PENDING (paid
 * already, closed already, unknown) is left alone and reported.
 */
#include <stdio.h>
#include <string.h>

#include "paycbctl.h"

static int
close_one(struct ctl *c, const char *merchant, const char *order)
{
	char target[256];
	struct db_in in[2] = {DBI_STR(merchant), DBI_STR(order)};

	snprintf(target, sizeof(target), "order:%.64s|%.128s", merchant, order);
	return ctl_audited_update(
	    c,
	    "UPDATE orders SET status = 'CLOSED', close_requested_at = NOW(3), recon_next_at "
	    "= NULL WHERE merchant_id = ? AND out_trade_no = ? AND status = 'PENDING'",
	    in, 2, "order_close", target, "closed; the reconciler closes it at the channels",
	    "not closed: no such order, or not PENDING");
}

int
ctl_cmd_order(struct ctl *c, int argc, char **argv)
{
	int rc = CTL_OK;

	if (argc < 4 || strcmp(argv[1], "close") != 0) {
		ctl_error(c, "usage: paycbctl order close MERCHANT ORDER...");
		return CTL_USAGE;
	}
	for (int i = 3; i < argc; i++)
		if (close_one(c, argv[2], argv[i]) != CTL_OK)
			rc = CTL_FAILED;
	return rc;
}
