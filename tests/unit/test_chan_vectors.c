/*
 * test_chan_vectors - the outbound signing and verification of chan_sign.h against the SDK
 * vectors vendored in tests/vectors/outbound (see its README for their provenance): WeChat
 * Pay request signatures and answer verification, Alipay request signatures and answer-node
 * extraction and verification, Stripe form encoding. Also the negative cases each scheme
 * must refuse, and the server halves (verify a request, sign an answer) round-tripping.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <openssl/evp.h>

#include "chan_sign.h"
#include "form.h"
#include "crypto.h"
#include "digest.h"

#define VEC "tests/vectors/outbound/"

static json_t *
load_json(const char *rel)
{
	json_error_t e;
	json_t *j = json_load_file(rel, 0, &e);

	if (j == NULL)
		fail_msg("%s: %s (line %d)", rel, e.text, e.line);
	return j;
}

static EVP_PKEY *
load_priv(const char *rel)
{
	EVP_PKEY *k = NULL;
	char err[256];
	uint8_t *buf;
	size_t len;

	/* The vectors' keys are public test keys checked in 0644, so they are read as plain
	 * files; crypto_load_privkey_file would refuse them as shared secrets. */
	if (crypto_read_file(rel, 1 << 16, &buf, &len, err, sizeof(err)) != 0 ||
	    crypto_load_privkey_mem(buf, len, &k, err, sizeof(err)) != 0)
		fail_msg("%s: %s", rel, err);
	free(buf);
	return k;
}

static EVP_PKEY *
load_pub(const char *rel)
{
	EVP_PKEY *k = NULL;
	char err[256];

	if (crypto_load_pubkey_file(rel, &k, err, sizeof(err)) != 0)
		fail_msg("%s: %s", rel, err);
	return k;
}

static const char *
str(const json_t *o, const char *k)
{
	const char *s = json_string_value(json_object_get(o, k));

	assert_non_null(s);
	return s;
}

/* W-O1: the bare signature over "source" with the official key. */
static void
test_wx_o1_signature(void **state)
{
	json_t *c = load_json(VEC "wechatpay/request_cases.json");
	EVP_PKEY *k = load_priv(VEC "wechatpay/w_o1_merchant_key.pem");
	const json_t *o1 = json_object_get(c, "W-O1");
	uint8_t *sig;
	size_t siglen;
	char *b64;

	(void)state;
	assert_int_equal(crypto_rsa_sha256_sign(k, (const uint8_t *)"source", 6, &sig, &siglen), 0);
	b64 = crypto_b64_encode_alloc(sig, siglen);
	assert_string_equal(b64, str(o1, "signature"));
	free(b64);
	free(sig);
	EVP_PKEY_free(k);
	json_decref(c);
}

/* W-O2: the message layout, including a body that ends in LF getting its own LF. */
static void
test_wx_o2_message_layout(void **state)
{
	json_t *c = load_json(VEC "wechatpay/request_cases.json"), *v;
	size_t i;

	(void)state;
	json_array_foreach(json_object_get(c, "W-O2"), i, v)
	{
		const char *body = str(v, "body");
		char *msg;
		size_t mlen;

		assert_int_equal(
		    chan_wx_request_message(str(v, "method"), str(v, "url"),
		                            json_integer_value(json_object_get(v, "timestamp")),
		                            str(v, "nonce"), (const uint8_t *)body, strlen(body),
		                            &msg, &mlen),
		    0);
		assert_int_equal(mlen, strlen(str(v, "message")));
		assert_memory_equal(msg, str(v, "message"), mlen);
		free(msg);
	}
	json_decref(c);
}

/* W-D1..W-D4: full Authorization headers from absolute URLs, and the server side accepting
 * them (and refusing them once a byte of the request changes). */
