/*
 * chan_client - paycb's outbound calls to WeChat Pay APIv3, Alipay OpenAPI and Stripe: query a
 * payment by the merchant's order number, submit a refund, query a refund, close an order.
 *
 * One client is one merchant on one channel: its keys, its base URL, one libcurl handle whose
 * connections are reused, and the token bucket shared by every client of the same merchant
 * and channel in the process. A client is used by one thread at a time.
 *
 * Every call signs its request as the channel requires, authenticates the answer before
 * believing any of it, and classifies the result (enum chan_outcome). The rule that matters
 * most: CHAN_UNKNOWN means the request may have taken effect; the caller must find out with a
 * query and must never send a new request in its place. Idempotency keys are derived from the
 * request (WeChat out_refund_no, Alipay out_request_no, Stripe Idempotency-Key), so a retry of
 * the same refund can never refund twice. Amounts are int64 minor units. Nothing here logs;
 * the result carries codes and short texts that never contain a secret or a body.
 * docs/channels.md has the decisions behind each rule.
 */
#ifndef PAYCB_CHAN_CLIENT_H
#define PAYCB_CHAN_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include <openssl/evp.h>

#include "chan_result.h"
#include "chan_sign.h"

enum chan_id { CHAN_WXPAY = 1, CHAN_ALIPAY = 2, CHAN_STRIPE = 3 };
/* "wxpay", "alipay", "stripe". */
const char *chan_id_name(enum chan_id);

#define CHAN_STR 128

/* Payment state, mapped from trade_state / trade_status / PaymentIntent status. */
enum chan_pay_state {
	CHAN_PAY_NONE = 0, /* the channel knows no such order (as a verified answer) */
	CHAN_PAY_NOTPAY,   /* created, not paid, still payable */
	CHAN_PAY_PAYING,   /* the user is paying or the payment is processing */
	CHAN_PAY_PAID,     /* paid (including later refunded: WeChat REFUND, Alipay FINISHED) */
	CHAN_PAY_CLOSED,   /* closed or cancelled unpaid (Alipay TRADE_CLOSED also when refunded) */
	CHAN_PAY_FAILED,   /* payment failed or revoked */
};

enum chan_refund_state {
	CHAN_REFUND_NONE = 0, /* the channel has no refund with this number */
	CHAN_REFUND_PENDING,  /* accepted, not settled (query later) */
	CHAN_REFUND_SUCCEEDED,
	CHAN_REFUND_FAILED,   /* final for this refund number */
	CHAN_REFUND_ABNORMAL, /* WeChat ABNORMAL: needs an operator, not final */
};

struct chan_payment {
	enum chan_pay_state state;
	char status[32];                 /* the channel's own word */
	char channel_trade_no[CHAN_STR]; /* transaction_id / trade_no / PaymentIntent id */
	char out_trade_no[CHAN_STR];
	int64_t amount_minor; /* order amount; -1 when the answer has none */
	char currency[4];
};

struct chan_refund {
	enum chan_refund_state state;
	char status[32];
	char refund_id[CHAN_STR];     /* WeChat refund_id, Stripe re_; Alipay has none */
	char out_refund_no[CHAN_STR]; /* ours */
	int64_t amount_minor;         /* this refund; -1 when the answer has none */
	int64_t refunded_total_minor; /* Alipay refund_fee (all refunds of the trade), else -1 */
	char currency[4];
};

/* What names an order: ours always, the channel's when known (Stripe needs it to close). */
struct chan_order_ref {
	const char *out_trade_no;
	const char *channel_trade_no; /* NULL or "" when unknown */
};

struct chan_refund_req {
	struct chan_order_ref order;
	const char *out_refund_no; /* the idempotency key: the same refund always the same */
	int64_t amount_minor;
	int64_t total_minor; /* the order amount (WeChat requires it) */
	const char *currency;
	const char *reason;     /* optional; Stripe takes only duplicate/fraudulent/... */
	const char *notify_url; /* optional (WeChat, Alipay) */
};

struct chan_refund_ref {
	struct chan_order_ref order;
	const char *out_refund_no;
	const char *refund_id; /* optional: the channel's id (Stripe re_) when known */
};

