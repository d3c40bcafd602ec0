/*
 * form - application/x-www-form-urlencoded decoding and encoding, and UTF-8 validation.
 *
 * Alipay signs the decoded parameter bytes, so the decoder here is the one place that turns
 * the raw body into those bytes: it decodes exactly once ('+' is a space, %XX is a byte) and
 * rejects everything ambiguous (malformed escapes, %00, empty or duplicated names) instead of
 * guessing. form_utf8_valid() is shared with the JSON channels, which must reject non-UTF-8.
 */
#ifndef PAYCB_FORM_H
#define PAYCB_FORM_H

#include <stddef.h>
#include <stdint.h>

/* Real notifications carry about 30 parameters; far more is an attack on the verifier. */
#define FORM_MAX_PAIRS 256
#define FORM_MAX_BODY  (256 * 1024)

/* One parameter as decoded bytes. Both are NUL-terminated copies and contain no NUL. */
struct form_pair {
	char *key;
	size_t klen;
	char *val;
	size_t vlen;
};

struct form {
	struct form_pair *pairs; /* in the order received */
	size_t n;
	size_t cap;
};

/*
 * Decodes body into *out (initialised here; form_free() it, also after an error). Each
 * '&'-separated segment must be name=value with a non-empty name; the value may be empty and
 * may contain further '='. Returns 0, or -1 with err naming the problem and the parameter's
 * position, never its content.
 */
int form_decode(const uint8_t *body, size_t len, struct form *out, char *err, size_t errlen);

/* Appends a copy of a parameter; -1 if the name is empty or already present, a byte is NUL,
 * the form is full, or memory ran out. Starts from a zeroed struct form. */
int form_add(struct form *f, const char *key, size_t klen, const char *val, size_t vlen);

/* The value of the hex digit c (either case), or -1; the crypto codecs use it too. */
int form_hex_value(unsigned char c);

/* The parameter named key, or NULL. */
const struct form_pair *form_get(const struct form *f, const char *key);

void form_free(struct form *f);

/*
 * Encodes the parameters in order as name=value joined by '&': letters, digits and "-._~"
 * stay, a space becomes '+', every other byte becomes %XX (upper-case hex). Returns a new
 * string (free it) or NULL.
 */
char *form_encode(const struct form *f);

/* 1 if the bytes are well-formed UTF-8 (no overlongs, surrogates or code points past
 * U+10FFFF), else 0. */
int form_utf8_valid(const uint8_t *p, size_t n);

#endif
