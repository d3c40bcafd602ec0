/*
 * chan_notify_wx - WeChat Pay APIv3 as a channel (notify_wx_ops): verification and
 * parsing of its notifications, its answers and its keys; the matching signer for the
 * simulator and tests is chan_notify_wx_sign.c.
 *
 * Order of checks: the four Wechatpay-* headers (each exactly once), the timestamp against an
 * injected clock (|now - ts| >= tolerance is rejected, past or future, as wechatpay-go does),
 * the key by Wechatpay-Serial, SHA256withRSA over "ts\nnonce\nbody\n" on the raw body bytes,
 * and only then JSON parsing, AEAD_AES_256_GCM decryption of the resource and parsing of the
 * plaintext. See docs/specs/channel-specs.md section 1.
 */
#include "chan_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "chan_conf.h"
#include "conf.h"
#include "crypto.h"

#define WX_SIGNATURE_TYPE "WECHATPAY2-SHA256-RSA2048"
#define WX_ALGORITHM      "AEAD_AES_256_GCM"
#define WX_NONCE_MAX      64 /* header nonce; WeChat sends 32 characters */
#define WX_TS_DIGITS_MAX  18 /* keeps the parsed timestamp far from INT64_MAX */
#define WX_GCM_NONCE_LEN  12 /* the documented resource.nonce length; Go's GCM requires it */

struct wx_hdrs {
	const char *ts, *nonce, *sig, *serial;
	size_t tslen, noncelen, siglen, seriallen;
	int64_t t;
};

/* wx_printable - whether every byte is visible ASCII, so no LF can shift the signed lines. */
static int
wx_printable(const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)s[i] <= 0x20 || (unsigned char)s[i] >= 0x7f)
			return 0;
	return 1;
}

static enum verr
wx_one_header(const struct http_hdr *h, size_t n, const char *name, const char **v, size_t *vlen,
              char *reason, size_t rlen)
{
	int count = notify_header(h, n, name, v, vlen);

	if (count > 1) {
		snprintf(reason, rlen, "duplicated %s header", name);
		return VERR_HEADER;
	}
	if (count == 0 || *vlen == 0) {
		snprintf(reason, rlen, "missing %s header", name);
		return VERR_HEADER;
	}
	return VERR_OK;
}

static enum verr
wx_headers(const struct http_hdr *h, size_t n, struct wx_hdrs *w, char *reason, size_t rlen)
{
	const char *st;
	size_t stlen;
	enum verr e;
	int count;

	if ((e = wx_one_header(h, n, "Wechatpay-Timestamp", &w->ts, &w->tslen, reason, rlen)) ||
	    (e = wx_one_header(h, n, "Wechatpay-Nonce", &w->nonce, &w->noncelen, reason, rlen)) ||
	    (e = wx_one_header(h, n, "Wechatpay-Signature", &w->sig, &w->siglen, reason, rlen)) ||
	    (e = wx_one_header(h, n, "Wechatpay-Serial", &w->serial, &w->seriallen, reason, rlen)))
		return e;
	/* An absent type means the only one there is; anything else is a scheme we lack. */
	if ((count = notify_header(h, n, "Wechatpay-Signature-Type", &st, &stlen)) > 1) {
		snprintf(reason, rlen, "duplicated Wechatpay-Signature-Type header");
		return VERR_HEADER;
	}
	if (count == 1 &&
	    (stlen != strlen(WX_SIGNATURE_TYPE) || memcmp(st, WX_SIGNATURE_TYPE, stlen) != 0)) {
		snprintf(reason, rlen, "Wechatpay-Signature-Type is not " WX_SIGNATURE_TYPE);
		return VERR_UNSUPPORTED;
	}
	/* Only plain digits: the signed line is the header text, and Go re-prints the number. */
	w->t = 0;
	for (size_t i = 0; i < w->tslen; i++) {
		if (w->ts[i] < '0' || w->ts[i] > '9' || w->tslen > WX_TS_DIGITS_MAX) {
			snprintf(reason, rlen, "Wechatpay-Timestamp is not a decimal number");
			return VERR_HEADER;
		}
		w->t = w->t * 10 + (w->ts[i] - '0');
	}
	if (w->noncelen > WX_NONCE_MAX || !wx_printable(w->nonce, w->noncelen)) {
		snprintf(reason, rlen, "Wechatpay-Nonce too long or not printable ASCII");
		return VERR_HEADER;
	}
	if (w->seriallen >= sizeof(((struct wx_key *)0)->serial) ||
	    !wx_printable(w->serial, w->seriallen)) {
		snprintf(reason, rlen, "Wechatpay-Serial too long or not printable ASCII");
		return VERR_HEADER;
	}
	return VERR_OK;
}

