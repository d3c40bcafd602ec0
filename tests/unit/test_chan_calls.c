/*
 * test_chan_calls - the outbound channel clients (chan_client.h) against a small channel
 * server started inside the test on 127.0.0.1 (libmicrohttpd, one thread per connection).
 *
 * The server plays WeChat Pay, Alipay and Stripe under /wx, /ali and /stripe: it checks each
 * request's signature or key with chan_sign.h's server halves (answering 401 / an Alipay
 * error when they fail), and answers as the test's current mode says: signed, forged,
 * unsigned, about another order, 5xx, 429, slow, or with the connection dropped. Each case
 * asserts the result's classification, and for effectful calls that nothing was done twice.
 * Keys are generated at test time (tests/support/testkeys.c).
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <jansson.h>
#include <microhttpd.h>

#include "chan_client.h"
#include "chan_int.h"
#include "clock.h"
#include "httpd.h"
#include "form.h"
#include "testkeys.h"

enum mode { M_OK, M_FORGED, M_NOSIG, M_OTHER, M_500, M_429, M_400, M_SLOW, M_DROP, M_SYSERR };

static struct {
	struct MHD_Daemon *d;
	int port;
	volatile int mode;
	volatile int requests, bad_auth, conns;
	char idem[256];  /* the last Idempotency-Key seen */
	char last[4096]; /* the last request body */
	EVP_PKEY *wx_merchant, *wx_platform, *ali_app, *ali_alipay, *stranger;
} S;

#define MCHID "1230000109"

struct req {
	int started;
	char *uri;
	char *body;
	size_t len;
};

static void *
uri_cb(void *cls, const char *uri, struct MHD_Connection *c)
{
	struct req *r = calloc(1, sizeof(*r));

	(void)cls, (void)c;
	r->uri = strdup(uri);
	return r;
}

static void
done_cb(void *cls, struct MHD_Connection *c, void **req_cls, enum MHD_RequestTerminationCode t)
{
	struct req *r = *req_cls;

	(void)cls, (void)c, (void)t;
	if (r != NULL) {
		free(r->uri);
		free(r->body);
		free(r);
	}
	*req_cls = NULL;
}

static void
conn_cb(void *cls, struct MHD_Connection *c, void **socket_context,
        enum MHD_ConnectionNotificationCode code)
{
	(void)cls, (void)c, (void)socket_context;
	if (code == MHD_CONNECTION_NOTIFY_STARTED)
		__sync_fetch_and_add(&S.conns, 1);
}

static enum MHD_Result
answer(struct MHD_Connection *c, unsigned status, const char *body, const char *const *hdrs)
{
	struct MHD_Response *resp = httpd_response_copy(body, strlen(body));
	enum MHD_Result rc;

	if (resp == NULL)
		return MHD_NO;

	for (; hdrs != NULL && hdrs[0] != NULL; hdrs += 2)
		MHD_add_response_header(resp, hdrs[0], hdrs[1]);
	MHD_add_response_header(resp, "Content-Type", "application/json");
	MHD_add_response_header(resp, "Request-ID", "req-test-1");
	rc = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return rc;
}

/* wx_answer - a WeChat answer, signed (or not) as the mode says. */
static enum MHD_Result
wx_answer(struct MHD_Connection *c, unsigned status, const char *body)
{
	char ts[24], nonce[33], *sig = NULL;
	const char *hdrs[9] = {NULL};
	EVP_PKEY *k = S.mode == M_FORGED ? S.stranger : S.wx_platform;
	enum MHD_Result rc;

	snprintf(ts, sizeof(ts), "%lld", (long long)time(NULL));
	chan_wx_nonce(nonce);
	assert_int_equal(
	    chan_wx_sign_response(k, atoll(ts), nonce, (const uint8_t *)body, strlen(body), &sig),
	    0);
	if (S.mode != M_NOSIG) {
		const char *h[] = {"Wechatpay-Timestamp", ts,  "Wechatpay-Nonce",  nonce,
		                   "Wechatpay-Signature", sig, "Wechatpay-Serial", "PUB_KEY_ID_01"};
		memcpy(hdrs, h, sizeof(h));
	}
	rc = answer(c, status, body, hdrs);
	free(sig);
	return rc;
}

