/*
 * sim_api - what the two halves of `paycb-sim api` share: the ledger of orders and refunds,
 * the fault counters and the request being assembled. sim_api.c serves the WeChat Pay calls
 * and runs the server; sim_api_ledger.c holds the state and answers the control requests.
 * Only those two files include this header.
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

/* The whole state of the simulated channel, under mu. */
struct sim_api_state {
	pthread_mutex_t mu;
	struct conf cf;
	struct sim_merchant *m;
	int nm;
	EVP_PKEY **api_key; /* per merchant: the merchant API key (its public half verifies) */
	EVP_PKEY *stranger;
	struct api_order *o;
	int no, ocap;
	long long seq;
	/* Faults: requests left to which each applies. */
	long long drop, e5xx, e429, slow, forge, refund_final, slow_ms;
	long long requests, bad_sig, refunds_applied, refund_posts, queries;
};
extern struct sim_api_state sim_api;

/* Queues an answer with status, body (JSON when not empty) and hdrs (name, value, ..., NULL). */
enum MHD_Result sim_api_answer(struct MHD_Connection *c, unsigned status, const char *body,
                               const char *const *hdrs);
/* Consumes one application of a fault counter (under the lock): 1 when it applied. */
int sim_api_take(long long *n);
/* The ledger entry of merchant mi's order otn, or NULL (under the lock). */
struct api_order *sim_api_find_order(int mi, const char *otn);
/* The refund out_refund_no orn of merchant mi and, in *op, its order; NULL when none. */
struct api_refund *sim_api_find_refund(int mi, const char *orn, struct api_order **op);
/* The control side under /_sim/: registers orders, sets faults, shows the ledger and counters. */
enum MHD_Result sim_api_control(struct MHD_Connection *c, const char *method,
                                const struct api_req *r);

#endif
