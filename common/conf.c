/*
 * conf - the settings table of paycb.conf (see conf.h and docs/config.md).
 *
 * Times carry their unit in the name (_s, _ms); sizes are bytes. Bounds are wide enough for
 * production and tight enough to catch a unit mistake.
 */
#include "conf.h"

#include <stdio.h>
#include <string.h>

/*
 * The tables below are data laid out by hand (one setting per entry, its documentation
 * beside it); clang-format would split every macro and entry, so it leaves them alone.
 */
/* clang-format off */
#define O(f)       offsetof(struct conf, f)
#define NOFLAG     ((size_t)-1)
/* Short names for cfg.h's entry macros, so each setting fits its line. */
#define INT  CFG_SET_INT
#define STR  CFG_SET_STR
#define BOOL CFG_SET_BOOL
#define END  CFG_SET_END

#define DB(f) offsetof(struct conf_db, f)
static const struct cfg_setting db_tab[] = {
	STR("host", "127.0.0.1", DB(host), CFGF_NONEMPTY, 0, "MariaDB/MySQL server address"),
	INT("port", "23306", 1, 65535, DB(port), "server port (the local default avoids 3306)"),
	STR("socket", "", DB(socket), 0, 0,
	    "Unix socket of a server on this host, used instead of host and port; empty = TCP"),
	STR("user", "paycb", DB(user), CFGF_NONEMPTY, 0, "database user"),
	STR("password_file", NULL, DB(password_file), CFGF_FILE,
	    PROG_INGEST | PROG_PROCESSOR | PROG_RETRIER | PROG_TOOL | PROG_SIM | PROG_RECONCILER,
	    "file holding the database password (never inline)"),
	STR("name", "paycb", DB(name), CFGF_NONEMPTY, 0, "database (schema) name"),
	INT("connect_timeout_s", "5", 1, 300, DB(connect_timeout_s), "connect timeout"),
	INT("read_timeout_s", "30", 1, 3600, DB(read_timeout_s), "read timeout per statement"),
	INT("write_timeout_s", "30", 1, 3600, DB(write_timeout_s), "write timeout per statement"),
	INT("lock_wait_timeout_s", "5", 1, 3600, DB(lock_wait_timeout_s),
	    "innodb_lock_wait_timeout for paycb's sessions; a timeout is a retryable failure"),
	STR("ssl_ca", "", DB(ssl_ca), CFGF_FILE, 0, "CA file; non-empty enables TLS"),
	STR("ssl_cert", "", DB(ssl_cert), CFGF_FILE, 0, "client certificate for TLS"),
	STR("ssl_key", "", DB(ssl_key), CFGF_FILE, 0, "client key for TLS"),
	BOOL("ssl_verify_server_cert", "true", DB(ssl_verify_server_cert),
	     "verify the server certificate and host name when TLS is on"),
	END};

#define KF(f) offsetof(struct conf_kafka, f)
static const struct cfg_setting kafka_tab[] = {
	STR("brokers", "127.0.0.1:29092", KF(brokers), CFGF_NONEMPTY, 0, "bootstrap servers"),
	STR("topic_prefix", "paycb", KF(topic_prefix), CFGF_NONEMPTY, 0,
	    "prefix of every topic name (paycb.callbacks, ...)"),
	INT("partitions", "12", 1, 1024, KF(partitions),
	    "partitions of the callbacks and order-events topics when paycb creates them"),
	INT("retry_partitions", "2", 1, 1024, KF(retry_partitions),
	    "partitions of each delay topic (callbacks.retry.<delay>s) when paycb creates them"),
	STR("security_protocol", "plaintext", KF(security_protocol), CFGF_NONEMPTY, 0,
	    "plaintext, ssl, sasl_plaintext or sasl_ssl"),
	STR("sasl_mechanism", "", KF(sasl_mechanism), 0, 0, "PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512"),
	STR("sasl_username", "", KF(sasl_username), 0, 0, "SASL user"),
	STR("sasl_password_file", "", KF(sasl_password_file), CFGF_FILE, 0,
	    "file holding the SASL password"),
	STR("ssl_ca_file", "", KF(ssl_ca_file), CFGF_FILE, 0, "CA file for ssl/sasl_ssl"),
	STR("group_id", "paycb-processor", KF(group_id), CFGF_NONEMPTY, 0,
	    "consumer group of the processors"),
	INT("delivery_timeout_ms", "30000", 1000, 600000, KF(delivery_timeout_ms),
	    "producer delivery timeout (message.timeout.ms)"),
	INT("producer_sleep_s", "10", 0, 86400, KF(producer_sleep_s),
	    "seconds without a message after which the processor's, retrier's and reconciler's "
	    "producers close their connections and threads until the next one (0: never); "
	    "ingest's stays open"),
	END};