static enum MHD_Result
wx_serve(struct MHD_Connection *c, const char *method, struct req *r)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *out = S.mode == M_OTHER ? "ANOTHER" : "T1";
	char body[512];

	if (chan_wx_verify_request(S.wx_merchant, MCHID, "5157F09EFDC096DE15EBE81A47057A72", auth,
	                           method, r->uri, (const uint8_t *)r->body, r->len, time(NULL),
	                           0) != CHAN_VR_OK) {
		S.bad_auth++;
		return answer(c, 401, "{\"code\":\"SIGN_ERROR\",\"message\":\"bad\"}", NULL);
	}
	if (S.mode == M_500)
		return answer(c, 500, "{\"code\":\"SYSTEM_ERROR\",\"message\":\"x\"}", NULL);
	if (S.mode == M_429)
		return answer(c, 429, "{\"code\":\"RATELIMIT_EXCEEDED\",\"message\":\"x\"}", NULL);
	if (S.mode == M_400)
		return answer(c, 400, "{\"code\":\"PARAM_ERROR\",\"message\":\"x\"}", NULL);
	if (strncmp(r->uri, "/wx/v3/pay/transactions/out-trade-no/", 37) == 0 &&
	    strstr(r->uri, "/close") != NULL)
		return wx_answer(c, 204, "");
	if (strncmp(r->uri, "/wx/v3/pay/transactions/out-trade-no/", 37) == 0) {
		snprintf(body, sizeof(body),
		         "{\"mchid\":\"" MCHID "\",\"out_trade_no\":\"%s\",\"transaction_id\":"
		         "\"4200000001\",\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":100,"
		         "\"payer_total\":100,\"currency\":\"CNY\"}}",
		         out);
		return wx_answer(c, 200, body);
	}
	if (strcmp(r->uri, "/wx/v3/refund/domestic/refunds") == 0 ||
	    strncmp(r->uri, "/wx/v3/refund/domestic/refunds/", 31) == 0) {
		snprintf(
		    body, sizeof(body),
		    "{\"refund_id\":\"50000\",\"out_refund_no\":\"%s\",\"out_trade_no\":\"T1\","
		    "\"status\":\"%s\",\"amount\":{\"refund\":40,\"total\":100,\"currency\":"
		    "\"CNY\"}}",
		    S.mode == M_OTHER ? "R9" : "R1",
		    strcmp(method, "POST") == 0 ? "PROCESSING" : "SUCCESS");
		return wx_answer(c, 200, body);
	}
	return answer(c, 404, "{\"code\":\"NOT_FOUND\"}", NULL);
}

