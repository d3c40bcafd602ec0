/*
 * conf - paycb's one configuration file: the struct every program reads and the table
 * that validates it. One file serves all processes; each section belongs to one program, and
 * file checks (secrets, keys) apply to the programs that use them.
 */
#ifndef PAYCB_CONF_H
#define PAYCB_CONF_H

#include <stddef.h>

#include "cfg.h"

/* Program masks for cfg_load(). */
#define PROG_INGEST     0x01
#define PROG_PROCESSOR  0x02
#define PROG_RETRIER    0x04
#define PROG_TOOL       0x08
#define PROG_SIM        0x10
#define PROG_RECONCILER 0x20

struct conf_db {
	char *host;
	long long port;
	char *socket; /* a Unix socket path; "" connects over TCP to host:port */
	char *user;
	char *password_file;
	char *name;
	long long connect_timeout_s, read_timeout_s, write_timeout_s, lock_wait_timeout_s;
	char *ssl_ca, *ssl_cert, *ssl_key;
	int ssl_verify_server_cert;
};

struct conf_kafka {
	char *brokers;
	char *topic_prefix;
	long long partitions;
	long long retry_partitions;
	char *security_protocol;
	char *sasl_mechanism, *sasl_username, *sasl_password_file, *ssl_ca_file;
	char *group_id;
	long long delivery_timeout_ms;
	long long producer_sleep_s;
};

struct conf_retry {
	struct cfg_ints ladder_s;
	long long initial_lease_s;
	long long lease_margin_s;
	long long initial_lease_max_s;
};

struct conf_ingest {
	char *listen_addr;
	long long listen_port;
	char *admin_addr;
	long long admin_port;
	long long max_body_bytes;
	long long max_inflight, max_unverified, workers;
	long long connection_timeout_s;
	long long max_readers, request_timeout_s, per_ip_connections;
	long long connection_memory_bytes;
	long long publish_budget_ms;
	long long timestamp_tolerance_s;
	long long db_connections;
};

struct conf_processor {
	long long threads;
	char *admin_addr;
	long long admin_port;
	long long db_outage_max_s;
	long long order_wait_s;
	long long relay_linger_ms;
};

struct conf_retrier {
	long long sweep_interval_s, batch;
	char *admin_addr;
	long long admin_port;
	long long outbox_after_s;
	long long purge_after_s, purge_batch;
	long long stuck_after_s;
	long long max_republish;
	long long lag_interval_s;
};

struct conf_reconciler {
	long long sweep_interval_s, batch;
	char *admin_addr;
	long long admin_port;
	int refund_approval;
	struct cfg_ints refund_ladder_s;
	long long lease_s;
	struct cfg_ints query_steps_s;
	long long connect_timeout_ms, total_timeout_ms;
	char *ca_file, *proxy;
	int allow_http;
	long long rate_per_s;
};

/*
 * One channel's merchant settings, as the channel declares them (chan/): the group of that
 * name in a merchant, its settings table, the size of the struct the table fills, and the
 * channel's own cross-setting checks. The configuration knows no channel by name; a program
 * hands it the channels it links (conf_channels) before it loads a file, so every program
 * validates the whole file.
 */
struct conf_chan_decl {
	const char *name; /* the group in a merchant: "wxpay" */
	const char *doc;  /* its line in docs/config.md */
	const struct cfg_setting *tab;
	size_t size; /* of the struct tab describes; at most CONF_CHAN_BYTES */
	/* A merchant's settings of this channel taken together: 0, or -1 with err the whole
	 * message ("merchant 'm1': ..."). NULL = none. */
	int (*check)(const void *conf, const char *merchant, char *err, size_t errlen);
	/* Whether the secret files of these settings that program mask prog reads are private
	 * (cfg_secret_file_ok): 0, or -1 with err naming the file. NULL = none. */
	int (*check_secrets)(const void *conf, unsigned prog, char *err, size_t errlen);
};

#define CONF_CHANNELS_MAX 8
#define CONF_CHAN_BYTES   1024

/* A merchant's settings of one channel, in the slot of its place in conf_channels' list. */
struct conf_chan {
	int has; /* the merchant has the channel's group */
	_Alignas(max_align_t) unsigned char conf[CONF_CHAN_BYTES]; /* the channel's struct */
};

struct conf_merchant {
	char *id;
	struct conf_chan chan[CONF_CHANNELS_MAX];
};

struct conf {
	char *log_level;
	char *admin_token_file; /* "" = the admin listeners ask for no token */
	struct conf_db db;
	struct conf_kafka kafka;
	struct conf_retry retry;
	struct conf_ingest ingest;
	struct conf_processor processor;
	struct conf_retrier retrier;
	struct conf_reconciler reconciler;
	struct conf_merchant *merchants;
	int nmerchants;
};

extern const struct cfg_setting conf_table[];

/*
 * The channels whose merchant groups the configuration takes, in the order of their slots in
 * conf_merchant.chan (chan_conf_use in chan/ passes every channel the program links). Called
 * once, before the first conf_load; 0, or -1 when there are more than CONF_CHANNELS_MAX or a
 * channel's struct is larger than CONF_CHAN_BYTES.
 */
int conf_channels(const struct conf_chan_decl *const *decls, int n);

/*
 * Loads and validates file for program prog, including the cross-setting checks. On error
 * returns the number of errors with the messages in errs.
 */
int conf_load(const char *file, unsigned prog, struct conf *out, struct cfg_errors *errs);
/*
 * The tools' configuration bootstrap (conf_boot.c). conf_default_file is the file read when
 * none is named: $PAYCB_CONF, or /etc/paycb/paycb.conf. conf_bootstrap loads file for the
 * program mask prog into cf; on errors it prints "name: configuration
 * errors:" and each error on its own line (naming the file and the line), frees cf and returns
 * CFG_EX_CONFIG (78, as the daemons exit); it returns 0 when cf is loaded.
 */
const char *conf_default_file(void);
int conf_bootstrap(const char *file, unsigned prog, struct conf *cf, const char *name);
/*
 * Checks that every secret file the program mask prog reads (database and SASL passwords, the
 * admin token, and each channel's, by its check_secrets: for ingest the APIv3 keys and Stripe
 * secrets) is private to this user: 0 or -1 with err naming the file.
 */
int conf_check_secrets(const struct conf *c, unsigned prog, char *err, size_t errlen);
void conf_free(struct conf *c);
/*
 * Whether the setting at path ("merchants[0].stripe.secret_files", as cfg_diff names it) is
 * taken by program prog on a reload (SIGHUP); a changed setting that is not needs a restart.
 */
int conf_reloadable(const char *path, unsigned prog);
const struct conf_merchant *conf_merchant(const struct conf *c, const char *id);

/* Topic name for a suffix under the configured prefix ("callbacks" -> "paycb.callbacks"). */
void conf_topic(const struct conf *c, const char *suffix, char *buf, size_t len);

#endif
