/*
 * fuzz_wxpay - the WeChat Pay verifier and parser. The first byte picks a mode: raw headers
 * and body as given (signature, header and timestamp checks), a body signed correctly by the
 * harness (the envelope JSON parser behind the signature), or a plaintext encrypted and signed
 * by the harness (decryption and the transaction/refund parser).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crypto.h"
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

static void
verify(const struct fuzz_keys *k, const struct http_hdr *h, size_t nh, const uint8_t *body,
       size_t blen, time_t now)
{
	struct notify n;
	char reason[256];

	notify_wx_verify_parse(&k->wx, h, nh, body, blen, now, &n, reason, sizeof(reason));
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct fuzz_keys *k = fuzz_keys();
	struct http_hdr h[16];
	const uint8_t *body;
	char buf[4096], ts[24], nonce[40], *sig = NULL, *out = NULL, *plain;
	size_t blen, nh;
	time_t now = 1700000000;

	if (len < 1 || len > 65536)
		return 0;
	switch (data[0] % 3) {
	case 0:
		nh = fuzz_split(data + 1, len - 1, h, 16, buf, sizeof(buf), &body, &blen);
		verify(k, h, nh, body, blen, now);
		break;
	case 1: {
		/* Sign the fuzz bytes as the body. */
		char msg[128];
		uint8_t *s = NULL;
		size_t slen = 0;
		struct crypto_part parts[3];
		snprintf(msg, sizeof(msg), "%lld\nnonce\n", (long long)now);
		parts[0] = (struct crypto_part){msg, strlen(msg)};
		parts[1] = (struct crypto_part){data + 1, len - 1};
		parts[2] = (struct crypto_part){"\n", 1};
		if (crypto_rsa_sha256_signv(k->priv, parts, 3, &s, &slen) != 0)
			abort();
		char *b64 = crypto_b64_encode_alloc(s, slen);
		snprintf(ts, sizeof(ts), "%lld", (long long)now);
		struct http_hdr hh[4] = {{"Wechatpay-Timestamp", ts},
		                         {"Wechatpay-Nonce", "nonce"},
		                         {"Wechatpay-Signature", b64},
		                         {"Wechatpay-Serial", k->serial}};
		verify(k, hh, 4, data + 1, len - 1, now);
		free(s);
		free(b64);
		break;
	}
	default:
		if ((plain = malloc(len)) == NULL)
			return 0;
		memcpy(plain, data + 1, len - 1);
		plain[len - 1] = '\0';
		if (notify_wx_sign(k->priv, k->serial, k->wx.apiv3_key,
		                   (data[0] & 4) ? "REFUND.SUCCESS" : "TRANSACTION.SUCCESS", plain,
		                   now, &out, ts, nonce, &sig) == 0) {
			struct http_hdr hh[4] = {{"Wechatpay-Timestamp", ts},
			                         {"Wechatpay-Nonce", nonce},
			                         {"Wechatpay-Signature", sig},
			                         {"Wechatpay-Serial", k->serial}};
			verify(k, hh, 4, (const uint8_t *)out, strlen(out), now);
		}
		free(out);
		free(sig);
		free(plain);
		break;
	}
	return 0;
}
