/*
 * paycbctl_reconcile - `paycbctl reconcile --merchant M --from T1 --to T2 [--dry-run]
 * [--wait[=S]]`: a reconciliation of a time window by hand (docs/paycbctl.md).
 *
 * It makes the merchant's PENDING orders created in [T1, T2) due for a reconciliation query
 * now: one conditional UPDATE (status still PENDING) sets their recon_next_at to the moment
 * of the command and, for orders past the last step of reconciler.query_steps_s, brings
 * recon_step back to that last step, so each is queried once more. The UPDATE and its
 * audit_log row are one transaction. paycbctl never calls a channel itself: the reconcilers'
 * leases still claim every order (one conditional UPDATE each), so any number of them stay
 * correct, and a paid answer is reserved by the reconciler on the unique key as always.
 *
 * With --wait it follows the orders it marked until each was queried (its recon_step went
 * past the step it was marked at) or left PENDING, printing the progress every second and
 * then how many were found paid (no longer PENDING, or a payment the query reserved) and how
 * many of those were recovered by the query (a pay_callback_log row with source 'query').
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan_conf.h"
#include "clock.h"
#include "paycbctl.h"

/* One marked order: its id and the step it was marked at. */
struct mark {
	long long id, step;
};

struct rec {
	const char *merchant;
	char from[32], to[32], at[32];
	int dry_run, wait_s;
	struct mark *v;
	long long n, cap;
	long long queried, paid, recovered; /* the progress of a poll */
};

