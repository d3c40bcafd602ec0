/*
 * sim_ledger - `run --api URL`: the channel side of paycb-reconciler's calls, as the run sees
 * it. The simulator's channel API (`paycb-sim api`, docs/simulator.md) keeps a ledger of the
 * payments each channel took and the refunds it made; this module fills it with the run's
 * payments and reads it back to judge the refunds.
 *
 * Registration: before any notification leaves, every case whose payment is on a channel the
 * API serves (--api-channels) gets its ledger entry, PAID, with the trade number and amount
 * the channel knows: the payment paycb must give back for paid-twice (the second),
 * paid-after-close and closed-other-amount (the amount paid), else the order's payment. A
 * payment whose notification is dropped (--dropped) is only in the ledger: the reconciler
 * must find it by query.
 *
 * Judgement: a refund request the reconciler must make (paid-twice, paid-after-close,
 * closed-other-amount on an API channel) must have been refunded exactly once, of its
 * amount; a refund-paid-twice or refund-paid-after-close payment, whose refund the channel
 * also tells by notification, at most once. The ledger counts refunds by out_refund_no, so a
 * second refund would show there whatever the database says.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "sim.h"

int
sim_api_channels(struct sim_opts *o, const char *list)
{
	char buf[128], *save = NULL;

	if (strlen(list) >= sizeof(buf))
		return -1;
	snprintf(buf, sizeof(buf), "%s", list);
	memset(o->api_ch, 0, sizeof(o->api_ch));
	for (char *t = strtok_r(buf, ",", &save); t != NULL; t = strtok_r(NULL, ",", &save)) {
		int found = 0;

		for (int ch = 0; ch < SIM_NCH; ch++)
			if (strcmp(t, sim_ch_name((enum sim_ch)ch)) == 0)
				o->api_ch[ch] = found = 1;
		if (!found)
			return -1;
	}
	return 0;
}

/* api_addr - host and port of o->api ("http://127.0.0.1:P"). Returns 0 or -1. */
static int
api_addr(const struct sim_opts *o, char *addr, size_t len, int *port)
{
	const char *h = strncmp(o->api, "http://", 7) == 0 ? o->api + 7 : NULL;
	const char *colon = h != NULL ? strchr(h, ':') : NULL;

	if (colon == NULL || (size_t)(colon - h) >= len)
		return -1;
	snprintf(addr, len, "%.*s", (int)(colon - h), h);
	*port = atoi(colon + 1);
	return *port > 0 && *port < 65536 ? 0 : -1;
}

/* given_back - the trade, channel and amount of the payment the channel's ledger holds. */
static void
given_back(const struct sim_case *c, const char **trade, enum sim_ch *ch, int64_t *amount)
{
	int second = c->kind == K_PAID_TWICE || c->kind == K_TWICE_REFUND;

	*trade = second ? c->trade2 : c->trade;
	*ch = second ? c->ch2 : c->ch;
	*amount = c->rr_amount;
}

int
sim_ledger_register(const struct sim_opts *o, const struct sim_plan *p,
                    const struct sim_merchant *m, char *err, size_t errlen)
{
	struct sim_conn conn;
	struct sim_answer a;
	char addr[64], form[512];
	int port, rc = -1, n = 0;

	if (api_addr(o, addr, sizeof(addr), &port) != 0) {
		snprintf(err, errlen, "--api: expected http://HOST:PORT, not '%s'", o->api);
		return -1;
	}
	sim_conn_init(&conn, addr, port);
	for (int i = 0; i < p->ncases; i++) {
		const struct sim_case *c = &p->cases[i];
		const char *trade;
		enum sim_ch ch;
		int64_t amount;

		if (!c->api_ledger)
			continue;
		given_back(c, &trade, &ch, &amount);
		/* The channel is named for an API that serves several (today's ignores it). */
		snprintf(
		    form, sizeof(form),
		    "merchant=%s&channel=%s&out_trade_no=%s&amount=%lld&currency=%s&state=PAID&"
		    "transaction_id=%s",
		    m[c->merchant].id, sim_ch_name(ch), c->order, (long long)amount, c->currency,
		    trade);
		if (sim_http_post(&conn, "/_sim/order",
		                  "Content-Type: "
		                  "application/x-www-form-urlencoded\r\n",
		                  form, strlen(form), 10000, &a) != 0 ||
		    a.status != 200) {
			snprintf(err, errlen, "the channel API at %s refused order %s (HTTP %d)",
			         o->api, c->order, a.status);
			goto done;
		}
		n++;
	}
	fprintf(stderr, "paycb-sim: %d payments registered in the channel API's ledger\n", n);
	rc = 0;
done:
	sim_conn_close(&conn);
	free(conn.buf);
	return rc;
}

/* ledger_of - the number of refunds and the refunded total of one order; -1 if unreadable. */
static int
ledger_of(const char *addr, int port, const char *merchant, enum sim_ch ch, const char *order,
          long long *n, long long *refunded)
{
	char path[300];
	struct sim_answer a;
	json_t *j;

	snprintf(path, sizeof(path), "/_sim/ledger?merchant=%s&channel=%s&out_trade_no=%s",
	         merchant, sim_ch_name(ch), order);
	if (sim_http_get(addr, port, path, 10000, &a) != 0 || a.status != 200 ||
	    (j = json_loadb(a.body, a.body_len, 0, NULL)) == NULL)
		return -1;
	*n = (long long)json_array_size(json_object_get(j, "refunds"));
	*refunded = json_integer_value(json_object_get(j, "refunded"));
	json_decref(j);
	return 0;
}

int
sim_ledger_check(const struct sim_opts *o, const struct sim_plan *p, const struct sim_merchant *m,
                 struct sim_outcome *res, FILE *out)
{
	char addr[64];
	int port;

	if (o->api == NULL)
		return 0;
	if (api_addr(o, addr, sizeof(addr), &port) != 0)
		return -1;
	for (int i = 0; i < p->ncases; i++) {
		const struct sim_case *c = &p->cases[i];
		int gives_back = c->kind == K_TWICE_REFUND || c->kind == K_CLOSE_REFUND;
		long long n = 0, refunded = 0;
		const char *trade;
		enum sim_ch ch;
		int64_t amount;

		if (!c->api_ledger || (!c->api_refund && !gives_back))
			continue;
		given_back(c, &trade, &ch, &amount);
		if (ledger_of(addr, port, m[c->merchant].id, ch, c->order, &n, &refunded) != 0) {
			if (out != NULL)
				fprintf(out, "mismatch: order %s: cannot read its ledger at %s\n",
				        c->order, o->api);
			res->mismatches++;
			continue;
		}
		res->ledger_refunds += n;
		res->ledger_twice += n > 1;
		if (n > 1 || (c->api_refund && (n != 1 || refunded != c->rr_amount))) {
			if (out != NULL)
				fprintf(out,
				        "mismatch: order %s (%s): the channel made %lld refunds of "
				        "%lld "
				        "in all, expected %s of %lld\n",
				        c->order, sim_kind_name(c->kind), n, refunded,
				        c->api_refund ? "exactly 1" : "at most 1",
				        (long long)c->rr_amount);
			res->mismatches++;
		}
	}
	return 0;
}
