/*
 * ingest_merchants - every merchant's channel keys, loaded from the files the configuration
 * names into one immutable key set: at start-up, where a missing or malformed key stops the
 * daemon before it serves, and on every reload (SIGHUP), where it keeps the running set.
 *
 * A request takes a reference to the set serving when its headers arrive and gives it back
 * when its connection completes, so it finishes with the keys it started with; a reload swaps
 * the pointer under a mutex, and the last request holding the old set frees it (its keys
 * wiped, and the configuration it was read from).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "log.h"

const char *
channel_name(enum channel ch)
{
	static const char *const n[] = {"wxpay", "alipay", "stripe"};

	return (unsigned)ch < CH_COUNT ? n[ch] : "unknown";
}

int
channel_parse(const char *s, enum channel *out)
{
	for (int i = 0; i < CH_COUNT; i++)
		if (strcmp(s, channel_name((enum channel)i)) == 0) {
			*out = (enum channel)i;
			return 0;
		}
	return -1;
}

/*
 * ingest_list_copy - a configured string list into a verifier's fixed table of entries of cap
 * bytes each (the configuration bounds both the count and the length).
 */
static void
ingest_list_copy(char *dst, size_t cap, int *n, const struct cfg_strs *src)
{
	*n = 0;
	for (int i = 0; i < src->n && i < NOTIFY_LIST_MAX; i++)
		snprintf(dst + (size_t)(*n)++ * cap, cap, "%s", src->v[i]);
}

static int
ingest_merchant_load(const struct conf *cf, struct ingest_merchant *im, char *err, size_t errlen)
{
	const struct conf_merchant *cm = im->cm;
	char e[512];

	if (cm->has_wxpay) {
		snprintf(im->wx.mchid, sizeof(im->wx.mchid), "%s", cm->wxpay.mchid);
		snprintf(im->wx.sp_mchid, sizeof(im->wx.sp_mchid), "%s", cm->wxpay.sp_mchid);
		ingest_list_copy(im->wx.sub_mchids[0], sizeof(im->wx.sub_mchids[0]),
		                 &im->wx.nsub_mchids, &cm->wxpay.sub_mchids);
		ingest_list_copy(im->wx.appids[0], sizeof(im->wx.appids[0]), &im->wx.nappids,
		                 &cm->wxpay.appids);
		im->wx.tolerance_s = (int)cf->ingest.timestamp_tolerance_s;
		if (keys_wx_apiv3_load(&im->wx, cm->wxpay.apiv3_key_file, e, sizeof(e)) != 0)
			goto fail;
		if (cm->wxpay.apiv3_previous_key_file != NULL &&
		    cm->wxpay.apiv3_previous_key_file[0] != '\0' &&
		    keys_wx_apiv3_previous(&im->wx, cm->wxpay.apiv3_previous_key_file, e,
		                           sizeof(e)) != 0)
			goto fail;
		for (int k = 0; k < cm->wxpay.nkeys; k++) {
			const char *id = cm->wxpay.keys[k].serial;
			if (keys_wx_add(&im->wx, cm->wxpay.keys[k].file, id[0] ? id : NULL, e,
			                sizeof(e)) != 0)
				goto fail;
		}
	}
	if (cm->has_alipay) {
		snprintf(im->ali.app_id, sizeof(im->ali.app_id), "%s", cm->alipay.app_id);
		snprintf(im->ali.seller_id, sizeof(im->ali.seller_id), "%s", cm->alipay.seller_id);
		for (int k = 0; k < cm->alipay.public_key_files.n; k++)
			if (keys_ali_add(&im->ali, cm->alipay.public_key_files.v[k], e,
			                 sizeof(e)) != 0)
				goto fail;
	}
	if (cm->has_stripe) {
		im->stripe.tolerance_s = (int)cf->ingest.timestamp_tolerance_s;
		snprintf(im->stripe.order_key, sizeof(im->stripe.order_key), "%s",
		         cm->stripe.order_metadata_key);
		ingest_list_copy(im->stripe.accounts[0], sizeof(im->stripe.accounts[0]),
		                 &im->stripe.naccounts, &cm->stripe.connect_accounts);
		im->stripe.test_mode = cm->stripe.test_mode;
		for (int k = 0; k < cm->stripe.secret_files.n; k++)
			if (keys_stripe_add(&im->stripe, cm->stripe.secret_files.v[k], e,
			                    sizeof(e)) != 0)
				goto fail;
	}
	return 0;
fail:
	snprintf(err, errlen, "merchant '%s': %s", cm->id, e);
	return -1;
}

