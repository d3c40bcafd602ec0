/*
 * reconciler_util - what the reconciler's jobs share: the backoff ladder of
 * reconciler.refund_ladder_s, the alerts rows and the batch of due orders that the query and
 * close jobs select.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "reconciler.h"

int
recon_ladder_steps(const struct conf *cf)
{
	return cf->reconciler.refund_ladder_s.n;
}

long long
recon_ladder_delay(const struct conf *cf, long long failures)
{
	int n = cf->reconciler.refund_ladder_s.n;

	if (failures < 1)
		failures = 1;
	if (failures > n)
		failures = n;
	return cf->reconciler.refund_ladder_s.v[failures - 1];
}

enum db_rc
recon_alert(struct reconciler *r, const char *kind, const char *merchant, const char *order,
            const char *detail)
{
	struct db_in in[4] = {DBI_STR(kind), DBI_STR(merchant), DBI_STR(order), DBI_STR(detail)};

	return db_exec(&r->db,
	               "INSERT INTO alerts (kind, merchant_id, out_trade_no, detail) VALUES (?, ?, "
	               "?, ?)",
	               in, 4, NULL, NULL);
}

static int
orders_collect(void *arg, struct db_out *o)
{
	struct recon_orders *b = arg;
	struct recon_order *w;

	if (b->n >= b->cap)
		return 1;
	w = &b->v[b->n++];
	memset(w, 0, sizeof(*w));
	w->id = o[0].i;
	snprintf(w->merchant, sizeof(w->merchant), "%s", o[1].buf);
	snprintf(w->order, sizeof(w->order), "%s", o[2].buf);
	w->step = o[3].i;
	w->next_null = o[4].is_null;
	snprintf(w->next, sizeof(w->next), "%s", o[4].is_null ? "" : o[4].buf);
	return 0;
}

int
recon_orders_select(struct reconciler *r, const char *sql, const struct db_in *in, int nin,
                    struct recon_orders *b, int *full)
{
	char b1[65], b2[129], b3[32];
	struct db_out out[5] = {DBO_I64(), DBO_STR(b1, sizeof(b1)), DBO_STR(b2, sizeof(b2)),
	                        DBO_I64(), DBO_STR(b3, sizeof(b3))};
	unsigned long long rows = 0;

	*full = 0;
	memset(b, 0, sizeof(*b));
	b->cap = (int)r->cf->reconciler.batch;
	if ((b->v = calloc((size_t)b->cap, sizeof(*b->v))) == NULL)
		return -1;
	if (db_query(&r->db, sql, in, nin, out, 5, orders_collect, b, &rows) != DB_OK)
		return -1;
	*full = b->n == b->cap;
	return 0;
}

void
recon_orders_free(struct recon_orders *b)
{
	free(b->v);
	b->v = NULL;
	b->n = b->cap = 0;
}