static enum MHD_Result
ali_serve(struct MHD_Connection *c, struct req *r)
{
	struct form f = {0};
	struct chan_kv kv[32];
	const char *method = NULL, *biz = NULL;
	char err[128], node[512], *body = NULL;
	json_t *b = NULL;
	enum MHD_Result rc;

	if (form_decode((const uint8_t *)r->body, r->len, &f, err, sizeof(err)) != 0 || f.n > 32)
		fail_msg("alipay request not a form: %s", err);
	for (size_t i = 0; i < f.n; i++) {
		kv[i] = (struct chan_kv){f.pairs[i].key, f.pairs[i].val};
		if (strcmp(kv[i].k, "method") == 0)
			method = kv[i].v;
		if (strcmp(kv[i].k, "biz_content") == 0)
			biz = kv[i].v;
	}
	assert_non_null(method);
	assert_non_null(biz);
	b = json_loads(biz, 0, NULL);
	if (chan_ali_verify_params(S.ali_app, kv, f.n) != CHAN_VR_OK) {
		S.bad_auth++;
		snprintf(node, sizeof(node),
		         "{\"code\":\"40002\",\"msg\":\"Invalid Arguments\","
		         "\"sub_code\":\"isv.invalid-signature\"}");
	} else if (S.mode == M_SYSERR) {
		snprintf(node, sizeof(node),
		         "{\"code\":\"20000\",\"msg\":\"Service Currently Unavailable\","
		         "\"sub_code\":\"isp.unknow-error\"}");
	} else if (S.mode == M_400) {
		snprintf(node, sizeof(node),
		         "{\"code\":\"40004\",\"msg\":\"Business Failed\","
		         "\"sub_code\":\"ACQ.SELLER_BALANCE_NOT_ENOUGH\"}");
	} else if (strcmp(method, "alipay.trade.query") == 0) {
		snprintf(node, sizeof(node),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"2024051322001\","
		         "\"out_trade_no\":\"%s\",\"trade_status\":\"TRADE_SUCCESS\","
		         "\"total_amount\":\"88.88\"}",
		         S.mode == M_OTHER ? "ANOTHER"
		                           : json_string_value(json_object_get(b, "out_trade_no")));
	} else if (strcmp(method, "alipay.trade.refund") == 0) {
		snprintf(node, sizeof(node),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"trade_no\":\"2024051322001\","
		         "\"out_trade_no\":\"%s\",\"fund_change\":\"Y\",\"refund_fee\":\"0.40\"}",
		         json_string_value(json_object_get(b, "out_trade_no")));
	} else if (strcmp(method, "alipay.trade.fastpay.refund.query") == 0) {
		snprintf(node, sizeof(node),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"%s\","
		         "\"out_request_no\":\"%s\"}",
		         json_string_value(json_object_get(b, "out_trade_no")),
		         json_string_value(json_object_get(b, "out_request_no")));
	} else {
		snprintf(node, sizeof(node),
		         "{\"code\":\"10000\",\"msg\":\"Success\",\"out_trade_no\":\"%s\"}",
		         json_string_value(json_object_get(b, "out_trade_no")));
	}
	if (S.mode == M_NOSIG || (S.mode == M_400 && S.bad_auth == 0)) {
		char key[96];

		snprintf(key, sizeof(key), "%s", method);
		for (char *p = key; *p; p++)
			if (*p == '.')
				*p = '_';
		if (asprintf(&body, "{\"%s_response\":%s}", key, node) < 0)
			fail();
	} else {
		assert_int_equal(
		    chan_ali_sign_response(S.mode == M_FORGED ? S.stranger : S.ali_alipay, method,
		                           node, &body),
		    0);
	}
	rc = answer(c, 200, body, NULL);
	free(body);
	json_decref(b);
	form_free(&f);
	return rc;
}