/* Keys per channel. Every EVP_PKEY is borrowed: the caller keeps it alive. */
struct chan_wx_cred {
	const char *mchid;
	EVP_PKEY *merchant_key;             /* apiclient_key.pem */
	const char *merchant_serial;        /* the merchant API certificate's serial */
	const struct chan_pubkey *platform; /* platform certificates or WeChat Pay public keys */
	int nplatform;
	int skew_s; /* 0: CHAN_WX_SKEW_DEFAULT */
};
struct chan_ali_cred {
	const char *app_id;
	EVP_PKEY *app_key;            /* the app private key */
	EVP_PKEY *const *alipay_keys; /* Alipay public keys (more than one during a rotation) */
	int nalipay;
};
struct chan_stripe_cred {
	const char *secret_key;  /* sk_... or rk_...; never logged */
	const char *api_version; /* NULL: CHAN_STRIPE_VERSION */
	const char *order_key;   /* metadata key holding our order number; NULL: "order_id" */
};

#define CHAN_STRIPE_VERSION "2026-07-29.dahlia"

struct chan_client_conf {
	enum chan_id channel;
	const char *merchant_id; /* ours; names the rate-limit bucket */
	/* The channel's base URL without a trailing slash: "https://api.mch.weixin.qq.com",
	 * "https://openapi.alipay.com/gateway.do", "https://api.stripe.com". */
	const char *base_url;
	const char *ca_file;     /* NULL: the system's CA store */
	const char *proxy;       /* NULL: none (and no proxy from the environment) */
	long connect_timeout_ms; /* 0: 3000 */
	long total_timeout_ms;   /* 0: 15000 */
	int allow_http;          /* 1 only for loopback tests and the simulator */
	double rate_per_s;       /* token-bucket refill; 0: 10 per second */
	double rate_burst;       /* bucket size; 0: rate_per_s */
	long rate_wait_max_ms;   /* wait this long for a token, then CHAN_RETRY; 0: 1000 */
	const char *user_agent;  /* NULL: "paycb/<version>" */
	struct chan_wx_cred wx;
	struct chan_ali_cred ali;
	struct chan_stripe_cred stripe;
};

struct chan_client;

/* Creates a client (validating the configuration); err names the problem, never a key. */
int chan_client_new(const struct chan_client_conf *, struct chan_client **out, char *err,
                    size_t errlen);
void chan_client_free(struct chan_client *);
enum chan_id chan_client_channel(const struct chan_client *);

/*
 * The four calls. Each returns 0 when res->outcome is CHAN_OK and -1 otherwise; res is always
 * filled, and the typed struct only on CHAN_OK.
 *
 * chan_query_payment: by out_trade_no (WeChat, Alipay); Stripe retrieves the PaymentIntent
 * when channel_trade_no is given, else searches metadata[order_key] (eventually consistent:
 * a search may miss a PaymentIntent for up to a minute; state NONE then is not proof).
 * chan_refund: submits with the idempotency key derived from out_refund_no.
 * chan_query_refund: by out_refund_no (Stripe: the refund id when known, else the refunds of
 * the PaymentIntent carrying metadata[paycb_refund_no]); state NONE when the channel has none.
 * chan_close: closes an unpaid order (Stripe cancels its PaymentIntents); a paid order gives
 * CHAN_FINAL with the channel's code (Stripe "order_paid").
 */
int chan_query_payment(struct chan_client *, const struct chan_order_ref *, struct chan_payment *,
                       struct chan_result *);
int chan_refund(struct chan_client *, const struct chan_refund_req *, struct chan_refund *,
                struct chan_result *);
int chan_query_refund(struct chan_client *, const struct chan_refund_ref *, struct chan_refund *,
                      struct chan_result *);
int chan_close(struct chan_client *, const struct chan_order_ref *, struct chan_result *);

/*
 * The authenticated answer behind the last chan_query_payment that returned CHAN_OK: WeChat
 * Pay's body exactly as received and verified; for Alipay the verified response node and for
 * Stripe the PaymentIntent, each serialised again from the parsed answer (the bytes are not
 * kept there). NULL after any other outcome. Valid until the client's next call; the
 * reconciler keeps it as the raw body of a payment it recovers by query.
 */
const char *chan_last_answer(const struct chan_client *, size_t *len);

#endif
