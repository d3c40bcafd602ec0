/*
 * test_crypto - the crypto primitives: strict base64 and hex, constant-time comparison, HMAC,
 * AES-GCM (including tag failures) and RSA signatures with a key generated at test time, plus
 * the public-key loaders for each accepted form.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "crypto.h"
#include "digest.h"
#include "testkeys.h"

static int
b64(const char *s, uint8_t *out, size_t cap, size_t *n)
{
	return crypto_b64_decode(s, strlen(s), out, cap, n);
}

static void
test_b64_decodes_exact_lengths(void **state)
{
	uint8_t out[16];
	size_t n;

	(void)state;
	assert_int_equal(b64("", out, sizeof(out), &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(b64("Zg==", out, sizeof(out), &n), 0);
	assert_int_equal(n, 1);
	assert_memory_equal(out, "f", 1);
	assert_int_equal(b64("Zm8=", out, sizeof(out), &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(b64("Zm9v", out, sizeof(out), &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(b64("Zm9vYmFy", out, sizeof(out), &n), 0);
	assert_int_equal(n, 6);
	assert_memory_equal(out, "foobar", 6);
	assert_int_equal(b64("+/+/", out, sizeof(out), &n), 0);
	assert_memory_equal(out, "\xfb\xff\xbf", 3);
}

static void
test_b64_rejects_truncated_bad_padding_and_bad_chars(void **state)
{
	static const char *const bad[] = {
	    "Zm9",
	    "Zm9vY",
	    "Z",
	    "Zg=",
	    "Zg", /* truncated: length not a multiple of 4 */
	    "Z===",
	    "====",
	    "Zg=a",
	    "Z=g=",
	    "Zm=v", /* '=' where it cannot be */
	    "Zh==",
	    "Zm9=", /* non-zero unused bits */
	    "Zm9v\n",
	    "Zm 9v",
	    " Zm9v",
	    "Zm9v-_==",
	    "Zm9v*A==",
	    "Zm9vYm \t",           /* bad characters */
	    "WECHATPAY/SIGNTEST/", /* the probe prefix alone */
	};
	uint8_t out[32];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (b64(bad[i], out, sizeof(out), &n) != -1)
			fail_msg("accepted bad base64 \"%s\"", bad[i]);
	/* A NUL inside the counted length is a bad character, not an end of string. */
	assert_int_equal(crypto_b64_decode("Zm\0v", 4, out, sizeof(out), &n), -1);
	/* The output bound is checked, not assumed. */
	assert_int_equal(b64("Zm9vYmFy", out, 5, &n), -1);
}

static void
test_b64_encode_round_trip(void **state)
{
	uint8_t in[256], back[256];
	char text[400];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)(i * 7 + 3);
	for (size_t len = 0; len < 10; len++) {
		assert_int_equal(crypto_b64_encode(in, len, text, sizeof(text)),
		                 (int)CRYPTO_B64_ENCODED_LEN(len));
		assert_int_equal(b64(text, back, sizeof(back), &n), 0);
		assert_int_equal(n, len);
		assert_memory_equal(back, in, len);
	}
	assert_int_equal(crypto_b64_encode(in, 3, text, 4), -1); /* no room for the NUL */
}

static void
test_hex_both_cases_and_rejects_odd_or_bad(void **state)
{
	uint8_t out[8];
	char text[17];
	size_t n;

	(void)state;
	assert_int_equal(crypto_hex_decode("00ffAB7e", 8, out, sizeof(out), &n), 0);
	assert_int_equal(n, 4);
	assert_memory_equal(out, "\x00\xff\xab\x7e", 4);
	assert_int_equal(crypto_hex_encode(out, 4, text, sizeof(text)), 0);
	assert_string_equal(text, "00ffab7e");
	assert_int_equal(crypto_hex_decode("abc", 3, out, sizeof(out), &n), -1);
	assert_int_equal(crypto_hex_decode("zz", 2, out, sizeof(out), &n), -1);
	assert_int_equal(crypto_hex_decode("0x", 2, out, sizeof(out), &n), -1);
	assert_int_equal(crypto_hex_decode("001122334455667788", 18, out, sizeof(out), &n), -1);
	assert_int_equal(crypto_hex_encode(out, 4, text, 8), -1);
}

