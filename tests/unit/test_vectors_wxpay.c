/*
 * test_vectors_wxpay - every WeChat Pay vector in tests/vectors/inbound/wechatpay, data-driven.
 *
 * The official SDK vectors check the primitives (RSA verify, AES-GCM) and one end-to-end
 * notification; each case of derived/cases.json becomes its own cmocka test that feeds the
 * case's headers, body and clock to notify_wx_verify_parse(). What each case must yield is in the
 * table below; the test also checks that the table agrees with the case's "expect" text, and
 * fails for a case the table does not know, so a new vector forces a decision here.
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

#include "chan_notify.h"
#include "crypto.h"
#include "vectors.h"

#define WX "wechatpay/"

/*
 * The reason class per derived case. boundary_300s: the README leaves 300 s to us; we follow
 * wechatpay-go (|now - ts| >= 300 rejected), as channel-specs.md recommends.
 */
static const struct {
	const char *name;
	enum verr want;
} wx_expect[] = {
    {"txn_success_pubkey", VERR_OK},
    {"refund_success_cert", VERR_OK},
    {"txn_success_empty_aad", VERR_OK},
    {"stale_timestamp_301s", VERR_TIMESTAMP},
    {"boundary_299s", VERR_OK},
    {"boundary_300s", VERR_TIMESTAMP},
    {"future_timestamp_301s", VERR_TIMESTAMP},
    {"unknown_serial", VERR_SERIAL},
    {"signtest_probe", VERR_SIGNATURE},
    {"nonce_changed", VERR_SIGNATURE},
    {"timestamp_changed", VERR_SIGNATURE},
    {"tampered_body", VERR_SIGNATURE},
    {"body_trailing_newline", VERR_SIGNATURE},
    {"bad_aad_signed", VERR_DECRYPT},
};

/* headers - the case's header object as http_hdr entries pointing into the JSON. */
static size_t
headers(json_t *obj, struct http_hdr *h, size_t cap)
{
	const char *name;
	json_t *v;
	size_t n = 0;

	json_object_foreach(obj, name, v)
	{
		assert_true(n < cap);
		h[n++] = (struct http_hdr){name, json_string_value(v)};
	}
	return n;
}

/* set_key - copies a key string into a merchant, choosing AES-128 or -256 by its length. */
static void
set_key(struct wx_merchant *m, const char *key)
{
	m->apiv3_key_len = strlen(key);
	assert_true(m->apiv3_key_len == 16 || m->apiv3_key_len == 32);
	memcpy(m->apiv3_key, key, m->apiv3_key_len);
}

/* add_key - a verify key under key_id, or under the certificate's own serial. */
static void
add_key(struct wx_merchant *m, const char *file, const char *key_id)
{
	char serial[CRYPTO_SERIAL_MAX], path[256];
	EVP_PKEY *k;

	/* Key files named by cases.json live in wechatpay/, not in derived/. */
	snprintf(path, sizeof(path), "%s%s", strncmp(file, WX, strlen(WX)) == 0 ? "" : WX, file);
	k = vec_pubkey(path, serial, sizeof(serial));

	assert_non_null(k);
	snprintf(m->keys[m->nkeys].serial, sizeof(m->keys[0].serial), "%s",
	         key_id != NULL ? key_id : serial);
	assert_true(m->keys[m->nkeys].serial[0] != '\0');
	m->keys[m->nkeys++].pkey = k;
}

static void
free_keys(struct wx_merchant *m)
{
	for (int i = 0; i < m->nkeys; i++)
		EVP_PKEY_free(m->keys[i].pkey);
	m->nkeys = 0;
}

