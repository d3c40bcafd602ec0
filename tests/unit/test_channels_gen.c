/*
 * test_channels_gen - all three channels end to end with keys generated at test time.
 *
 * The group setup makes four RSA-2048 keys, two self-signed WeChat platform certificates (one
 * serial with a leading zero byte), a PUB_KEY_ID_ public key, an APIv3 key file, Alipay key
 * files (bare base64 and certificate) and Stripe secret files, and loads them all through the
 * notify_keys_* loaders. Every notification is produced by the *_sign_* functions the simulator
 * uses and checked by the verifiers the daemon uses: payments, partial and full refunds, key
 * rotation, and the hostile cases (bad signatures, clock skew, header games, malformed and
 * non-UTF-8 bodies, GCM tag failure, amounts that are not integers). Authentic notifications
 * that are not the merchant's to apply (another mchid, sub_mchid, app id, seller, Connect
 * account, a test-mode event, no order number) verify and come back as NOTIFY_UNROUTABLE with
 * their reason.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "chan_notify.h"
#include "crypto.h"
#include "form.h"
#include "testkeys.h"

#define T0      1700000000
#define SERIAL0 "5157F09EFDC096DE15EBE81A47057A7232F1B8E1"
#define SERIAL1 "0A3C6E8F1B2D4C5E6F708192A3B4C5D6E7F80910"
#define PUBID   "PUB_KEY_ID_0114232025051300000000000000000001"
#define MCHID   "1900000109"
#define APPID   "2021000000000001"

static const char APIV3[] = "0123456789abcdefghijklmnopqrstuv";
static EVP_PKEY *K[4]; /* 0, 1: WeChat certs and Alipay keys; 2: PUB_KEY_ID_; 3: unknown */
static struct wx_merchant WXM;
static struct ali_merchant ALM;
static struct stripe_merchant STM;
static char R[256]; /* the last reason, shown when an assertion fails */

#define assert_verr(expr, want)                                                                    \
	do {                                                                                       \
		enum verr got_ = (expr);                                                           \
		if (got_ != (want))                                                                \
			fail_msg("got %s (%s), want %s", notify_verr_name(got_), R,                \
			         notify_verr_name(want));                                          \
	} while (0)

static char paths[12][256];

/* temp - writes text to a temporary file and returns its name (static storage per slot). */
static const char *
temp(int slot, const char *text)
{
	assert_int_equal(tk_write_temp(text, strlen(text), paths[slot], sizeof(paths[slot])), 0);
	return paths[slot];
}

static int
setup(void **state)
{
	char *pem[4], *b64key, err[256], apiv3[40];
	X509 *c0, *c1;
	int i;

	(void)state;
	for (i = 0; i < 4; i++)
		if ((K[i] = tk_rsa_new()) == NULL)
			return -1;
	c0 = tk_self_signed(K[0], SERIAL0);
	c1 = tk_self_signed(K[1], SERIAL1);
	pem[0] = tk_cert_pem(c0);
	pem[1] = tk_cert_pem(c1);
	pem[2] = tk_pubkey_pem(K[2]);
	b64key = tk_pubkey_b64(K[0]);
	snprintf(apiv3, sizeof(apiv3), "%s\n", APIV3);
	snprintf(WXM.mchid, sizeof(WXM.mchid), MCHID);
	WXM.tolerance_s = 300;
	if (notify_keys_wx_apiv3_load(&WXM, temp(0, apiv3), err, sizeof(err)) != 0 ||
	    notify_keys_wx_add(&WXM, temp(1, pem[0]), NULL, err, sizeof(err)) != 0 ||
	    notify_keys_wx_add(&WXM, temp(2, pem[1]), SERIAL1, err, sizeof(err)) != 0 ||
	    notify_keys_wx_add(&WXM, temp(3, pem[2]), PUBID, err, sizeof(err)) != 0)
		return -1;
	snprintf(ALM.app_id, sizeof(ALM.app_id), APPID);
	if (notify_keys_ali_add(&ALM, temp(4, b64key), err, sizeof(err)) != 0 ||
	    notify_keys_ali_add(&ALM, temp(5, pem[1]), err, sizeof(err)) != 0)
		return -1;
	STM.tolerance_s = 300;
	if (notify_keys_stripe_add(&STM, temp(6, "whsec_old_secret\n"), err, sizeof(err)) != 0 ||
	    notify_keys_stripe_add(&STM, temp(7, "whsec_new_secret"), err, sizeof(err)) != 0)
		return -1;
	for (i = 0; i < 8; i++)
		tk_unlink(paths[i]);
	for (i = 0; i < 3; i++)
		free(pem[i]);
	free(b64key);
	X509_free(c0);
	X509_free(c1);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	notify_keys_wx_free(&WXM);
	notify_keys_ali_free(&ALM);
	notify_keys_stripe_free(&STM);
	for (int i = 0; i < 4; i++)
		EVP_PKEY_free(K[i]);
	return 0;
}

/* ---- WeChat Pay ------------------------------------------------------------------------ */

struct wxmsg {
	char *body, *sig;
	char ts[24], nonce[40];
	struct http_hdr h[8];
	size_t nh;
};

static const char *
wx_pay(const char *mchid, const char *total, const char *currency)
{
	static char buf[512];

	snprintf(buf, sizeof(buf),
	         "{\"mchid\":\"%s\",\"appid\":\"wxd678efh567hg6787\",\"out_trade_no\":\"ORD-1\","
	         "\"transaction_id\":\"4200001234\",\"trade_type\":\"JSAPI\",\"trade_state\":"
	         "\"SUCCESS\",\"amount\":{\"total\":%s%s%s}}",
	         mchid, total, currency ? ",\"currency\":" : "", currency ? currency : "");
	return buf;
}

static const char *
wx_refund(const char *refund, const char *total)
{
	static char buf[512];

	snprintf(
	    buf, sizeof(buf),
	    "{\"mchid\":\"" MCHID "\",\"transaction_id\":\"4200001234\",\"out_trade_no\":"
	    "\"ORD-1\",\"refund_id\":\"50300001\",\"out_refund_no\":\"RF-1\",\"refund_status\":"
	    "\"SUCCESS\",\"amount\":{\"total\":%s,\"refund\":%s,\"payer_total\":%s,"
	    "\"payer_refund\":%s}}",
	    total, refund, total, refund);
	return buf;
}

static void
wx_headers(struct wxmsg *w, const char *serial)
{
	w->h[0] = (struct http_hdr){"Wechatpay-Timestamp", w->ts};
	w->h[1] = (struct http_hdr){"Wechatpay-Nonce", w->nonce};
	w->h[2] = (struct http_hdr){"Wechatpay-Signature", w->sig};
	w->h[3] = (struct http_hdr){"Wechatpay-Serial", serial};
	w->h[4] = (struct http_hdr){"Wechatpay-Signature-Type", "WECHATPAY2-SHA256-RSA2048"};
	w->nh = 5;
}