static void
test_wx_d_requests(void **state)
{
	json_t *c = load_json(VEC "wechatpay/request_cases.json"), *v;
	EVP_PKEY *k = load_priv(VEC "wechatpay/w_o1_merchant_key.pem");
	EVP_PKEY *pub = load_pub(VEC "wechatpay/go_verifier_pubkey.pem");
	const char *mchid = str(c, "mchid"), *serial = str(c, "serial");
	size_t i;

	(void)state;
	json_array_foreach(json_object_get(c, "requests"), i, v)
	{
		const char *body = str(v, "body"), *curl;
		long long ts = json_integer_value(json_object_get(v, "timestamp"));
		char auth[CHAN_WX_AUTH_MAX], want[CHAN_WX_AUTH_MAX], hex[65], *msg;
		size_t mlen, blen = strlen(body);

		assert_int_equal(chan_wx_canonical_url(str(v, "url"), &curl), 0);
		assert_int_equal(chan_wx_request_message(str(v, "method"), curl, ts,
		                                         str(v, "nonce"), (const uint8_t *)body,
		                                         blen, &msg, &mlen),
		                 0);
		assert_int_equal(digest_sha256_hex(msg, mlen, hex), 0);
		if (strcmp(hex, str(v, "msg_sha256")) != 0)
			fail_msg("%s: message hash %s", str(v, "id"), hex);
		free(msg);
		assert_int_equal(chan_wx_authorization(k, mchid, serial, str(v, "method"), curl, ts,
		                                       str(v, "nonce"), (const uint8_t *)body, blen,
		                                       auth, sizeof(auth)),
		                 0);
		snprintf(
		    want, sizeof(want),
		    "WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"%s\",timestamp=\"%lld\","
		    "serial_no=\"%s\",signature=\"%s\"",
		    mchid, str(v, "nonce"), ts, serial, str(v, "signature"));
		assert_string_equal(auth, want);
		assert_int_equal(chan_wx_verify_request(pub, mchid, serial, auth, str(v, "method"),
		                                        curl, (const uint8_t *)body, blen, ts + 10,
		                                        0),
		                 CHAN_VR_OK);
		assert_int_equal(chan_wx_verify_request(pub, mchid, serial, auth, "PUT", curl,
		                                        (const uint8_t *)body, blen, ts, 0),
		                 CHAN_VR_SIGNATURE);
		assert_int_equal(chan_wx_verify_request(pub, mchid, serial, auth, str(v, "method"),
		                                        curl, (const uint8_t *)body, blen, ts + 300,
		                                        0),
		                 CHAN_VR_SKEW);
		assert_int_equal(chan_wx_verify_request(pub, "1230000109", serial, auth,
		                                        str(v, "method"), curl,
		                                        (const uint8_t *)body, blen, ts, 0),
		                 CHAN_VR_KEY);
	}
	EVP_PKEY_free(k);
	EVP_PKEY_free(pub);
	json_decref(c);
}

/* W-R1: a 204 answer's signature over "ts\nnonce\n\n", the skew boundary, and what must
 * fail: a changed body, a missing header, an unknown serial, a SIGNTEST probe. */
static void
test_wx_r1_response(void **state)
{
	json_t *c = load_json(VEC "wechatpay/request_cases.json");
	EVP_PKEY *pub = load_pub(VEC "wechatpay/go_verifier_pubkey.pem");
	const json_t *r = json_object_get(c, "W-R1");
	const char *ts = str(r, "timestamp"), *nonce = str(r, "nonce"), *sig = str(r, "signature");
	struct chan_pubkey keys[2] = {{"PUB_KEY_ID_0001", NULL}, {"00F5765756002fdd77", pub}};
	time_t t = 1554209980;

	(void)state;
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, sig, str(r, "serial"),
	                                         (const uint8_t *)"", 0, t + 299),
	                 CHAN_VR_OK);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, sig, str(r, "serial"),
	                                         (const uint8_t *)"", 0, t - 299),
	                 CHAN_VR_OK);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, sig, str(r, "serial"),
	                                         (const uint8_t *)"", 0, t + 300),
	                 CHAN_VR_SKEW);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, sig, str(r, "serial"),
	                                         (const uint8_t *)"{}", 2, t),
	                 CHAN_VR_SIGNATURE);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, NULL, str(r, "serial"),
	                                         (const uint8_t *)"", 0, t),
	                 CHAN_VR_MISSING);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, sig, "ABCDEF",
	                                         (const uint8_t *)"", 0, t),
	                 CHAN_VR_KEY);
	assert_int_equal(chan_wx_verify_response(keys, 2, 0, ts, nonce, "WECHATPAY/SIGNTEST/abc",
	                                         str(r, "serial"), (const uint8_t *)"", 0, t),
	                 CHAN_VR_MALFORMED);
	EVP_PKEY_free(pub);
	json_decref(c);
}

