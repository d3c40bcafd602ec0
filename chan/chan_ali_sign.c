/*
 * chan_ali_sign - Alipay OpenAPI request signatures (RSA2 over the sorted parameters) and
 * response verification over the raw "<method>_response" node.
 *
 * The answer's signature covers the node's value exactly as it appears in the body, so the
 * node is located by brace matching on the raw bytes (the Java SDK's algorithm), never by
 * re-serialising parsed JSON (channel-apis.md sections 2.3 and 2.5, vectors A-O1, A-O2,
 * A-D1 and A-D2).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jansson.h>

#include "chan_notify.h"
#include "chan_sign.h"
#include "crypto.h"
#include "form.h"

int
chan_ali_sign_content(const struct chan_kv *params, size_t n, char **out, size_t *outlen)
{
	struct form f = {0};
	int rc = -1;

	*out = NULL;
	for (size_t i = 0; i < n; i++) {
		/* Empty values are neither signed nor sent (the Java rule). */
		if (params[i].v == NULL || params[i].v[0] == '\0')
			continue;
		if (form_add(&f, params[i].k, strlen(params[i].k), params[i].v,
		             strlen(params[i].v)) != 0)
			goto done;
	}
	/* form_add refuses a duplicated name. A request signs its sign_type, as a
	 * notification's "V2" rule does (keep_sign_type). */
	rc = notify_ali_sign_content(&f, 1, out, outlen);
done:
	form_free(&f);
	return rc;
}

int
chan_ali_sign_params(EVP_PKEY *app_key, const struct chan_kv *params, size_t n, char **sign)
{
	char *content = NULL;
	uint8_t *sig = NULL;
	size_t clen, siglen;
	int rc = -1;

	*sign = NULL;
	if (chan_ali_sign_content(params, n, &content, &clen) != 0)
		goto done;
	if (crypto_rsa_sha256_sign(app_key, (const uint8_t *)content, clen, &sig, &siglen) != 0)
		goto done;
	if ((*sign = crypto_b64_encode_alloc(sig, siglen)) == NULL)
		goto done;
	rc = 0;
done:
	free(content);
	free(sig);
	return rc;
}

/* chan_ali_verify_b64 - RSA2 of text with one of the keys. */
static enum chan_vr
chan_ali_verify_b64(EVP_PKEY *const *keys, int nkeys, const char *b64, size_t blen,
                    const char *text, size_t len)
{
	uint8_t sig[CRYPTO_RSA_MAX_BYTES];
	size_t siglen;

	if (blen > CRYPTO_B64_ENCODED_LEN(CRYPTO_RSA_MAX_BYTES) ||
	    crypto_b64_decode(b64, blen, sig, sizeof(sig), &siglen) != 0)
		return CHAN_VR_MALFORMED;
	for (int i = 0; i < nkeys; i++)
		if (keys[i] != NULL &&
		    crypto_rsa_sha256_verify(keys[i], (const uint8_t *)text, len, sig, siglen) == 0)
			return CHAN_VR_OK;
	return CHAN_VR_SIGNATURE;
}

enum chan_vr
chan_ali_verify_params(EVP_PKEY *app_pub, const struct chan_kv *params, size_t n)
{
	const char *sign = NULL;
	char *content = NULL;
	enum chan_vr vr;
	size_t clen;

	for (size_t i = 0; i < n; i++)
		if (strcmp(params[i].k, "sign") == 0)
			sign = params[i].v;
	if (sign == NULL || *sign == '\0')
		return CHAN_VR_MISSING;
	if (chan_ali_sign_content(params, n, &content, &clen) != 0)
		return CHAN_VR_MALFORMED;
	vr = chan_ali_verify_b64(&app_pub, 1, sign, strlen(sign), content, clen);
	free(content);
	return vr;
}

/* chan_ali_find - the first occurrence of needle (nlen bytes) in p[0..n), or NULL. */
static const char *
chan_ali_find(const char *p, size_t n, const char *needle, size_t nlen)
{
	if (nlen == 0 || n < nlen)
		return NULL;
	for (size_t i = 0; i + nlen <= n; i++)
		if (p[i] == needle[0] && memcmp(p + i, needle, nlen) == 0)
			return p + i;
	return NULL;
}

/* chan_ali_match - the length of the object starting at p[0] == '{', or 0 if unterminated. */
static size_t
chan_ali_match(const char *p, size_t n)
{
	int depth = 0, in_str = 0;

	for (size_t i = 0; i < n; i++) {
		char c = p[i];

		if (in_str) {
			if (c == '\\')
				i++;
			else if (c == '"')
				in_str = 0;
		} else if (c == '"') {
			in_str = 1;
		} else if (c == '{') {
			depth++;
		} else if (c == '}' && --depth == 0) {
			return i + 1;
		}
	}
	return 0;
}

