/*
 * digest - SHA-256 of a buffer as lower-case hex (digest.c).
 */
#ifndef PAYCB_DIGEST_H
#define PAYCB_DIGEST_H

#include <stddef.h>

/* SHA-256 as 64 lower-case hex digits plus a NUL (for logging body hashes); 0 or -1. */
int digest_sha256_hex(const void *p, size_t n, char out[65]);

#endif
