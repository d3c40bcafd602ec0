/*
 * sim_plan_notes - the parts a plan is built of: a notification (sim_plan_note) and a
 * delivery chain of it (sim_plan_del).
 *
 * Both the scenarios of sim_plan.c and the refund scenarios of sim_plan_refunds.c build their
 * cases from these two, so they live below both: the refund scenarios then never call back
 * into sim_plan.c, which dispatches to them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim.h"

/* grow - makes room for need elements of *arr, doubling; the new part is zeroed. */
static int
grow(void **arr, int *cap, int need, size_t elem)
{
	void *p;
	int ncap;

	if (need <= *cap)
		return 0;
	ncap = *cap ? *cap * 2 : 1024;
	while (ncap < need)
		ncap *= 2;
	if ((p = realloc(*arr, (size_t)ncap * elem)) == NULL)
		return -1;
	memset((char *)p + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
	*arr = p;
	*cap = ncap;
	return 0;
}

/* note_path - the ingest path a notification of merchant m is posted to. */
static void
note_path(struct sim_note *n, const struct sim_merchant *m)
{
	if (strcmp(m->id, "default") == 0)
		snprintf(n->path, sizeof(n->path), "/pay/callback/%s", sim_ch_name(n->ch));
	else
		snprintf(n->path, sizeof(n->path), "/pay/callback/%s/%s", sim_ch_name(n->ch),
		         m->id);
}

int
sim_plan_note(struct sim_plan *p, const struct sim_merchant *m, int ci, enum sim_ch ch,
              const char *trade, int refund, int seq, uint64_t *rng)
{
	struct sim_case *c = &p->cases[ci];
	struct sim_note *n;

	if (grow((void **)&p->notes, &p->notes_cap, p->nnotes + 1, sizeof(*n)) != 0)
		return -1;
	n = &p->notes[p->nnotes];
	n->ccase = ci;
	n->merchant = c->merchant;
	n->ch = ch;
	n->refund = refund;
	n->seq = seq;
	memcpy(n->currency, c->currency, 4);
	snprintf(n->order, sizeof(n->order), "%s", c->order);
	snprintf(n->trade, sizeof(n->trade), "%s", trade);
	snprintf(n->charge, sizeof(n->charge), "ch_%s", trade + 3);
	n->amount = c->amount;
	n->total = c->amount;
	/* WeChat Pay signs with either of its keys while merchants migrate; Stripe sends two
	 * signatures while a secret is rolled. */
	n->wx_pubkey = (int)sim_rand_below(rng, 2);
	n->stripe_both = (int)sim_rand_below(rng, 2);
	if (refund) {
		snprintf(n->refund_no, sizeof(n->refund_no), "R%s-%d", c->order, seq);
		if (ch == SIM_STRIPE)
			snprintf(n->refund_id, sizeof(n->refund_id), "re_%s_%d", trade + 3, seq);
		else
			snprintf(n->refund_id, sizeof(n->refund_id), "5030%s%d", trade + 4, seq);
	}
	note_path(n, &m[c->merchant]);
	return p->nnotes++;
}

int
sim_plan_del(struct sim_plan *p, int note, long long start_us, int after, long long after_us,
             int lost_acks, int burst, uint64_t *rng)
{
	struct sim_delivery *d;

	if (note < 0 || grow((void **)&p->dels, &p->dels_cap, p->ndels + 1, sizeof(*d)) != 0)
		return -1;
	d = &p->dels[p->ndels];
	d->note = note;
	d->start_us = start_us;
	d->after = after;
	d->after_us = after_us;
	d->lost_acks = lost_acks;
	d->burst = burst;
	d->first_dep = -1;
	d->next_dep = -1;
	d->tie = sim_rand(rng);
	if (after >= 0) {
		d->next_dep = p->dels[after].first_dep;
		p->dels[after].first_dep = p->ndels;
	}
	p->bursts += burst;
	return p->ndels++;
}