/* chan_ali_locate - the extent of the value of the quoted name key, if it is an object. */
static int
chan_ali_locate(const char *b, size_t n, const char *key, struct chan_ali_node *node)
{
	const char *k = chan_ali_find(b, n, key, strlen(key)), *p, *end = b + n;
	size_t len;

	if (k == NULL)
		return -1;
	p = k + strlen(key);
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (p >= end || *p++ != ':')
		return -1;
	while (p < end && (*p == ' ' || *p == '\t' || *p == '\r' || *p == '\n'))
		p++;
	if (p >= end || *p != '{' || (len = chan_ali_match(p, (size_t)(end - p))) == 0)
		return -1;
	/* The Java guard: a second node of that name after this one is an attack. */
	if (chan_ali_find(p + len, (size_t)(end - p - len), key, strlen(key)) != NULL)
		return -1;
	node->text = p;
	node->len = len;
	return 0;
}

int
chan_ali_response_node(const uint8_t *body, size_t blen, const char *method,
                       struct chan_ali_node *node)
{
	char key[128];
	size_t ml = strlen(method);

	memset(node, 0, sizeof(*node));
	if (ml == 0 || ml + 12 > sizeof(key))
		return -1;
	key[0] = '"';
	for (size_t i = 0; i < ml; i++)
		key[i + 1] = method[i] == '.' ? '_' : method[i];
	memcpy(key + ml + 1, "_response\"", 11);
	if (chan_ali_locate((const char *)body, blen, key, node) == 0)
		return 0;
	if (chan_ali_find((const char *)body, blen, key, strlen(key)) != NULL)
		return -1;
	if (chan_ali_locate((const char *)body, blen, "\"error_response\"", node) != 0)
		return -1;
	node->is_error = 1;
	return 0;
}

/* chan_ali_unslash - text with every "\/" read as "/" (free it), for the Java SDK's retry. */
static char *
chan_ali_unslash(const char *p, size_t n, size_t *outlen)
{
	char *s = malloc(n + 1);
	size_t o = 0;

	if (s == NULL)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		if (p[i] == '\\' && i + 1 < n && p[i + 1] == '/')
			continue;
		s[o++] = p[i];
	}
	s[o] = '\0';
	*outlen = o;
	return s;
}

enum chan_vr
chan_ali_verify_response(EVP_PKEY *const *alipay_keys, int nkeys, const uint8_t *body, size_t blen,
                         const char *method, struct chan_ali_node *node)
{
	json_t *root = NULL, *sign;
	enum chan_vr vr = CHAN_VR_MALFORMED;
	char *alt = NULL;
	size_t altlen;

	root = json_loadb((const char *)body, blen, JSON_REJECT_DUPLICATES, NULL);
	if (root == NULL || !json_is_object(root) ||
	    chan_ali_response_node(body, blen, method, node) != 0)
		goto done;
	sign = json_object_get(root, "sign");
	vr = CHAN_VR_MISSING;
	if (sign == NULL || json_is_null(sign) ||
	    (json_is_string(sign) && json_string_length(sign) == 0))
		goto done;
	vr = CHAN_VR_MALFORMED;
	if (!json_is_string(sign))
		goto done;
	vr = chan_ali_verify_b64(alipay_keys, nkeys, json_string_value(sign),
	                         json_string_length(sign), node->text, node->len);
	if (vr == CHAN_VR_SIGNATURE && memchr(node->text, '\\', node->len) != NULL &&
	    (alt = chan_ali_unslash(node->text, node->len, &altlen)) != NULL && altlen != node->len)
		vr = chan_ali_verify_b64(alipay_keys, nkeys, json_string_value(sign),
		                         json_string_length(sign), alt, altlen);
done:
	free(alt);
	json_decref(root);
	return vr;
}

int
chan_ali_sign_response(EVP_PKEY *alipay_key, const char *method, const char *node_json, char **body)
{
	uint8_t *sig = NULL;
	char *b64 = NULL, *b = NULL, key[128];
	size_t siglen, ml = strlen(method), n;
	int rc = -1;

	*body = NULL;
	if (ml + 10 > sizeof(key))
		goto done;
	for (size_t i = 0; i <= ml; i++)
		key[i] = method[i] == '.' ? '_' : method[i];
	if (crypto_rsa_sha256_sign(alipay_key, (const uint8_t *)node_json, strlen(node_json), &sig,
	                           &siglen) != 0 ||
	    (b64 = crypto_b64_encode_alloc(sig, siglen)) == NULL)
		goto done;
	n = strlen(key) + strlen(node_json) + strlen(b64) + 32;
	if ((b = malloc(n)) == NULL)
		goto done;
	snprintf(b, n, "{\"%s_response\":%s,\"sign\":\"%s\"}", key, node_json, b64);
	*body = b;
	rc = 0;
done:
	free(sig);
	free(b64);
	return rc;
}

int
chan_ali_timestamp(time_t t, char out[20])
{
	time_t cst = t + 8 * 3600;
	struct tm tm;

	if (gmtime_r(&cst, &tm) == NULL)
		return -1;
	return strftime(out, 20, "%Y-%m-%d %H:%M:%S", &tm) == 19 ? 0 : -1;
}
