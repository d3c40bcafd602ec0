/*
 * test_hostile - a catalog of hostile requests against the live paycb-ingest daemon, each
 * with the answer it must get and the promise that it leaves no row behind, while a
 * background client keeps sending valid notifications that must all be stored. Then slow
 * clients holding connections and a flood of unverified requests, during which valid traffic
 * is still answered. Three cases are authentic but not this merchant's (a foreign mchid, a
 * foreign Alipay app, a PaymentIntent without an order number): they are answered with the
 * channel's success and kept in the unroutable table, never in a callback log.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "chan.h"
#include "crypto.h"
#include "harness.h"

static struct conf cf;
static struct db db;
static struct chan_keys K;
static int port, admin_port;
static pid_t ingest_pid;

/* A request under construction: the case builder fills it. */
struct hreq {
	const char *path, *method;
	struct chan_note n;
	int raw; /* n.body is a complete raw HTTP request */
};

struct hcase {
	const char *name;
	void (*build)(struct hreq *);
	int want_status; /* 0: no answer at all is fine, as long as nothing is stored */
	const char *want_body;
};

/* ---- valid background traffic ----------------------------------------------------------- */

static atomic_int bg_stop, bg_ok, bg_bad;
static pthread_t bg_thread;

static void *
background(void *arg)
{
	char order[64], pi[64];
	int i = 0;

	(void)arg;
	while (!atomic_load(&bg_stop)) {
		struct chan_note n;
		struct httpc_resp r;
		struct timespec ts = {0, 50 * 1000 * 1000};

		snprintf(order, sizeof(order), "BG%d-%d", getpid(), i);
		snprintf(pi, sizeof(pi), "pi_bg%d_%d", getpid(), i++);
		if (chan_stripe_pay(&n, K.stripe_new, order, pi, 100, time(NULL)) == 0 &&
		    chan_post(port, "/pay/callback/stripe", &n, &r) == 0 && r.status == 200)
			atomic_fetch_add(&bg_ok, 1);
		else
			atomic_fetch_add(&bg_bad, 1);
		free(n.body);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

/* ---- builders --------------------------------------------------------------------------- */

static void
wx_good(struct hreq *q)
{
	char order[64], txn[64];
	static int seq;

	snprintf(order, sizeof(order), "H%d-%d", getpid(), ++seq);
	snprintf(txn, sizeof(txn), "4200H%d%d", getpid(), seq);
	q->path = "/pay/callback/wxpay";
	q->method = "POST";
	assert_int_equal(
	    chan_wx_pay(&K, &q->n, order, txn, 100, K.wx_cert_key, K.wx_serial, time(NULL)), 0);
}

/* Re-signs a WeChat body after a builder changed it, so only the inside is wrong. */
static void
wx_resign(struct hreq *q)
{
	char ts[24], nonce[40], *msg, *b64, line[1024], *p, *e;
	uint8_t *sig;
	size_t siglen, ml;

	assert_int_equal(sscanf(strstr(q->n.headers, "Wechatpay-Timestamp: ") + 21, "%23[0-9]", ts),
	                 1);
	assert_int_equal(sscanf(strstr(q->n.headers, "Wechatpay-Nonce: ") + 17, "%39[^\r]", nonce),
	                 1);
	ml = strlen(ts) + strlen(nonce) + q->n.len + 3;
	msg = malloc(ml + 1);
	snprintf(msg, ml + 1, "%s\n%s\n%.*s\n", ts, nonce, (int)q->n.len, q->n.body);
	assert_int_equal(
	    crypto_rsa_sha256_sign(K.wx_cert_key, (const uint8_t *)msg, ml, &sig, &siglen), 0);
	b64 = crypto_b64_encode_alloc(sig, siglen);
	p = strstr(q->n.headers, "Wechatpay-Signature: ");
	e = strstr(p, "\r\n") + 2;
	memmove(p, e, strlen(e) + 1);
	snprintf(line, sizeof(line), "Wechatpay-Signature: %s\r\n", b64);
	strcat(q->n.headers, line);
	free(msg);
	free(sig);
	free(b64);
}

static void
wx_plain(struct hreq *q, const char *event, const char *plain)
{
	q->path = "/pay/callback/wxpay";
	q->method = "POST";
	assert_int_equal(
	    chan_wx_note(&K, &q->n, K.wx_cert_key, K.wx_serial, event, plain, time(NULL)), 0);
}

static void
drop_header(struct hreq *q, const char *name)
{
	char *p = strstr(q->n.headers, name), *e;

	assert_non_null(p);
	e = strstr(p, "\r\n") + 2;
	memmove(p, e, strlen(e) + 1);
}

static void
set_header(struct hreq *q, const char *name, const char *line)
{
	drop_header(q, name);
	strcat(q->n.headers, line);
}

static void
set_body(struct hreq *q, const char *body)
{
	free(q->n.body);
	q->n.body = strdup(body);
	q->n.len = strlen(body);
}

static void
replace_in_body(struct hreq *q, const char *from, const char *to)
{
	char *p = strstr(q->n.body, from), *nb;
	size_t off;

	assert_non_null(p);
	off = (size_t)(p - q->n.body);
	nb = malloc(q->n.len - strlen(from) + strlen(to) + 1);
	memcpy(nb, q->n.body, off);
	strcpy(nb + off, to);
	strcat(nb, p + strlen(from));
	free(q->n.body);
	q->n.body = nb;
	q->n.len = strlen(nb);
}

#define B(fn) static void fn(struct hreq *q)

B(wx_bad_signature)
{
	wx_good(q);
	char *p = strstr(q->n.headers, "Wechatpay-Signature: ") + 21;
	*p = *p == 'A' ? 'B' : 'A';
}
B(wx_tampered_body)
{
	wx_good(q);
	q->n.body[12] ^= 1;
}
B(wx_missing_serial)
{
	wx_good(q);
	drop_header(q, "Wechatpay-Serial:");
}
B(wx_missing_timestamp)
{
	wx_good(q);
	drop_header(q, "Wechatpay-Timestamp:");
}
B(wx_missing_nonce)
{
	wx_good(q);
	drop_header(q, "Wechatpay-Nonce:");
}
B(wx_missing_signature)
{
	wx_good(q);
	drop_header(q, "Wechatpay-Signature:");
}
B(wx_duplicated_timestamp)
{
	char line[64];
	wx_good(q);
	snprintf(line, sizeof(line), "Wechatpay-Timestamp: %lld\r\n", (long long)time(NULL));
	strcat(q->n.headers, line);
}
B(wx_duplicated_serial)
{
	wx_good(q);
	strcat(q->n.headers, "Wechatpay-Serial: 5A1B2C3D4E5F60718293A4B5C6D7E8F901234567\r\n");
}
B(wx_unknown_serial)
{
	wx_good(q);
	set_header(q, "Wechatpay-Serial:", "Wechatpay-Serial: 00000000DEADBEEF\r\n");
}
B(wx_truncated_base64)
{
	wx_good(q);
	char *p = strstr(q->n.headers, "Wechatpay-Signature: ") + 21;
	memmove(p + 30, strstr(p, "\r\n"), strlen(strstr(p, "\r\n")) + 1);
}
B(wx_not_base64)
{
	wx_good(q);
	set_header(q, "Wechatpay-Signature:", "Wechatpay-Signature: ***not base64***\r\n");
}
B(wx_probe_signature)
{
	wx_good(q);
	set_header(q, "Wechatpay-Signature:", "Wechatpay-Signature: WECHATPAY/SIGNTEST/AAAA\r\n");
}
B(wx_signature_type_sm2)
{
	wx_good(q);
	set_header(q, "Wechatpay-Signature-Type:",
	           "Wechatpay-Signature-Type: WECHATPAY2-SM2-WITH-SM3\r\n");
}
B(wx_timestamp_old)
{
	wx_good(q);
	free(q->n.body);
	assert_int_equal(chan_wx_pay(&K, &q->n, "OLD", "4200OLD", 1, K.wx_cert_key, K.wx_serial,
	                             time(NULL) - 300),
	                 0);
}
B(wx_timestamp_ahead)
{
	wx_good(q);
	free(q->n.body);
	assert_int_equal(chan_wx_pay(&K, &q->n, "NEW", "4200NEW", 1, K.wx_cert_key, K.wx_serial,
	                             time(NULL) + 300),
	                 0);
}
B(wx_timestamp_not_digits)
{
	wx_good(q);
	set_header(q, "Wechatpay-Timestamp:", "Wechatpay-Timestamp: 17e8\r\n");
}
B(wx_empty_body)
{
	wx_good(q);
	set_body(q, "");
	wx_resign(q);
}
B(wx_envelope_not_json)
{
	wx_good(q);
	set_body(q, "{\"id\": \"EV-1\", \"resource\": ");
	wx_resign(q);
}
B(wx_inner_json_malformed)
{
	wx_plain(q, "TRANSACTION.SUCCESS", "{\"out_trade_no\": 1");
}
B(wx_gcm_tag_failure)
{
	wx_good(q);
	char *ct = strstr(q->n.body, "\"ciphertext\":\"") + 14;
	ct[4] = ct[4] == 'A' ? 'B' : 'A';
	wx_resign(q);
}
B(wx_algorithm_not_aead)
{
	wx_good(q);
	replace_in_body(q, "AEAD_AES_256_GCM", "AES_128_CBC");
	wx_resign(q);
}
B(wx_foreign_mchid)
{
	wx_plain(q, "TRANSACTION.SUCCESS",
	         "{\"mchid\":\"1999999999\",\"out_trade_no\":\"O\",\"transaction_id\":\"T\","
	         "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":1,\"currency\":\"CNY\"}}");
}
B(wx_negative_amount)
{
	wx_plain(q, "TRANSACTION.SUCCESS",
	         "{\"mchid\":\"1900000001\",\"out_trade_no\":\"O\",\"transaction_id\":\"T\","
	         "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":-1,\"currency\":\"CNY\"}}");
}
B(wx_float_amount)
{
	wx_plain(q, "TRANSACTION.SUCCESS",
	         "{\"mchid\":\"1900000001\",\"out_trade_no\":\"O\",\"transaction_id\":\"T\","
	         "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":88.88,\"currency\":\"CNY\"}}");
}
B(wx_string_amount)
{
	wx_plain(
	    q, "TRANSACTION.SUCCESS",
	    "{\"mchid\":\"1900000001\",\"out_trade_no\":\"O\",\"transaction_id\":\"T\","
	    "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":\"8888\",\"currency\":\"CNY\"}}");
}
B(wx_missing_order_number)
{
	wx_plain(q, "TRANSACTION.SUCCESS",
	         "{\"mchid\":\"1900000001\",\"transaction_id\":\"T\",\"trade_state\":\"SUCCESS\","
	         "\"amount\":{\"total\":1,\"currency\":\"CNY\"}}");
}
B(wx_non_utf8_body)
{
	wx_good(q);
	set_body(q, "{\"id\":\"\xff\xfe\"}");
}
B(wx_sql_injection_unverified)
{
	wx_good(q);
	set_body(q, "{\"out_trade_no\":\"x'; DROP TABLE orders; --\"}");
}
B(wx_oversized_body)
{
	wx_good(q);
	free(q->n.body);
	q->n.body = malloc(70001);
	memset(q->n.body, 'a', 70000);
	q->n.body[70000] = '\0';
	q->n.len = 70000;
}
B(wx_header_block_too_large)
{
	/* 12 KiB of headers: more than a connection's memory (ingest.connection_memory_bytes). */
	static char req[16384];
	int n = snprintf(req, sizeof(req),
	                 "POST /pay/callback/wxpay HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	                 "Content-Length: 2\r\nX-Padding: ");
	memset(req + n, 'p', 12288);
	n += 12288;
	n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n\r\n{}");
	q->raw = 1;
	q->n.body = malloc((size_t)n);
	memcpy(q->n.body, req, (size_t)n);
	q->n.len = (size_t)n;
}
B(wx_oversized_chunked)
{
	static char req[80000];
	int n = snprintf(req, sizeof(req),
	                 "POST /pay/callback/wxpay HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
	                 "Transfer-Encoding: chunked\r\n\r\n");
	for (int i = 0; i < 18; i++) {
		n += snprintf(req + n, sizeof(req) - (size_t)n, "1000\r\n");
		memset(req + n, 'b', 4096);
		n += 4096;
		n += snprintf(req + n, sizeof(req) - (size_t)n, "\r\n");
	}
	n += snprintf(req + n, sizeof(req) - (size_t)n, "0\r\n\r\n");
	q->raw = 1;
	q->n.body = malloc((size_t)n);
	memcpy(q->n.body, req, (size_t)n);
	q->n.len = (size_t)n;
}
B(wx_declared_longer_than_sent)
{
	struct chan_note g;
	char *req;
	int n;

	wx_good(q);
	g = q->n;
	req = malloc(g.len + 4096);
	n = sprintf(req,
	            "POST /pay/callback/wxpay HTTP/1.1\r\nHost: x\r\n%sContent-Length: %zu\r\n\r\n",
	            g.headers, g.len + 100);
	memcpy(req + n, g.body, g.len);
	free(g.body);
	q->raw = 1;
	q->n.body = req;
	q->n.len = (size_t)n + g.len;
}
B(unknown_channel)
{
	wx_good(q);
	q->path = "/pay/callback/paypal";
}
B(unknown_merchant)
{
	wx_good(q);
	q->path = "/pay/callback/wxpay/nobody";
}
B(merchant_without_channel)
{
	wx_good(q);
	q->path = "/pay/callback/wxpay/shop2";
}
B(extra_path_segment)
{
	wx_good(q);
	q->path = "/pay/callback/wxpay/default/extra";
}
B(path_traversal)
{
	wx_good(q);
	q->path = "/pay/callback/../../etc/passwd";
}
B(method_get)
{
	wx_good(q);
	q->method = "GET";
	set_body(q, "");
}
B(method_put)
{
	wx_good(q);
	q->method = "PUT";
}
B(method_delete)
{
	wx_good(q);
	q->method = "DELETE";
	set_body(q, "");
}

static void
ali_with(struct hreq *q, const char *app_id, const char *amount, const char *status)
{
	const char *k[] = {"notify_type", "notify_id",    "app_id",       "charset",
	                   "trade_no",    "out_trade_no", "trade_status", "total_amount"};
	const char *v[] = {"trade_status_sync", "nid",     app_id, "utf-8",
	                   "T-ALI-H",           "O-ALI-H", status, amount};

	q->path = "/pay/callback/alipay";
	q->method = "POST";
	assert_int_equal(chan_ali_note(&q->n, K.ali_key, k, v, 8), 0);
}
B(ali_malformed_form)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	set_body(q, "a=%zz&&=b");
}
B(ali_missing_sign)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	*strstr(q->n.body, "&sign=") = '\0';
	q->n.len = strlen(q->n.body);
}
B(ali_sign_type_rsa_sha1)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	replace_in_body(q, "sign_type=RSA2", "sign_type=RSA");
}
B(ali_foreign_app_id)
{
	ali_with(q, "2099999999999999", "1.00", "TRADE_SUCCESS");
}
B(ali_three_decimals)
{
	ali_with(q, "2021000000000001", "1.234", "TRADE_SUCCESS");
}
B(ali_negative_amount)
{
	ali_with(q, "2021000000000001", "-0.01", "TRADE_SUCCESS");
}
B(ali_exponent_amount)
{
	ali_with(q, "2021000000000001", "1e3", "TRADE_SUCCESS");
}
B(ali_tampered_value)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	replace_in_body(q, "total_amount=1.00", "total_amount=9.00");
}
B(ali_duplicated_key)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	char *b = malloc(q->n.len + 32);
	sprintf(b, "%s&total_amount=2.00", q->n.body);
	free(q->n.body);
	q->n.body = b;
	q->n.len = strlen(b);
}
B(ali_double_encoded)
{
	ali_with(q, "2021000000000001", "1.00", "TRADE_SUCCESS");
	replace_in_body(q, "trade_status=TRADE_SUCCESS", "trade_status=TRADE%255FSUCCESS");
}

