/*
 * chan - test-side channel fixtures: merchant keys generated at test time, a paycb
 * configuration with merchants using them, a real paycb-ingest process, and notifications
 * signed exactly as WeChat Pay, Alipay and Stripe sign them (through chan_notify.h's
 * signing functions, so tests and the simulator exercise the production verifiers).
 */
#ifndef PAYCB_CHAN_H
#define PAYCB_CHAN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include <openssl/evp.h>

#include "conf.h"
#include "db.h"
#include "httpc.h"

struct chan_keys {
	EVP_PKEY *wx_cert_key, *wx_pub_key, *ali_key, *ali_key_old;
	char wx_serial[48];
	char wx_pubkey_id[64];
	uint8_t apiv3[33];
	const char *stripe_old, *stripe_new;
	char dir[64]; /* temp dir holding the key files and configs */
};

struct chan_note {
	char headers[2048];
	char *body;
	size_t len;
};

int chan_keys_new(struct chan_keys *k);
void chan_keys_free(struct chan_keys *k);
/*
 * Writes the key files and puts a "merchants = ( ... );" section naming them into buf: merchant
 * "default" with all three channels (two WeChat keys, two Alipay keys, two Stripe secrets)
 * and "shop2" (Stripe, the new secret only). Returns 0 or -1.
 */
int chan_merchants(const struct chan_keys *k, char *buf, size_t len);
/*
 * Writes a config for merchants "default" (all three channels; two WeChat keys, two Alipay
 * keys, two Stripe secrets) and "shop2" (Stripe, the new secret only), with cf's database
 * and topic prefix, the given brokers and ports, and extra appended inside ingest = { }.
 */
int chan_write_conf(const struct conf *cf, const struct chan_keys *k, const char *path,
                    const char *brokers, int port, int admin_port, const char *ingest_extra);
/* Starts bin/paycb-ingest with conf, stderr to log; waits for /healthz. -1 on failure. */
pid_t chan_spawn_ingest(const char *conf, const char *log, int admin_port);
/* SIGTERM and wait: the exit status (128+signal when killed). */
int chan_stop(pid_t pid);

int chan_wx_note(const struct chan_keys *k, struct chan_note *n, EVP_PKEY *key, const char *serial,
                 const char *event, const char *plain, time_t ts);
int chan_wx_pay(const struct chan_keys *k, struct chan_note *n, const char *order, const char *txn,
                long long fen, EVP_PKEY *key, const char *serial, time_t ts);
int chan_ali_note(struct chan_note *n, EVP_PKEY *key, const char *const *keys,
                  const char *const *values, size_t cnt);
int chan_ali_pay(struct chan_note *n, const char *order, const char *trade, const char *amount,
                 EVP_PKEY *key);
int chan_stripe_note(struct chan_note *n, const char *secret, const char *json, time_t t);
int chan_stripe_pay(struct chan_note *n, const char *secret, const char *order, const char *pi,
                    long long cents, time_t t);
int chan_post(int port, const char *path, const struct chan_note *n, struct httpc_resp *r);

/* COUNT(*) FROM <clause>, the clause built from test constants only; -1 on error. */
long long chan_rows(struct db *db, const char *clause);
/* The id of the row of table whose col equals val, 0 if none. */
unsigned long long chan_row_id(struct db *db, const char *table, const char *col, const char *val);

#endif