#define RT(f) offsetof(struct conf_retry, f)
static const struct cfg_setting retry_tab[] = {
	{"ladder_s", CFG_INT_LIST, "10 30 60 300 900 1800 3600 7200", 1, 604800, RT(ladder_s),
	 CFGF_NONEMPTY, 0, NULL, 0, 0,
	 "delay after failure k (k = 1..n); failure n+1 makes the row dead"},
	INT("initial_lease_s", "60", 1, 86400, RT(initial_lease_s),
	    "ingest reserves a row due this far ahead; the retrier recovers a lost first attempt "
	    "after it"),
	INT("lease_margin_s", "30", 1, 86400, RT(lease_margin_s),
	    "added to a step's delay when the retrier leases a row"),
	INT("initial_lease_max_s", "900", 1, 86400, RT(initial_lease_max_s),
	    "a first attempt republished again and again without progress (processors down or "
	    "behind) is leased twice as long each time, up to this; at least initial_lease_s"),
	END};

#define IN(f) offsetof(struct conf_ingest, f)
static const struct cfg_setting ingest_tab[] = {
	STR("listen_addr", "127.0.0.1", IN(listen_addr), CFGF_NONEMPTY, 0,
	    "address of the channel-facing HTTP listener"),
	INT("listen_port", "8480", 1, 65535, IN(listen_port), "its port"),
	STR("admin_addr", "127.0.0.1", IN(admin_addr), CFGF_NONEMPTY, 0,
	    "address of /healthz, /readyz, /metrics"),
	INT("admin_port", "8481", 1, 65535, IN(admin_port), "its port"),
	INT("max_body_bytes", "65536", 1024, 1048576, IN(max_body_bytes),
	    "larger bodies get 413 without being read"),
	INT("max_inflight", "256", 1, 100000, IN(max_inflight),
	    "complete requests admitted at once, running or queued for a worker; beyond it 503 at "
	    "once. A request takes its slot when its body is complete and has passed the cheap "
	    "checks (headers, signature length, parameter count)"),
	INT("max_unverified", "64", 1, 100000, IN(max_unverified),
	    "admitted requests being verified at once; beyond it 503 at once. Junk that fails the "
	    "cheap checks takes no slot at all; junk shaped like a notification competes here"),
	INT("max_readers", "512", 1, 100000, IN(max_readers),
	    "requests whose body is still being read, at once; beyond it 503 at once (a slow "
	    "body holds a reader, never an in-flight slot)"),
	INT("request_timeout_s", "15", 1, 300, IN(request_timeout_s),
	    "whole-request deadline from the headers to the last body byte: a client still "
	    "sending after it is disconnected, however steadily it sends"),
	INT("per_ip_connections", "0", 0, 100000, IN(per_ip_connections),
	    "connections one client address may hold at once, for a listener reached directly; "
	    "0 = no limit (behind nginx every connection comes from nginx)"),
	INT("workers", "256", 1, 4096, IN(workers),
	    "threads that run requests (verify, reserve, publish); the connections themselves are "
	    "read by one event loop, and admitted requests beyond the workers wait in a queue"),
	INT("connection_timeout_s", "10", 1, 300, IN(connection_timeout_s),
	    "idle/read timeout against slow clients"),
	INT("connection_memory_bytes", "8192", 4096, 1048576, IN(connection_memory_bytes),
	    "memory per connection for the request line, the headers and the read buffer (a "
	    "header block that does not fit gets 431); bodies stream through it in pieces"),
	INT("publish_budget_ms", "2000", 10, 10000, IN(publish_budget_ms),
	    "wait this long for the delivery report before acknowledging anyway"),
	INT("timestamp_tolerance_s", "300", 1, 3600, IN(timestamp_tolerance_s),
	    "signed timestamps this far from now are rejected"),
	INT("db_connections", "16", 1, 512, IN(db_connections),
	    "database connections for reservations (requests beyond them wait, then get 503)"),
	END};