static void
stripe_with(struct hreq *q, const char *secret, const char *json, time_t t)
{
	q->path = "/pay/callback/stripe";
	q->method = "POST";
	assert_int_equal(chan_stripe_note(&q->n, secret, json, t), 0);
}
static const char *PI_JSON =
    "{\"id\":\"evt_h\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\",\"data\":{"
    "\"object\":{\"id\":\"pi_h\",\"object\":\"payment_intent\",\"amount\":100,"
    "\"amount_received\":100,\"currency\":\"usd\",\"metadata\":{\"order_id\":\"O-H\"},"
    "\"status\":\"succeeded\"}}}";
B(stripe_too_old)
{
	stripe_with(q, K.stripe_new, PI_JSON, time(NULL) - 301);
}
B(stripe_unknown_secret)
{
	stripe_with(q, "whsec_someone_else", PI_JSON, time(NULL));
}
B(stripe_missing_header)
{
	stripe_with(q, K.stripe_new, PI_JSON, time(NULL));
	drop_header(q, "Stripe-Signature:");
}
B(stripe_duplicated_header)
{
	stripe_with(q, K.stripe_new, PI_JSON, time(NULL));
	strcat(q->n.headers, "Stripe-Signature: t=1,v1=00\r\n");
}
B(stripe_header_without_t)
{
	stripe_with(q, K.stripe_new, PI_JSON, time(NULL));
	set_header(q, "Stripe-Signature:",
	           "Stripe-Signature: "
	           "v1=5257a869e7ecebeda32affa62cdca3fa51cad7e77a0e56ff536d0ce8e108d8bd\r\n");
}
B(stripe_v0_only)
{
	stripe_with(q, K.stripe_new, PI_JSON, time(NULL));
	char *p = strstr(q->n.headers, "v1=");
	p[1] = '0';
}
B(stripe_malformed_json)
{
	stripe_with(q, K.stripe_new, "{\"id\":\"evt\",\"type\":\"payment_intent.succeeded\"",
	            time(NULL));
}
B(stripe_missing_order_metadata)
{
	stripe_with(q, K.stripe_new,
	            "{\"id\":\"evt_m\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\","
	            "\"data\":{\"object\":{\"id\":\"pi_m\",\"amount\":1,\"amount_received\":1,"
	            "\"currency\":\"usd\",\"metadata\":{},\"status\":\"succeeded\"}}}",
	            time(NULL));
}
B(stripe_unknown_currency)
{
	stripe_with(q, K.stripe_new,
	            "{\"id\":\"evt_c\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\","
	            "\"data\":{\"object\":{\"id\":\"pi_c\",\"amount\":1,\"amount_received\":1,"
	            "\"currency\":\"xyz\",\"metadata\":{\"order_id\":\"O\"},\"status\":"
	            "\"succeeded\"}}}",
	            time(NULL));
}

