/*
 * reconciler_probe - one statement that says which kinds of job a cycle has (refunds,
 * payment queries, closes) and carries the refunds-by-state gauges.
 *
 * An idle reconciler used to run five statements every reconciler.sweep_interval_s: each
 * kind's query, whether or not anything was due, and two gauge counts. The probe asks all of
 * it at once, as one prepared UNION ALL, with each kind's own condition (RECON_*_DUE in
 * reconciler.h, the same text its sweep's query uses, on the same indexes), so only the
 * kinds with due jobs are queried, and a job due when the cycle starts is handled by that
 * cycle, as before. The gauges are read when the cycle starts; a cycle that did work reads
 * them again at its end (reconciler_daemon.c).
 */
#include <string.h>

#include "log.h"
#include "metrics.h"
#include "reconciler.h"

/*
 * Columns: kind, state, count. Kind 0: the refunds of one state (read from idx_due alone);
 * 1-3: whether refunds, queries or closes are due; 4: unsettled refunds past the ladder,
 * which raised their refund_stuck alert.
 */
static const char *const sql_probe =
    "SELECT 0, status, COUNT(*) FROM refund_requests GROUP BY status UNION ALL SELECT 1, '', "
    "EXISTS (SELECT 1 FROM refund_requests WHERE " RECON_REFUND_DUE
    ") UNION ALL SELECT 2, '', EXISTS (SELECT 1 FROM orders WHERE " RECON_QUERY_DUE
    ") UNION ALL SELECT 3, '', EXISTS (SELECT 1 FROM orders WHERE " RECON_CLOSE_DUE
    ") UNION ALL SELECT 4, '', COUNT(*) FROM refund_requests WHERE status IN ('REQUESTED', "
    "'SUBMITTED') AND alerted_at IS NOT NULL";

struct probe_arg {
	struct recon_probe *p;
	long long refunds[4], stuck;
};

static int
probe_row(void *arg, struct db_out *o)
{
	static const char *const names[4] = {"REQUESTED", "SUBMITTED", "DONE", "FAILED"};
	struct probe_arg *a = arg;

	switch (o[0].i) {
	case 0:
		for (int k = 0; k < 4; k++)
			if (strcmp(o[1].buf, names[k]) == 0)
				a->refunds[k] = o[2].i;
		break;
	case 1:
		a->p->refunds = o[2].i != 0;
		break;
	case 2:
		a->p->queries = o[2].i != 0;
		break;
	case 3:
		a->p->closes = o[2].i != 0;
		break;
	case 4:
		a->stuck = o[2].i;
		break;
	default:
		break;
	}
	return 0;
}

int
recon_probe(struct reconciler *r, struct recon_probe *p)
{
	const struct cfg_ints *steps = &r->cf->reconciler.query_steps_s;
	struct db_in in[3] = {DBI_I64(r->cf->reconciler.refund_approval), DBI_I64(steps->n),
	                      DBI_I64(steps->v[0])};
	char st[16];
	struct db_out out[3] = {DBO_I64(), DBO_STR(st, sizeof(st)), DBO_I64()};
	struct probe_arg a;

	memset(p, 0, sizeof(*p));
	memset(&a, 0, sizeof(a));
	a.p = p;
	if (db_query(&r->db, sql_probe, in, 3, out, 3, probe_row, &a, NULL) != DB_OK) {
		log_warn(NULL, "event=probe_failed error=\"%s\"", r->db.last_error);
		return -1;
	}
	for (int k = 0; k < 4; k++)
		metrics_set(recon_mx.refunds[k], a.refunds[k]);
	metrics_set(recon_mx.stuck, a.stuck);
	return 0;
}
