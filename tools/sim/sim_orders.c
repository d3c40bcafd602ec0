/*
 * sim_orders - the merchant's side of the database: creating orders as an order service
 * does (PENDING, an exact DECIMAL amount and a currency), closing the ones a user abandons,
 * and watching orders turn PAID to time acknowledgement -> PAID.
 *
 * The poller reads only the order ids whose payment was acknowledged and that it has not
 * yet seen PAID (their range once they are more than one list), by primary key, every
 * SIM_POLL_MS: its resolution bounds the end-to-end figures from above by that much (see
 * docs/simulator.md).
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "money.h"
#include "outbox.h"
#include "sim.h"

#define SIM_ORDER_BATCH 500
#define SIM_POLL_MS     10

static const char *SQL_ORDER =
    "INSERT INTO orders (merchant_id, out_trade_no, amount, currency) VALUES (?, ?, ?, ?)";
static const char *SQL_CLOSE =
    "UPDATE orders SET status = 'CLOSED' WHERE id = ? AND status = 'PENDING'";
/*
 * The orders to look at by their ids when they fit one list, not as the range between the
 * lowest and the highest: payments are sent in random order, so that range spans most of
 * the orders in flight and, once they are a few hundred, every poll reads thousands of rows
 * (about 50-100 per payment at half of `make bench`'s maximum, 320 at the maximum), which
 * MariaDB's figures then charge to the pipeline. Past one list (a backlog) the range is one
 * statement where lists would be many.
 */
static const char SQL_PAID_IDS[] =
    "SELECT id FROM orders WHERE id IN (" OUTBOX_ID_PLACES ") AND status = 'PAID'";
static const char SQL_PAID_WINDOW[] =
    "SELECT id FROM orders WHERE id BETWEEN ? AND ? AND status = 'PAID'";

int
sim_orders_create(struct db *db, struct sim_plan *p, const struct sim_merchant *m, char *err,
                  size_t errlen)
{
	int in_tx = 0, rc = -1;
	enum db_rc r = DB_OK;

	for (int i = 0; i < p->ncases; i++) {
		struct sim_case *c = &p->cases[i];
		char amount[32];
		unsigned long long id = 0;

		if (c->kind == K_NO_ORDER)
			continue;
		if (!in_tx) {
			if ((r = db_begin(db)) != DB_OK)
				goto done;
			in_tx = 1;
		}
		if (money_format(c->amount, 2, amount, sizeof(amount)) != 0)
			goto done;
		struct db_in in[4] = {DBI_STR(m[c->merchant].id), DBI_STR(c->order),
		                      DBI_STR(amount), DBI_STR(c->currency)};
		if ((r = db_exec(db, SQL_ORDER, in, 4, NULL, &id)) != DB_OK)
			goto done;
		c->order_id = id;
		if (i % SIM_ORDER_BATCH == SIM_ORDER_BATCH - 1) {
			if ((r = db_commit(db)) != DB_OK)
				goto done;
			in_tx = 0;
		}
	}
	if (in_tx && (r = db_commit(db)) != DB_OK)
		goto done;
	in_tx = 0;
	/* The user walked away: the order service closes the order before any payment. */
	for (int i = 0; i < p->ncases; i++) {
		struct db_in in[1] = {DBI_I64(p->cases[i].order_id)};

		if (sim_kind_closed(p->cases[i].kind) &&
		    (r = db_exec(db, SQL_CLOSE, in, 1, NULL, NULL)) != DB_OK)
			goto done;
	}
	rc = 0;
done:
	if (rc != 0) {
		snprintf(err, errlen, "creating orders: %s",
		         r != DB_OK ? db->last_error : "cannot format an amount");
		if (in_tx)
			db_rollback(db);
	}
	return rc;
}

/* ---- the poller ---------------------------------------------------------------------- */

struct sim_poller {
	struct db db;
	struct sim_plan *p;
	struct sim_stats *st;
	unsigned long long *ids; /* order ids of the timed cases, ascending */
	int *cases;
	int n;
	atomic_int stop;
	pthread_t thread;
};