/* The answer signer and verifier agree, for a body and for an empty one. */
static void
test_wx_response_round_trip(void **state)
{
	EVP_PKEY *k = load_priv(VEC "wechatpay/w_o1_merchant_key.pem");
	EVP_PKEY *pub = load_pub(VEC "wechatpay/go_verifier_pubkey.pem");
	struct chan_pubkey key = {"PUB_KEY_ID_0114", pub};
	const char *body = "{\"trade_state\":\"SUCCESS\"}";
	char nonce[33], *sig;

	(void)state;
	assert_int_equal(chan_wx_nonce(nonce), 0);
	assert_int_equal(strlen(nonce), 32);
	assert_int_equal(
	    chan_wx_sign_response(k, 1700000000, nonce, (const uint8_t *)body, strlen(body), &sig),
	    0);
	assert_int_equal(chan_wx_verify_response(&key, 1, 0, "1700000000", nonce, sig,
	                                         "PUB_KEY_ID_0114", (const uint8_t *)body,
	                                         strlen(body), 1700000001),
	                 CHAN_VR_OK);
	/* A public-key id matches exactly, never as a number. */
	assert_int_equal(chan_wx_verify_response(&key, 1, 0, "1700000000", nonce, sig,
	                                         "PUB_KEY_ID_114", (const uint8_t *)body,
	                                         strlen(body), 1700000001),
	                 CHAN_VR_KEY);
	free(sig);
	EVP_PKEY_free(k);
	EVP_PKEY_free(pub);
}

/* The canonical URL is the path and query as sent; a fragment is refused. */
static void
test_wx_canonical_url(void **state)
{
	const char *u;

	(void)state;
	assert_int_equal(chan_wx_canonical_url("https://h:8443/v3/x?a=%20b", &u), 0);
	assert_string_equal(u, "/v3/x?a=%20b");
	assert_int_equal(chan_wx_canonical_url("http://127.0.0.1:1?q", &u), -1);
	assert_int_equal(chan_wx_canonical_url("https://h", &u), 0);
	assert_string_equal(u, "/");
	assert_int_equal(chan_wx_canonical_url("https://h/a#f", &u), -1);
	assert_int_equal(chan_wx_canonical_url("/v3/x", &u), -1);
}

/*
 * wire_round_trip - the parameters form-encoded as the client posts them (spaces, UTF-8,
 * JSON quotes and the base64 sign all escaped), decoded as the gateway (and the simulator)
 * reads them, then verified: what arrives must be what was signed.
 */
static enum chan_vr
wire_round_trip(EVP_PKEY *pub, const struct chan_kv *p, size_t n)
{
	struct form f = {0}, g = {0};
	struct chan_kv kv[16];
	char err[128], *body;
	enum chan_vr vr = CHAN_VR_MALFORMED;

	for (size_t i = 0; i < n; i++)
		assert_int_equal(form_add(&f, p[i].k, strlen(p[i].k), p[i].v, strlen(p[i].v)), 0);
	assert_non_null(body = form_encode(&f));
	assert_null(strchr(body, ' '));
	if (form_decode((const uint8_t *)body, strlen(body), &g, err, sizeof(err)) == 0 &&
	    g.n == n) {
		for (size_t i = 0; i < g.n; i++)
			kv[i] = (struct chan_kv){g.pairs[i].key, g.pairs[i].val};
		vr = chan_ali_verify_params(pub, kv, g.n);
	}
	free(body);
	form_free(&f);
	form_free(&g);
	return vr;
}

/* A-D1, A-D2: the string to sign and the RSA2 signature from the parameters, and the
 * signature still verifying after the trip through the form encoding. */
