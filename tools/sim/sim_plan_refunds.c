/*
 * sim_plan_refunds - the refund and edge-state scenarios: which notifications the channels
 * send for them and in which order (issue 16).
 *
 * - refund-abnormal (WeChat Pay): a full refund REFUND.ABNORMAL, then REFUND.SUCCESS for the
 *   same refund_id, as WeChat Pay resolves an abnormal refund.
 * - refund-stripe-both (Stripe): every refund told by both families, refund.created (one
 *   refund) and charge.refunded (the charge's running total), all released together after
 *   the payment so they arrive in random order; even cases refund a third, odd ones a third
 *   and then the rest.
 * - refund-reversed (Stripe): a refund told by both families, then the refund object failing
 *   (refund.failed, refund.updated or charge.refund.updated; status failed or canceled).
 * - refund-paid-twice, refund-paid-after-close: the payment paycb must give back is refunded;
 *   in odd cases the refund comes before that payment's own notification.
 * - closed-other-amount: a payment of another amount on a closed order.
 * - dashboard-refund (Stripe): a refund made in the Dashboard, whose metadata is empty, so
 *   ingest cannot route it.
 * - connect-foreign (Stripe): a connected account's payment carrying our order number.
 */
#include <stdio.h>
#include <string.h>

#include "sim.h"

/* Delays between dependent chains (real time, not channel time). */
#define SIM_RGAP_US   (200 * 1000)
#define SIM_SPREAD_US (800 * 1000)
#define SIM_FAIL_US   (1000 * 1000)

int
sim_kind_channel(enum sim_kind k)
{
	switch (k) {
	case K_WX_ABNORMAL:
		return SIM_WX;
	case K_STRIPE_BOTH:
	case K_REVERSED:
	case K_DASHBOARD:
	case K_CONNECT:
		return SIM_STRIPE;
	default:
		return -1;
	}
}

int
sim_kind_closed(enum sim_kind k)
{
	return k == K_AFTER_CLOSE || k == K_CLOSE_REFUND || k == K_CLOSED_OTHER;
}

/*
 * refund_note - a refund of trade on channel ch: amount this refund, cumulative the refunded
 * total after it, cum whether Stripe tells it as charge.refunded. Returns its index or -1.
 */
static int
refund_note(struct sim_plan *p, const struct sim_merchant *m, int ci, enum sim_ch ch,
            const char *trade, int seq, int64_t amount, int64_t cumulative, int cum, uint64_t *rng)
{
	const struct sim_case *c = &p->cases[ci];
	int r = sim_plan_note(p, m, ci, ch, trade, 1, seq, rng);

	if (r < 0)
		return -1;
	p->notes[r].amount = amount;
	p->notes[r].cumulative = cumulative;
	p->notes[r].full = cumulative == c->amount;
	p->notes[r].stripe_cumulative = cum;
	return r;
}

/* both_families - refund seq of the Stripe payment, told by refund.created and by
 * charge.refunded, each released at a random moment after delivery after. */
static int
both_families(struct sim_plan *p, const struct sim_merchant *m, int ci, int seq, int64_t amount,
              int64_t cumulative, int after, int *single_del, uint64_t *rng)
{
	const struct sim_case *c = &p->cases[ci];
	int one = refund_note(p, m, ci, c->ch, c->trade, seq, amount, cumulative, 0, rng);
	int tot = refund_note(p, m, ci, c->ch, c->trade, seq, amount, cumulative, 1, rng);
	int d;

	if (one < 0 || tot < 0)
		return -1;
	d = sim_plan_del(p, one, 0, after,
	                 SIM_RGAP_US + (long long)sim_rand_below(rng, SIM_SPREAD_US), 0, 0, rng);
	if (single_del != NULL)
		*single_del = d;
	if (d < 0)
		return -1;
	return sim_plan_del(p, tot, 0, after,
	                    SIM_RGAP_US + (long long)sim_rand_below(rng, SIM_SPREAD_US), 0, 0, rng);
}

/* stripe_failure - the failure of refund seq, as one of the events Stripe sends for it. */
static int
stripe_failure(struct sim_plan *p, const struct sim_merchant *m, int ci, int seq, int64_t amount,
               int after, uint64_t *rng)
{
	static const char *const types[] = {"refund.failed", "refund.updated",
	                                    "charge.refund.updated"};
	const struct sim_case *c = &p->cases[ci];
	int f = refund_note(p, m, ci, c->ch, c->trade, seq, amount, amount, 0, rng);

	if (f < 0)
		return -1;
	p->notes[f].rstatus = sim_rand_below(rng, 3) == 0 ? RS_CANCELED : RS_FAILED;
	p->notes[f].stripe_type = types[sim_rand_below(rng, 3)];
	return sim_plan_del(p, f, 0, after, SIM_FAIL_US, 0, 0, rng);
}

/* other_refund - the refund of the payment paycb gives back (trade on ch), after that
 * payment's delivery pay_del or, when first, before the payment pay (started then). */
