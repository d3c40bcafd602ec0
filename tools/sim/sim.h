/*
 * sim - private interfaces of paycb-sim, the payment-channel simulator.
 *
 * paycb-sim behaves toward paycb-ingest as WeChat Pay APIv3, Alipay and Stripe do: it holds
 * the channels' private keys, creates orders the way a merchant's order service does, signs
 * notifications with the channel library's signing functions (chan/chan_notify.h), and delivers
 * them at least once on each channel's (compressed) retry schedule, with lost acknowledgements,
 * duplicates, out-of-order delivery and many connections. It then checks the database
 * against what each scenario must produce.
 *
 * The tests link the support code they share with the simulator from its archive, each part
 * with a header of its own: sim_http.h (the HTTP client), sim_pki.h (certificates and PEM
 * text) and sim_conf_tree.h (writing configuration files); paycb-bench links sim_lat.h's
 * (latency percentiles and the report file) the same way.
 *
 * Modules: sim_keys.c (key generation), sim_pki.c (certificates and PEM text), sim_conf.c
 * (configuration writing, loading the merchants' keys), sim_conf_tree.c (configuration files
 * as libconfig trees), sim_http.c (the HTTP client), sim_notify.c (signed notifications),
 * sim_plan.c (scenarios), sim_plan_refunds.c (the refund and edge-state scenarios),
 * sim_plan_notes.c (the notifications and delivery chains both build cases from),
 * sim_expect.c (what each kind of case must produce), sim_deliver.c (the delivery engine),
 * sim_orders.c (orders and the paid-order poller), sim_check.c (the outcome checks),
 * sim_ledger.c (the channel API's ledger: registering payments, judging the reconciler's
 * refunds), sim_stats.c (counters, latencies, helpers), sim_run.c (`run`: the whole scenario and
 * its report). Shell helpers for starting a pipeline: pipeline.sh. The measurements of the
 * database and the processors are paycb-bench's (tools/bench/, docs/bench.md).
 */
#ifndef PAYCB_SIM_H
#define PAYCB_SIM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>
#include <time.h>

#include <openssl/evp.h>

#include "conf.h"
#include "crypto.h"
#include "db.h"
#include "sim_http.h"
#include "sim_lat.h"

/* Exit codes beyond the daemon ones (daemon.h): a checked expectation did not hold. */
#define SIM_EXIT_MISMATCH 1

#define SIM_PATH 512

enum sim_ch { SIM_WX = 0, SIM_ALI = 1, SIM_STRIPE = 2, SIM_NCH };
const char *sim_ch_name(enum sim_ch ch);

/* A small deterministic generator (xorshift64*), one per thread or per plan. */
uint64_t sim_rand(uint64_t *state);
/* Uniform in [0, n) for n > 0. */
uint64_t sim_rand_below(uint64_t *state, uint64_t n);

/* ---- sim_keys.c ------------------------------------------------------------------------ */

/* The files one merchant's keys were written to, as the configuration names them. */
struct sim_mfiles {
	char id[65];
	char mchid[16], app_id[20];
	char wx_cert[SIM_PATH], wx_pub[SIM_PATH], wx_pubkey_id[64], apiv3[SIM_PATH];
	char ali_pub[SIM_PATH];
	char stripe[2][SIM_PATH]; /* [0] the older secret, [1] the newer one */
	/* The merchant API key paycb signs its WeChat Pay calls with, and its serial. */
	char wx_merchant_key[SIM_PATH], wx_merchant_serial[48];
	/* When set, the WeChat Pay API base URL written into the configuration (the
	 * simulator's channel API, `paycb-sim api`). */
	char wx_api_base[SIM_PATH];
	/* The Alipay app key paycb signs its Alipay calls with, and the Stripe secret key it
	 * presents; the configuration names them (with the base URL) only when the matching
	 * ali_api_base or stripe_api_base is set, so no configuration calls the real channels. */
	char ali_app_key[SIM_PATH], stripe_api_key[SIM_PATH];
	char ali_api_base[SIM_PATH], stripe_api_base[SIM_PATH];
};

