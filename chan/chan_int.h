/*
 * chan_int - what the modules of chan/ share and callers do not see: the result helper
 * (chan_result.c), the libcurl transport (chan_http.c), the token buckets (chan_rate.c), the
 * client struct and the per-channel operations table (chan_client.c, chan_wx.c, chan_ali.c,
 * chan_stripe.c).
 */
#ifndef PAYCB_CHAN_INT_H
#define PAYCB_CHAN_INT_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "chan_client.h"

/* Answers larger than this are not read to the end (a hostile or broken peer). */
#define CHAN_BODY_MAX (1024 * 1024)
#define CHAN_HDR_MAX  48

/* ---- results (chan_result.c) ---------------------------------------------------------- */

/* Sets the outcome, code and a formatted detail; returns 0 for CHAN_OK, else -1. */
int chan_res(struct chan_result *, enum chan_outcome, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* ---- transport (chan_http.c) ---------------------------------------------------------- */

struct chan_http;

struct chan_http_conf {
	const char *ca_file, *proxy, *user_agent;
	long connect_timeout_ms, total_timeout_ms;
	int allow_http;
};

struct chan_http_req {
	const char *method; /* GET or POST */
	const char *url;
	const char *const *headers; /* "Name: value" lines */
	size_t nheaders;
	const uint8_t *body;
	size_t blen;
};

struct chan_http_hdr {
	char *name, *value; /* NUL-terminated; point into the response's storage */
};

struct chan_http_resp {
	long status;
	struct chan_http_hdr hdrs[CHAN_HDR_MAX];
	size_t nhdrs;
	int hdr_overflow; /* more headers than CHAN_HDR_MAX, or a header line too long */
	uint8_t *body;    /* NUL-terminated after blen bytes */
	size_t blen, bcap;
	int body_overflow;
};

int chan_http_new(const struct chan_http_conf *, struct chan_http **out, char *err, size_t errlen);
void chan_http_free(struct chan_http *);

/*
 * Sends one request. Returns 0 when a complete answer arrived (any status; *resp filled);
 * otherwise -1 with res classified: CHAN_RETRY when the request provably was not sent
 * (connect, resolve, TLS), CHAN_UNKNOWN when it may have been (timeout or reset after the
 * request left, truncated or oversized answer).
 */
int chan_http_do(struct chan_http *, const struct chan_http_req *, struct chan_http_resp *,
                 struct chan_result *res);
void chan_http_resp_free(struct chan_http_resp *);
/* The first header of that name (case-insensitive), or NULL; *dup set when repeated. */
const char *chan_http_header(const struct chan_http_resp *, const char *name, int *dup);

/* ---- token buckets (chan_rate.c) ------------------------------------------------------ */

struct chan_rate;

/* The process-wide bucket of (merchant, channel), created on first use; reference-counted. */
struct chan_rate *chan_rate_get(const char *merchant_id, enum chan_id, double per_s, double burst);
void chan_rate_put(struct chan_rate *);
/* Takes a token at now_ms (monotonic): 0 when taken, else the milliseconds until one is due. */
long chan_rate_take(struct chan_rate *, long long now_ms);
/* Empties the bucket for pause_ms (the channel said 429). */
void chan_rate_pause(struct chan_rate *, long long now_ms, long pause_ms);

/* ---- the client and its helpers (chan_client.c) --------------------------------------- */

struct chan_client {
	enum chan_id channel;
	char *base_url;
	struct chan_http *http;
	struct chan_rate *rate;
	long rate_wait_max_ms;
	struct chan_wx_cred wx;
	struct chan_ali_cred ali;
	struct chan_stripe_cred stripe;
	/* The authenticated answer of the last successful payment query (chan_last_answer). */
	char *answer;
	size_t answer_len;
};

/* Keeps a copy of an authenticated answer for chan_last_answer(); -1 when out of memory. */
int chan_keep_answer(struct chan_client *, const void *text, size_t len);
/* The same for a verified JSON object, serialised compactly (key order kept). */
int chan_keep_answer_json(struct chan_client *, const json_t *);

/* The operations of one channel. */
struct chan_ops {
	enum chan_id id;
	int (*query_payment)(struct chan_client *, const struct chan_order_ref *,
	                     struct chan_payment *, struct chan_result *);
	int (*refund)(struct chan_client *, const struct chan_refund_req *, struct chan_refund *,
	              struct chan_result *);
	int (*query_refund)(struct chan_client *, const struct chan_refund_ref *,
	                    struct chan_refund *, struct chan_result *);
	int (*close)(struct chan_client *, const struct chan_order_ref *, struct chan_result *);
};
extern const struct chan_ops chan_wx_ops, chan_ali_ops, chan_stripe_ops;

/*
 * Takes a rate token (waiting up to the client's limit), then sends. Returns 0 with *resp
 * filled, or -1 with res classified (rate_limited: CHAN_RETRY, nothing sent). Copies the
 * status, the request id and Retry-After into res.
 */
int chan_send(struct chan_client *, const struct chan_http_req *, struct chan_http_resp *,
              struct chan_result *);

/* An id we put in a URL or a body: 1..64 bytes of [A-Za-z0-9_-|*@.]. */
int chan_id_ok(const char *s);
/* Percent-encodes all but A-Za-z0-9 "-_.~" into out; -1 if it does not fit. */
int chan_url_escape(const char *s, char *out, size_t outcap);
/* Copies a JSON string member (path "a.b" allowed one level) into dst; "" when absent.
 * -1 when present but not a string or too long. */
int chan_json_str(const json_t *o, const char *path, char *dst, size_t cap);
/* A JSON integer member >= 0 and <= MONEY_MAX_MINOR into *out; -1 when absent or invalid. */
int chan_json_minor(const json_t *o, const char *path, int64_t *out);

/* A channel's status text and the state (enum chan_pay_state or chan_refund_state) it means. */
struct chan_state_map {
	const char *s;
	int st;
};
#define CHAN_NMAP(m) (sizeof(m) / sizeof((m)[0]))
/* The state status means in map (n entries), or none when the map does not name it. */
int chan_state_of(const struct chan_state_map *map, size_t n, const char *status, int none);

/* Request bodies, exposed for the vector tests: WeChat's refund JSON (field order as in the
 * official examples) and Alipay's refund biz_content (order as in vector A-D2). */
int chan_wx_refund_body(const struct chan_refund_req *, char **out);
int chan_ali_refund_biz(const struct chan_refund_req *, char **out);

#endif
