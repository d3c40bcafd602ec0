/*
 * simapi - tests' side of `paycb-sim api` (the channels' API the reconciler calls: WeChat Pay,
 * Alipay and Stripe): start it, register orders in a channel's ledger, set faults and read the
 * ledger back. The ledger is the judge of what the channel did (how many refunds each order
 * got, how many refund POSTs). Channels are named as paycb names them: "wxpay", "alipay",
 * "stripe".
 */
#ifndef PAYCB_SIMAPI_H
#define PAYCB_SIMAPI_H

#include <jansson.h>

/*
 * Writes out: the configuration base (a file) with merchant as its only merchant, whose
 * channel keys are made under keys_dir/<merchant>/ and whose WeChat Pay, Alipay and Stripe
 * APIs are the simulator's on port (sim_mfiles_api), plus each of sets ("path=value").
 * Returns 0 or -1 with err.
 */
int simapi_conf(const char *base, const char *keys_dir, const char *merchant, int port,
                char *const *sets, int nsets, const char *out, char *err, size_t errlen);
/* Starts `bin/paycb-sim api -c conf --keys keys --port port`, output appended to log, and
 * waits until it answers. Returns the pid or -1. */
int simapi_start(const char *conf, const char *keys, int port, const char *log);
/* GET path; the answer's JSON in *out (the caller decrefs). Returns 0 on a 200. */
int simapi_get(int port, const char *path, json_t **out);
/* POST a form to path. Returns 0 on a 200. */
int simapi_post(int port, const char *path, const char *form);
/* An order of merchant at channel: state PAID or NOTPAY, amount in minor units, txn the
 * channel's id (for Stripe the PaymentIntent's, pi_...; made up when NULL). */
int simapi_order_at(int port, const char *channel, const char *merchant, const char *order,
                    long long minor, const char *currency, const char *state, const char *txn);
/* The same at WeChat Pay. */
int simapi_order(int port, const char *merchant, const char *order, long long minor,
                 const char *currency, const char *state, const char *txn);
/* The ledger of one order at channel: refunded total, number of refunds, refund POSTs; -1 if
 * the channel does not know the order. */
int simapi_ledger(int port, const char *channel, const char *merchant, const char *order,
                  long long *refunded, long long *nrefunds, long long *posts);
/* One counter of GET /_sim/stats, or -1. */
long long simapi_stat(int port, const char *key);

#endif
