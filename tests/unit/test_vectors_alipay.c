/*
 * test_vectors_alipay - every Alipay vector in tests/vectors/inbound/alipay, data-driven.
 *
 * For each case of node_sdk_notify_cases.json and java_sdk_rsacheck_cases.json (one cmocka
 * test each): the string to sign built from the case's params must be the case's
 * expected_string_to_sign, that string must verify exactly when the case says "valid", and
 * the params, form-encoded (and the derived raw body where there is one), must get the
 * endpoint result in the table below from notify_ali_verify_parse().
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
#include "form.h"
#include "money.h"
#include "vectors.h"

#define ALI "alipay/"

/*
 * Endpoint outcome per case. node_servicemarket_v2_sign_type_absent is valid only under the
 * Node SDK's re-insertion of a missing sign_type, which we do not copy: plain V2 over the
 * params as received is invalid, as its expect text also says. The Java cases are
 * authentic but are API responses, not notifications (no notify_id), and the legacy SHA-1
 * "RSA" one is refused before any verification.
 */
static const struct {
	const char *name;
	enum verr want;
	enum notify_kind kind;
} ali_expect[] = {
    {"node_trade_status_sync_success", VERR_OK, NOTIFY_PAYMENT},
    {"node_trade_status_sync_success_no_sign_type", VERR_OK, NOTIFY_PAYMENT},
    {"node_trade_status_sync_wrong_key", VERR_SIGNATURE, 0},
    {"node_servicemarket_v2_keep_sign_type", VERR_OK, NOTIFY_IGNORED},
    {"node_servicemarket_v2_sign_type_absent", VERR_SIGNATURE, 0},
    {"node_servicemarket_v2_tampered", VERR_SIGNATURE, 0},
    {"java_rsaCheckV2_rsa2", VERR_BODY, 0},
    {"java_rsaCheckV2_rsa2_utf8", VERR_BODY, 0},
    {"java_rsaCheckV2_rsa_sha1", VERR_UNSUPPORTED, 0},
};

static void
params_form(json_t *params, struct form *f)
{
	const char *k;
	json_t *v;

	memset(f, 0, sizeof(*f));
	json_object_foreach(params, k, v)
	{
		assert_true(json_is_string(v));
		assert_int_equal(
		    form_add(f, k, strlen(k), json_string_value(v), json_string_length(v)), 0);
	}
}

/* endpoint - runs notify_ali_verify_parse() and checks the outcome and, if accepted, the fields. */
static void
endpoint(const char *name, const uint8_t *body, size_t len, EVP_PKEY *key, json_t *params,
         enum verr want, enum notify_kind kind)
{
	struct ali_merchant m = {.nkeys = 1};
	struct notify n;
	char reason[160], amount[32];
	enum verr got;

	m.keys[0] = key;
	snprintf(m.app_id, sizeof(m.app_id), "%s", vec_str(params, "app_id"));
	got = notify_ali_verify_parse(&m, body, len, &n, reason, sizeof(reason));
	if (got != want)
		fail_msg("%s: got %s (%s), want %s", name, notify_verr_name(got), reason,
		         notify_verr_name(want));
	if (got != VERR_OK)
		return;
	assert_int_equal(n.kind, kind);
	assert_string_equal(n.event_id, vec_str(params, "notify_id"));
	assert_string_equal(n.event_type, vec_str(params, "notify_type"));
	if (kind != NOTIFY_PAYMENT)
		return;
	assert_string_equal(n.channel_trade_no, vec_str(params, "trade_no"));
	assert_string_equal(n.out_trade_no, vec_str(params, "out_trade_no"));
	assert_string_equal(n.status, vec_str(params, "trade_status"));
	assert_string_equal(n.currency, "CNY");
	assert_int_equal(money_format(n.amount_minor, 2, amount, sizeof(amount)), 0);
	assert_string_equal(amount, vec_str(params, "total_amount"));
	/* For a different app_id it is authentic but not this merchant's: unroutable. */
	snprintf(m.app_id, sizeof(m.app_id), "2000000000000000");
	assert_int_equal(notify_ali_verify_parse(&m, body, len, &n, reason, sizeof(reason)),
	                 VERR_OK);
	assert_int_equal(n.kind, NOTIFY_UNROUTABLE);
	assert_string_equal(n.unroutable, "foreign_app_id");
}