static struct hcase cases[] = {
    {"wx_bad_signature", wx_bad_signature, 401, "\"code\":\"FAIL\""},
    {"wx_tampered_body", wx_tampered_body, 401, "FAIL"},
    {"wx_missing_serial", wx_missing_serial, 400, "FAIL"},
    {"wx_missing_timestamp", wx_missing_timestamp, 400, "FAIL"},
    {"wx_missing_nonce", wx_missing_nonce, 400, "FAIL"},
    {"wx_missing_signature", wx_missing_signature, 400, "FAIL"},
    {"wx_duplicated_timestamp", wx_duplicated_timestamp, 400, "FAIL"},
    {"wx_duplicated_serial", wx_duplicated_serial, 400, "FAIL"},
    {"wx_unknown_serial", wx_unknown_serial, 401, "serial"},
    {"wx_truncated_base64", wx_truncated_base64, 401, "FAIL"},
    {"wx_not_base64", wx_not_base64, 401, "FAIL"},
    {"wx_probe_signature", wx_probe_signature, 401, "FAIL"},
    {"wx_signature_type_sm2", wx_signature_type_sm2, 400, "FAIL"},
    {"wx_timestamp_300s_old", wx_timestamp_old, 401, "timestamp"},
    {"wx_timestamp_300s_ahead", wx_timestamp_ahead, 401, "timestamp"},
    {"wx_timestamp_not_digits", wx_timestamp_not_digits, 400, "FAIL"},
    {"wx_empty_body_signed", wx_empty_body, 400, "FAIL"},
    {"wx_envelope_not_json_signed", wx_envelope_not_json, 400, "FAIL"},
    {"wx_inner_json_malformed", wx_inner_json_malformed, 400, "FAIL"},
    {"wx_gcm_tag_failure", wx_gcm_tag_failure, 400, "decrypt"},
    {"wx_algorithm_not_aead", wx_algorithm_not_aead, 400, "FAIL"},
    {"wx_foreign_mchid_is_unroutable", wx_foreign_mchid, 204, NULL},
    {"wx_negative_amount", wx_negative_amount, 400, "FAIL"},
    {"wx_float_amount", wx_float_amount, 400, "FAIL"},
    {"wx_string_amount", wx_string_amount, 400, "FAIL"},
    {"wx_missing_order_number", wx_missing_order_number, 400, "FAIL"},
    {"wx_non_utf8_body", wx_non_utf8_body, 401, "FAIL"},
    {"wx_sql_injection_unverified", wx_sql_injection_unverified, 401, "FAIL"},
    {"wx_oversized_body", wx_oversized_body, 413, "FAIL"},
    /* Closed, not drained: a sender that never stops would hold the connection for ever. */
    {"wx_oversized_chunked_body", wx_oversized_chunked, 0, NULL},
    {"wx_header_block_too_large", wx_header_block_too_large, 431, NULL},
    {"wx_declared_longer_than_sent", wx_declared_longer_than_sent, 0, NULL},
    {"unknown_channel", unknown_channel, 404, NULL},
    {"unknown_merchant", unknown_merchant, 404, "FAIL"},
    {"merchant_without_that_channel", merchant_without_channel, 404, "FAIL"},
    {"extra_path_segment", extra_path_segment, 404, NULL},
    {"path_traversal", path_traversal, 404, NULL},
    {"method_get", method_get, 405, "FAIL"},
    {"method_put", method_put, 405, "FAIL"},
    {"method_delete", method_delete, 405, "FAIL"},
    {"ali_malformed_form", ali_malformed_form, 400, "fail"},
    {"ali_missing_sign", ali_missing_sign, 400, "fail"},
    {"ali_sign_type_rsa_sha1", ali_sign_type_rsa_sha1, 400, "fail"},
    {"ali_foreign_app_id_is_unroutable", ali_foreign_app_id, 200, "success"},
    {"ali_amount_three_decimals", ali_three_decimals, 400, "fail"},
    {"ali_amount_negative", ali_negative_amount, 400, "fail"},
    {"ali_amount_exponent", ali_exponent_amount, 400, "fail"},
    {"ali_tampered_value", ali_tampered_value, 400, "fail"},
    {"ali_duplicated_key", ali_duplicated_key, 400, "fail"},
    {"ali_double_encoded_value", ali_double_encoded, 400, "fail"},
    {"stripe_timestamp_301s_old", stripe_too_old, 400, NULL},
    {"stripe_unknown_secret", stripe_unknown_secret, 400, NULL},
    {"stripe_missing_header", stripe_missing_header, 400, NULL},
    {"stripe_duplicated_header", stripe_duplicated_header, 400, NULL},
    {"stripe_header_without_t", stripe_header_without_t, 400, NULL},
    {"stripe_v0_only", stripe_v0_only, 400, NULL},
    {"stripe_malformed_json_signed", stripe_malformed_json, 400, NULL},
    {"stripe_missing_order_metadata_is_unroutable", stripe_missing_order_metadata, 200, "received"},
    {"stripe_unknown_currency", stripe_unknown_currency, 400, NULL},
};
#define NCASES (sizeof(cases) / sizeof(cases[0]))

