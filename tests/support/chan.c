/*
 * chan - channel fixtures for tests (see chan.h).
 */
#include "chan.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chan_notify.h"
#include "harness.h"
#include "testkeys.h"

int
chan_keys_new(struct chan_keys *k)
{
	memset(k, 0, sizeof(*k));
	snprintf(k->dir, sizeof(k->dir), "/tmp/paycb-chan-XXXXXX");
	if (mkdtemp(k->dir) == NULL)
		return -1;
	snprintf(k->wx_serial, sizeof(k->wx_serial), "5A1B2C3D4E5F60718293A4B5C6D7E8F901234567");
	snprintf(k->wx_pubkey_id, sizeof(k->wx_pubkey_id),
	         "PUB_KEY_ID_0114232134912410000000000000000001");
	for (int i = 0; i < 32; i++)
		k->apiv3[i] = (uint8_t)("abcdefghijklmnopqrstuvwxyz012345"[(i * 7) % 32]);
	k->stripe_old = "whsec_old_secret_for_rotation_tests";
	k->stripe_new = "whsec_new_secret_for_rotation_tests";
	k->wx_cert_key = tk_rsa_new();
	k->wx_pub_key = tk_rsa_new();
	k->ali_key = tk_rsa_new();
	k->ali_key_old = tk_rsa_new();
	return k->wx_cert_key && k->wx_pub_key && k->ali_key && k->ali_key_old ? 0 : -1;
}

void
chan_keys_free(struct chan_keys *k)
{
	char cmd[128];

	EVP_PKEY_free(k->wx_cert_key);
	EVP_PKEY_free(k->wx_pub_key);
	EVP_PKEY_free(k->ali_key);
	EVP_PKEY_free(k->ali_key_old);
	/* The directory holds only files this fixture wrote (keys, configs, logs). */
	if (k->dir[0] && getenv("PAYCB_KEEP_TEST_FILES") == NULL) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", k->dir);
		if (system(cmd) != 0)
			fprintf(stderr, "# cannot remove %s\n", k->dir);
	}
}

static int
chan_file(const struct chan_keys *k, const char *name, const char *text, char *path, size_t plen)
{
	FILE *fp;

	int fd;

	/* Private, as ingest requires of its secret files (keys and certificates alike). */
	snprintf(path, plen, "%s/%s", k->dir, name);
	if (text == NULL || (fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600)) < 0)
		return -1;
	if ((fp = fdopen(fd, "w")) == NULL) {
		close(fd);
		return -1;
	}
	fputs(text, fp);
	return fclose(fp);
}

static int
chan_pem_file(const struct chan_keys *k, const char *name, char *pem, char *path, size_t plen)
{
	int rc = chan_file(k, name, pem, path, plen);

	free(pem);
	return rc;
}

int
chan_merchants(const struct chan_keys *k, char *buf, size_t len)
{
	char cert[256], pub[256], key[256], ali1[256], ali2[256], s1[256], s2[256];
	X509 *x = tk_self_signed(k->wx_cert_key, k->wx_serial);
	int rc = -1, n;

	if (x == NULL)
		return -1;
	if (chan_pem_file(k, "wx_cert.pem", tk_cert_pem(x), cert, sizeof(cert)) ||
	    chan_pem_file(k, "wx_pub.pem", tk_pubkey_pem(k->wx_pub_key), pub, sizeof(pub)) ||
	    chan_file(k, "apiv3.key", (const char *)k->apiv3, key, sizeof(key)) ||
	    chan_pem_file(k, "ali_new.pub", tk_pubkey_b64(k->ali_key), ali1, sizeof(ali1)) ||
	    chan_pem_file(k, "ali_old.pem", tk_pubkey_pem(k->ali_key_old), ali2, sizeof(ali2)) ||
	    chan_file(k, "stripe_old", k->stripe_old, s1, sizeof(s1)) ||
	    chan_file(k, "stripe_new", k->stripe_new, s2, sizeof(s2)))
		goto done;
	n = snprintf(
	    buf, len,
	    "merchants = (\n"
	    "  { id = \"default\";\n"
	    "    wxpay = { mchid = \"1900000001\"; apiv3_key_file = \"%s\";\n"
	    "      keys = ( { file = \"%s\"; }, { serial = \"%s\"; file = \"%s\"; } ); };\n"
	    "    alipay = { app_id = \"2021000000000001\"; public_key_files = [ \"%s\", "
	    "\"%s\" ]; };\n"
	    "    stripe = { secret_files = [ \"%s\", \"%s\" ]; };\n"
	    "  },\n"
	    "  { id = \"shop2\"; stripe = { secret_files = [ \"%s\" ]; }; }\n"
	    ");\n",
	    key, cert, k->wx_pubkey_id, pub, ali1, ali2, s1, s2, s2);
	rc = n > 0 && (size_t)n < len ? 0 : -1;
done:
	X509_free(x);
	return rc;
}

