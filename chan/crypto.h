/*
 * crypto - the crypto primitives the channel verifiers and signers are built from, on
 * OpenSSL 3.
 *
 * Strict base64 and hex codecs, RSA PKCS#1 v1.5 signatures with SHA-256, HMAC-SHA256,
 * AES-GCM, constant-time comparison and loading of RSA public keys in the three forms the
 * channels hand out (X.509 certificate PEM, SPKI "PUBLIC KEY" PEM, bare base64 SPKI).
 * Every function returns 0 on success and -1 on failure (or a length, where stated), never
 * prints and never exits. Messages written to err never contain key material. The codecs are
 * in crypto_codec.c, the MACs and AEAD in crypto_sym.c, the RSA signatures, keys and key files
 * in crypto_rsa.c. SHA-256 as hex, which programs without channels also need, is
 * common/digest.h.
 */
#ifndef PAYCB_CRYPTO_H
#define PAYCB_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>
#include <openssl/x509.h>

/* Buffer sizes for the codecs: decoded bytes never exceed CRYPTO_B64_DECODED_MAX(n). */
#define CRYPTO_B64_ENCODED_LEN(n) ((((n) + 2) / 3) * 4)
#define CRYPTO_B64_DECODED_MAX(n) (((n) / 4) * 3)

/* The largest RSA signature we handle (RSA-4096); the smallest key we accept is 2048 bits. */
#define CRYPTO_RSA_MAX_BYTES 512
#define CRYPTO_RSA_MIN_BITS  2048

#define CRYPTO_SHA256_LEN  32
#define CRYPTO_GCM_TAG_LEN 16

/* The serial of an X.509 certificate as upper-case hex; 20 bytes is the RFC 5280 maximum. */
#define CRYPTO_SERIAL_MAX 80

/* One piece of a message that is signed or MACed as the concatenation of its parts. */
struct crypto_part {
	const void *p;
	size_t n;
};

/*
 * Strict standard-alphabet base64 (RFC 4648 section 4): the length must be a multiple of 4,
 * '=' may appear only as one or two final characters, no whitespace, and the unused bits of
 * the last character must be zero. out must hold CRYPTO_B64_DECODED_MAX(inlen) bytes (or at
 * least outcap, which is checked). *outlen gets the exact decoded length.
 */
int crypto_b64_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen);
/* Writes base64 plus a NUL; returns the length written, or -1 if outcap is too small. */
int crypto_b64_encode(const uint8_t *in, size_t len, char *out, size_t outcap);
/* The same into a new buffer (free it), or NULL. */
char *crypto_b64_encode_alloc(const uint8_t *in, size_t len);

/* Lower-case hex plus a NUL; outcap must be at least 2*len+1. */
int crypto_hex_encode(const uint8_t *in, size_t len, char *out, size_t outcap);
/* Hex of either case, even length, no separators. */
int crypto_hex_decode(const char *in, size_t inlen, uint8_t *out, size_t outcap, size_t *outlen);

/*
 * RSA PKCS#1 v1.5 signatures. The verifiers return 0 only for a valid signature by an RSA key;
 * any other key type, an empty or oversized signature and every OpenSSL error give -1.
 */
int crypto_rsa_sha256_verify(EVP_PKEY *pkey, const uint8_t *msg, size_t len, const uint8_t *sig,
                             size_t siglen);
int crypto_rsa_sha256_verifyv(EVP_PKEY *pkey, const struct crypto_part *parts, size_t nparts,
                              const uint8_t *sig, size_t siglen);
/* Any digest OpenSSL names ("SHA1" for legacy Alipay RSA test vectors); never used to accept
 * notifications, which are SHA-256 only. */
int crypto_rsa_verify_md(EVP_PKEY *pkey, const char *mdname, const struct crypto_part *parts,
                         size_t nparts, const uint8_t *sig, size_t siglen);