/*
 * wx_find_key - public-key ids ("PUB_KEY_ID_...") match exactly; certificate serials match as
 * hex numbers, ignoring case and leading zeros.
 */
static const struct wx_key *
wx_find_key(const struct wx_merchant *m, const char *serial, size_t len)
{
	char s[sizeof(((struct wx_key *)0)->serial)];

	memcpy(s, serial, len);
	s[len] = '\0';
	for (int i = 0; i < m->nkeys && i < 8; i++) {
		const struct wx_key *k = &m->keys[i];

		if (k->pkey == NULL)
			continue;
		if (strncmp(s, "PUB_KEY_ID_", 11) == 0 ||
		    strncmp(k->serial, "PUB_KEY_ID_", 11) == 0) {
			if (strcmp(s, k->serial) == 0)
				return k;
		} else if (crypto_serial_equal(s, k->serial)) {
			return k;
		}
	}
	return NULL;
}

/*
 * wx_gcm_open - opens raw (ciphertext and tag) into out with the APIv3 key, and during a
 * rotation with the previous key too: the tag authenticates, so a wrong key is only a failed
 * open, never a wrong plaintext. 1 when one of them opened it.
 */
static int
wx_gcm_open(const struct wx_merchant *m, const uint8_t *nonce, size_t noncelen, const uint8_t *aad,
            size_t aadlen, const uint8_t *raw, size_t rawlen, uint8_t *out, size_t *outlen)
{
	size_t cap = *outlen;

	if (crypto_aes_gcm_decrypt(m->apiv3_key, m->apiv3_key_len, nonce, noncelen, aad, aadlen,
	                           raw, rawlen, out, outlen) == 0)
		return 1;
	*outlen = cap;
	return m->apiv3_prev_len != 0 &&
	       crypto_aes_gcm_decrypt(m->apiv3_prev, m->apiv3_prev_len, nonce, noncelen, aad,
	                              aadlen, raw, rawlen, out, outlen) == 0;
}

