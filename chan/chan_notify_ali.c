/*
 * chan_notify_ali - Alipay as a channel (notify_ali_ops): verification and parsing of its
 * async notifications (RSA2), its answers, its keys, and the matching signer for the
 * simulator and tests.
 *
 * The body is form-decoded exactly once; the string to sign is built from the decoded bytes
 * ("V1": every parameter but sign and sign_type, sorted by name bytes, name=value joined by
 * '&', empty values kept) and checked with SHA256withRSA against each configured Alipay public
 * key. Only sign_type RSA2 is accepted, so a notification cannot choose the weaker SHA-1 "RSA".
 * When V1 fails and the notification carries sign_type=RSA2, the "V2" string (sign_type
 * kept) is tried as well: some Alipay notify families (servicemarket_order_notify) are signed
 * that way, and the vectors' README expects them to verify. Node's re-insertion of a missing
 * sign_type is not copied. See docs/specs/channel-specs.md section 2.
 */
#include "chan_notify.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "chan_conf.h"
#include "conf.h"
#include "crypto.h"
#include "form.h"
#include "money.h"

#define ALI_SIGN_B64_MAX CRYPTO_B64_ENCODED_LEN(CRYPTO_RSA_MAX_BYTES)
/* Real notifications carry about 30 parameters; a body with many more is junk. */
#define ALI_PARAMS_MAX 64

/* ali_cmp - orders parameters by name bytes, shorter first on a common prefix. */
static int
ali_cmp(const void *a, const void *b)
{
	const struct form_pair *x = *(const struct form_pair *const *)a;
	const struct form_pair *y = *(const struct form_pair *const *)b;
	size_t n = x->klen < y->klen ? x->klen : y->klen;
	int c = memcmp(x->key, y->key, n);

	if (c != 0)
		return c;
	return x->klen < y->klen ? -1 : x->klen > y->klen;
}

int
notify_ali_sign_content(const struct form *f, int keep_sign_type, char **out, size_t *outlen)
{
	const struct form_pair **v = NULL;
	size_t n = 0, total = 0, o = 0;
	char *s = NULL;
	int rc = -1;

	*out = NULL;
	if ((v = calloc(f->n + 1, sizeof(*v))) == NULL)
		goto done;
	for (size_t i = 0; i < f->n; i++) {
		const struct form_pair *p = &f->pairs[i];

		if (strcmp(p->key, "sign") == 0 ||
		    (!keep_sign_type && strcmp(p->key, "sign_type") == 0))
			continue;
		v[n++] = p;
		total += p->klen + 1 + p->vlen + 1;
	}
	qsort(v, n, sizeof(*v), ali_cmp);
	if ((s = malloc(total + 1)) == NULL)
		goto done;
	for (size_t i = 0; i < n; i++) {
		if (i > 0)
			s[o++] = '&';
		memcpy(s + o, v[i]->key, v[i]->klen);
		o += v[i]->klen;
		s[o++] = '=';
		memcpy(s + o, v[i]->val, v[i]->vlen);
		o += v[i]->vlen;
	}
	s[o] = '\0';
	*out = s;
	*outlen = o;
	s = NULL;
	rc = 0;
done:
	free(s);
	free(v);
	return rc;
}

/* ali_verify_rule - whether any merchant key verifies sig over the V1 or V2 string. */
static int
ali_verify_rule(const struct ali_merchant *m, const struct form *f, int keep_sign_type,
                const uint8_t *sig, size_t siglen)
{
	char *content;
	size_t clen;
	int ok = 0;

	if (notify_ali_sign_content(f, keep_sign_type, &content, &clen) != 0)
		return 0;
	for (int i = 0; i < m->nkeys && i < 4 && !ok; i++)
		if (m->keys[i] != NULL &&
		    crypto_rsa_sha256_verify(m->keys[i], (const uint8_t *)content, clen, sig,
		                             siglen) == 0)
			ok = 1;
	free(content);
	return ok;
}

/*
 * ali_field - copies parameter key into dst. With a non-UTF-8 charset the bytes are in a
 * legacy encoding we cannot check, so the fields we keep must then be plain ASCII.
 */
