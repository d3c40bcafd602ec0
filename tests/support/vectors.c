/*
 * vectors - loading files from the test-vector directory (tests/vectors/inbound, copied
 * into the tree with its provenance; PAYCB_VECTORS names another).
 *
 * Vector files are read byte for byte: the signatures in them cover exact bytes, so nothing
 * here trims, re-encodes or normalises line endings.
 */
#include "vectors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crypto.h"

#define VEC_FILE_MAX (1024 * 1024)

const char *
vec_dir(void)
{
	const char *d = getenv("PAYCB_VECTORS");

	return d != NULL && d[0] != '\0' ? d : "tests/vectors/inbound";
}

uint8_t *
vec_read(const char *rel, size_t *len)
{
	char path[1024], err[256];
	uint8_t *buf;

	if (snprintf(path, sizeof(path), "%s/%s", vec_dir(), rel) >= (int)sizeof(path))
		return NULL;
	if (crypto_read_file(path, VEC_FILE_MAX, &buf, len, err, sizeof(err)) != 0)
		return NULL;
	return buf;
}

json_t *
vec_json(const char *rel)
{
	json_t *j;
	uint8_t *buf;
	size_t len;

	if ((buf = vec_read(rel, &len)) == NULL)
		return NULL;
	j = json_loadb((const char *)buf, len, JSON_REJECT_DUPLICATES, NULL);
	free(buf);
	return j;
}

EVP_PKEY *
vec_pubkey(const char *rel, char *serial, size_t seriallen)
{
	char file[512], err[256];
	EVP_PKEY *pkey = NULL;
	uint8_t *buf;
	size_t len, n = strcspn(rel, " \t");

	if (n >= sizeof(file))
		return NULL;
	memcpy(file, rel, n);
	file[n] = '\0';
	if ((buf = vec_read(file, &len)) == NULL)
		return NULL;
	if (crypto_load_pubkey_mem(buf, len, &pkey, serial, seriallen, err, sizeof(err)) != 0)
		pkey = NULL;
	free(buf);
	return pkey;
}

const char *
vec_str(const json_t *obj, const char *key)
{
	return json_string_value(json_object_get(obj, key));
}