static void
wx_build(struct wxmsg *w, EVP_PKEY *key, const char *serial, const char *event, const char *plain,
         time_t ts)
{
	memset(w, 0, sizeof(*w));
	assert_int_equal(notify_wx_sign(key, serial, (const uint8_t *)APIV3, event, plain, ts,
	                                &w->body, w->ts, w->nonce, &w->sig),
	                 0);
	wx_headers(w, serial);
}

/* wx_resign - replaces the body and signs it anew, as WeChat would have. */
static void
wx_resign(struct wxmsg *w, EVP_PKEY *key, char *body)
{
	struct crypto_part p[6] = {{w->ts, strlen(w->ts)},       {"\n", 1},
	                           {w->nonce, strlen(w->nonce)}, {"\n", 1},
	                           {body, strlen(body)},         {"\n", 1}};
	uint8_t *sig;
	size_t siglen;

	free(w->body);
	free(w->sig);
	w->body = body;
	assert_int_equal(crypto_rsa_sha256_signv(key, p, 6, &sig, &siglen), 0);
	assert_non_null(w->sig = crypto_b64_encode_alloc(sig, siglen));
	free(sig);
	w->h[2].value = w->sig;
}

/* wx_edit - sets resource.<key> (or the top level when key has no dot) and re-signs. */
static void
wx_edit(struct wxmsg *w, const char *key, const char *value)
{
	json_t *env = json_loads(w->body, 0, NULL), *res = json_object_get(env, "resource");

	if (strncmp(key, "resource.", 9) == 0)
		json_object_set_new(res, key + 9, json_string(value));
	else
		json_object_set_new(env, key, json_string(value));
	wx_resign(w, K[0], json_dumps(env, JSON_COMPACT));
	json_decref(env);
}

static enum verr
wx_run(struct wxmsg *w, time_t now, struct notify *n)
{
	return notify_wx_verify_parse(&WXM, w->h, w->nh, (const uint8_t *)w->body, strlen(w->body),
	                              now, n, R, sizeof(R));
}

static void
wx_free(struct wxmsg *w)
{
	free(w->body);
	free(w->sig);
}

static void
test_wx_payment_with_cert_and_pubkey_and_rotation(void **state)
{
	struct {
		EVP_PKEY *key;
		const char *serial;
	} ok[] = {
	    {K[0], SERIAL0},
	    {K[1], SERIAL1},
	    {K[2], PUBID},
	    {K[0], "5157f09efdc096de15ebe81a47057a7232f1b8e1"}, /* case-insensitive */
	    {K[1], "A3C6E8F1B2D4C5E6F708192A3B4C5D6E7F80910"},  /* BigInteger spelling */
	};
	struct wxmsg w;
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		wx_build(&w, ok[i].key, ok[i].serial, "TRANSACTION.SUCCESS",
		         wx_pay(MCHID, "8888", "\"CNY\""), T0);
		assert_verr(wx_run(&w, T0 + 10, &n), VERR_OK);
		assert_int_equal(n.kind, NOTIFY_PAYMENT);
		assert_string_equal(n.channel_trade_no, "4200001234");
		assert_string_equal(n.out_trade_no, "ORD-1");
		assert_string_equal(n.status, "SUCCESS");
		assert_string_equal(n.currency, "CNY");
		assert_int_equal(n.amount_minor, 8888);
		assert_int_equal(strncmp(n.event_id, "EV-", 3), 0);
		wx_free(&w);
	}
	/* A third key: unknown under its own serial, a forgery under a known one. */
	wx_build(&w, K[3], "7F0000000000000000000000000000000000000A", "TRANSACTION.SUCCESS",
	         wx_pay(MCHID, "8888", NULL), T0);
	assert_verr(wx_run(&w, T0, &n), VERR_SERIAL);
	w.h[3].value = SERIAL0;
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE);
	w.h[3].value = PUBID;
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE);
	/* A PUB_KEY_ID_ matches exactly: no case folding, no leading-zero games. */
	w.h[3].value = "pub_key_id_0114232025051300000000000000000001";
	assert_verr(wx_run(&w, T0, &n), VERR_SERIAL);
	wx_free(&w);
}

static void
test_wx_refunds_partial_and_full(void **state)
{
	struct wxmsg w;
	struct notify n;

	(void)state;
	wx_build(&w, K[0], SERIAL0, "REFUND.SUCCESS", wx_refund("1000", "8888"), T0);
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_REFUND);
	assert_string_equal(n.refund_no, "50300001");
	assert_string_equal(n.merchant_refund_no, "RF-1");
	assert_string_equal(n.channel_trade_no, "4200001234");
	assert_string_equal(n.status, "SUCCESS");
	assert_int_equal(n.amount_minor, 1000);
	assert_int_equal(n.order_total_minor, 8888);
	assert_int_equal(n.refund_cumulative, 0);
	wx_free(&w);
	wx_build(&w, K[2], PUBID, "REFUND.SUCCESS", wx_refund("8888", "8888"), T0);
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	assert_int_equal(n.amount_minor, 8888);
	assert_int_equal(n.order_total_minor, 8888);
	wx_free(&w);
	/*
	 * REFUND.ABNORMAL and REFUND.CLOSED are refund events whose refund_status is kept
	 * verbatim: the processor decides on it (no money moved), and the refund log keys on it.
	 */
	{
		char plain[512];

		snprintf(plain, sizeof(plain), "%s", wx_refund("8888", "8888"));
		memcpy(strstr(plain, "\"SUCCESS\""), "\"CLOSED\" ", 9);
		wx_build(&w, K[0], SERIAL0, "REFUND.CLOSED", plain, T0);
		assert_verr(wx_run(&w, T0, &n), VERR_OK);
		assert_int_equal(n.kind, NOTIFY_REFUND);
		assert_string_equal(n.status, "CLOSED");
		wx_free(&w);
	}
}

static void
test_wx_timestamp_skew_past_and_future(void **state)
{
	struct wxmsg w;
	struct notify n;

	(void)state;
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	assert_verr(wx_run(&w, T0 + 299, &n), VERR_OK);
	assert_verr(wx_run(&w, T0 - 299, &n), VERR_OK);
	assert_verr(wx_run(&w, T0 + 300, &n), VERR_TIMESTAMP); /* 300 s old */
	assert_verr(wx_run(&w, T0 - 300, &n), VERR_TIMESTAMP); /* 300 s ahead */
	w.h[0].value = "+1700000000";
	assert_verr(wx_run(&w, T0, &n), VERR_HEADER);
	w.h[0].value = "1700000000.0";
	assert_verr(wx_run(&w, T0, &n), VERR_HEADER);
	w.h[0].value = "99999999999999999999999";
	assert_verr(wx_run(&w, T0, &n), VERR_HEADER);
	wx_free(&w);
}