#define PR(f) offsetof(struct conf_processor, f)
static const struct cfg_setting processor_tab[] = {
	INT("threads", "1", 1, 64, PR(threads), "consumer threads per process"),
	STR("admin_addr", "127.0.0.1", PR(admin_addr), CFGF_NONEMPTY, 0, "address of /metrics"),
	INT("admin_port", "0", 0, 65535, PR(admin_port), "its port; 0 = no admin listener"),
	INT("db_outage_max_s", "300", 1, 86400, PR(db_outage_max_s),
	    "how long to wait for the database before draining and exiting non-zero"),
	INT("order_wait_s", "300", 0, 86400, PR(order_wait_s),
	    "how long a callback's first attempt is deferred, not failed, while an earlier "
	    "callback of its order is still pending (per-order order across partitions and "
	    "retries); 0 = off"),
	INT("relay_linger_ms", "50", 0, 1000, PR(relay_linger_ms),
	    "how long the outbox relay lets events gather before it publishes them; a publish "
	    "costs the broker a produce request per partition, more than the events in it"),
	END};

#define RR(f) offsetof(struct conf_retrier, f)
static const struct cfg_setting retrier_tab[] = {
	INT("sweep_interval_s", "5", 1, 3600, RR(sweep_interval_s), "time between sweeps"),
	INT("batch", "500", 1, 100000, RR(batch), "rows leased per sweep and table"),
	STR("admin_addr", "127.0.0.1", RR(admin_addr), CFGF_NONEMPTY, 0, "address of /metrics"),
	INT("admin_port", "8483", 0, 65535, RR(admin_port), "its port; 0 = no admin listener"),
	INT("outbox_after_s", "30", 1, 86400, RR(outbox_after_s),
	    "order_events rows unsent this long are published by the sweep"),
	INT("purge_after_s", "86400", 60, 31536000, RR(purge_after_s),
	    "raw_body of done rows older than this is cleared"),
	INT("purge_batch", "1000", 1, 100000, RR(purge_batch), "rows purged per statement"),
	INT("stuck_after_s", "3600", 10, 604800, RR(stuck_after_s),
	    "a pending row due this long raises the stuck-row alarm; a pending row created this "
	    "long ago raises the end-to-end alarm (old_pending), once per row, the threshold "
	    "raised to the ladder's total plus its leases and two sweeps when that is longer"),
	INT("max_republish", "5", 1, 100000, RR(max_republish),
	    "a row republished more often than this at one attempt without progress raises an "
	    "alert (republish_storm), once per attempt"),
	INT("lag_interval_s", "15", 0, 3600, RR(lag_interval_s),
	    "how often the retrier measures the processors' lag on the main and every delay "
	    "topic (paycb_consumer_*); 0 = off"),
	END};

