/*
 * ingest_keys - loading of per-merchant key material from files, and the small helpers the
 * three channel parsers share (reason names, header lookup, bounded field copies, JSON
 * field access).
 *
 * Key and secret files are read with a size bound and never echoed: error messages name the
 * file and the problem only. Secrets are wiped from memory when freed.
 */
#include "ingest_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "form.h"
#include "money.h"
#include "sig.h"

#define KEYS_SECRET_FILE_MAX 1024

const char *
verr_name(enum verr e)
{
	static const char *const names[] = {
		[VERR_OK] = "ok",
		[VERR_HEADER] = "header",
		[VERR_TIMESTAMP] = "timestamp",
		[VERR_SERIAL] = "serial",
		[VERR_SIGNATURE] = "signature",
		[VERR_DECRYPT] = "decrypt",
		[VERR_BODY] = "body",
		[VERR_MERCHANT] = "merchant",
		[VERR_AMOUNT] = "amount",
		[VERR_UNSUPPORTED] = "unsupported",
	};

	if ((unsigned)e >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[e];
}

/* keys_trim_newline - drops one trailing "\n" or "\r\n", as editors and `echo` leave one. */
static size_t
keys_trim_newline(const uint8_t *p, size_t n)
{
	if (n > 0 && p[n - 1] == '\n')
		n--;
	if (n > 0 && p[n - 1] == '\r')
		n--;
	return n;
}

/* keys_pub_key_id - whether id is "PUB_KEY_ID_" followed by digits only. */
static int
keys_pub_key_id(const char *id)
{
	size_t n = strlen("PUB_KEY_ID_");

	if (strncmp(id, "PUB_KEY_ID_", n) != 0 || id[n] == '\0')
		return 0;
	for (const char *p = id + n; *p != '\0'; p++)
		if (*p < '0' || *p > '9')
			return 0;
	return 1;
}

int
keys_wx_add(struct wx_merchant *m, const char *path, const char *key_id, char *err,
	    size_t errlen)
{
	char serial[SIG_SERIAL_MAX];
	EVP_PKEY *pkey = NULL;
	const char *id;
	int rc = -1;

	if (m->nkeys >= (int)(sizeof(m->keys) / sizeof(m->keys[0]))) {
		snprintf(err, errlen, "%s: more than %zu WeChat Pay keys", path,
			 sizeof(m->keys) / sizeof(m->keys[0]));
		return -1;
	}
	if (sig_load_pubkey_file_serial(path, &pkey, serial, sizeof(serial), err, errlen) != 0)
		return -1;
	if (serial[0] != '\0') {
		/* A certificate names itself; a configured id is only a cross-check. */
		if (key_id != NULL && key_id[0] != '\0' && !sig_serial_equal(key_id, serial)) {
			snprintf(err, errlen, "%s: certificate serial %s is not the configured %s",
				 path, serial, key_id);
			goto done;
		}
		id = serial;
	} else {
		if (key_id == NULL || !keys_pub_key_id(key_id) || strlen(key_id) >= sizeof(serial)) {
			snprintf(err, errlen, "%s: a public key needs its id, PUB_KEY_ID_<digits>",
				 path);
			goto done;
		}
		id = key_id;
	}
	for (int i = 0; i < m->nkeys; i++) {
		if (sig_serial_equal(m->keys[i].serial, id)) {
			snprintf(err, errlen, "%s: key id %s configured twice", path, id);
			goto done;
		}
	}
	snprintf(m->keys[m->nkeys].serial, sizeof(m->keys[0].serial), "%s", id);
	m->keys[m->nkeys++].pkey = pkey;
	pkey = NULL;
	rc = 0;
done:
	EVP_PKEY_free(pkey);
	return rc;
}

int
keys_wx_apiv3_load(struct wx_merchant *m, const char *path, char *err, size_t errlen)
{
	uint8_t *buf;
	size_t len, n;

	if (sig_read_file(path, KEYS_SECRET_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	n = keys_trim_newline(buf, len);
	/* AEAD_AES_256_GCM needs exactly 32 key bytes; a shorter key is a config mistake. */
	if (n != sizeof(m->apiv3_key)) {
		snprintf(err, errlen, "%s: APIv3 key must be exactly 32 bytes, found %zu", path, n);
		OPENSSL_clear_free(buf, len);
		return -1;
	}
	memcpy(m->apiv3_key, buf, n);
	m->apiv3_key_len = n;
	OPENSSL_clear_free(buf, len);
	return 0;
}

int
keys_ali_add(struct ali_merchant *m, const char *path, char *err, size_t errlen)
{
	EVP_PKEY *pkey;

	if (m->nkeys >= (int)(sizeof(m->keys) / sizeof(m->keys[0]))) {
		snprintf(err, errlen, "%s: more than %zu Alipay public keys", path,
			 sizeof(m->keys) / sizeof(m->keys[0]));
		return -1;
	}
	if (sig_load_pubkey_file(path, &pkey, err, errlen) != 0)
		return -1;
	m->keys[m->nkeys++] = pkey;
	return 0;
}

int
keys_stripe_add(struct stripe_merchant *m, const char *path, char *err, size_t errlen)
{
	uint8_t *buf, *copy;
	size_t len, n;
	int rc = -1;

	if (m->nsecrets >= (int)(sizeof(m->secrets) / sizeof(m->secrets[0]))) {
		snprintf(err, errlen, "%s: more than %zu Stripe secrets", path,
			 sizeof(m->secrets) / sizeof(m->secrets[0]));
		return -1;
	}
	if (sig_read_file(path, KEYS_SECRET_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	n = keys_trim_newline(buf, len);
	if (n == 0) {
		snprintf(err, errlen, "%s: empty Stripe secret", path);
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		if (buf[i] <= ' ' || buf[i] == 0x7f) {
			snprintf(err, errlen, "%s: Stripe secret contains whitespace or control "
					      "characters", path);
			goto done;
		}
	}
	if ((copy = malloc(n)) == NULL) {
		snprintf(err, errlen, "%s: out of memory", path);
		goto done;
	}
	memcpy(copy, buf, n);
	m->secrets[m->nsecrets++] = (struct stripe_secret){copy, n};
	rc = 0;
done:
	OPENSSL_clear_free(buf, len);
	return rc;
}

void
keys_wx_free(struct wx_merchant *m)
{
	for (int i = 0; i < m->nkeys; i++)
		EVP_PKEY_free(m->keys[i].pkey);
	/* OPENSSL_cleanse zeroes in a way the compiler may not drop: the APIv3 key is secret. */
	OPENSSL_cleanse(m, sizeof(*m));
}

void
keys_ali_free(struct ali_merchant *m)
{
	for (int i = 0; i < m->nkeys; i++)
		EVP_PKEY_free(m->keys[i]);
	memset(m, 0, sizeof(*m));
}

void
keys_stripe_free(struct stripe_merchant *m)
{
	for (int i = 0; i < m->nsecrets; i++)
		OPENSSL_clear_free(m->secrets[i].bytes, m->secrets[i].len);
	memset(m, 0, sizeof(*m));
}

/* ---- helpers shared by ingest_wxpay.c, ingest_alipay.c and ingest_stripe.c ---------------- */

void
notify_init(struct notify *n)
{
	memset(n, 0, sizeof(*n));
	n->order_total_minor = -1;
}

int
notify_copy(char *dst, size_t cap, const char *src, size_t len)
{
	/* Control characters in an id or status are never legitimate and would corrupt logs. */
	if (len >= cap)
		return -1;
	for (size_t i = 0; i < len; i++)
		if ((unsigned char)src[i] < 0x20 || src[i] == 0x7f)
			return -1;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return 0;
}

int
notify_header(const struct http_hdr *h, size_t n, const char *name, const char **val,
	      size_t *vlen)
{
	int count = 0;

	*val = NULL;
	*vlen = 0;
	for (size_t i = 0; i < n; i++) {
		const char *v, *e;

		if (h[i].name == NULL || strcasecmp(h[i].name, name) != 0)
			continue;
		if (count++ > 0)
			continue;
		v = h[i].value != NULL ? h[i].value : "";
		while (*v == ' ' || *v == '\t')
			v++;
		for (e = v + strlen(v); e > v && (e[-1] == ' ' || e[-1] == '\t'); e--)
			;
		*val = v;
		*vlen = (size_t)(e - v);
	}
	return count;
}

enum verr
notify_json_load(const uint8_t *p, size_t n, struct json_t **out, char *reason, size_t rlen)
{
	json_error_t e;
	json_t *j;

	*out = NULL;
	if (n > NOTIFY_BODY_MAX) {
		snprintf(reason, rlen, "JSON larger than %d bytes", NOTIFY_BODY_MAX);
		return VERR_BODY;
	}
	if (!form_utf8_valid(p, n)) {
		snprintf(reason, rlen, "JSON is not valid UTF-8");
		return VERR_BODY;
	}
	/* jansson's error text quotes the input, so only the position is reported. */
	if ((j = json_loadb((const char *)p, n, JSON_REJECT_DUPLICATES, &e)) == NULL) {
		snprintf(reason, rlen, "%s JSON at line %d column %d",
			 json_error_code(&e) == json_error_duplicate_key ? "duplicated key in"
									  : "malformed",
			 e.line, e.column);
		return VERR_BODY;
	}
	if (!json_is_object(j)) {
		json_decref(j);
		snprintf(reason, rlen, "JSON is not an object");
		return VERR_BODY;
	}
	*out = j;
	return VERR_OK;
}

/* notify_field - "path.key" or "key", for messages. */
static const char *
notify_field(char *buf, size_t len, const char *path, const char *key)
{
	if (path == NULL || path[0] == '\0')
		snprintf(buf, len, "%s", key);
	else
		snprintf(buf, len, "%s.%s", path, key);
	return buf;
}

enum verr
notify_json_str(const struct json_t *obj, const char *path, const char *key, char *dst,
		size_t cap, int required, char *reason, size_t rlen)
{
	const json_t *v = json_object_get(obj, key);
	char f[96];

	dst[0] = '\0';
	if (v == NULL || json_is_null(v)) {
		if (!required)
			return VERR_OK;
		snprintf(reason, rlen, "missing %s", notify_field(f, sizeof(f), path, key));
		return VERR_BODY;
	}
	if (!json_is_string(v)) {
		snprintf(reason, rlen, "%s is not a string", notify_field(f, sizeof(f), path, key));
		return VERR_BODY;
	}
	if (notify_copy(dst, cap, json_string_value(v), json_string_length(v)) != 0) {
		snprintf(reason, rlen, "%s is too long or has control characters",
			 notify_field(f, sizeof(f), path, key));
		return VERR_BODY;
	}
	if (required && dst[0] == '\0') {
		snprintf(reason, rlen, "%s is empty", notify_field(f, sizeof(f), path, key));
		return VERR_BODY;
	}
	return VERR_OK;
}

enum verr
notify_json_amount(const struct json_t *obj, const char *path, const char *key, int64_t *out,
		   char *reason, size_t rlen)
{
	const json_t *v = json_object_get(obj, key);
	json_int_t x;
	char f[96];

	notify_field(f, sizeof(f), path, key);
	if (v == NULL) {
		snprintf(reason, rlen, "missing %s", f);
		return VERR_BODY;
	}
	/* Minor units are integers on the wire: 10.5, "1050" and null are all refused. */
	if (!json_is_integer(v)) {
		snprintf(reason, rlen, "%s is not an integer", f);
		return VERR_AMOUNT;
	}
	if ((x = json_integer_value(v)) < 0) {
		snprintf(reason, rlen, "%s is negative", f);
		return VERR_AMOUNT;
	}
	if (x > MONEY_MAX_MINOR) {
		snprintf(reason, rlen, "%s is above the maximum amount", f);
		return VERR_AMOUNT;
	}
	*out = (int64_t)x;
	return VERR_OK;
}

enum verr
notify_currency(const char *code, char dst[4], char *reason, size_t rlen)
{
	if (code == NULL || strlen(code) != 3) {
		snprintf(reason, rlen, "currency is not a three-letter code");
		return VERR_BODY;
	}
	if (money_currency_scale(code) < 0) {
		snprintf(reason, rlen, "currency not supported");
		return VERR_UNSUPPORTED;
	}
	for (int i = 0; i < 3; i++)
		dst[i] = (char)(code[i] >= 'a' && code[i] <= 'z' ? code[i] - 'a' + 'A' : code[i]);
	dst[3] = '\0';
	return VERR_OK;
}