static void
test_wx_headers_missing_duplicated_and_odd(void **state)
{
	struct wxmsg w;
	struct notify n;

	(void)state;
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	/* Names are case-insensitive and values are trimmed. */
	w.h[0] = (struct http_hdr){"wechatpay-timestamp", w.ts};
	w.h[3] = (struct http_hdr){"WECHATPAY-SERIAL", "  " SERIAL0 "\t"};
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	/* Signature-Type may be absent; any other type is a scheme we do not have. */
	w.nh = 4;
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	w.nh = 5;
	w.h[4].value = "WECHATPAY2-SM2-WITH-SM3";
	assert_verr(wx_run(&w, T0, &n), VERR_UNSUPPORTED);
	w.h[4].value = "WECHATPAY2-SHA256-RSA2048";
	for (size_t i = 0; i < 4; i++) {
		struct http_hdr saved = w.h[i];

		w.h[i].name = "X-Other";
		assert_verr(wx_run(&w, T0, &n), VERR_HEADER); /* missing */
		w.h[i] = saved;
		w.h[i].value = " ";
		assert_verr(wx_run(&w, T0, &n), VERR_HEADER); /* empty */
		w.h[i] = saved;
		w.h[w.nh++] = saved;
		assert_verr(wx_run(&w, T0, &n), VERR_HEADER); /* duplicated, even if equal */
		w.nh--;
	}
	w.h[w.nh++] = w.h[4];
	assert_verr(wx_run(&w, T0, &n), VERR_HEADER);
	w.nh--;
	/* A nonce with a line break could move bytes between the signed lines. */
	w.h[1].value = "abc\ndef";
	assert_verr(wx_run(&w, T0, &n), VERR_HEADER);
	wx_free(&w);
}

static void
test_wx_bad_signature_truncated_base64_and_probe(void **state)
{
	struct wxmsg w;
	struct notify n;
	char probe[1024];
	size_t len;

	(void)state;
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	len = strlen(w.sig);
	w.sig[10] = w.sig[10] == 'A' ? 'B' : 'A';
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE);
	w.sig[10] = w.sig[10] == 'A' ? 'B' : 'A';
	w.sig[len - 4] = '\0';
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE); /* truncated by one group */
	w.sig[len - 5] = '\0';
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE); /* not a multiple of 4 */
	snprintf(probe, sizeof(probe), "WECHATPAY/SIGNTEST/%s", w.sig);
	w.h[2].value = probe;
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE);
	wx_free(&w);
	/* One byte of the body changed after signing. */
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	w.body[strlen(w.body) - 2] ^= 1;
	assert_verr(wx_run(&w, T0, &n), VERR_SIGNATURE);
	wx_free(&w);
}

static void
test_wx_malformed_non_utf8_and_duplicate_key_bodies(void **state)
{
	static const char *const bodies[] = {
	    "{\"id\":\"EV-1\",",
	    "[]",
	    "",
	    "{\"id\":\"EV-\xff\",\"event_type\":\"X\"}",
	    "{\"id\":\"EV-1\",\"id\":\"EV-2\",\"event_type\":\"TRANSACTION.SUCCESS\"}",
	    "{\"id\":\"EV-1\",\"event_type\":\"TRANSACTION.SUCCESS\"}", /* no resource */
	    "{\"id\":\"EV-1\"} trailing",
	};
	struct wxmsg w;
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(bodies) / sizeof(bodies[0]); i++) {
		wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
		wx_resign(&w, K[0], strdup(bodies[i]));
		assert_verr(wx_run(&w, T0, &n), VERR_BODY);
		wx_free(&w);
	}
	/* The decrypted resource must be UTF-8 JSON as well. */
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", "{\"mchid\":\"\xc3\x28\"}", T0);
	assert_verr(wx_run(&w, T0, &n), VERR_BODY);
	wx_free(&w);
}

static void
test_wx_gcm_tag_failure_wrong_key_and_algorithm(void **state)
{
	struct wx_merchant saved = WXM;
	struct wxmsg w;
	struct notify n;
	json_t *env;
	char ct[1024];

	(void)state;
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	env = json_loads(w.body, 0, NULL);
	snprintf(
	    ct, sizeof(ct), "%s",
	    json_string_value(json_object_get(json_object_get(env, "resource"), "ciphertext")));
	json_decref(env);
	ct[3] = ct[3] == 'A' ? 'B' : 'A'; /* signed by WeChat, but the AEAD tag fails */
	wx_edit(&w, "resource.ciphertext", ct);
	assert_verr(wx_run(&w, T0, &n), VERR_DECRYPT);
	wx_free(&w);
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	wx_edit(&w, "resource.associated_data", "refund");
	assert_verr(wx_run(&w, T0, &n), VERR_DECRYPT);
	wx_free(&w);
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	wx_edit(&w, "resource.ciphertext", "not base64!");
	assert_verr(wx_run(&w, T0, &n), VERR_DECRYPT);
	wx_free(&w);
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	wx_edit(&w, "resource.nonce", "short");
	assert_verr(wx_run(&w, T0, &n), VERR_DECRYPT);
	wx_free(&w);
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	wx_edit(&w, "resource.algorithm", "AEAD_AES_128_GCM");
	assert_verr(wx_run(&w, T0, &n), VERR_UNSUPPORTED);
	wx_free(&w);
	/* The merchant's APIv3 key is wrong: authentic message, undecryptable resource. */
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), T0);
	WXM.apiv3_key[0] ^= 1;
	assert_verr(wx_run(&w, T0, &n), VERR_DECRYPT);
	WXM = saved;
	wx_free(&w);
}

static void
test_wx_wrong_mchid_amounts_and_currency(void **state)
{
	static const struct {
		const char *mchid, *total, *currency;
		enum verr want;
	} cases[] = {
	    {MCHID, "88.5", NULL, VERR_AMOUNT},
	    {MCHID, "-1", NULL, VERR_AMOUNT},
	    {MCHID, "\"8888\"", NULL, VERR_AMOUNT},
	    {MCHID, "null", NULL, VERR_AMOUNT},
	    {MCHID, "1e3", NULL, VERR_AMOUNT},
	    {MCHID, "10000000000000000", NULL, VERR_AMOUNT},
	    {MCHID, "99999999999999999999999", NULL, VERR_BODY}, /* not even an int64 */
	    {MCHID, "1", "\"XXX\"", VERR_UNSUPPORTED},
	    {MCHID, "1", "\"usd\"", VERR_OK},
	    {MCHID, "0", NULL, VERR_OK},
	};
	struct wxmsg w;
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS",
		         wx_pay(cases[i].mchid, cases[i].total, cases[i].currency), T0);
		assert_verr(wx_run(&w, T0, &n), cases[i].want);
		wx_free(&w);
	}
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.SUCCESS", wx_pay(MCHID, "1", "\"usd\""), T0);
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	assert_string_equal(n.currency, "USD");
	wx_free(&w);
	/* Other event types are verified and decrypted, then ignored: no merchant check. */
	wx_build(&w, K[0], SERIAL0, "TRANSACTION.CLOSED", wx_pay("other", "-1", NULL), T0);
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	wx_free(&w);
}

/* wx_expect - builds and verifies plain as event; checks the kind and unroutable reason. */
static void
wx_expect(const char *event, const char *plain, enum notify_kind kind, const char *why)
{
	struct wxmsg w;
	struct notify n;

	wx_build(&w, K[0], SERIAL0, event, plain, T0);
	assert_verr(wx_run(&w, T0, &n), VERR_OK);
	if (n.kind != kind || strcmp(n.unroutable, why) != 0)
		fail_msg("%s: kind %d reason '%s', want %d '%s'", plain, n.kind, n.unroutable, kind,
		         why);
	if (kind == NOTIFY_UNROUTABLE)
		assert_true(n.event_id[0] != '\0' && strcmp(n.event_type, event) == 0);
	wx_free(&w);
}