/*
 * Generates merchant id's keys under dir/id/: the WeChat Pay platform key and its
 * self-signed certificate, a PUB_KEY_ID_ public key, the APIv3 key, the Alipay key pair and
 * two Stripe endpoint secrets. Private keys and secrets are written 0600, public keys 0644.
 * index makes the mchid and app_id of several merchants differ. Returns 0 or -1 with err.
 */
int sim_keys_make(const char *dir, const char *id, int index, struct sim_mfiles *f, char *err,
                  size_t errlen);
/* The private-key file names under dir/id/ that sim_merchants_load reads. */
#define SIM_WX_CERT_KEY "wx_platform_key.pem"
#define SIM_WX_PUB_KEY  "wx_pubkey_key.pem"
#define SIM_ALI_KEY     "alipay_key.pem"
#define SIM_WX_MCH_KEY  "wx_merchant_key.pem"
#define SIM_ALI_APP_KEY "alipay_app_key.pem"

/* ---- sim_conf.c ------------------------------------------------------------------------ */

/*
 * Writes a complete paycb configuration to out: the base file's settings (database, kafka
 * and anything else it has; none when base is NULL), the merchants section for m[0..nm)
 * (the base's merchants are kept when m is NULL), then each "path=value" override in sets
 * (path like ingest.listen_port; value in libconfig syntax, or a bare string). The result is
 * validated as every program would load it. Returns 0 or -1 with err.
 */
int sim_conf_write(const char *base, const char *out, const struct sim_mfiles *m, int nm,
                   char *const *sets, int nsets, char *err, size_t errlen);
/*
 * Points the merchant's three channel API base URLs at a `paycb-sim api` listening at url
 * ("http://127.0.0.1:P" or "https://127.0.0.1:T"): url/wx, url/ali/gateway.do, url/stripe.
 * sim_conf_write then also names the Alipay app key and the Stripe secret key.
 */
void sim_mfiles_api(struct sim_mfiles *f, const char *url);

/* A merchant as the simulator sees it: the channels' private side. */
struct sim_merchant {
	const char *id; /* points into the configuration */
	char mchid[40], app_id[40], order_key[64];
	int has[SIM_NCH];
	EVP_PKEY *wx_cert_key, *wx_pub_key, *ali_key;
	char wx_serial[CRYPTO_SERIAL_MAX + 1], wx_pubkey_id[80];
	uint8_t apiv3[32];
	uint8_t *stripe[2];
	size_t stripe_len[2];
	int nstripe;
};

/*
 * Loads, for every merchant of cf, the private keys under keys_dir/<id>/ and the shared
 * secrets the configuration names, and checks that each private key belongs to a public key
 * ingest has. Returns 0 or -1 with err.
 */
int sim_merchants_load(const struct conf *cf, const char *keys_dir, struct sim_merchant **out,
                       int *n, char *err, size_t errlen);
void sim_merchants_free(struct sim_merchant *m, int n);

/* ---- sim_storm.c ----------------------------------------------------------------------- */

/* One storm copy: its connection, its request, when it is to go and what came back. */
struct sim_storm_req {
	struct sim_conn c;
	char head[2048];
	int hlen;
	const void *body;
	size_t blen;
	long long at_us; /* the monotonic instant to send */
	size_t sent, got;
	long long t_send;
	int done;
	struct sim_answer a;
};

/* Opens every copy's connection (one that fails keeps fd -1). */
void sim_storm_open(struct sim_storm_req *r, int n, const char *addr, int port, int timeout_ms);
/*
 * Sends every copy at its instant and reads the answers on one thread; done(arg, i) is called
 * once per copy, as soon as its answer is whole or it failed (a.status 0) or timed out.
 */
void sim_storm_run(struct sim_storm_req *r, int n, int timeout_ms, void (*done)(void *, int),
                   void *arg);

/* ---- sim_notify.c ---------------------------------------------------------------------- */

/* One signed rendition of a notification; several senders may hold it at once. */
struct sim_blob {
	atomic_int refs;
	char *body;
	size_t len;
	char headers[1400];
	time_t ts;
};

