/*
 * ingest_merchants - loads every merchant's channel keys once at start-up, from the files the
 * configuration names, so a missing or malformed key stops the daemon before it serves.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"

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
ingest_merchant_load(struct ingest *in, struct ingest_merchant *im, char *err, size_t errlen)
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
		im->wx.tolerance_s = (int)in->cf->ingest.timestamp_tolerance_s;
		if (keys_wx_apiv3_load(&im->wx, cm->wxpay.apiv3_key_file, e, sizeof(e)) != 0)
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
		im->stripe.tolerance_s = (int)in->cf->ingest.timestamp_tolerance_s;
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

int
ingest_merchants_load(struct ingest *in, char *err, size_t errlen)
{
	in->nmerchants = in->cf->nmerchants;
	if ((in->merchants = calloc((size_t)(in->nmerchants ? in->nmerchants : 1),
	                            sizeof(*in->merchants))) == NULL) {
		snprintf(err, errlen, "out of memory");
		return -1;
	}
	for (int i = 0; i < in->nmerchants; i++) {
		in->merchants[i].cm = &in->cf->merchants[i];
		if (ingest_merchant_load(in, &in->merchants[i], err, errlen) != 0)
			return -1;
	}
	return 0;
}

void
ingest_merchants_free(struct ingest *in)
{
	for (int i = 0; i < in->nmerchants && in->merchants; i++) {
		keys_wx_free(&in->merchants[i].wx);
		keys_ali_free(&in->merchants[i].ali);
		keys_stripe_free(&in->merchants[i].stripe);
	}
	free(in->merchants);
	in->merchants = NULL;
}

const struct ingest_merchant *
ingest_merchant_find(const struct ingest *in, const char *id, enum channel ch)
{
	for (int i = 0; i < in->nmerchants; i++) {
		const struct conf_merchant *cm = in->merchants[i].cm;
		if (strcmp(cm->id, id) != 0)
			continue;
		if ((ch == CH_WXPAY && cm->has_wxpay) || (ch == CH_ALIPAY && cm->has_alipay) ||
		    (ch == CH_STRIPE && cm->has_stripe))
			return &in->merchants[i];
		return NULL;
	}
	return NULL;
}
