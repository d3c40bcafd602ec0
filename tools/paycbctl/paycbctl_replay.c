/*
 * paycbctl_replay - `replay [--dry-run] ID...` and `replay --all --from T --to T [--dry-run]`.
 *
 * A replay gives a dead row a fresh ladder: one conditional UPDATE (WHERE status = 2) sets
 * it pending with retry_count 0, leased for the first step's delay plus the lease margin,
 * and marks it replayed; the audit row is written in the same transaction, so a replay is
 * never without its record. Then the row is published on the FIRST retry step's topic, which
 * holds it for that step's delay: a bulk replay never lands on the main topic in front of live
 * traffic. If that publish fails the row is still pending and replayed, and the retrier
 * republishes it on the same step topic when the lease ends.
 *
 * A row that is done, or pending, is left alone and the tool says so (exit 0). A dry run
 * changes nothing but is audited. --all takes the dead rows of both logs whose dead_at lies in
 * [from, to).
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ladder.h"
#include "msg.h"
#include "paycbctl.h"

#define REPLAY_ALL_MAX 100000

#define ROW_SQL(T)                                                                                 \
	"SELECT status, retry_count, merchant_id, channel, out_trade_no, CAST(next_retry_at "      \
	"AS CHAR), IFNULL(dead_reason, IFNULL(outcome, '')) FROM " T " WHERE id = ?"
#define RESET_SQL(T)                                                                               \
	"UPDATE " T " SET status = 0, retry_count = 0, republish_count = 0, old_alerted_at = "     \
	"NULL, next_retry_at = NOW(3) + INTERVAL ? "                                               \
	"SECOND, replayed_at = NOW(3), dead_at = NULL, dead_reason = NULL, dlq_sent_at = NULL "    \
	"WHERE id = ? AND status = 2"
#define DEAD_IN_SQL(T, N)                                                                          \
	"SELECT " N ", id FROM " T " WHERE status = 2 AND COALESCE(dead_at, updated_at) >= ? "     \
	"AND COALESCE(dead_at, updated_at) < ?"

static const char *const sql_row[CBLOG_N] = CBLOG_SQL(ROW_SQL);
static const char *const sql_reset[CBLOG_N] = CBLOG_SQL(RESET_SQL);
static const char *const sql_dead_in = DEAD_IN_SQL(CBLOG_TABLE_PAY, "0") " UNION ALL " DEAD_IN_SQL(
    CBLOG_TABLE_REFUND, "1") " ORDER BY 2";

struct replay_row {
	long long status, retry_count;
	char merchant[65], channel[17], order[129], next_at[32], reason[40];
};

/* replay_publish - the first step's message for the row; returns 0 or -1 with err. */
static int
replay_publish(struct ctl *c, enum cblog lg, unsigned long long id, const struct replay_row *w,
               const char *topic, char *err, size_t errlen)
{
	struct msg_callback m;
	char key[200], val[1024];
	int klen, vlen;

	if (c->kp == NULL && kq_producer_new(&c->cf->kafka, &c->kp, err, errlen) != 0)
		return -1;
	memset(&m, 0, sizeof(m));
	m.cblog = lg;
	m.id = id;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", w->merchant);
	snprintf(m.channel, sizeof(m.channel), "%s", w->channel);
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", w->order);
	m.attempt = 1;
	if ((klen = msg_callback_key(&m, key, sizeof(key))) < 0 ||
	    (vlen = msg_callback_encode(&m, val, sizeof(val))) < 0) {
		snprintf(err, errlen, "cannot encode the message");
		return -1;
	}
	return kq_produce_wait(c->kp, topic, key, (size_t)klen, val, (size_t)vlen,
	                       (int)c->cf->kafka.delivery_timeout_ms + 1000, err, errlen) == 0
	           ? 0
	           : -1;
}

/* replay_reset - the conditional reset and its audit row in one transaction. Returns 1 when
 * reset, 0 when the row was no longer dead, -1 on a database error. */