static void
test_wx_merchant_binding_direct_partner_and_appids(void **state)
{
	static const char *pay = "{%s,\"out_trade_no\":\"ORD-1\",\"transaction_id\":\"42\","
	                         "\"trade_state\":\"SUCCESS\",\"amount\":{\"total\":1}}";
	static const struct {
		const char *ids;
		int partner, appids;
		const char *why; /* "" = applied */
	} cases[] = {
	    {"\"mchid\":\"" MCHID "\",\"appid\":\"wxA\"", 0, 0, ""},
	    {"\"mchid\":\"1900000999\",\"appid\":\"wxA\"", 0, 0, "foreign_mchid"},
	    {"\"appid\":\"wxA\"", 0, 0, "foreign_mchid"},
	    {"\"mchid\":\"" MCHID "\",\"appid\":\"wxA\"", 0, 1, ""},
	    {"\"mchid\":\"" MCHID "\",\"appid\":\"wxB\"", 0, 1, "foreign_appid"},
	    {"\"mchid\":\"" MCHID "\"", 0, 1, "foreign_appid"}, /* a payment names its app */
	    /* Partner mode: the provider must be ours, the sub-merchant mchid or listed. */
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"" MCHID "\"", 0, 0, "foreign_sp_mchid"},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"" MCHID "\"", 1, 0, ""},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"1900000777\"", 1, 0, ""},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"1900000888\"", 1, 0, "foreign_sub_mchid"},
	    {"\"sp_mchid\":\"1230000999\",\"sub_mchid\":\"" MCHID "\"", 1, 0, "foreign_sp_mchid"},
	    {"\"sp_mchid\":\"1230000109\"", 1, 0, "foreign_sub_mchid"},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"" MCHID "\",\"sp_appid\":\"wxP\","
	     "\"sub_appid\":\"wxA\"",
	     1, 1, ""},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"" MCHID "\",\"sp_appid\":\"wxA\","
	     "\"sub_appid\":\"wxB\"",
	     1, 1, "foreign_appid"},
	    {"\"sp_mchid\":\"1230000109\",\"sub_mchid\":\"" MCHID "\",\"sp_appid\":\"wxA\"", 1, 1,
	     ""},
	};
	struct wx_merchant saved = WXM;
	char plain[512];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		WXM = saved;
		if (cases[i].partner) {
			snprintf(WXM.sp_mchid, sizeof(WXM.sp_mchid), "1230000109");
			snprintf(WXM.sub_mchids[0], sizeof(WXM.sub_mchids[0]), "1900000777");
			WXM.nsub_mchids = 1;
		}
		if (cases[i].appids) {
			snprintf(WXM.appids[0], sizeof(WXM.appids[0]), "wxZ");
			snprintf(WXM.appids[1], sizeof(WXM.appids[1]), "wxA");
			WXM.nappids = 2;
		}
		snprintf(plain, sizeof(plain), pay, cases[i].ids);
		wx_expect("TRANSACTION.SUCCESS", plain,
		          cases[i].why[0] ? NOTIFY_UNROUTABLE : NOTIFY_PAYMENT, cases[i].why);
	}
	/* A refund carries no app id, so an app id list does not make it foreign. */
	WXM = saved;
	snprintf(WXM.appids[0], sizeof(WXM.appids[0]), "wxZ");
	WXM.nappids = 1;
	wx_expect("REFUND.SUCCESS", wx_refund("1", "1"), NOTIFY_REFUND, "");
	/* A merchant without an mchid serves no direct notification. */
	WXM = saved;
	WXM.mchid[0] = '\0';
	wx_expect("TRANSACTION.SUCCESS", wx_pay(MCHID, "1", NULL), NOTIFY_UNROUTABLE,
	          "foreign_mchid");
	WXM = saved;
}

/* ---- Alipay ---------------------------------------------------------------------------- */

/* ali_body - signs key=value pairs given as one string "k=v\nk=v..." with key k. */
static char *
ali_body(EVP_PKEY *k, const char *spec)
{
	const char *keys[32], *vals[32];
	char *copy = strdup(spec), *line, *save = NULL, *body = NULL;
	size_t n = 0;

	for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		char *eq = strchr(line, '=');

		*eq = '\0';
		keys[n] = line;
		vals[n++] = eq + 1;
	}
	assert_int_equal(notify_ali_sign(k, keys, vals, n, &body), 0);
	free(copy);
	return body;
}

#define ALI_COMMON                                                                                 \
	"notify_time=2024-01-01 12:00:00\nnotify_type=trade_status_sync\nnotify_id=N1\n"           \
	"app_id=" APPID "\ncharset=utf-8\nversion=1.0\ntrade_no=2024010122001\n"                   \
	"out_trade_no=ORD-7\nsubject=\xe6\xb5\x8b\xe8\xaf\x95 goods & more=1\nbody=\n"

static enum verr
ali_run(const char *body, struct notify *n)
{
	return notify_ali_verify_parse(&ALM, (const uint8_t *)body, strlen(body), n, R, sizeof(R));
}