static void
test_ali_d_requests(void **state)
{
	json_t *c = load_json(VEC "alipay/cases.json"), *v;
	EVP_PKEY *k = load_priv(VEC "alipay/a_d_app_private_key.pem");
	EVP_PKEY *pub = load_pub(VEC "alipay/a_d_app_public_key.pem");
	size_t i;

	(void)state;
	json_array_foreach(json_object_get(c, "requests"), i, v)
	{
		const json_t *ps = json_object_get(v, "params");
		struct chan_kv p[16];
		size_t n = json_array_size(ps);
		char *content, *sign;
		size_t clen;

		assert_true(n + 2 <= 16);
		/* In reverse order, plus an empty one and a sign: the result must not care. */
		for (size_t j = 0; j < n; j++) {
			const json_t *kv = json_array_get(ps, n - 1 - j);
			p[j] = (struct chan_kv){json_string_value(json_array_get(kv, 0)),
			                        json_string_value(json_array_get(kv, 1))};
		}
		p[n] = (struct chan_kv){"notify_url", ""};
		assert_int_equal(chan_ali_sign_content(p, n + 1, &content, &clen), 0);
		assert_string_equal(content, str(v, "sign_content"));
		free(content);
		assert_int_equal(chan_ali_sign_params(k, p, n + 1, &sign), 0);
		assert_string_equal(sign, str(v, "sign"));
		p[n + 1] = (struct chan_kv){"sign", sign};
		assert_int_equal(chan_ali_verify_params(pub, p, n + 2), CHAN_VR_OK);
		assert_int_equal(wire_round_trip(pub, p, n + 2), CHAN_VR_OK);
		p[0].v = "tampered";
		assert_int_equal(chan_ali_verify_params(pub, p, n + 2), CHAN_VR_SIGNATURE);
		free(sign);
	}
	EVP_PKEY_free(k);
	EVP_PKEY_free(pub);
	json_decref(c);
}

/* A-O1: the official answer verifies over its raw node; a wrong sign, a changed node, a
 * missing sign, a duplicated node and the wrong key fail. */
static void
test_ali_o1_response(void **state)
{
	json_t *c = load_json(VEC "alipay/cases.json");
	const json_t *v = json_array_get(json_object_get(c, "responses"), 0);
	EVP_PKEY *pub = load_pub(VEC "alipay/a_o1_alipay_public_key.pem");
	EVP_PKEY *other = load_pub(VEC "alipay/a_d_app_public_key.pem");
	EVP_PKEY *keys[2] = {other, pub};
	const char *body = str(v, "body"), *m = str(v, "method");
	struct chan_ali_node node;
	char *bad;
	size_t blen = strlen(body);

	(void)state;
	assert_int_equal(chan_ali_verify_response(keys, 2, (const uint8_t *)body, blen, m, &node),
	                 CHAN_VR_OK);
	assert_int_equal(node.len, strlen(str(v, "node")));
	assert_memory_equal(node.text, str(v, "node"), node.len);
	assert_int_equal(node.is_error, 0);
	assert_int_equal(chan_ali_verify_response(keys, 1, (const uint8_t *)body, blen, m, &node),
	                 CHAN_VR_SIGNATURE);
	bad = strdup(body);
	memcpy(strstr(bad, "Success"), "Suczess", 7);
	assert_int_equal(chan_ali_verify_response(keys, 2, (const uint8_t *)bad, blen, m, &node),
	                 CHAN_VR_SIGNATURE);
	free(bad);
	{
		const char *wrong = "{\"alipay_open_file_upload_response\":{\"code\":\"10000\"},"
		                    "\"sign\":\"wrong-sing\"}";
		const char *none = "{\"alipay_open_file_upload_response\":{\"code\":\"10000\"}}";
		const char *dup =
		    "{\"alipay_open_file_upload_response\":{\"code\":\"10000\"},"
		    "\"x\":{\"alipay_open_file_upload_response\":{}},\"sign\":\"AA==\"}";

		assert_int_equal(chan_ali_verify_response(keys, 2, (const uint8_t *)wrong,
		                                          strlen(wrong), m, &node),
		                 CHAN_VR_MALFORMED);
		assert_int_equal(chan_ali_verify_response(keys, 2, (const uint8_t *)none,
		                                          strlen(none), m, &node),
		                 CHAN_VR_MISSING);
		assert_int_equal(
		    chan_ali_verify_response(keys, 2, (const uint8_t *)dup, strlen(dup), m, &node),
		    CHAN_VR_MALFORMED);
	}
	EVP_PKEY_free(pub);
	EVP_PKEY_free(other);
	json_decref(c);
}

/* A-O2: the node text extracted from the raw body, escapes and inner "sign" kept. */
static void
test_ali_o2_extraction(void **state)
{
	json_t *c = load_json(VEC "alipay/cases.json"), *v;
	size_t i;

	(void)state;
	json_array_foreach(json_object_get(c, "extractions"), i, v)
	{
		const char *body = str(v, "body");
		struct chan_ali_node node;

		if (chan_ali_response_node((const uint8_t *)body, strlen(body), str(v, "method"),
		                           &node) != 0)
			fail_msg("%s: no node", str(v, "id"));
		assert_int_equal(node.len, strlen(str(v, "node")));
		assert_memory_equal(node.text, str(v, "node"), node.len);
	}
	json_decref(c);
}