static enum MHD_Result
stripe_serve(struct MHD_Connection *c, const char *method, struct req *r)
{
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	const char *ver = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Stripe-Version");
	const char *idem = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Idempotency-Key");
	static const char pi[] = "{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"status\":\"%s\","
	                         "\"amount\":1999,\"currency\":\"usd\",\"metadata\":{\"order_id\":"
	                         "\"T1\"}}";
	static const char re[] = "{\"id\":\"re_1\",\"object\":\"refund\",\"status\":\"succeeded\","
	                         "\"amount\":500,\"currency\":\"usd\",\"metadata\":{\"order_id\":"
	                         "\"T1\",\"paycb_refund_no\":\"R1\"}}";
	char body[1024];

	if (auth == NULL || strcmp(auth, "Bearer sk_test_123") != 0 || ver == NULL ||
	    strcmp(ver, CHAN_STRIPE_VERSION) != 0 ||
	    (strcmp(method, "POST") == 0 && idem == NULL)) {
		S.bad_auth++;
		return answer(c, 401, "{\"error\":{\"type\":\"invalid_request_error\"}}", NULL);
	}
	if (idem != NULL)
		snprintf(S.idem, sizeof(S.idem), "%s", idem);
	if (S.mode == M_500)
		return answer(c, 500, "{\"error\":{\"type\":\"api_error\"}}", NULL);
	if (S.mode == M_429)
		return answer(c, 429,
		              "{\"error\":{\"type\":\"invalid_request_error\",\"code\":"
		              "\"rate_limit\"}}",
		              NULL);
	if (S.mode == M_400)
		return answer(c, 400,
		              "{\"error\":{\"type\":\"invalid_request_error\",\"code\":"
		              "\"charge_already_refunded\"}}",
		              NULL);
	if (strncmp(r->uri, "/stripe/v1/payment_intents/search?", 34) == 0) {
		char one[300];

		snprintf(one, sizeof(one), pi, "requires_payment_method");
		snprintf(body, sizeof(body),
		         "{\"object\":\"search_result\",\"data\":[%s],"
		         "\"has_more\":false}",
		         one);
		return answer(c, 200, body, NULL);
	}
	if (strcmp(r->uri, "/stripe/v1/payment_intents/pi_1/cancel") == 0) {
		snprintf(body, sizeof(body), pi, "canceled");
		return answer(c, 200, body, NULL);
	}
	if (strcmp(r->uri, "/stripe/v1/payment_intents/pi_1") == 0) {
		snprintf(body, sizeof(body), pi, "succeeded");
		return answer(c, 200, body, NULL);
	}
	if (strcmp(r->uri, "/stripe/v1/refunds") == 0)
		return answer(c, 200, re, NULL);
	if (strcmp(r->uri, "/stripe/v1/refunds/re_1") == 0) {
		/* M_OTHER: an answer about another refund, which must never be taken for ours. */
		if (S.mode == M_OTHER)
			return answer(c, 200,
			              "{\"id\":\"re_9\",\"object\":\"refund\",\"status\":"
			              "\"failed\",\"amount\":500,\"currency\":\"usd\",\"metadata\":"
			              "{\"order_id\":\"T1\",\"paycb_refund_no\":\"R9\"}}",
			              NULL);
		return answer(c, 200, re, NULL);
	}
	if (strncmp(r->uri, "/stripe/v1/refunds?payment_intent=pi_1", 38) == 0) {
		snprintf(body, sizeof(body),
		         "{\"object\":\"list\",\"data\":[%s],\"has_more\":false}", re);
		return answer(c, 200, body, NULL);
	}
	return answer(c, 404,
	              "{\"error\":{\"type\":\"invalid_request_error\",\"code\":"
	              "\"resource_missing\"}}",
	              NULL);
}

static enum MHD_Result
handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
        const char *version, const char *data, size_t *size, void **req_cls)
{
	struct req *r = *req_cls;

	(void)cls, (void)url, (void)version;
	if (!r->started) {
		r->started = 1; /* the headers: the body, if any, comes next */
		return MHD_YES;
	}
	if (*size > 0) {
		r->body = realloc(r->body, r->len + *size + 1);
		memcpy(r->body + r->len, data, *size);
		r->len += *size;
		r->body[r->len] = '\0';
		*size = 0;
		return MHD_YES;
	}
	if (r->body == NULL)
		r->body = calloc(1, 1);
	__sync_fetch_and_add(&S.requests, 1);
	snprintf(S.last, sizeof(S.last), "%s", r->body);
	if (S.mode == M_DROP)
		return MHD_NO; /* the request arrived; the connection closes without an answer */
	if (S.mode == M_SLOW)
		usleep(1500 * 1000);
	if (strncmp(r->uri, "/wx/", 4) == 0)
		return wx_serve(c, method, r);
	if (strncmp(r->uri, "/ali/", 5) == 0)
		return ali_serve(c, r);
	return stripe_serve(c, method, r);
}

static int
setup(void **state)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};

	(void)state;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	S.wx_merchant = tk_rsa_new();
	S.wx_platform = tk_rsa_new();
	S.ali_app = tk_rsa_new();
	S.ali_alipay = tk_rsa_new();
	S.stranger = tk_rsa_new();
	S.d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0,
	                       NULL, NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &sa,
	                       MHD_OPTION_URI_LOG_CALLBACK, uri_cb, NULL,
	                       MHD_OPTION_NOTIFY_COMPLETED, done_cb, NULL,
	                       MHD_OPTION_NOTIFY_CONNECTION, conn_cb, NULL, MHD_OPTION_END);
	if (S.d == NULL)
		return -1;
	S.port = MHD_get_daemon_info(S.d, MHD_DAEMON_INFO_BIND_PORT)->port;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	MHD_stop_daemon(S.d);
	EVP_PKEY_free(S.wx_merchant);
	EVP_PKEY_free(S.wx_platform);
	EVP_PKEY_free(S.ali_app);
	EVP_PKEY_free(S.ali_alipay);
	EVP_PKEY_free(S.stranger);
	return 0;
}