static enum verr
ali_field(const struct form *f, const char *key, char *dst, size_t cap, int required, int ascii,
          char *reason, size_t rlen)
{
	const struct form_pair *p = form_get(f, key);

	dst[0] = '\0';
	if (p == NULL || p->vlen == 0) {
		if (!required)
			return VERR_OK;
		snprintf(reason, rlen, "missing %s", key);
		return VERR_BODY;
	}
	for (size_t i = 0; ascii && i < p->vlen; i++) {
		if ((unsigned char)p->val[i] >= 0x80) {
			snprintf(reason, rlen, "%s is not ASCII", key);
			return VERR_BODY;
		}
	}
	if (notify_copy(dst, cap, p->val, p->vlen) != 0) {
		snprintf(reason, rlen, "%s is too long or has control characters", key);
		return VERR_BODY;
	}
	return VERR_OK;
}

static enum verr
ali_amount(const struct form *f, const char *key, int64_t *out, char *reason, size_t rlen)
{
	const struct form_pair *p = form_get(f, key);
	const char *why;

	if (p == NULL) {
		snprintf(reason, rlen, "missing %s", key);
		return VERR_BODY;
	}
	if ((why = money_parse_decimal_why(p->val, 2, out)) != NULL) {
		snprintf(reason, rlen, "%s: %s", key, why);
		return VERR_AMOUNT;
	}
	return VERR_OK;
}

/* ali_parse - turns verified parameters into *out; trade_status_sync is the only type used. */
static enum verr
ali_parse(const struct form *f, int ascii, struct notify *out, char *reason, size_t rlen)
{
	const struct form_pair *fee = form_get(f, "refund_fee");
	const struct form_pair *biz = form_get(f, "out_biz_no");
	const struct form_pair *gmt = form_get(f, "gmt_refund");
	char when[40];
	enum verr e;

	if ((e = ali_field(f, "notify_id", out->event_id, sizeof(out->event_id), 1, ascii, reason,
	                   rlen)) ||
	    (e = ali_field(f, "notify_type", out->event_type, sizeof(out->event_type), 0, ascii,
	                   reason, rlen)))
		return e;
	out->kind = NOTIFY_IGNORED;
	if (out->event_type[0] != '\0' && strcmp(out->event_type, "trade_status_sync") != 0)
		return VERR_OK;
	if ((e = ali_field(f, "trade_status", out->status, sizeof(out->status), 1, ascii, reason,
	                   rlen)))
		return e;
	memcpy(out->currency, "CNY", 4);
	/* Refund fields make it a refund, whatever the status (TRADE_CLOSED is a full one). */
	if (fee != NULL && ((biz != NULL && biz->vlen > 0) || (gmt != NULL && gmt->vlen > 0))) {
		out->kind = NOTIFY_REFUND;
		out->refund_cumulative = 1;
		if ((e = ali_field(f, "trade_no", out->channel_trade_no,
		                   sizeof(out->channel_trade_no), 1, ascii, reason, rlen)) ||
		    (e = ali_field(f, "out_trade_no", out->out_trade_no, sizeof(out->out_trade_no),
		                   1, ascii, reason, rlen)) ||
		    (e = ali_field(f, "out_biz_no", out->merchant_refund_no,
		                   sizeof(out->merchant_refund_no), 0, ascii, reason, rlen)) ||
		    (e = ali_amount(f, "refund_fee", &out->amount_minor, reason, rlen)))
			return e;
		if (form_get(f, "total_amount") != NULL &&
		    (e = ali_amount(f, "total_amount", &out->order_total_minor, reason, rlen)))
			return e;
		if (out->merchant_refund_no[0] != '\0') {
			memcpy(out->refund_no, out->merchant_refund_no, sizeof(out->refund_no));
			return VERR_OK;
		}
		/* Without out_biz_no the refund is named by its trade and time. */
		if ((e = ali_field(f, "gmt_refund", when, sizeof(when), 1, ascii, reason, rlen)))
			return e;
		if ((size_t)snprintf(out->refund_no, sizeof(out->refund_no), "%s-%s",
		                     out->channel_trade_no, when) >= sizeof(out->refund_no)) {
			snprintf(reason, rlen, "trade_no and gmt_refund too long for a refund id");
			return VERR_BODY;
		}
		return VERR_OK;
	}
	if (strcmp(out->status, "TRADE_SUCCESS") != 0 && strcmp(out->status, "TRADE_FINISHED") != 0)
		return VERR_OK;
	out->kind = NOTIFY_PAYMENT;
	if ((e = ali_field(f, "trade_no", out->channel_trade_no, sizeof(out->channel_trade_no), 1,
	                   ascii, reason, rlen)) ||
	    (e = ali_field(f, "out_trade_no", out->out_trade_no, sizeof(out->out_trade_no), 1,
	                   ascii, reason, rlen)) ||
	    (e = ali_amount(f, "total_amount", &out->amount_minor, reason, rlen)))
		return e;
	return VERR_OK;
}

