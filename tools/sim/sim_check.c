/*
 * sim_check - what the database must hold after a scenario, case by case.
 *
 * With the whole pipeline running:
 *
 *   case kind              order           events  refund_requests      callback rows
 *   paid, duplicates,      PAID, its       2       none                 1 payment row, done
 *   incident, storm        trade
 *   paid-twice             PAID, 1st trade 2       1: 2nd trade, amount 2 payment rows, done
 *   paid-after-close       CLOSED          0       1: its trade, amount 1 payment row, done
 *   amount-mismatch        PENDING         0       none                 1 payment row, dead,
 *                                                                       dead letter sent
 *   refund-partial-full    REFUNDED,       5       none                 1 payment + 2 refund
 *                          refunded = all                               rows, done
 *   refund-before-payment  REFUNDED        4       none                 1 payment + 1 refund
 *                                                                       row, done
 *   no-order               no row          0       none                 1 payment row: dead
 *                                                                       with its dead letter
 *                                                                       if the ladder ends
 *                                                                       within the wait, else
 *                                                                       pending or dead
 *
 * and the refund and edge-state kinds as sim_expect.c says. For every order, whatever its kind:
 * its amount is kept to the cent; refunded_amount is the sum of its distinct refunds that
 * moved money (the plan's, and the order.refund events' amounts less the order.refund_reversed
 * ones); no refund_requests row is left REQUESTED for a payment whose refund happened. Ingest
 * keeps the notifications it cannot route in the unroutable table. The events of a paid order are
 * order.paid.shipment and order.paid.points; a refunded one adds an order.refund per refund and
 * order.refunded. With --ingest-only
 * (no processor) only ingest's part is checked: exactly one row per distinct notification however
 * many copies came, and orders untouched. Rows are selected by the run id every identifier carries,
 * one query per table and merchant. With --api, a payment whose notification was dropped must
 * have been found by the reconciler's query (a row with source 'query'), and a refund request
 * the reconciler must refund must be DONE (sim_ledger.c judges the channel's side).
 */
#include <stdlib.h>
#include <string.h>

#include "money.h"
#include "sim.h"

struct ctx {
	const struct sim_plan *p;
	struct sim_seen *s;
	size_t runlen;
	int bad_amounts;
};

/* case_of - the case an out_trade_no "<run>-<index>" names, or -1. */
static int
case_of(const struct ctx *x, const char *order)
{
	char *end;
	long i;

	if (strncmp(order, x->p->run, x->runlen) != 0 || order[x->runlen] != '-')
		return -1;
	i = strtol(order + x->runlen + 1, &end, 10);
	return *end == '\0' && i >= 0 && i < x->p->ncases ? (int)i : -1;
}

static int64_t
amount_of(struct ctx *x, const char *s)
{
	int64_t v = -1;
	char err[64];

	if (money_parse_decimal(s, 2, &v, err, sizeof(err)) != 0) {
		x->bad_amounts++;
		return -1;
	}
	return v;
}

static int
on_order(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of(x, o[0].buf);
	struct sim_seen *s;

	if (ci < 0)
		return 0;
	s = &x->s[ci];
	s->order++;
	snprintf(s->status, sizeof(s->status), "%s", o[1].buf);
	s->amount = amount_of(x, o[2].buf);
	s->refunded = amount_of(x, o[3].buf);
	snprintf(s->trade, sizeof(s->trade), "%s", o[4].buf);
	return 0;
}

/* case_of_event - the case a Stripe event id "evt_<tag><run><index>_<seq>" names, or -1. */
static int
case_of_event(const struct ctx *x, const char *id)
{
	char *end;
	long i;

	if (strncmp(id, "evt_", 4) != 0 || id[4] == '\0' ||
	    strncmp(id + 5, x->p->run, x->runlen) != 0)
		return -1;
	i = strtol(id + 5 + x->runlen, &end, 10);
	return *end == '_' && i >= 0 && i < x->p->ncases ? (int)i : -1;
}

