/*
 * paycbctl_list - `list` (callbacks of both logs, newest first), `dead` (dead letters) and
 * `unroutable` (authentic notifications kept because they could not be applied).
 *
 * Each prints one row per notification with fixed columns; none reads a raw body.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paycbctl.h"

#define LIST_COLS                                                                                  \
	"id, merchant_id, channel, out_trade_no, status, retry_count, CAST(created_at AS "         \
	"CHAR) AS c, CAST(next_retry_at AS CHAR), IFNULL(last_error, '')"
/* With a status the per-table range starts on idx_retry; without one it is a scan. */
static const char *const sql_list_status =
    "SELECT * FROM (SELECT 0, " LIST_COLS " FROM pay_callback_log WHERE status = ? AND "
    "created_at >= ? UNION ALL SELECT 1, " LIST_COLS " FROM refund_callback_log WHERE status "
    "= ? AND created_at >= ?) x ORDER BY c DESC, 2 DESC LIMIT ?";
static const char *const sql_list_all =
    "SELECT * FROM (SELECT 0, " LIST_COLS " FROM pay_callback_log WHERE created_at >= ? "
    "UNION ALL SELECT 1, " LIST_COLS " FROM refund_callback_log WHERE created_at >= ?) x "
    "ORDER BY c DESC, 2 DESC LIMIT ?";

#define DEAD_COLS                                                                                  \
	"id, merchant_id, channel, out_trade_no, retry_count, CAST(COALESCE(dead_at, "             \
	"updated_at) AS CHAR) AS d, IFNULL(dead_reason, IFNULL(outcome, '')), "                    \
	"IFNULL(CAST(dlq_sent_at AS CHAR), ''), IFNULL(last_error, '')"
static const char *const sql_dead =
    "SELECT * FROM (SELECT 0, " DEAD_COLS " FROM pay_callback_log WHERE status = 2 AND "
    "COALESCE(dead_at, updated_at) >= ? UNION ALL SELECT 1, " DEAD_COLS
    " FROM refund_callback_log WHERE status = 2 AND COALESCE(dead_at, updated_at) >= ?) x "
    "ORDER BY d DESC, 2 DESC LIMIT ?";

static const char *const sql_unroutable =
    "SELECT id, merchant_id, channel, reason, event_type, event_id, CAST(created_at AS CHAR), "
    "IFNULL(LENGTH(raw_body), -1), body_sha256 FROM unroutable WHERE created_at >= ? ORDER BY "
    "created_at DESC, id DESC LIMIT ?";

struct list_buf {
	char merchant[65], channel[17], order[129], a[32], b[32], c[40], err[513];
};

/*
 * list_outs - the ten result columns of list (dead 0) or dead (dead 1). Both start with the
 * log, id, merchant, channel, order and retry count; list then has the status, dead the text
 * columns of a dead letter.
 */
static void
list_outs(struct list_buf *b, int dead, struct db_out *o)
{
	o[0] = DBO_I64();
	o[1] = DBO_I64();
	o[2] = DBO_STR(b->merchant, sizeof(b->merchant));
	o[3] = DBO_STR(b->channel, sizeof(b->channel));
	o[4] = DBO_STR(b->order, sizeof(b->order));
	o[5] = DBO_I64();
	o[6] = dead ? DBO_STR(b->a, sizeof(b->a)) : DBO_I64();
	o[7] = dead ? DBO_STR(b->c, sizeof(b->c)) : DBO_STR(b->a, sizeof(b->a));
	o[8] = DBO_STR(b->b, sizeof(b->b));
	o[9] = DBO_STR(b->err, sizeof(b->err));
}

static int
list_row(void *arg, struct db_out *o)
{
	struct ctl *c = arg;
	char ref[24], e[61];

	fprintf(c->out, "%-10s %-8s %5lld  %-23s  %-23s  %-10s %-7s %-24s %s\n",
	        cblog_ref(ref, sizeof(ref), (enum cblog)o[0].i, (unsigned long long)o[1].i),
	        ctl_status_name(o[5].i), o[6].i, o[7].buf, o[8].buf, o[2].buf, o[3].buf, o[4].buf,
	        ctl_clean(e, sizeof(e), o[9].buf));
	return 0;
}