static void
test_sha256_hex_known_answer(void **state)
{
	char hex[65];

	(void)state;
	assert_int_equal(digest_sha256_hex("abc", 3, hex), 0);
	assert_string_equal(hex,
	                    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	assert_int_equal(digest_sha256_hex("", 0, hex), 0);
	assert_string_equal(hex,
	                    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
}

static void
test_ct_equal_compares_all_bytes(void **state)
{
	uint8_t a[32], b[32];

	(void)state;
	memset(a, 0x5a, sizeof(a));
	memcpy(b, a, sizeof(b));
	assert_true(crypto_ct_equal(a, b, sizeof(a)));
	b[31] ^= 1;
	assert_false(crypto_ct_equal(a, b, sizeof(a)));
	b[31] ^= 1;
	b[0] ^= 0x80;
	assert_false(crypto_ct_equal(a, b, sizeof(a)));
	assert_true(crypto_ct_equal(a, b, 0));
}

static void
test_hmac_sha256_rfc4231_case2_and_parts(void **state)
{
	static const uint8_t want[32] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e,
	                                 0x6a, 0x04, 0x24, 0x26, 0x08, 0x95, 0x75, 0xc7,
	                                 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27, 0x39, 0x83,
	                                 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
	const char *msg = "what do ya want for nothing?";
	struct crypto_part parts[2] = {{msg, 10}, {msg + 10, strlen(msg) - 10}};
	uint8_t mac[32];

	(void)state;
	assert_int_equal(
	    crypto_hmac_sha256((const uint8_t *)"Jefe", 4, (const uint8_t *)msg, strlen(msg), mac),
	    0);
	assert_memory_equal(mac, want, 32);
	assert_int_equal(crypto_hmac_sha256v((const uint8_t *)"Jefe", 4, parts, 2, mac), 0);
	assert_memory_equal(mac, want, 32);
	/* An empty key is refused rather than producing a MAC anyone can compute. */
	assert_int_equal(crypto_hmac_sha256((const uint8_t *)"", 0, (const uint8_t *)msg, 3, mac),
	                 -1);
}

static void
test_gcm_round_trip_and_tag_failures(void **state)
{
	const uint8_t *key32 = (const uint8_t *)"0123456789abcdef0123456789abcdef";
	const uint8_t *nonce = (const uint8_t *)"nonce-12byte";
	uint8_t ct[64], pt[64];
	size_t ctlen = sizeof(ct), ptlen = sizeof(pt);

	(void)state;
	assert_int_equal(crypto_aes_gcm_encrypt(key32, 32, nonce, 12, (const uint8_t *)"aad", 3,
	                                        (const uint8_t *)"hello", 5, ct, &ctlen),
	                 0);
	assert_int_equal(ctlen, 5 + 16);
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 0);
	assert_int_equal(ptlen, 5);
	assert_memory_equal(pt, "hello", 5);
	/* Flipped tag bit, flipped ciphertext bit, other AAD, other key, other key size. */
	ct[ctlen - 1] ^= 1;
	ptlen = sizeof(pt);
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
	ct[ctlen - 1] ^= 1;
	ct[0] ^= 1;
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
	ct[0] ^= 1;
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, (const uint8_t *)"aaD", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
	assert_int_equal(crypto_aes_gcm_decrypt((const uint8_t *)"0123456789abcdef0123456789abcdeX",
	                                        32, nonce, 12, (const uint8_t *)"aad", 3, ct, ctlen,
	                                        pt, &ptlen),
	                 -1);
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 16, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 13, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
	/* Shorter than a tag, and an output buffer too small. */
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, NULL, 0, ct, 15, pt, &ptlen),
	                 -1);
	ptlen = 4;
	assert_int_equal(crypto_aes_gcm_decrypt(key32, 32, nonce, 12, (const uint8_t *)"aad", 3, ct,
	                                        ctlen, pt, &ptlen),
	                 -1);
}

static void
test_gcm_empty_plaintext_and_empty_aad(void **state)
{
	const uint8_t *key16 = (const uint8_t *)"0123456789abcdef";
	const uint8_t *nonce = (const uint8_t *)"nonce-12byte";
	uint8_t ct[16];
	size_t ctlen = sizeof(ct), ptlen = 0;

	(void)state;
	assert_int_equal(crypto_aes_gcm_encrypt(key16, 16, nonce, 12, NULL, 0, NULL, 0, ct, &ctlen),
	                 0);
	assert_int_equal(ctlen, 16);
	assert_int_equal(
	    crypto_aes_gcm_decrypt(key16, 16, nonce, 12, NULL, 0, ct, 16, NULL, &ptlen), 0);
	assert_int_equal(ptlen, 0);
	ct[3] ^= 4;
	assert_int_equal(
	    crypto_aes_gcm_decrypt(key16, 16, nonce, 12, NULL, 0, ct, 16, NULL, &ptlen), -1);
}