/* check_fields - the notification carries exactly what the expected plaintext says. */
static void
check_fields(const struct notify *n, const uint8_t *body, size_t blen, const json_t *plain)
{
	json_t *env = json_loadb((const char *)body, blen, 0, NULL);
	const json_t *amount = json_object_get(plain, "amount");

	assert_non_null(env);
	assert_string_equal(n->event_id, vec_str(env, "id"));
	assert_string_equal(n->event_type, vec_str(env, "event_type"));
	assert_string_equal(n->channel_trade_no, vec_str(plain, "transaction_id"));
	assert_string_equal(n->out_trade_no, vec_str(plain, "out_trade_no"));
	assert_string_equal(n->currency,
	                    vec_str(amount, "currency") ? vec_str(amount, "currency") : "CNY");
	if (strcmp(n->event_type, "TRANSACTION.SUCCESS") == 0) {
		assert_int_equal(n->kind, NOTIFY_PAYMENT);
		assert_string_equal(n->status, vec_str(plain, "trade_state"));
		assert_int_equal(n->amount_minor,
		                 json_integer_value(json_object_get(amount, "total")));
		assert_int_equal(n->order_total_minor, -1);
	} else {
		assert_int_equal(n->kind, NOTIFY_REFUND);
		assert_string_equal(n->status, vec_str(plain, "refund_status"));
		assert_string_equal(n->refund_no, vec_str(plain, "refund_id"));
		assert_string_equal(n->merchant_refund_no, vec_str(plain, "out_refund_no"));
		assert_int_equal(n->amount_minor,
		                 json_integer_value(json_object_get(amount, "refund")));
		assert_int_equal(n->order_total_minor,
		                 json_integer_value(json_object_get(amount, "total")));
		assert_int_equal(n->refund_cumulative, 0);
	}
	json_decref(env);
}

/* test_derived_case - one case of derived/cases.json (state is the case object). */
static void
test_derived_case(void **state)
{
	const json_t *c = *state;
	json_t *hj = json_object_get(c, "headers");
	const char *name = vec_str(c, "name"), *expect = vec_str(c, "expect");
	struct wx_merchant m = {.tolerance_s = 300};
	struct http_hdr h[8];
	struct notify n;
	char path[256], reason[160];
	enum verr want = VERR_HEADER, got;
	uint8_t *body, *plain_file = NULL, *plain = NULL;
	size_t blen, plen, nh;
	size_t i;
	json_t *pj = NULL;

	for (i = 0; i < sizeof(wx_expect) / sizeof(wx_expect[0]); i++)
		if (strcmp(wx_expect[i].name, name) == 0)
			break;
	if (i == sizeof(wx_expect) / sizeof(wx_expect[0]))
		fail_msg("case %s is not in this test's table: decide its outcome", name);
	want = wx_expect[i].want;
	/* "valid ..." expects acceptance; "reject ..." and "signature valid, then ... fail" not. */
	assert_int_equal(strncmp(expect, "valid", 5) == 0, want == VERR_OK);

	snprintf(path, sizeof(path), WX "derived/%s", vec_str(c, "body_file"));
	assert_non_null(body = vec_read(path, &blen));
	set_key(&m, vec_str(c, "apiv3_key"));
	add_key(&m, vec_str(c, "verify_key"), vec_str(c, "key_id"));
	if (vec_str(c, "expected_plaintext_file") != NULL) {
		snprintf(path, sizeof(path), WX "derived/%s",
		         vec_str(c, "expected_plaintext_file"));
		assert_non_null(plain_file = vec_read(path, &plen));
		assert_non_null(pj = json_loadb((const char *)plain_file, plen, 0, NULL));
		/* The plaintext names the merchant; checking it exercises the mchid rule too. */
		snprintf(m.mchid, sizeof(m.mchid), "%s", vec_str(pj, "mchid"));
	}
	nh = headers(hj, h, 8);
	got = notify_wx_verify_parse(&m, h, nh, body, blen,
	                             (time_t)json_integer_value(json_object_get(c, "now")), &n,
	                             reason, sizeof(reason));
	if (got != want)
		fail_msg("%s: got %s (%s), want %s", name, notify_verr_name(got), reason,
		         notify_verr_name(want));
	if (want == VERR_OK && pj != NULL) {
		check_fields(&n, body, blen, pj);
		/* The decrypted bytes are exactly the expected plaintext file. */
		assert_int_equal(
		    notify_wx_decrypt_body(&m, body, blen, &plain, &blen, reason, sizeof(reason)),
		    VERR_OK);
		assert_int_equal(blen, plen);
		assert_memory_equal(plain, plain_file, plen);
	}
	if (want == VERR_TIMESTAMP) {
		/* "the signature itself is valid": at the header's own time it is accepted. */
		long long ts = strtoll(vec_str(hj, "Wechatpay-Timestamp"), NULL, 10);

		got = notify_wx_verify_parse(&m, h, nh, body, blen, (time_t)ts, &n, reason,
		                             sizeof(reason));
		assert_int_equal(got, VERR_OK);
	}
	free(plain);
	free(plain_file);
	json_decref(pj);
	free(body);
	free_keys(&m);
}

