/*
 * vectors - access to the test vectors (tests/vectors/inbound, or $PAYCB_VECTORS).
 *
 * Paths are relative to the vectors directory ("wechatpay/derived/cases.json"). Functions
 * return NULL on failure and never touch cmocka; tests assert on the results.
 */
#ifndef PAYCB_VECTORS_H
#define PAYCB_VECTORS_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>
#include <openssl/evp.h>

/* The vectors directory: $PAYCB_VECTORS, else tests/vectors/inbound (tests run at the repo root).
 */
const char *vec_dir(void);

/* The exact bytes of a vector file, with a NUL after them (free it); *len excludes the NUL. */
uint8_t *vec_read(const char *rel, size_t *len);

/* A vector file parsed as JSON (json_decref it). */
json_t *vec_json(const char *rel);

/*
 * A public key from a vector file (certificate, SPKI PEM or bare base64). rel may carry a
 * trailing comment, as cases.json's "verify_key" does: only its first word is the file.
 * serial, if not NULL, gets a certificate's serial. Free the key with EVP_PKEY_free.
 */
EVP_PKEY *vec_pubkey(const char *rel, char *serial, size_t seriallen);

/* A string member of a JSON object, or NULL. */
const char *vec_str(const json_t *obj, const char *key);

#endif