/* wx_open - decrypts envelope.resource into a new NUL-terminated buffer. */
static enum verr
wx_open(const struct wx_merchant *m, const json_t *env, uint8_t **plain, size_t *plen, char *reason,
        size_t rlen)
{
	const json_t *res = json_object_get(env, "resource");
	char alg[32];
	const char *ct, *nonce, *aad;
	size_t ctlen, noncelen, aadlen, rawlen = 0, outlen = 0;
	uint8_t *raw = NULL, *out = NULL;
	enum verr e;
	int ok;

	*plain = NULL;
	if (!json_is_object(res)) {
		snprintf(reason, rlen, "missing resource object");
		return VERR_BODY;
	}
	if ((e = notify_json_str(res, "resource", "algorithm", alg, sizeof(alg), 1, reason, rlen)))
		return e;
	if (strcmp(alg, WX_ALGORITHM) != 0) {
		snprintf(reason, rlen, "resource.algorithm is not " WX_ALGORITHM);
		return VERR_UNSUPPORTED;
	}
	if (!json_is_string(json_object_get(res, "ciphertext")) ||
	    !json_is_string(json_object_get(res, "nonce"))) {
		snprintf(reason, rlen, "resource.ciphertext or resource.nonce missing");
		return VERR_BODY;
	}
	ct = json_string_value(json_object_get(res, "ciphertext"));
	ctlen = json_string_length(json_object_get(res, "ciphertext"));
	nonce = json_string_value(json_object_get(res, "nonce"));
	noncelen = json_string_length(json_object_get(res, "nonce"));
	/* A missing associated_data counts as "", as in apache-httpclient. */
	aad = json_is_string(json_object_get(res, "associated_data"))
	          ? json_string_value(json_object_get(res, "associated_data"))
	          : "";
	aadlen = strlen(aad);
	if (m->apiv3_key_len != 16 && m->apiv3_key_len != 32) {
		snprintf(reason, rlen, "merchant APIv3 key is not 32 bytes");
		return VERR_DECRYPT;
	}
	if (noncelen != WX_GCM_NONCE_LEN) {
		snprintf(reason, rlen, "resource.nonce is not %d bytes", WX_GCM_NONCE_LEN);
		return VERR_DECRYPT;
	}
	if ((raw = malloc(CRYPTO_B64_DECODED_MAX(ctlen) + 1)) == NULL) {
		snprintf(reason, rlen, "out of memory");
		return VERR_DECRYPT;
	}
	e = VERR_DECRYPT;
	if (crypto_b64_decode(ct, ctlen, raw, CRYPTO_B64_DECODED_MAX(ctlen), &rawlen) != 0 ||
	    rawlen < CRYPTO_GCM_TAG_LEN) {
		snprintf(reason, rlen, "resource.ciphertext is not base64 of ciphertext and tag");
		goto done;
	}
	outlen = rawlen - CRYPTO_GCM_TAG_LEN;
	if ((out = malloc(outlen + 1)) == NULL) {
		snprintf(reason, rlen, "out of memory");
		goto done;
	}
	ok = wx_gcm_open(m, (const uint8_t *)nonce, noncelen, (const uint8_t *)aad, aadlen, raw,
	                 rawlen, out, &outlen);
	if (!ok) {
		snprintf(reason, rlen, WX_ALGORITHM " authentication failed");
		goto done;
	}
	out[outlen] = '\0';
	*plain = out;
	*plen = outlen;
	out = NULL;
	e = VERR_OK;
done:
	free(raw);
	free(out);
	return e;
}

enum verr
notify_wx_decrypt_body(const struct wx_merchant *m, const uint8_t *body, size_t len,
                       uint8_t **plain, size_t *plen, char *reason, size_t rlen)
{
	json_t *env;
	enum verr e;

	*plain = NULL;
	if ((e = notify_json_load(body, len, &env, reason, rlen)) != VERR_OK)
		return e;
	e = wx_open(m, env, plain, plen, reason, rlen);
	json_decref(env);
	return e;
}

/* wx_str - p[key] when it is a string, else NULL. */
static const char *
wx_str(const json_t *p, const char *key)
{
	const json_t *v = json_object_get(p, key);

	return json_is_string(v) ? json_string_value(v) : NULL;
}

/*
 * wx_binding - NULL when the plaintext belongs to this merchant, else the unroutable reason.
 * A direct-mode notification names mchid; a partner-mode one names sp_mchid (the service
 * provider, which must be the configured one) and sub_mchid (mchid or one of sub_mchids).
 * With an app id list, a payment's appid (partner mode: sub_appid, else sp_appid) must be on
 * it; refunds carry no app id.
 */
static const char *
wx_binding(const struct wx_merchant *m, const json_t *p, enum notify_kind kind)
{
	const char *sp = wx_str(p, "sp_mchid"), *sub = wx_str(p, "sub_mchid"), *mchid, *app;

	if (sp != NULL || sub != NULL) {
		if (m->sp_mchid[0] == '\0' || sp == NULL || strcmp(sp, m->sp_mchid) != 0)
			return "foreign_sp_mchid";
		if (sub == NULL || (strcmp(sub, m->mchid) != 0 &&
		                    !notify_listed(m->sub_mchids[0], sizeof(m->sub_mchids[0]),
		                                   m->nsub_mchids, sub)))
			return "foreign_sub_mchid";
		app =
		    wx_str(p, "sub_appid") != NULL ? wx_str(p, "sub_appid") : wx_str(p, "sp_appid");
	} else {
		mchid = wx_str(p, "mchid");
		if (mchid == NULL || m->mchid[0] == '\0' || strcmp(mchid, m->mchid) != 0)
			return "foreign_mchid";
		app = wx_str(p, "appid");
	}
	if (m->nappids > 0 && (app != NULL || kind == NOTIFY_PAYMENT) &&
	    (app == NULL || !notify_listed(m->appids[0], sizeof(m->appids[0]), m->nappids, app)))
		return "foreign_appid";
	return NULL;
}