/* A refund's status at the channel. */
enum sim_rstatus {
	RS_SUCCESS = 0, /* WeChat SUCCESS, Stripe succeeded, Alipay's refund_fee */
	RS_ABNORMAL,    /* WeChat ABNORMAL: the money did not reach the buyer */
	RS_FAILED,      /* Stripe failed */
	RS_CANCELED     /* Stripe canceled */
};

/* One notification: what it says and how it is signed and sent. */
struct sim_note {
	int ccase;
	int merchant;
	enum sim_ch ch;
	int refund;
	char order[64], trade[64];
	char charge[64];          /* Stripe: the charge of the PaymentIntent */
	char refund_no[64];       /* refund: the merchant's number (out_refund_no, out_biz_no) */
	char refund_id[64];       /* refund: the channel's id (WeChat refund_id, Stripe re_) */
	int64_t amount;           /* payment: the amount paid; refund: this refund */
	int64_t cumulative;       /* refund: the refunded total after it */
	int64_t total;            /* refund: the order's amount */
	int full;                 /* refund: it completes the refund of the order */
	int seq;                  /* refund: 1, 2, ... within its order */
	int stripe_cumulative;    /* Stripe: charge.refunded rather than refund.created */
	int wx_pubkey;            /* WeChat: signed by the PUB_KEY_ID_ key rather than the cert's */
	int stripe_both;          /* Stripe: a v1 signature under both secrets, as during a roll */
	enum sim_rstatus rstatus; /* refund: the channel's status for it */
	const char *stripe_type;  /* Stripe refund: the event type (NULL: by the family) */
	int no_metadata;          /* Stripe: empty metadata, as a Dashboard refund has */
	char account[40];         /* Stripe: the Connect account the event comes from */
	int unroutable;           /* authentic, but ingest cannot route it: no callback row */
	char currency[4];
	char path[160];
	pthread_mutex_t mu;
	struct sim_blob *blob;
};

/* Signs n at time now into a new blob (replacing the old one). Returns 0 or -1. */
int sim_note_sign(const struct sim_merchant *m, struct sim_note *n, time_t now);
/*
 * The blob to send now, with a reference the caller drops with sim_blob_put. A WeChat
 * notification is signed again once its timestamp nears the tolerance, as a real re-push
 * would be; everything else is sent byte for byte as first signed.
 */
struct sim_blob *sim_note_get(const struct sim_merchant *m, struct sim_note *n, time_t now);
void sim_blob_put(struct sim_blob *b);
/* The per-send headers: a Stripe re-push is signed with the time it is sent. */
int sim_note_headers(const struct sim_merchant *m, const struct sim_note *n,
                     const struct sim_blob *b, time_t now, char *buf, size_t len);
/* Whether answer a is the channel's success answer. */
int sim_answer_ok(enum sim_ch ch, const struct sim_answer *a);

/* ---- sim_plan.c ------------------------------------------------------------------------ */

enum sim_kind {
	K_PAY = 0,      /* one payment */
	K_DUP,          /* one payment, with extra copies at random times */
	K_INCIDENT,     /* one payment pushed three times over a window */
	K_STORM,        /* one payment, many concurrent copies */
	K_AFTER_CLOSE,  /* paid after the merchant closed the order */
	K_PAID_TWICE,   /* two trades for one order */
	K_MISMATCH,     /* paid a different amount */
	K_REFUND_PF,    /* paid, refunded in part, then in full */
	K_REFUND_FIRST, /* the full refund arrives before the payment */
	K_NO_ORDER,     /* paid an order that does not exist */
	K_WX_ABNORMAL,  /* WeChat Pay: a refund ABNORMAL, then SUCCESS for the same refund_id */
	K_STRIPE_BOTH,  /* Stripe: refund.created and charge.refunded for the same money */
	K_REVERSED,     /* Stripe: a refund that fails after it succeeded */
	K_TWICE_REFUND, /* paid twice, and the second payment refunded (maybe before it came) */
	K_CLOSE_REFUND, /* paid after close, and that payment refunded (maybe before it came) */
	K_CLOSED_OTHER, /* paid another amount after the merchant closed the order */
	K_DASHBOARD,    /* Stripe: a Dashboard refund, without the order number in metadata */
	K_CONNECT,      /* Stripe: a Connect account's payment naming our order number */
	K_NKINDS
};
const char *sim_kind_name(enum sim_kind k);