static int
replay_reset(struct ctl *c, enum cblog lg, unsigned long long id, const char *ref,
             long long lease_s, const char *topic)
{
	struct db_in in[2] = {DBI_I64(lease_s), DBI_I64(id)};
	unsigned long long affected = 0;
	char result[300];

	if (db_begin(&c->db) != DB_OK || db_exec(&c->db, sql_reset[lg], in, 2, &affected, NULL))
		goto fail;
	if (affected == 1) {
		snprintf(result, sizeof(result),
		         "replayed: reset to pending (retry_count 0), publishing on %s", topic);
		if (ctl_audit(c, "replay", ref, 0, result) != DB_OK)
			goto fail;
	}
	if (db_commit(&c->db) != DB_OK)
		goto fail;
	return affected == 1;
fail:
	ctl_error(c, "%s: %s", ref, c->db.last_error);
	db_rollback(&c->db);
	return -1;
}

/* replay_one - replays one row; returns CTL_OK or CTL_FAILED. */
static int
replay_one(struct ctl *c, enum cblog lg, unsigned long long id, int dry_run, int *replayed)
{
	struct replay_row w;
	struct db_out out[7] = {DBO_I64(),
	                        DBO_I64(),
	                        DBO_STR(w.merchant, sizeof(w.merchant)),
	                        DBO_STR(w.channel, sizeof(w.channel)),
	                        DBO_STR(w.order, sizeof(w.order)),
	                        DBO_STR(w.next_at, sizeof(w.next_at)),
	                        DBO_STR(w.reason, sizeof(w.reason))};
	struct db_in in[1] = {DBI_I64(id)};
	long long delay = ladder_delay(&c->cf->retry, 1);
	long long lease = delay + c->cf->retry.lease_margin_s;
	unsigned long long rows = 0;
	char ref[24], topic[256], msg[512], err[256];
	int r;

	cblog_ref(ref, sizeof(ref), lg, id);
	ladder_topic(c->cf, 1, topic, sizeof(topic));
	if (db_query(&c->db, sql_row[lg], in, 1, out, 7, NULL, NULL, &rows) != DB_OK) {
		ctl_error(c, "%s: %s", ref, c->db.last_error);
		return CTL_FAILED;
	}
	if (rows == 0) {
		ctl_error(c, "%s: no such callback", ref);
		ctl_audit(c, "replay", ref, dry_run, "not found");
		return CTL_FAILED;
	}
	w.status = out[0].i;
	w.retry_count = out[1].i;
	if (w.status != 2) {
		if (w.status == 1)
			snprintf(msg, sizeof(msg), "already done; nothing changed");
		else
			snprintf(msg, sizeof(msg),
			         "pending (retry_count %lld, next attempt at %s UTC), not dead; "
			         "nothing changed",
			         w.retry_count, w.next_at);
		fprintf(c->out, "%s: %s\n", ref, msg);
		return ctl_audit(c, "replay", ref, dry_run, msg) == DB_OK ? CTL_OK : CTL_FAILED;
	}
	if (dry_run) {
		snprintf(
		    msg, sizeof(msg),
		    "dry run: would reset (dead, retry_count %lld, reason %s) and publish on %s "
		    "(held %llds)",
		    w.retry_count, w.reason[0] ? w.reason : "-", topic, delay);
		fprintf(c->out, "%s: %s\n", ref, msg);
		if (replayed)
			(*replayed)++;
		return ctl_audit(c, "replay", ref, 1, msg) == DB_OK ? CTL_OK : CTL_FAILED;
	}
	if ((r = replay_reset(c, lg, id, ref, lease, topic)) < 0)
		return CTL_FAILED;
	if (r == 0) {
		fprintf(c->out, "%s: no longer dead (changed meanwhile); nothing changed\n", ref);
		ctl_audit(c, "replay", ref, 0, "no longer dead; nothing changed");
		return CTL_OK;
	}
	if (replayed)
		(*replayed)++;
	if (replay_publish(c, lg, id, &w, topic, err, sizeof(err)) != 0) {
		snprintf(
		    msg, sizeof(msg),
		    "reset to pending, but the publish failed (%s); the retrier republishes it "
		    "on %s in %llds",
		    err, topic, lease);
		fprintf(c->out, "%s: %s\n", ref, msg);
		ctl_audit(c, "replay_publish", ref, 0, msg);
		return CTL_FAILED;
	}
	fprintf(c->out, "%s: replayed: pending, published on %s (processed in about %llds)\n", ref,
	        topic, delay);
	return CTL_OK;
}

