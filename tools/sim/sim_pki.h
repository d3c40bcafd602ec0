/*
 * sim_pki - the key material paycb-sim hands out, as text: self-signed platform certificates
 * and PEM renditions of certificates and keys. The tests link it too (tests/support/
 * testkeys.c), so one piece of code makes every certificate ingest is given.
 */
#ifndef PAYCB_SIM_PKI_H
#define PAYCB_SIM_PKI_H

#include <openssl/evp.h>
#include <openssl/x509.h>

/*
 * A self-signed platform certificate for key, valid from an hour ago for days days. serial_hex
 * names its serial; NULL draws a random 20-byte one whose first byte is non-zero and positive
 * (so its hex has no leading zero to normalise). NULL on failure (free with X509_free).
 */
X509 *sim_pki_cert(EVP_PKEY *key, const char *serial_hex, int days);

/*
 * PEM text, as a new NUL-terminated string (free it; cleanse a private key's first), of a
 * certificate, of a public key as SPKI, or of a private key (PKCS#8). NULL on failure.
 */
char *sim_pki_cert_pem(X509 *cert);
char *sim_pki_pubkey_pem(EVP_PKEY *key);
char *sim_pki_privkey_pem(EVP_PKEY *key);

#endif
