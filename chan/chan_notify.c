/*
 * chan_notify - what the channels share: the names of rejection reasons, the struct notify
 * helpers, strict header lookup, the JSON field readers that enforce UTF-8, types and amount
 * bounds, and the small helpers of their operations.
 */
#include "chan_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "cfg.h"
#include "form.h"
#include "money.h"

unsigned
notify_status_plain(int ok, enum verr ve)
{
	(void)ve;
	return ok ? 200 : 400;
}

void *
notify_keys_alloc(size_t size, char *err, size_t errlen)
{
	void *p = calloc(1, size);

	if (p == NULL)
		snprintf(err, errlen, "out of memory");
	return p;
}

void
notify_list_copy(char *dst, size_t cap, int *n, const struct cfg_strs *src)
{
	*n = 0;
	for (int i = 0; i < src->n && i < NOTIFY_LIST_MAX; i++)
		snprintf(dst + (size_t)(*n)++ * cap, cap, "%s", src->v[i]);
}

const char *
notify_verr_name(enum verr e)
{
	static const char *const names[] = {
	    [VERR_OK] = "ok",
	    [VERR_HEADER] = "header",
	    [VERR_TIMESTAMP] = "timestamp",
	    [VERR_SERIAL] = "serial",
	    [VERR_SIGNATURE] = "signature",
	    [VERR_DECRYPT] = "decrypt",
	    [VERR_BODY] = "body",
	    [VERR_AMOUNT] = "amount",
	    [VERR_UNSUPPORTED] = "unsupported",
	    [VERR_AMBIGUOUS] = "ambiguous",
	};

	if ((unsigned)e >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[e];
}

static void
notify_init(struct notify *n)
{
	memset(n, 0, sizeof(*n));
	n->order_total_minor = -1;
	n->valid_from = INT64_MIN;
	n->valid_to = INT64_MAX;
}

enum verr
notify_begin(struct notify *n, const uint8_t *body, size_t len, char *reason, size_t rlen)
{
	notify_init(n);
	if (rlen > 0)
		reason[0] = '\0';
	if ((body == NULL && len > 0) || len > NOTIFY_BODY_MAX) {
		snprintf(reason, rlen, "body missing or larger than %d bytes", NOTIFY_BODY_MAX);
		return VERR_BODY;
	}
	return VERR_OK;
}

enum verr
notify_unroutable(struct notify *n, const char *why)
{
	n->kind = NOTIFY_UNROUTABLE;
	snprintf(n->unroutable, sizeof(n->unroutable), "%s", why);
	return VERR_OK;
}

int
notify_listed(const char *list, size_t cap, int n, const char *s)
{
	for (int i = 0; i < n && i < NOTIFY_LIST_MAX; i++)
		if (strcmp(list + (size_t)i * cap, s) == 0)
			return 1;
	return 0;
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
notify_header(const struct http_hdr *h, size_t n, const char *name, const char **val, size_t *vlen)
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
notify_json_str(const struct json_t *obj, const char *path, const char *key, char *dst, size_t cap,
                int required, char *reason, size_t rlen)
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
