/*
 * crypto_sym - the symmetric-key primitives on OpenSSL 3: HMAC-SHA256 (Stripe's signatures)
 * and AES-GCM (WeChat Pay's encrypted resource).
 *
 * Everything here is fed attacker-controlled bytes, so every length is checked before it is
 * used, and the OpenSSL error queue is cleared on the way out so one bad request leaves nothing
 * behind for the next.
 */
#include "crypto.h"

#include <limits.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

int
crypto_hmac_sha256v(const uint8_t *key, size_t keylen, const struct crypto_part *parts,
                    size_t nparts, uint8_t out[CRYPTO_SHA256_LEN])
{
	char digest[] = "SHA256";
	OSSL_PARAM params[2];
	EVP_MAC *mac = NULL;
	EVP_MAC_CTX *ctx = NULL;
	size_t outl = 0;
	int rc = -1;

	/* An empty key would make the MAC forgeable by anyone; refuse it outright. */
	if (key == NULL || keylen == 0)
		goto done;
	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0);
	params[1] = OSSL_PARAM_construct_end();
	if ((mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL ||
	    (ctx = EVP_MAC_CTX_new(mac)) == NULL || EVP_MAC_init(ctx, key, keylen, params) != 1)
		goto done;
	for (size_t i = 0; i < nparts; i++)
		if (parts[i].n > 0 && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
			goto done;
	if (EVP_MAC_final(ctx, out, &outl, CRYPTO_SHA256_LEN) == 1 && outl == CRYPTO_SHA256_LEN)
		rc = 0;
done:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	ERR_clear_error();
	return rc;
}

int
crypto_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t len,
                   uint8_t out[CRYPTO_SHA256_LEN])
{
	struct crypto_part part = {msg, len};

	return crypto_hmac_sha256v(key, keylen, &part, 1, out);
}

static const EVP_CIPHER *
crypto_gcm_cipher(size_t keylen)
{
	if (keylen == 16)
		return EVP_aes_128_gcm();
	if (keylen == 32)
		return EVP_aes_256_gcm();
	return NULL;
}

/*
 * crypto_gcm - one body for both directions. OpenSSL treats an update with a NULL output as AAD,
 * so the data update is skipped when there is no data, and AAD is always fed (even empty, as
 * WeChat's recipe says) from a non-NULL pointer.
 */
static int
crypto_gcm(int enc, const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
           const uint8_t *aad, size_t aadlen, const uint8_t *in, size_t inlen, uint8_t *out,
           size_t *outlen)
{
	const EVP_CIPHER *cipher = crypto_gcm_cipher(keylen);
	static const uint8_t empty[1];
	EVP_CIPHER_CTX *ctx = NULL;
	size_t datalen, need;
	uint8_t dummy[1], tag[CRYPTO_GCM_TAG_LEN];
	int n = 0, total = 0, rc = -1;

	if (cipher == NULL || key == NULL || nonce == NULL || noncelen == 0 || noncelen > 64 ||
	    (aad == NULL && aadlen > 0) || (in == NULL && inlen > 0) || outlen == NULL ||
	    inlen > INT_MAX - CRYPTO_GCM_TAG_LEN || aadlen > INT_MAX)
		return -1;
	if (!enc && inlen < CRYPTO_GCM_TAG_LEN)
		return -1;
	datalen = enc ? inlen : inlen - CRYPTO_GCM_TAG_LEN;
	need = enc ? inlen + CRYPTO_GCM_TAG_LEN : datalen;
	if (*outlen < need || (out == NULL && need > 0))
		return -1;
	if (out == NULL)
		out = dummy;
	if ((ctx = EVP_CIPHER_CTX_new()) == NULL ||
	    EVP_CipherInit_ex(ctx, cipher, NULL, NULL, NULL, enc) != 1 ||
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)noncelen, NULL) != 1 ||
	    EVP_CipherInit_ex(ctx, NULL, NULL, key, nonce, enc) != 1 ||
	    EVP_CipherUpdate(ctx, NULL, &n, aad != NULL ? aad : empty, (int)aadlen) != 1)
		goto done;
	if (datalen > 0) {
		if (EVP_CipherUpdate(ctx, out, &n, in, (int)datalen) != 1)
			goto done;
		total = n;
	}
	/* OpenSSL takes the expected tag through a non-const pointer: hand it a copy. */
	if (!enc) {
		memcpy(tag, in + datalen, sizeof(tag));
		if (EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, sizeof(tag), tag) != 1)
			goto done;
	}
	if (EVP_CipherFinal_ex(ctx, out + total, &n) <= 0)
		goto done;
	total += n;
	if (enc &&
	    EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, CRYPTO_GCM_TAG_LEN, out + total) != 1)
		goto done;
	*outlen = (size_t)total + (enc ? CRYPTO_GCM_TAG_LEN : 0);
	rc = 0;
done:
	/* Plaintext that failed authentication must not be left for a careless caller. */
	if (rc != 0 && out != dummy)
		OPENSSL_cleanse(out, need);
	EVP_CIPHER_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int
crypto_aes_gcm_decrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
                       const uint8_t *aad, size_t aadlen, const uint8_t *ct, size_t len,
                       uint8_t *out, size_t *outlen)
{
	return crypto_gcm(0, key, keylen, nonce, noncelen, aad, aadlen, ct, len, out, outlen);
}

int
crypto_aes_gcm_encrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
                       const uint8_t *aad, size_t aadlen, const uint8_t *pt, size_t len,
                       uint8_t *out, size_t *outlen)
{
	return crypto_gcm(1, key, keylen, nonce, noncelen, aad, aadlen, pt, len, out, outlen);
}