static struct chan_pubkey wx_keys[2];
static EVP_PKEY *ali_keys[1];
static char url_buf[3][128];

/* client - a client of the channel on the test server, with short timeouts. */
static struct chan_client *
client(enum chan_id ch, const char *merchant, EVP_PKEY *signing_key)
{
	struct chan_client_conf cf = {
	    .channel = ch,
	    .merchant_id = merchant,
	    .connect_timeout_ms = 500,
	    .total_timeout_ms = 700,
	    .allow_http = 1,
	    .rate_per_s = 1000,
	    /* Long enough to wait out the pause a 429 puts on the bucket. */
	    .rate_wait_max_ms = 3000,
	};
	struct chan_client *c;
	char err[256];

	wx_keys[0] = (struct chan_pubkey){"5157F09EFDC096DE15EBE81A47057A71", S.stranger};
	wx_keys[1] = (struct chan_pubkey){"PUB_KEY_ID_01", S.wx_platform};
	ali_keys[0] = S.ali_alipay;
	snprintf(url_buf[0], 128, "http://127.0.0.1:%d/wx/", S.port);
	snprintf(url_buf[1], 128, "http://127.0.0.1:%d/ali/gateway.do", S.port);
	snprintf(url_buf[2], 128, "http://127.0.0.1:%d/stripe", S.port);
	cf.base_url = url_buf[ch - 1];
	cf.wx = (struct chan_wx_cred){MCHID,
	                              signing_key ? signing_key : S.wx_merchant,
	                              "5157F09EFDC096DE15EBE81A47057A72",
	                              wx_keys,
	                              2,
	                              0};
	cf.ali = (struct chan_ali_cred){"2021000122671080", signing_key ? signing_key : S.ali_app,
	                                ali_keys, 1};
	cf.stripe = (struct chan_stripe_cred){"sk_test_123", NULL, NULL};
	if (chan_client_new(&cf, &c, err, sizeof(err)) != 0)
		fail_msg("client: %s", err);
	return c;
}

static const struct chan_order_ref T1 = {"T1", NULL};

static void
expect(const struct chan_result *r, enum chan_outcome o, const char *code)
{
	if (r->outcome != o || (code != NULL && strcmp(r->code, code) != 0))
		fail_msg("got %s/%s (%s), want %s/%s", chan_outcome_name(r->outcome), r->code,
		         r->detail, chan_outcome_name(o), code ? code : "*");
}

static void
test_wx_query_payment(void **state)
{
	struct chan_client *c = client(CHAN_WXPAY, "m-wx", NULL);
	struct chan_payment p;
	struct chan_result r;
	int conns;

	(void)state;
	S.mode = M_OK;
	assert_int_equal(chan_query_payment(c, &T1, &p, &r), 0);
	assert_int_equal(p.state, CHAN_PAY_PAID);
	assert_int_equal(p.amount_minor, 100);
	assert_string_equal(p.currency, "CNY");
	assert_string_equal(p.channel_trade_no, "4200000001");
	assert_int_equal(r.authenticated, 1);
	assert_string_equal(r.request_id, "req-test-1");
	/* A second call reuses the connection. */
	conns = S.conns;
	assert_int_equal(chan_query_payment(c, &T1, &p, &r), 0);
	assert_int_equal(S.conns, conns);
	S.mode = M_FORGED;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FORGED, "bad_signature");
	S.mode = M_NOSIG;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FORGED, "bad_signature");
	S.mode = M_OTHER;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FORGED, "mismatch");
	S.mode = M_429;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "RATELIMIT_EXCEEDED");
	S.mode = M_500;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "SYSTEM_ERROR");
	S.mode = M_400;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FINAL, "PARAM_ERROR");
	assert_int_equal(r.authenticated, 0);
	assert_int_equal(S.bad_auth, 0);
	chan_client_free(c);
}