struct all_set {
	int lg[REPLAY_ALL_MAX];
	unsigned long long id[REPLAY_ALL_MAX];
	int n;
};

static int
all_collect(void *arg, struct db_out *o)
{
	struct all_set *s = arg;

	if (s->n >= REPLAY_ALL_MAX)
		return 1;
	s->lg[s->n] = (int)o[0].i;
	s->id[s->n++] = (unsigned long long)o[1].i;
	return 0;
}

static int
replay_all(struct ctl *c, const char *from, const char *to, int dry_run)
{
	struct db_in in[4] = {DBI_STR(from), DBI_STR(to), DBI_STR(from), DBI_STR(to)};
	struct db_out out[2] = {DBO_I64(), DBO_I64()};
	struct all_set *s = calloc(1, sizeof(*s));
	unsigned long long rows = 0;
	int rc = CTL_OK, done = 0, failed = 0;
	char target[128], result[256];

	if (s == NULL)
		return CTL_FAILED;
	if (db_query(&c->db, sql_dead_in, in, 4, out, 2, all_collect, s, &rows) != DB_OK) {
		ctl_error(c, "replay --all: %s", c->db.last_error);
		free(s);
		return CTL_FAILED;
	}
	if (rows > (unsigned long long)s->n)
		fprintf(c->out,
		        "%llu dead rows in range; replaying the first %d (run again for the "
		        "rest)\n",
		        rows, s->n);
	for (int i = 0; i < s->n; i++)
		if (replay_one(c, (enum cblog)s->lg[i], s->id[i], dry_run, &done) != CTL_OK)
			failed++;
	snprintf(target, sizeof(target), "dead_at in [%s, %s)", from, to);
	snprintf(result, sizeof(result), "%s%d of %d dead rows, %d failed",
	         dry_run ? "dry run: would replay " : "replayed ", done, s->n, failed);
	fprintf(c->out, "%s\n", result);
	if (ctl_audit(c, "replay_all", target, dry_run, result) != DB_OK || failed)
		rc = CTL_FAILED;
	free(s);
	return rc;
}

int
ctl_cmd_replay(struct ctl *c, int argc, char **argv)
{
	static const struct option lo[] = {{"all", no_argument, NULL, 'a'},
	                                   {"from", required_argument, NULL, 'f'},
	                                   {"to", required_argument, NULL, 't'},
	                                   {"dry-run", no_argument, NULL, 'n'},
	                                   {NULL, 0, NULL, 0}};
	char from[32] = "", to[32] = "";
	int all = 0, dry = 0, ch, rc = CTL_OK;

	optind = 0; /* glibc: start over on a new argv */
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (ch) {
		case 'a':
			all = 1;
			break;
		case 'f':
		case 't':
			if (ctl_parse_time(optarg, ch == 'f' ? from : to, 32) != 0) {
				ctl_error(c, "--%s: cannot read time '%s'",
				          ch == 'f' ? "from" : "to", optarg);
				return CTL_USAGE;
			}
			break;
		case 'n':
			dry = 1;
			break;
		default:
			goto usage;
		}
	}
	if (all) {
		if (optind != argc || !from[0] || !to[0])
			goto usage;
		return replay_all(c, from, to, dry);
	}
	if (optind == argc || from[0] || to[0])
		goto usage;
	for (int i = optind; i < argc; i++) {
		unsigned long long id;
		enum cblog lg;

		if (cblog_ref_parse(argv[i], &lg, &id) != 0) {
			ctl_error(c, "'%s' is not a callback id (cb42, 42 or rf7)", argv[i]);
			return CTL_USAGE;
		}
	}
	for (int i = optind; i < argc; i++) {
		unsigned long long id;
		enum cblog lg;

		cblog_ref_parse(argv[i], &lg, &id);
		if (replay_one(c, lg, id, dry, NULL) != CTL_OK)
			rc = CTL_FAILED;
	}
	return rc;
usage:
	ctl_error(c, "usage: replay [--dry-run] ID...  |  replay --all --from T --to T "
	             "[--dry-run]");
	return CTL_USAGE;
}
