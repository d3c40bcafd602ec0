/*
 * conf - paycb's one configuration file: the struct every program reads and the table
 * that validates it. One file serves all processes; each section belongs to one program, and
 * file checks (secrets, keys) apply to the programs that use them.
 */
#ifndef PAYCB_CONF_H
#define PAYCB_CONF_H

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
	char *security_protocol;
	char *sasl_mechanism, *sasl_username, *sasl_password_file, *ssl_ca_file;
	char *group_id;
	long long delivery_timeout_ms;
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

struct conf_wx_key {
	char *serial; /* optional for certificates (taken from the cert), required for keys */
	char *file;
};

struct conf_merchant {
	char *id;
	int has_wxpay, has_alipay, has_stripe;
	struct {
		char *mchid;
		char *sp_mchid;             /* "" = no partner mode */
		struct cfg_strs sub_mchids; /* partner mode: sub-merchants besides mchid */
		struct cfg_strs appids;     /* empty = app ids are not checked */
		char *apiv3_key_file;
		char *apiv3_previous_key_file; /* "" = no rotation in progress */
		struct conf_wx_key *keys;
		int nkeys;
		char *merchant_key_file; /* "" = the reconciler makes no WeChat Pay calls */
		char *merchant_serial;
		char *api_base_url;
	} wxpay;
	struct {
		char *app_id;
		char *seller_id; /* "" = not checked */
		struct cfg_strs public_key_files;
		char *app_private_key_file; /* "" = the reconciler makes no Alipay calls */
		char *api_base_url;
	} alipay;
	struct {
		struct cfg_strs secret_files;
		char *order_metadata_key;
		struct cfg_strs connect_accounts; /* Connect accounts whose events are applied */
		int test_mode;                    /* apply livemode:false events */
		char *api_key_file;               /* "" = the reconciler makes no Stripe calls */
		char *api_base_url;
	} stripe;
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
 * Checks that every secret file the program mask prog reads (database and SASL passwords; for
 * ingest the APIv3 keys and Stripe secrets) is private to this user: 0 or -1 with err naming
 * the file.
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
