/*
 * chan_wx_sign - WeChat Pay APIv3 request signatures (the Authorization header) and response
 * verification, on the exact bytes sent and received.
 *
 * A request is signed over "METHOD\nURL\nts\nnonce\nbody\n" with the merchant's API private
 * key; an answer is verified over "ts\nnonce\nbody\n" with the platform key its
 * Wechatpay-Serial names. Both are RSASSA-PKCS1-v1_5 with SHA-256, base64 with padding
 * (channel-apis.md sections 1.2 and 1.3, vectors W-O1, W-D1..W-D4 and W-R1).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "chan_sign.h"
#include "crypto.h"

const char *
chan_vr_name(enum chan_vr v)
{
	switch (v) {
	case CHAN_VR_OK:
		return "ok";
	case CHAN_VR_MISSING:
		return "missing";
	case CHAN_VR_MALFORMED:
		return "malformed";
	case CHAN_VR_SKEW:
		return "skew";
	case CHAN_VR_KEY:
		return "key";
	case CHAN_VR_SIGNATURE:
		return "signature";
	}
	return "unknown";
}

int
chan_wx_nonce(char out[33])
{
	static const char alphabet[] =
	    "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
	uint8_t r[32];
	size_t i = 0;

	/* Rejection sampling keeps every character equally likely (248 = 4 * 62). */
	while (i < 32) {
		if (RAND_bytes(r, sizeof(r)) != 1)
			return -1;
		for (size_t j = 0; j < sizeof(r) && i < 32; j++)
			if (r[j] < 248)
				out[i++] = alphabet[r[j] % 62];
	}
	out[32] = '\0';
	return 0;
}

int
chan_wx_canonical_url(const char *url, const char **out)
{
	const char *p = strstr(url, "://");

	if (p == NULL)
		return -1;
	p += 3;
	/* The authority ends at the first '/', '?' or '#'. A fragment is never sent, and a
	 * query without a path would be sent as "/?query", which is not a suffix of url. */
	p += strcspn(p, "/?#");
	if (strchr(p, '#') != NULL || *p == '?')
		return -1;
	*out = *p == '\0' ? "/" : p;
	return 0;
}

int
chan_wx_request_message(const char *method, const char *canonical_url, long long ts,
                        const char *nonce, const uint8_t *body, size_t blen, char **msg,
                        size_t *mlen)
{
	char tsbuf[24];
	size_t ml, ul, nl, tl, n;
	char *m;

	*msg = NULL;
	tl = (size_t)snprintf(tsbuf, sizeof(tsbuf), "%lld", ts);
	ml = strlen(method), ul = strlen(canonical_url), nl = strlen(nonce);
	n = ml + ul + tl + nl + blen + 5;
	if ((m = malloc(n + 1)) == NULL)
		return -1;
	/* The five lines, each ending in LF, the body's own final LF included. */
	memcpy(m, method, ml);
	m[ml] = '\n';
	memcpy(m + ml + 1, canonical_url, ul);
	m[ml + 1 + ul] = '\n';
	memcpy(m + ml + ul + 2, tsbuf, tl);
	m[ml + ul + tl + 2] = '\n';
	memcpy(m + ml + ul + tl + 3, nonce, nl);
	m[ml + ul + tl + nl + 3] = '\n';
	if (blen > 0)
		memcpy(m + ml + ul + tl + nl + 4, body, blen);
	m[n - 1] = '\n';
	m[n] = '\0';
	*msg = m;
	*mlen = n;
	return 0;
}

/* chan_wx_token_ok - the fields of the header must not be able to break its syntax. */
static int
chan_wx_token_ok(const char *s)
{
	if (s == NULL || *s == '\0')
		return 0;
	for (; *s != '\0'; s++)
		if (*s == '"' || *s == ',' || *s == '\\' || (unsigned char)*s < 0x21 ||
		    (unsigned char)*s > 0x7e)
			return 0;
	return 1;
}