static void
test_ali_payment_and_key_rotation(void **state)
{
	struct notify n;
	char *b;

	(void)state;
	for (int k = 0; k < 2; k++) {
		b = ali_body(K[k], ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=88.88");
		assert_verr(ali_run(b, &n), VERR_OK);
		assert_int_equal(n.kind, NOTIFY_PAYMENT);
		assert_string_equal(n.event_id, "N1");
		assert_string_equal(n.event_type, "trade_status_sync");
		assert_string_equal(n.channel_trade_no, "2024010122001");
		assert_string_equal(n.out_trade_no, "ORD-7");
		assert_string_equal(n.status, "TRADE_SUCCESS");
		assert_int_equal(n.amount_minor, 8888);
		assert_string_equal(n.currency, "CNY");
		free(b);
	}
	b = ali_body(K[3], ALI_COMMON "trade_status=TRADE_FINISHED\ntotal_amount=88.88");
	assert_verr(ali_run(b, &n), VERR_SIGNATURE);
	free(b);
	b = ali_body(K[0], ALI_COMMON "trade_status=TRADE_FINISHED\ntotal_amount=0.10");
	assert_verr(ali_run(b, &n), VERR_OK);
	assert_int_equal(n.amount_minor, 10);
	free(b);
}

static void
test_ali_refunds_partial_full_and_ignored(void **state)
{
	struct notify n;
	char *b;

	(void)state;
	b = ali_body(K[0], ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=88.88\n"
	                              "refund_fee=10.00\ngmt_refund=2024-01-02 08:00:00.123\n"
	                              "out_biz_no=RF-9");
	assert_verr(ali_run(b, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_REFUND);
	assert_string_equal(n.refund_no, "RF-9");
	assert_string_equal(n.merchant_refund_no, "RF-9");
	assert_int_equal(n.amount_minor, 1000);
	assert_int_equal(n.refund_cumulative, 1);
	assert_int_equal(n.order_total_minor, 8888);
	free(b);
	/* A full refund closes the trade; without out_biz_no the refund is named by its time. */
	b = ali_body(K[1], ALI_COMMON "trade_status=TRADE_CLOSED\ntotal_amount=88.88\n"
	                              "refund_fee=88.88\ngmt_refund=2024-01-03 09:00:00");
	assert_verr(ali_run(b, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_REFUND);
	assert_string_equal(n.refund_no, "2024010122001-2024-01-03 09:00:00");
	assert_string_equal(n.status, "TRADE_CLOSED");
	assert_int_equal(n.amount_minor, 8888);
	free(b);
	b = ali_body(K[0], ALI_COMMON "trade_status=TRADE_CLOSED\ntotal_amount=88.88");
	assert_verr(ali_run(b, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	free(b);
	b = ali_body(K[0], ALI_COMMON "trade_status=WAIT_BUYER_PAY\ntotal_amount=88.88");
	assert_verr(ali_run(b, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	free(b);
}

/* ali_replace - the body with the first `from` replaced by `to` (new string). */
static char *
ali_replace(const char *body, const char *from, const char *to)
{
	const char *p = strstr(body, from);
	char *out;

	assert_non_null(p);
	assert_true(asprintf(&out, "%.*s%s%s", (int)(p - body), body, to, p + strlen(from)) > 0);
	return out;
}

static void
test_ali_hostile_forms(void **state)
{
	char *b = ali_body(K[0], ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=88.88");
	struct {
		const char *from, *to;
		enum verr want;
	} edits[] = {
	    {"total_amount=88.88", "total_amount=88.89", VERR_SIGNATURE},
	    {"sign_type=RSA2", "sign_type=RSA", VERR_UNSUPPORTED},
	    {"sign_type=RSA2&", "", VERR_OK}, /* absent sign_type means RSA2 */
	    {"out_trade_no=", "out_trade_no=%G1", VERR_BODY},
	    {"out_trade_no=", "out_trade_no=%4", VERR_BODY},
	    {"out_trade_no=", "out_trade_no=%00", VERR_BODY},
	    {"version=1.0", "version=1.0&app_id=" APPID, VERR_AMBIGUOUS}, /* duplicated */
	    {"version=1.0", "version=1.0&=x", VERR_BODY},                 /* empty name */
	    {"version=1.0", "version=1.0&&x=1", VERR_BODY},
	    {"version=1.0", "version", VERR_BODY},
	    {"&sign=", "&signature=", VERR_SIGNATURE}, /* no sign at all */
	};
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++) {
		char *e = ali_replace(b, edits[i].from, edits[i].to);

		assert_verr(ali_run(e, &n), edits[i].want);
		free(e);
	}
	/* A truncated signature, then one cut to a base64 boundary. */
	b[strlen(b) - 3] = '\0';
	assert_verr(ali_run(b, &n), VERR_SIGNATURE);
	b[strlen(b) - 4] = '\0';
	assert_verr(ali_run(b, &n), VERR_SIGNATURE);
	free(b);
}

/* The cheap check before a slot refuses only what the verifier refuses, with its verdict. */
static void
test_ali_precheck_agrees_with_the_verifier(void **state)
{
	char *b = ali_body(K[0], ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=88.88");
	char *sign = strstr(b, "&sign="), *e;
	struct notify n;
	char pr[128];
	static const char *const short_sign = /* base64 of 128 bytes: an RSA-1024 size */
	    "&sign=QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
	    "QUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFBQUFB"
	    "QUFBQUFBQUFBQUFBQUFB";

	(void)state;
	assert_non_null(sign);
	assert_verr(notify_ali_precheck(&ALM, (const uint8_t *)b, strlen(b), pr, sizeof(pr)),
	            VERR_OK);
	assert_verr(ali_run(b, &n), VERR_OK);
	/* A wrong signature of the right length passes; only the verifier can tell. */
	e = ali_replace(b, "total_amount=88.88", "total_amount=88.89");
	assert_verr(notify_ali_precheck(&ALM, (const uint8_t *)e, strlen(e), pr, sizeof(pr)),
	            VERR_OK);
	assert_verr(ali_run(e, &n), VERR_SIGNATURE);
	free(e);
	/* A signature no key of the merchant makes, none at all, and one that is not base64. */
	{
		const char *const tails[] = {short_sign, "&signature=x", "&sign=QUFB="};

		for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
			size_t keep = (size_t)(sign - b);

			e = malloc(keep + strlen(tails[i]) + 1);
			memcpy(e, b, keep);
			strcpy(e + keep, tails[i]);
			assert_verr(notify_ali_precheck(&ALM, (const uint8_t *)e, strlen(e), pr,
			                                sizeof(pr)),
			            VERR_SIGNATURE);
			assert_verr(ali_run(e, &n), VERR_SIGNATURE);
			free(e);
		}
	}
	assert_true(strstr(pr, "sign") != NULL);
	/* A malformed escape is the form decoder's verdict in both. */
	e = ali_replace(b, "&sign=", "&sign=%ZZ");
	assert_verr(notify_ali_precheck(&ALM, (const uint8_t *)e, strlen(e), pr, sizeof(pr)),
	            VERR_BODY);
	assert_verr(ali_run(e, &n), VERR_BODY);
	free(e);
	/* A truncated signature: refused before the slot, as the verifier refuses it. */
	b[strlen(b) - 3] = '\0';
	assert_verr(notify_ali_precheck(&ALM, (const uint8_t *)b, strlen(b), pr, sizeof(pr)),
	            VERR_SIGNATURE);
	assert_verr(ali_run(b, &n), VERR_SIGNATURE);
	free(b);
}

static void
test_ali_non_utf8_wrong_app_and_amounts(void **state)
{
	static const struct {
		const char *spec;
		enum verr want;
	} cases[] = {
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=1.00\nextra=\xff\xfe", VERR_BODY},
	    {"notify_id=N2\nnotify_type=trade_status_sync\napp_id=" APPID "\ncharset=gbk\n"
	     "trade_no=T\nout_trade_no=O\nsubject=\xb2\xe2\xca\xd4\ntrade_status=TRADE_SUCCESS\n"
	     "total_amount=1.00",
	     VERR_OK}, /* GBK bytes are signed as they are */
	    {"notify_id=N2\nnotify_type=trade_status_sync\napp_id=" APPID "\ncharset=gbk\n"
	     "trade_no=T\nout_trade_no=O\xb2\xe2\ntrade_status=TRADE_SUCCESS\ntotal_amount=1.00",
	     VERR_BODY}, /* but the order number we keep must then be ASCII */
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=88.888", VERR_AMOUNT},
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=-1.00", VERR_AMOUNT},
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=1e3", VERR_AMOUNT},
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=", VERR_AMOUNT},
	    {ALI_COMMON "trade_status=TRADE_SUCCESS", VERR_BODY},
	    {ALI_COMMON "trade_status=TRADE_SUCCESS\ntotal_amount=1.00\nrefund_fee=0.001\n"
	                "out_biz_no=R",
	     VERR_AMOUNT},
	    {"notify_id=N4\nnotify_type=servicemarket_order_notify\napp_id=" APPID, VERR_OK},
	};
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *b = ali_body(K[0], cases[i].spec);

		assert_verr(ali_run(b, &n), cases[i].want);
		free(b);
	}
}

static void
test_ali_foreign_app_and_seller_are_unroutable(void **state)
{
	static const char *pay = "notify_id=N9\nnotify_type=trade_status_sync\napp_id=%s\n%s"
	                         "trade_no=T\nout_trade_no=O\ntrade_status=TRADE_SUCCESS\n"
	                         "total_amount=1.00";
	static const struct {
		const char *app, *seller, *want_seller, *why;
	} cases[] = {
	    {APPID, "", "", ""},
	    {"2021000000000999", "", "", "foreign_app_id"},
	    {APPID, "seller_id=2088000000000001\n", "2088000000000001", ""},
	    {APPID, "seller_id=2088000000000002\n", "2088000000000001", "foreign_seller_id"},
	    {APPID, "", "2088000000000001", "foreign_seller_id"},
	};
	struct ali_merchant saved = ALM;
	char spec[512], *b;
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		ALM = saved;
		snprintf(ALM.seller_id, sizeof(ALM.seller_id), "%s", cases[i].want_seller);
		snprintf(spec, sizeof(spec), pay, cases[i].app, cases[i].seller);
		b = ali_body(K[0], spec);
		assert_verr(ali_run(b, &n), VERR_OK);
		assert_int_equal(n.kind, cases[i].why[0] ? NOTIFY_UNROUTABLE : NOTIFY_PAYMENT);
		assert_string_equal(n.unroutable, cases[i].why);
		assert_string_equal(n.event_id, "N9");
		free(b);
	}
	ALM = saved;
}

/* ---- Stripe ---------------------------------------------------------------------------- */

static char *
st_event(const char *type, const char *object)
{
	char *s;

	assert_true(asprintf(&s,
	                     "{\"id\":\"evt_1\",\"object\":\"event\",\"type\":\"%s\","
	                     "\"data\":{\"object\":%s}}",
	                     type, object) > 0);
	return s;
}

static const char *
st_pi(const char *amount, const char *currency, const char *metadata)
{
	static char buf[512];

	snprintf(
	    buf, sizeof(buf),
	    "{\"id\":\"pi_1\",\"object\":\"payment_intent\",\"amount\":%s,\"amount_received\":%s,"
	    "\"currency\":\"%s\",\"status\":\"succeeded\",\"metadata\":%s}",
	    amount, amount, currency, metadata);
	return buf;
}

static enum verr
st_run(const char *secret, const char *body, time_t t, time_t now, struct notify *n)
{
	char hdr[160];
	struct http_hdr h = {"Stripe-Signature", hdr};

	assert_int_equal(notify_stripe_sign_header((const uint8_t *)secret, strlen(secret),
	                                           (const uint8_t *)body, strlen(body), t, hdr,
	                                           sizeof(hdr)),
	                 0);
	return notify_stripe_verify_parse(&STM, &h, 1, (const uint8_t *)body, strlen(body), now, n,
	                                  R, sizeof(R));
}

static void
test_stripe_payment_and_secret_rotation(void **state)
{
	char *b =
	    st_event("payment_intent.succeeded", st_pi("1099", "usd", "{\"order_id\":\"A-1\"}"));
	char hdr[300], h0[160], h1[160];
	struct http_hdr h = {"stripe-signature", hdr};
	struct notify n;

	(void)state;
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_PAYMENT);
	assert_string_equal(n.event_id, "evt_1");
	assert_string_equal(n.channel_trade_no, "pi_1");
	assert_string_equal(n.out_trade_no, "A-1");
	assert_string_equal(n.currency, "USD");
	assert_int_equal(n.amount_minor, 1099);
	assert_verr(st_run("whsec_new_secret", b, T0, T0, &n), VERR_OK);
	assert_verr(st_run("whsec_third_secret", b, T0, T0, &n), VERR_SIGNATURE);
	/* During a roll Stripe sends one v1 per secret. */
	notify_stripe_sign_header((const uint8_t *)"whsec_third_secret", 18, (const uint8_t *)b,
	                          strlen(b), T0, h0, sizeof(h0));
	notify_stripe_sign_header((const uint8_t *)"whsec_new_secret", 16, (const uint8_t *)b,
	                          strlen(b), T0, h1, sizeof(h1));
	snprintf(hdr, sizeof(hdr), "%s,%s", h0, strchr(h1, ',') + 1);
	assert_verr(notify_stripe_verify_parse(&STM, &h, 1, (const uint8_t *)b, strlen(b), T0, &n,
	                                       R, sizeof(R)),
	            VERR_OK);
	free(b);
	/* Zero-decimal currencies are whole units. */
	b = st_event("payment_intent.succeeded", st_pi("500", "jpy", "{\"order_id\":\"A-2\"}"));
	assert_verr(st_run("whsec_new_secret", b, T0, T0, &n), VERR_OK);
	assert_string_equal(n.currency, "JPY");
	assert_int_equal(n.amount_minor, 500);
	free(b);
}

static void
test_stripe_checkout_and_refunds(void **state)
{
	static const char *sess =
	    "{\"id\":\"cs_1\",\"amount_total\":2000,\"currency\":\"eur\",\"payment_intent\":"
	    "\"pi_9\",\"client_reference_id\":\"A-3\",\"payment_status\":\"%s\"}";
	static const char *charge =
	    "{\"id\":\"ch_1\",\"amount\":1099,\"amount_refunded\":%d,\"currency\":\"usd\","
	    "\"payment_intent\":\"pi_1\",\"refunded\":%s,\"status\":\"succeeded\","
	    "\"metadata\":{\"order_id\":\"A-1\"}}";
	static const char *refund =
	    "{\"id\":\"re_1\",\"amount\":300,\"currency\":\"usd\",\"payment_intent\":\"pi_1\","
	    "\"charge\":\"ch_1\",\"status\":\"%s\",\"metadata\":{\"order_id\":\"A-1\"}}";
	char obj[512], *b;
	struct notify n;

	(void)state;
	snprintf(obj, sizeof(obj), sess, "paid");
	b = st_event("checkout.session.completed", obj);
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_PAYMENT);
	assert_string_equal(n.channel_trade_no, "pi_9");
	assert_string_equal(n.out_trade_no, "A-3"); /* client_reference_id without metadata */
	assert_int_equal(n.amount_minor, 2000);
	free(b);
	snprintf(obj, sizeof(obj), sess, "unpaid");
	b = st_event("checkout.session.completed", obj);
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	free(b);
	for (int full = 0; full < 2; full++) {
		snprintf(obj, sizeof(obj), charge, full ? 1099 : 500, full ? "true" : "false");
		b = st_event("charge.refunded", obj);
		assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
		assert_int_equal(n.kind, NOTIFY_REFUND);
		assert_string_equal(n.refund_no, full ? "ch_1:1099" : "ch_1:500");
		assert_int_equal(n.amount_minor, full ? 1099 : 500);
		assert_int_equal(n.refund_cumulative, 1);
		assert_string_equal(n.channel_trade_no, "pi_1");
		free(b);
	}
	snprintf(obj, sizeof(obj), refund, "succeeded");
	b = st_event("refund.updated", obj);
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_REFUND);
	assert_string_equal(n.refund_no, "re_1");
	assert_int_equal(n.amount_minor, 300);
	assert_int_equal(n.refund_cumulative, 0);
	free(b);
	snprintf(obj, sizeof(obj), refund, "pending");
	b = st_event("refund.created", obj);
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	free(b);
	b = st_event("customer.created", "{\"id\":\"cus_1\"}");
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_IGNORED);
	free(b);
}

static void
test_stripe_age_and_future_and_headers(void **state)
{
	char *b = st_event("payment_intent.succeeded", st_pi("1", "usd", "{\"order_id\":\"A\"}"));
	char hdr[160];
	struct http_hdr h[2] = {{"Stripe-Signature", hdr}, {"Stripe-Signature", hdr}};
	struct notify n;

	(void)state;
	assert_verr(st_run("whsec_old_secret", b, T0, T0 + 300, &n), VERR_OK); /* age 300 */
	assert_verr(st_run("whsec_old_secret", b, T0, T0 + 301, &n), VERR_TIMESTAMP);
	assert_verr(st_run("whsec_old_secret", b, T0, T0 - 300, &n), VERR_OK); /* 300 s ahead */
	notify_stripe_sign_header((const uint8_t *)"whsec_old_secret", 16, (const uint8_t *)b,
	                          strlen(b), T0, hdr, sizeof(hdr));
	assert_verr(notify_stripe_verify_parse(&STM, h, 0, (const uint8_t *)b, strlen(b), T0, &n, R,
	                                       sizeof(R)),
	            VERR_HEADER);
	assert_verr(notify_stripe_verify_parse(&STM, h, 2, (const uint8_t *)b, strlen(b), T0, &n, R,
	                                       sizeof(R)),
	            VERR_HEADER);
	hdr[strlen(hdr) - 1] = '\0'; /* a v1 one hex digit short */
	assert_verr(notify_stripe_verify_parse(&STM, h, 1, (const uint8_t *)b, strlen(b), T0, &n, R,
	                                       sizeof(R)),
	            VERR_HEADER);
	free(b);
}

static void
test_stripe_hostile_bodies_and_amounts(void **state)
{
	static const struct {
		const char *body;
		enum verr want;
	} cases[] = {
	    {"{\"id\":\"evt_1\",", VERR_BODY},
	    {"{\"id\":\"evt_\xff\"}", VERR_BODY},
	    {"{\"id\":\"evt_1\",\"id\":\"evt_2\"}", VERR_BODY},
	    {"{\"type\":\"payment_intent.succeeded\"}", VERR_BODY},
	};
	static const struct {
		const char *amount, *currency, *metadata;
		enum verr want;
	} pis[] = {
	    {"10.5", "usd", "{\"order_id\":\"A\"}", VERR_AMOUNT},
	    {"-1", "usd", "{\"order_id\":\"A\"}", VERR_AMOUNT},
	    {"\"100\"", "usd", "{\"order_id\":\"A\"}", VERR_AMOUNT},
	    {"100", "xxx", "{\"order_id\":\"A\"}", VERR_UNSUPPORTED},
	    {"100", "kwd", "{\"order_id\":\"A\"}", VERR_UNSUPPORTED},
	};
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		assert_verr(st_run("whsec_old_secret", cases[i].body, T0, T0, &n), cases[i].want);
	for (size_t i = 0; i < sizeof(pis) / sizeof(pis[0]); i++) {
		char *b = st_event("payment_intent.succeeded",
		                   st_pi(pis[i].amount, pis[i].currency, pis[i].metadata));

		assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), pis[i].want);
		free(b);
	}
}