static void
test_go_end_to_end_notification_aes128(void **state)
{
	json_t *c = vec_json(WX "go_notify_case.json");
	struct wx_merchant m = {.tolerance_s = 300};
	struct http_hdr h[8];
	struct notify n;
	char reason[160];
	uint8_t *body, *plain;
	size_t blen, plen, nh;
	const char *want;

	(void)state;
	assert_non_null(c);
	assert_non_null(body = vec_read(WX "go_notify_body.json", &blen));
	/* The Go vector's key is 16 bytes: AES-128-GCM, chosen by key length. */
	set_key(&m, vec_str(c, "apiv3_key"));
	add_key(&m, WX "go_notify_platform_cert.pem", NULL);
	assert_string_equal(m.keys[0].serial,
	                    vec_str(json_object_get(c, "headers"), "Wechatpay-Serial"));
	nh = headers(json_object_get(c, "headers"), h, 8);
	assert_int_equal(
	    notify_wx_verify_parse(&m, h, nh, body, blen,
	                           (time_t)json_integer_value(json_object_get(c, "fixed_now_unix")),
	                           &n, reason, sizeof(reason)),
	    VERR_OK);
	/* PAYSCORE.USER_OPEN_SERVICE is authentic but no payment: verified, then ignored. */
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	assert_string_equal(n.event_type, "PAYSCORE.USER_OPEN_SERVICE");
	assert_int_equal(
	    notify_wx_decrypt_body(&m, body, blen, &plain, &plen, reason, sizeof(reason)), VERR_OK);
	want = vec_str(c, "expected_plaintext");
	assert_int_equal(plen, strlen(want));
	assert_memory_equal(plain, want, plen);
	free(plain);
	free(body);
	free_keys(&m);
	json_decref(c);
}

static void
test_go_verifier_cert_and_pubkey(void **state)
{
	static const char *const keys[] = {WX "go_verifier_platform_cert_F5765756002FDD77.pem",
	                                   WX "go_verifier_pubkey.pem"};
	json_t *c = vec_json(WX "go_verifier_case.json");
	uint8_t sig[512];
	size_t siglen, i;
	const char *s64;
	json_t *cs;
	char serial[CRYPTO_SERIAL_MAX];

	(void)state;
	assert_non_null(c);
	s64 = vec_str(c, "signature_b64");
	assert_int_equal(crypto_b64_decode(s64, strlen(s64), sig, sizeof(sig), &siglen), 0);
	for (size_t k = 0; k < 2; k++) {
		EVP_PKEY *pk = vec_pubkey(keys[k], serial, sizeof(serial));

		assert_non_null(pk);
		if (k == 0)
			assert_string_equal(serial, vec_str(c, "serial_or_key_id"));
		json_array_foreach(json_object_get(c, "cases"), i, cs)
		{
			const char *msg = vec_str(cs, "message");
			int valid = strcmp(vec_str(cs, "expect"), "valid") == 0;

			assert_int_equal(crypto_rsa_sha256_verify(pk, (const uint8_t *)msg,
			                                          strlen(msg), sig, siglen),
			                 valid ? 0 : -1);
		}
		/* Empty signature and non-base64 signature are errors too (README). */
		assert_int_equal(crypto_rsa_sha256_verify(pk, (const uint8_t *)"source", 6, sig, 0),
		                 -1);
		assert_int_equal(crypto_b64_decode("not base64!", 11, sig, sizeof(sig), &siglen),
		                 -1);
		EVP_PKEY_free(pk);
	}
	json_decref(c);
}

