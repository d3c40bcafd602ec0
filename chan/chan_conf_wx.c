/*
 * chan_conf_wx - WeChat Pay APIv3's merchant settings (struct conf_wxpay, chan/chan_conf.h): the
 * table of the "wxpay" group of a merchant in paycb.conf, the checks of those settings taken
 * together, and the secret files among them.
 */
#include "chan_conf.h"

#include <stdio.h>

_Static_assert(sizeof(struct conf_wxpay) <= CONF_CHAN_BYTES,
               "struct conf_wxpay too large for a slot");

/* The table is data laid out by hand, one setting per entry with its documentation. */
/* clang-format off */
#define WK(f) offsetof(struct conf_wx_key, f)
static const struct cfg_setting wx_key_tab[] = {
	CFG_SET_STR("serial", "", WK(serial), 0, 0,
	    "Wechatpay-Serial this key answers to; for a certificate, default its serial; for a "
	    "public key, its PUB_KEY_ID_..."),
	CFG_SET_STR("file", NULL, WK(file), CFGF_FILE | CFGF_NONEMPTY, PROG_INGEST | PROG_RECONCILER,
	    "platform certificate or WeChat Pay public key (PEM)"),
	CFG_SET_END};

#define WX(f) offsetof(struct conf_wxpay, f)
static const struct cfg_setting wx_tab[] = {
	{"mchid", CFG_STR, NULL, 0, 32, WX(mchid), CFGF_NONEMPTY | CFGF_NAME, 0,
	 NULL, 0, 0,
	 "the merchant's WeChat Pay mchid (in partner mode its sub-merchant number); a "
	 "notification naming another mchid is unroutable"},
	{"sp_mchid", CFG_STR, "", 0, 32, WX(sp_mchid), CFGF_NAME, 0, NULL, 0, 0,
	 "partner mode: the service provider's mchid; a notification carrying sp_mchid is "
	 "applied only when it is this one and its sub_mchid is mchid or on sub_mchids; empty "
	 "= partner notifications are unroutable"},
	{"sub_mchids", CFG_STR_LIST, "", 0, 32, WX(sub_mchids), CFGF_NAME, 0,
	 NULL, 0, 0, "partner mode: further sub-merchant numbers served by this merchant"},
	{"appids", CFG_STR_LIST, "", 0, 32, WX(appids), CFGF_NAME, 0, NULL, 0,
	 0,
	 "allowed app ids: when not empty, a notification's appid (partner mode: sub_appid, else "
	 "sp_appid) must be on it; refunds carry none"},
	CFG_SET_STR("apiv3_key_file", NULL, WX(apiv3_key_file), CFGF_FILE, PROG_INGEST,
	    "file holding the 32-byte APIv3 key"),
	CFG_SET_STR("apiv3_previous_key_file", "", WX(apiv3_previous_key_file),
	    CFGF_FILE, PROG_INGEST,
	    "during an APIv3 key rotation only: the file of the key being replaced, tried when "
	    "the current key does not open a resource (docs/operations.md, Rotating keys); "
	    "empty = none"),
	{"keys", CFG_GROUP_LIST, NULL, 0, 0, WX(keys), CFGF_NONEMPTY, 0,
	 wx_key_tab, sizeof(struct conf_wx_key), WX(nkeys),
	 "platform certificates and public keys; several at once for rotation"},
	CFG_SET_STR("merchant_key_file", "", WX(merchant_key_file), CFGF_FILE,
	    PROG_RECONCILER,
	    "the merchant API private key (apiclient_key.pem) that signs paycb's calls; empty = "
	    "the reconciler makes no WeChat Pay calls for this merchant"),
	CFG_SET_STR("merchant_serial", "", WX(merchant_serial), 0, 0,
	    "the serial of the merchant API certificate (serial_no in the Authorization header)"),
	CFG_SET_STR("api_base_url", "https://api.mch.weixin.qq.com", WX(api_base_url),
	    CFGF_NONEMPTY, 0, "WeChat Pay API base URL, without a trailing slash"),
	CFG_SET_END};
/* clang-format on */

/* Partner mode's sub-merchants mean nothing without the service provider they belong to. */
static int
wx_conf_check(const void *conf, const char *merchant, char *err, size_t errlen)
{
	const struct conf_wxpay *w = conf;

	if (w->sub_mchids.n > 0 && w->sp_mchid[0] == '\0') {
		snprintf(err, errlen, "merchant '%s': wxpay.sub_mchids needs wxpay.sp_mchid",
		         merchant);
		return -1;
	}
	return 0;
}

/* ingest reads the APIv3 keys, current and previous. */
static int
wx_conf_check_secrets(const void *conf, unsigned prog, char *err, size_t errlen)
{
	const struct conf_wxpay *w = conf;

	if ((prog & PROG_INGEST) == 0)
		return 0;
	if (w->apiv3_key_file && cfg_secret_file_ok(w->apiv3_key_file, err, errlen) != 0)
		return -1;
	if (w->apiv3_previous_key_file && w->apiv3_previous_key_file[0] != '\0' &&
	    cfg_secret_file_ok(w->apiv3_previous_key_file, err, errlen) != 0)
		return -1;
	return 0;
}

const struct conf_chan_decl chan_conf_wx_decl = {
    .name = "wxpay",
    .doc = "WeChat Pay APIv3 (optional)",
    .tab = wx_tab,
    .size = sizeof(struct conf_wxpay),
    .check = wx_conf_check,
    .check_secrets = wx_conf_check_secrets,
};