static int
find_case(const struct sim_poller *pl, unsigned long long id)
{
	int lo = 0, hi = pl->n - 1;

	while (lo <= hi) {
		int mid = lo + (hi - lo) / 2;

		if (pl->ids[mid] == id)
			return pl->cases[mid];
		if (pl->ids[mid] < id)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static int
on_paid(void *arg, struct db_out *out)
{
	struct sim_poller *pl = arg;
	int ci = find_case(pl, (unsigned long long)out[0].i);
	struct sim_case *c;
	long long ack, now = clock_mono_us();

	if (ci < 0)
		return 0;
	c = &pl->p->cases[ci];
	if (c->paid_us == 0 && (ack = atomic_load(&c->ack_us)) != 0) {
		c->paid_us = now;
		sim_lat_add(&pl->st->e2e, now - ack);
		atomic_fetch_add(&pl->st->paid_seen, 1);
	}
	return 0;
}

/*
 * poll_tick - one statement over the acknowledged orders not yet seen PAID: their ids when
 * they fit one list, else the range from the lowest to the highest. A failed poll is retried
 * on the next tick; db reconnects by itself.
 */
static void
poll_tick(struct sim_poller *pl)
{
	unsigned long long ids[OUTBOX_MARK_IDS], lo = 0, hi = 0, rows = 0;
	struct db_in in[OUTBOX_MARK_IDS];
	struct db_out out[1] = {DBO_I64()};
	int n = 0;

	for (int k = 0; k < pl->n; k++) {
		const struct sim_case *c = &pl->p->cases[pl->cases[k]];

		if (c->paid_us != 0 || atomic_load(&c->ack_us) == 0)
			continue;
		if (n < OUTBOX_MARK_IDS)
			ids[n] = pl->ids[k];
		n++;
		lo = lo ? lo : pl->ids[k];
		hi = pl->ids[k];
	}
	if (n == 0)
		return;
	if (n > OUTBOX_MARK_IDS) {
		in[0] = DBI_I64(lo);
		in[1] = DBI_I64(hi);
		db_query(&pl->db, SQL_PAID_WINDOW, in, 2, out, 1, on_paid, pl, &rows);
		return;
	}
	for (int k = 0; k < OUTBOX_MARK_IDS; k++)
		in[k] = DBI_I64(ids[k < n ? k : 0]);
	db_query(&pl->db, SQL_PAID_IDS, in, OUTBOX_MARK_IDS, out, 1, on_paid, pl, &rows);
}

static void *
poller(void *arg)
{
	struct sim_poller *pl = arg;

	while (!atomic_load(&pl->stop)) {
		poll_tick(pl);
		struct timespec ts = {0, SIM_POLL_MS * 1000000L};
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static int
cmp_pair(const void *a, const void *b)
{
	const unsigned long long *x = a, *y = b;

	return x[0] < y[0] ? -1 : x[0] > y[0];
}

int
sim_poller_start(struct sim_poller **out, const struct conf_db *cf, struct sim_plan *p,
                 struct sim_stats *st, char *err, size_t errlen)
{
	struct sim_poller *pl = calloc(1, sizeof(*pl));
	unsigned long long *pairs = NULL;
	int rc = -1, n = 0;

	*out = NULL;
	if (pl == NULL || (pairs = calloc((size_t)p->ncases * 2 + 2, sizeof(*pairs))) == NULL ||
	    (pl->ids = calloc((size_t)p->ncases + 1, sizeof(*pl->ids))) == NULL ||
	    (pl->cases = calloc((size_t)p->ncases + 1, sizeof(int))) == NULL)
		goto done;
	for (int i = 0; i < p->ncases; i++) {
		if (!p->cases[i].measure_e2e || p->cases[i].order_id == 0)
			continue;
		pairs[2 * n] = p->cases[i].order_id;
		pairs[2 * n + 1] = (unsigned long long)i;
		n++;
	}
	qsort(pairs, (size_t)n, 2 * sizeof(*pairs), cmp_pair);
	for (int k = 0; k < n; k++) {
		pl->ids[k] = pairs[2 * k];
		pl->cases[k] = (int)pairs[2 * k + 1];
	}
	pl->n = n;
	pl->p = p;
	pl->st = st;
	st->paid_expected = n;
	if (db_open(&pl->db, cf) != DB_OK) {
		snprintf(err, errlen, "poller: %s", pl->db.last_error);
		goto done;
	}
	if (pthread_create(&pl->thread, NULL, poller, pl) != 0) {
		db_close(&pl->db);
		goto done;
	}
	rc = 0;
done:
	free(pairs);
	if (rc != 0) {
		if (pl != NULL) {
			free(pl->ids);
			free(pl->cases);
			free(pl);
		}
		if (err[0] == '\0')
			snprintf(err, errlen, "cannot start the poller");
		return -1;
	}
	*out = pl;
	return 0;
}

void
sim_poller_stop(struct sim_poller *pl)
{
	if (pl == NULL)
		return;
	atomic_store(&pl->stop, 1);
	pthread_join(pl->thread, NULL);
	db_close(&pl->db);
	free(pl->ids);
	free(pl->cases);
	free(pl);
}