/* gcm_case - decrypts with the base case's fields, overridden by those in ov (may be NULL). */
static int
gcm_case(const json_t *base, const json_t *ov, uint8_t *out, size_t *outlen)
{
	const char *key = vec_str(base, "key"), *nonce = vec_str(base, "nonce");
	const char *aad = vec_str(base, "associated_data"), *ct64 = vec_str(base, "ciphertext_b64");
	uint8_t ct[4096];
	size_t ctlen, zeros;

	if (ov != NULL) {
		key = vec_str(ov, "key") ? vec_str(ov, "key") : key;
		nonce = vec_str(ov, "nonce") ? vec_str(ov, "nonce") : nonce;
		aad = vec_str(ov, "associated_data") ? vec_str(ov, "associated_data") : aad;
		ct64 = vec_str(ov, "ciphertext_b64") ? vec_str(ov, "ciphertext_b64") : ct64;
	}
	if (ov != NULL && vec_str(ov, "ciphertext") != NULL) {
		/* Described, not given: "128 zero bytes". */
		assert_int_equal(sscanf(vec_str(ov, "ciphertext"), "%zu zero bytes", &zeros), 1);
		memset(ct, 0, zeros);
		ctlen = zeros;
	} else if (crypto_b64_decode(ct64, strlen(ct64), ct, sizeof(ct), &ctlen) != 0) {
		return -2;
	}
	return crypto_aes_gcm_decrypt((const uint8_t *)key, strlen(key), (const uint8_t *)nonce,
	                              strlen(nonce), (const uint8_t *)aad, strlen(aad), ct, ctlen,
	                              out, outlen);
}

static void
run_gcm_file(const char *file)
{
	json_t *c = vec_json(file), *neg;
	uint8_t out[4096];
	size_t outlen = sizeof(out), i;
	const char *want;

	assert_non_null(c);
	want = vec_str(c, "expected_plaintext");
	assert_int_equal(gcm_case(c, NULL, out, &outlen), 0);
	assert_int_equal(outlen, strlen(want));
	assert_memory_equal(out, want, outlen);
	json_array_foreach(json_object_get(c, "negative_cases"), i, neg)
	{
		const char *expect = vec_str(neg, "expect");
		int rc;

		outlen = sizeof(out);
		rc = gcm_case(c, neg, out, &outlen);
		/* Base64 errors come from the decoder (-2), the rest from decryption (-1). */
		if (strstr(expect, "base64") != NULL)
			assert_int_equal(rc, -2);
		else
			assert_int_equal(rc, -1);
	}
	json_decref(c);
}

static void
test_go_aes_gcm_and_negatives(void **state)
{
	(void)state;
	run_gcm_file(WX "go_aes_gcm_case.json");
}

static void
test_java_aes256_gcm_and_negatives(void **state)
{
	(void)state;
	run_gcm_file(WX "java_aes_gcm_case.json");
}

static void
test_java_certificate_download_decrypts_to_pem(void **state)
{
	json_t *r = vec_json(WX "java_download_certificate_response.json");
	json_t *k = vec_json(WX "java_aes_gcm_case.json");
	const json_t *d = json_array_get(json_object_get(r, "data"), 0);
	const json_t *enc = json_object_get(d, "encrypt_certificate");
	const char *key = vec_str(k, "key"), *ct64 = vec_str(enc, "ciphertext");
	const char *nonce = vec_str(enc, "nonce"), *aad = vec_str(enc, "associated_data");
	uint8_t ct[4096], out[4096], *want;
	size_t ctlen, outlen = sizeof(out), wlen;
	char serial[CRYPTO_SERIAL_MAX], err[160];
	EVP_PKEY *pk;

	(void)state;
	assert_non_null(enc);
	assert_string_equal(vec_str(enc, "algorithm"), "AEAD_AES_256_GCM");
	assert_int_equal(crypto_b64_decode(ct64, strlen(ct64), ct, sizeof(ct), &ctlen), 0);
	assert_int_equal(crypto_aes_gcm_decrypt((const uint8_t *)key, 32, (const uint8_t *)nonce,
	                                        strlen(nonce), (const uint8_t *)aad, strlen(aad),
	                                        ct, ctlen, out, &outlen),
	                 0);
	assert_non_null(want = vec_read(WX "java_download_certificate_decrypted.pem", &wlen));
	assert_int_equal(outlen, wlen);
	assert_memory_equal(out, want, wlen);
	/* The decrypted certificate's serial is the response's serial_no. */
	assert_int_equal(
	    crypto_load_pubkey_mem(out, outlen, &pk, serial, sizeof(serial), err, sizeof(err)), 0);
	assert_string_equal(serial, vec_str(d, "serial_no"));
	EVP_PKEY_free(pk);
	free(want);
	json_decref(r);
	json_decref(k);
}