struct sim_case {
	enum sim_kind kind;
	int merchant;
	enum sim_ch ch, ch2;
	char order[64];
	int64_t amount;
	char currency[4];
	char trade[64], trade2[64];
	unsigned long long order_id; /* 0 = no order row */
	int measure_e2e;             /* ack -> PAID is timed for this case */
	int e2e_note;                /* the payment whose acknowledgement starts the clock */
	atomic_llong ack_us;         /* the first success answer of its (first) payment */
	long long paid_us;           /* when the poller first saw it PAID */
	int full;                    /* the refund kinds: refunded in full, else in part */
	int64_t want_refunded;       /* the sum of its distinct refunds that moved money */
	int64_t rr_amount;           /* the refund request's amount (the payment to give back) */
	char rtrade[64];             /* the other payment whose refund happened, or "" */
	/* With --api (the channel API the reconciler calls, sim_ledger.c): */
	int dropped;    /* the channel never sends its payment: recovered by query */
	int api_ledger; /* its payment (the one to give back, if any) is in the API's ledger */
	int api_refund; /* the reconciler must refund its refund request at the channel */
};

/* How each delivery chain is released and how it stands. */
enum sim_dstate { D_WAIT = 0, D_QUEUED, D_BUSY, D_DONE, D_GAVE_UP, D_ABANDONED };

struct sim_delivery {
	int note;
	int attempt;        /* pushes so far */
	int lost_acks;      /* success answers still to drop (a lost acknowledgement) */
	long long start_us; /* offset from the start (after < 0) */
	int after;          /* released when that delivery is first answered success */
	long long after_us; /* ... this long after */
	int first_dep, next_dep;
	int burst; /* sent at once by a connection of its own (a storm copy) */
	long long due_us;
	uint64_t tie;
	enum sim_dstate state;
	int answered_ok;
};

struct sim_opts {
	const char *conf, *keys_dir, *scenario, *report;
	int orders, concurrency, copies;
	uint64_t seed;
	long long compress; /* channel seconds per simulated second */
	int wait_s, timeout_ms;
	int rate;          /* first pushes per second; 0 = as fast as the connections go */
	int lost_permille; /* payments whose first acknowledgement is lost */
	int dup_permille;  /* mixed: share of duplicated payments */
	int progress;
	int ingest_only;      /* expect only what ingest does (no processor running) */
	int max_mismatches;   /* printed; the rest are counted */
	const char *api;      /* the simulator's channel API (http://127.0.0.1:P), or NULL */
	int api_ch[SIM_NCH];  /* the channels that API serves (--api-channels) */
	int dropped_permille; /* payments on an API channel whose notification never leaves */
};

struct sim_plan {
	char run[16];
	struct sim_case *cases;
	int ncases;
	struct sim_note *notes;
	int nnotes, notes_cap;
	struct sim_delivery *dels;
	int ndels, dels_cap;
	int bursts;          /* deliveries with burst set */
	int ready;           /* built: the notes' locks exist */
	long long window_us; /* the incident window */
};

/* sim_plan_notes.c: a notification of case ci (refund: seq numbers it within the order);
 * returns its index or -1. */
int sim_plan_note(struct sim_plan *p, const struct sim_merchant *m, int ci, enum sim_ch ch,
                  const char *trade, int refund, int seq, uint64_t *rng);
/* A delivery chain of note, starting at start_us, or after_us after delivery after was
 * first answered success (after >= 0); returns its index or -1. */
int sim_plan_del(struct sim_plan *p, int note, long long start_us, int after, long long after_us,
                 int lost_acks, int burst, uint64_t *rng);
