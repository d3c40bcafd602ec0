/*
 * sim_plan - the scenarios: which orders exist, which notifications the channels send for
 * them, and when each delivery chain starts.
 *
 * A case is one order's story (paid once, paid twice, paid after close, refunded in part and
 * then in full, ...). Its notifications are delivery chains: a chain starts at an offset from
 * the start, or a while after another chain was first answered success (a refund follows its
 * payment; in refund-before-payment the payment follows the refund). Chains that start
 * together are taken in random order, so deliveries arrive out of order.
 *
 * Every identifier carries the run id, so runs never collide in a database that outlives
 * them and every check can select one run's rows by prefix. All randomness comes from the
 * seed: the same seed gives the same cases, amounts and timings.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "sim.h"

/* Delays between dependent chains (real time, not channel time). */
#define SIM_GAP_US          (200 * 1000)
#define SIM_REFUND_FIRST_US (1000 * 1000)
/* The incident: three pushes over 40 channel minutes. */
#define SIM_INCIDENT_S 2400
/* Duplicates arrive up to 2 s after the original. */
#define SIM_DUP_WINDOW_US (2 * 1000 * 1000)

static const enum sim_kind scenario_kind[] = {
    K_INCIDENT,     K_STORM,        K_AFTER_CLOSE, K_PAID_TWICE,  K_MISMATCH, K_REFUND_PF,
    K_REFUND_FIRST, K_NO_ORDER,     K_WX_ABNORMAL, K_STRIPE_BOTH, K_REVERSED, K_TWICE_REFUND,
    K_CLOSE_REFUND, K_CLOSED_OTHER, K_DASHBOARD,   K_CONNECT,     K_DUP};
#define NSCENARIO_KINDS ((int)(sizeof(scenario_kind) / sizeof(scenario_kind[0])))

/* The scenarios that are not one kind: mixed shares of all, and payments only. */
static const char *const scenario_extra[] = {"mixed", "load"};

const char *
sim_scenario_name(int i)
{
	if (i < 0)
		return NULL;
	/* A one-kind scenario is named as its kind. */
	if (i < NSCENARIO_KINDS)
		return sim_kind_name(scenario_kind[i]);
	i -= NSCENARIO_KINDS;
	return i < (int)(sizeof(scenario_extra) / sizeof(scenario_extra[0])) ? scenario_extra[i]
	                                                                     : NULL;
}

/* mixed: the share of each kind in permille; one storm comes on top. */
static const int mixed_permille[K_NKINDS] = {
    [K_PAY] = 610,         [K_DUP] = 120,         [K_INCIDENT] = 20,     [K_AFTER_CLOSE] = 25,
    [K_PAID_TWICE] = 25,   [K_MISMATCH] = 20,     [K_REFUND_PF] = 50,    [K_REFUND_FIRST] = 25,
    [K_NO_ORDER] = 25,     [K_WX_ABNORMAL] = 10,  [K_STRIPE_BOTH] = 15,  [K_REVERSED] = 10,
    [K_TWICE_REFUND] = 10, [K_CLOSE_REFUND] = 10, [K_CLOSED_OTHER] = 10, [K_DASHBOARD] = 8,
    [K_CONNECT] = 7,
};

const char *
sim_kind_name(enum sim_kind k)
{
	static const char *const n[K_NKINDS] = {"paid",
	                                        "duplicates",
	                                        "incident",
	                                        "storm",
	                                        "paid-after-close",
	                                        "paid-twice",
	                                        "amount-mismatch",
	                                        "refund-partial-full",
	                                        "refund-before-payment",
	                                        "no-order",
	                                        "refund-abnormal",
	                                        "refund-stripe-both",
	                                        "refund-reversed",
	                                        "refund-paid-twice",
	                                        "refund-paid-after-close",
	                                        "closed-other-amount",
	                                        "dashboard-refund",
	                                        "connect-foreign"};

	return (unsigned)k < K_NKINDS ? n[k] : "unknown";
}

/* run_id - 8 base-36 characters from the clock and the pid. */
static void
run_id(char *out, size_t len)
{
	static const char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
	uint64_t v = (uint64_t)(clock_wall_us() / 1000) * 1000 + (uint64_t)(getpid() % 1000);
	char tmp[16];
	int n = 0;

	while (n < 8) {
		tmp[n++] = digits[v % 36];
		v /= 36;
	}
	for (int i = 0; i < n && (size_t)i < len - 1; i++)
		out[i] = tmp[n - 1 - i];
	out[n < (int)len ? n : (int)len - 1] = '\0';
}

/* trade_no - a channel trade number in that channel's style, unique per run and case. */
static void
trade_no(char *buf, size_t len, enum sim_ch ch, const char *run, int i, int second)
{
	static const char *const prefix[SIM_NCH] = {"4200", "2026", "pi_"};

	snprintf(buf, len, "%s%s%06d%s", prefix[ch], run, i, second ? "b" : "");
}