/* Signs into a new buffer *sig (free it) of *siglen bytes; for the simulator and tests. */
int crypto_rsa_sha256_sign(EVP_PKEY *pkey, const uint8_t *msg, size_t len, uint8_t **sig,
                           size_t *siglen);
int crypto_rsa_sha256_signv(EVP_PKEY *pkey, const struct crypto_part *parts, size_t nparts,
                            uint8_t **sig, size_t *siglen);

int crypto_hmac_sha256(const uint8_t *key, size_t keylen, const uint8_t *msg, size_t len,
                       uint8_t out[CRYPTO_SHA256_LEN]);
int crypto_hmac_sha256v(const uint8_t *key, size_t keylen, const struct crypto_part *parts,
                        size_t nparts, uint8_t out[CRYPTO_SHA256_LEN]);

/*
 * AES-GCM with the 16-byte tag appended to the ciphertext. keylen 16 or 32 selects AES-128
 * or AES-256; the nonce may be 1..64 bytes (12 is standard). On entry *outlen is the
 * capacity of out, which must be at least len - 16 (decrypt) or len + 16 (encrypt); on
 * success it is the number of bytes written. Decryption fails on any tag mismatch.
 */
int crypto_aes_gcm_decrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen, const uint8_t *ct, size_t len,
                           uint8_t *out, size_t *outlen);
int crypto_aes_gcm_encrypt(const uint8_t *key, size_t keylen, const uint8_t *nonce, size_t noncelen,
                           const uint8_t *aad, size_t aadlen, const uint8_t *pt, size_t len,
                           uint8_t *out, size_t *outlen);

/* 1 if the n bytes are equal, else 0, in time independent of the contents (CRYPTO_memcmp). */
int crypto_ct_equal(const void *a, const void *b, size_t n);

/*
 * Loads an RSA public key (at least 2048 bits) from an X.509 certificate PEM, a SPKI
 * "PUBLIC KEY" PEM, or bare base64 of a DER SPKI or certificate (the Alipay console form;
 * whitespace allowed). When the input is a certificate and serial is not NULL, serial gets
 * its upper-case hex serial, else "". err names what is wrong, never the key.
 */
int crypto_load_pubkey_mem(const void *buf, size_t len, EVP_PKEY **out, char *serial,
                           size_t seriallen, char *err, size_t errlen);
int crypto_load_pubkey_file(const char *path, EVP_PKEY **out, char *err, size_t errlen);
int crypto_load_pubkey_file_serial(const char *path, EVP_PKEY **out, char *serial, size_t seriallen,
                                   char *err, size_t errlen);
/*
 * Reads a whole regular file of at most max bytes into a new buffer with a NUL after the
 * data (free it, after OPENSSL_cleanse if it holds a secret): cfg_read_file, as bytes. err
 * names the file and the problem. Used for key and secret files, which are small.
 */
int crypto_read_file(const char *path, size_t max, uint8_t **buf, size_t *len, char *err,
                     size_t errlen);
/* Like crypto_read_file for a secret: refused when group- or other-accessible or owned by
 * another user (cfg_secret_perms). */
int crypto_read_secret_file(const char *path, size_t max, uint8_t **buf, size_t *len, char *err,
                            size_t errlen);
/* Loads an RSA private key from PEM (PKCS#1 or PKCS#8, unencrypted); for the simulator. */
int crypto_load_privkey_mem(const void *buf, size_t len, EVP_PKEY **out, char *err, size_t errlen);
/* The same from a file, read as a secret (crypto_read_secret_file): a private key readable by
 * others is refused, as ssh refuses it. */
int crypto_load_privkey_file(const char *path, EVP_PKEY **out, char *err, size_t errlen);

/*
 * Compares two certificate serials in hex, ignoring case and leading zeros: WeChat's Java
 * tooling prints BigInteger hex (no leading zero) and its Go tooling prints bytes (with one).
 * Returns 1 if they denote the same number.
 */
int crypto_serial_equal(const char *a, const char *b);

#endif