/* ingest_keyset_log - one line per merchant: what the set serving from now on holds. */
static void
ingest_keyset_log(const struct ingest_keyset *ks)
{
	for (int i = 0; i < ks->nmerchants; i++) {
		const struct ingest_merchant *im = &ks->merchants[i];

		log_info(NULL,
		         "event=keys_loaded merchant=%s wxpay_keys=%d apiv3_keys=%d alipay_keys=%d "
		         "stripe_secrets=%d",
		         im->cm->id, im->wx.nkeys,
		         (im->wx.apiv3_key_len != 0) + (im->wx.apiv3_prev_len != 0), im->ali.nkeys,
		         im->stripe.nsecrets);
	}
}

static void
ingest_keyset_free(struct ingest_keyset *ks)
{
	for (int i = 0; i < ks->nmerchants && ks->merchants; i++) {
		keys_wx_free(&ks->merchants[i].wx);
		keys_ali_free(&ks->merchants[i].ali);
		keys_stripe_free(&ks->merchants[i].stripe);
	}
	free(ks->merchants);
	if (ks->owned != NULL) {
		conf_free(ks->owned);
		free(ks->owned);
	}
	free(ks);
}

struct ingest_keyset *
ingest_keyset_build(const struct conf *cf, char *err, size_t errlen)
{
	struct ingest_keyset *ks = calloc(1, sizeof(*ks));

	if (ks == NULL || (ks->merchants = calloc((size_t)(cf->nmerchants ? cf->nmerchants : 1),
	                                          sizeof(*ks->merchants))) == NULL) {
		snprintf(err, errlen, "out of memory");
		free(ks);
		return NULL;
	}
	atomic_init(&ks->refs, 1);
	ks->nmerchants = cf->nmerchants;
	for (int i = 0; i < ks->nmerchants; i++) {
		ks->merchants[i].cm = &cf->merchants[i];
		if (ingest_merchant_load(cf, &ks->merchants[i], err, errlen) != 0) {
			ingest_keyset_free(ks);
			return NULL;
		}
	}
	ingest_keyset_log(ks);
	return ks;
}

struct ingest_keyset *
ingest_keyset_get(struct ingest *in)
{
	struct ingest_keyset *ks;

	pthread_mutex_lock(&in->keys_mu);
	ks = in->keys;
	atomic_fetch_add(&ks->refs, 1);
	pthread_mutex_unlock(&in->keys_mu);
	return ks;
}

void
ingest_keyset_put(struct ingest_keyset *ks)
{
	if (ks != NULL && atomic_fetch_sub(&ks->refs, 1) == 1)
		ingest_keyset_free(ks);
}

void
ingest_keyset_swap(struct ingest *in, struct ingest_keyset *ks)
{
	struct ingest_keyset *old;

	pthread_mutex_lock(&in->keys_mu);
	old = in->keys;
	in->keys = ks;
	pthread_mutex_unlock(&in->keys_mu);
	ingest_keyset_put(old);
}

const struct ingest_merchant *
ingest_merchant_find(const struct ingest_keyset *ks, const char *id, enum channel ch)
{
	for (int i = 0; i < ks->nmerchants; i++) {
		const struct conf_merchant *cm = ks->merchants[i].cm;
		if (strcmp(cm->id, id) != 0)
			continue;
		if ((ch == CH_WXPAY && cm->has_wxpay) || (ch == CH_ALIPAY && cm->has_alipay) ||
		    (ch == CH_STRIPE && cm->has_stripe))
			return &ks->merchants[i];
		return NULL;
	}
	return NULL;
}