#define RC(f) offsetof(struct conf_reconciler, f)
static const struct cfg_setting reconciler_tab[] = {
	INT("sweep_interval_s", "5", 1, 3600, RC(sweep_interval_s), "time between cycles"),
	INT("batch", "100", 1, 10000, RC(batch),
	    "jobs (refunds, orders to query or close) claimed per cycle and kind"),
	STR("admin_addr", "127.0.0.1", RC(admin_addr), CFGF_NONEMPTY, 0, "address of /metrics"),
	INT("admin_port", "8484", 0, 65535, RC(admin_port), "its port; 0 = no admin listener"),
	BOOL("refund_approval", "false", RC(refund_approval),
	     "true: a refund request is submitted only after `paycbctl refund approve ID`; false: "
	     "automatically"),
	{"refund_ladder_s", CFG_INT_LIST, "10 30 60 300 900 1800 3600", 1, 604800,
	 RC(refund_ladder_s), CFGF_NONEMPTY, 0, NULL, 0, 0,
	 "wait after the k-th failed or unsettled attempt of a refund or close; past the last step "
	 "the row is alerted once (refund_stuck) and retried at the last step's interval"},
	INT("lease_s", "120", 1, 86400, RC(lease_s),
	    "a claimed job is another reconciler's again after this long (longer than a call's "
	    "total_timeout_ms)"),
	{"query_steps_s", CFG_INT_LIST, "300 900 3600 21600 86400", 1, 2592000, RC(query_steps_s),
	 CFGF_NONEMPTY, 0, NULL, 0, 0,
	 "a PENDING order is queried at its channels this long after its creation, once per "
	 "step; after the last step it is left alone"},
	INT("connect_timeout_ms", "3000", 100, 60000, RC(connect_timeout_ms),
	    "connect timeout of a channel call"),
	INT("total_timeout_ms", "15000", 100, 120000, RC(total_timeout_ms),
	    "whole-call timeout; a call timed out after sending is UNKNOWN and is resolved by a query"),
	STR("ca_file", "", RC(ca_file), CFGF_FILE, PROG_RECONCILER,
	    "CA file for the channels' TLS; empty = the system's CA store"),
	STR("proxy", "", RC(proxy), 0, 0, "HTTP(S) proxy for channel calls; empty = none"),
	BOOL("allow_http", "false", RC(allow_http),
	     "allow plain-http base URLs (only for the simulator on loopback)"),
	INT("rate_per_s", "10", 1, 10000, RC(rate_per_s),
	    "calls per second per merchant and channel (a token bucket)"),
	END};

#define ME(f) offsetof(struct conf_merchant, f)
/* The id, then one group per channel conf_channels was given, then END. */
static struct cfg_setting merchant_tab[CONF_CHANNELS_MAX + 2] = {
	{"id", CFG_STR, NULL, 0, 64, ME(id), CFGF_NONEMPTY | CFGF_NAME, 0, NULL, 0, 0,
	 "merchant id in URLs (/pay/callback/{channel}/{id}) and rows: 1 to 64 letters, digits, "
	 "'.', '_' or '-'; 'default' for the short form"},
	END};
static const struct conf_chan_decl *conf_chans[CONF_CHANNELS_MAX];
static int conf_nchans;

const struct cfg_setting conf_table[] = {
	STR("log_level", "info", O(log_level), CFGF_NONEMPTY, 0, "debug, info, warn or error"),
	STR("admin_token_file", "", O(admin_token_file), CFGF_FILE, 0,
	    "file holding a bearer token every admin listener then requires on every path "
	    "(Authorization: Bearer ...; 401 without it); empty = no token"),
	{"database", CFG_GROUP, NULL, 0, 0, O(db), 0, 0, db_tab, 0, NOFLAG, "MariaDB / MySQL"},
	{"kafka", CFG_GROUP, NULL, 0, 0, O(kafka), 0, 0, kafka_tab, 0, NOFLAG, "Kafka"},
	{"retry", CFG_GROUP, NULL, 0, 0, O(retry), 0, 0, retry_tab, 0, NOFLAG,
	 "the retry ladder and leases"},
	{"ingest", CFG_GROUP, NULL, 0, 0, O(ingest), 0, 0, ingest_tab, 0, NOFLAG, "ingest daemon"},
	{"processor", CFG_GROUP, NULL, 0, 0, O(processor), 0, 0, processor_tab, 0, NOFLAG,
	 "processor daemon"},
	{"retrier", CFG_GROUP, NULL, 0, 0, O(retrier), 0, 0, retrier_tab, 0, NOFLAG,
	 "retrier daemon"},
	{"reconciler", CFG_GROUP, NULL, 0, 0, O(reconciler), 0, 0, reconciler_tab, 0, NOFLAG,
	 "reconciler daemon: refunds, payment queries, closes at the channels"},
	{"merchants", CFG_GROUP_LIST, NULL, 0, 0, O(merchants), 0, 0, merchant_tab,
	 sizeof(struct conf_merchant), O(nmerchants), "merchants and their channel keys"},
	END};

