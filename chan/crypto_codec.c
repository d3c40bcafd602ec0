/*
 * crypto_codec - strict codecs on OpenSSL 3: base64, hex and constant-time comparison (the
 * MACs and AEAD are in crypto_sym.c, the RSA keys and signatures in crypto_rsa.c; all three
 * share crypto.h).
 *
 * Everything here is fed attacker-controlled bytes, so every length is checked before it is
 * used, nothing assumes NUL termination unless the prototype takes a C string, and the OpenSSL
 * error queue is cleared on the way out so one bad request leaves nothing behind for the next.
 */
#include "crypto.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>

#include "form.h"

static int
crypto_b64_value(unsigned char c)
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
crypto_b64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen)
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
			if (j < ndata && (v = crypto_b64_value((unsigned char)in[i + j])) < 0)
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
crypto_b64_encode(const uint8_t *in, size_t len, char *out, size_t outcap)
{
	if (out == NULL || len > INT_MAX / 2 || CRYPTO_B64_ENCODED_LEN(len) + 1 > outcap ||
	    (in == NULL && len > 0))
		return -1;
	if (len == 0) {
		out[0] = '\0';
		return 0;
	}
	return EVP_EncodeBlock((unsigned char *)out, in, (int)len);
}

char *
crypto_b64_encode_alloc(const uint8_t *in, size_t len)
{
	size_t cap;
	char *out;

	if (len > INT_MAX / 2)
		return NULL;
	cap = CRYPTO_B64_ENCODED_LEN(len) + 1;
	if ((out = malloc(cap)) == NULL)
		return NULL;
	if (crypto_b64_encode(in, len, out, cap) < 0) {
		free(out);
		return NULL;
	}
	return out;
}

int
crypto_hex_encode(const uint8_t *in, size_t len, char *out, size_t outcap)
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

int
crypto_hex_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen)
{
	if ((in == NULL && inlen > 0) || outlen == NULL || inlen % 2 != 0 || inlen / 2 > outcap ||
	    (out == NULL && inlen > 0))
		return -1;
	for (size_t i = 0; i < inlen; i += 2) {
		int hi = form_hex_value((unsigned char)in[i]);
		int lo = form_hex_value((unsigned char)in[i + 1]);

		if (hi < 0 || lo < 0)
			return -1;
		out[i / 2] = (uint8_t)(hi << 4 | lo);
	}
	*outlen = inlen / 2;
	return 0;
}

int
crypto_ct_equal(const void *a, const void *b, size_t n)
{
	return CRYPTO_memcmp(a, b, n) == 0;
}