static void
test_stripe_custom_order_key(void **state)
{
	char *b =
	    st_event("payment_intent.succeeded", st_pi("1", "usd", "{\"shop_order\":\"S-5\"}"));
	struct notify n;

	(void)state;
	snprintf(STM.order_key, sizeof(STM.order_key), "shop_order");
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_string_equal(n.out_trade_no, "S-5");
	STM.order_key[0] = '\0';
	assert_verr(st_run("whsec_old_secret", b, T0, T0, &n), VERR_OK);
	assert_int_equal(n.kind, NOTIFY_UNROUTABLE);
	assert_string_equal(n.unroutable, "no_order");
	free(b);
}

/* st_expect - signs body, verifies it, checks the kind and the unroutable reason. */
static void
st_expect(const char *body, enum notify_kind kind, const char *why, struct notify *n)
{
	assert_verr(st_run("whsec_old_secret", body, T0, T0, n), VERR_OK);
	if (n->kind != kind || strcmp(n->unroutable, why) != 0)
		fail_msg("%s: kind %d reason '%s', want %d '%s'", body, n->kind, n->unroutable,
		         kind, why);
}

static void
test_stripe_refund_objects_carry_their_status(void **state)
{
	static const char *types[] = {"refund.created", "refund.updated", "refund.failed",
	                              "charge.refund.updated"};
	static const struct {
		const char *status;
		enum notify_kind kind;
	} statuses[] = {{"succeeded", NOTIFY_REFUND},
	                {"failed", NOTIFY_REFUND},
	                {"canceled", NOTIFY_REFUND},
	                {"pending", NOTIFY_IGNORED},
	                {"requires_action", NOTIFY_IGNORED}};
	char obj[512], *b;
	struct notify n;

	(void)state;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++)
		for (size_t i = 0; i < sizeof(statuses) / sizeof(statuses[0]); i++) {
			/* Every second one has no PaymentIntent: the charge is then the trade. */
			snprintf(
			    obj, sizeof(obj),
			    "{\"id\":\"re_7\",\"object\":\"refund\",\"amount\":250,\"currency\":"
			    "\"usd\",%s\"charge\":\"ch_7\",\"status\":\"%s\",\"metadata\":{"
			    "\"order_id\":\"A-7\"}}",
			    i % 2 ? "" : "\"payment_intent\":\"pi_7\",", statuses[i].status);
			b = st_event(types[t], obj);
			st_expect(b, statuses[i].kind, "", &n);
			if (statuses[i].kind == NOTIFY_REFUND) {
				assert_string_equal(n.status, statuses[i].status);
				assert_string_equal(n.refund_no, "re_7");
				assert_int_equal(n.amount_minor, 250);
				assert_int_equal(n.refund_cumulative, 0);
				assert_string_equal(n.channel_trade_no, i % 2 ? "ch_7" : "pi_7");
				assert_string_equal(n.out_trade_no, "A-7");
			}
			free(b);
		}
}

