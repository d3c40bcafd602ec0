/*
 * test_notify_table - the channel table (chan/chan_notify.h) as ingest and the simulator use
 * it: every channel is found by its name, verifies what its own signer produced and refuses it
 * once a byte changes, takes its success answer as received and its failure answer as not,
 * and has no keys for a merchant that does not use it. A new channel gets one row in
 * fixtures[] below.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan_conf.h"
#include "chan_notify.h"
#include "conf.h"
#include "testkeys.h"

#define SERIAL "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"

static const uint8_t apiv3[33] = "abcdefghijklmnopqrstuvwxyz012345";
static char stripe_secret[] = "whsec_table_test";

static struct wx_merchant wx;
static struct ali_merchant ali;
static struct stripe_merchant stripe;
static EVP_PKEY *wx_key, *ali_key;

/* One channel's test material: its keys as ingest holds them, a signer and a payment. */
struct fixture {
	const char *name;
	const void *keys;
	struct chan_signer signer;
	struct chan_sign_in in;
};

static struct fixture fixtures[CHAN_NOTIFY_MAX];

static int
setup(void **state)
{
	static const char wx_plain[] =
	    "{\"mchid\":\"1900000001\",\"out_trade_no\":\"T1\",\"transaction_id\":\"W1\","
	    "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":100,\"currency\":\"CNY\"}}";
	static const char ali_params[] =
	    "notify_time=2026-12-02+10%3A00%3A00&notify_type=trade_status_sync&notify_id=N1&"
	    "app_id=2021000000000001&charset=utf-8&version=1.0&trade_no=A1&out_trade_no=T1&"
	    "trade_status=TRADE_SUCCESS&total_amount=1.00";
	static const char stripe_event[] =
	    "{\"id\":\"evt_1\",\"object\":\"event\",\"type\":\"payment_intent.succeeded\","
	    "\"livemode\":true,\"data\":{\"object\":{\"id\":\"pi_1\",\"object\":\"payment_intent\","
	    "\"amount\":100,\"amount_received\":100,\"currency\":\"usd\",\"metadata\":"
	    "{\"order_id\":\"T1\"},\"status\":\"succeeded\"}}}";
	time_t now = time(NULL);

	(void)state;
	if ((wx_key = tk_rsa_new()) == NULL || (ali_key = tk_rsa_new()) == NULL)
		return -1;
	snprintf(wx.mchid, sizeof(wx.mchid), "1900000001");
	memcpy(wx.apiv3_key, apiv3, 32);
	wx.apiv3_key_len = 32;
	snprintf(wx.keys[0].serial, sizeof(wx.keys[0].serial), SERIAL);
	wx.keys[0].pkey = wx_key;
	wx.nkeys = 1;
	snprintf(ali.app_id, sizeof(ali.app_id), "2021000000000001");
	ali.keys[0] = ali_key;
	ali.nkeys = 1;
	stripe.secrets[0] = (struct stripe_secret){(uint8_t *)stripe_secret, strlen(stripe_secret)};
	stripe.nsecrets = 1;
	fixtures[0] = (struct fixture){
	    "wxpay", &wx, {wx_key, SERIAL, apiv3, 32}, {"TRANSACTION.SUCCESS", wx_plain, now}};
	fixtures[1] =
	    (struct fixture){"alipay", &ali, {ali_key, NULL, NULL, 0}, {NULL, ali_params, now}};
	fixtures[2] =
	    (struct fixture){"stripe",
	                     &stripe,
	                     {NULL, NULL, (const uint8_t *)stripe_secret, strlen(stripe_secret)},
	                     {NULL, stripe_event, now}};
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	EVP_PKEY_free(wx_key);
	EVP_PKEY_free(ali_key);
	return 0;
}

/* headers_split - "Name: value\r\n" lines (edited in place) into h; returns how many. */
static size_t
headers_split(char *text, struct http_hdr *h, size_t cap)
{
	size_t n = 0;
	char *line = text, *end, *colon;

	while (n < cap && (end = strstr(line, "\r\n")) != NULL) {
		*end = '\0';
		if ((colon = strchr(line, ':')) != NULL) {
			*colon = '\0';
			h[n].name = line;
			h[n].value = colon + 1 + (colon[1] == ' ');
			n++;
		}
		line = end + 2;
	}
	return n;
}

static const struct chan_notify_ops *
ops_of(const struct fixture *f)
{
	int i = chan_notify_find(f->name);

	assert_true(i >= 0);
	return chan_notify_table[i];
}

static void
every_channel_is_found_by_its_name(void **state)
{
	(void)state;
	for (int i = 0; i < chan_notify_count; i++) {
		int fixed = 0;

		assert_int_equal(chan_notify_find(chan_notify_table[i]->name), i);
		assert_string_equal(chan_notify_name(i), chan_notify_table[i]->name);
		/* Every channel the build found has its fixture below (in any order). */
		for (int f = 0; f < chan_notify_count; f++)
			fixed += fixtures[f].name != NULL &&
			         strcmp(fixtures[f].name, chan_notify_table[i]->name) == 0;
		assert_int_equal(fixed, 1);
	}
	assert_int_equal(chan_notify_find("paypal"), -1);
	assert_int_equal(chan_notify_find(""), -1);
	assert_string_equal(chan_notify_name(-1), "unknown");
	assert_string_equal(chan_notify_name(chan_notify_count), "unknown");
}