/* sim_plan_refunds.c: the notifications and chains of the refund and edge-state kinds. */
int sim_plan_refund_case(struct sim_plan *p, const struct sim_merchant *m, int ci, long long s,
                         int lost, uint64_t *rng);
/* The channel a kind needs (a WeChat Pay or Stripe behaviour), or -1 for any. */
int sim_kind_channel(enum sim_kind k);
/* Whether the merchant's order service closes the order before any payment. */
int sim_kind_closed(enum sim_kind k);

/* sim_plan.c: builds the plan of scenario o->scenario. Returns 0 or -1 with err. */
int sim_plan_build(struct sim_plan *p, const struct sim_merchant *m, int nm,
                   const struct sim_opts *o, char *err, size_t errlen);
void sim_plan_free(struct sim_plan *p);
/* The i-th name `run --scenario` accepts (for the usage text); NULL past the last. */
const char *sim_scenario_name(int i);

/* ---- sim_stats.c ----------------------------------------------------------------------- */

/* Latency samples, sim_fmt_us and sim_report_kv are in sim_lat.h (paycb-bench links them). */

#define SIM_STATUS_MAX 600

struct sim_stats {
	atomic_llong sent, ok, lost, failed, errors, gave_up, abandoned, resigned;
	atomic_llong status[SIM_NCH][SIM_STATUS_MAX]; /* [ch][0] = no answer */
	atomic_llong first_send_us, last_ok_us;
	struct sim_lat ack, e2e;
	atomic_int paid_seen;
	int paid_expected;
	long long deliver_cpu_ms; /* CPU from the engine's start until no chain was open */
};
void sim_stats_init(struct sim_stats *s);
void sim_stats_free(struct sim_stats *s);

/* ---- sim_deliver.c --------------------------------------------------------------------- */

struct sim_engine;

/*
 * Starts the delivery engine for plan p: o->concurrency keep-alive connections plus one per
 * storm copy. Returns 0 or -1 with err.
 */
int sim_engine_start(struct sim_engine **out, struct sim_plan *p, const struct sim_merchant *m,
                     const struct sim_opts *o, const char *addr, int port, struct sim_stats *st,
                     char *err, size_t errlen);
/* Deliveries not yet finished (done or given up). */
int sim_engine_pending(struct sim_engine *e);
/* Stops the workers; unfinished chains count as abandoned. */
void sim_engine_stop(struct sim_engine *e);

/* ---- sim_orders.c ---------------------------------------------------------------------- */

/* Creates the plan's orders (and closes the paid-after-close ones). Returns 0 or -1. */
int sim_orders_create(struct db *db, struct sim_plan *p, const struct sim_merchant *m, char *err,
                      size_t errlen);

struct sim_poller;
/* Polls orders every few milliseconds to time ack -> PAID. Returns 0 or -1 with err. */
int sim_poller_start(struct sim_poller **out, const struct conf_db *cf, struct sim_plan *p,
                     struct sim_stats *st, char *err, size_t errlen);
void sim_poller_stop(struct sim_poller *pl);

/* ---- sim_check.c ----------------------------------------------------------------------- */

/* What the database holds for one case. */
struct sim_seen {
	int order;
	char status[16];
	int64_t amount, refunded;
	char trade[128];
	int events;
	int ev_ship, ev_points, ev_refund, ev_reversed, ev_refunded;
	int64_t ev_refund_sum, ev_reversed_sum; /* the amounts of order.refund, _reversed */
	int rr, rr_match, rr_done, rr_requested;
	int rr_stale; /* REQUESTED, for the payment whose refund happened */
	int pay_rows, pay_done, pay_dead, pay_dlq, pay_mismatch;
	int pay_query; /* rows the reconciler reserved from a query (source 'query') */
	int ref_rows, ref_done, ref_dead, ref_abnormal;
	int unroutable, unroutable_match; /* kept by ingest; with the expected reason */
};

/* ---- sim_expect.c ---------------------------------------------------------------------- */