/*
 * ali_unambiguous - the string Alipay signs joins the decoded name=value pairs with '&', so a
 * decoded value holding "&name=" can be re-encoded as further parameters (and parameters
 * folded into a value) under the same signature: a signed subject of
 * "x&total_amount=0.01&trade_no=FAKE" would sign a body with another amount and trade number.
 * Such a body is refused whichever way it was meant: a value with '&' followed by a name
 * (letters, digits, '_', as every Alipay parameter is named) and '='. A value with a bare '&'
 * ("Tom & Jerry", "goods & more=1") cannot re-split into a parameter anything reads, and is
 * kept.
 */
static enum verr
ali_unambiguous(const struct form *f, char *reason, size_t rlen)
{
	for (size_t i = 0; i < f->n; i++) {
		const char *v = f->pairs[i].val;

		for (const char *amp = strchr(v, '&'); amp != NULL; amp = strchr(amp + 1, '&')) {
			size_t name = strspn(amp + 1, "abcdefghijklmnopqrstuvwxyz"
			                              "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");

			if (name > 0 && amp[1 + name] == '=') {
				snprintf(
				    reason, rlen,
				    "parameter %zu: its value could be read as further parameters",
				    i + 1);
				return VERR_AMBIGUOUS;
			}
		}
	}
	return VERR_OK;
}

/* ali_sig_length_known - only a signature of some key's length can verify: no RSA for junk. */
static int
ali_sig_length_known(const struct ali_merchant *m, size_t siglen)
{
	for (int k = 0; k < m->nkeys; k++)
		if (m->keys[k] != NULL && (size_t)EVP_PKEY_get_size(m->keys[k]) == siglen)
			return 1;
	return 0;
}

/*
 * ali_sign_bytes - the length of the signature a raw "sign" value (percent-encoded base64)
 * decodes to, without decoding it: -1 when it cannot be strict base64, -2 for a malformed
 * %-escape (the form decoder's verdict). Only the length matters here; the verifier decodes
 * the value itself.
 */
static long
ali_sign_bytes(const uint8_t *v, size_t vlen)
{
	size_t chars = 0, pads = 0;

	for (size_t i = 0; i < vlen; i++) {
		int c = v[i];

		if (c == '%') {
			int hi, lo;

			if (i + 2 >= vlen || (hi = form_hex_value(v[i + 1])) < 0 ||
			    (lo = form_hex_value(v[i + 2])) < 0)
				return -2;
			c = hi * 16 + lo;
			i += 2;
		}
		if (c == '=')
			pads++;
		else if (pads > 0 || !(isalnum(c) || c == '+' || c == '/'))
			return -1;
		chars++;
	}
	if (chars == 0 || chars % 4 != 0 || pads > 2)
		return -1;
	return (long)(chars / 4 * 3 - pads);
}

enum verr
notify_ali_precheck(const struct ali_merchant *m, const uint8_t *body, size_t len, char *reason,
                    size_t rlen)
{
	size_t pairs = len > 0 ? 1 : 0;
	long siglen = -1;

	if (rlen > 0)
		reason[0] = '\0';
	for (size_t i = 0; i < len; i++)
		pairs += body[i] == '&';
	if (pairs > ALI_PARAMS_MAX) {
		snprintf(reason, rlen, "form body: more than %d parameters", ALI_PARAMS_MAX);
		return VERR_BODY;
	}
	/* The first "sign" parameter's length: a signature no key of this merchant makes cannot
	 * verify, so it is refused here, before it takes a slot, as the verifier refuses it. */
	for (size_t at = 0; at < len;) {
		const uint8_t *amp = memchr(body + at, '&', len - at);
		size_t end = amp != NULL ? (size_t)(amp - body) : len;

		if (end - at >= 5 && memcmp(body + at, "sign=", 5) == 0) {
			siglen = ali_sign_bytes(body + at + 5, end - at - 5);
			if (siglen == -2) {
				snprintf(reason, rlen, "form body: malformed %%-escape in sign");
				return VERR_BODY;
			}
			if (siglen < 0) {
				snprintf(reason, rlen, "sign is not base64 of an RSA signature");
				return VERR_SIGNATURE;
			}
			break;
		}
		at = end + 1;
	}
	if (siglen < 0) {
		snprintf(reason, rlen, "missing sign");
		return VERR_SIGNATURE;
	}
	if (!ali_sig_length_known(m, (size_t)siglen)) {
		snprintf(reason, rlen, "sign is not the length of any key's signatures");
		return VERR_SIGNATURE;
	}
	return VERR_OK;
}