/* second_channel - where the second payment of paid-twice comes from: the other CNY
 * channel for WeChat Pay and Alipay orders, Stripe again for Stripe (USD) orders. */
static enum sim_ch
second_channel(const struct sim_merchant *m, enum sim_ch ch)
{
	if (ch == SIM_WX && m->has[SIM_ALI])
		return SIM_ALI;
	if (ch == SIM_ALI && m->has[SIM_WX])
		return SIM_WX;
	return ch;
}

/* plan_single - the kinds of one payment, sent once, with copies, in a window or a storm. */
static int
plan_single(struct sim_plan *p, const struct sim_merchant *m, const struct sim_opts *o, int ci,
            long long s, int lost, uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	/* Drawn before the note, so a seed gives the plan it always gave. */
	int copies = c->kind == K_DUP ? 1 + (int)sim_rand_below(rng, 3) : 0;
	int pay = sim_plan_note(p, m, ci, c->ch, c->trade, 0, 0, rng), rc = -1;

	if (pay < 0)
		return -1;
	/* Dropped: the channel never sends it; only its ledger knows the payment. */
	if (c->dropped)
		return 0;
	c->e2e_note = c->kind == K_MISMATCH ? -1 : pay;
	switch (c->kind) {
	case K_MISMATCH:
		p->notes[pay].amount = c->amount > 1 ? c->amount - 1 : c->amount + 1;
		/* fall through */
	case K_PAY:
	case K_AFTER_CLOSE:
	case K_NO_ORDER:
		rc = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		break;
	case K_DUP:
		rc = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		/* Half the first copies race the original; the rest come later. */
		for (int k = 0; k < copies && rc >= 0; k++) {
			long long off = k == 0 && sim_rand_below(rng, 2)
			                    ? 0
			                    : (long long)sim_rand_below(rng, SIM_DUP_WINDOW_US);
			rc = sim_plan_del(p, pay, s + off, -1, 0, 0, 0, rng);
		}
		break;
	case K_INCIDENT:
		rc = sim_plan_del(p, pay, s, -1, 0, 0, 0, rng);
		if (rc >= 0)
			rc = sim_plan_del(p, pay, s + p->window_us / 2, -1, 0, 0, 0, rng);
		if (rc >= 0)
			rc = sim_plan_del(p, pay, s + p->window_us, -1, 0, 0, 0, rng);
		break;
	default: /* K_STORM */
		rc = 0;
		for (int k = 0; k < o->copies && rc >= 0; k++)
			rc = sim_plan_del(p, pay, s, -1, 0, 0, 1, rng);
		break;
	}
	return rc < 0 ? -1 : 0;
}

/* api_pick - a channel the API serves and the merchant has, or -1. */
static int
api_pick(const struct sim_merchant *m, const struct sim_opts *o)
{
	for (int ch = 0; ch < SIM_NCH; ch++)
		if (o->api_ch[ch] && m->has[ch])
			return ch;
	return -1;
}

/*
 * plan_api - with --api: the payment paycb must give back goes through a channel the API
 * serves, so the reconciler can refund it; which payments the channel's ledger holds; and
 * which payments' notifications are dropped, for the reconciler to find by query.
 */
static void
plan_api(struct sim_case *c, const struct sim_merchant *mm, const struct sim_opts *o, uint64_t *rng)
{
	int any = api_pick(mm, o), k = c->kind;
	int second = k == K_PAID_TWICE || k == K_TWICE_REFUND;

	if (any >= 0 && (k == K_AFTER_CLOSE || k == K_CLOSED_OTHER) && !o->api_ch[c->ch])
		c->ch = (enum sim_ch)any;
	if (any >= 0 && k == K_PAID_TWICE && !o->api_ch[c->ch2]) {
		/* Paid twice on the same channel, with another trade number. */
		if (!o->api_ch[c->ch])
			c->ch = (enum sim_ch)any;
		c->ch2 = o->api_ch[second_channel(mm, c->ch)] ? second_channel(mm, c->ch) : c->ch;
	}
	c->api_ledger = o->api_ch[second ? c->ch2 : c->ch] && k != K_NO_ORDER && k != K_MISMATCH &&
	                k != K_CONNECT;
	c->api_refund = c->api_ledger && (k == K_AFTER_CLOSE || k == K_CLOSED_OTHER || second) &&
	                k != K_TWICE_REFUND;
	c->dropped = k == K_PAY && c->api_ledger && o->dropped_permille > 0 &&
	             sim_rand_below(rng, 1000) < (uint64_t)o->dropped_permille;
}

