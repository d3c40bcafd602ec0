/*
 * digest - SHA-256 as hex, the fingerprint paycb logs in place of a body or a secret and
 * stores for a migration file. A leaf of common/ because the message encoder, ingest's log
 * lines and the migrator use it; the channels' crypto (chan/crypto.h) builds on it too.
 */
#include "digest.h"

#include <stdint.h>

#include <openssl/err.h>
#include <openssl/evp.h>

int
digest_sha256_hex(const void *p, size_t n, char out[65])
{
	static const char hex[] = "0123456789abcdef";
	uint8_t md[32];
	unsigned int mdlen = 0;

	out[0] = '\0';
	if ((p == NULL && n > 0) || EVP_Digest(p, n, md, &mdlen, EVP_sha256(), NULL) != 1) {
		ERR_clear_error();
		return -1;
	}
	for (unsigned int i = 0; i < mdlen; i++) {
		out[2 * i] = hex[md[i] >> 4];
		out[2 * i + 1] = hex[md[i] & 15];
	}
	out[2 * mdlen] = '\0';
	return 0;
}