static void
test_java_rsa_verifier_merchant_cert(void **state)
{
	json_t *c = vec_json(WX "java_rsa_verifier_case.json"), *cs;
	const char *msg, *s64;
	uint8_t sig[512];
	size_t siglen, i;

	(void)state;
	assert_non_null(c);
	msg = vec_str(c, "message");
	s64 = vec_str(c, "signature_b64");
	assert_int_equal(crypto_b64_decode(s64, strlen(s64), sig, sizeof(sig), &siglen), 0);
	json_array_foreach(json_object_get(c, "cases"), i, cs)
	{
		const char *keyref = vec_str(cs, "key"), *p;
		char serial[CRYPTO_SERIAL_MAX], want_serial[CRYPTO_SERIAL_MAX], path[256];
		EVP_PKEY *pk;

		snprintf(path, sizeof(path), WX "%s", keyref);
		pk = vec_pubkey(path, serial, sizeof(serial));

		assert_non_null(pk);
		/* "(serial X)" in the key reference is checked against the certificate. */
		if ((p = strstr(keyref, "(serial ")) != NULL) {
			assert_int_equal(sscanf(p, "(serial %79[0-9A-F])", want_serial), 1);
			assert_string_equal(serial, want_serial);
		}
		assert_int_equal(
		    crypto_rsa_sha256_verify(pk, (const uint8_t *)msg, strlen(msg), sig, siglen),
		    strcmp(vec_str(cs, "expect"), "valid") == 0 ? 0 : -1);
		EVP_PKEY_free(pk);
	}
	json_decref(c);
}

static void
test_platform_test_key_pair_matches(void **state)
{
	EVP_PKEY *pub = vec_pubkey(WX "java_wechat_pay_public_key.pem", NULL, 0);
	EVP_PKEY *cert = vec_pubkey(WX "java_wechat_pay_certificate.pem", NULL, 0);

	(void)state;
	/* The derived vectors use both forms of one key: the cert and the SPKI must agree. */
	assert_non_null(pub);
	assert_non_null(cert);
	assert_int_equal(EVP_PKEY_eq(pub, cert), 1);
	EVP_PKEY_free(pub);
	EVP_PKEY_free(cert);
}

int
main(void)
{
	static const struct CMUnitTest fixed[] = {
	    cmocka_unit_test(test_go_end_to_end_notification_aes128),
	    cmocka_unit_test(test_go_verifier_cert_and_pubkey),
	    cmocka_unit_test(test_go_aes_gcm_and_negatives),
	    cmocka_unit_test(test_java_aes256_gcm_and_negatives),
	    cmocka_unit_test(test_java_certificate_download_decrypts_to_pem),
	    cmocka_unit_test(test_java_rsa_verifier_merchant_cert),
	    cmocka_unit_test(test_platform_test_key_pair_matches),
	};
	json_t *cases = vec_json(WX "derived/cases.json"), *c;
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]), ncases, i;
	struct CMUnitTest *tests;
	char(*names)[96];
	int rc;

	if (cases == NULL) {
		printf("not ok 1 - cannot read %s/" WX "derived/cases.json\n", vec_dir());
		return 1;
	}
	ncases = json_array_size(json_object_get(cases, "cases"));
	tests = calloc(nfixed + ncases, sizeof(*tests));
	names = calloc(ncases + 1, sizeof(*names));
	if (tests == NULL || names == NULL)
		return 1;
	memcpy(tests, fixed, sizeof(fixed));
	/* One test per derived case, named after it, so TAP output lists every vector. */
	json_array_foreach(json_object_get(cases, "cases"), i, c)
	{
		snprintf(names[i], sizeof(names[i]), "derived_%s", vec_str(c, "name"));
		tests[nfixed + i] = (struct CMUnitTest){names[i], test_derived_case, NULL, NULL, c};
	}
	rc = _cmocka_run_group_tests("vectors_wxpay", tests, nfixed + ncases, NULL, NULL);
	free(tests);
	free(names);
	json_decref(cases);
	return rc;
}