/* plan_case - the notifications and chains of case ci, starting at s. */
static int
plan_case(struct sim_plan *p, const struct sim_merchant *m, const struct sim_opts *o, int ci,
          long long s, uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	int lost = sim_rand_below(rng, 1000) < (uint64_t)o->lost_permille;
	int pay, pay2, r1, r2, d, rc = -1;

	switch (c->kind) {
	case K_PAY:
	case K_AFTER_CLOSE:
	case K_NO_ORDER:
	case K_MISMATCH:
	case K_DUP:
	case K_INCIDENT:
	case K_STORM:
		return plan_single(p, m, o, ci, s, lost, rng);
	case K_PAID_TWICE:
		pay = sim_plan_note(p, m, ci, c->ch, c->trade, 0, 0, rng);
		pay2 = sim_plan_note(p, m, ci, c->ch2, c->trade2, 0, 1, rng);
		c->e2e_note = pay;
		d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		rc = d < 0 ? -1 : sim_plan_del(p, pay2, 0, d, SIM_GAP_US, 0, 0, rng);
		break;
	case K_REFUND_PF:
		pay = sim_plan_note(p, m, ci, c->ch, c->trade, 0, 0, rng);
		r1 = sim_plan_note(p, m, ci, c->ch, c->trade, 1, 1, rng);
		r2 = sim_plan_note(p, m, ci, c->ch, c->trade, 1, 2, rng);
		if (pay < 0 || r1 < 0 || r2 < 0)
			break;
		/* A third, then the rest; Stripe reports them as refunds or as charge totals. */
		p->notes[r1].amount = c->amount / 3 > 0 ? c->amount / 3 : 1;
		p->notes[r1].cumulative = p->notes[r1].amount;
		p->notes[r2].amount = c->amount - p->notes[r1].amount;
		p->notes[r2].cumulative = c->amount;
		p->notes[r2].full = 1;
		p->notes[r1].stripe_cumulative = p->notes[r2].stripe_cumulative = ci % 2;
		d = sim_plan_del(p, pay, s, -1, 0, lost, 0, rng);
		d = d < 0 ? -1 : sim_plan_del(p, r1, 0, d, SIM_GAP_US, 0, 0, rng);
		rc = d < 0 ? -1 : sim_plan_del(p, r2, 0, d, SIM_GAP_US, 0, 0, rng);
		break;
	case K_REFUND_FIRST:
		pay = sim_plan_note(p, m, ci, c->ch, c->trade, 0, 0, rng);
		r1 = sim_plan_note(p, m, ci, c->ch, c->trade, 1, 1, rng);
		if (pay < 0 || r1 < 0)
			break;
		p->notes[r1].cumulative = c->amount;
		p->notes[r1].full = 1;
		p->notes[r1].stripe_cumulative = ci % 2;
		d = sim_plan_del(p, r1, s, -1, 0, 0, 0, rng);
		rc = d < 0 ? -1 : sim_plan_del(p, pay, 0, d, SIM_REFUND_FIRST_US, 0, 0, rng);
		break;
	default:
		rc = sim_plan_refund_case(p, m, ci, s, lost, rng);
		break;
	}
	return rc < 0 ? -1 : 0;
}

/* pick_channel - a channel the merchant has, at random. */
static enum sim_ch
pick_channel(const struct sim_merchant *m, uint64_t *rng)
{
	enum sim_ch avail[SIM_NCH];
	int n = 0;

	for (int c = 0; c < SIM_NCH; c++)
		if (m->has[c])
			avail[n++] = (enum sim_ch)c;
	return avail[sim_rand_below(rng, (uint64_t)n)];
}

/* kinds_for - the kind of every case of the scenario, shuffled. */
static int
kinds_for(const char *scenario, int n, enum sim_kind *out, uint64_t *rng)
{
	int k = 0;

	if (strcmp(scenario, "mixed") == 0) {
		/* One storm, then exact shares of the rest, so expectations are exact counts. */
		out[k++] = K_STORM;
		for (int kind = K_DUP; kind < K_NKINDS; kind++)
			for (int i = 0; i < (n - 1) * mixed_permille[kind] / 1000 && k < n; i++)
				out[k++] = (enum sim_kind)kind;
		while (k < n)
			out[k++] = K_PAY;
		for (int i = n - 1; i > 1; i--) {
			int j = 1 + (int)sim_rand_below(rng, (uint64_t)i);
			enum sim_kind t = out[i];
			out[i] = out[j];
			out[j] = t;
		}
		return 0;
	}
	if (strcmp(scenario, "load") == 0) {
		for (int i = 0; i < n; i++)
			out[i] = K_PAY;
		return 0;
	}
	for (int s = 0; s < NSCENARIO_KINDS; s++) {
		if (strcmp(scenario, sim_kind_name(scenario_kind[s])) != 0)
			continue;
		for (int i = 0; i < n; i++)
			out[i] = scenario_kind[s];
		return 0;
	}
	return -1;
}