static void
test_stripe_connect_test_mode_and_no_order_are_unroutable(void **state)
{
	static const char *ev = "{\"id\":\"evt_9\",\"object\":\"event\",\"type\":"
	                        "\"payment_intent.succeeded\"%s,\"data\":{\"object\":%s}}";
	static const struct {
		const char *extra, *metadata;
		int listed, test_mode;
		const char *why;
	} cases[] = {
	    {"", "{\"order_id\":\"A\"}", 0, 0, ""},
	    {",\"livemode\":true", "{\"order_id\":\"A\"}", 0, 0, ""},
	    {",\"livemode\":false", "{\"order_id\":\"A\"}", 0, 0, "test_mode"},
	    {",\"livemode\":false", "{\"order_id\":\"A\"}", 0, 1, ""},
	    {",\"account\":\"acct_other\"", "{\"order_id\":\"A\"}", 0, 0, "foreign_account"},
	    {",\"account\":\"acct_other\"", "{\"order_id\":\"A\"}", 1, 0, "foreign_account"},
	    {",\"account\":\"acct_ours\"", "{\"order_id\":\"A\"}", 1, 0, ""},
	    {",\"account\":7", "{\"order_id\":\"A\"}", 1, 0, "foreign_account"},
	    {",\"account\":null", "{\"order_id\":\"A\"}", 0, 0, ""},
	    /* A PaymentIntent of an invoice or subscription has no order number. */
	    {"", "{}", 0, 0, "no_order"},
	    {"", "{\"order_id\":\"\"}", 0, 0, "no_order"},
	    {"", "{\"order_id\":7}", 0, 0, "no_order"},
	};
	struct stripe_merchant saved = STM;
	char *b;
	struct notify n;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		STM = saved;
		STM.test_mode = cases[i].test_mode;
		if (cases[i].listed) {
			snprintf(STM.accounts[0], sizeof(STM.accounts[0]), "acct_ours");
			STM.naccounts = 1;
		}
		assert_true(
		    asprintf(&b, ev, cases[i].extra, st_pi("100", "usd", cases[i].metadata)) > 0);
		st_expect(b, cases[i].why[0] ? NOTIFY_UNROUTABLE : NOTIFY_PAYMENT, cases[i].why,
		          &n);
		assert_string_equal(n.event_id, "evt_9");
		free(b);
	}
	STM = saved;
	/* A refund made in the Dashboard has empty metadata. */
	b = st_event("refund.created", "{\"id\":\"re_d\",\"amount\":100,\"currency\":\"usd\","
	                               "\"payment_intent\":\"pi_d\",\"status\":\"succeeded\","
	                               "\"metadata\":{}}");
	st_expect(b, NOTIFY_UNROUTABLE, "no_order", &n);
	free(b);
	/* An event type we do not apply stays ignored whoever's it is. */
	b = st_event("customer.created", "{\"id\":\"cus_1\"}");
	b[strlen(b) - 1] = '\0';
	{
		char *c;

		assert_true(asprintf(&c, "%s,\"account\":\"acct_other\",\"livemode\":false}", b) >
		            0);
		st_expect(c, NOTIFY_IGNORED, "", &n);
		free(c);
	}
	free(b);
}

