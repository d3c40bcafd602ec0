/*
 * genuine - genuine notifications sent during an attack (see genuine.h).
 */
#include "genuine.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *
genuine_main(void *arg)
{
	struct genuine *g = arg;
	struct httpc_resp *r = malloc(sizeof(*r));
	char order[64], trade[64];
	int i = 0;

	while (r != NULL && !atomic_load(&g->stop)) {
		struct chan_note n;
		const char *path;
		int want, ch = i % 3, rc;
		struct timespec ts = {0, 100 * 1000 * 1000};

		snprintf(order, sizeof(order), "G%s%d-%d", g->tag, getpid(), i);
		snprintf(trade, sizeof(trade), "4200G%s%d%d", g->tag, getpid(), i);
		i++;
		memset(&n, 0, sizeof(n));
		r->status = 0;
		if (ch == 0) {
			rc = chan_wx_pay(g->k, &n, order, trade, 100, g->k->wx_cert_key,
			                 g->k->wx_serial, time(NULL));
			path = "/pay/callback/wxpay";
			want = 204;
		} else if (ch == 1) {
			rc = chan_ali_pay(&n, order, trade, "1.00", g->k->ali_key);
			path = "/pay/callback/alipay";
			want = 200;
		} else {
			snprintf(trade, sizeof(trade), "pi_g%s%d_%d", g->tag, getpid(), i);
			rc = chan_stripe_pay(&n, g->k->stripe_new, order, trade, 100, time(NULL));
			path = "/pay/callback/stripe";
			want = 200;
		}
		if (rc == 0 && chan_post(g->port, path, &n, r) == 0 && r->status == want) {
			atomic_fetch_add(&g->ok, 1);
			if (r->elapsed_ms > atomic_load(&g->max_ms))
				atomic_store(&g->max_ms, r->elapsed_ms);
			if (r->elapsed_ms > GENUINE_BUDGET_MS)
				atomic_fetch_add(&g->late, 1);
		} else {
			atomic_fetch_add(&g->bad, 1);
			printf("# genuine %s: got %d\n", path, r->status);
		}
		free(n.body);
		nanosleep(&ts, NULL);
	}
	free(r);
	return NULL;
}

void
genuine_start(struct genuine *g, const struct chan_keys *k, int port, const char *tag)
{
	memset(g, 0, sizeof(*g));
	snprintf(g->tag, sizeof(g->tag), "%s", tag);
	g->port = port;
	g->k = k;
	assert_int_equal(pthread_create(&g->t, NULL, genuine_main, g), 0);
}

void
genuine_check(struct genuine *g, struct db *db, int min, const char *what)
{
	char clause[128];

	atomic_store(&g->stop, 1);
	pthread_join(g->t, NULL);
	printf("# %s: genuine %d stored, %d failed, %d late, slowest %lld ms\n", what,
	       atomic_load(&g->ok), atomic_load(&g->bad), atomic_load(&g->late),
	       atomic_load(&g->max_ms));
	assert_true(atomic_load(&g->ok) >= min);
	assert_int_equal(atomic_load(&g->bad), 0);
	assert_int_equal(atomic_load(&g->late), 0);
	snprintf(clause, sizeof(clause), "pay_callback_log WHERE out_trade_no LIKE 'G%s%d-%%'",
	         g->tag, getpid());
	assert_int_equal(chan_rows(db, clause), atomic_load(&g->ok));
}