static long long
hostile_rows(void)
{
	/* Background traffic uses BG orders; everything else must stay absent. */
	return chan_rows(&db, "pay_callback_log WHERE out_trade_no NOT LIKE 'BG%'") +
	       chan_rows(&db, "refund_callback_log");
}

static void
run_case(void **state)
{
	const struct hcase *c = *state;
	long long before = hostile_rows();
	struct httpc_resp r;
	struct hreq q;

	memset(&q, 0, sizeof(q));
	c->build(&q);
	if (q.raw)
		assert_int_equal(httpc_raw(port, q.n.body, q.n.len, 6000, &r), 0);
	else
		assert_int_equal(httpc_request(port, q.method, q.path, q.n.headers, q.n.body,
		                               q.n.len, 10000, &r),
		                 0);
	free(q.n.body);
	if (c->want_status == 0) {
		if (r.status != 0 && r.status < 400)
			fail_msg("%s: got %d, want no answer or an error", c->name, r.status);
	} else if (r.status != c->want_status || (c->want_body && !strstr(r.body, c->want_body))) {
		fail_msg("%s: got %d '%s', want %d '%s'", c->name, r.status, r.body, c->want_status,
		         c->want_body ? c->want_body : "");
	}
	if (hostile_rows() != before)
		fail_msg("%s: a row was stored", c->name);
}

