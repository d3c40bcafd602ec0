/*
 * chan_notify_wx_sign - WeChat Pay's side of a notification, for the simulator and tests: the
 * resource encrypted with AEAD_AES_256_GCM under the APIv3 key, the envelope, and
 * SHA256withRSA over "ts\nnonce\nbody\n" with the platform key, so what they send goes
 * through exactly the verifier in chan_notify_wx.c.
 */
#include "chan_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/rand.h>

#include "chan_sign.h"
#include "crypto.h"

/* As in chan_notify_wx.c: what the verifier requires of a resource. */
#define WX_ALGORITHM     "AEAD_AES_256_GCM"
#define WX_GCM_NONCE_LEN 12

/* wx_random_text - n random letters and digits plus a NUL, for nonces and ids. */
static int
wx_random_text(char *out, size_t n)
{
	static const char alnum[] =
	    "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcdefghijklmnopqrstuvwxyz";
	unsigned char r[64];

	if (n > sizeof(r) || RAND_bytes(r, (int)n) != 1)
		return -1;
	for (size_t i = 0; i < n; i++)
		out[i] = alnum[r[i] % (sizeof(alnum) - 1)];
	out[n] = '\0';
	return 0;
}

int
notify_wx_sign(EVP_PKEY *platform_priv, const char *serial, const uint8_t apiv3_key[32],
               const char *event_type, const char *resource_plaintext_json, time_t ts, char **body,
               char hdr_timestamp[24], char hdr_nonce[40], char **hdr_signature)
{
	int refund = event_type != NULL && strncmp(event_type, "REFUND.", 7) == 0;
	const char *otype = refund ? "refund" : "transaction";
	const char *summary = strcmp(event_type ? event_type : "", "TRANSACTION.SUCCESS") == 0
	                          ? "\xe6\x94\xaf\xe4\xbb\x98\xe6\x88\x90\xe5\x8a\x9f"
	                      : refund ? "\xe9\x80\x80\xe6\xac\xbe\xe9\x80\x9a\xe7\x9f\xa5"
	                               : "notification";
	char gcm_nonce[WX_GCM_NONCE_LEN + 1], id[40], created[40];
	size_t ptlen, ctlen;
	uint8_t *ct = NULL;
	char *ct64 = NULL, *text = NULL;
	json_t *env = NULL;
	time_t local;
	struct tm tm;
	int rc = -1;

	*body = NULL;
	*hdr_signature = NULL;
	if (platform_priv == NULL || serial == NULL || serial[0] == '\0' || apiv3_key == NULL ||
	    event_type == NULL || resource_plaintext_json == NULL || ts < 0)
		return -1;
	ptlen = strlen(resource_plaintext_json);
	ctlen = ptlen + CRYPTO_GCM_TAG_LEN;
	/* The ids and create_time follow WeChat's shape: "EV-..." and RFC 3339 in UTC+8. */
	local = ts + 8 * 3600;
	if (gmtime_r(&local, &tm) == NULL ||
	    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%S+08:00", &tm) == 0)
		goto done;
	memcpy(id, "EV-", 3);
	if (wx_random_text(id + 3, 24) != 0 || wx_random_text(gcm_nonce, WX_GCM_NONCE_LEN) != 0 ||
	    wx_random_text(hdr_nonce, 32) != 0)
		goto done;
	if ((ct = malloc(ctlen)) == NULL ||
	    crypto_aes_gcm_encrypt(
	        apiv3_key, 32, (const uint8_t *)gcm_nonce, WX_GCM_NONCE_LEN, (const uint8_t *)otype,
	        strlen(otype), (const uint8_t *)resource_plaintext_json, ptlen, ct, &ctlen) != 0 ||
	    (ct64 = crypto_b64_encode_alloc(ct, ctlen)) == NULL)
		goto done;
	env = json_pack("{s:s, s:s, s:s, s:s, s:s, s:{s:s, s:s, s:s, s:s, s:s}}", "id", id,
	                "create_time", created, "resource_type", "encrypt-resource", "event_type",
	                event_type, "summary", summary, "resource", "original_type", otype,
	                "algorithm", WX_ALGORITHM, "ciphertext", ct64, "associated_data", otype,
	                "nonce", gcm_nonce);
	if (env == NULL || (text = json_dumps(env, JSON_COMPACT)) == NULL)
		goto done;
	/* The notification is signed like an API answer: "ts\nnonce\nbody\n". */
	snprintf(hdr_timestamp, 24, "%lld", (long long)ts);
	if (chan_wx_sign_response(platform_priv, (long long)ts, hdr_nonce, (const uint8_t *)text,
	                          strlen(text), hdr_signature) != 0)
		goto done;
	*body = text;
	text = NULL;
	rc = 0;
done:
	free(ct);
	free(ct64);
	free(text);
	json_decref(env);
	return rc;
}

int
notify_wx_sign_op(const struct chan_signer *s, const struct chan_sign_in *in,
                  struct chan_signed *out)
{
	char ts[24], nonce[40], *sig = NULL;
	int n = -1;

	out->body = NULL;
	if (s->secret == NULL || s->secret_len != 32 ||
	    notify_wx_sign(s->priv, s->key_id, s->secret, in->event_type, in->content, in->ts,
	                   &out->body, ts, nonce, &sig) != 0)
		goto done;
	out->len = strlen(out->body);
	n = snprintf(out->headers, sizeof(out->headers),
	             "Content-Type: application/json\r\nWechatpay-Timestamp: %s\r\n"
	             "Wechatpay-Nonce: %s\r\nWechatpay-Signature: %s\r\nWechatpay-Serial: %s\r\n"
	             "Wechatpay-Signature-Type: WECHATPAY2-SHA256-RSA2048\r\n",
	             ts, nonce, sig, s->key_id);
done:
	free(sig);
	if (n < 0 || (size_t)n >= sizeof(out->headers)) {
		free(out->body);
		out->body = NULL;
		return -1;
	}
	return 0;
}
