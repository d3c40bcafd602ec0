/*
 * sim_pki - self-signed platform certificates and PEM text of certificates and keys (see
 * sim_pki.h), for paycb-sim's key files and the tests' key fixtures.
 *
 * PEM output goes through a memory BIO copied into a plain malloc'd string, so callers free
 * it like any other buffer and decide themselves whether it goes to a file.
 */
#include "sim_pki.h"

#include <stdlib.h>
#include <string.h>

#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/rand.h>

/* random_serial - a random positive 20-byte serial with a non-zero first byte. */
static BIGNUM *
random_serial(void)
{
	unsigned char raw[20];

	if (RAND_bytes(raw, sizeof(raw)) != 1)
		return NULL;
	raw[0] = (unsigned char)((raw[0] & 0x7f) | 0x10);
	return BN_bin2bn(raw, sizeof(raw), NULL);
}

X509 *
sim_pki_cert(EVP_PKEY *key, const char *serial_hex, int days)
{
	ASN1_INTEGER *serial = NULL;
	BIGNUM *bn = NULL;
	X509_NAME *name;
	X509 *x = NULL;
	int ok = 0;

	if (serial_hex != NULL ? BN_hex2bn(&bn, serial_hex) == 0 : (bn = random_serial()) == NULL)
		goto done;
	if ((x = X509_new()) == NULL || (serial = BN_to_ASN1_INTEGER(bn, NULL)) == NULL)
		goto done;
	if (X509_set_version(x, 2) != 1 || X509_set_serialNumber(x, serial) != 1 ||
	    X509_gmtime_adj(X509_getm_notBefore(x), -3600) == NULL ||
	    X509_time_adj_ex(X509_getm_notAfter(x), days, 0, NULL) == NULL ||
	    X509_set_pubkey(x, key) != 1)
		goto done;
	name = X509_get_subject_name(x);
	if (X509_NAME_add_entry_by_txt(name, "O", MBSTRING_ASC, (const unsigned char *)"paycb-sim",
	                               -1, -1, 0) != 1 ||
	    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC,
	                               (const unsigned char *)"WeChat Pay platform (simulated)", -1,
	                               -1, 0) != 1 ||
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

/* bio_string - the contents of a memory BIO as a new C string; frees the BIO. */
static char *
bio_string(BIO *bio, int ok)
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
sim_pki_cert_pem(X509 *cert)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return bio_string(bio, bio != NULL && PEM_write_bio_X509(bio, cert) == 1);
}

char *
sim_pki_pubkey_pem(EVP_PKEY *key)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return bio_string(bio, bio != NULL && PEM_write_bio_PUBKEY(bio, key) == 1);
}

char *
sim_pki_privkey_pem(EVP_PKEY *key)
{
	BIO *bio = BIO_new(BIO_s_mem());

	return bio_string(
	    bio, bio != NULL && PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1);
}
