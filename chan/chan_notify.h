/*
 * chan_notify - the inbound half of the channel library: what a channel is to paycb, as one
 * table of operations per channel (struct chan_notify_ops: its name, key loading, cheap
 * precheck, verify and parse, its answers, and the signing the simulator and tests use), plus
 * what the channels share: the parsed notification, the rejection reasons, the per-merchant
 * key material and each channel's own entry points (for the vectors and the fuzzers).
 *
 * Files: chan_notify_table.c (the lookup in the table the build generates from the channel
 * files, and the channels' merchant settings through it, chan_conf.h), chan_notify.c (the helpers
 * the channels share), chan_notify_keys.c (key files), one chan_notify_<channel>.c per channel (its
 * operations), and chan_notify_wx_sign.c (WeChat Pay's signer, which does not fit beside its
 * verifier).
 *
 * A verifier takes the raw request (headers and body bytes exactly as received), checks its
 * authenticity first and only then parses it into a struct notify. Nothing here logs; the
 * caller logs the notify_verr_name() label, the reason text, lengths and body hashes.
 */
#ifndef PAYCB_CHAN_NOTIFY_H
#define PAYCB_CHAN_NOTIFY_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <openssl/evp.h>

struct conf;           /* common/conf.h */
struct conf_merchant;  /* common/conf.h */
struct conf_chan_decl; /* common/conf.h */
struct cfg_strs;       /* common/cfg.h */
struct form;           /* common/form.h */
struct json_t;         /* jansson */

/*
 * NOTIFY_UNROUTABLE: authentic, and a payment or refund, but not one this merchant can apply:
 * no order number, or another merchant's (mchid, sub_mchid, appid, app_id, seller_id, Connect
 * account), or a test-mode event for a live merchant. notify.unroutable says which.
 */
enum notify_kind {
	NOTIFY_PAYMENT = 1,
	NOTIFY_REFUND = 2,
	NOTIFY_IGNORED = 3,
	NOTIFY_UNROUTABLE = 4
};

/* Why a request was rejected; used for metrics labels (see notify_verr_name()). */
enum verr {
	VERR_OK = 0,
	VERR_HEADER,      /* missing, duplicated, malformed header */
	VERR_TIMESTAMP,   /* outside the channel's tolerance */
	VERR_SERIAL,      /* unknown key id */
	VERR_SIGNATURE,   /* signature or MAC does not verify, or is not decodable */
	VERR_DECRYPT,     /* AEAD failure, malformed ciphertext or nonce */
	VERR_BODY,        /* malformed JSON/form, non-UTF-8, missing field */
	VERR_AMOUNT,      /* amount not a non-negative integer/decimal within MONEY_MAX_MINOR */
	VERR_UNSUPPORTED, /* sign_type not RSA2, algorithm not AEAD_AES_256_GCM, unknown currency */
	VERR_AMBIGUOUS,   /* an Alipay body whose signed string reads as other parameters too */
	VERR_COUNT
};
/* "ok", "header", "timestamp", "serial", "signature", "decrypt", "body", "amount",
 * "unsupported", "ambiguous"; "unknown" for anything else. */
const char *notify_verr_name(enum verr);

struct http_hdr {
	const char *name; /* as received; may contain duplicates; NUL-terminated */
	const char *value;
};

/* Bodies larger than this are rejected as VERR_BODY before any crypto is done. */
#define NOTIFY_BODY_MAX          (1024 * 1024)
#define NOTIFY_STR               128
#define NOTIFY_TOLERANCE_DEFAULT 300
/* Most entries of a merchant's allow-lists (sub_mchids, appids, Connect accounts). */
#define NOTIFY_LIST_MAX 16

/*
 * One verified notification. Ids are the channels' own: event_id is the WeChat envelope id,
 * the Alipay notify_id or the Stripe evt_ id; channel_trade_no is the WeChat transaction_id,
 * the Alipay trade_no or the Stripe PaymentIntent id (the charge id for a charge without
 * one). For refunds refund_no is the channel's refund id (WeChat refund_id, Alipay out_biz_no
 * or else "<trade_no>-<gmt_refund>", Stripe re_ id or "<charge id>:<amount_refunded>"). One
 * refund id can come with several statuses (WeChat SUCCESS, ABNORMAL, CLOSED; Stripe
 * succeeded, failed, canceled): status carries the channel's word verbatim, and the refund
 * log's unique key includes it, so a status that advances is a new row and a copy of the same
 * status is a duplicate.
 */