/* clang-format on */

int
conf_channels(const struct conf_chan_decl *const *decls, int n)
{
	if (n < 0 || n > CONF_CHANNELS_MAX)
		return -1;
	for (int i = 0; i < n; i++)
		if (decls[i]->size > CONF_CHAN_BYTES)
			return -1;
	for (int i = 0; i < n; i++) {
		conf_chans[i] = decls[i];
		merchant_tab[1 + i] = (struct cfg_setting){decls[i]->name,
		                                           CFG_GROUP,
		                                           NULL,
		                                           0,
		                                           0,
		                                           ME(chan[i].conf),
		                                           0,
		                                           0,
		                                           decls[i]->tab,
		                                           0,
		                                           ME(chan[i].has),
		                                           decls[i]->doc};
	}
	merchant_tab[1 + n] = (struct cfg_setting)END;
	conf_nchans = n;
	return 0;
}

static void
conf_err(struct cfg_errors *errs, const char *file, const char *fmt, const char *a)
{
	size_t used = strlen(errs->text);

	errs->n++;
	if (used + 1 < sizeof(errs->text)) {
		snprintf(errs->text + used, sizeof(errs->text) - used, "%s: ", file);
		used = strlen(errs->text);
		snprintf(errs->text + used, sizeof(errs->text) - used, fmt, a);
		used = strlen(errs->text);
		snprintf(errs->text + used, sizeof(errs->text) - used, "\n");
	}
}

/* conf_merchant_check - merchant m, the i-th, against those before it and as a whole, with
 * each channel's own checks of its settings. */
static void
conf_merchant_check(const struct conf_merchant *m, const struct conf_merchant *all, int i,
                    const char *file, struct cfg_errors *errs)
{
	int used = 0;
	char err[256];

	for (int j = 0; j < i; j++)
		if (strcmp(m->id, all[j].id) == 0)
			conf_err(errs, file, "merchant id '%s' appears twice", m->id);
	for (int c = 0; c < conf_nchans; c++)
		used |= m->chan[c].has;
	if (!used)
		conf_err(errs, file, "merchant '%s' has no channel", m->id);
	for (int c = 0; c < conf_nchans; c++)
		if (m->chan[c].has && conf_chans[c]->check &&
		    conf_chans[c]->check(m->chan[c].conf, m->id, err, sizeof(err)) != 0)
			conf_err(errs, file, "%s", err);
}

