/*
 * crypto_rsa - RSA on OpenSSL 3: PKCS#1 v1.5 signatures with SHA-256, loading public keys in the
 * three forms the channels hand out and private keys from PEM, and certificate serials (the
 * codecs are in crypto_codec.c, the MACs in crypto_sym.c; all share crypto.h). Key and secret files
 * are read by cfg_read_file, the one reader of such files.
 *
 * Keys and signatures come from configuration and from the channels, so they are checked as
 * hostile: only RSA keys of at least CRYPTO_RSA_MIN_BITS are accepted, a secret file readable by
 * others is refused, and the OpenSSL error queue is cleared on the way out so one bad input
 * leaves nothing behind for the next.
 */
#include "crypto.h"

#include "cfg.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <openssl/bn.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

/* Key files are small; anything bigger than this is a mistake or an attack on memory. */
#define CRYPTO_KEY_FILE_MAX (64 * 1024)

int
crypto_rsa_verify_md(EVP_PKEY *pkey, const char *mdname, const struct crypto_part *parts,
                     size_t nparts, const uint8_t *sig, size_t siglen)
{
	EVP_MD_CTX *ctx = NULL;
	EVP_PKEY_CTX *pctx = NULL;
	int rc = -1;

	/* Only RSA: an EC or RSA-PSS key must not turn this into a different scheme. */
	if (pkey == NULL || sig == NULL || siglen == 0 || siglen > CRYPTO_RSA_MAX_BYTES ||
	    !EVP_PKEY_is_a(pkey, "RSA"))
		goto done;
	if ((ctx = EVP_MD_CTX_new()) == NULL)
		goto done;
	if (EVP_DigestVerifyInit_ex(ctx, &pctx, mdname, NULL, NULL, pkey, NULL) != 1 ||
	    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
		goto done;
	for (size_t i = 0; i < nparts; i++)
		if (parts[i].n > 0 && EVP_DigestVerifyUpdate(ctx, parts[i].p, parts[i].n) != 1)
			goto done;
	if (EVP_DigestVerifyFinal(ctx, sig, siglen) == 1)
		rc = 0;
done:
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int
crypto_rsa_sha256_verifyv(EVP_PKEY *pkey, const struct crypto_part *parts, size_t nparts,
                          const uint8_t *sig, size_t siglen)
{
	return crypto_rsa_verify_md(pkey, "SHA256", parts, nparts, sig, siglen);
}

int
crypto_rsa_sha256_verify(EVP_PKEY *pkey, const uint8_t *msg, size_t len, const uint8_t *sig,
                         size_t siglen)
{
	struct crypto_part part = {msg, len};

	if (msg == NULL && len > 0)
		return -1;
	return crypto_rsa_sha256_verifyv(pkey, &part, 1, sig, siglen);
}

int
crypto_rsa_sha256_signv(EVP_PKEY *pkey, const struct crypto_part *parts, size_t nparts,
                        uint8_t **sig, size_t *siglen)
{
	EVP_MD_CTX *ctx = NULL;
	EVP_PKEY_CTX *pctx = NULL;
	uint8_t *buf = NULL;
	size_t len = 0;
	int rc = -1;

	*sig = NULL;
	if (pkey == NULL || !EVP_PKEY_is_a(pkey, "RSA") || (ctx = EVP_MD_CTX_new()) == NULL)
		goto done;
	if (EVP_DigestSignInit_ex(ctx, &pctx, "SHA256", NULL, NULL, pkey, NULL) != 1 ||
	    EVP_PKEY_CTX_set_rsa_padding(pctx, RSA_PKCS1_PADDING) != 1)
		goto done;
	for (size_t i = 0; i < nparts; i++)
		if (parts[i].n > 0 && EVP_DigestSignUpdate(ctx, parts[i].p, parts[i].n) != 1)
			goto done;
	if (EVP_DigestSignFinal(ctx, NULL, &len) != 1 || (buf = malloc(len)) == NULL ||
	    EVP_DigestSignFinal(ctx, buf, &len) != 1)
		goto done;
	*sig = buf;
	*siglen = len;
	buf = NULL;
	rc = 0;
done:
	free(buf);
	EVP_MD_CTX_free(ctx);
	ERR_clear_error();
	return rc;
}

int
crypto_rsa_sha256_sign(EVP_PKEY *pkey, const uint8_t *msg, size_t len, uint8_t **sig,
                       size_t *siglen)
{
	struct crypto_part part = {msg, len};

	return crypto_rsa_sha256_signv(pkey, &part, 1, sig, siglen);
}

/* The certificate's serial as upper-case hex without leading zero bytes ("5157F09E..."). */
static int
crypto_cert_serial_hex(const X509 *cert, char *out, size_t outlen)
{
	BIGNUM *bn = NULL;
	char *hex = NULL;
	int rc = -1;

	if (out == NULL || outlen == 0)
		return -1;
	out[0] = '\0';
	if (cert == NULL || (bn = ASN1_INTEGER_to_BN(X509_get0_serialNumber(cert), NULL)) == NULL ||
	    (hex = BN_bn2hex(bn)) == NULL)
		goto done;
	/* A negative serial violates RFC 5280 and has no agreed hex spelling. */
	if (hex[0] == '-' || strlen(hex) >= outlen)
		goto done;
	memcpy(out, hex, strlen(hex) + 1);
	rc = 0;
done:
	OPENSSL_free(hex);
	BN_free(bn);
	ERR_clear_error();
	return rc;
}

/* crypto_hexstr - whether s is non-empty and all hex digits. */
static int
crypto_hexstr(const char *s)
{
	return *s != '\0' && s[strspn(s, "0123456789abcdefABCDEF")] == '\0';
}

int
crypto_serial_equal(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return 0;
	if (!crypto_hexstr(a) || !crypto_hexstr(b))
		return strcmp(a, b) == 0;
	while (a[0] == '0' && a[1] != '\0')
		a++;
	while (b[0] == '0' && b[1] != '\0')
		b++;
	return strcasecmp(a, b) == 0;
}

/* Refuses to prompt on a terminal for the passphrase of an encrypted PEM. */
static int
crypto_no_passphrase(char *buf, int size, int rwflag, void *u)
{
	(void)buf, (void)size, (void)rwflag, (void)u;
	return -1;
}

/* crypto_check_rsa - accepts only RSA keys of at least CRYPTO_RSA_MIN_BITS bits. */
static int
crypto_check_rsa(EVP_PKEY *pkey, char *err, size_t errlen)
{
	if (!EVP_PKEY_is_a(pkey, "RSA")) {
		snprintf(err, errlen, "not an RSA key");
		return -1;
	}
	if (EVP_PKEY_get_bits(pkey) < CRYPTO_RSA_MIN_BITS) {
		snprintf(err, errlen, "RSA key of %d bits, at least %d required",
		         EVP_PKEY_get_bits(pkey), CRYPTO_RSA_MIN_BITS);
		return -1;
	}
	return 0;
}

/* crypto_from_der - a DER SPKI, or else a DER certificate, that must use every byte given. */
static EVP_PKEY *
crypto_from_der(const uint8_t *der, size_t len, char *serial, size_t seriallen)
{
	const unsigned char *p = der;
	EVP_PKEY *pkey;
	X509 *x;

	if (len > LONG_MAX)
		return NULL;
	if ((pkey = d2i_PUBKEY(NULL, &p, (long)len)) != NULL && p == der + len)
		return pkey;
	EVP_PKEY_free(pkey);
	p = der;
	if ((x = d2i_X509(NULL, &p, (long)len)) == NULL || p != der + len) {
		X509_free(x);
		return NULL;
	}
	pkey = X509_get_pubkey(x);
	if (pkey != NULL && serial != NULL && crypto_cert_serial_hex(x, serial, seriallen) != 0) {
		EVP_PKEY_free(pkey);
		pkey = NULL;
	}
	X509_free(x);
	return pkey;
}

/* crypto_from_pem - a certificate or SPKI PEM; serial gets a certificate's serial. */
static EVP_PKEY *
crypto_from_pem(const void *buf, size_t len, int is_cert, char *serial, size_t seriallen, char *err,
                size_t errlen)
{
	EVP_PKEY *pkey = NULL;
	BIO *bio = BIO_new_mem_buf(buf, (int)len);
	X509 *x = NULL;

	if (bio == NULL)
		snprintf(err, errlen, "out of memory");
	else if (!is_cert) {
		if ((pkey = PEM_read_bio_PUBKEY(bio, NULL, crypto_no_passphrase, NULL)) == NULL)
			snprintf(err, errlen, "malformed PUBLIC KEY PEM");
	} else if ((x = PEM_read_bio_X509(bio, NULL, crypto_no_passphrase, NULL)) == NULL ||
	           (pkey = X509_get_pubkey(x)) == NULL) {
		snprintf(err, errlen, "malformed CERTIFICATE PEM");
	} else if (serial != NULL && crypto_cert_serial_hex(x, serial, seriallen) != 0) {
		snprintf(err, errlen, "certificate serial unreadable or too long");
		EVP_PKEY_free(pkey);
		pkey = NULL;
	}
	X509_free(x);
	BIO_free(bio);
	return pkey;
}

/* crypto_from_b64 - bare base64, as the Alipay console shows it, line breaks allowed. */
static EVP_PKEY *
crypto_from_b64(const void *buf, size_t len, char *serial, size_t seriallen, char *err,
                size_t errlen)
{
	char *text = malloc(len);
	uint8_t *der = malloc(len);
	size_t n = 0, derlen = 0;
	EVP_PKEY *pkey = NULL;

	if (text == NULL || der == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	for (size_t i = 0; i < len; i++) {
		char c = ((const char *)buf)[i];

		if (c != ' ' && c != '\t' && c != '\r' && c != '\n')
			text[n++] = c;
	}
	if (crypto_b64_decode(text, n, der, len, &derlen) != 0)
		snprintf(err, errlen, "neither PEM nor valid base64");
	else if ((pkey = crypto_from_der(der, derlen, serial, seriallen)) == NULL)
		snprintf(err, errlen, "base64 is neither a SPKI public key nor a certificate");
done:
	free(text);
	free(der);
	return pkey;
}

int
crypto_load_pubkey_mem(const void *buf, size_t len, EVP_PKEY **out, char *serial, size_t seriallen,
                       char *err, size_t errlen)
{
	static const char cert_tag[] = "-----BEGIN CERTIFICATE-----";
	static const char spki_tag[] = "-----BEGIN PUBLIC KEY-----";
	EVP_PKEY *pkey = NULL;
	int is_cert, rc = -1;

	*out = NULL;
	if (serial != NULL && seriallen > 0)
		serial[0] = '\0';
	if (buf == NULL || len == 0 || len > CRYPTO_KEY_FILE_MAX) {
		snprintf(err, errlen, len == 0 ? "empty key" : "key data too large");
		goto done;
	}
	is_cert = memmem(buf, len, cert_tag, sizeof(cert_tag) - 1) != NULL;
	if (is_cert || memmem(buf, len, spki_tag, sizeof(spki_tag) - 1) != NULL)
		pkey = crypto_from_pem(buf, len, is_cert, serial, seriallen, err, errlen);
	else if (memmem(buf, len, "-----BEGIN", 10) != NULL)
		snprintf(err, errlen, "unsupported PEM type (want CERTIFICATE or PUBLIC KEY)");
	else
		pkey = crypto_from_b64(buf, len, serial, seriallen, err, errlen);
	if (pkey == NULL || crypto_check_rsa(pkey, err, errlen) != 0)
		goto done;
	*out = pkey;
	pkey = NULL;
	rc = 0;
done:
	EVP_PKEY_free(pkey);
	ERR_clear_error();
	return rc;
}

int
crypto_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, char *err, size_t errlen)
{
	char *p;
	int rc = cfg_read_file(path, max, 0, &p, len, err, errlen);

	*buf = (uint8_t *)p;
	return rc;
}

int
crypto_read_secret_file(const char *path, size_t max, uint8_t **buf, size_t *len, char *err,
                        size_t errlen)
{
	char *p;
	int rc = cfg_read_file(path, max, 1, &p, len, err, errlen);

	*buf = (uint8_t *)p;
	return rc;
}

int
crypto_load_pubkey_file_serial(const char *path, EVP_PKEY **out, char *serial, size_t seriallen,
                               char *err, size_t errlen)
{
	char why[160];
	uint8_t *buf;
	size_t len;
	int rc;

	*out = NULL;
	if (crypto_read_file(path, CRYPTO_KEY_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	if ((rc = crypto_load_pubkey_mem(buf, len, out, serial, seriallen, why, sizeof(why))) != 0)
		snprintf(err, errlen, "%s: %s", path, why);
	free(buf);
	return rc;
}

int
crypto_load_pubkey_file(const char *path, EVP_PKEY **out, char *err, size_t errlen)
{
	return crypto_load_pubkey_file_serial(path, out, NULL, 0, err, errlen);
}

int
crypto_load_privkey_mem(const void *buf, size_t len, EVP_PKEY **out, char *err, size_t errlen)
{
	EVP_PKEY *pkey = NULL;
	BIO *bio = NULL;
	int rc = -1;

	*out = NULL;
	if (buf == NULL || len == 0 || len > CRYPTO_KEY_FILE_MAX) {
		snprintf(err, errlen, "empty or oversized private key");
		goto done;
	}
	if ((bio = BIO_new_mem_buf(buf, (int)len)) == NULL ||
	    (pkey = PEM_read_bio_PrivateKey(bio, NULL, crypto_no_passphrase, NULL)) == NULL) {
		snprintf(err, errlen, "malformed or encrypted private key PEM");
		goto done;
	}
	if (crypto_check_rsa(pkey, err, errlen) != 0)
		goto done;
	*out = pkey;
	pkey = NULL;
	rc = 0;
done:
	EVP_PKEY_free(pkey);
	BIO_free(bio);
	ERR_clear_error();
	return rc;
}

int
crypto_load_privkey_file(const char *path, EVP_PKEY **out, char *err, size_t errlen)
{
	char why[160];
	uint8_t *buf;
	size_t len;
	int rc;

	*out = NULL;
	if (crypto_read_secret_file(path, CRYPTO_KEY_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	if ((rc = crypto_load_privkey_mem(buf, len, out, why, sizeof(why))) != 0)
		snprintf(err, errlen, "%s: %s", path, why);
	OPENSSL_clear_free(buf, len + 1);
	return rc;
}
