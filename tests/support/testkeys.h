/*
 * testkeys - RSA keys, self-signed certificates and key files generated at test time, so the
 * channel tests exercise real key loading and signing without any committed private key.
 *
 * Functions return NULL or -1 on failure and never touch cmocka; tests assert on the results.
 */
#ifndef PAYCB_TESTKEYS_H
#define PAYCB_TESTKEYS_H

#include <stddef.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* A fresh RSA-2048 key pair (free with EVP_PKEY_free). */
EVP_PKEY *tk_rsa_new(void);

/* A self-signed X.509 certificate for key with the given hex serial, valid for a day. */
X509 *tk_self_signed(EVP_PKEY *key, const char *serial_hex);

/* PEM text (free it) of a certificate, of a public key as SPKI, or of a private key. */
char *tk_cert_pem(X509 *cert);
char *tk_pubkey_pem(EVP_PKEY *key);
char *tk_privkey_pem(EVP_PKEY *key);
/* Base64 of the DER SPKI on one line, as the Alipay console shows its public key. */
char *tk_pubkey_b64(EVP_PKEY *key);

/*
 * Writes data to a new file under $TMPDIR (default /tmp) and puts its name in path. Remove it
 * with tk_unlink(). Returns 0 or -1.
 */
int tk_write_temp(const void *data, size_t len, char *path, size_t pathlen);
void tk_unlink(const char *path);

#endif
