/*
 * testkeys - key pairs, certificates and temporary key files for the channel tests.
 *
 * Generation uses OpenSSL 3's EVP_RSA_gen; PEM output goes through a memory BIO copied into a
 * plain malloc'd string so callers free it like any other buffer.
 */
#include "testkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>

#include "crypto.h"

EVP_PKEY *
tk_rsa_new(void)
{
	return EVP_RSA_gen(2048);
}

X509 *
tk_self_signed(EVP_PKEY *key, const char *serial_hex)
{
	ASN1_INTEGER *serial = NULL;
	BIGNUM *bn = NULL;
	X509_NAME *name;
	X509 *x = NULL;
	int ok = 0;

	if ((x = X509_new()) == NULL || BN_hex2bn(&bn, serial_hex) == 0 ||
	    (serial = BN_to_ASN1_INTEGER(bn, NULL)) == NULL)
		goto done;
	if (X509_set_version(x, 2) != 1 || X509_set_serialNumber(x, serial) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
	    X509_gmtime_adj(X509_getm_notAfter(x), 86400) == NULL || X509_set_pubkey(x, key) != 1)
		goto done;
	name = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
				       (const unsigned char *)"paycb test platform", -1, -1, 0) != 1 ||
	    X509_set_issuer_name(x, name) != 1 || X509_sign(x, key, EVP_sha256()) == 0)
		goto done;
	ok = 1;
done:
	ASN1_INTEGER_free(serial);
	BN_free(bn);
	if (!ok) {
		X509_free(x);
		x = NULL;
	}
	ERR_clear_error();
	return x;
}

/* tk_bio_string - the contents of a memory BIO as a new C string; frees the BIO. */
static char *
tk_bio_string(BIO *bio, int ok)
{
	char *data, *s = NULL;
	long n;

	if (bio != NULL && ok && (n = BIO_get_mem_data(bio, &data)) >= 0 &&
	    (s = malloc((size_t)n + 1)) != NULL) {
		memcpy(s, data, (size_t)n);
		s[n] = '\0';
	}
	BIO_free(bio);
	return s;
}

char *
tk_cert_pem(X509 *cert)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return tk_bio_string(bio, bio != NULL && PEM_write_bio_X509(bio, cert) == 1);
}

char *
tk_pubkey_pem(EVP_PKEY *key)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return tk_bio_string(bio, bio != NULL && PEM_write_bio_PUBKEY(bio, key) == 1);
}

char *
tk_privkey_pem(EVP_PKEY *key)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return tk_bio_string(bio, bio != NULL && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0,
								       NULL, NULL) == 1);
}

char *
tk_pubkey_b64(EVP_PKEY *key)
{
	unsigned char *der = NULL;
	char *s;
	int n;

	if ((n = i2d_PUBKEY(key, &der)) <= 0)
		return NULL;
	s = crypto_b64_encode_alloc(der, (size_t)n);
	OPENSSL_free(der);
	return s;
}

int
tk_write_temp(const void *data, size_t len, char *path, size_t pathlen)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	if (snprintf(path, pathlen, "%s/paycb-test-XXXXXX", dir != NULL ? dir : "/tmp") >=
	    (int)pathlen)
		return -1;
	if ((fd = mkstemp(path)) < 0)
		return -1;
	if (write(fd, data, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		return -1;
	}
	return close(fd);
}

void
tk_unlink(const char *path)
{
	unlink(path);
}