int
chan_write_conf(const struct conf *cf, const struct chan_keys *k, const char *path,
                const char *brokers, int port, int admin_port, const char *ingest_extra)
{
	char merchants[4096];
	FILE *fp;

	if (chan_merchants(k, merchants, sizeof(merchants)) != 0 || (fp = fopen(path, "w")) == NULL)
		return -1;
	fprintf(
	    fp,
	    "log_level = \"debug\";\n"
	    "database = { host = \"%s\"; port = %lld; user = \"%s\"; password_file = \"%s\";"
	    " name = \"%s\"; };\n"
	    "kafka = { brokers = \"%s\"; topic_prefix = \"%s\"; delivery_timeout_ms = 5000; };\n"
	    "ingest = { listen_port = %d; admin_port = %d; connection_timeout_s = 2;"
	    " publish_budget_ms = 1500; %s };\n%s",
	    cf->db.host, cf->db.port, cf->db.user, cf->db.password_file, cf->db.name, brokers,
	    cf->kafka.topic_prefix, port, admin_port, ingest_extra ? ingest_extra : "", merchants);
	return fclose(fp);
}

pid_t
chan_spawn_ingest(const char *conf, const char *log, int admin_port)
{
	struct httpc_resp r;
	long long end;
	pid_t pid = fork();

	if (pid < 0)
		return -1;
	if (pid == 0) {
		if (freopen(log, "w", stderr) == NULL)
			_exit(126);
		execl("bin/paycb-ingest", "paycb-ingest", "-c", conf, (char *)NULL);
		_exit(127);
	}
	/* Ready when the admin listener answers /healthz (ingest starts it last). */
	for (end = harness_now_ms() + 20000; harness_now_ms() < end;) {
		if (httpc_request(admin_port, "GET", "/healthz", NULL, "", 0, 1000, &r) == 0 &&
		    r.status == 200)
			return pid;
		if (waitpid(pid, NULL, WNOHANG) == pid)
			return -1;
		usleep(50 * 1000);
	}
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	return -1;
}

