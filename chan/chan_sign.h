/*
 * chan_sign - how paycb signs its requests to the channels and authenticates their answers,
 * with no network: the pure byte-level half of the outbound channel clients.
 *
 * WeChat Pay APIv3: the Authorization header over "METHOD\nURL\nts\nnonce\nbody\n" and the
 * response signature over "ts\nnonce\nbody\n" with the platform keys. Alipay OpenAPI: RSA2
 * over the sorted request parameters, and the response signature over the raw text of the
 * "<method>_response" node exactly as it appears in the body. Stripe: no signatures, only the
 * form encoding of nested parameters that the SDKs use.
 *
 * The server halves (verify a request, sign a response) are here as well, for the tests and
 * the simulator, so that both sides are one implementation checked against the SDK vectors.
 * Every function returns 0 on success and -1 on failure unless stated otherwise; none logs.
 * The specification is docs/channels.md.
 */
#ifndef PAYCB_CHAN_SIGN_H
#define PAYCB_CHAN_SIGN_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>
#include <openssl/evp.h>

/* Why an answer or a request did not authenticate. */
enum chan_vr {
	CHAN_VR_OK = 0,
	CHAN_VR_MISSING,   /* a signature header or field is absent or empty */
	CHAN_VR_MALFORMED, /* present but not parseable (header syntax, base64, JSON) */
	CHAN_VR_SKEW,      /* the signed timestamp is too far from now */
	CHAN_VR_KEY,       /* no configured key has this serial or id */
	CHAN_VR_SIGNATURE, /* the signature does not verify */
};
/* "ok", "missing", "malformed", "skew", "key", "signature". */
const char *chan_vr_name(enum chan_vr);

/* A public key with the id the channel names it by (certificate serial, PUB_KEY_ID_...). */
struct chan_pubkey {
	const char *id;
	EVP_PKEY *pkey; /* borrowed: the caller owns and frees it */
};

/* WeChat Pay's response and request timestamps are refused at |now - ts| >= this. */
#define CHAN_WX_SKEW_DEFAULT 300
/* Room for the Authorization header: five fields plus a 4096-bit signature in base64. */
#define CHAN_WX_AUTH_MAX 1024

/* ---- WeChat Pay APIv3 ---------------------------------------------------------------- */

/* A nonce of 32 characters from [0-9A-Za-z] (as wechatpay-go and -java make them). */
int chan_wx_nonce(char out[33]);

/*
 * The canonical URL of a request: the absolute URL with scheme and authority removed, i.e.
 * the raw path plus "?query" exactly as sent. *out points into url; "/" when url has no path.
 */
int chan_wx_canonical_url(const char *url, const char **out);

/* The message a request signature covers: "METHOD\nURL\nts\nnonce\nbody\n" (free it). */
int chan_wx_request_message(const char *method, const char *canonical_url, long long ts,
                            const char *nonce, const uint8_t *body, size_t blen, char **msg,
                            size_t *mlen);

/*
 * The whole Authorization header value, "WECHATPAY2-SHA256-RSA2048 mchid=\"...\",nonce_str=...,
 * timestamp=...,serial_no=...,signature=...", signed with the merchant's API private key over
 * exactly these bytes. canonical_url is what chan_wx_canonical_url() gives for the URL sent.
 */
int chan_wx_authorization(EVP_PKEY *merchant_key, const char *mchid, const char *serial,
                          const char *method, const char *canonical_url, long long ts,
                          const char *nonce, const uint8_t *body, size_t blen, char *out,
                          size_t outcap);

/*
 * Verifies a 2xx answer: the four Wechatpay-* header values (NULL when absent), the raw
 * body (empty for 204), the platform keys, and the clock. The key is chosen by serial:
 * "PUB_KEY_ID_..." ids match exactly, certificate serials as hex numbers (leading zeros and
 * case ignored). skew_s <= 0 means CHAN_WX_SKEW_DEFAULT.
 */