int
conf_load(const char *file, unsigned prog, struct conf *out, struct cfg_errors *errs)
{
	static const char *const protos[] = {"plaintext", "ssl", "sasl_plaintext", "sasl_ssl",
	                                     NULL};
	int ok = 0;

	memset(out, 0, sizeof(*out));
	if (cfg_load(file, conf_table, out, prog, errs) != 0)
		return errs->n;
	/* Cross-setting checks: fail, never adjust. */
	for (int i = 0; protos[i]; i++)
		if (strcmp(out->kafka.security_protocol, protos[i]) == 0)
			ok = 1;
	if (!ok)
		conf_err(errs, file, "setting 'kafka.security_protocol': unknown value '%s'",
		         out->kafka.security_protocol);
	/* TLS never runs over the socket: with both set, the TLS the operator asked for would
	 * silently not be there. */
	if (out->db.socket[0] != '\0' && out->db.ssl_ca[0] != '\0')
		conf_err(errs, file, "%s",
		         "settings 'database.socket' and 'database.ssl_ca' exclude each other: "
		         "a Unix socket connection does not use TLS");
	if (out->retry.initial_lease_max_s < out->retry.initial_lease_s)
		conf_err(
		    errs, file, "%s",
		    "setting 'retry.initial_lease_max_s' is less than 'retry.initial_lease_s'");
	for (int i = 0; i < out->nmerchants; i++)
		conf_merchant_check(&out->merchants[i], out->merchants, i, file, errs);
	return errs->n;
}

int
conf_check_secrets(const struct conf *c, unsigned prog, char *err, size_t errlen)
{
	if (c->db.password_file && cfg_secret_file_ok(c->db.password_file, err, errlen) != 0)
		return -1;
	if (c->kafka.sasl_password_file && c->kafka.sasl_password_file[0] != '\0' &&
	    cfg_secret_file_ok(c->kafka.sasl_password_file, err, errlen) != 0)
		return -1;
	if (c->admin_token_file && c->admin_token_file[0] != '\0' &&
	    cfg_secret_file_ok(c->admin_token_file, err, errlen) != 0)
		return -1;
	for (int i = 0; i < c->nmerchants; i++)
		for (int k = 0; k < conf_nchans; k++)
			if (c->merchants[i].chan[k].has && conf_chans[k]->check_secrets &&
			    conf_chans[k]->check_secrets(c->merchants[i].chan[k].conf, prog, err,
			                                 errlen) != 0)
				return -1;
	return 0;
}

/*
 * What a running program takes from a reload. ingest and the reconciler rebuild every
 * merchant's keys and clients from the new file (ingest also its timestamp tolerance, which
 * its verifiers hold; the reconciler the settings its channel clients are built with); every
 * program takes the log level. Everything else is read once at start: listeners, the
 * database, Kafka, thread and pool sizes, the cycles' batches and ladders.
 */
static const struct {
	const char *prefix;
	unsigned progs;
} conf_reload_tab[] = {
    {"log_level", ~0u},
    {"merchants", PROG_INGEST | PROG_RECONCILER},
    {"ingest.timestamp_tolerance_s", PROG_INGEST},
    {"reconciler.ca_file", PROG_RECONCILER},
    {"reconciler.proxy", PROG_RECONCILER},
    {"reconciler.connect_timeout_ms", PROG_RECONCILER},
    {"reconciler.total_timeout_ms", PROG_RECONCILER},
    {"reconciler.allow_http", PROG_RECONCILER},
    {"reconciler.rate_per_s", PROG_RECONCILER},
};

int
conf_reloadable(const char *path, unsigned prog)
{
	for (size_t i = 0; i < sizeof(conf_reload_tab) / sizeof(conf_reload_tab[0]); i++) {
		size_t n = strlen(conf_reload_tab[i].prefix);

		if ((conf_reload_tab[i].progs & prog) != 0 &&
		    strncmp(path, conf_reload_tab[i].prefix, n) == 0 &&
		    (path[n] == '\0' || path[n] == '.' || path[n] == '['))
			return 1;
	}
	return 0;
}

void
conf_free(struct conf *c)
{
	cfg_free(conf_table, c);
}

const struct conf_merchant *
conf_merchant(const struct conf *c, const char *id)
{
	for (int i = 0; i < c->nmerchants; i++)
		if (strcmp(c->merchants[i].id, id) == 0)
			return &c->merchants[i];
	return NULL;
}

void
conf_topic(const struct conf *c, const char *suffix, char *buf, size_t len)
{
	snprintf(buf, len, "%s.%s", c->kafka.topic_prefix, suffix);
}