enum verr
notify_ali_verify_parse(const struct ali_merchant *m, const uint8_t *body, size_t len,
                        struct notify *out, char *reason, size_t rlen)
{
	const struct form_pair *sign, *stype, *charset, *app, *seller;
	uint8_t sig[CRYPTO_RSA_MAX_BYTES];
	struct form f;
	char err[96];
	size_t siglen;
	int utf8;
	enum verr e;

	if ((e = notify_begin(out, body, len, reason, rlen)) != VERR_OK)
		return e;
	if (form_decode(body, len, &f, err, sizeof(err)) != 0) {
		snprintf(reason, rlen, "form body: %s", err);
		/* A repeated name: which of the values was signed is a matter of reading. */
		e = strstr(err, "duplicated name") != NULL ? VERR_AMBIGUOUS : VERR_BODY;
		goto done;
	}
	if (f.n > ALI_PARAMS_MAX) {
		snprintf(reason, rlen, "form body: more than %d parameters", ALI_PARAMS_MAX);
		e = VERR_BODY;
		goto done;
	}
	if ((e = ali_unambiguous(&f, reason, rlen)) != VERR_OK)
		goto done;
	/* With charset utf-8 (or none, Alipay's current default) the bytes must be UTF-8. */
	charset = form_get(&f, "charset");
	utf8 = charset == NULL || strcasecmp(charset->val, "utf-8") == 0;
	for (size_t i = 0; utf8 && i < f.n; i++) {
		if (!form_utf8_valid((const uint8_t *)f.pairs[i].key, f.pairs[i].klen) ||
		    !form_utf8_valid((const uint8_t *)f.pairs[i].val, f.pairs[i].vlen)) {
			snprintf(reason, rlen, "parameter %zu is not valid UTF-8", i + 1);
			e = VERR_BODY;
			goto done;
		}
	}
	e = VERR_SIGNATURE;
	if ((sign = form_get(&f, "sign")) == NULL || sign->vlen == 0) {
		snprintf(reason, rlen, "missing sign");
		goto done;
	}
	if ((stype = form_get(&f, "sign_type")) != NULL && strcmp(stype->val, "RSA2") != 0) {
		snprintf(reason, rlen, "sign_type is not RSA2");
		e = VERR_UNSUPPORTED;
		goto done;
	}
	if (sign->vlen > ALI_SIGN_B64_MAX ||
	    crypto_b64_decode(sign->val, sign->vlen, sig, sizeof(sig), &siglen) != 0) {
		snprintf(reason, rlen, "sign is not base64 of an RSA signature");
		goto done;
	}
	if (!ali_sig_length_known(m, siglen)) {
		snprintf(reason, rlen, "sign is not the length of any key's signatures");
		goto done;
	}
	if (!ali_verify_rule(m, &f, 0, sig, siglen) &&
	    (stype == NULL || !ali_verify_rule(m, &f, 1, sig, siglen))) {
		snprintf(reason, rlen, "signature does not verify");
		goto done;
	}
	if ((e = ali_parse(&f, !utf8, out, reason, rlen)) != VERR_OK || out->kind == NOTIFY_IGNORED)
		goto done;
	/* Authentic, and a payment or refund: it must also be this merchant's. */
	app = form_get(&f, "app_id");
	seller = form_get(&f, "seller_id");
	if (app == NULL || m->app_id[0] == '\0' || strcmp(app->val, m->app_id) != 0)
		e = notify_unroutable(out, "foreign_app_id");
	else if (m->seller_id[0] != '\0' &&
	         (seller == NULL || strcmp(seller->val, m->seller_id) != 0))
		e = notify_unroutable(out, "foreign_seller_id");
done:
	form_free(&f);
	return e;
}

