/*
 * form - decoding and encoding of application/x-www-form-urlencoded bodies, and a strict
 * UTF-8 check.
 *
 * The decoder works on (pointer, length) input that need not be NUL-terminated and writes
 * each name and value into its own exact-size buffer, so no decoded byte can run past the end
 * of anything.
 */
#include "form.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int
form_hex_value(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/*
 * form_unescape - decodes in[0..n) into out (which has room for n bytes). Returns the decoded
 * length, or -1 for a '%' not followed by two hex digits or for a decoded NUL, which would
 * make the C-string copies lie about their length.
 */
static long
form_unescape(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		int hi, lo;

		if (in[i] == '+') {
			out[o++] = ' ';
		} else if (in[i] == '%') {
			if (n - i < 3 || (hi = form_hex_value(in[i + 1])) < 0 ||
			    (lo = form_hex_value(in[i + 2])) < 0)
				return -1;
			if ((out[o++] = (char)(hi << 4 | lo)) == '\0')
				return -1;
			i += 2;
		} else if (in[i] == '\0') {
			return -1;
		} else {
			out[o++] = (char)in[i];
		}
	}
	out[o] = '\0';
	return (long)o;
}

int
form_add(struct form *f, const char *key, size_t klen, const char *val, size_t vlen)
{
	struct form_pair *p;
	char *k = NULL, *v = NULL;

	if (klen == 0 || memchr(key, '\0', klen) != NULL || memchr(val, '\0', vlen) != NULL ||
	    f->n >= FORM_MAX_PAIRS)
		return -1;
	for (size_t i = 0; i < f->n; i++)
		if (f->pairs[i].klen == klen && memcmp(f->pairs[i].key, key, klen) == 0)
			return -1;
	if (f->n == f->cap) {
		size_t cap = f->cap == 0 ? 32 : f->cap * 2;

		if ((p = realloc(f->pairs, cap * sizeof(*p))) == NULL)
			return -1;
		f->pairs = p;
		f->cap = cap;
	}
	if ((k = malloc(klen + 1)) == NULL || (v = malloc(vlen + 1)) == NULL) {
		free(k);
		return -1;
	}
	memcpy(k, key, klen);
	k[klen] = '\0';
	memcpy(v, val, vlen);
	v[vlen] = '\0';
	f->pairs[f->n++] = (struct form_pair){k, klen, v, vlen};
	return 0;
}

int
form_decode(const uint8_t *body, size_t len, struct form *out, char *err, size_t errlen)
{
	char *buf = NULL;
	size_t pos = 0, idx = 0;
	int rc = -1;

	memset(out, 0, sizeof(*out));
	if (body == NULL && len > 0)
		goto done;
	if (len > FORM_MAX_BODY) {
		snprintf(err, errlen, "form body larger than %d bytes", FORM_MAX_BODY);
		goto done;
	}
	/* One scratch buffer big enough for any decoded segment: decoding never grows data. */
	if ((buf = malloc(len + 1)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	while (len > 0 && pos <= len) {
		const uint8_t *seg = body + pos, *amp, *eq;
		size_t seglen;
		long klen, vlen;

		idx++;
		amp = memchr(seg, '&', len - pos);
		seglen = amp != NULL ? (size_t)(amp - seg) : len - pos;
		if ((eq = memchr(seg, '=', seglen)) == NULL || eq == seg) {
			snprintf(err, errlen, "parameter %zu: %s", idx,
			         seglen == 0  ? "empty"
			         : eq == NULL ? "no '='"
			                      : "empty name");
			goto done;
		}
		if ((klen = form_unescape(seg, (size_t)(eq - seg), buf)) <= 0) {
			snprintf(err, errlen, "parameter %zu: malformed %%-escape in name", idx);
			goto done;
		}
		/* The value is decoded into the same buffer, just after the name's NUL. */
		if ((vlen = form_unescape(eq + 1, seglen - (size_t)(eq - seg) - 1,
		                          buf + klen + 1)) < 0) {
			snprintf(err, errlen, "parameter %zu: malformed %%-escape in value", idx);
			goto done;
		}
		if (form_get(out, buf) != NULL) {
			snprintf(err, errlen, "parameter %zu: duplicated name", idx);
			goto done;
		}
		if (form_add(out, buf, (size_t)klen, buf + klen + 1, (size_t)vlen) != 0) {
			snprintf(err, errlen, "parameter %zu: more than %d parameters or no memory",
			         idx, FORM_MAX_PAIRS);
			goto done;
		}
		if (amp == NULL)
			break;
		pos += seglen + 1;
		if (pos == len) {
			snprintf(err, errlen, "parameter %zu: empty", idx + 1);
			goto done;
		}
	}
	rc = 0;
done:
	free(buf);
	return rc;
}

const struct form_pair *
form_get(const struct form *f, const char *key)
{
	size_t klen = strlen(key);

	for (size_t i = 0; i < f->n; i++)
		if (f->pairs[i].klen == klen && memcmp(f->pairs[i].key, key, klen) == 0)
			return &f->pairs[i];
	return NULL;
}

void
form_free(struct form *f)
{
	for (size_t i = 0; i < f->n; i++) {
		free(f->pairs[i].key);
		free(f->pairs[i].val);
	}
	free(f->pairs);
	memset(f, 0, sizeof(*f));
}

/* form_escape - writes the encoding of s[0..n) at out, which has room for 3n bytes. */
static size_t
form_escape(const char *s, size_t n, char *out)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '.' || c == '_' || c == '~') {
			out[o++] = (char)c;
		} else if (c == ' ') {
			out[o++] = '+';
		} else {
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		}
	}
	return o;
}

char *
form_encode(const struct form *f)
{
	size_t cap = 1, o = 0;
	char *out;

	for (size_t i = 0; i < f->n; i++)
		cap += 3 * (f->pairs[i].klen + f->pairs[i].vlen) + 2;
	if ((out = malloc(cap)) == NULL)
		return NULL;
	for (size_t i = 0; i < f->n; i++) {
		if (i > 0)
			out[o++] = '&';
		o += form_escape(f->pairs[i].key, f->pairs[i].klen, out + o);
		out[o++] = '=';
		o += form_escape(f->pairs[i].val, f->pairs[i].vlen, out + o);
	}
	out[o] = '\0';
	return out;
}

int
form_utf8_valid(const uint8_t *p, size_t n)
{
	size_t i = 0;

	while (i < n) {
		uint8_t c = p[i];
		uint32_t cp, min;
		size_t need;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			need = 1, cp = c & 0x1F, min = 0x80;
		} else if ((c & 0xF0) == 0xE0) {
			need = 2, cp = c & 0x0F, min = 0x800;
		} else if ((c & 0xF8) == 0xF0) {
			need = 3, cp = c & 0x07, min = 0x10000;
		} else {
			return 0;
		}
		if (n - i - 1 < need)
			return 0;
		for (size_t k = 1; k <= need; k++) {
			if ((p[i + k] & 0xC0) != 0x80)
				return 0;
			cp = cp << 6 | (p[i + k] & 0x3F);
		}
		if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return 0;
		i += need + 1;
	}
	return 1;
}