static enum verr
wx_parse_plain(const struct wx_merchant *m, const uint8_t *plain, size_t plen, struct notify *out,
               char *reason, size_t rlen)
{
	const json_t *amount;
	const char *why;
	char currency[8];
	json_t *p = NULL;
	enum verr e;

	if ((e = notify_json_load(plain, plen, &p, reason, rlen)) != VERR_OK)
		return e;
	if ((why = wx_binding(m, p, out->kind)) != NULL) {
		e = notify_unroutable(out, why);
		goto done;
	}
	e = VERR_BODY;
	if (!json_is_object(amount = json_object_get(p, "amount"))) {
		snprintf(reason, rlen, "missing amount object");
		goto done;
	}
	if ((e = notify_json_str(p, NULL, "transaction_id", out->channel_trade_no,
	                         sizeof(out->channel_trade_no), 1, reason, rlen)) ||
	    (e = notify_json_str(p, NULL, "out_trade_no", out->out_trade_no,
	                         sizeof(out->out_trade_no), 1, reason, rlen)) ||
	    (e = notify_json_str(amount, "amount", "currency", currency, sizeof(currency), 0,
	                         reason, rlen)))
		goto done;
	if ((e = notify_currency(currency[0] != '\0' ? currency : "CNY", out->currency, reason,
	                         rlen)))
		goto done;
	if (out->kind == NOTIFY_PAYMENT) {
		if ((e = notify_json_str(p, NULL, "trade_state", out->status, sizeof(out->status),
		                         1, reason, rlen)) ||
		    (e = notify_json_amount(amount, "amount", "total", &out->amount_minor, reason,
		                            rlen)))
			goto done;
	} else {
		if ((e = notify_json_str(p, NULL, "refund_id", out->refund_no,
		                         sizeof(out->refund_no), 1, reason, rlen)) ||
		    (e = notify_json_str(p, NULL, "out_refund_no", out->merchant_refund_no,
		                         sizeof(out->merchant_refund_no), 1, reason, rlen)) ||
		    (e = notify_json_str(p, NULL, "refund_status", out->status, sizeof(out->status),
		                         1, reason, rlen)) ||
		    (e = notify_json_amount(amount, "amount", "refund", &out->amount_minor, reason,
		                            rlen)) ||
		    (e = notify_json_amount(amount, "amount", "total", &out->order_total_minor,
		                            reason, rlen)))
			goto done;
	}
	e = VERR_OK;
done:
	json_decref(p);
	return e;
}

/* wx_fresh - the four headers, and a timestamp within tol seconds of now, past or future. */
static enum verr
wx_fresh(const struct http_hdr *h, size_t nhdrs, time_t now, int tol, struct wx_hdrs *w,
         char *reason, size_t rlen)
{
	int64_t skew;
	enum verr e;

	if ((e = wx_headers(h, nhdrs, w, reason, rlen)) != VERR_OK)
		return e;
	skew = (int64_t)now > w->t ? (int64_t)now - w->t : w->t - (int64_t)now;
	if (skew >= tol) {
		snprintf(reason, rlen, "Wechatpay-Timestamp %lld s from now, tolerance %d s",
		         (long long)skew, tol);
		return VERR_TIMESTAMP;
	}
	return VERR_OK;
}

