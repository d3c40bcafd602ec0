/*
 * sim_expect - what each kind of case must leave in the database: the order's status, the
 * callback rows, and for the refund and edge-state kinds (issue 16) their events, refund
 * requests and unroutable notifications, judged here (sim_check.c judges the others and the
 * invariants every order shares).
 *
 *   kind                     order                 events (besides shipment, points)  requests
 *   refund-abnormal          REFUNDED, all         1 order.refund, order.refunded     none
 *                            (ABNORMAL row done with outcome refund_abnormal, alerts)
 *   refund-stripe-both       REFUNDING (a third)   1 order.refund per step that moved none
 *                            or REFUNDED (all)     money (1..4), order.refunded if all
 *   refund-reversed          PAID, refunded 0      order.refund(s), 1 order.refund_   none
 *                                                  reversed, order.refunded if it was full
 *   refund-paid-twice        PAID by the 1st       none                               1 DONE
 *   refund-paid-after-close  CLOSED                none, and no shipment or points    1 DONE
 *   closed-other-amount      CLOSED                none, and no shipment or points    1 REQUESTED,
 *                                                                                     the amount
 * paid dashboard-refund         PAID, refunded 0      none                               none; kept
 *                                                                                     unroutable
 * (no_order) connect-foreign          PENDING               none, and no shipment or points none;
 * kept unroutable (foreign_account)
 *
 * Every row is done, none dead, and no order has more than the money it was paid refunded.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "sim.h"

/*
 * sim_addf - appends a mismatch to buf. It lives here, below sim_check.c, because both files
 * judge cases and write their mismatches with it.
 */
void
sim_addf(char *buf, size_t len, const char *fmt, ...)
{
	size_t n = strlen(buf);
	va_list ap;

	if (n + 3 >= len)
		return;
	if (n > 0) {
		memcpy(buf + n, "; ", 3);
		n += 2;
	}
	va_start(ap, fmt);
	vsnprintf(buf + n, len - n, fmt, ap);
	va_end(ap);
}

/* One kind's expectations with a processor running. */
struct want {
	const char *status;
	int paid_events;            /* shipment and points */
	int refund_min, refund_max; /* order.refund events */
	int reversed, refunded;     /* order.refund_reversed, order.refunded events */
	int rr;                     /* refund requests */
	const char *rr_status;      /* DONE or REQUESTED */
	int abnormal;               /* refund rows with outcome refund_abnormal */
};

static void
want_of(const struct sim_case *c, struct want *w)
{
	memset(w, 0, sizeof(*w));
	w->status = sim_case_status(c, 1);
	w->paid_events = strcmp(w->status, "CLOSED") != 0 && strcmp(w->status, "PENDING") != 0;
	switch (c->kind) {
	case K_WX_ABNORMAL:
		w->refund_min = w->refund_max = 1;
		w->refunded = 1;
		w->abnormal = 1;
		break;
	case K_STRIPE_BOTH:
		w->refund_min = 1;
		w->refund_max = c->full ? 4 : 2;
		w->refunded = c->full;
		break;
	case K_REVERSED:
		w->refund_min = 1;
		w->refund_max = 2;
		w->reversed = 1;
		w->refunded = c->full;
		break;
	case K_TWICE_REFUND:
	case K_CLOSE_REFUND:
		w->rr = 1;
		w->rr_status = "DONE";
		break;
	case K_CLOSED_OTHER:
		w->rr = 1;
		/* Refunded by the reconciler when the channel has an API (run --api). */
		w->rr_status = c->api_refund ? "DONE" : "REQUESTED";
		break;
	default:
		break;
	}
}

const char *
sim_case_status(const struct sim_case *c, int full)
{
	switch (c->kind) {
	case K_PAY:
	case K_DUP:
	case K_INCIDENT:
	case K_STORM:
	case K_PAID_TWICE:
	case K_REVERSED:
	case K_TWICE_REFUND:
	case K_DASHBOARD:
		return full ? "PAID" : "PENDING";
	case K_REFUND_PF:
	case K_REFUND_FIRST:
	case K_WX_ABNORMAL:
		return full ? "REFUNDED" : "PENDING";
	case K_STRIPE_BOTH:
		return !full ? "PENDING" : c->full ? "REFUNDED" : "REFUNDING";
	case K_AFTER_CLOSE:
	case K_CLOSE_REFUND:
	case K_CLOSED_OTHER:
		return "CLOSED";
	default:
		return "PENDING";
	}
}

void
sim_case_rows(const struct sim_case *c, int *pay_rows, int *ref_rows)
{
	*pay_rows = 1;
	*ref_rows = 0;
	switch (c->kind) {
	case K_PAID_TWICE:
		*pay_rows = 2;
		break;
	case K_REFUND_PF:
	case K_WX_ABNORMAL:
		*ref_rows = 2;
		break;
	case K_REFUND_FIRST:
	case K_CLOSE_REFUND:
		*ref_rows = 1;
		break;
	case K_STRIPE_BOTH:
		/* Each refund by both families: refund.created and charge.refunded. */
		*ref_rows = c->full ? 4 : 2;
		break;
	case K_REVERSED:
		/* The refund, the charge's total, and the refund's failure (another status). */
		*ref_rows = 3;
		break;
	case K_TWICE_REFUND:
		*pay_rows = 2;
		*ref_rows = 1;
		break;
	case K_CONNECT:
		*pay_rows = 0;
		break;
	default:
		break;
	}
}