static int
on_events(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of(x, o[0].buf), n = (int)o[2].i;
	struct sim_seen *s;
	int64_t sum;

	if (ci < 0)
		return 0;
	s = &x->s[ci];
	sum = amount_of(x, o[3].buf);
	s->events += n;
	if (strcmp(o[1].buf, "order.paid.shipment") == 0)
		s->ev_ship += n;
	else if (strcmp(o[1].buf, "order.paid.points") == 0)
		s->ev_points += n;
	else if (strcmp(o[1].buf, "order.refunded") == 0)
		s->ev_refunded += n;
	else if (strcmp(o[1].buf, "order.refund") == 0) {
		s->ev_refund += n;
		s->ev_refund_sum += sum;
	} else if (strcmp(o[1].buf, "order.refund_reversed") == 0) {
		s->ev_reversed += n;
		s->ev_reversed_sum += sum;
	}
	return 0;
}

static int
on_unroutable(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of_event(x, o[0].buf);
	const char *why;

	if (ci < 0)
		return 0;
	why = sim_case_unroutable(&x->p->cases[ci]);
	x->s[ci].unroutable++;
	x->s[ci].unroutable_match += why != NULL && strcmp(o[1].buf, why) == 0;
	return 0;
}

static int
on_refund_request(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of(x, o[0].buf);
	const struct sim_case *c;
	const char *want;

	if (ci < 0)
		return 0;
	c = &x->p->cases[ci];
	want = c->kind == K_PAID_TWICE || c->kind == K_TWICE_REFUND ? c->trade2 : c->trade;
	x->s[ci].rr++;
	x->s[ci].rr_match += strcmp(o[1].buf, want) == 0 && amount_of(x, o[2].buf) == c->rr_amount;
	x->s[ci].rr_done += strcmp(o[3].buf, "DONE") == 0;
	x->s[ci].rr_requested += strcmp(o[3].buf, "REQUESTED") == 0;
	/* The payment's refund happened: its request must not wait for one. */
	x->s[ci].rr_stale += c->rtrade[0] != '\0' && strcmp(o[1].buf, c->rtrade) == 0 &&
	                     strcmp(o[3].buf, "REQUESTED") == 0;
	return 0;
}

static int
on_pay_row(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of(x, o[0].buf);

	if (ci >= 0) {
		x->s[ci].pay_rows++;
		x->s[ci].pay_done += o[1].i == 1;
		x->s[ci].pay_dead += o[1].i == 2;
		x->s[ci].pay_dlq += o[1].i == 2 && o[2].i;
		x->s[ci].pay_mismatch += strcmp(o[3].buf, "amount_mismatch") == 0;
		x->s[ci].pay_query += o[4].i == 1;
	}
	return 0;
}

static int
on_refund_row(void *arg, struct db_out *o)
{
	struct ctx *x = arg;
	int ci = case_of(x, o[0].buf);

	if (ci >= 0) {
		x->s[ci].ref_rows++;
		x->s[ci].ref_done += o[1].i == 1;
		x->s[ci].ref_dead += o[1].i == 2;
		x->s[ci].ref_abnormal += strcmp(o[3].buf, "refund_abnormal") == 0;
	}
	return 0;
}

static const char *SQL_ORDERS =
    "SELECT out_trade_no, CAST(status AS CHAR), CAST(amount AS CHAR), "
    "CAST(refunded_amount AS CHAR), IFNULL(channel_trade_no, '') FROM orders "
    "WHERE merchant_id = ? AND out_trade_no LIKE ?";
/* Events by type, with the sum of their amounts (exact DECIMAL, never a float). */
static const char *SQL_EVENTS =
    "SELECT out_trade_no, event_type, COUNT(*), CAST(IFNULL(SUM(CAST(JSON_UNQUOTE("
    "JSON_EXTRACT(payload, '$.amount')) AS DECIMAL(18,2))), 0) AS CHAR) FROM order_events "
    "WHERE merchant_id = ? AND out_trade_no LIKE ? GROUP BY out_trade_no, event_type";
static const char *SQL_REFUND_REQUESTS =
    "SELECT out_trade_no, channel_trade_no, CAST(amount AS CHAR), CAST(status AS CHAR) "
    "FROM refund_requests WHERE merchant_id = ? AND out_trade_no LIKE ?";