enum verr
notify_wx_precheck(const struct wx_merchant *m, const struct http_hdr *h, size_t nhdrs, time_t now,
                   char *reason, size_t rlen)
{
	int tol = m->tolerance_s > 0 ? m->tolerance_s : NOTIFY_TOLERANCE_DEFAULT;
	const struct wx_key *key;
	struct wx_hdrs w;
	enum verr e;

	if (rlen > 0)
		reason[0] = '\0';
	/* The same checks, in the same order and with the same verdicts, as notify_wx_verify_parse.
	 */
	if ((e = wx_fresh(h, nhdrs, now, tol, &w, reason, rlen)) != VERR_OK)
		return e;
	if ((key = wx_find_key(m, w.serial, w.seriallen)) == NULL) {
		snprintf(reason, rlen, "no key for this Wechatpay-Serial");
		return VERR_SERIAL;
	}
	/* A signature of another length cannot verify with this key. */
	if (w.siglen != CRYPTO_B64_ENCODED_LEN((size_t)EVP_PKEY_get_size(key->pkey))) {
		snprintf(reason, rlen, "Wechatpay-Signature is not the length of the key's");
		return VERR_SIGNATURE;
	}
	return VERR_OK;
}

enum verr
notify_wx_verify_parse(const struct wx_merchant *m, const struct http_hdr *h, size_t nhdrs,
                       const uint8_t *body, size_t len, time_t now, struct notify *out,
                       char *reason, size_t rlen)
{
	int tol = m->tolerance_s > 0 ? m->tolerance_s : NOTIFY_TOLERANCE_DEFAULT;
	uint8_t sig[CRYPTO_RSA_MAX_BYTES], *plain = NULL;
	const struct wx_key *key;
	struct crypto_part parts[6];
	struct wx_hdrs w;
	size_t siglen, plen = 0;
	json_t *env = NULL;
	enum verr e;

	if ((e = notify_begin(out, body, len, reason, rlen)) != VERR_OK)
		return e;
	if ((e = wx_fresh(h, nhdrs, now, tol, &w, reason, rlen)) != VERR_OK)
		return e;
	out->valid_from = w.t - tol + 1;
	out->valid_to = w.t + tol - 1;
	if ((key = wx_find_key(m, w.serial, w.seriallen)) == NULL) {
		snprintf(reason, rlen, "no key for this Wechatpay-Serial");
		return VERR_SERIAL;
	}
	if (w.siglen > CRYPTO_B64_ENCODED_LEN(CRYPTO_RSA_MAX_BYTES) ||
	    crypto_b64_decode(w.sig, w.siglen, sig, sizeof(sig), &siglen) != 0) {
		snprintf(reason, rlen, "Wechatpay-Signature is not base64 of an RSA signature");
		return VERR_SIGNATURE;
	}
	parts[0] = (struct crypto_part){w.ts, w.tslen};
	parts[1] = (struct crypto_part){"\n", 1};
	parts[2] = (struct crypto_part){w.nonce, w.noncelen};
	parts[3] = (struct crypto_part){"\n", 1};
	parts[4] = (struct crypto_part){body, len};
	parts[5] = (struct crypto_part){"\n", 1};
	if (crypto_rsa_sha256_verifyv(key->pkey, parts, 6, sig, siglen) != 0) {
		snprintf(reason, rlen, "signature does not verify");
		return VERR_SIGNATURE;
	}
	/* Authentic from here on: what follows is parsing WeChat's own message. */
	if ((e = notify_json_load(body, len, &env, reason, rlen)) != VERR_OK)
		return e;
	if ((e = notify_json_str(env, NULL, "id", out->event_id, sizeof(out->event_id), 1, reason,
	                         rlen)) ||
	    (e = notify_json_str(env, NULL, "event_type", out->event_type, sizeof(out->event_type),
	                         1, reason, rlen)))
		goto done;
	if ((e = wx_open(m, env, &plain, &plen, reason, rlen)) != VERR_OK)
		goto done;
	if (strcmp(out->event_type, "TRANSACTION.SUCCESS") == 0)
		out->kind = NOTIFY_PAYMENT;
	else if (strncmp(out->event_type, "REFUND.", 7) == 0)
		out->kind = NOTIFY_REFUND;
	else
		out->kind = NOTIFY_IGNORED;
	if (out->kind != NOTIFY_IGNORED)
		e = wx_parse_plain(m, plain, plen, out, reason, rlen);
done:
	if (plain != NULL)
		OPENSSL_clear_free(plain, plen + 1);
	json_decref(env);
	return e;
}

