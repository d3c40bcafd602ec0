/*
 * chan_notify_keys - loading of per-merchant key material from files (the helpers the channel
 * parsers share are in chan_notify.c).
 *
 * Key and secret files are read with a size bound and never echoed: error messages name the
 * file and the problem only. Secrets are wiped from memory when freed.
 */
#include "chan_notify.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <jansson.h>
#include <openssl/crypto.h>

#include "crypto.h"
#include "form.h"
#include "money.h"

#define KEYS_SECRET_FILE_MAX 1024

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
notify_keys_wx_add(struct wx_merchant *m, const char *path, const char *key_id, char *err,
                   size_t errlen)
{
	char serial[CRYPTO_SERIAL_MAX];
	EVP_PKEY *pkey = NULL;
	const char *id;
	int rc = -1;

	if (m->nkeys >= (int)(sizeof(m->keys) / sizeof(m->keys[0]))) {
		snprintf(err, errlen, "%s: more than %zu WeChat Pay keys", path,
		         sizeof(m->keys) / sizeof(m->keys[0]));
		return -1;
	}
	if (crypto_load_pubkey_file_serial(path, &pkey, serial, sizeof(serial), err, errlen) != 0)
		return -1;
	if (serial[0] != '\0') {
		/* A certificate names itself; a configured id is only a cross-check. */
		if (key_id != NULL && key_id[0] != '\0' && !crypto_serial_equal(key_id, serial)) {
			snprintf(err, errlen, "%s: certificate serial %s is not the configured %s",
			         path, serial, key_id);
			goto done;
		}
		id = serial;
	} else {
		if (key_id == NULL || !keys_pub_key_id(key_id) ||
		    strlen(key_id) >= sizeof(serial)) {
			snprintf(err, errlen, "%s: a public key needs its id, PUB_KEY_ID_<digits>",
			         path);
			goto done;
		}
		id = key_id;
	}
	for (int i = 0; i < m->nkeys; i++) {
		if (crypto_serial_equal(m->keys[i].serial, id)) {
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

/* keys_apiv3_read - a 32-byte APIv3 key file into key (the caller's 32 bytes). */
static int
keys_apiv3_read(const char *path, uint8_t key[32], size_t *keylen, char *err, size_t errlen)
{
	uint8_t *buf;
	size_t len, n;

	if (crypto_read_secret_file(path, KEYS_SECRET_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	n = keys_trim_newline(buf, len);
	/* AEAD_AES_256_GCM needs exactly 32 key bytes; a shorter key is a config mistake. */
	if (n != 32) {
		snprintf(err, errlen, "%s: APIv3 key must be exactly 32 bytes, found %zu", path, n);
		OPENSSL_clear_free(buf, len);
		return -1;
	}
	memcpy(key, buf, n);
	*keylen = n;
	OPENSSL_clear_free(buf, len);
	return 0;
}

int
notify_keys_wx_apiv3_load(struct wx_merchant *m, const char *path, char *err, size_t errlen)
{
	return keys_apiv3_read(path, m->apiv3_key, &m->apiv3_key_len, err, errlen);
}

int
notify_keys_wx_apiv3_previous(struct wx_merchant *m, const char *path, char *err, size_t errlen)
{
	if (keys_apiv3_read(path, m->apiv3_prev, &m->apiv3_prev_len, err, errlen) != 0)
		return -1;
	/* The same key twice is a rotation not begun: harmless, but almost surely a typo. */
	if (m->apiv3_key_len == m->apiv3_prev_len &&
	    CRYPTO_memcmp(m->apiv3_key, m->apiv3_prev, m->apiv3_prev_len) == 0) {
		snprintf(err, errlen, "%s: the previous APIv3 key is the current one", path);
		OPENSSL_cleanse(m->apiv3_prev, sizeof(m->apiv3_prev));
		m->apiv3_prev_len = 0;
		return -1;
	}
	return 0;
}

int
notify_keys_ali_add(struct ali_merchant *m, const char *path, char *err, size_t errlen)
{
	EVP_PKEY *pkey;

	if (m->nkeys >= (int)(sizeof(m->keys) / sizeof(m->keys[0]))) {
		snprintf(err, errlen, "%s: more than %zu Alipay public keys", path,
		         sizeof(m->keys) / sizeof(m->keys[0]));
		return -1;
	}
	if (crypto_load_pubkey_file(path, &pkey, err, errlen) != 0)
		return -1;
	m->keys[m->nkeys++] = pkey;
	return 0;
}

int
notify_keys_stripe_add(struct stripe_merchant *m, const char *path, char *err, size_t errlen)
{
	uint8_t *buf, *copy;
	size_t len, n;
	int rc = -1;

	if (m->nsecrets >= (int)(sizeof(m->secrets) / sizeof(m->secrets[0]))) {
		snprintf(err, errlen, "%s: more than %zu Stripe secrets", path,
		         sizeof(m->secrets) / sizeof(m->secrets[0]));
		return -1;
	}
	if (crypto_read_secret_file(path, KEYS_SECRET_FILE_MAX, &buf, &len, err, errlen) != 0)
		return -1;
	n = keys_trim_newline(buf, len);
	if (n == 0) {
		snprintf(err, errlen, "%s: empty Stripe secret", path);
		goto done;
	}
	for (size_t i = 0; i < n; i++) {
		if (buf[i] <= ' ' || buf[i] == 0x7f) {
			snprintf(err, errlen,
			         "%s: Stripe secret contains whitespace or control characters",
			         path);
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
notify_keys_wx_free(struct wx_merchant *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < m->nkeys; i++)
		EVP_PKEY_free(m->keys[i].pkey);
	/* OPENSSL_cleanse zeroes in a way the compiler may not drop: the APIv3 key is secret. */
	OPENSSL_cleanse(m, sizeof(*m));
}

void
notify_keys_ali_free(struct ali_merchant *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < m->nkeys; i++)
		EVP_PKEY_free(m->keys[i]);
	memset(m, 0, sizeof(*m));
}

void
notify_keys_stripe_free(struct stripe_merchant *m)
{
	if (m == NULL)
		return;
	for (int i = 0; i < m->nsecrets; i++)
		OPENSSL_clear_free(m->secrets[i].bytes, m->secrets[i].len);
	memset(m, 0, sizeof(*m));
}