/* test_case - one case (state is the case object). */
static void
test_case(void **state)
{
	const json_t *c = *state;
	json_t *params = json_object_get(c, "params");
	const char *name = vec_str(c, "name"), *expect = vec_str(c, "expect");
	const char *rule = vec_str(c, "string_to_sign_rule");
	const char *want = vec_str(c, "expected_string_to_sign");
	const char *alg = vec_str(c, "algorithm"), *s64 = vec_str(params, "sign");
	int keep = strncmp(rule, "V2", 2) == 0, said_valid = strncmp(expect, "valid", 5) == 0;
	struct crypto_part part = {want, strlen(want)};
	char path[256], *content, *body;
	uint8_t sig[512], *raw;
	size_t clen, siglen, rawlen, i;
	struct form f;
	EVP_PKEY *key;

	for (i = 0; i < sizeof(ali_expect) / sizeof(ali_expect[0]); i++)
		if (strcmp(ali_expect[i].name, name) == 0)
			break;
	if (i == sizeof(ali_expect) / sizeof(ali_expect[0]))
		fail_msg("case %s is not in this test's table: decide its outcome", name);
	if (strcmp(expect, "valid") == 0 || strcmp(expect, "invalid") == 0)
		assert_int_equal(strcmp(expect, "valid") == 0,
		                 ali_expect[i].want == VERR_OK || ali_expect[i].want == VERR_BODY ||
		                     ali_expect[i].want == VERR_UNSUPPORTED);
	snprintf(path, sizeof(path), ALI "%s", vec_str(c, "public_key_file"));
	assert_non_null(key = vec_pubkey(path, NULL, 0));
	assert_int_equal(crypto_b64_decode(s64, strlen(s64), sig, sizeof(sig), &siglen), 0);

	/* The string to sign, built by our code from the params as received. */
	params_form(params, &f);
	assert_int_equal(notify_ali_sign_content(&f, keep, &content, &clen), 0);
	if (keep && form_get(&f, "sign_type") == NULL) {
		/* The expected string carries a sign_type the params lack: the Node re-insertion.
		 */
		assert_string_not_equal(content, want);
		free(content);
		assert_int_equal(form_add(&f, "sign_type", 9, "RSA2", 4), 0);
		assert_int_equal(notify_ali_sign_content(&f, keep, &content, &clen), 0);
	}
	assert_string_equal(content, want);
	free(content);
	/* The expected string verifies exactly when the case says valid (SHA-1 only for Java's). */
	assert_int_equal(crypto_rsa_verify_md(
	                     key, alg != NULL && strncmp(alg, "SHA1", 4) == 0 ? "SHA1" : "SHA256",
	                     &part, 1, sig, siglen),
	                 said_valid ? 0 : -1);
	form_free(&f);

	/* The endpoint, on the params form-encoded and on the derived raw body. */
	params_form(params, &f);
	assert_non_null(body = form_encode(&f));
	endpoint(name, (const uint8_t *)body, strlen(body), key, params, ali_expect[i].want,
	         ali_expect[i].kind);
	free(body);
	form_free(&f);
	if (vec_str(c, "derived_raw_body_file") != NULL) {
		snprintf(path, sizeof(path), ALI "%s", vec_str(c, "derived_raw_body_file"));
		assert_non_null(raw = vec_read(path, &rawlen));
		/* Decoding the raw bytes once gives exactly the official params. */
		assert_int_equal(form_decode(raw, rawlen, &f, path, sizeof(path)), 0);
		assert_int_equal(f.n, json_object_size(params));
		for (size_t k = 0; k < f.n; k++)
			assert_string_equal(f.pairs[k].val, vec_str(params, f.pairs[k].key));
		form_free(&f);
		endpoint(name, raw, rawlen, key, params, ali_expect[i].want, ali_expect[i].kind);
		free(raw);
	}
	EVP_PKEY_free(key);
}

static void
test_bare_base64_key_is_the_pem_key(void **state)
{
	uint8_t *pem;
	char bare[1024], err[160];
	size_t len, n = 0;
	EVP_PKEY *a, *b;

	(void)state;
	/* The Node SDK holds this key as an inline base64 string; the PEM only adds armour. */
	assert_non_null(pem = vec_read(ALI "node_notify_pubkey_v1_inline.pem", &len));
	for (char *line = strtok((char *)pem, "\n"); line != NULL; line = strtok(NULL, "\n"))
		if (strncmp(line, "-----", 5) != 0)
			n += (size_t)snprintf(bare + n, sizeof(bare) - n, "%s", line);
	assert_int_equal(crypto_load_pubkey_mem(bare, n, &a, NULL, 0, err, sizeof(err)), 0);
	assert_non_null(b = vec_pubkey(ALI "node_notify_pubkey_v1_inline.pem", NULL, 0));
	assert_int_equal(EVP_PKEY_eq(a, b), 1);
	EVP_PKEY_free(a);
	EVP_PKEY_free(b);
	free(pem);
}

static void
test_app_cert_serial(void **state)
{
	char serial[CRYPTO_SERIAL_MAX];
	EVP_PKEY *k =
	    vec_pubkey(ALI "java_appCertPublicKey_2021003126695331.crt", serial, sizeof(serial));

	(void)state;
	assert_non_null(k);
	assert_string_equal(serial, "20220420AEB95D918352F190809EA2BA");
	EVP_PKEY_free(k);
}

int
main(void)
{
	static const char *const files[] = {ALI "node_sdk_notify_cases.json",
	                                    ALI "java_sdk_rsacheck_cases.json"};
	static const struct CMUnitTest fixed[] = {
	    cmocka_unit_test(test_bare_base64_key_is_the_pem_key),
	    cmocka_unit_test(test_app_cert_serial),
	};
	size_t nfixed = sizeof(fixed) / sizeof(fixed[0]), n = nfixed, i;
	struct CMUnitTest tests[64];
	char names[64][96];
	json_t *docs[2], *c;
	int rc;

	memcpy(tests, fixed, sizeof(fixed));
	for (size_t d = 0; d < 2; d++) {
		if ((docs[d] = vec_json(files[d])) == NULL) {
			printf("not ok 1 - cannot read %s/%s\n", vec_dir(), files[d]);
			return 1;
		}
		json_array_foreach(json_object_get(docs[d], "cases"), i, c)
		{
			if (n == 64)
				return 1;
			snprintf(names[n], sizeof(names[n]), "%s", vec_str(c, "name"));
			tests[n] = (struct CMUnitTest){names[n], test_case, NULL, NULL, c};
			n++;
		}
	}
	rc = _cmocka_run_group_tests("vectors_alipay", tests, n, NULL, NULL);
	json_decref(docs[0]);
	json_decref(docs[1]);
	return rc;
}
