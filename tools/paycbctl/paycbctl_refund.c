/*
 * paycbctl_refund - `paycbctl refund approve ID...`: with reconciler.refund_approval on, the
 * reconciler submits only approved refund requests. An approval is one conditional UPDATE
 * (REQUESTED and not yet approved) and its audit_log row, in one transaction; approving an
 * approved, submitted or settled request changes nothing and says so.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paycbctl.h"

/* approve_one - one request id; returns CTL_OK or CTL_FAILED. */
static int
approve_one(struct ctl *c, const char *arg)
{
	char *end = NULL, target[64], result[128];
	unsigned long long id = strtoull(arg, &end, 10), n = 0;
	struct db_in in[2];

	if (end == arg || *end != '\0' || id == 0) {
		ctl_error(c, "not a refund request id: '%.40s'", arg);
		return CTL_FAILED;
	}
	snprintf(target, sizeof(target), "refund_request:%llu", id);
	in[0] = DBI_STR(c->actor);
	in[1] = DBI_I64(id);
	if (db_begin(&c->db) != DB_OK ||
	    db_exec(
	        &c->db,
	        "UPDATE refund_requests SET approved_at = NOW(3), approved_by = ?, "
	        "next_attempt_at = NOW(3) WHERE id = ? AND status = 'REQUESTED' AND approved_at "
	        "IS NULL",
	        in, 2, &n, NULL) != DB_OK)
		goto fail;
	snprintf(result, sizeof(result), "%s",
	         n == 1 ? "approved"
	                : "not approved: no such request, or not REQUESTED, or "
	                  "approved already");
	if (ctl_audit(c, "refund_approve", target, 0, result) != DB_OK ||
	    db_commit(&c->db) != DB_OK)
		goto fail;
	fprintf(c->out, "%s: %s\n", target, result);
	return n == 1 ? CTL_OK : CTL_FAILED;
fail:
	ctl_error(c, "%s: %s", target, c->db.last_error);
	db_rollback(&c->db);
	return CTL_FAILED;
}

int
ctl_cmd_refund(struct ctl *c, int argc, char **argv)
{
	int rc = CTL_OK;

	if (argc < 3 || strcmp(argv[1], "approve") != 0) {
		ctl_error(c, "usage: paycbctl refund approve ID...");
		return CTL_USAGE;
	}
	for (int i = 2; i < argc; i++)
		if (approve_one(c, argv[i]) != CTL_OK)
			rc = CTL_FAILED;
	return rc;
}