/* Brace matching honours strings and escapes; an error node is found when the method's is
 * absent; unterminated nodes fail. */
static void
test_ali_extraction_edges(void **state)
{
	const char *b1 =
	    "{\"alipay_trade_query_response\":{\"msg\":\"a}\\\"{\",\"x\":{}},\"sign\":\"s\"}";
	const char *b2 = "{\"error_response\":{\"code\":\"40002\"},\"sign\":\"s\"}";
	const char *b3 = "{\"alipay_trade_query_response\":{\"msg\":\"}";
	const char *b4 = "{\"alipay_trade_query_response\":\"x\"}";
	struct chan_ali_node n;

	(void)state;
	assert_int_equal(
	    chan_ali_response_node((const uint8_t *)b1, strlen(b1), "alipay.trade.query", &n), 0);
	assert_int_equal(n.len, strlen("{\"msg\":\"a}\\\"{\",\"x\":{}}"));
	assert_int_equal(
	    chan_ali_response_node((const uint8_t *)b2, strlen(b2), "alipay.trade.query", &n), 0);
	assert_int_equal(n.is_error, 1);
	assert_int_equal(
	    chan_ali_response_node((const uint8_t *)b3, strlen(b3), "alipay.trade.query", &n), -1);
	assert_int_equal(
	    chan_ali_response_node((const uint8_t *)b4, strlen(b4), "alipay.trade.query", &n), -1);
}

/* The server-side answer signer produces what the verifier accepts, and "\/" in the signed
 * text is handled as the Java SDK does. */
static void
test_ali_response_round_trip(void **state)
{
	EVP_PKEY *k = load_priv(VEC "alipay/a_d_app_private_key.pem");
	EVP_PKEY *pub = load_pub(VEC "alipay/a_d_app_public_key.pem");
	const char *node =
	    "{\"code\":\"10000\",\"msg\":\"Success\",\"trade_status\":\"TRADE_SUCCESS\"}";
	struct chan_ali_node n;
	char *body, ts[20];

	(void)state;
	assert_int_equal(chan_ali_sign_response(k, "alipay.trade.query", node, &body), 0);
	assert_int_equal(chan_ali_verify_response(&pub, 1, (const uint8_t *)body, strlen(body),
	                                          "alipay.trade.query", &n),
	                 CHAN_VR_OK);
	assert_int_equal(chan_ali_verify_response(&pub, 1, (const uint8_t *)body, strlen(body),
	                                          "alipay.trade.close", &n),
	                 CHAN_VR_MALFORMED);
	free(body);
	assert_int_equal(chan_ali_timestamp(1715593760, ts), 0);
	assert_string_equal(ts, "2024-05-13 17:49:20");
	EVP_PKEY_free(k);
	EVP_PKEY_free(pub);
}

/* stripe-node's form-encoding cases, and reals refused. */
static void
test_stripe_form(void **state)
{
	json_t *c = load_json(VEC "stripe/form_cases.json"), *v, *real;
	size_t i;
	char *out;

	(void)state;
	json_array_foreach(json_object_get(c, "cases"), i, v)
	{
		assert_int_equal(chan_stripe_form(json_object_get(v, "input"), &out), 0);
		if (strcmp(out, str(v, "expect")) != 0)
			fail_msg("case %zu: got %s want %s", i, out, str(v, "expect"));
		free(out);
	}
	real = json_pack("{s:f}", "amount", 5.0);
	assert_int_equal(chan_stripe_form(real, &out), -1);
	json_decref(real);
	json_decref(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wx_o1_signature),
	    cmocka_unit_test(test_wx_o2_message_layout),
	    cmocka_unit_test(test_wx_d_requests),
	    cmocka_unit_test(test_wx_r1_response),
	    cmocka_unit_test(test_wx_response_round_trip),
	    cmocka_unit_test(test_wx_canonical_url),
	    cmocka_unit_test(test_ali_d_requests),
	    cmocka_unit_test(test_ali_o1_response),
	    cmocka_unit_test(test_ali_o2_extraction),
	    cmocka_unit_test(test_ali_extraction_edges),
	    cmocka_unit_test(test_ali_response_round_trip),
	    cmocka_unit_test(test_stripe_form),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