static int
dead_row(void *arg, struct db_out *o)
{
	struct ctl *c = arg;
	char ref[24], e[61];

	fprintf(c->out, "%-10s %5lld  %-23s  %-17s %-23s  %-10s %-7s %-24s %s\n",
	        cblog_ref(ref, sizeof(ref), (enum cblog)o[0].i, (unsigned long long)o[1].i), o[5].i,
	        o[6].buf, o[7].buf, o[8].buf[0] ? o[8].buf : "NOT SENT", o[2].buf, o[3].buf,
	        o[4].buf, ctl_clean(e, sizeof(e), o[9].buf));
	return 0;
}

/* unroutable_row - one kept notification: what and why, the body only as length and hash. */
static int
unroutable_row(void *arg, struct db_out *o)
{
	struct ctl *c = arg;
	char id[24], type[41], ev[61], len[24];

	snprintf(id, sizeof(id), "un%lld", o[0].i);
	if (o[7].i < 0)
		snprintf(len, sizeof(len), "(purged)");
	else
		snprintf(len, sizeof(len), "%lld", o[7].i);
	fprintf(c->out, "%-10s %-23s  %-10s %-7s %-17s %-24s %-32s %8s %s\n", id, o[6].buf,
	        o[1].buf, o[2].buf, o[3].buf, ctl_clean(type, sizeof(type), o[4].buf),
	        ctl_clean(ev, sizeof(ev), o[5].buf), len, o[8].buf);
	return 0;
}

/* list_opts - the options list, dead and unroutable share; returns 0 or CTL_USAGE. */
static int
list_opts(struct ctl *c, int argc, char **argv, int with_status, long long *status, char *since,
          long long *limit, const char *cmd)
{
	static const struct option lo[] = {{"status", required_argument, NULL, 's'},
	                                   {"since", required_argument, NULL, 't'},
	                                   {"limit", required_argument, NULL, 'l'},
	                                   {NULL, 0, NULL, 0}};
	char *end;
	int ch;

	*status = -1;
	*limit = 50;
	snprintf(since, 32, "1970-01-01 00:00:00.000");
	optind = 0; /* glibc: start over on a new argv */
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 's':
			if (!with_status)
				goto usage;
			*status = strcmp(optarg, "pending") == 0 ? 0
			          : strcmp(optarg, "done") == 0  ? 1
			          : strcmp(optarg, "dead") == 0  ? 2
			                                         : -2;
			if (*status == -2) {
				ctl_error(c, "--status: expected pending, done or dead, not '%s'",
				          optarg);
				return CTL_USAGE;
			}
			break;
		case 't':
			if (ctl_parse_time(optarg, since, 32) != 0) {
				ctl_error(c,
				          "--since: cannot read time '%s' (YYYY-MM-DD[ HH:MM:SS], "
				          "UTC, or an age such as 2h)",
				          optarg);
				return CTL_USAGE;
			}
			break;
		case 'l':
			*limit = strtoll(optarg, &end, 10);
			if (*end || *limit < 1 || *limit > 100000) {
				ctl_error(c, "--limit: expected 1..100000, not '%s'", optarg);
				return CTL_USAGE;
			}
			break;
		default:
			goto usage;
		}
	}
	if (optind == argc)
		return 0;
usage:
	if (with_status)
		ctl_error(c, "usage: %s [--status pending|done|dead] [--since T] [--limit N]", cmd);
	else
		ctl_error(c, "usage: %s [--since T] [--limit N]", cmd);
	return CTL_USAGE;
}

