/*
 * chan_stripe_form - Stripe's form encoding of nested request parameters, byte for byte as
 * stripe-node's stringifyRequestData (qs with RFC 3986 escaping, then '[' and ']' restored),
 * checked against the SDK's test vectors (channel-apis.md sections 3.2 and 3.8).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "chan_sign.h"

/* A growing output string. */
struct chan_sbuf {
	char *p;
	size_t n, cap;
	int failed;
};

static void
chan_sbuf_add(struct chan_sbuf *b, const char *s, size_t n)
{
	if (b->failed)
		return;
	if (b->n + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *p;

		while (b->n + n + 1 > cap)
			cap *= 2;
		if ((p = realloc(b->p, cap)) == NULL) {
			b->failed = 1;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->n, s, n);
	b->n += n;
	b->p[b->n] = '\0';
}

/* chan_stripe_escape - RFC 3986 unreserved bytes stay, brackets stay, the rest is %XX. */
static void
chan_stripe_escape(struct chan_sbuf *b, const char *s, size_t n)
{
	static const char hex[] = "0123456789ABCDEF";

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char e[3];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_' || c == '.' || c == '~' || c == '[' || c == ']') {
			chan_sbuf_add(b, (const char *)&s[i], 1);
			continue;
		}
		e[0] = '%', e[1] = hex[c >> 4], e[2] = hex[c & 15];
		chan_sbuf_add(b, e, 3);
	}
}

/* chan_stripe_value - appends "prefix=value" for a scalar, or recurses into a container. */
static int
chan_stripe_value(struct chan_sbuf *b, const char *prefix, size_t plen, json_t *v)
{
	char num[32];
	int n;

	switch (json_typeof(v)) {
	case JSON_OBJECT: {
		const char *k;
		json_t *c;

		json_object_foreach(v, k, c)
		{
			struct chan_sbuf key = {0};
			int rc;

			chan_sbuf_add(&key, prefix, plen);
			chan_sbuf_add(&key, "[", 1);
			chan_stripe_escape(&key, k, strlen(k));
			chan_sbuf_add(&key, "]", 1);
			rc = key.failed ? -1 : chan_stripe_value(b, key.p, key.n, c);
			free(key.p);
			if (rc != 0)
				return -1;
		}
		return 0;
	}
	case JSON_ARRAY:
		for (size_t i = 0; i < json_array_size(v); i++) {
			struct chan_sbuf key = {0};
			int rc;

			n = snprintf(num, sizeof(num), "[%zu]", i);
			chan_sbuf_add(&key, prefix, plen);
			chan_sbuf_add(&key, num, (size_t)n);
			rc = key.failed ? -1
			                : chan_stripe_value(b, key.p, key.n, json_array_get(v, i));
			free(key.p);
			if (rc != 0)
				return -1;
		}
		return 0;
	case JSON_REAL:
		/* Amounts are integer minor units; a float here is a bug upstream. */
		return -1;
	default:
		break;
	}
	if (b->n > 0)
		chan_sbuf_add(b, "&", 1);
	chan_sbuf_add(b, prefix, plen);
	chan_sbuf_add(b, "=", 1);
	if (json_is_string(v)) {
		chan_stripe_escape(b, json_string_value(v), json_string_length(v));
	} else if (json_is_integer(v)) {
		n = snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
		chan_sbuf_add(b, num, (size_t)n);
	} else if (json_is_true(v)) {
		chan_sbuf_add(b, "true", 4);
	} else if (json_is_false(v)) {
		chan_sbuf_add(b, "false", 5);
	}
	/* null: "key=" unsets the field. */
	return b->failed ? -1 : 0;
}

int
chan_stripe_form(json_t *params, char **out)
{
	struct chan_sbuf b = {0};
	const char *k;
	json_t *v;

	*out = NULL;
	if (!json_is_object(params))
		return -1;
	chan_sbuf_add(&b, "", 0);
	json_object_foreach(params, k, v)
	{
		struct chan_sbuf key = {0};
		int rc;

		chan_stripe_escape(&key, k, strlen(k));
		chan_sbuf_add(&key, "", 0);
		rc = key.failed ? -1 : chan_stripe_value(&b, key.p, key.n, v);
		free(key.p);
		if (rc != 0) {
			free(b.p);
			return -1;
		}
	}
	if (b.failed) {
		free(b.p);
		return -1;
	}
	*out = b.p;
	return 0;
}