static void
test_wx_refund(void **state)
{
	struct chan_client *c = client(CHAN_WXPAY, "m-wx", NULL);
	const struct chan_refund_req q = {{"T1", NULL}, "R1", 40, 100, "CNY", "dup", NULL};
	const struct chan_refund_ref qr = {{"T1", NULL}, "R1", NULL};
	struct chan_refund f;
	struct chan_result r;
	int n;

	(void)state;
	S.mode = M_OK;
	assert_int_equal(chan_refund(c, &q, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_PENDING);
	assert_string_equal(f.refund_id, "50000");
	assert_int_equal(f.amount_minor, 40);
	assert_non_null(strstr(S.last, "\"out_refund_no\":\"R1\""));
	assert_int_equal(chan_query_refund(c, &qr, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	/* Rate-limited refunds may have been taken: query, do not resend. */
	S.mode = M_429;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, "RATELIMIT_EXCEEDED");
	S.mode = M_500;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_RETRY, "SYSTEM_ERROR");
	S.mode = M_OTHER;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_FORGED, "mismatch");
	/* Sent, then no answer in time, or the connection dropped: UNKNOWN, sent once. */
	S.mode = M_SLOW;
	n = S.requests;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, "timeout");
	S.mode = M_DROP;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, NULL);
	assert_int_equal(S.requests - n, 2);
	S.mode = M_OK;
	chan_client_free(c);
}

static void
test_wx_close_and_bad_key(void **state)
{
	struct chan_client *c = client(CHAN_WXPAY, "m-wx", NULL);
	struct chan_client *bad = client(CHAN_WXPAY, "m-wx", S.stranger);
	struct chan_result r;

	(void)state;
	S.mode = M_OK;
	assert_int_equal(chan_close(c, &T1, &r), 0);
	assert_int_equal(r.http_status, 204);
	assert_int_equal(r.authenticated, 1);
	S.mode = M_FORGED;
	chan_close(c, &T1, &r);
	expect(&r, CHAN_FORGED, "bad_signature");
	/* A request signed with the wrong key is refused by the channel: final. */
	S.mode = M_OK;
	chan_close(bad, &T1, &r);
	expect(&r, CHAN_FINAL, "SIGN_ERROR");
	assert_int_equal(S.bad_auth, 1);
	S.bad_auth = 0;
	chan_client_free(bad);
	chan_client_free(c);
}

static void
test_not_sent_is_retry(void **state)
{
	struct chan_client_conf cf = {0};
	struct chan_client *c;
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t len = sizeof(sa);
	struct chan_payment p;
	struct chan_result r;
	char url[64], err[128];
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	(void)state;
	/* A port that was just free: nothing listens there. */
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	close(fd);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(sa.sin_port));
	cf = (struct chan_client_conf){
	    .channel = CHAN_STRIPE, .merchant_id = "m-x", .base_url = url, .allow_http = 1};
	cf.stripe.secret_key = "sk_test_123";
	assert_int_equal(chan_client_new(&cf, &c, err, sizeof(err)), 0);
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "connect");
	chan_client_free(c);
	/* Plain http is refused unless allowed: nothing is sent. */
	cf.allow_http = 0;
	assert_int_equal(chan_client_new(&cf, &c, err, sizeof(err)), 0);
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FINAL, "invalid_argument");
	chan_client_free(c);
}