int
chan_stop(pid_t pid)
{
	int st = 0;

	kill(pid, SIGTERM);
	waitpid(pid, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int
chan_wx_note(const struct chan_keys *k, struct chan_note *n, EVP_PKEY *key, const char *serial,
             const char *event, const char *plain, time_t ts)
{
	struct chan_signer s = {key, serial, k->apiv3, 32};
	struct chan_sign_in in = {event, plain, ts};
	struct chan_signed out;

	if (notify_wx_ops.sign(&s, &in, &out) != 0)
		return -1;
	n->body = out.body;
	n->len = out.len;
	snprintf(n->headers, sizeof(n->headers), "%s", out.headers);
	return 0;
}

int
chan_wx_pay(const struct chan_keys *k, struct chan_note *n, const char *order, const char *txn,
            long long fen, EVP_PKEY *key, const char *serial, time_t ts)
{
	char plain[1024];

	snprintf(
	    plain, sizeof(plain),
	    "{\"mchid\":\"1900000001\",\"appid\":\"wx0000000000000001\",\"out_trade_no\":"
	    "\"%s\",\"transaction_id\":\"%s\",\"trade_type\":\"JSAPI\",\"trade_state\":"
	    "\"SUCCESS\",\"trade_state_desc\":\"ok\",\"bank_type\":\"OTHERS\",\"success_time\":"
	    "\"2026-12-02T10:34:56+08:00\",\"payer\":{\"openid\":\"o1\"},\"amount\":{\"total\":"
	    "%lld,\"payer_total\":%lld,\"currency\":\"CNY\",\"payer_currency\":\"CNY\"}}",
	    order, txn, fen, fen);
	return chan_wx_note(k, n, key, serial, "TRANSACTION.SUCCESS", plain, ts);
}

int
chan_ali_note(struct chan_note *n, EVP_PKEY *key, const char *const *keys,
              const char *const *values, size_t cnt)
{
	if (notify_ali_sign(key, keys, values, cnt, &n->body) != 0)
		return -1;
	n->len = strlen(n->body);
	snprintf(n->headers, sizeof(n->headers),
	         "Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n");
	return 0;
}

int
chan_ali_pay(struct chan_note *n, const char *order, const char *trade, const char *amount,
             EVP_PKEY *key)
{
	const char *k[] = {"notify_time",  "notify_type",  "notify_id", "app_id",
	                   "charset",      "version",      "trade_no",  "out_trade_no",
	                   "trade_status", "total_amount", "subject"};
	const char *v[] = {"2026-12-02 10:00:00",
	                   "trade_status_sync",
	                   trade,
	                   "2021000000000001",
	                   "utf-8",
	                   "1.0",
	                   trade,
	                   order,
	                   "TRADE_SUCCESS",
	                   amount,
	                   "\xe6\xb5\x8b\xe8\xaf\x95 & = + %"};

	return chan_ali_note(n, key, k, v, 11);
}

int
chan_stripe_note(struct chan_note *n, const char *secret, const char *json, time_t t)
{
	char sig[512];

	if ((n->body = strdup(json)) == NULL)
		return -1;
	n->len = strlen(json);
	if (notify_stripe_sign_header((const uint8_t *)secret, strlen(secret),
	                              (const uint8_t *)n->body, n->len, t, sig, sizeof(sig)) != 0)
		return -1;
	snprintf(n->headers, sizeof(n->headers),
	         "Content-Type: application/json\r\nStripe-Signature: %s\r\n", sig);
	return 0;
}

int
chan_stripe_pay(struct chan_note *n, const char *secret, const char *order, const char *pi,
                long long cents, time_t t)
{
	char json[1024];

	snprintf(json, sizeof(json),
	         "{\"id\":\"evt_%s\",\"object\":\"event\",\"api_version\":\"2024-06-20\","
	         "\"created\":%lld,\"type\":\"payment_intent.succeeded\",\"data\":{\"object\":{"
	         "\"id\":\"%s\",\"object\":\"payment_intent\",\"amount\":%lld,\"amount_received\":"
	         "%lld,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"%s\"},\"status\":"
	         "\"succeeded\"}}}",
	         pi, (long long)t, pi, cents, cents, order);
	return chan_stripe_note(n, secret, json, t);
}

int
chan_post(int port, const char *path, const struct chan_note *n, struct httpc_resp *r)
{
	return httpc_request(port, "POST", path, n->headers, n->body, n->len, 10000, r);
}

/*
 * db_query caches statements by the address of their SQL text, so SQL built at run time goes
 * through a statement of its own here.
 */
static long long
chan_one_int(struct db *db, const char *sql, const char *param)
{
	MYSQL_BIND in, out;
	MYSQL_STMT *st;
	long long v = -1;
	/* The client library binds through void *; a copy keeps the caller's text const. */
	char *copy = NULL;

	if (param && (copy = strdup(param)) == NULL)
		return -1;
	if (db_ensure(db) != DB_OK || (st = mysql_stmt_init(db->my)) == NULL) {
		free(copy);
		return -1;
	}
	memset(&in, 0, sizeof(in));
	memset(&out, 0, sizeof(out));
	out.buffer_type = MYSQL_TYPE_LONGLONG;
	out.buffer = &v;
	if (param) {
		in.buffer_type = MYSQL_TYPE_STRING;
		in.buffer = copy;
		in.buffer_length = strlen(param);
	}
	if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0 ||
	    (param && mysql_stmt_bind_param(st, &in) != 0) || mysql_stmt_execute(st) != 0 ||
	    mysql_stmt_bind_result(st, &out) != 0 || mysql_stmt_fetch(st) == 1)
		v = -1;
	mysql_stmt_close(st);
	free(copy);
	return v;
}

long long
chan_rows(struct db *db, const char *clause)
{
	char sql[512];

	snprintf(sql, sizeof(sql), "SELECT COUNT(*) FROM %s", clause);
	return chan_one_int(db, sql, NULL);
}

unsigned long long
chan_row_id(struct db *db, const char *table, const char *col, const char *val)
{
	char sql[256];
	long long v;

	snprintf(sql, sizeof(sql), "SELECT id FROM %s WHERE %s = ?", table, col);
	v = chan_one_int(db, sql, val);
	return v > 0 ? (unsigned long long)v : 0;
}
