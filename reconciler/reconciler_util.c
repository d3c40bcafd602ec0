/*
 * reconciler_util - what the reconciler's jobs share: the backoff ladder of
 * reconciler.refund_ladder_s and the alerts rows.
 */
#include <stdio.h>

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