/* ---- connection-level abuse ------------------------------------------------------------- */

static int
connect_local(void)
{
	struct sockaddr_in sin;
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		close(fd);
		return -1;
	}
	return fd;
}

static void
slow_clients_do_not_block_valid_traffic(void **state)
{
	enum { N = 60 };
	int fds[N];
	struct chan_note n;
	struct httpc_resp r;
	long long t0;

	(void)state;
	/* Each slow client sends half a request line and then nothing. */
	for (int i = 0; i < N; i++) {
		fds[i] = connect_local();
		assert_true(fds[i] >= 0);
		assert_true(send(fds[i], "POST /pay/call", 14, MSG_NOSIGNAL) == 14);
	}
	assert_int_equal(chan_stripe_pay(&n, K.stripe_new, "SLOW-1", "pi_slow1", 100, time(NULL)),
	                 0);
	t0 = harness_now_ms();
	assert_int_equal(chan_post(port, "/pay/callback/stripe", &n, &r), 0);
	assert_int_equal(r.status, 200);
	assert_true(harness_now_ms() - t0 < 2000);
	free(n.body);
	/* The read timeout (2 s here) closes the slow connections: a read sees EOF. */
	for (int i = 0; i < N; i++) {
		char b[16];
		struct timeval tv = {8, 0};
		setsockopt(fds[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
		assert_true(recv(fds[i], b, sizeof(b), 0) <= 0);
		close(fds[i]);
	}
}

struct flood {
	int status;
};

static void *
flood_one(void *arg)
{
	struct flood *f = arg;
	struct hreq q;
	struct httpc_resp r;

	memset(&q, 0, sizeof(q));
	wx_bad_signature(&q);
	if (httpc_request(port, "POST", "/pay/callback/wxpay", q.n.headers, q.n.body, q.n.len,
	                  15000, &r) == 0)
		f->status = r.status;
	free(q.n.body);
	return NULL;
}

static void
flood_of_unverified_requests_is_refused_quickly(void **state)
{
	enum { N = 150 };
	static struct flood f[N];
	pthread_t t[N];
	long long before = hostile_rows();
	int refused = 0, other = 0;

	(void)state;
	for (int i = 0; i < N; i++)
		assert_int_equal(pthread_create(&t[i], NULL, flood_one, &f[i]), 0);
	for (int i = 0; i < N; i++) {
		pthread_join(t[i], NULL);
		if (f[i].status == 401 || f[i].status == 503)
			refused++;
		else
			other++;
	}
	assert_int_equal(other, 0);
	assert_int_equal(refused, N);
	assert_int_equal(hostile_rows(), before);
}

static void
valid_traffic_was_served_throughout(void **state)
{
	(void)state;
	atomic_store(&bg_stop, 1);
	pthread_join(bg_thread, NULL);
	printf("# background valid requests: %d stored, %d failed\n", atomic_load(&bg_ok),
	       atomic_load(&bg_bad));
	assert_true(atomic_load(&bg_ok) > 10);
	assert_int_equal(atomic_load(&bg_bad), 0);
	assert_int_equal(chan_rows(&db, "pay_callback_log WHERE out_trade_no LIKE 'BG%'"),
	                 atomic_load(&bg_ok));
	assert_int_equal(chan_stop(ingest_pid), 0);
	ingest_pid = 0;
}

static char log_path[300];

static void
logs_hold_no_secret_and_no_body(void **state)
{
	char *pw = NULL, err[256];
	const char *needles[8];
	size_t len = 0, nn = 0;
	FILE *fp;
	char *text;
	long sz;

	(void)state;
	assert_int_equal(cfg_read_secret(cf.db.password_file, &pw, &len, err, sizeof(err)), 0);
	needles[nn++] = K.stripe_new;
	needles[nn++] = K.stripe_old;
	needles[nn++] = (const char *)K.apiv3;
	needles[nn++] = pw;
	needles[nn++] = "\"ciphertext\"";               /* a WeChat body */
	needles[nn++] = "\"payment_intent.succeeded\""; /* a Stripe body */
	needles[nn++] = "trade_status=TRADE_SUCCESS";   /* an Alipay body */
	needles[nn++] = "DROP TABLE";                   /* a hostile body */
	fp = fopen(log_path, "r");
	assert_non_null(fp);
	fseek(fp, 0, SEEK_END);
	sz = ftell(fp);
	fseek(fp, 0, SEEK_SET);
	text = calloc(1, (size_t)sz + 1);
	assert_int_equal(fread(text, 1, (size_t)sz, fp), (size_t)sz);
	fclose(fp);
	assert_true(sz > 1000);
	for (size_t i = 0; i < nn; i++)
		if (strstr(text, needles[i]))
			fail_msg("the ingest log contains needle %zu", i);
	free(text);
	free(pw);
}

int
main(void)
{
	struct CMUnitTest tests[NCASES + 4];
	char conf[300], *log = log_path;
	size_t n = 0;
	int rc;

	for (size_t i = 0; i < NCASES; i++)
		tests[n++] = (struct CMUnitTest){cases[i].name, run_case, NULL, NULL, &cases[i]};
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(slow_clients_do_not_block_valid_traffic);
	tests[n++] =
	    (struct CMUnitTest)cmocka_unit_test(flood_of_unverified_requests_is_refused_quickly);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(valid_traffic_was_served_throughout);
	tests[n++] = (struct CMUnitTest)cmocka_unit_test(logs_hold_no_secret_and_no_body);
	if (harness_setup(&cf, "hostile", NULL) != 0 || chan_keys_new(&K) != 0)
		return 1;
	harness_db(&cf, &db);
	port = httpc_free_port();
	admin_port = httpc_free_port();
	snprintf(conf, sizeof(conf), "%s/paycb.conf", K.dir);
	snprintf(log_path, sizeof(log_path), "%s/ingest.log", K.dir);
	/* A small unverified limit so the flood is shed with 503s rather than queued. */
	if (chan_write_conf(&cf, &K, conf, cf.kafka.brokers, port, admin_port,
	                    "max_unverified = 16; max_inflight = 256;") != 0 ||
	    (ingest_pid = chan_spawn_ingest(conf, log, admin_port)) < 0)
		return 1;
	pthread_create(&bg_thread, NULL, background, NULL);
	rc = _cmocka_run_group_tests("hostile", tests, n, NULL, NULL);
	if (!atomic_load(&bg_stop)) {
		atomic_store(&bg_stop, 1);
		pthread_join(bg_thread, NULL);
	}
	if (ingest_pid > 0)
		chan_stop(ingest_pid);
	chan_keys_free(&K);
	db_close(&db);
	harness_teardown(&cf);
	return rc;
}
