/*
 * sig - strict codecs, digests, MACs and AEAD on OpenSSL 3: base64, hex, SHA-256,
 * HMAC-SHA256, AES-GCM and constant-time comparison (the RSA keys and signatures are in
 * sig_keys.c; both halves share sig.h).
 *
 * Everything here is fed attacker-controlled bytes, so every length is checked before it is
 * used, nothing assumes NUL termination unless the prototype takes a C string, and the OpenSSL
 * error queue is cleared on the way out so one bad request leaves nothing behind for the next.
 */
#include "sig.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

static int
sig_b64_value(unsigned char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int
sig_b64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen)
{
	size_t pad = 0, o = 0;

	if ((in == NULL && inlen > 0) || outlen == NULL || inlen % 4 != 0)
		return -1;
	if (inlen == 0) {
		*outlen = 0;
		return 0;
	}
	if (in[inlen - 1] == '=')
		pad = in[inlen - 2] == '=' ? 2 : 1;
	if (inlen / 4 * 3 - pad > outcap || out == NULL)
		return -1;
	for (size_t i = 0; i < inlen; i += 4) {
		size_t ndata = (i + 4 == inlen) ? 4 - pad : 4;
		uint32_t acc = 0;

		for (size_t j = 0; j < 4; j++) {
			int v = 0;

			/* A '=' anywhere but the counted final padding fails here as a bad char. */
			if (j < ndata && (v = sig_b64_value((unsigned char)in[i + j])) < 0)
				return -1;
			acc = acc << 6 | (uint32_t)v;
		}
		/* Non-zero unused bits would give a second spelling of the same bytes. */
		if ((ndata == 2 && (acc & 0xFFFF) != 0) || (ndata == 3 && (acc & 0xFF) != 0))
			return -1;
		out[o++] = (uint8_t)(acc >> 16);
		if (ndata >= 3)
			out[o++] = (uint8_t)(acc >> 8);
		if (ndata == 4)
			out[o++] = (uint8_t)acc;
	}
	*outlen = o;
	return 0;
}

int
sig_b64_encode(const uint8_t *in, size_t len, char *out, size_t outcap)
{
	if (out == NULL || len > INT_MAX / 2 || SIG_B64_ENCODED_LEN(len) + 1 > outcap ||
	    (in == NULL && len > 0))
		return -1;
	if (len == 0) {
		out[0] = '\0';
		return 0;
	}
	return EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

char *
sig_b64_encode_alloc(const uint8_t *in, size_t len)
{
	size_t cap;
	char *out;

	if (len > INT_MAX / 2)
		return NULL;
	cap = SIG_B64_ENCODED_LEN(len) + 1;
	if ((out = malloc(cap)) == NULL)
		return NULL;
	if (sig_b64_encode(in, len, out, cap) < 0) {
		free(out);
		return NULL;
	}
	return out;
}

int
sig_hex_encode(const uint8_t *in, size_t len, char *out, size_t outcap)
{
	static const char digits[] = "0123456789abcdef";

	if (out == NULL || outcap == 0 || len > (outcap - 1) / 2 || (in == NULL && len > 0))
		return -1;
	for (size_t i = 0; i < len; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * len] = '\0';
	return 0;
}

static int
sig_hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
sig_hex_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen)
{
	if ((in == NULL && inlen > 0) || outlen == NULL || inlen % 2 != 0 || inlen / 2 > outcap ||
	    (out == NULL && inlen > 0))
		return -1;
	for (size_t i = 0; i < inlen; i += 2) {
		int hi = sig_hex_value((unsigned char)in[i]);
		int lo = sig_hex_value((unsigned char)in[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	*outlen = inlen / 2;
	return 0;
}

int
sig_sha256_hex(const void *p, size_t n, char out[65])
{
	uint8_t md[SIG_SHA256_LEN];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if ((p == NULL && n > 0) || EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1) {
		ERR_clear_error();
		return -1;
	}
	return sig_hex_encode(md, mdlen, out, 65);
}

int
sig_hmac_sha256v(const uint8_t *key, size_t keylen, const struct sig_part *parts, size_t nparts,
		 uint8_t out[SIG_SHA256_LEN])
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
	if (EVP_MAC_final(ctx, out, &outl, SIG_SHA256_LEN) == 1 && outl == SIG_SHA256_LEN)
		rc = 0;
done:
	EVP_MAC_CTX_free(ctx);
	EVP_MAC_free(mac);
	ERR_clear_error();
	return rc;
}

int
sig_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t len,
		uint8_t out[SIG_SHA256_LEN])
{
	struct sig_part part = {msg, len};

	return sig_hmac_sha256v(key, keylen, &part, 1, out);
}

static const EVP_CIPHER *
sig_gcm_cipher(size_t keylen)
{
	if (keylen == 16)
		return EVP_aes_128_gcm();
	if (keylen == 32)
		return EVP_aes_256_gcm();
	return NULL;
}

/*
 * sig_gcm - one body for both directions. OpenSSL treats an update with a NULL output as AAD,
 * so the data update is skipped when there is no data, and AAD is always fed (even empty, as
 * WeChat's recipe says) from a non-NULL pointer.
 */
static int
sig_gcm(int enc, const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
	const uint8_t *aad, size_t aadlen, const uint8_t *in, size_t inlen, uint8_t *out,
	size_t *outlen)
{
	const EVP_CIPHER *cipher = sig_gcm_cipher(keylen);
	static const uint8_t empty[1];
	EVP_CIPHER_CTX *ctx = NULL;
	size_t datalen, need;
	uint8_t dummy[1];
	int n = 0, total = 0, rc = -1;

	if (cipher == NULL || key == NULL || nonce == NULL || noncelen == 0 || noncelen > 64 ||
	    (aad == NULL && aadlen > 0) || (in == NULL && inlen > 0) || outlen == NULL ||
	    inlen > INT_MAX - SIG_GCM_TAG_LEN || aadlen > INT_MAX)
		return -1;
	if (!enc && inlen < SIG_GCM_TAG_LEN)
		return -1;
	datalen = enc ? inlen : inlen - SIG_GCM_TAG_LEN;
	need = enc ? inlen + SIG_GCM_TAG_LEN : datalen;
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
	if (!enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, SIG_GCM_TAG_LEN,
					(void *)(in + datalen)) != 1)
		goto done;
	if (EVP_CipherFinal_ex(ctx, out + total, &n) <= 0)
		goto done;
	total += n;
	if (enc && EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_GET_TAG, SIG_GCM_TAG_LEN,
				       out + total) != 1)
		goto done;
	*outlen = (size_t)total + (enc ? SIG_GCM_TAG_LEN : 0);
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
sig_aes_gcm_decrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
		    const uint8_t *aad, size_t aadlen, const uint8_t *ct, size_t len, uint8_t *out,
		    size_t *outlen)
{
	return sig_gcm(0, key, keylen, nonce, noncelen, aad, aadlen, ct, len, out, outlen);
}

int
sig_aes_gcm_encrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
		    const uint8_t *aad, size_t aadlen, const uint8_t *pt, size_t len, uint8_t *out,
		    size_t *outlen)
{
	return sig_gcm(1, key, keylen, nonce, noncelen, aad, aadlen, pt, len, out, outlen);
}

int
sig_ct_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}