static void
test_rsa_sign_verify_round_trip_with_generated_key(void **state)
{
	EVP_PKEY *key = tk_rsa_new(), *other = tk_rsa_new();
	const char *msg = "1700000000\nnonce\n{\"a\":1}\n";
	struct crypto_part parts[2] = {{msg, 11}, {msg + 11, strlen(msg) - 11}};
	uint8_t *sig = NULL;
	size_t siglen = 0;

	(void)state;
	assert_non_null(key);
	assert_non_null(other);
	assert_int_equal(
	    crypto_rsa_sha256_sign(key, (const uint8_t *)msg, strlen(msg), &sig, &siglen), 0);
	assert_int_equal(siglen, 256);
	assert_int_equal(
	    crypto_rsa_sha256_verify(key, (const uint8_t *)msg, strlen(msg), sig, siglen), 0);
	assert_int_equal(crypto_rsa_sha256_verifyv(key, parts, 2, sig, siglen), 0);
	/* Another message, another key, a flipped bit, a truncated or empty signature. */
	assert_int_equal(
	    crypto_rsa_sha256_verify(key, (const uint8_t *)msg, strlen(msg) - 1, sig, siglen), -1);
	assert_int_equal(
	    crypto_rsa_sha256_verify(other, (const uint8_t *)msg, strlen(msg), sig, siglen), -1);
	sig[100] ^= 0x10;
	assert_int_equal(
	    crypto_rsa_sha256_verify(key, (const uint8_t *)msg, strlen(msg), sig, siglen), -1);
	sig[100] ^= 0x10;
	assert_int_equal(
	    crypto_rsa_sha256_verify(key, (const uint8_t *)msg, strlen(msg), sig, siglen - 1), -1);
	assert_int_equal(crypto_rsa_sha256_verify(key, (const uint8_t *)msg, strlen(msg), sig, 0),
	                 -1);
	assert_int_equal(
	    crypto_rsa_sha256_verify(NULL, (const uint8_t *)msg, strlen(msg), sig, siglen), -1);
	free(sig);
	EVP_PKEY_free(key);
	EVP_PKEY_free(other);
}

static void
test_pubkey_loads_from_cert_spki_and_bare_base64(void **state)
{
	EVP_PKEY *key = tk_rsa_new(), *got = NULL;
	X509 *cert = tk_self_signed(key, "00AB12");
	char *pem_cert = tk_cert_pem(cert), *pem_pub = tk_pubkey_pem(key), *b64key = NULL;
	char *priv = tk_privkey_pem(key), serial[CRYPTO_SERIAL_MAX], err[160], path[256];

	(void)state;
	assert_non_null(pem_cert);
	assert_non_null(pem_pub);
	assert_non_null(b64key = tk_pubkey_b64(key));
	assert_int_equal(crypto_load_pubkey_mem(pem_cert, strlen(pem_cert), &got, serial,
	                                        sizeof(serial), err, sizeof(err)),
	                 0);
	assert_string_equal(serial, "AB12");
	assert_int_equal(EVP_PKEY_eq(got, key), 1);
	EVP_PKEY_free(got);
	assert_int_equal(crypto_load_pubkey_mem(pem_pub, strlen(pem_pub), &got, serial,
	                                        sizeof(serial), err, sizeof(err)),
	                 0);
	assert_string_equal(serial, "");
	assert_int_equal(EVP_PKEY_eq(got, key), 1);
	EVP_PKEY_free(got);
	/* The Alipay console form, also with line breaks in it. */
	assert_int_equal(
	    crypto_load_pubkey_mem(b64key, strlen(b64key), &got, NULL, 0, err, sizeof(err)), 0);
	EVP_PKEY_free(got);
	assert_int_equal(tk_write_temp(pem_pub, strlen(pem_pub), path, sizeof(path)), 0);
	assert_int_equal(crypto_load_pubkey_file(path, &got, err, sizeof(err)), 0);
	EVP_PKEY_free(got);
	tk_unlink(path);
	/* A private key is not a public-key file, garbage is not base64, and no file is no file. */
	assert_int_equal(
	    crypto_load_pubkey_mem(priv, strlen(priv), &got, NULL, 0, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "unsupported PEM type"));
	assert_null(got);
	assert_int_equal(crypto_load_pubkey_mem("not a key!", 10, &got, NULL, 0, err, sizeof(err)),
	                 -1);
	assert_int_equal(crypto_load_pubkey_file("/nonexistent/key.pem", &got, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "/nonexistent/key.pem"));
	assert_int_equal(crypto_load_privkey_mem(priv, strlen(priv), &got, err, sizeof(err)), 0);
	EVP_PKEY_free(got);
	/* A private key file is a secret: 0600 loads, one the group can read is refused by
	 * name (the reconciler's merchant API and app keys are read this way). */
	assert_int_equal(tk_write_temp(priv, strlen(priv), path, sizeof(path)), 0);
	assert_int_equal(crypto_load_privkey_file(path, &got, err, sizeof(err)), 0);
	EVP_PKEY_free(got);
	got = NULL;
	assert_int_equal(chmod(path, 0640), 0);
	assert_int_equal(crypto_load_privkey_file(path, &got, err, sizeof(err)), -1);
	assert_null(got);
	assert_non_null(strstr(err, path));
	tk_unlink(path);
	free(pem_cert);
	free(pem_pub);
	free(b64key);
	free(priv);
	X509_free(cert);
	EVP_PKEY_free(key);
}

