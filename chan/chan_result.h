/*
 * chan_result - how a call to a channel ended (enum chan_outcome) and what it says about it
 * (struct chan_result), part of the chan_client API (chan_client.h includes this header).
 *
 * It has a header of its own because both the transport (chan_http.c) and the client above it
 * (chan_client.c) fill results: with the vocabulary here, below both, the transport never
 * reaches up into the client.
 */
#ifndef PAYCB_CHAN_RESULT_H
#define PAYCB_CHAN_RESULT_H

enum chan_outcome {
	CHAN_OK = 0,  /* an authenticated answer; the typed struct is filled */
	CHAN_FINAL,   /* the channel refused; code names why; do not repeat unchanged */
	CHAN_RETRY,   /* not done (or safely repeatable): try again later, same parameters */
	CHAN_UNKNOWN, /* may have taken effect: query, never resend blindly */
	CHAN_FORGED,  /* an answer whose signature is missing or wrong: an error, never a fact */
};
/* "ok", "final", "retry", "unknown", "forged". */
const char *chan_outcome_name(enum chan_outcome);

struct chan_result {
	enum chan_outcome outcome;
	int http_status; /* 0 when no answer was received */
	/* 1 when the answer was authenticated: a valid signature (WeChat Pay, Alipay) or TLS
	 * with a verified peer (Stripe, which signs no answers). Error answers of WeChat Pay are
	 * unsigned: a FINAL with authenticated 0 is the channel's hint, not proof. */
	int authenticated;
	/* The channel's code (PARAM_ERROR, ACQ.TRADE_NOT_EXIST, resource_missing) or a local one:
	 * "timeout", "connect", "reset", "tls", "rate_limited", "bad_signature", "bad_answer",
	 * "invalid_argument", "internal". */
	char code[64];
	char detail[160];    /* a short human text; never a secret or body content */
	char request_id[80]; /* the channel's Request-ID / Request-Id header, for support */
	int retry_after_s;   /* from Retry-After when the channel sent one, else 0 */
};

#endif
