/*
 * sim_api - what the parts of `paycb-sim api` share: the ledger of orders and refunds (one
 * per channel), the fault counters, the request being assembled and the call in progress.
 * sim_api.c runs the server (plain HTTP and HTTPS); sim_api_wx.c, sim_api_ali.c and
 * sim_api_stripe.c serve WeChat Pay APIv3, the Alipay OpenAPI gateway and the Stripe API;
 * sim_api_ledger.c holds the state and answers the control requests. Only those files
 * include this header.
 */
#ifndef PAYCB_SIM_API_H
#define PAYCB_SIM_API_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <microhttpd.h>
#include <openssl/evp.h>

#include "conf.h"
#include "sim.h"

struct api_refund {
	char out_refund_no[65], refund_id[40];
	int64_t amount;
	int success; /* 0 PROCESSING, 1 SUCCESS */
};

struct api_order {
	int ch; /* enum sim_ch: the channel the order was paid (or is payable) at */
	int mi; /* merchant index */
	char out_trade_no[129], txn[40], currency[4];
	int64_t amount, refunded;
	int state; /* 0 NOTPAY, 1 PAID, 2 CLOSED */
	struct api_refund *refunds;
	int nref;
	long long refund_posts, closes;
};

/* One request as it arrives: its URI, and its body once complete. */
struct api_req {
	int started;
	char *uri, *body;
	size_t len;
};

/* Faults of one channel: requests left to which each applies. */
struct api_faults {
	long long drop, e5xx, e429, slow, forge, refund_final;
};

/* A Stripe Idempotency-Key and the answer stored under it. */
struct api_idem {
	int mi;
	char key[256];
	char *request; /* "METHOD path\nbody": a replay must send the same */
	unsigned status;
	char *answer;
};

/* The whole state of the simulated channels, under mu. */
struct sim_api_state {
	pthread_mutex_t mu;
	struct conf cf;
	struct sim_merchant *m;
	int nm;
	EVP_PKEY **api_key; /* per merchant: the WeChat Pay merchant API key (public half used) */
	EVP_PKEY **ali_app; /* per merchant: the Alipay app key (public half used) */
	char **stripe_key;  /* per merchant: the Stripe secret key paycb must present */
	EVP_PKEY *stranger;
	struct api_order *o;
	int no, ocap;
	struct api_idem *idem;
	int nidem, idemcap;
	long long seq;
	struct api_faults f[SIM_NCH];
	long long slow_ms;
	long long requests, bad_sig, refunds_applied, refund_posts, queries, forged;
};
extern struct sim_api_state sim_api;

/* One channel call in progress: its merchant and the faults it drew. */
struct api_call {
	int ch, mi;
	int forged, slow, drop;
};

/* What sim_api_begin decided. */
enum api_fault { API_GO = 0, API_5XX, API_429 };

/*
 * Starts a call of channel k->ch for merchant k->mi: takes the lock and draws the call's
 * faults. API_GO: serve it (the lock is held; sim_api_end releases it). API_5XX or API_429:
 * answer that way (the lock is already released).
 */
enum api_fault sim_api_begin(struct api_call *k);
/* Releases the lock; a slow call then waits slow_ms unless its connection is to drop. */
void sim_api_end(const struct api_call *k);

/* Queues an answer with status, body (JSON when not empty) and hdrs (name, value, ..., NULL). */
enum MHD_Result sim_api_answer(struct MHD_Connection *c, unsigned status, const char *body,
                               const char *const *hdrs);
/* Consumes one application of a fault counter (under the lock): 1 when it applied. */
int sim_api_take(long long *n);
/* The ledger entry of merchant mi's order otn at channel ch, or NULL (under the lock). */
struct api_order *sim_api_find_order(int ch, int mi, const char *otn);
/* The order whose channel id (transaction_id, trade_no, PaymentIntent id) is txn, or NULL. */
struct api_order *sim_api_find_txn(int ch, int mi, const char *txn);
/* The refund orn (or, with by_id, the refund id orn) and, in *op, its order; NULL if none. */
struct api_refund *sim_api_find_refund(int ch, int mi, const char *orn, int by_id,
                                       struct api_order **op);
/*
 * Applies a new refund of amount to o (under the lock): counts it, gives it an id with the
 * channel's prefix, and draws the call's drop fault (k->drop: the answer never leaves).
 * Returns the refund, or NULL when out of memory.
 */
struct api_refund *sim_api_refund_apply(struct api_call *k, struct api_order *o, const char *orn,
                                        int64_t amount, const char *id_prefix);

/* The channels, each under its own URL prefix (/wx, /ali, /stripe). */
enum MHD_Result sim_api_wx(struct MHD_Connection *c, const char *method, struct api_req *r);
enum MHD_Result sim_api_ali(struct MHD_Connection *c, const char *method, struct api_req *r);
enum MHD_Result sim_api_stripe(struct MHD_Connection *c, const char *method, struct api_req *r);
/* The control side under /_sim/: registers orders, sets faults, shows the ledger and counters. */
enum MHD_Result sim_api_control(struct MHD_Connection *c, const char *method,
                                const struct api_req *r);
/* Frees the ledger and the stored idempotent answers. */
void sim_api_ledger_free(void);

#endif
