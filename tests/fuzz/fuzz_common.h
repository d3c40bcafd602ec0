/*
 * fuzz_common - what the libFuzzer harnesses share: one merchant of each channel with keys
 * generated once per process, and a splitter for "header lines, blank line, body" inputs.
 */
#ifndef PAYCB_FUZZ_COMMON_H
#define PAYCB_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

#include "chan_notify.h"

struct fuzz_keys {
	EVP_PKEY *priv; /* signs as WeChat Pay and Alipay would */
	struct wx_merchant wx;
	struct ali_merchant ali;
	struct stripe_merchant stripe;
	const char *serial;
	const char *secret;
};

/* Builds the merchants once; aborts on failure (a harness bug, not a finding). */
struct fuzz_keys *fuzz_keys(void);

/*
 * Splits data at the first empty line: up to max header lines "Name: value" become hdrs
 * (names and values copied into buf), the rest is the body. Returns the header count.
 */
size_t fuzz_split(const uint8_t *data, size_t len, struct http_hdr *hdrs, size_t max, char *buf,
                  size_t buflen, const uint8_t **body, size_t *blen);

#endif