static const char *SQL_UNROUTABLE =
    "SELECT event_id, reason FROM unroutable WHERE merchant_id = ? AND event_id LIKE ?";
/*
 * A dead row's dead letter is out when the retrier confirmed it (dlq_sent_at). Rows the
 * processor made dead before schema 008 have no dead_reason: it committed them only after
 * their dead letter was delivered. Since 008 the processor marks them (dead_reason set)
 * and the retrier sends their letter like any other.
 */
static const char *SQL_PAY_ROWS =
    "SELECT out_trade_no, status, dlq_sent_at IS NOT NULL OR (status = 2 AND dead_reason IS "
    "NULL AND outcome IN ('amount_mismatch', 'currency_mismatch')), IFNULL(outcome, ''), "
    "source = 'query' FROM pay_callback_log WHERE merchant_id = ? AND out_trade_no LIKE ?";
static const char *SQL_REFUND_ROWS =
    "SELECT out_trade_no, status, dlq_sent_at IS NOT NULL, IFNULL(outcome, '') FROM "
    "refund_callback_log WHERE merchant_id = ? AND out_trade_no LIKE ?";

/* load - reads one run's rows of every table for every merchant. */
static int
load(struct db *db, struct ctx *x, const struct sim_merchant *m, int nm, int full)
{
	char like[40], elike[40], b[5][160];
	unsigned long long rows;
	int unroutable = 0;

	for (int i = 0; i < x->p->ncases; i++)
		unroutable |= sim_case_unroutable(&x->p->cases[i]) != NULL;
	snprintf(like, sizeof(like), "%s-%%", x->p->run);
	snprintf(elike, sizeof(elike), "evt\\_%%%s%%", x->p->run);
	for (int i = 0; i < nm; i++) {
		struct db_in in[2] = {DBI_STR(m[i].id), DBI_STR(like)};
		struct db_in ein[2] = {DBI_STR(m[i].id), DBI_STR(elike)};
		struct db_out o[5] = {DBO_STR(b[0], 160), DBO_STR(b[1], 160), DBO_STR(b[2], 160),
		                      DBO_STR(b[3], 160), DBO_STR(b[4], 160)};
		struct db_out e[4] = {DBO_STR(b[0], 160), DBO_STR(b[1], 160), DBO_I64(),
		                      DBO_STR(b[2], 160)};
		struct db_out r[5] = {DBO_STR(b[0], 160), DBO_I64(), DBO_I64(), DBO_STR(b[1], 160),
		                      DBO_I64()};

		if (db_query(db, SQL_ORDERS, in, 2, o, 5, on_order, x, &rows) != DB_OK ||
		    db_query(db, SQL_PAY_ROWS, in, 2, r, 5, on_pay_row, x, &rows) != DB_OK ||
		    db_query(db, SQL_REFUND_ROWS, in, 2, r, 4, on_refund_row, x, &rows) != DB_OK)
			return -1;
		/* Only when a case expects one: ingest before 007_unroutable has no table. */
		if (unroutable &&
		    db_query(db, SQL_UNROUTABLE, ein, 2, e, 2, on_unroutable, x, &rows) != DB_OK)
			return -1;
		if (!full)
			continue;
		if (db_query(db, SQL_EVENTS, in, 2, e, 4, on_events, x, &rows) != DB_OK ||
		    db_query(db, SQL_REFUND_REQUESTS, in, 2, o, 4, on_refund_request, x, &rows) !=
		        DB_OK)
			return -1;
	}
	return 0;
}

