/*
 * chan_conf - the merchant settings of the channels paycb has always had, as their own code
 * and the programs that call them (the reconciler, paycbctl, the simulator, the tests) read
 * them: one struct per channel (chan_conf_wx.c, chan_conf_ali.c, chan_conf_stripe.c define
 * the settings tables that fill them), and a typed accessor per channel that is NULL when the
 * merchant does not use it.
 *
 * The configuration itself (common/conf.c) knows no channel: chan_conf_use hands it every
 * channel of chan_notify_table, and each channel's struct chan_notify_ops names its
 * declaration (struct conf_chan_decl). A new channel declares its settings in its own file
 * and needs nothing here.
 */
#ifndef PAYCB_CHAN_CONF_H
#define PAYCB_CHAN_CONF_H

#include "conf.h"

struct conf_wx_key {
	char *serial; /* optional for certificates (taken from the cert), required for keys */
	char *file;
};

struct conf_wxpay {
	char *mchid;
	char *sp_mchid;             /* "" = no partner mode */
	struct cfg_strs sub_mchids; /* partner mode: sub-merchants besides mchid */
	struct cfg_strs appids;     /* empty = app ids are not checked */
	char *apiv3_key_file;
	char *apiv3_previous_key_file; /* "" = no rotation in progress */
	struct conf_wx_key *keys;
	int nkeys;
	char *merchant_key_file; /* "" = the reconciler makes no WeChat Pay calls */
	char *merchant_serial;
	char *api_base_url;
};

struct conf_alipay {
	char *app_id;
	char *seller_id; /* "" = not checked */
	struct cfg_strs public_key_files;
	char *app_private_key_file; /* "" = the reconciler makes no Alipay calls */
	char *api_base_url;
};

struct conf_stripe {
	struct cfg_strs secret_files;
	char *order_metadata_key;
	struct cfg_strs connect_accounts; /* Connect accounts whose events are applied */
	int test_mode;                    /* apply livemode:false events */
	char *api_key_file;               /* "" = the reconciler makes no Stripe calls */
	char *api_base_url;
};

extern const struct conf_chan_decl chan_conf_wx_decl, chan_conf_ali_decl, chan_conf_stripe_decl;

/*
 * Hands the configuration every channel of chan_notify_table, in its order, so that a merchant's
 * slot i is channel i. Every program calls it before it loads a configuration (the daemons
 * through DAEMON_MAIN); 0, or -1 when a channel does not fit (CONF_CHANNELS_MAX,
 * CONF_CHAN_BYTES).
 */
int chan_conf_use(void);
/* The merchant's settings of the channel decl declares; NULL when cm does not use it. */
const void *chan_conf_of(const struct conf_merchant *cm, const struct conf_chan_decl *decl);
/* The same, writable, for tests that build a merchant by hand: the slot, marked used. */
void *chan_conf_slot(struct conf_merchant *cm, const struct conf_chan_decl *decl);

static inline const struct conf_wxpay *
chan_conf_wx(const struct conf_merchant *cm)
{
	return chan_conf_of(cm, &chan_conf_wx_decl);
}

static inline const struct conf_alipay *
chan_conf_ali(const struct conf_merchant *cm)
{
	return chan_conf_of(cm, &chan_conf_ali_decl);
}

static inline const struct conf_stripe *
chan_conf_stripe(const struct conf_merchant *cm)
{
	return chan_conf_of(cm, &chan_conf_stripe_decl);
}

#endif