/* ---- key loading ----------------------------------------------------------------------- */

static void
test_keys_loaders_reject_bad_files_without_echoing_secrets(void **state)
{
	struct wx_merchant m = {0};
	struct stripe_merchant s = {0};
	char err[256], *pub = tk_pubkey_pem(K[2]);
	X509 *c = tk_self_signed(K[0], SERIAL0);
	char *cert = tk_cert_pem(c);
	const char *p;

	(void)state;
	p = temp(8, "0123456789abcdefghijklmnopqrstu\n"); /* 31 bytes */
	assert_int_equal(notify_keys_wx_apiv3_load(&m, p, err, sizeof(err)), -1);
	assert_non_null(strstr(err, p));
	assert_non_null(strstr(err, "exactly 32 bytes"));
	assert_null(strstr(err, "0123456789"));
	tk_unlink(p);
	p = temp(8, pub);
	assert_int_equal(notify_keys_wx_add(&m, p, NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "PUB_KEY_ID_"));
	assert_int_equal(notify_keys_wx_add(&m, p, "PUB_KEY_ID_12x", err, sizeof(err)), -1);
	assert_int_equal(notify_keys_wx_add(&m, p, PUBID, err, sizeof(err)), 0);
	assert_int_equal(notify_keys_wx_add(&m, p, PUBID, err, sizeof(err)), -1); /* twice */
	tk_unlink(p);
	p = temp(8, cert);
	assert_int_equal(notify_keys_wx_add(&m, p, "ABCDEF", err, sizeof(err)), -1);
	assert_non_null(strstr(err, "is not the configured"));
	assert_int_equal(notify_keys_wx_add(&m, p, NULL, err, sizeof(err)), 0);
	assert_string_equal(m.keys[1].serial, SERIAL0);
	tk_unlink(p);
	assert_int_equal(notify_keys_wx_add(&m, "/nonexistent.pem", NULL, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent.pem"));
	p = temp(8, "whsec_with space\n");
	assert_int_equal(notify_keys_stripe_add(&s, p, err, sizeof(err)), -1);
	assert_null(strstr(err, "whsec"));
	tk_unlink(p);
	p = temp(8, "\n");
	assert_int_equal(notify_keys_stripe_add(&s, p, err, sizeof(err)), -1);
	tk_unlink(p);
	notify_keys_wx_free(&m);
	notify_keys_stripe_free(&s);
	X509_free(c);
	free(cert);
	free(pub);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_wx_payment_with_cert_and_pubkey_and_rotation),
	    cmocka_unit_test(test_wx_refunds_partial_and_full),
	    cmocka_unit_test(test_wx_timestamp_skew_past_and_future),
	    cmocka_unit_test(test_wx_headers_missing_duplicated_and_odd),
	    cmocka_unit_test(test_wx_bad_signature_truncated_base64_and_probe),
	    cmocka_unit_test(test_wx_malformed_non_utf8_and_duplicate_key_bodies),
	    cmocka_unit_test(test_wx_gcm_tag_failure_wrong_key_and_algorithm),
	    cmocka_unit_test(test_wx_wrong_mchid_amounts_and_currency),
	    cmocka_unit_test(test_ali_payment_and_key_rotation),
	    cmocka_unit_test(test_ali_refunds_partial_full_and_ignored),
	    cmocka_unit_test(test_ali_hostile_forms),
	    cmocka_unit_test(test_ali_precheck_agrees_with_the_verifier),
	    cmocka_unit_test(test_ali_non_utf8_wrong_app_and_amounts),
	    cmocka_unit_test(test_stripe_payment_and_secret_rotation),
	    cmocka_unit_test(test_stripe_checkout_and_refunds),
	    cmocka_unit_test(test_stripe_age_and_future_and_headers),
	    cmocka_unit_test(test_stripe_hostile_bodies_and_amounts),
	    cmocka_unit_test(test_stripe_custom_order_key),
	    cmocka_unit_test(test_stripe_refund_objects_carry_their_status),
	    cmocka_unit_test(test_stripe_connect_test_mode_and_no_order_are_unroutable),
	    cmocka_unit_test(test_wx_merchant_binding_direct_partner_and_appids),
	    cmocka_unit_test(test_ali_foreign_app_and_seller_are_unroutable),
	    cmocka_unit_test(test_keys_loaders_reject_bad_files_without_echoing_secrets),
	};

	return cmocka_run_group_tests_name("channels_gen", tests, setup, teardown);
}
