/*
 * reconciler - paycb's outbound side (docs/reconciler.md): submits the refunds paycb decided
 * exactly once, recovers payments whose notification never came by querying the channels,
 * and closes at the channels the orders a merchant closed.
 *
 * Every job is claimed by one conditional UPDATE judged by affected rows, as the retrier's
 * leases are, so any number of reconcilers may run. A call that may have taken effect at a
 * channel (an UNKNOWN or FORGED answer to a refund, a crash after sending) is resolved by a
 * query, never by sending a new request: refund_requests.sent_at marks a request that may
 * have left, and the idempotency key (out_refund_no "rr<id>") never changes.
 *
 * Modules: reconciler_daemon.c (state, cycle, daemon callbacks), reconciler_clients.c (one
 * channel client per merchant and channel, from the configuration), reconciler_refund.c
 * (refund jobs), reconciler_query.c (reconciliation of PENDING orders), reconciler_close.c
 * (closes at the channels), reconciler_util.c (ladder, alerts, amounts), reconciler_metrics.c
 * (the metrics every module updates).
 */
#ifndef PAYCB_RECONCILER_H
#define PAYCB_RECONCILER_H

#include <stdatomic.h>
#include <stdint.h>

#include "chan_client.h"
#include "conf.h"
#include "db.h"
#include "kq.h"

#define RECON_NCH 3 /* indexes: enum chan_id - 1 */
#define RECON_NEP 4 /* endpoints: query payment, refund, query refund, close */

enum recon_ep { EP_QUERY = 0, EP_REFUND, EP_QUERY_REFUND, EP_CLOSE };

/* One merchant's channel clients and the keys they borrow. */
struct recon_merchant {
	const struct conf_merchant *cm;
	struct chan_client *cl[RECON_NCH]; /* NULL: no API credentials for that channel */
	EVP_PKEY *wx_key, *ali_key;
	struct chan_pubkey wx_platform[8];
	char wx_serials[8][80];
	int nwx_platform;
	EVP_PKEY *ali_pub[8];
	int nali_pub;
	char *stripe_key;
};

/* What one cycle did. */
struct recon_counts {
	long long refunds_due, refunds_leased, refunds_lost_race;
	long long submitted, done, failed, retried, unknown, stuck_alerts;
	long long orders_queried, recovered, closes, closed;
};

struct admin;

struct reconciler {
	const struct conf *cf;
	struct db db;
	struct kq_producer *kp;
	struct admin *admin;
	char topic_main[256];
	struct recon_merchant *m;
	int nm;
	struct conf *keys_cf; /* the reloaded file m points into (SIGHUP); NULL = cf's */
	long long next_cycle_ms;
	atomic_int ready;
	struct recon_counts last;
};

/* The metrics every module updates (reconciler_metrics.c). */
struct recon_metrics {
	struct metric *calls[RECON_NCH][RECON_NEP][5]; /* by enum chan_outcome */
	struct metric *latency[RECON_NCH][RECON_NEP];
	struct metric *refunds[4]; /* gauges: REQUESTED, SUBMITTED, DONE, FAILED */
	struct metric *stuck;      /* gauge: unsettled requests past the ladder (refund_stuck) */
	struct metric *transitions[4];
	struct metric *recovered;
	struct metric *closed;
	struct metric *forged;
	struct metric *cycle_errors;
	struct metric *cycle_us;
};
extern struct recon_metrics recon_mx;

/* reconciler_metrics.c */
void recon_metrics_init(void);
/* Counts a call's outcome and latency (us) in the metrics. */
void recon_count_call(enum chan_id ch, enum recon_ep ep, const struct chan_result *res,
                      long long us);

/* reconciler_daemon.c */
int recon_daemon_init(const struct conf *cf, void **state);
int recon_daemon_loop(void *state, long long *wait_ms);
int recon_daemon_drain(void *state);
int recon_daemon_reload(void *state, struct conf *nc, char *err, size_t errlen);

/* reconciler_clients.c */
int recon_clients_open(struct reconciler *r, char *err, size_t errlen);
void recon_clients_close(struct reconciler *r);
/* The merchant whose id is given; NULL when the configuration has none. */
struct recon_merchant *recon_merchant_find(struct reconciler *r, const char *merchant);
/* The client of merchant id on the channel named ("wxpay", ...); NULL when none. */
struct chan_client *recon_client(struct reconciler *r, const char *merchant, const char *channel);

/* An order the query and close jobs work: its step and the recon_next_at they lease it by. */
struct recon_order {
	long long id, step;
	char merchant[65], order[129], next[32];
	int next_null;
};

/* The due orders of one cycle, at most reconciler.batch. */
struct recon_orders {
	struct recon_order *v;
	int n, cap;
};

/* reconciler_util.c */
/*
 * Runs sql, which selects (id, merchant_id, out_trade_no, recon_step, recon_next_at as text)
 * with in bound, into a batch the caller frees with recon_orders_free(). *full says the batch
 * was filled, so more may be due. Returns 0, or -1 when out of memory or on a database error.
 */
int recon_orders_select(struct reconciler *r, const char *sql, const struct db_in *in, int nin,
                        struct recon_orders *b, int *full);
void recon_orders_free(struct recon_orders *b);
/* Delay after failure k (1-based) on reconciler.refund_ladder_s, the last step repeating. */
long long recon_ladder_delay(const struct conf *cf, long long failures);
int recon_ladder_steps(const struct conf *cf);
/* INSERT INTO alerts (in the caller's transaction, if any). */
enum db_rc recon_alert(struct reconciler *r, const char *kind, const char *merchant,
                       const char *order, const char *detail);

/*
 * What makes each kind of job due, shared by its sweep's query and the probe (with the same
 * parameters: refunds reconciler.refund_approval; queries the number of query steps and the
 * first step's delay; closes none).
 */
#define RECON_REFUND_DUE                                                                           \
	"status IN ('REQUESTED', 'SUBMITTED') AND next_attempt_at <= NOW(3) AND (? = 0 OR "        \
	"status = 'SUBMITTED' OR approved_at IS NOT NULL)"
#define RECON_QUERY_DUE                                                                            \
	"status = 'PENDING' AND recon_step < ? AND (recon_next_at <= NOW(3) OR (recon_next_at "    \
	"IS NULL AND created_at <= NOW(3) - INTERVAL ? SECOND))"
#define RECON_CLOSE_DUE                                                                            \
	"status = 'CLOSED' AND close_requested_at IS NOT NULL AND channel_closed_at IS NULL AND "  \
	"(recon_next_at IS NULL OR recon_next_at <= NOW(3))"

/* reconciler_refund.c: claims and works the due refund requests. */
int recon_refunds(struct reconciler *r, struct recon_counts *c, int *full);

/* reconciler_probe.c: which kinds of job are due, and the refund gauges, in one statement. */
struct recon_probe {
	int refunds, queries, closes;
};
/* Runs the probe, fills *p and sets the refunds-by-state gauges; 0, or -1. */
int recon_probe(struct reconciler *r, struct recon_probe *p);

/* reconciler_query.c: queries PENDING orders at their channels; reserves paid answers. */
int recon_queries(struct reconciler *r, struct recon_counts *c, int *full);

/* reconciler_close.c: closes at the channels the orders the merchant closed. */
int recon_closes(struct reconciler *r, struct recon_counts *c, int *full);

#endif