static void
test_pubkey_rejects_short_rsa_and_non_rsa(void **state)
{
	EVP_PKEY *small = EVP_RSA_gen(1024), *ec = EVP_EC_gen("P-256"), *got = NULL;
	char *p1 = tk_pubkey_pem(small), *p2 = tk_pubkey_pem(ec), err[160];

	(void)state;
	assert_int_equal(crypto_load_pubkey_mem(p1, strlen(p1), &got, NULL, 0, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "1024 bits"));
	assert_int_equal(crypto_load_pubkey_mem(p2, strlen(p2), &got, NULL, 0, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "not an RSA key"));
	/* Verification with a non-RSA key fails rather than switching scheme. */
	assert_int_equal(
	    crypto_rsa_sha256_verify(ec, (const uint8_t *)"m", 1, (const uint8_t *)"sig", 3), -1);
	free(p1);
	free(p2);
	EVP_PKEY_free(small);
	EVP_PKEY_free(ec);
}

static void
test_serial_equal_ignores_case_and_leading_zeros(void **state)
{
	(void)state;
	assert_true(crypto_serial_equal("5157f09e", "5157F09E"));
	assert_true(crypto_serial_equal("0AB12", "ab12"));
	assert_false(crypto_serial_equal("AB12", "AB13"));
	assert_false(crypto_serial_equal("PUB_KEY_ID_01", "PUB_KEY_ID_1"));
	assert_true(crypto_serial_equal("PUB_KEY_ID_01", "PUB_KEY_ID_01"));
	assert_false(crypto_serial_equal("", "0"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_b64_decodes_exact_lengths),
	    cmocka_unit_test(test_b64_rejects_truncated_bad_padding_and_bad_chars),
	    cmocka_unit_test(test_b64_encode_round_trip),
	    cmocka_unit_test(test_hex_both_cases_and_rejects_odd_or_bad),
	    cmocka_unit_test(test_sha256_hex_known_answer),
	    cmocka_unit_test(test_ct_equal_compares_all_bytes),
	    cmocka_unit_test(test_hmac_sha256_rfc4231_case2_and_parts),
	    cmocka_unit_test(test_gcm_round_trip_and_tag_failures),
	    cmocka_unit_test(test_gcm_empty_plaintext_and_empty_aad),
	    cmocka_unit_test(test_rsa_sign_verify_round_trip_with_generated_key),
	    cmocka_unit_test(test_pubkey_loads_from_cert_spki_and_bare_base64),
	    cmocka_unit_test(test_pubkey_rejects_short_rsa_and_non_rsa),
	    cmocka_unit_test(test_serial_equal_ignores_case_and_leading_zeros),
	};

	return cmocka_run_group_tests_name("sig", tests, NULL, NULL);
}