struct notify {
	enum notify_kind kind;
	char event_id[NOTIFY_STR];
	char event_type[64]; /* TRANSACTION.SUCCESS, trade_status_sync, payment_intent.succeeded */
	char channel_trade_no[NOTIFY_STR];
	char out_trade_no[NOTIFY_STR]; /* the merchant's order number */
	char refund_no[NOTIFY_STR];
	/* Refunds: the merchant's refund request number (wx out_refund_no, alipay out_biz_no). */
	char merchant_refund_no[NOTIFY_STR];
	char status[32];     /* trade_state / trade_status / refund_status / stripe status */
	char unroutable[32]; /* NOTIFY_UNROUTABLE: the reason (no_order, foreign_mchid, ...) */
	/* Payment: the amount paid; refund: this refund, or the refunded total when cumulative. */
	int64_t amount_minor;
	int refund_cumulative;     /* alipay refund_fee and stripe charge.refunded are totals */
	int64_t order_total_minor; /* when a refund says it (wx amount.total), else -1 */
	char currency[4];          /* upper-case ISO 4217 */
	/* The seconds of "now" for which the time check passed (the whole range without one). */
	int64_t valid_from, valid_to;
};

struct wx_key {
	char serial[80]; /* platform cert serial (hex) or PUB_KEY_ID_... */
	EVP_PKEY *pkey;
};
struct wx_merchant {
	char mchid[40];    /* direct mode: the notification's mchid; partner mode: a sub_mchid */
	char sp_mchid[40]; /* partner mode's service provider; "" = partner mode is not ours */
	char sub_mchids[NOTIFY_LIST_MAX][40]; /* more sub-merchants served in partner mode */
	int nsub_mchids;
	char appids[NOTIFY_LIST_MAX][40]; /* allowed app ids; none = not checked */
	int nappids;
	uint8_t apiv3_key[32];
	size_t apiv3_key_len;   /* 32; 16 (AES-128) only for the official Go test vector */
	uint8_t apiv3_prev[32]; /* during a rotation: the key being replaced, tried second */
	size_t apiv3_prev_len;  /* 0 = none */
	struct wx_key keys[8];
	int nkeys;
	int tolerance_s; /* 300; <= 0 means 300 */
};
struct ali_merchant {
	char app_id[40];
	char seller_id[40]; /* "" = not checked */
	EVP_PKEY *keys[4];
	int nkeys;
};
struct stripe_secret {
	uint8_t *bytes;
	size_t len;
};
struct stripe_merchant {
	struct stripe_secret secrets[4];
	int nsecrets;
	int tolerance_s;    /* 300; <= 0 means 300 */
	char order_key[64]; /* metadata key carrying the order number; "" means "order_id" */
	char accounts[NOTIFY_LIST_MAX][64]; /* Connect accounts whose events are ours */
	int naccounts;
	int test_mode; /* livemode:false events are ours too */
};

/* One request as the HTTP front received it: headers and body bytes exactly as they came. */
struct chan_req {
	const struct http_hdr *hdrs;
	size_t nhdrs;
	const uint8_t *body;
	size_t len;
	time_t now; /* when it arrived, for the timestamp checks */
};

/*
 * The key material a channel signs with, as the simulator and tests hold it: WeChat Pay's
 * platform private key, key_id (the certificate serial or PUB_KEY_ID_...) and the 32-byte
 * APIv3 key as secret; Alipay's private key; Stripe's endpoint secret.
 */
struct chan_signer {
	EVP_PKEY *priv;
	const char *key_id;
	const uint8_t *secret;
	size_t secret_len;
};

/*
 * What to sign, in the channel's own terms: WeChat Pay's event type and the resource's
 * plaintext JSON; Alipay's parameters without sign, form-encoded; Stripe's event JSON.
 * content is NUL-terminated.
 */
struct chan_sign_in {
	const char *event_type; /* WeChat Pay only */
	const char *content;
	time_t ts;
};

/* A signed notification: a new body (free it) and the header lines ("Name: value\r\n"). */
#define CHAN_SIGNED_HEADERS_MAX 1024
struct chan_signed {
	char *body;
	size_t len;
	char headers[CHAN_SIGNED_HEADERS_MAX];
};

/*
 * What paycb knows of one channel's notifications. keys is what keys_load made for one
 * merchant (a struct wx_merchant, ali_merchant, stripe_merchant). Adding a channel is one
 * chan_notify_<channel>.c defining one of these at file scope, on one line that starts
 * `const struct chan_notify_ops notify_<channel>_ops = {`: the build finds it there and
 * puts it in chan_notify_table.
 */