int
chan_wx_authorization(EVP_PKEY *merchant_key, const char *mchid, const char *serial,
                      const char *method, const char *canonical_url, long long ts,
                      const char *nonce, const uint8_t *body, size_t blen, char *out, size_t outcap)
{
	char *msg = NULL, *b64 = NULL;
	uint8_t *sig = NULL;
	size_t mlen, siglen;
	int rc = -1, n;

	if (!chan_wx_token_ok(mchid) || !chan_wx_token_ok(serial) || !chan_wx_token_ok(nonce))
		goto done;
	if (chan_wx_request_message(method, canonical_url, ts, nonce, body, blen, &msg, &mlen) != 0)
		goto done;
	if (crypto_rsa_sha256_sign(merchant_key, (const uint8_t *)msg, mlen, &sig, &siglen) != 0)
		goto done;
	if ((b64 = crypto_b64_encode_alloc(sig, siglen)) == NULL)
		goto done;
	/* wechatpay-go's field order; the server reads the fields in any order. */
	n = snprintf(out, outcap,
	             "WECHATPAY2-SHA256-RSA2048 mchid=\"%s\",nonce_str=\"%s\",timestamp=\"%lld\","
	             "serial_no=\"%s\",signature=\"%s\"",
	             mchid, nonce, ts, serial, b64);
	if (n < 0 || (size_t)n >= outcap)
		goto done;
	rc = 0;
done:
	free(msg);
	free(sig);
	free(b64);
	return rc;
}

/* chan_wx_parse_ts - a decimal Unix time of at most 12 digits. */
static int
chan_wx_parse_ts(const char *s, long long *ts)
{
	long long v = 0;
	size_t n = 0;

	if (s == NULL || *s == '\0')
		return -1;
	for (; *s != '\0'; s++, n++) {
		if (*s < '0' || *s > '9' || n >= 12)
			return -1;
		v = v * 10 + (*s - '0');
	}
	*ts = v;
	return 0;
}

/* chan_wx_skew_ok - wechatpay-go's rule: refused when |now - ts| >= skew. */
static int
chan_wx_skew_ok(long long ts, time_t now, int skew_s)
{
	long long d = (long long)now - ts;

	if (skew_s <= 0)
		skew_s = CHAN_WX_SKEW_DEFAULT;
	return (d < 0 ? -d : d) < skew_s;
}

/* chan_wx_verify_b64 - verifies a base64 signature over the parts with key. */
static enum chan_vr
chan_wx_verify_b64(EVP_PKEY *key, const char *b64, const struct crypto_part *parts, size_t nparts)
{
	uint8_t sig[CRYPTO_RSA_MAX_BYTES];
	size_t siglen, blen = strlen(b64);

	if (blen > CRYPTO_B64_ENCODED_LEN(CRYPTO_RSA_MAX_BYTES) ||
	    crypto_b64_decode(b64, blen, sig, sizeof(sig), &siglen) != 0)
		return CHAN_VR_MALFORMED;
	if (crypto_rsa_sha256_verifyv(key, parts, nparts, sig, siglen) != 0)
		return CHAN_VR_SIGNATURE;
	return CHAN_VR_OK;
}

enum chan_vr
chan_wx_verify_response(const struct chan_pubkey *keys, int nkeys, int skew_s,
                        const char *timestamp, const char *nonce, const char *signature,
                        const char *serial, const uint8_t *body, size_t blen, time_t now)
{
	EVP_PKEY *key = NULL;
	long long ts;

	if (timestamp == NULL || nonce == NULL || signature == NULL || serial == NULL ||
	    *timestamp == '\0' || *nonce == '\0' || *signature == '\0' || *serial == '\0')
		return CHAN_VR_MISSING;
	if (chan_wx_parse_ts(timestamp, &ts) != 0 || strchr(nonce, '\n') != NULL)
		return CHAN_VR_MALFORMED;
	if (!chan_wx_skew_ok(ts, now, skew_s))
		return CHAN_VR_SKEW;
	for (int i = 0; i < nkeys && key == NULL; i++) {
		const char *id = keys[i].id;

		if (id == NULL || keys[i].pkey == NULL)
			continue;
		if (strncmp(serial, "PUB_KEY_ID_", 11) == 0 ||
		    strncmp(id, "PUB_KEY_ID_", 11) == 0) {
			if (strcmp(serial, id) == 0)
				key = keys[i].pkey;
		} else if (crypto_serial_equal(serial, id)) {
			key = keys[i].pkey;
		}
	}
	if (key == NULL)
		return CHAN_VR_KEY;
	{
		const struct crypto_part parts[] = {
		    {timestamp, strlen(timestamp)},
		    {"\n", 1},
		    {nonce, strlen(nonce)},
		    {"\n", 1},
		    {body, blen},
		    {"\n", 1},
		};
		return chan_wx_verify_b64(key, signature, parts, 6);
	}
}