enum chan_vr chan_wx_verify_response(const struct chan_pubkey *keys, int nkeys, int skew_s,
                                     const char *timestamp, const char *nonce,
                                     const char *signature, const char *serial, const uint8_t *body,
                                     size_t blen, time_t now);

/* Server side: the Wechatpay-Signature value (base64, free it) for an answer. */
int chan_wx_sign_response(EVP_PKEY *platform_key, long long ts, const char *nonce,
                          const uint8_t *body, size_t blen, char **signature);

/*
 * Server side: checks a request's Authorization header (scheme, all five fields once each,
 * the mchid and serial expected, the timestamp within skew_s, the signature with the
 * merchant's public key) against the method, canonical URL and raw body received.
 */
enum chan_vr chan_wx_verify_request(EVP_PKEY *merchant_pub, const char *mchid, const char *serial,
                                    const char *authorization, const char *method,
                                    const char *canonical_url, const uint8_t *body, size_t blen,
                                    time_t now, int skew_s);

/* ---- Alipay OpenAPI (gateway, RSA2) ---------------------------------------------------- */

/* One request parameter as decoded text. */
struct chan_kv {
	const char *k;
	const char *v;
};

/*
 * The string an Alipay request signature covers: every parameter except "sign" with a
 * non-empty value (sign_type included), sorted by name bytes, joined as k=v with '&', raw
 * (not URL-encoded). Free *out. Fails on a duplicated name.
 */
int chan_ali_sign_content(const struct chan_kv *params, size_t n, char **out, size_t *outlen);
/* RSA2 (SHA256withRSA) of that string with the app private key, as base64 (free it). */
int chan_ali_sign_params(EVP_PKEY *app_key, const struct chan_kv *params, size_t n, char **sign);
/* Server side: verifies a request's "sign" parameter with the app public key. */
enum chan_vr chan_ali_verify_params(EVP_PKEY *app_pub, const struct chan_kv *params, size_t n);

/* The node an answer's signature covers, located in the raw body. */
struct chan_ali_node {
	const char *text; /* points into the body: from '{' to its matching '}' */
	size_t len;
	int is_error; /* 1 when the node found was "error_response" */
};

/*
 * Finds "<method with '.' as '_'>_response" (else "error_response") in the raw body and its
 * value's extent by brace matching that honours strings and escapes, as the Java SDK does.
 * Fails when no node is found, its value is not an object, it is unterminated, or the node
 * name occurs again after it.
 */
int chan_ali_response_node(const uint8_t *body, size_t blen, const char *method,
                           struct chan_ali_node *node);

/*
 * Verifies an answer: the node as above, the top-level "sign" (the body must be one JSON
 * object without duplicated keys), RSA2 with one of the Alipay public keys over the node's
 * raw text, and, as the Java SDK does, over the text with "\/" read as "/" when the raw text
 * fails. On CHAN_VR_OK *node is the verified extent.
 */
enum chan_vr chan_ali_verify_response(EVP_PKEY *const *alipay_keys, int nkeys, const uint8_t *body,
                                      size_t blen, const char *method, struct chan_ali_node *node);

/* Server side: {"<method>_response":<node_json>,"sign":"..."} (free *body). */
int chan_ali_sign_response(EVP_PKEY *alipay_key, const char *method, const char *node_json,
                           char **body);

/* "yyyy-MM-dd HH:mm:ss" in China Standard Time (UTC+8), as the Java SDK sends it. */
int chan_ali_timestamp(time_t t, char out[20]);

/* ---- Stripe ------------------------------------------------------------------------------ */

/*
 * Form-encodes a JSON object as stripe-node does: nested objects as a[b][c]=v, arrays as
 * a[0][b]=v, null as "a=", true/false as text, integers in decimal; keys and values
 * percent-encoded except A-Za-z0-9 "-_.~" (space is %20, upper-case hex), with '[' and ']'
 * left literal. Reals are refused: amounts are integers. Free *out.
 */
int chan_stripe_form(json_t *params, char **out);

#endif
