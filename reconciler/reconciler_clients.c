/*
 * reconciler_clients - one chan_client per merchant and channel, built from the merchants'
 * API credentials in paycb.conf (wxpay.merchant_key_file and merchant_serial, alipay.
 * app_private_key_file, stripe.api_key_file) and the public keys ingest already uses to
 * verify notifications (WeChat Pay platform keys, Alipay public keys), which here verify the
 * channels' answers. A channel without API credentials has no client: the reconciler makes
 * no calls there.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/crypto.h>

#include "chan_conf.h"
#include "crypto.h"
#include "log.h"
#include "reconciler.h"

static int
load_wx(struct recon_merchant *m, char *err, size_t errlen)
{
	const struct conf_wxpay *w = chan_conf_wx(m->cm);

	if (crypto_load_privkey_file(w->merchant_key_file, &m->wx_key, err, errlen) != 0)
		return -1;
	for (int i = 0; i < w->nkeys && m->nwx_platform < 8; i++) {
		char serial[80] = "";
		EVP_PKEY *k = NULL;

		if (crypto_load_pubkey_file_serial(w->keys[i].file, &k, serial, sizeof(serial), err,
		                                   errlen) != 0)
			return -1;
		snprintf(m->wx_serials[m->nwx_platform], sizeof(m->wx_serials[0]), "%s",
		         w->keys[i].serial[0] != '\0' ? w->keys[i].serial : serial);
		m->wx_platform[m->nwx_platform].id = m->wx_serials[m->nwx_platform];
		m->wx_platform[m->nwx_platform++].pkey = k;
	}
	return 0;
}

static int
load_ali(struct recon_merchant *m, char *err, size_t errlen)
{
	const struct conf_alipay *a = chan_conf_ali(m->cm);

	if (crypto_load_privkey_file(a->app_private_key_file, &m->ali_key, err, errlen) != 0)
		return -1;
	for (int i = 0; i < a->public_key_files.n && m->nali_pub < 8; i++)
		if (crypto_load_pubkey_file(a->public_key_files.v[i], &m->ali_pub[m->nali_pub++],
		                            err, errlen) != 0)
			return -1;
	return 0;
}

static int
load_stripe(struct recon_merchant *m, char *err, size_t errlen)
{
	uint8_t *buf = NULL;
	size_t len = 0;

	if (crypto_read_secret_file(chan_conf_stripe(m->cm)->api_key_file, 4096, &buf, &len, err,
	                            errlen) != 0)
		return -1;
	while (len > 0 && (buf[len - 1] == '\n' || buf[len - 1] == '\r' || buf[len - 1] == ' '))
		buf[--len] = '\0';
	m->stripe_key = (char *)buf;
	return 0;
}

/* set - a string setting that is present and not empty (an empty file setting may be NULL). */
static int
set(const char *s)
{
	return s != NULL && s[0] != '\0';
}

