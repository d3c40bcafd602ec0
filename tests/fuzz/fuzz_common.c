/*
 * fuzz_common - shared setup of the fuzz harnesses (see fuzz_common.h).
 */
#include "fuzz_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testkeys.h"

struct fuzz_keys *
fuzz_keys(void)
{
	static struct fuzz_keys k;
	static int done;
	/* Writable: struct stripe_secret owns (and clears) its bytes in the daemons. */
	static char secret[] = "whsec_fuzz_secret";

	if (done)
		return &k;
	k.priv = tk_rsa_new();
	if (k.priv == NULL || EVP_PKEY_up_ref(k.priv) != 1 || EVP_PKEY_up_ref(k.priv) != 1)
		abort();
	k.serial = "5A1B2C3D4E5F60718293A4B5C6D7E8F901234567";
	k.secret = secret;
	snprintf(k.wx.mchid, sizeof(k.wx.mchid), "1900000001");
	memcpy(k.wx.apiv3_key, "abcdefghijklmnopqrstuvwxyz012345", 32);
	k.wx.apiv3_key_len = 32;
	snprintf(k.wx.keys[0].serial, sizeof(k.wx.keys[0].serial), "%s", k.serial);
	k.wx.keys[0].pkey = k.priv;
	k.wx.nkeys = 1;
	k.wx.tolerance_s = 300;
	snprintf(k.ali.app_id, sizeof(k.ali.app_id), "2021000000000001");
	k.ali.keys[0] = k.priv;
	k.ali.nkeys = 1;
	k.stripe.secrets[0].bytes = (uint8_t *)secret;
	k.stripe.secrets[0].len = strlen(k.secret);
	k.stripe.nsecrets = 1;
	k.stripe.tolerance_s = 300;
	snprintf(k.stripe.order_key, sizeof(k.stripe.order_key), "order_id");
	done = 1;
	return &k;
}

size_t
fuzz_split(const uint8_t *data, size_t len, struct http_hdr *hdrs, size_t max, char *buf,
           size_t buflen, const uint8_t **body, size_t *blen)
{
	size_t i = 0, used = 0, n = 0;

	while (i < len) {
		size_t e = i;
		while (e < len && data[e] != '\n')
			e++;
		if (e == i) {
			i = e + 1;
			break;
		}
		const uint8_t *colon = memchr(data + i, ':', e - i);
		if (colon && n < max && used + (e - i) + 2 < buflen) {
			size_t nl = (size_t)(colon - (data + i)), vl = e - i - nl - 1;
			hdrs[n].name = buf + used;
			memcpy(buf + used, data + i, nl);
			used += nl;
			buf[used++] = '\0';
			hdrs[n].value = buf + used;
			memcpy(buf + used, colon + 1, vl);
			used += vl;
			buf[used++] = '\0';
			n++;
		}
		i = e + 1;
	}
	*body = data + (i < len ? i : len);
	*blen = i < len ? len - i : 0;
	return n;
}