static void
every_channel_verifies_what_it_signs_and_refuses_a_changed_byte(void **state)
{
	(void)state;
	for (int i = 0; i < chan_notify_count; i++) {
		const struct chan_notify_ops *ops = ops_of(&fixtures[i]);
		struct chan_signed out;
		struct http_hdr h[16];
		struct chan_req r;
		struct notify n;
		char reason[256];

		print_message("# %s\n", ops->name);
		assert_int_equal(ops->sign(&fixtures[i].signer, &fixtures[i].in, &out), 0);
		r = (struct chan_req){h, headers_split(out.headers, h, 16),
		                      (const uint8_t *)out.body, out.len, fixtures[i].in.ts};
		assert_int_equal(ops->precheck(fixtures[i].keys, &r, reason, sizeof(reason)),
		                 VERR_OK);
		assert_int_equal(
		    ops->verify_parse(fixtures[i].keys, &r, &n, reason, sizeof(reason)), VERR_OK);
		assert_int_equal(n.kind, NOTIFY_PAYMENT);
		assert_string_equal(n.out_trade_no, "T1");
		assert_int_equal(n.amount_minor, 100);
		out.body[out.len / 2] ^= 1;
		assert_int_not_equal(
		    ops->verify_parse(fixtures[i].keys, &r, &n, reason, sizeof(reason)), VERR_OK);
		free(out.body);
	}
}

static void
every_channel_takes_its_success_answer_as_received_and_its_failure_not(void **state)
{
	(void)state;
	for (int i = 0; i < chan_notify_count; i++) {
		const struct chan_notify_ops *ops = chan_notify_table[i];
		char body[160];
		const char *type;

		type = ops->answer(1, "", body, sizeof(body));
		assert_non_null(type);
		assert_true(ops->acknowledged(ops->status(1, VERR_OK), body));
		type = ops->answer(0, "signature", body, sizeof(body));
		assert_non_null(type);
		assert_false(ops->acknowledged(ops->status(0, VERR_SIGNATURE), body));
		assert_true(ops->status(0, VERR_BODY) >= 400);
		assert_false(ops->acknowledged(503, body));
	}
}

static void
a_merchant_without_the_channel_has_no_keys_for_it(void **state)
{
	struct conf_merchant cm;
	struct conf cf;

	(void)state;
	memset(&cm, 0, sizeof(cm));
	memset(&cf, 0, sizeof(cf));
	cm.id = "m1";
	for (int i = 0; i < chan_notify_count; i++) {
		const struct chan_notify_ops *ops = chan_notify_table[i];
		void *keys = &cm; /* must be reset */
		char err[256], desc[96];

		assert_int_equal(ops->keys_load(&cf, &cm, &keys, err, sizeof(err)), 0);
		assert_null(keys);
		ops->keys_free(NULL);
		ops->keys_describe(NULL, desc, sizeof(desc));
		assert_non_null(strstr(desc, "=0"));
	}
}

/*
 * fill_missing - cm uses the channel d declares, with every file setting of its table naming
 * missing and every other string empty: no per-channel code, so a new channel is covered too.
 */
static void
fill_missing(struct conf_merchant *cm, const struct conf_chan_decl *d, char *missing)
{
	static char empty[] = "";
	char *base = chan_conf_slot(cm, d);

	assert_non_null(base);
	for (const struct cfg_setting *s = d->tab; s->name != NULL; s++) {
		if (s->type == CFG_STR)
			*(char **)(base + s->off) = (s->flags & CFGF_FILE) ? missing : empty;
		else if (s->type == CFG_STR_LIST && (s->flags & CFGF_FILE))
			*(struct cfg_strs *)(base + s->off) = (struct cfg_strs){1, {missing}};
	}
}

static void
a_missing_key_file_fails_the_load_naming_the_file(void **state)
{
	char missing[] = "/nonexistent/paycb-key";
	struct conf_merchant cm;
	struct conf cf;

	(void)state;
	memset(&cm, 0, sizeof(cm));
	memset(&cf, 0, sizeof(cf));
	cm.id = "m1";
	for (int i = 0; i < chan_notify_count; i++)
		fill_missing(&cm, chan_notify_table[i]->conf, missing);
	for (int i = 0; i < chan_notify_count; i++) {
		const struct chan_notify_ops *ops = chan_notify_table[i];
		void *keys = NULL;
		char err[256] = "";

		print_message("# %s\n", ops->name);
		assert_int_equal(ops->keys_load(&cf, &cm, &keys, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "/nonexistent/paycb-key"));
		/* What was loaded before the failure is the caller's to free. */
		ops->keys_free(keys);
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(every_channel_is_found_by_its_name),
	    cmocka_unit_test(every_channel_verifies_what_it_signs_and_refuses_a_changed_byte),
	    cmocka_unit_test(
	        every_channel_takes_its_success_answer_as_received_and_its_failure_not),
	    cmocka_unit_test(a_merchant_without_the_channel_has_no_keys_for_it),
	    cmocka_unit_test(a_missing_key_file_fails_the_load_naming_the_file),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