/* judge_order - the order row: status, amount, refunded amount, trade, refund events. */
static void
judge_order(const struct sim_case *c, const struct sim_seen *s, int full, int by_trade, char *buf,
            size_t len)
{
	const char *status = sim_case_status(c, full);

	if (c->kind == K_NO_ORDER) {
		if (s->order)
			sim_addf(buf, len, "an order row exists, expected none");
		return;
	}
	if (!s->order) {
		sim_addf(buf, len, "no order row");
		return;
	}
	if (strcmp(s->status, status) != 0)
		sim_addf(buf, len, "status %s, expected %s", s->status, status);
	if (s->amount != c->amount)
		sim_addf(buf, len, "amount %lld, expected %lld (minor units)", (long long)s->amount,
		         (long long)c->amount);
	if (full && s->refunded != c->want_refunded)
		sim_addf(buf, len, "refunded_amount %lld, expected %lld (minor units)",
		         (long long)s->refunded, (long long)c->want_refunded);
	if (full && by_trade && strcmp(s->trade, c->trade) != 0)
		sim_addf(buf, len, "channel_trade_no '%s', expected '%s'", s->trade, c->trade);
	/* The events tell the money that moved: it must be what the order says. */
	if (full && s->ev_refund_sum - s->ev_reversed_sum != s->refunded)
		sim_addf(buf, len,
		         "order.refund events add up to %lld less %lld reversed, but "
		         "refunded_amount is %lld (minor units)",
		         (long long)s->ev_refund_sum, (long long)s->ev_reversed_sum,
		         (long long)s->refunded);
}

/* judge_rows - the callback rows: done, or dead with their dead letter, as the kind says. */
static void
judge_rows(const struct sim_case *c, const struct sim_seen *s, int ladder_fits, int pay_rows,
           int ref_rows, char *buf, size_t len)
{
	enum sim_kind k = c->kind;

	if (k == K_MISMATCH && s->pay_mismatch != 1)
		sim_addf(buf, len, "payment rows with outcome amount_mismatch %d, expected 1",
		         s->pay_mismatch);
	if (k == K_MISMATCH || (k == K_NO_ORDER && ladder_fits)) {
		if (s->pay_dead != 1 || s->pay_dlq != 1)
			sim_addf(buf, len,
			         "payment rows dead %d, with dead letter sent %d, expected 1",
			         s->pay_dead, s->pay_dlq);
	} else if (k == K_NO_ORDER) {
		/* The ladder outlasts the wait: pending retry is a right state too. */
		if (s->pay_done != 0)
			sim_addf(buf, len, "payment rows done %d, expected 0", s->pay_done);
	} else if (s->pay_done != pay_rows) {
		sim_addf(buf, len, "payment rows done %d, expected %d", s->pay_done, pay_rows);
	}
	if (s->ref_done != ref_rows)
		sim_addf(buf, len, "refund rows done %d (dead %d), expected %d", s->ref_done,
		         s->ref_dead, ref_rows);
}

/* judge - the mismatches of one case; buf is left empty when it is as expected. */
static void
judge(const struct sim_case *c, const struct sim_seen *s, int full, int ladder_fits, char *buf,
      size_t len)
{
	enum sim_kind k = c->kind;
	int paid = k == K_PAY || k == K_DUP || k == K_INCIDENT || k == K_STORM || k == K_PAID_TWICE;
	int refunded = k == K_REFUND_PF || k == K_REFUND_FIRST;
	int pay_rows, ref_rows;

	sim_case_rows(c, &pay_rows, &ref_rows);
	buf[0] = '\0';
	judge_order(c, s, full, paid || refunded, buf, len);
	if (full && s->rr_stale != 0)
		sim_addf(buf, len, "refund_requests left REQUESTED for %s, whose refund happened",
		         c->rtrade);
	if (s->pay_rows != pay_rows)
		sim_addf(buf, len, "pay_callback_log rows %d, expected %d", s->pay_rows, pay_rows);
	if (s->ref_rows != ref_rows)
		sim_addf(buf, len, "refund_callback_log rows %d, expected %d", s->ref_rows,
		         ref_rows);
	if (k >= K_WX_ABNORMAL) {
		sim_judge_refund_kind(c, s, full, buf, len);
		return;
	}
	if (!full)
		return;
	if (paid && s->events != 2)
		sim_addf(buf, len, "order_events %d, expected 2", s->events);
	/* shipment, points, one order.refund per refund and the final order.refunded */
	if (refunded && s->events != 3 + ref_rows)
		sim_addf(buf, len,
		         "order_events %d, expected %d (shipment, points, %d refund, refunded)",
		         s->events, 3 + ref_rows, ref_rows);
	if (!paid && !refunded && s->events != 0)
		sim_addf(buf, len, "order_events %d, expected 0", s->events);
	if (c->dropped && s->pay_query != 1)
		sim_addf(buf, len, "payment rows found by the reconciler's query %d, expected 1",
		         s->pay_query);
	if (k == K_AFTER_CLOSE || k == K_PAID_TWICE) {
		if (s->rr != 1 || s->rr_match != 1 || (c->api_refund && s->rr_done != 1))
			sim_addf(buf, len,
			         "refund_requests %d (%d for trade %s and the amount, %d DONE), "
			         "expected exactly 1%s",
			         s->rr, s->rr_match, k == K_PAID_TWICE ? c->trade2 : c->trade,
			         s->rr_done,
			         c->api_refund ? ", DONE (refunded by the reconciler)" : "");
	} else if (s->rr != 0) {
		sim_addf(buf, len, "refund_requests %d, expected 0", s->rr);
	}
	judge_rows(c, s, ladder_fits, pay_rows, ref_rows, buf, len);
}

