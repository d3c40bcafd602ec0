/*
 * fuzz_stripe - the Stripe verifier and parser. Mode 0: the first line is the
 * Stripe-Signature header, the rest the body (header parsing, HMAC, tolerance); mode 1: the
 * harness signs the body correctly, so the event parser behind the signature is reached.
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct fuzz_keys *k = fuzz_keys();
	time_t now = 1700000000;
	struct notify n;
	char reason[256], hv[1024];
	size_t i;

	if (len < 1 || len > 65536)
		return 0;
	if ((data[0] & 1) == 0) {
		for (i = 1; i < len && data[i] != '\n' && i < sizeof(hv); i++)
			hv[i - 1] = (char)data[i];
		hv[i - 1] = '\0';
		struct http_hdr h[1] = {{"Stripe-Signature", hv}};
		const uint8_t *body = i < len ? data + i + 1 : data + len;
		notify_stripe_verify_parse(&k->stripe, h, 1, body, (size_t)(data + len - body), now,
		                           &n, reason, sizeof(reason));
		return 0;
	}
	if (notify_stripe_sign_header((const uint8_t *)k->secret, strlen(k->secret), data + 1,
	                              len - 1, now, hv, sizeof(hv)) == 0) {
		struct http_hdr h[1] = {{"Stripe-Signature", hv}};
		notify_stripe_verify_parse(&k->stripe, h, 1, data + 1, len - 1, now, &n, reason,
		                           sizeof(reason));
	}
	return 0;
}