struct chan_notify_ops {
	const char *name; /* the URL segment, the channel column, the metrics label */
	/* Its merchant settings: the group named name in a merchant (chan_conf.h). */
	const struct conf_chan_decl *conf;
	/* A merchant's keys from the configuration: *keys stays NULL when cm does not use the
	 * channel; err names the file and the problem, never a secret. After a failure *keys
	 * may hold what was loaded so far: the caller frees it with keys_free either way. */
	int (*keys_load)(const struct conf *cf, const struct conf_merchant *cm, void **keys,
	                 char *err, size_t errlen);
	void (*keys_free)(void *keys); /* wipes the secrets; NULL is a no-op */
	/* "label=count ..." of what keys holds, for the keys_loaded log line; keys may be NULL. */
	void (*keys_describe)(const void *keys, char *buf, size_t cap);
	/* The cheap checks of a complete request (see notify_wx_precheck) and the full
	 * verification. */
	enum verr (*precheck)(const void *keys, const struct chan_req *req, char *reason,
	                      size_t rlen);
	enum verr (*verify_parse)(const void *keys, const struct chan_req *req, struct notify *out,
	                          char *reason, size_t rlen);
	/* The HTTP status of a success (ok) or of a rejection for ve. */
	unsigned (*status)(int ok, enum verr ve);
	/* Writes the answer's body (success, or a failure labelled msg); returns its type. */
	const char *(*answer)(int ok, const char *msg, char *body, size_t cap);
	/* Whether the channel takes an answer as received (the simulator's side of answer). */
	int (*acknowledged)(unsigned status, const char *body);
	/* Signs as the channel does; 0 or -1. */
	int (*sign)(const struct chan_signer *s, const struct chan_sign_in *in,
	            struct chan_signed *out);
};

/* The most channels one build may have (the size of ingest's per-channel arrays). */
#define CHAN_NOTIFY_MAX 8
/*
 * Every channel, in the order of their channel files' names, which is also the order of
 * their metrics and log labels: chan_notify_count entries. The build generates both from the
 * channel files (chan_notify_table_gen.c); nothing stores a channel's index, only its name.
 */
extern const struct chan_notify_ops *const chan_notify_table[];
extern const int chan_notify_count;
/* The index in chan_notify_table of the channel called name, or -1. */
int chan_notify_find(const char *name);
/* The name of entry i of the table, "unknown" out of range. */
const char *chan_notify_name(int i);

/*
 * The existing channels' own entry points, for their vectors, fuzzers and the simulator; a
 * new channel needs none of them.
 */
extern const struct chan_notify_ops notify_wx_ops, notify_ali_ops, notify_stripe_ops;
/*
 * Each verifies the raw body and headers, then parses it into *out. reason gets a short human
 * message (never a secret, never body content beyond field names). On any result other than
 * VERR_OK *out must not be used.
 */
/*
 * Cheap checks of a request's shape, run by the HTTP front before a request takes a slot:
 * headers present and well-formed, a fresh WeChat timestamp, a known serial and a signature
 * of the key's length, an Alipay body of at most ALI_PARAMS_MAX (64) parameters whose sign is
 * base64 of the length of one of the merchant's keys' signatures. Each is a
 * subset of its verifier with the same verdict, so a request refused here would have been
 * refused there with the same answer. No RSA, no MAC, no parsing of the body.
 */
enum verr notify_wx_precheck(const struct wx_merchant *, const struct http_hdr *, size_t nhdrs,
                             time_t now, char *reason, size_t rlen);
enum verr notify_ali_precheck(const struct ali_merchant *, const uint8_t *body, size_t len,
                              char *reason, size_t rlen);
enum verr notify_stripe_precheck(const struct http_hdr *, size_t nhdrs, char *reason, size_t rlen);
enum verr notify_wx_verify_parse(const struct wx_merchant *, const struct http_hdr *, size_t nhdrs,
                                 const uint8_t *body, size_t len, time_t now, struct notify *out,
                                 char *reason, size_t rlen);
enum verr notify_ali_verify_parse(const struct ali_merchant *, const uint8_t *body, size_t len,
                                  struct notify *out, char *reason, size_t rlen);
enum verr notify_stripe_verify_parse(const struct stripe_merchant *, const struct http_hdr *,
                                     size_t nhdrs, const uint8_t *body, size_t len, time_t now,
                                     struct notify *out, char *reason, size_t rlen);

/*
 * Decrypts the resource of a WeChat notification body into a new buffer *plain (free it)
 * WITHOUT checking the signature: for tests and operator tools only, never for ingest.
 */
enum verr notify_wx_decrypt_body(const struct wx_merchant *, const uint8_t *body, size_t len,
                                 uint8_t **plain, size_t *plen, char *reason, size_t rlen);

/*
 * Builds Alipay's string to sign from decoded parameters: every parameter except "sign"
 * (and except "sign_type" unless keep_sign_type, which gives the "V2" rule), sorted by name
 * bytes, joined as name=value with '&'. Alipay requests (chan_ali_sign_content) are signed
 * over the same string, with keep_sign_type. *out is a new buffer (free it). Returns 0 or -1.
 */
int notify_ali_sign_content(const struct form *params, int keep_sign_type, char **out,
                            size_t *outlen);

