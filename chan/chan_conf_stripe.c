/*
 * chan_conf_stripe - Stripe's merchant settings (struct conf_stripe, chan/chan_conf.h): the table
 * of the "stripe" group of a merchant in paycb.conf, and the secret files among them.
 */
#include "chan_conf.h"

_Static_assert(sizeof(struct conf_stripe) <= CONF_CHAN_BYTES,
               "struct conf_stripe too large for a slot");

/* The table is data laid out by hand, one setting per entry with its documentation. */
/* clang-format off */
#define ST(f) offsetof(struct conf_stripe, f)
static const struct cfg_setting stripe_tab[] = {
	{"secret_files", CFG_STR_LIST, NULL, 0, 0, ST(secret_files),
	 CFGF_FILE | CFGF_NONEMPTY, PROG_INGEST, NULL, 0, 0,
	 "files holding endpoint secrets (whsec_...); several for rotation"},
	CFG_SET_STR("order_metadata_key", "order_id", ST(order_metadata_key),
	    CFGF_NONEMPTY, 0, "metadata key carrying the merchant's order number"),
	{"connect_accounts", CFG_STR_LIST, "", 0, 60, ST(connect_accounts),
	 CFGF_NAME, 0, NULL, 0, 0,
	 "Stripe Connect accounts (acct_...) whose events are applied; an event carrying "
	 "another account is unroutable"},
	CFG_SET_BOOL("test_mode", "false", ST(test_mode),
	     "apply test-mode events (livemode false); when false they are unroutable (an event "
	     "without livemode counts as live)"),
	CFG_SET_STR("api_key_file", "", ST(api_key_file), CFGF_FILE, PROG_RECONCILER,
	    "file holding the secret or restricted API key (sk_... or rk_..., read as a secret) "
	    "that authenticates paycb's calls; empty = the reconciler makes no Stripe calls for "
	    "this merchant"),
	CFG_SET_STR("api_base_url", "https://api.stripe.com", ST(api_base_url),
	    CFGF_NONEMPTY, 0, "Stripe API base URL, without a trailing slash"),
	CFG_SET_END};
/* clang-format on */

/* ingest reads the endpoint secrets. */
static int
stripe_conf_check_secrets(const void *conf, unsigned prog, char *err, size_t errlen)
{
	const struct conf_stripe *s = conf;

	for (int k = 0; (prog & PROG_INGEST) != 0 && k < s->secret_files.n; k++)
		if (cfg_secret_file_ok(s->secret_files.v[k], err, errlen) != 0)
			return -1;
	return 0;
}

const struct conf_chan_decl chan_conf_stripe_decl = {
    .name = "stripe",
    .doc = "Stripe (optional)",
    .tab = stripe_tab,
    .size = sizeof(struct conf_stripe),
    .check_secrets = stripe_conf_check_secrets,
};