int
chan_wx_sign_response(EVP_PKEY *platform_key, long long ts, const char *nonce, const uint8_t *body,
                      size_t blen, char **signature)
{
	char tsbuf[24];
	uint8_t *sig = NULL;
	size_t siglen;
	int rc = -1;

	*signature = NULL;
	snprintf(tsbuf, sizeof(tsbuf), "%lld", ts);
	{
		const struct crypto_part parts[] = {
		    {tsbuf, strlen(tsbuf)}, {"\n", 1}, {nonce, strlen(nonce)}, {"\n", 1},
		    {body, blen},           {"\n", 1},
		};
		if (crypto_rsa_sha256_signv(platform_key, parts, 6, &sig, &siglen) != 0)
			goto done;
	}
	if ((*signature = crypto_b64_encode_alloc(sig, siglen)) == NULL)
		goto done;
	rc = 0;
done:
	free(sig);
	return rc;
}

/* The five fields of an Authorization header, each pointing into a copy of it. */
struct chan_wx_auth {
	char *mchid, *nonce, *timestamp, *serial, *signature;
};

/*
 * chan_wx_auth_parse - splits `scheme k="v",k="v",...` (in buf, modified) into its fields;
 * an unknown, repeated or missing field, or a value without quotes, is malformed.
 */
static int
chan_wx_auth_parse(char *buf, struct chan_wx_auth *a)
{
	static const char scheme[] = "WECHATPAY2-SHA256-RSA2048 ";
	char *p = buf;

	memset(a, 0, sizeof(*a));
	if (strncmp(p, scheme, sizeof(scheme) - 1) != 0)
		return -1;
	p += sizeof(scheme) - 1;
	while (*p != '\0') {
		char *eq = strchr(p, '='), *end, **slot = NULL;

		if (eq == NULL || eq[1] != '"' || (end = strchr(eq + 2, '"')) == NULL)
			return -1;
		*eq = '\0';
		*end = '\0';
		if (strcmp(p, "mchid") == 0)
			slot = &a->mchid;
		else if (strcmp(p, "nonce_str") == 0)
			slot = &a->nonce;
		else if (strcmp(p, "timestamp") == 0)
			slot = &a->timestamp;
		else if (strcmp(p, "serial_no") == 0)
			slot = &a->serial;
		else if (strcmp(p, "signature") == 0)
			slot = &a->signature;
		if (slot == NULL || *slot != NULL)
			return -1;
		*slot = eq + 2;
		p = end + 1;
		if (*p == ',')
			p++;
		else if (*p != '\0')
			return -1;
	}
	if (a->mchid == NULL || a->nonce == NULL || a->timestamp == NULL || a->serial == NULL ||
	    a->signature == NULL)
		return -1;
	return 0;
}

enum chan_vr
chan_wx_verify_request(EVP_PKEY *merchant_pub, const char *mchid, const char *serial,
                       const char *authorization, const char *method, const char *canonical_url,
                       const uint8_t *body, size_t blen, time_t now, int skew_s)
{
	struct chan_wx_auth a;
	enum chan_vr vr = CHAN_VR_MALFORMED;
	char *buf = NULL, *msg = NULL;
	long long ts;
	size_t mlen;

	if (authorization == NULL || *authorization == '\0')
		return CHAN_VR_MISSING;
	if ((buf = strdup(authorization)) == NULL || chan_wx_auth_parse(buf, &a) != 0 ||
	    chan_wx_parse_ts(a.timestamp, &ts) != 0)
		goto done;
	vr = CHAN_VR_KEY;
	if (strcmp(a.mchid, mchid) != 0 || !crypto_serial_equal(a.serial, serial))
		goto done;
	vr = CHAN_VR_SKEW;
	if (!chan_wx_skew_ok(ts, now, skew_s))
		goto done;
	vr = CHAN_VR_MALFORMED;
	if (chan_wx_request_message(method, canonical_url, ts, a.nonce, body, blen, &msg, &mlen) !=
	    0)
		goto done;
	{
		const struct crypto_part part = {msg, mlen};
		vr = chan_wx_verify_b64(merchant_pub, a.signature, &part, 1);
	}
done:
	free(buf);
	free(msg);
	return vr;
}