int
ctl_cmd_list(struct ctl *c, int argc, char **argv)
{
	struct list_buf b;
	struct db_out out[10];
	long long status, limit;
	unsigned long long rows = 0;
	char since[32];
	enum db_rc rc;
	int urc;

	if ((urc = list_opts(c, argc, argv, 1, &status, since, &limit, "list")) != 0)
		return urc;
	list_outs(&b, 0, out);
	fprintf(c->out, "%-10s %-8s %5s  %-23s  %-23s  %-10s %-7s %-24s %s\n", "ID", "STATUS",
	        "RETRY", "CREATED_AT", "NEXT_RETRY_AT", "MERCHANT", "CHANNEL", "OUT_TRADE_NO",
	        "LAST_ERROR");
	if (status >= 0) {
		struct db_in in[5] = {DBI_I64(status), DBI_STR(since), DBI_I64(status),
		                      DBI_STR(since), DBI_I64(limit)};
		rc = db_query(&c->db, sql_list_status, in, 5, out, 10, list_row, c, &rows);
	} else {
		struct db_in in[3] = {DBI_STR(since), DBI_STR(since), DBI_I64(limit)};
		rc = db_query(&c->db, sql_list_all, in, 3, out, 10, list_row, c, &rows);
	}
	if (rc != DB_OK)
		return ctl_db_failed(c, "list", rc);
	fprintf(c->out, "(%llu rows)\n", rows);
	return CTL_OK;
}

int
ctl_cmd_dead(struct ctl *c, int argc, char **argv)
{
	struct list_buf b;
	struct db_out out[10];
	long long status, limit;
	unsigned long long rows = 0;
	char since[32];
	int urc;

	if ((urc = list_opts(c, argc, argv, 0, &status, since, &limit, "dead")) != 0)
		return urc;
	list_outs(&b, 1, out);
	fprintf(c->out, "%-10s %5s  %-23s  %-17s %-23s  %-10s %-7s %-24s %s\n", "ID", "RETRY",
	        "DEAD_AT", "REASON", "DLQ_SENT_AT", "MERCHANT", "CHANNEL", "OUT_TRADE_NO",
	        "LAST_ERROR");
	{
		struct db_in in[3] = {DBI_STR(since), DBI_STR(since), DBI_I64(limit)};
		enum db_rc rc = db_query(&c->db, sql_dead, in, 3, out, 10, dead_row, c, &rows);

		if (rc != DB_OK)
			return ctl_db_failed(c, "dead", rc);
	}
	fprintf(c->out, "(%llu dead letters)\n", rows);
	return CTL_OK;
}

int
ctl_cmd_unroutable(struct ctl *c, int argc, char **argv)
{
	char merchant[65], channel[17], reason[33], type[65], ev[129], created[32], sha[65];
	struct db_out out[9] = {DBO_I64(),
	                        DBO_STR(merchant, sizeof(merchant)),
	                        DBO_STR(channel, sizeof(channel)),
	                        DBO_STR(reason, sizeof(reason)),
	                        DBO_STR(type, sizeof(type)),
	                        DBO_STR(ev, sizeof(ev)),
	                        DBO_STR(created, sizeof(created)),
	                        DBO_I64(),
	                        DBO_STR(sha, sizeof(sha))};
	long long status, limit;
	unsigned long long rows = 0;
	char since[32];
	int urc;

	if ((urc = list_opts(c, argc, argv, 0, &status, since, &limit, "unroutable")) != 0)
		return urc;
	fprintf(c->out, "%-10s %-23s  %-10s %-7s %-17s %-24s %-32s %8s %s\n", "ID", "CREATED_AT",
	        "MERCHANT", "CHANNEL", "REASON", "EVENT_TYPE", "EVENT_ID", "BODY_LEN",
	        "BODY_SHA256");
	{
		struct db_in in[2] = {DBI_STR(since), DBI_I64(limit)};
		enum db_rc rc =
		    db_query(&c->db, sql_unroutable, in, 2, out, 9, unroutable_row, c, &rows);

		if (rc != DB_OK)
			return ctl_db_failed(c, "unroutable", rc);
	}
	fprintf(c->out, "(%llu unroutable notifications)\n", rows);
	return CTL_OK;
}