/* client_for - the client of one merchant on one channel, its credentials loaded. */
static int
client_for(const struct conf *cf, struct recon_merchant *m, enum chan_id ch, char *err,
           size_t errlen)
{
	const struct conf_merchant *cm = m->cm;
	const struct conf_wxpay *w = chan_conf_wx(cm);
	const struct conf_alipay *a = chan_conf_ali(cm);
	const struct conf_stripe *st = chan_conf_stripe(cm);
	struct chan_client_conf cc = {
	    .channel = ch,
	    .merchant_id = cm->id,
	    .ca_file = set(cf->reconciler.ca_file) ? cf->reconciler.ca_file : NULL,
	    .proxy = set(cf->reconciler.proxy) ? cf->reconciler.proxy : NULL,
	    .connect_timeout_ms = cf->reconciler.connect_timeout_ms,
	    .total_timeout_ms = cf->reconciler.total_timeout_ms,
	    .allow_http = cf->reconciler.allow_http,
	    .rate_per_s = (double)cf->reconciler.rate_per_s,
	};
	char e2[256];

	switch (ch) {
	case CHAN_WXPAY:
		if (load_wx(m, err, errlen) != 0)
			return -1;
		cc.base_url = w->api_base_url;
		cc.wx = (struct chan_wx_cred){w->mchid,       m->wx_key,       w->merchant_serial,
		                              m->wx_platform, m->nwx_platform, 0};
		break;
	case CHAN_ALIPAY:
		if (load_ali(m, err, errlen) != 0)
			return -1;
		cc.base_url = a->api_base_url;
		cc.ali = (struct chan_ali_cred){a->app_id, m->ali_key, m->ali_pub, m->nali_pub};
		break;
	case CHAN_STRIPE:
		if (load_stripe(m, err, errlen) != 0)
			return -1;
		cc.base_url = st->api_base_url;
		cc.stripe = (struct chan_stripe_cred){m->stripe_key, NULL, st->order_metadata_key};
		break;
	}
	if (chan_client_new(&cc, &m->cl[ch - 1], e2, sizeof(e2)) != 0) {
		snprintf(err, errlen, "merchant %s %s client: %s", cm->id, chan_id_name(ch), e2);
		return -1;
	}
	return 0;
}

int
recon_clients_open(struct reconciler *r, char *err, size_t errlen)
{
	const struct conf *cf = r->cf;

	if ((r->m = calloc((size_t)cf->nmerchants + 1, sizeof(*r->m))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	r->nm = cf->nmerchants;
	for (int i = 0; i < cf->nmerchants; i++) {
		const struct conf_merchant *cm = &cf->merchants[i];
		struct recon_merchant *m = &r->m[i];

		m->cm = cm;
		if (chan_conf_wx(cm) != NULL && set(chan_conf_wx(cm)->merchant_key_file) &&
		    client_for(cf, m, CHAN_WXPAY, err, errlen) != 0)
			return -1;
		if (chan_conf_ali(cm) != NULL && set(chan_conf_ali(cm)->app_private_key_file) &&
		    client_for(cf, m, CHAN_ALIPAY, err, errlen) != 0)
			return -1;
		if (chan_conf_stripe(cm) != NULL && set(chan_conf_stripe(cm)->api_key_file) &&
		    client_for(cf, m, CHAN_STRIPE, err, errlen) != 0)
			return -1;
		log_info(NULL, "event=merchant_clients merchant=%s wxpay=%d alipay=%d stripe=%d",
		         cm->id, m->cl[0] != NULL, m->cl[1] != NULL, m->cl[2] != NULL);
	}
	return 0;
}

void
recon_clients_close(struct reconciler *r)
{
	for (int i = 0; i < r->nm; i++) {
		struct recon_merchant *m = &r->m[i];

		for (int c = 0; c < RECON_NCH; c++)
			chan_client_free(m->cl[c]);
		EVP_PKEY_free(m->wx_key);
		EVP_PKEY_free(m->ali_key);
		for (int k = 0; k < m->nwx_platform; k++)
			EVP_PKEY_free(m->wx_platform[k].pkey);
		for (int k = 0; k < m->nali_pub; k++)
			EVP_PKEY_free(m->ali_pub[k]);
		if (m->stripe_key != NULL) {
			OPENSSL_cleanse(m->stripe_key, strlen(m->stripe_key));
			free(m->stripe_key);
		}
	}
	free(r->m);
	r->m = NULL;
	r->nm = 0;
}

struct recon_merchant *
recon_merchant_find(struct reconciler *r, const char *merchant)
{
	for (int i = 0; i < r->nm; i++)
		if (strcmp(r->m[i].cm->id, merchant) == 0)
			return &r->m[i];
	return NULL;
}

struct chan_client *
recon_client(struct reconciler *r, const char *merchant, const char *channel)
{
	struct recon_merchant *m = recon_merchant_find(r, merchant);

	for (int c = 0; m != NULL && c < RECON_NCH; c++)
		if (strcmp(chan_id_name((enum chan_id)(c + 1)), channel) == 0)
			return m->cl[c];
	return NULL;
}