static int
other_refund(struct sim_plan *p, const struct sim_merchant *m, int ci, enum sim_ch ch,
             const char *trade, int64_t amount, int pay, int start_del, long long s, int first,
             uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	int r = refund_note(p, m, ci, ch, trade, 1, amount, amount, 0, rng), d;

	if (r < 0)
		return -1;
	p->notes[r].full = 1;
	p->notes[r].total = amount;
	p->notes[r].stripe_cumulative = (int)sim_rand_below(rng, 2);
	snprintf(c->rtrade, sizeof(c->rtrade), "%s", trade);
	if (!first)
		return sim_plan_del(p, r, 0, start_del, SIM_RGAP_US, 0, 0, rng);
	/* The refund first: the payment comes once the refund was acknowledged. */
	d = start_del >= 0 ? sim_plan_del(p, r, 0, start_del, SIM_RGAP_US, 0, 0, rng)
	                   : sim_plan_del(p, r, s, -1, 0, 0, 0, rng);
	return d < 0 ? -1 : sim_plan_del(p, pay, 0, d, SIM_RGAP_US, 0, 0, rng);
}

/* given_back_refunded - refund-paid-twice and refund-paid-after-close: the payment paycb
 * gives back is refunded; in odd cases the refund comes before that payment's notification. */
static int
given_back_refunded(struct sim_plan *p, const struct sim_merchant *m, int ci, int pay, long long s,
                    int lost, uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	int pay2, d, d2, first = ci % 2;

	switch (c->kind) {
	case K_TWICE_REFUND:
		pay2 = sim_plan_note(p, m, ci, c->ch2, c->trade2, 0, 1, rng);
		if (pay2 < 0 || (d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng)) < 0)
			return -1;
		if (first)
			return other_refund(p, m, ci, c->ch2, c->trade2, c->amount, pay2, d, s, 1,
			                    rng);
		d2 = sim_plan_del(p, pay2, 0, d, SIM_RGAP_US, 0, 0, rng);
		return d2 < 0 ? -1
		              : other_refund(p, m, ci, c->ch2, c->trade2, c->amount, pay2, d2, s, 0,
		                             rng);
	case K_CLOSE_REFUND:
		if (first)
			return other_refund(p, m, ci, c->ch, c->trade, c->amount, pay, -1, s, 1,
			                    rng);
		d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		return d < 0
		           ? -1
		           : other_refund(p, m, ci, c->ch, c->trade, c->amount, pay, d, s, 0, rng);
	default:
		return -1;
	}
}

int
sim_plan_refund_case(struct sim_plan *p, const struct sim_merchant *m, int ci, long long s,
                     int lost, uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	int64_t third = c->amount / 3 > 0 ? c->amount / 3 : 1;
	int pay, r, d, d2;

	c->full = ci % 2;
	pay = sim_plan_note(p, m, ci, c->ch, c->trade, 0, 0, rng);
	if (pay < 0)
		return -1;
	c->e2e_note = pay;
	switch (c->kind) {
	case K_WX_ABNORMAL:
		c->full = 1;
		c->want_refunded = c->amount;
		r = refund_note(p, m, ci, c->ch, c->trade, 1, c->amount, c->amount, 0, rng);
		if (r < 0)
			return -1;
		p->notes[r].rstatus = RS_ABNORMAL;
		d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		d = d < 0 ? -1 : sim_plan_del(p, r, 0, d, SIM_RGAP_US, 0, 0, rng);
		r = refund_note(p, m, ci, c->ch, c->trade, 1, c->amount, c->amount, 0, rng);
		return d < 0 || r < 0 ? -1 : sim_plan_del(p, r, 0, d, SIM_RGAP_US, 0, 0, rng);
	case K_STRIPE_BOTH:
		c->want_refunded = c->full ? c->amount : third;
		if ((d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng)) < 0 ||
		    both_families(p, m, ci, 1, third, third, d, NULL, rng) < 0)
			return -1;
		return !c->full
		           ? 0
		           : both_families(p, m, ci, 2, c->amount - third, c->amount, d, NULL, rng);
	case K_REVERSED: {
		int64_t a = c->full ? c->amount : third;

		c->want_refunded = 0;
		if ((d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng)) < 0 ||
		    both_families(p, m, ci, 1, a, a, d, &d2, rng) < 0)
			return -1;
		return stripe_failure(p, m, ci, 1, a, d2, rng);
	}
	case K_TWICE_REFUND:
	case K_CLOSE_REFUND:
		return given_back_refunded(p, m, ci, pay, s, lost, rng);
	case K_CLOSED_OTHER:
		/* Another amount: up to a third more or less, never zero. */
		c->rr_amount = c->amount + (ci % 2 ? 1 : -1) *
		                               (1 + (int64_t)sim_rand_below(rng, (uint64_t)third));
		p->notes[pay].amount = c->rr_amount;
		return sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
	case K_DASHBOARD:
		r = refund_note(p, m, ci, c->ch, c->trade, 1, c->full ? c->amount : third,
		                c->full ? c->amount : third, 0, rng);
		if (r < 0 || (d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng)) < 0)
			return -1;
		p->notes[r].no_metadata = 1;
		p->notes[r].unroutable = 1;
		return sim_plan_del(p, r, 0, d, SIM_RGAP_US, 0, 0, rng);
	case K_CONNECT:
		/* Not a payment of ours: the order stays PENDING and nothing is timed. */
		c->e2e_note = -1;
		snprintf(p->notes[pay].account, sizeof(p->notes[pay].account), "acct_1%sForeign",
		         p->run);
		p->notes[pay].unroutable = 1;
		return sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
	default:
		return -1;
	}
}