int
sim_check(struct db *db, const struct sim_plan *p, const struct sim_merchant *m, int nm,
          const struct sim_opts *o, int ladder_fits, struct sim_outcome *res, FILE *out)
{
	struct ctx x = {p, calloc((size_t)p->ncases, sizeof(struct sim_seen)), strlen(p->run), 0};
	int full = !o->ingest_only, rc = -1;
	char buf[1024];

	memset(res, 0, sizeof(*res));
	if (x.s == NULL || load(db, &x, m, nm, full) != 0)
		goto done;
	for (int i = 0; i < p->ncases; i++) {
		const struct sim_case *c = &p->cases[i];
		const struct sim_seen *s = &x.s[i];

		res->paid += s->order && strcmp(s->status, "PAID") == 0;
		res->closed += s->order && strcmp(s->status, "CLOSED") == 0;
		res->refunded += s->order && strcmp(s->status, "REFUNDED") == 0;
		res->pending_orders += s->order && strcmp(s->status, "PENDING") == 0;
		res->pay_rows += s->pay_rows;
		res->refund_rows += s->ref_rows;
		res->rows_dead += s->pay_dead;
		res->rows_pending += s->pay_rows - s->pay_done - s->pay_dead;
		res->rows_pending += s->ref_rows - s->ref_done - s->ref_dead;
		res->rows_dead += s->ref_dead;
		res->dlq_sent += s->pay_dlq;
		res->events += s->events;
		res->refund_requests += s->rr;
		res->refunding += s->order && strcmp(s->status, "REFUNDING") == 0;
		res->rr_done += s->rr_done;
		res->rr_stale += s->rr_stale;
		res->unroutable += s->unroutable;
		res->refund_sums_off +=
		    s->order && full && s->ev_refund_sum - s->ev_reversed_sum != s->refunded;
		res->kind_cases[c->kind]++;
		res->recovered += s->pay_query;
		res->dropped += c->dropped;
		res->dropped_recovered += c->dropped && s->pay_query == 1;
		res->api_refunds += c->api_refund;
		res->api_refunds_done += c->api_refund && s->rr_done == 1;
		if (c->kind == K_NO_ORDER) {
			res->no_order_rows += s->pay_rows;
			res->no_order_pending += s->pay_rows - s->pay_done - s->pay_dead;
		}
		judge(c, s, full, ladder_fits, buf, sizeof(buf));
		if (buf[0] == '\0') {
			res->cases_ok++;
			res->kind_ok[c->kind]++;
			continue;
		}
		if (out != NULL && res->mismatches < o->max_mismatches)
			fprintf(out, "mismatch: order %s (%s, %s, merchant %s): %s\n", c->order,
			        sim_kind_name(c->kind), sim_ch_name(c->ch), m[c->merchant].id, buf);
		res->mismatches++;
	}
	if (x.bad_amounts > 0) {
		if (out != NULL)
			fprintf(out,
			        "mismatch: %d amounts in the database are not exact decimals\n",
			        x.bad_amounts);
		res->mismatches++;
	}
	if (out != NULL && res->mismatches > o->max_mismatches)
		fprintf(out, "mismatch: ... and %lld more\n", res->mismatches - o->max_mismatches);
	res->settled = res->rows_pending == res->no_order_pending;
	rc = 0;
done:
	free(x.s);
	return rc;
}