static void
test_ali_calls(void **state)
{
	struct chan_client *c = client(CHAN_ALIPAY, "m-ali", NULL);
	const struct chan_refund_req q = {{"T1", NULL}, "R1", 40, 100, "CNY", "正常退款", NULL};
	const struct chan_refund_ref qr = {{"T1", NULL}, "R1", NULL};
	struct chan_payment p;
	struct chan_refund f;
	struct chan_result r;

	(void)state;
	S.mode = M_OK;
	assert_int_equal(chan_query_payment(c, &T1, &p, &r), 0);
	assert_int_equal(p.state, CHAN_PAY_PAID);
	assert_int_equal(p.amount_minor, 8888);
	assert_int_equal(r.authenticated, 1);
	assert_int_equal(chan_refund(c, &q, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	assert_int_equal(f.refunded_total_minor, 40);
	assert_non_null(strstr(S.last, "refund_amount%22%3A%220.40%22"));
	assert_int_equal(chan_query_refund(c, &qr, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_NONE);
	assert_int_equal(chan_close(c, &T1, &r), 0);
	assert_int_equal(S.bad_auth, 0);
	S.mode = M_FORGED;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FORGED, "bad_signature");
	S.mode = M_NOSIG; /* an unsigned "10000" is never a success */
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_FORGED, "bad_signature");
	S.mode = M_OTHER;
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_FORGED, "mismatch");
	S.mode = M_SYSERR; /* 20000: the refund's outcome is unknown; a query may retry */
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, "isp.unknow-error");
	assert_int_equal(r.authenticated, 1);
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "isp.unknow-error");
	S.mode = M_400; /* an unsigned business failure: final, but only a hint */
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_FINAL, "ACQ.SELLER_BALANCE_NOT_ENOUGH");
	assert_int_equal(r.authenticated, 0);
	S.mode = M_SLOW;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, "timeout");
	S.mode = M_OK;
	chan_client_free(c);
	/* A request signed with another key: Alipay's signed refusal is final. */
	c = client(CHAN_ALIPAY, "m-ali", S.stranger);
	chan_close(c, &T1, &r);
	expect(&r, CHAN_FINAL, "isv.invalid-signature");
	assert_int_equal(S.bad_auth, 1);
	S.bad_auth = 0;
	chan_client_free(c);
}

