/*
 * chan_conf_ali - Alipay's merchant settings (struct conf_alipay, chan/chan_conf.h): the table of
 * the "alipay" group of a merchant in paycb.conf (its secret files are private keys, which the key
 * loaders check).
 */
#include "chan_conf.h"

_Static_assert(sizeof(struct conf_alipay) <= CONF_CHAN_BYTES,
               "struct conf_alipay too large for a slot");

/* The table is data laid out by hand, one setting per entry with its documentation. */
/* clang-format off */
#define AL(f) offsetof(struct conf_alipay, f)
static const struct cfg_setting ali_tab[] = {
	{"app_id", CFG_STR, NULL, 0, 32, AL(app_id), CFGF_NONEMPTY, 0, NULL,
	 0, 0, "the merchant's Alipay app_id; a notification for another app is unroutable"},
	{"seller_id", CFG_STR, "", 0, 32, AL(seller_id), CFGF_NAME, 0, NULL, 0,
	 0,
	 "the merchant's Alipay seller_id (2088...); when set, a notification naming another "
	 "seller, or none, is unroutable"},
	{"public_key_files", CFG_STR_LIST, NULL, 0, 0,
	 AL(public_key_files), CFGF_FILE | CFGF_NONEMPTY,
	 PROG_INGEST | PROG_RECONCILER, NULL, 0,
	 0, "Alipay public keys or certificates (PEM or bare base64); several for rotation"},
	CFG_SET_STR("app_private_key_file", "", AL(app_private_key_file), CFGF_FILE,
	    PROG_RECONCILER,
	    "the app private key that signs paycb's calls; empty = the reconciler makes no "
	    "Alipay calls for this merchant"),
	CFG_SET_STR("api_base_url", "https://openapi.alipay.com/gateway.do",
	    AL(api_base_url), CFGF_NONEMPTY, 0, "Alipay OpenAPI gateway URL"),
	CFG_SET_END};
/* clang-format on */

const struct conf_chan_decl chan_conf_ali_decl = {
    .name = "alipay",
    .doc = "Alipay (optional)",
    .tab = ali_tab,
    .size = sizeof(struct conf_alipay),
};