const char *
sim_case_unroutable(const struct sim_case *c)
{
	return c->kind == K_DASHBOARD ? "no_order"
	       : c->kind == K_CONNECT ? "foreign_account"
	                              : NULL;
}

const char *
sim_kind_expect(enum sim_kind k)
{
	static const char *const t[K_NKINDS] = {
	    [K_PAY] = "PAID by its trade, 2 events (a dropped one found by query)",
	    [K_DUP] = "PAID once however many copies, 2 events",
	    [K_INCIDENT] = "PAID once, 2 events, 1 row",
	    [K_STORM] = "PAID once, 2 events, 1 row",
	    [K_AFTER_CLOSE] = "CLOSED, 1 refund request (DONE by the reconciler with --api)",
	    [K_PAID_TWICE] = "PAID by the 1st trade, 1 refund request for the 2nd (DONE, --api)",
	    [K_MISMATCH] = "PENDING, row dead (amount_mismatch) with its dead letter",
	    [K_REFUND_PF] = "REFUNDED to the cent, an order.refund per refund",
	    [K_REFUND_FIRST] = "REFUNDED once the payment came",
	    [K_NO_ORDER] = "no order, row dead after the ladder",
	    [K_WX_ABNORMAL] = "ABNORMAL changes nothing (alert), SUCCESS then REFUNDED once",
	    [K_STRIPE_BOTH] = "both families counted once: REFUNDING a third or REFUNDED",
	    [K_REVERSED] = "refund failed after success: reversed, PAID, refunded 0",
	    [K_TWICE_REFUND] = "PAID by the 1st trade, the 2nd's refund request DONE",
	    [K_CLOSE_REFUND] = "CLOSED, the refund request DONE, order untouched",
	    [K_CLOSED_OTHER] = "CLOSED, 1 refund request of the amount paid (DONE, --api)",
	    [K_DASHBOARD] = "PAID, refund kept unroutable (no_order), order untouched",
	    [K_CONNECT] = "PENDING, kept unroutable (foreign_account), never PAID",
	};

	return (unsigned)k < K_NKINDS && t[k] != NULL ? t[k] : "";
}

void
sim_judge_refund_kind(const struct sim_case *c, const struct sim_seen *s, int full, char *buf,
                      size_t len)
{
	const char *why = sim_case_unroutable(c);
	int pay_rows, ref_rows;
	struct want w;

	sim_case_rows(c, &pay_rows, &ref_rows);
	if (why != NULL && (s->unroutable != 1 || s->unroutable_match != 1))
		sim_addf(buf, len, "unroutable kept %d (%d with reason %s), expected 1",
		         s->unroutable, s->unroutable_match, why);
	if (!full)
		return;
	want_of(c, &w);
	if (s->order && w.paid_events && strcmp(s->trade, c->trade) != 0)
		sim_addf(buf, len, "channel_trade_no '%s', expected '%s'", s->trade, c->trade);
	if (s->order && !w.paid_events && s->trade[0] != '\0')
		sim_addf(buf, len, "channel_trade_no '%s', expected none", s->trade);
	if (s->ev_ship != w.paid_events || s->ev_points != w.paid_events)
		sim_addf(buf, len, "order.paid.shipment %d, order.paid.points %d, expected %d each",
		         s->ev_ship, s->ev_points, w.paid_events);
	if (s->ev_refund < w.refund_min || s->ev_refund > w.refund_max)
		sim_addf(buf, len, "order.refund events %d, expected %d to %d", s->ev_refund,
		         w.refund_min, w.refund_max);
	if (s->ev_reversed != w.reversed)
		sim_addf(buf, len, "order.refund_reversed events %d, expected %d", s->ev_reversed,
		         w.reversed);
	if (s->ev_refunded != w.refunded)
		sim_addf(buf, len, "order.refunded events %d, expected %d", s->ev_refunded,
		         w.refunded);
	if (s->rr != w.rr || s->rr_match != w.rr ||
	    (w.rr && strcmp(w.rr_status, "DONE") == 0 && s->rr_done != w.rr) ||
	    (w.rr && strcmp(w.rr_status, "REQUESTED") == 0 && s->rr_requested != w.rr))
		sim_addf(buf, len,
		         "refund_requests %d (%d for the trade and amount, %d DONE, %d REQUESTED), "
		         "expected %d %s",
		         s->rr, s->rr_match, s->rr_done, s->rr_requested, w.rr,
		         w.rr ? w.rr_status : "");
	if (s->ref_abnormal != w.abnormal)
		sim_addf(buf, len, "refund rows with outcome refund_abnormal %d, expected %d",
		         s->ref_abnormal, w.abnormal);
	if (s->pay_done != pay_rows || s->pay_dead != 0)
		sim_addf(buf, len, "payment rows done %d (dead %d), expected %d", s->pay_done,
		         s->pay_dead, pay_rows);
	if (s->ref_done != ref_rows || s->ref_dead != 0)
		sim_addf(buf, len, "refund rows done %d (dead %d), expected %d", s->ref_done,
		         s->ref_dead, ref_rows);
}