/*
 * Signing side, used by the simulator (paycb-sim) and tests so their notifications go through
 * exactly the verifier above. They produce headers/body as the real channel would. Each
 * returns 0 or -1; outputs that are char ** are new buffers to free.
 */
int notify_wx_sign(EVP_PKEY *platform_priv, const char *serial, const uint8_t apiv3_key[32],
                   const char *event_type, const char *resource_plaintext_json, time_t ts,
                   /* out */ char **body, char hdr_timestamp[24], char hdr_nonce[40],
                   char **hdr_signature);
int notify_ali_sign(EVP_PKEY *alipay_priv, /* params without sign */ const char *const *keys,
                    const char *const *values, size_t n,
                    char **form_body /* urlencoded, with sign_type=RSA2&sign=... */);
int notify_stripe_sign_header(const uint8_t *secret, size_t len, const uint8_t *body, size_t blen,
                              time_t t, char *hdr, size_t hlen);

/*
 * notify_keys_*: load merchant keys from files. Each returns 0 or -1 with err naming the file and
 * what is wrong (never the secret).
 *
 * notify_keys_wx_add: a platform certificate PEM (serial taken from the certificate; key_id, if not
 * NULL, must name the same serial) or a WeChat Pay public-key PEM, whose key_id must be its
 * "PUB_KEY_ID_<digits>". notify_keys_wx_apiv3_load: exactly 32 bytes after trimming one trailing
 * newline; notify_keys_wx_apiv3_previous: the same for the key a rotation replaces.
 * notify_keys_ali_add: an Alipay public key (PEM, bare base64 or certificate).
 * notify_keys_stripe_add: an endpoint secret, one trailing newline trimmed.
 */
int notify_keys_wx_add(struct wx_merchant *m, const char *path, const char *key_id, char *err,
                       size_t errlen);
int notify_keys_wx_apiv3_load(struct wx_merchant *m, const char *path, char *err, size_t errlen);
int notify_keys_wx_apiv3_previous(struct wx_merchant *m, const char *path, char *err,
                                  size_t errlen);
int notify_keys_ali_add(struct ali_merchant *m, const char *path, char *err, size_t errlen);
int notify_keys_stripe_add(struct stripe_merchant *m, const char *path, char *err, size_t errlen);
/* Free every key and wipe every secret; the struct is zeroed and may be reused. NULL is a
 * no-op. */
void notify_keys_wx_free(struct wx_merchant *m);
void notify_keys_ali_free(struct ali_merchant *m);
void notify_keys_stripe_free(struct stripe_merchant *m);

/*
 * Helpers shared by the channel parsers (defined in chan_notify.c). Each enum verr helper
 * writes reason itself; path/key name the field in messages ("amount" "total").
 */
/* The start of every verify_parse: *n initialised, reason emptied, and VERR_BODY for a body
 * that is missing or larger than NOTIFY_BODY_MAX. */
enum verr notify_begin(struct notify *n, const uint8_t *body, size_t len, char *reason,
                       size_t rlen);
/* Marks n unroutable for reason why (a short label); returns VERR_OK. */
enum verr notify_unroutable(struct notify *n, const char *why);
/* Whether s is one of the n entries of list (each cap bytes). */
int notify_listed(const char *list, size_t cap, int n, const char *s);
int notify_copy(char *dst, size_t cap, const char *src, size_t len);
enum verr notify_json_load(const uint8_t *p, size_t n, struct json_t **out, char *reason,
                           size_t rlen);
enum verr notify_json_str(const struct json_t *obj, const char *path, const char *key, char *dst,
                          size_t cap, int required, char *reason, size_t rlen);
enum verr notify_json_amount(const struct json_t *obj, const char *path, const char *key,
                             int64_t *out, char *reason, size_t rlen);
enum verr notify_currency(const char *code, char dst[4], char *reason, size_t rlen);
/* How often the header (name case-insensitive) occurs; *val and *vlen get the first occurrence's
 * value with surrounding spaces and tabs trimmed. */
int notify_header(const struct http_hdr *h, size_t n, const char *name, const char **val,
                  size_t *vlen);
/* 200 for a success, 400 for any rejection: the status of every channel that reads no more. */
unsigned notify_status_plain(int ok, enum verr ve);
/* A zeroed key struct of size bytes for a keys_load, or NULL with err set. */
void *notify_keys_alloc(size_t size, char *err, size_t errlen);
/* A configured list into a verifier's table of at most NOTIFY_LIST_MAX entries of cap bytes. */
void notify_list_copy(char *dst, size_t cap, int *n, const struct cfg_strs *src);
/* notify_wx_sign's signature as the WeChat Pay operation (chan_notify_wx_sign.c). */
int notify_wx_sign_op(const struct chan_signer *s, const struct chan_sign_in *in,
                      struct chan_signed *out);

#endif