/* Appends one mismatch description to buf, "; "-separated. */
void sim_addf(char *buf, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* The order status case c must end in; full: with a processor (else only ingest ran). */
const char *sim_case_status(const struct sim_case *c, int full);
/* Callback rows the case's notifications leave (unroutable ones leave none). */
void sim_case_rows(const struct sim_case *c, int *pay_rows, int *ref_rows);
/* Whether ingest keeps one of the case's notifications as unroutable, and why. */
const char *sim_case_unroutable(const struct sim_case *c);
/* What the kind must produce, in a line, for the report. */
const char *sim_kind_expect(enum sim_kind k);
/* The mismatches of a case of the refund and edge-state kinds, appended to buf. */
void sim_judge_refund_kind(const struct sim_case *c, const struct sim_seen *s, int full, char *buf,
                           size_t len);

/* What the database holds for a run, tallied for the summary. */
struct sim_outcome {
	long long cases_ok, mismatches;
	long long paid, closed, refunded, pending_orders, no_order_rows;
	long long pay_rows, refund_rows, rows_pending, rows_dead, dlq_sent;
	long long events, refund_requests;
	long long refunding, rr_done, rr_stale, unroutable, refund_sums_off;
	long long no_order_pending;                      /* rows left for the ladder to finish */
	long long recovered, dropped, dropped_recovered; /* payments found by query */
	long long api_refunds, api_refunds_done;         /* requests the reconciler must refund */
	long long ledger_refunds, ledger_twice;          /* sim_ledger_check: the channel's view */
	long long kind_cases[K_NKINDS], kind_ok[K_NKINDS];
	int settled; /* every callback row is done or dead (or allowed to be pending) */
};

/*
 * sim_check.c: checks every case of p against the database. Mismatches are printed to out when it
 * is not NULL (at most o->max_mismatches of them). ladder_fits says whether the retry ladder ends
 * within the wait, so rows of orders that do not exist must be dead rather than pending.
 * Returns 0 or -1 when the database could not be read.
 */
int sim_check(struct db *db, const struct sim_plan *p, const struct sim_merchant *m, int nm,
              const struct sim_opts *o, int ladder_fits, struct sim_outcome *res, FILE *out);

/* ---- sim_ledger.c ---------------------------------------------------------------------- */

/* Parses --api-channels "wxpay,alipay" into o->api_ch. Returns 0 or -1. */
int sim_api_channels(struct sim_opts *o, const char *list);
/*
 * Registers in the channel API's ledger (POST /_sim/order) the payment of every case on a
 * channel the API serves, as the channel knows it: PAID, with its trade number and amount
 * (the payment paycb gives back, for the kinds that have one). Returns 0 or -1 with err.
 */
int sim_ledger_register(const struct sim_opts *o, const struct sim_plan *p,
                        const struct sim_merchant *m, char *err, size_t errlen);
/*
 * The ledger is the judge of the refunds the reconciler made: every refund request it must
 * refund was refunded exactly once, of the request's amount, and no payment was refunded
 * twice. Mismatches are counted in res and printed to out (when not NULL). 0 or -1.
 */
int sim_ledger_check(const struct sim_opts *o, const struct sim_plan *p,
                     const struct sim_merchant *m, struct sim_outcome *res, FILE *out);

/* ---- sim_run.c ------------------------------------------------------------------------- */

/* `paycb-sim run`: returns 0 when every expectation held, SIM_EXIT_MISMATCH when one did
 * not, or a daemon.h exit code. o->keys_dir may be set to its default. */
int sim_run(struct sim_opts *o);

/* ---- sim_junk.c ------------------------------------------------------------------------ */

/* `junk`, a flood of requests that are not notifications. */
int sim_junk_main(int argc, char **argv);

/* ---- sim_api.c -------------------------------------------------------------------------- */

/*
 * `paycb-sim api`: serves the WeChat Pay APIv3 calls paycb-reconciler makes (query an order,
 * refund, query a refund, close) on loopback HTTP, verifying every request's signature and
 * signing every answer, with one ledger per order and injectable faults (docs/simulator.md).
 */
int sim_api_main(int argc, char **argv);

#endif