static int
rec_opts(struct ctl *c, int argc, char **argv, struct rec *r)
{
	static const struct option lo[] = {
	    {"merchant", required_argument, NULL, 'm'}, {"from", required_argument, NULL, 'f'},
	    {"to", required_argument, NULL, 't'},       {"dry-run", no_argument, NULL, 'd'},
	    {"wait", optional_argument, NULL, 'w'},     {NULL, 0, NULL, 0}};
	char *end;
	int ch;

	optind = 0; /* glibc: start over on a new argv */
	while ((ch = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		if (ch == 'm')
			r->merchant = optarg;
		else if (ch == 'f' && ctl_parse_time(optarg, r->from, sizeof(r->from)) == 0)
			continue;
		else if (ch == 't' && ctl_parse_time(optarg, r->to, sizeof(r->to)) == 0)
			continue;
		else if (ch == 'd')
			r->dry_run = 1;
		else if (ch == 'w' && optarg == NULL)
			r->wait_s = 600;
		else if (ch == 'w' && (r->wait_s = (int)strtol(optarg, &end, 10)) > 0 &&
		         *end == '\0' && r->wait_s <= 86400)
			continue;
		else
			goto usage;
	}
	if (r->merchant == NULL || r->from[0] == '\0' || r->to[0] == '\0' || optind != argc)
		goto usage;
	/* Both are "YYYY-MM-DD HH:MM:SS.mmm": the text orders as the time does. */
	if (strcmp(r->from, r->to) >= 0) {
		ctl_error(c, "reconcile: --from must come before --to");
		return CTL_USAGE;
	}
	return 0;
usage:
	ctl_error(c, "usage: paycbctl reconcile --merchant M --from T --to T [--dry-run] "
	             "[--wait[=S]] (T: UTC 'YYYY-MM-DD[ HH:MM[:SS]]' or an age such as 2h)");
	return CTL_USAGE;
}

static int
mark_row(void *arg, struct db_out *o)
{
	struct rec *r = arg;

	if (r->n == r->cap) {
		long long cap = r->cap * 2 + 1024;
		struct mark *v = realloc(r->v, (size_t)cap * sizeof(*v));

		if (v == NULL)
			return 1;
		r->v = v;
		r->cap = cap;
	}
	r->v[r->n++] = (struct mark){o[0].i, o[1].i};
	return 0;
}

/*
 * mark - the UPDATE, the marked orders read back in the same transaction (before any
 * reconciler can claim them) and the audit row; n is how many were made due.
 */
static int
mark(struct ctl *c, struct rec *r)
{
	const struct cfg_ints *steps = &c->cf->reconciler.query_steps_s;
	struct db_out at = DBO_STR(r->at, sizeof(r->at));
	struct db_out ids[2] = {DBO_I64(), DBO_I64()};
	char target[256], result[160];
	unsigned long long n = 0, rows = 0;

	snprintf(target, sizeof(target), "orders:%.64s|%s..%s", r->merchant, r->from, r->to);
	if (db_begin(&c->db) != DB_OK || db_query(&c->db, "SELECT CAST(NOW(3) AS CHAR)", NULL, 0,
	                                          &at, 1, NULL, NULL, &rows) != DB_OK)
		goto fail;
	if (db_exec(&c->db,
	            "UPDATE orders SET recon_next_at = ?, recon_step = LEAST(recon_step, ?) WHERE "
	            "merchant_id = ? AND status = 'PENDING' AND created_at >= ? AND created_at < ?",
	            (struct db_in[]){DBI_STR(r->at), DBI_I64(steps->n - 1), DBI_STR(r->merchant),
	                             DBI_STR(r->from), DBI_STR(r->to)},
	            5, &n, NULL) != DB_OK)
		goto fail;
	if (db_query(&c->db,
	             "SELECT id, recon_step FROM orders WHERE merchant_id = ? AND status = "
	             "'PENDING' AND created_at >= ? AND created_at < ? AND recon_next_at = ?",
	             (struct db_in[]){DBI_STR(r->merchant), DBI_STR(r->from), DBI_STR(r->to),
	                              DBI_STR(r->at)},
	             4, ids, 2, mark_row, r, &rows) != DB_OK ||
	    (unsigned long long)r->n != n)
		goto fail;
	snprintf(result, sizeof(result), "%llu PENDING orders due for a reconciliation query", n);
	if (ctl_audit(c, "reconcile", target, 0, result) != DB_OK || db_commit(&c->db) != DB_OK)
		goto fail;
	fprintf(c->out, "%s: %s at %s UTC\n", target, result, r->at);
	return CTL_OK;
fail:
	ctl_error(c, "reconcile: %s", r->n == (long long)n ? c->db.last_error : "out of memory");
	db_rollback(&c->db);
	return CTL_UNAVAIL;
}

/* dry_run - how many orders a run would make due, audited as a dry run. */
static int
dry_run(struct ctl *c, struct rec *r)
{
	char target[256], result[160];
	struct db_out cnt = DBO_I64();
	unsigned long long rows = 0;

	snprintf(target, sizeof(target), "orders:%.64s|%s..%s", r->merchant, r->from, r->to);
	if (db_query(&c->db,
	             "SELECT COUNT(*) FROM orders WHERE merchant_id = ? AND status = 'PENDING' AND "
	             "created_at >= ? AND created_at < ?",
	             (struct db_in[]){DBI_STR(r->merchant), DBI_STR(r->from), DBI_STR(r->to)}, 3,
	             &cnt, 1, NULL, NULL, &rows) != DB_OK) {
		ctl_error(c, "reconcile: %s", c->db.last_error);
		return CTL_UNAVAIL;
	}
	snprintf(result, sizeof(result), "dry run: %lld PENDING orders would be queried", cnt.i);
	if (ctl_audit(c, "reconcile", target, 1, result) != DB_OK)
		return CTL_UNAVAIL;
	fprintf(c->out, "%s: %s\n", target, result);
	return CTL_OK;
}

static int
by_id(const void *a, const void *b)
{
	const struct mark *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* poll_row - one order of the window: counted when it is one of the marked ones. */
static int
poll_row(void *arg, struct db_out *o)
{
	struct rec *r = arg;
	struct mark key = {o[0].i, 0};
	const struct mark *m = bsearch(&key, r->v, (size_t)r->n, sizeof(*m), by_id);
	int pending = strcmp(o[1].buf, "PENDING") == 0;

	if (m == NULL)
		return 0;
	r->queried += !pending || o[2].i > m->step;
	/* Recovered: the query found it paid and reserved it (the processors apply it). */
	r->paid += (!pending && strcmp(o[1].buf, "CLOSED") != 0) || o[3].i > 0;
	r->recovered += o[3].i > 0;
	return 0;
}

static int
poll(struct ctl *c, struct rec *r)
{
	char st[16];
	struct db_out o[4] = {DBO_I64(), DBO_STR(st, sizeof(st)), DBO_I64(), DBO_I64()};
	unsigned long long rows = 0;

	r->queried = r->paid = r->recovered = 0;
	return db_query(&c->db,
	                "SELECT o.id, o.status, o.recon_step, (SELECT COUNT(*) FROM "
	                "pay_callback_log p WHERE p.merchant_id = o.merchant_id AND "
	                "p.out_trade_no = o.out_trade_no AND p.source = 'query') FROM orders o "
	                "WHERE o.merchant_id = ? AND o.created_at >= ? AND o.created_at < ?",
	                (struct db_in[]){DBI_STR(r->merchant), DBI_STR(r->from), DBI_STR(r->to)}, 3,
	                o, 4, poll_row, r, &rows) == DB_OK
	           ? 0
	           : -1;
}

/* follow - polls the marked orders every second until each was queried or wait_s ran out. */
static int
follow(struct ctl *c, struct rec *r)
{
	long long t0 = clock_mono_ms(), last = -1;
	struct timespec tick = {1, 0};

	qsort(r->v, (size_t)r->n, sizeof(*r->v), by_id);
	for (;;) {
		if (poll(c, r) != 0) {
			ctl_error(c, "reconcile: %s", c->db.last_error);
			return CTL_UNAVAIL;
		}
		if (r->queried != last || r->queried == r->n)
			fprintf(
			    c->out,
			    "[%4llds] queried %lld of %lld; paid %lld (recovered by query %lld)\n",
			    (clock_mono_ms() - t0) / 1000, r->queried, r->n, r->paid, r->recovered);
		fflush(c->out);
		last = r->queried;
		if (r->queried == r->n)
			break;
		if (clock_mono_ms() - t0 >= (long long)r->wait_s * 1000) {
			ctl_error(c,
			          "reconcile: %lld of %lld orders not yet queried after %d s (is "
			          "paycb-reconciler running with API credentials for %s?)",
			          r->n - r->queried, r->n, r->wait_s, r->merchant);
			return CTL_FAILED;
		}
		nanosleep(&tick, NULL);
	}
	fprintf(c->out,
	        "reconciled: %lld orders queried: %lld found paid (%lld recovered by the query, "
	        "%lld by a notification meanwhile), %lld not paid at the channels\n",
	        r->n, r->paid, r->recovered, r->paid - r->recovered, r->n - r->paid);
	return CTL_OK;
}

static int
set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

int
ctl_cmd_reconcile(struct ctl *c, int argc, char **argv)
{
	struct rec r;
	const struct conf_merchant *m;
	int rc;

	memset(&r, 0, sizeof(r));
	if ((rc = rec_opts(c, argc, argv, &r)) != 0)
		return rc;
	if ((m = conf_merchant(c->cf, r.merchant)) == NULL) {
		ctl_error(c, "reconcile: no merchant '%.64s' in the configuration", r.merchant);
		return CTL_FAILED;
	}
	if (!(chan_conf_wx(m) && set(chan_conf_wx(m)->merchant_key_file)) &&
	    !(chan_conf_ali(m) && set(chan_conf_ali(m)->app_private_key_file)) &&
	    !(chan_conf_stripe(m) && set(chan_conf_stripe(m)->api_key_file)))
		ctl_error(c,
		          "reconcile: warning: merchant %s has no channel API credentials here; "
		          "the reconciler can only find nothing",
		          r.merchant);
	if (r.dry_run)
		return dry_run(c, &r);
	if ((rc = mark(c, &r)) == CTL_OK && r.wait_s > 0 && r.n > 0)
		rc = follow(c, &r);
	free(r.v);
	return rc;
}