/* ---- the WeChat Pay operations (struct chan_notify_ops) ------------------------------- */

static void
wx_keys_free(void *keys)
{
	notify_keys_wx_free(keys);
	free(keys);
}

static int
wx_keys_load(const struct conf *cf, const struct conf_merchant *cm, void **keys, char *err,
             size_t errlen)
{
	const struct conf_wxpay *w = chan_conf_wx(cm);
	struct wx_merchant *m;

	*keys = NULL;
	if (w == NULL)
		return 0;
	if ((*keys = m = notify_keys_alloc(sizeof(*m), err, errlen)) == NULL)
		return -1;
	snprintf(m->mchid, sizeof(m->mchid), "%s", w->mchid);
	snprintf(m->sp_mchid, sizeof(m->sp_mchid), "%s", w->sp_mchid);
	notify_list_copy(m->sub_mchids[0], sizeof(m->sub_mchids[0]), &m->nsub_mchids,
	                 &w->sub_mchids);
	notify_list_copy(m->appids[0], sizeof(m->appids[0]), &m->nappids, &w->appids);
	m->tolerance_s = (int)cf->ingest.timestamp_tolerance_s;
	if (notify_keys_wx_apiv3_load(m, w->apiv3_key_file, err, errlen) != 0 ||
	    (w->apiv3_previous_key_file != NULL && w->apiv3_previous_key_file[0] != '\0' &&
	     notify_keys_wx_apiv3_previous(m, w->apiv3_previous_key_file, err, errlen) != 0))
		return -1;
	for (int k = 0; k < w->nkeys; k++) {
		const char *id = w->keys[k].serial;
		if (notify_keys_wx_add(m, w->keys[k].file, id[0] ? id : NULL, err, errlen) != 0)
			return -1;
	}
	return 0;
}

static void
wx_keys_describe(const void *keys, char *buf, size_t cap)
{
	const struct wx_merchant *m = keys;

	snprintf(buf, cap, "wxpay_keys=%d apiv3_keys=%d", m ? m->nkeys : 0,
	         m ? (m->apiv3_key_len != 0) + (m->apiv3_prev_len != 0) : 0);
}

static enum verr
wx_precheck_op(const void *keys, const struct chan_req *r, char *reason, size_t rlen)
{
	return notify_wx_precheck(keys, r->hdrs, r->nhdrs, r->now, reason, rlen);
}

static enum verr
wx_verify_op(const void *keys, const struct chan_req *r, struct notify *out, char *reason,
             size_t rlen)
{
	return notify_wx_verify_parse(keys, r->hdrs, r->nhdrs, r->body, r->len, r->now, out, reason,
	                              rlen);
}

/* WeChat Pay wants 200 or 204 on success, 4xx/5xx with a FAIL object otherwise; 401 says the
 * signature, key or time was wrong. */
static unsigned
wx_status(int ok, enum verr ve)
{
	if (ok)
		return 204;
	return ve == VERR_SIGNATURE || ve == VERR_SERIAL || ve == VERR_TIMESTAMP ? 401 : 400;
}

static const char *
wx_answer(int ok, const char *msg, char *body, size_t cap)
{
	if (ok)
		body[0] = '\0';
	else
		snprintf(body, cap, "{\"code\":\"FAIL\",\"message\":\"%s\"}", msg);
	return "application/json";
}

static int
wx_acknowledged(unsigned status, const char *body)
{
	(void)body;
	return status == 200 || status == 204;
}

const struct chan_notify_ops notify_wx_ops = {
    .name = "wxpay",
    .conf = &chan_conf_wx_decl,
    .keys_load = wx_keys_load,
    .keys_free = wx_keys_free,
    .keys_describe = wx_keys_describe,
    .precheck = wx_precheck_op,
    .verify_parse = wx_verify_op,
    .status = wx_status,
    .answer = wx_answer,
    .acknowledged = wx_acknowledged,
    .sign = notify_wx_sign_op,
};