static void
test_stripe_calls(void **state)
{
	struct chan_client *c = client(CHAN_STRIPE, "m-st", NULL);
	const struct chan_refund_req q = {{"T1", "pi_1"}, "R1",        500, 1999,
	                                  "USD",          "duplicate", NULL};
	const struct chan_refund_ref qr = {{"T1", "pi_1"}, "R1", NULL};
	const struct chan_refund_ref byrid = {{"T1", "pi_1"}, "R1", "re_1"};
	const struct chan_order_ref byid = {"T1", "pi_1"};
	struct chan_payment p;
	struct chan_refund f;
	struct chan_result r;

	(void)state;
	S.mode = M_OK;
	assert_int_equal(chan_query_payment(c, &T1, &p, &r), 0);
	assert_int_equal(p.state, CHAN_PAY_NOTPAY);
	assert_string_equal(p.channel_trade_no, "pi_1");
	assert_int_equal(chan_query_payment(c, &byid, &p, &r), 0);
	assert_int_equal(p.state, CHAN_PAY_PAID);
	assert_int_equal(p.amount_minor, 1999);
	assert_string_equal(p.currency, "USD");
	assert_int_equal(chan_refund(c, &q, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	assert_string_equal(f.refund_id, "re_1");
	assert_string_equal(S.idem, "paycb-refund-R1");
	assert_string_equal(S.last, "payment_intent=pi_1&amount=500&reason=duplicate&metadata["
	                            "order_id]=T1&metadata[paycb_refund_no]=R1");
	assert_int_equal(chan_query_refund(c, &qr, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	assert_int_equal(chan_query_refund(c, &byrid, &f, &r), 0);
	assert_int_equal(f.state, CHAN_REFUND_SUCCEEDED);
	assert_string_equal(f.out_refund_no, "R1");
	/* A Refund fetched by id that is another refund is no fact about ours. */
	S.mode = M_OTHER;
	chan_query_refund(c, &byrid, &f, &r);
	expect(&r, CHAN_FORGED, "mismatch");
	S.mode = M_OK;
	assert_int_equal(chan_close(c, &T1, &r), 0);
	assert_string_equal(S.idem, "paycb-close-pi_1");
	chan_close(c, &byid, &r);
	expect(&r, CHAN_FINAL, "order_paid");
	S.mode = M_500;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, "api_error");
	chan_query_payment(c, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "api_error");
	S.mode = M_429;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_RETRY, "rate_limit");
	S.mode = M_400;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_FINAL, "charge_already_refunded");
	S.mode = M_DROP;
	chan_refund(c, &q, &f, &r);
	expect(&r, CHAN_UNKNOWN, NULL);
	assert_int_equal(S.bad_auth, 0);
	S.mode = M_OK;
	chan_client_free(c);
}

/* The bucket is shared by the clients of one merchant and channel; an empty one refuses
 * without sending. */
static void
test_rate_limit(void **state)
{
	struct chan_client_conf cf = {.channel = CHAN_STRIPE,
	                              .merchant_id = "m-rate",
	                              .allow_http = 1,
	                              .rate_per_s = 0.5,
	                              .rate_burst = 1,
	                              .rate_wait_max_ms = 1};
	struct chan_client *a, *b, *other;
	struct chan_payment p;
	struct chan_result r;
	char err[128];
	int n;

	(void)state;
	cf.base_url = url_buf[2];
	cf.stripe.secret_key = "sk_test_123";
	assert_int_equal(chan_client_new(&cf, &a, err, sizeof(err)), 0);
	assert_int_equal(chan_client_new(&cf, &b, err, sizeof(err)), 0);
	cf.merchant_id = "m-rate-2";
	assert_int_equal(chan_client_new(&cf, &other, err, sizeof(err)), 0);
	S.mode = M_OK;
	n = S.requests;
	assert_int_equal(chan_query_payment(a, &T1, &p, &r), 0);
	chan_query_payment(b, &T1, &p, &r);
	expect(&r, CHAN_RETRY, "rate_limited");
	assert_int_equal(S.requests - n, 1);
	assert_int_equal(chan_query_payment(other, &T1, &p, &r), 0);
	chan_client_free(a);
	chan_client_free(b);
	chan_client_free(other);
	{
		struct chan_rate *rt = chan_rate_get("m-clock", CHAN_WXPAY, 10, 2);
		long long t = clock_mono_ms() + 10;

		assert_int_equal(chan_rate_take(rt, t), 0);
		assert_int_equal(chan_rate_take(rt, t), 0);
		assert_true(chan_rate_take(rt, t) > 0);
		assert_int_equal(chan_rate_take(rt, t + 101), 0);
		chan_rate_pause(rt, t + 101, 5000);
		assert_true(chan_rate_take(rt, t + 4000) > 0);
		assert_int_equal(chan_rate_take(rt, t + 6300), 0);
		chan_rate_put(rt);
	}
}

/* The request bodies match the vectors' shapes: W-D3's refund JSON, A-D2's biz_content. */
static void
test_request_bodies(void **state)
{
	const struct chan_refund_req wx = {{"1217752501201407033233368018", NULL},
	                                   "R1217752501201407033233368018",
	                                   1,
	                                   1,
	                                   "CNY",
	                                   "商品已售完",
	                                   "https://weixin.qq.com"};
	const struct chan_refund_req ali = {
	    {"20150320010101001", NULL}, "HZ01RF001", 1, 100, "CNY", "正常退款", NULL};
	char *b;

	(void)state;
	assert_int_equal(chan_wx_refund_body(&wx, &b), 0);
	assert_string_equal(b, "{\"out_trade_no\":\"1217752501201407033233368018\",\"out_refund_"
	                       "no\":\"R1217752501201407033233368018\",\"reason\":\"商品已售完\","
	                       "\"notify_url\":\"https://weixin.qq.com\",\"amount\":{\"refund\":1,"
	                       "\"total\":1,\"currency\":\"CNY\"}}");
	free(b);
	assert_int_equal(chan_ali_refund_biz(&ali, &b), 0);
	assert_string_equal(b, "{\"out_trade_no\":\"20150320010101001\",\"refund_amount\":\"0.01\","
	                       "\"out_request_no\":\"HZ01RF001\",\"refund_reason\":\"正常退款\"}");
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_request_bodies),    cmocka_unit_test(test_wx_query_payment),
	    cmocka_unit_test(test_wx_refund),         cmocka_unit_test(test_wx_close_and_bad_key),
	    cmocka_unit_test(test_not_sent_is_retry), cmocka_unit_test(test_ali_calls),
	    cmocka_unit_test(test_stripe_calls),      cmocka_unit_test(test_rate_limit),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
