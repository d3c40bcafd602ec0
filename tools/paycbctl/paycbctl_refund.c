/*
 * paycbctl_refund - the refund requests paycb decided (paid twice, paid after close):
 *
 *   refund approve ID...   with reconciler.refund_approval on, the reconciler submits only
 *                          approved requests. An approval is one conditional UPDATE
 *                          (REQUESTED and not yet approved) and its audit_log row, in one
 *                          transaction; approving an approved, submitted or settled request
 *                          changes nothing and says so.
 *   refund list            the requests, newest first, filtered by status and age (read-only)
 *   refund show ID         one request: every column, its approval and its alerts
 */
#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paycbctl.h"

/* approve_one - one request id; returns CTL_OK or CTL_FAILED. */
static int
approve_one(struct ctl *c, const char *arg)
{
	char *end = NULL, target[64];
	unsigned long long id = strtoull(arg, &end, 10);
	struct db_in in[2];

	if (end == arg || *end != '\0' || id == 0) {
		ctl_error(c, "not a refund request id: '%.40s'", arg);
		return CTL_FAILED;
	}
	snprintf(target, sizeof(target), "refund_request:%llu", id);
	in[0] = DBI_STR(c->actor);
	in[1] = DBI_I64(id);
	return ctl_audited_update(
	    c,
	    "UPDATE refund_requests SET approved_at = NOW(3), approved_by = ?, "
	    "next_attempt_at = NOW(3) WHERE id = ? AND status = 'REQUESTED' AND approved_at "
	    "IS NULL",
	    in, 2, "refund_approve", target, "approved",
	    "not approved: no such request, or not REQUESTED, or approved already");
}

#define RR_COLS                                                                                    \
	"id, status, merchant_id, channel, out_trade_no, CAST(amount AS CHAR), currency, reason, " \
	"CAST(created_at AS CHAR), attempts, IFNULL(last_error, ''), IFNULL(out_refund_no, '')"

static int
rr_row(void *arg, struct db_out *o)
{
	struct ctl *c = arg;
	char e[41], ord[41];

	fprintf(c->out, "rr%-8lld %-10s %-23s %-10s %-7s %-40s %12s %-3s %-16s %3lld %s\n", o[0].i,
	        o[1].buf, o[8].buf, o[2].buf, o[3].buf, ctl_clean(ord, sizeof(ord), o[4].buf),
	        o[5].buf, o[6].buf, o[7].buf, o[9].i, ctl_clean(e, sizeof(e), o[10].buf));
	return 0;
}

/* refund_list - `refund list [--status S] [--since T] [--limit N]`, newest first. */
static int
refund_list(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {{"status", required_argument, NULL, 's'},
	                                   {"since", required_argument, NULL, 't'},
	                                   {"limit", required_argument, NULL, 'l'},
	                                   {NULL, 0, NULL, 0}};
	char since[32] = "1970-01-01 00:00:00.000", st[16] = "", b[12][160], *end;
	long long limit = 50;
	struct db_out out[12];
	unsigned long long rows = 0;
	int ch;

	optind = 0; /* glibc: start over on a new argv */
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 's' && strlen(optarg) < sizeof(st)) {
			for (size_t i = 0; i <= strlen(optarg); i++)
				st[i] = (char)toupper((unsigned char)optarg[i]);
			if (strcmp(st, "REQUESTED") == 0 || strcmp(st, "SUBMITTED") == 0 ||
			    strcmp(st, "DONE") == 0 || strcmp(st, "FAILED") == 0)
				continue;
		}
		if (ch == 's') {
			goto usage;
		} else if (ch == 't' && ctl_parse_time(optarg, since, sizeof(since)) == 0) {
			continue;
		} else if (ch == 'l' && (limit = strtoll(optarg, &end, 10)) >= 1 && *end == '\0' &&
		           limit <= 100000) {
			continue;
		} else {
			goto usage;
		}
	}
	for (int k = 0; k < 12; k++)
		out[k] = k == 0 || k == 9 ? DBO_I64() : DBO_STR(b[k], sizeof(b[k]));
	fprintf(c->out, "%-10s %-10s %-23s %-10s %-7s %-40s %12s %-3s %-16s %3s %s\n", "ID",
	        "STATUS", "CREATED", "MERCHANT", "CHANNEL", "ORDER", "AMOUNT", "CUR", "REASON",
	        "TRY", "LAST ERROR");
	if (db_query(&c->db,
	             "SELECT " RR_COLS " FROM refund_requests WHERE (? = '' OR status = ?) AND "
	             "created_at >= ? ORDER BY id DESC LIMIT ?",
	             (struct db_in[]){DBI_STR(st), DBI_STR(st), DBI_STR(since), DBI_I64(limit)}, 4,
	             out, 12, rr_row, c, &rows) != DB_OK) {
		ctl_error(c, "refund_requests: %s", c->db.last_error);
		return CTL_UNAVAIL;
	}
	return CTL_OK;