int
notify_ali_sign(EVP_PKEY *alipay_priv, const char *const *keys, const char *const *values, size_t n,
                char **form_body)
{
	struct form f = {0};
	uint8_t *sig = NULL;
	char *content = NULL, *sig64 = NULL;
	size_t clen, siglen;
	int rc = -1;

	*form_body = NULL;
	for (size_t i = 0; i < n; i++) {
		/* The signer owns sign and sign_type; a caller's copy would be signed over. */
		if (strcmp(keys[i], "sign") == 0 || strcmp(keys[i], "sign_type") == 0 ||
		    form_add(&f, keys[i], strlen(keys[i]), values[i], strlen(values[i])) != 0)
			goto done;
	}
	if (notify_ali_sign_content(&f, 0, &content, &clen) != 0 ||
	    crypto_rsa_sha256_sign(alipay_priv, (const uint8_t *)content, clen, &sig, &siglen) !=
	        0 ||
	    (sig64 = crypto_b64_encode_alloc(sig, siglen)) == NULL ||
	    form_add(&f, "sign_type", 9, "RSA2", 4) != 0 ||
	    form_add(&f, "sign", 4, sig64, strlen(sig64)) != 0 ||
	    (*form_body = form_encode(&f)) == NULL)
		goto done;
	rc = 0;
done:
	free(content);
	free(sig);
	free(sig64);
	form_free(&f);
	return rc;
}

/* ---- the Alipay operations (struct chan_notify_ops) ----------------------------------- */

static void
ali_keys_free(void *keys)
{
	notify_keys_ali_free(keys);
	free(keys);
}

static int
ali_keys_load(const struct conf *cf, const struct conf_merchant *cm, void **keys, char *err,
              size_t errlen)
{
	const struct conf_alipay *a = chan_conf_ali(cm);
	struct ali_merchant *m;

	(void)cf;
	*keys = NULL;
	if (a == NULL)
		return 0;
	if ((*keys = m = notify_keys_alloc(sizeof(*m), err, errlen)) == NULL)
		return -1;
	snprintf(m->app_id, sizeof(m->app_id), "%s", a->app_id);
	snprintf(m->seller_id, sizeof(m->seller_id), "%s", a->seller_id);
	for (int k = 0; k < a->public_key_files.n; k++)
		if (notify_keys_ali_add(m, a->public_key_files.v[k], err, errlen) != 0)
			return -1;
	return 0;
}

static void
ali_keys_describe(const void *keys, char *buf, size_t cap)
{
	snprintf(buf, cap, "alipay_keys=%d", keys ? ((const struct ali_merchant *)keys)->nkeys : 0);
}

static enum verr
ali_precheck_op(const void *keys, const struct chan_req *r, char *reason, size_t rlen)
{
	return notify_ali_precheck(keys, r->body, r->len, reason, rlen);
}

static enum verr
ali_verify_op(const void *keys, const struct chan_req *r, struct notify *out, char *reason,
              size_t rlen)
{
	return notify_ali_verify_parse(keys, r->body, r->len, out, reason, rlen);
}

/* Alipay reads only the body: exactly "success", anything else re-sends. */
static const char *
ali_answer(int ok, const char *msg, char *body, size_t cap)
{
	(void)msg;
	snprintf(body, cap, "%s", ok ? "success" : "fail");
	return "text/plain";
}

static int
ali_acknowledged(unsigned status, const char *body)
{
	return status == 200 && strcmp(body, "success") == 0;
}

/* ali_sign_op - in->content is the parameters without sign, form-encoded. */
static int
ali_sign_op(const struct chan_signer *s, const struct chan_sign_in *in, struct chan_signed *out)
{
	const char **kv = NULL;
	struct form f = {0};
	char err[128];
	int rc = -1;

	out->body = NULL;
	if (form_decode((const uint8_t *)in->content, strlen(in->content), &f, err, sizeof(err)) !=
	        0 ||
	    (kv = calloc(2 * f.n + 1, sizeof(*kv))) == NULL)
		goto done;
	for (size_t i = 0; i < f.n; i++) {
		kv[i] = f.pairs[i].key;
		kv[f.n + i] = f.pairs[i].val;
	}
	if (notify_ali_sign(s->priv, kv, kv + f.n, f.n, &out->body) != 0)
		goto done;
	out->len = strlen(out->body);
	snprintf(out->headers, sizeof(out->headers),
	         "Content-Type: application/x-www-form-urlencoded; charset=utf-8\r\n");
	rc = 0;
done:
	free(kv);
	form_free(&f);
	return rc;
}

const struct chan_notify_ops notify_ali_ops = {
    .name = "alipay",
    .conf = &chan_conf_ali_decl,
    .keys_load = ali_keys_load,
    .keys_free = ali_keys_free,
    .keys_describe = ali_keys_describe,
    .precheck = ali_precheck_op,
    .verify_parse = ali_verify_op,
    .status = notify_status_plain,
    .answer = ali_answer,
    .acknowledged = ali_acknowledged,
    .sign = ali_sign_op,
};