/* case_init - case i's merchant, channels, identifiers and amount (its kind is set). */
static int
case_init(struct sim_plan *p, const struct sim_merchant *m, int nm, const struct sim_opts *o, int i,
          uint64_t *rng, char *err, size_t errlen)
{
	struct sim_case *c = &p->cases[i];
	const struct sim_merchant *mm;
	int need;

	c->merchant = (int)sim_rand_below(rng, (uint64_t)nm);
	if ((need = sim_kind_channel(c->kind)) >= 0) {
		/* A channel's own behaviour: a merchant that has that channel. */
		for (int k = 0; k < nm && !m[c->merchant].has[need]; k++)
			c->merchant = (c->merchant + 1) % nm;
		if (!m[c->merchant].has[need]) {
			snprintf(err, errlen, "%s needs a merchant with %s", sim_kind_name(c->kind),
			         sim_ch_name((enum sim_ch)need));
			return -1;
		}
	}
	mm = &m[c->merchant];
	c->ch = need >= 0 ? (enum sim_ch)need : pick_channel(mm, rng);
	c->ch2 = second_channel(mm, c->ch);
	if (o->api != NULL)
		plan_api(c, mm, o, rng);
	c->e2e_note = -1;
	snprintf(c->order, sizeof(c->order), "%s-%06d", p->run, i);
	snprintf(c->currency, sizeof(c->currency), "%s", c->ch == SIM_STRIPE ? "USD" : "CNY");
	/* 1.00 to 999.99; refunds in part need at least two minor units. */
	c->amount = 100 + (int64_t)sim_rand_below(rng, 99900);
	trade_no(c->trade, sizeof(c->trade), c->ch, p->run, i, 0);
	trade_no(c->trade2, sizeof(c->trade2), c->ch2, p->run, i, 1);
	/* What the refund kinds change is set by their planning. */
	c->rr_amount = c->amount;
	c->want_refunded = c->kind == K_REFUND_PF || c->kind == K_REFUND_FIRST ? c->amount : 0;
	c->measure_e2e = (c->kind == K_PAY || c->kind == K_DUP || c->kind == K_INCIDENT ||
	                  c->kind == K_STORM || c->kind == K_PAID_TWICE) &&
	                 !c->dropped;
	atomic_init(&c->ack_us, 0);
	return 0;
}

int
sim_plan_build(struct sim_plan *p, const struct sim_merchant *m, int nm, const struct sim_opts *o,
               char *err, size_t errlen)
{
	uint64_t rng = o->seed ? o->seed : 1;
	int n = strcmp(o->scenario, "storm") == 0 ? 1 : o->orders;
	enum sim_kind *kinds = NULL;
	int rc = -1;

	memset(p, 0, sizeof(*p));
	run_id(p->run, sizeof(p->run));
	p->window_us = SIM_INCIDENT_S * 1000000LL / o->compress;
	if (n < 1 || (kinds = calloc((size_t)n, sizeof(*kinds))) == NULL ||
	    (p->cases = calloc((size_t)n, sizeof(*p->cases))) == NULL) {
		snprintf(err, errlen, "cannot plan %d orders", n);
		goto done;
	}
	if (kinds_for(o->scenario, n, kinds, &rng) != 0) {
		snprintf(err, errlen, "unknown scenario '%s'", o->scenario);
		goto done;
	}
	p->ncases = n;
	for (int i = 0; i < n; i++) {
		struct sim_case *c = &p->cases[i];
		long long s = o->rate > 0 ? (long long)i * 1000000LL / o->rate : 0;

		c->kind = kinds[i];
		if (case_init(p, m, nm, o, i, &rng, err, errlen) != 0)
			goto done;
		/* The storm of a mixed run comes half a second in, amid the other traffic. */
		if (c->kind == K_STORM && n > 1)
			s = 500 * 1000;
		if (plan_case(p, m, o, i, s, &rng) != 0) {
			snprintf(err, errlen, "out of memory planning case %d", i);
			goto done;
		}
	}
	/* The notes no longer move: their locks can be set up now. */
	for (int i = 0; i < p->nnotes; i++)
		pthread_mutex_init(&p->notes[i].mu, NULL);
	p->ready = 1;
	rc = 0;
done:
	free(kinds);
	if (rc != 0)
		sim_plan_free(p);
	return rc;
}

void
sim_plan_free(struct sim_plan *p)
{
	for (int i = 0; i < p->nnotes; i++) {
		sim_blob_put(p->notes[i].blob);
		if (p->ready)
			pthread_mutex_destroy(&p->notes[i].mu);
	}
	free(p->notes);
	free(p->dels);
	free(p->cases);
	memset(p, 0, sizeof(*p));
}