usage:
	ctl_error(c, "usage: paycbctl refund list [--status requested|submitted|done|failed] "
	             "[--since T] [--limit 1..100000]");
	return CTL_USAGE;
}

static int
rr_detail(void *arg, struct db_out *o)
{
	static const char *const names[] = {"id",
	                                    "status",
	                                    "merchant_id",
	                                    "channel",
	                                    "out_trade_no",
	                                    "amount",
	                                    "currency",
	                                    "reason",
	                                    "created_at",
	                                    "attempts",
	                                    "last_error",
	                                    "out_refund_no",
	                                    "channel_trade_no",
	                                    "channel_refund_id",
	                                    "sent_at",
	                                    "next_attempt_at",
	                                    "settled_at",
	                                    "approved_at",
	                                    "approved_by",
	                                    "alerted_at",
	                                    "callback_id"};
	struct ctl *c = arg;
	char v[200];

	for (int k = 0; k < 21; k++) {
		if (k == 0 || k == 9)
			snprintf(v, sizeof(v), "%lld", o[k].i);
		else
			ctl_clean(v, sizeof(v), o[k].is_null ? "" : o[k].buf);
		fprintf(c->out, "%-18s %s\n", names[k], v);
	}
	return 0;
}

static int
alert_row(void *arg, struct db_out *o)
{
	struct ctl *c = arg;
	char d[300];

	fprintf(c->out, "alert              %s %s: %s\n", o[0].buf, o[1].buf,
	        ctl_clean(d, sizeof(d), o[2].buf));
	return 0;
}

/* refund_show - `refund show ID` (rr7 or 7): every column, then the alerts of its order. */
static int
refund_show(struct ctl *c, const char *arg)
{
	char b[21][200], *end = NULL;
	unsigned long long id = strtoull(arg + (strncmp(arg, "rr", 2) == 0 ? 2 : 0), &end, 10);
	unsigned long long rows = 0, n = 0;
	struct db_out out[21];

	if (end == NULL || *end != '\0' || id == 0) {
		ctl_error(c, "not a refund request id: '%.40s'", arg);
		return CTL_USAGE;
	}
	for (int k = 0; k < 21; k++)
		out[k] = k == 0 || k == 9 ? DBO_I64() : DBO_STR(b[k], sizeof(b[k]));
	if (db_query(&c->db,
	             "SELECT " RR_COLS ", channel_trade_no, IFNULL(channel_refund_id, ''), "
	             "CAST(sent_at AS CHAR), CAST(next_attempt_at AS CHAR), CAST(settled_at AS "
	             "CHAR), CAST(approved_at AS CHAR), approved_by, CAST(alerted_at AS CHAR), "
	             "CAST(callback_id AS CHAR) FROM refund_requests WHERE id = ?",
	             (struct db_in[]){DBI_I64((long long)id)}, 1, out, 21, rr_detail, c,
	             &rows) != DB_OK)
		goto fail;
	if (rows == 0) {
		ctl_error(c, "rr%llu: no such refund request", id);
		return CTL_FAILED;
	}
	/* The reconciler's alerts name the request in their detail. */
	{
		char k[49], t[32], d[513], like[48];
		struct db_out ao[3] = {DBO_STR(t, sizeof(t)), DBO_STR(k, sizeof(k)),
		                       DBO_STR(d, sizeof(d))};

		snprintf(like, sizeof(like), "refund request %llu %%", id);
		if (db_query(&c->db,
		             "SELECT CAST(created_at AS CHAR), kind, detail FROM alerts WHERE "
		             "detail LIKE ? ORDER BY id",
		             (struct db_in[]){DBI_STR(like)}, 1, ao, 3, alert_row, c, &n) != DB_OK)
			goto fail;
	}
	return CTL_OK;
fail:
	ctl_error(c, "refund_requests: %s", c->db.last_error);
	return CTL_UNAVAIL;
}

int
ctl_cmd_refund(struct ctl *c, int argc, char **argv)
{
	int rc = CTL_OK;

	if (argc >= 2 && strcmp(argv[1], "list") == 0)
		return refund_list(c, argc - 1, argv + 1);
	if (argc == 3 && strcmp(argv[1], "show") == 0)
		return refund_show(c, argv[2]);
	if (argc < 3 || strcmp(argv[1], "approve") != 0) {
		ctl_error(c, "usage: paycbctl refund approve ID... | list [--status S] [--since T] "
		             "[--limit N] | show ID");
		return CTL_USAGE;
	}
	for (int i = 2; i < argc; i++)
		if (approve_one(c, argv[i]) != CTL_OK)
			rc = CTL_FAILED;
	return rc;
}
