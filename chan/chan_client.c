/*
 * chan_client - the client object, the dispatch of the four calls to the channel's
 * operations table, the rate-limited send, and the small helpers the channel modules share
 * (id checks, URL escaping, JSON fields as text and as minor units); results are classified
 * with chan_result.c's chan_res.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "chan_int.h"
#include "clock.h"
#include "money.h"

#ifndef PAYCB_VERSION
#define PAYCB_VERSION "0.0.0"
#endif

const char *
chan_id_name(enum chan_id c)
{
	switch (c) {
	case CHAN_WXPAY:
		return "wxpay";
	case CHAN_ALIPAY:
		return "alipay";
	case CHAN_STRIPE:
		return "stripe";
	}
	return "unknown";
}

static const struct chan_ops *
chan_ops_of(enum chan_id c)
{
	switch (c) {
	case CHAN_WXPAY:
		return &chan_wx_ops;
	case CHAN_ALIPAY:
		return &chan_ali_ops;
	case CHAN_STRIPE:
		return &chan_stripe_ops;
	}
	return NULL;
}

/* chan_client_check - the keys a channel cannot work without. */
static const char *
chan_client_check(const struct chan_client_conf *cf)
{
	switch (cf->channel) {
	case CHAN_WXPAY:
		if (cf->wx.mchid == NULL || cf->wx.merchant_key == NULL ||
		    cf->wx.merchant_serial == NULL || cf->wx.nplatform <= 0 ||
		    cf->wx.platform == NULL)
			return "wxpay needs mchid, the merchant key, its serial and platform keys";
		return NULL;
	case CHAN_ALIPAY:
		if (cf->ali.app_id == NULL || cf->ali.app_key == NULL || cf->ali.nalipay <= 0 ||
		    cf->ali.alipay_keys == NULL)
			return "alipay needs app_id, the app private key and Alipay public keys";
		return NULL;
	case CHAN_STRIPE:
		if (cf->stripe.secret_key == NULL || cf->stripe.secret_key[0] == '\0' ||
		    strpbrk(cf->stripe.secret_key, "\r\n") != NULL)
			return "stripe needs a secret key (one line)";
		return NULL;
	}
	return "unknown channel";
}

int
chan_client_new(const struct chan_client_conf *cf, struct chan_client **out, char *err,
                size_t errlen)
{
	struct chan_client *c = NULL;
	const char *why;
	char ua[64];
	int rc = -1;

	*out = NULL;
	if ((why = chan_client_check(cf)) != NULL) {
		snprintf(err, errlen, "%s", why);
		goto done;
	}
	if (cf->base_url == NULL || strstr(cf->base_url, "://") == NULL ||
	    cf->merchant_id == NULL) {
		snprintf(err, errlen, "a base URL and a merchant id are required");
		goto done;
	}
	if ((c = calloc(1, sizeof(*c))) == NULL || (c->base_url = strdup(cf->base_url)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	/* A trailing slash would double in every path and change what WeChat Pay signs. */
	while (strlen(c->base_url) > 8 && c->base_url[strlen(c->base_url) - 1] == '/')
		c->base_url[strlen(c->base_url) - 1] = '\0';
	c->channel = cf->channel;
	c->wx = cf->wx;
	c->ali = cf->ali;
	c->stripe = cf->stripe;
	if (c->stripe.api_version == NULL)
		c->stripe.api_version = CHAN_STRIPE_VERSION;
	if (c->stripe.order_key == NULL)
		c->stripe.order_key = "order_id";
	c->rate_wait_max_ms = cf->rate_wait_max_ms > 0 ? cf->rate_wait_max_ms : 1000;
	snprintf(ua, sizeof(ua), "paycb/%s", PAYCB_VERSION);
	{
		const struct chan_http_conf hc = {
		    .ca_file = cf->ca_file,
		    .proxy = cf->proxy,
		    .user_agent = cf->user_agent != NULL ? cf->user_agent : ua,
		    .connect_timeout_ms = cf->connect_timeout_ms,
		    .total_timeout_ms = cf->total_timeout_ms,
		    .allow_http = cf->allow_http,
		};
		if (chan_http_new(&hc, &c->http, err, errlen) != 0)
			goto done;
	}
	if ((c->rate = chan_rate_get(cf->merchant_id, cf->channel, cf->rate_per_s,
	                             cf->rate_burst)) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	*out = c;
	c = NULL;
	rc = 0;
done:
	chan_client_free(c);
	return rc;
}

void
chan_client_free(struct chan_client *c)
{
	if (c == NULL)
		return;
	chan_http_free(c->http);
	chan_rate_put(c->rate);
	free(c->answer);
	free(c->base_url);
	free(c);
}

enum chan_id
chan_client_channel(const struct chan_client *c)
{
	return c->channel;
}

static void
chan_res_init(struct chan_result *r)
{
	memset(r, 0, sizeof(*r));
	r->outcome = CHAN_RETRY;
}

int
chan_query_payment(struct chan_client *c, const struct chan_order_ref *o, struct chan_payment *p,
                   struct chan_result *r)
{
	chan_res_init(r);
	memset(p, 0, sizeof(*p));
	p->amount_minor = -1;
	free(c->answer);
	c->answer = NULL;
	c->answer_len = 0;
	if (o == NULL || !chan_id_ok(o->out_trade_no))
		return chan_res(r, CHAN_FINAL, "invalid_argument", "bad out_trade_no");
	return chan_ops_of(c->channel)->query_payment(c, o, p, r);
}

int
chan_refund(struct chan_client *c, const struct chan_refund_req *q, struct chan_refund *f,
            struct chan_result *r)
{
	chan_res_init(r);
	memset(f, 0, sizeof(*f));
	f->amount_minor = f->refunded_total_minor = -1;
	if (q == NULL || !chan_id_ok(q->order.out_trade_no) || !chan_id_ok(q->out_refund_no) ||
	    q->amount_minor <= 0 || q->amount_minor > MONEY_MAX_MINOR ||
	    q->total_minor < q->amount_minor || q->total_minor > MONEY_MAX_MINOR ||
	    q->currency == NULL || money_currency_scale(q->currency) < 0)
		return chan_res(r, CHAN_FINAL, "invalid_argument", "bad refund request");
	return chan_ops_of(c->channel)->refund(c, q, f, r);
}

int
chan_query_refund(struct chan_client *c, const struct chan_refund_ref *q, struct chan_refund *f,
                  struct chan_result *r)
{
	chan_res_init(r);
	memset(f, 0, sizeof(*f));
	f->amount_minor = f->refunded_total_minor = -1;
	if (q == NULL || !chan_id_ok(q->order.out_trade_no) || !chan_id_ok(q->out_refund_no))
		return chan_res(r, CHAN_FINAL, "invalid_argument", "bad refund reference");
	return chan_ops_of(c->channel)->query_refund(c, q, f, r);
}

int
chan_close(struct chan_client *c, const struct chan_order_ref *o, struct chan_result *r)
{
	chan_res_init(r);
	if (o == NULL || !chan_id_ok(o->out_trade_no))
		return chan_res(r, CHAN_FINAL, "invalid_argument", "bad out_trade_no");
	return chan_ops_of(c->channel)->close(c, o, r);
}

int
chan_send(struct chan_client *c, const struct chan_http_req *req, struct chan_http_resp *resp,
          struct chan_result *r)
{
	long long deadline = clock_mono_ms() + c->rate_wait_max_ms;
	const char *v;
	long wait;

	/* Waiting here is bounded; a caller that cannot wait gets CHAN_RETRY, nothing sent. */
	while ((wait = chan_rate_take(c->rate, clock_mono_ms())) > 0) {
		struct timespec ts;

		if (clock_mono_ms() + wait > deadline)
			return chan_res(r, CHAN_RETRY, "rate_limited", "local rate limit");
		ts.tv_sec = wait / 1000;
		ts.tv_nsec = (wait % 1000) * 1000000L;
		nanosleep(&ts, NULL);
	}
	if (chan_http_do(c->http, req, resp, r) != 0)
		return -1;
	if ((v = chan_http_header(resp, "Request-ID", NULL)) != NULL)
		snprintf(r->request_id, sizeof(r->request_id), "%.*s", 79, v);
	if ((v = chan_http_header(resp, "Retry-After", NULL)) != NULL) {
		long s = strtol(v, NULL, 10);

		r->retry_after_s = s > 0 && s < 86400 ? (int)s : 0;
	}
	if (resp->status == 429)
		chan_rate_pause(c->rate, clock_mono_ms(),
		                r->retry_after_s > 0 ? r->retry_after_s * 1000L : 1000L);
	return 0;
}

int
chan_id_ok(const char *s)
{
	size_t n = 0;

	if (s == NULL)
		return 0;
	for (; s[n] != '\0'; n++) {
		char ch = s[n];

		if (!((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		      (ch >= '0' && ch <= '9') || strchr("_-|*@.", ch) != NULL) ||
		    n >= 64)
			return 0;
	}
	return n > 0;
}

int
chan_url_escape(const char *s, char *out, size_t outcap)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t o = 0;

	for (; *s != '\0'; s++) {
		unsigned char ch = (unsigned char)*s;

		if (o + 4 > outcap)
			return -1;
		if ((ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
		    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.' || ch == '~') {
			out[o++] = (char)ch;
		} else {
			out[o++] = '%';
			out[o++] = hex[ch >> 4];
			out[o++] = hex[ch & 15];
		}
	}
	if (o + 1 > outcap)
		return -1;
	out[o] = '\0';
	return 0;
}

/* chan_json_at - the member at "a" or "a.b", or NULL. */
static const json_t *
chan_json_at(const json_t *o, const char *path)
{
	const char *dot = strchr(path, '.');
	char head[64];

	if (dot == NULL)
		return json_object_get(o, path);
	if ((size_t)(dot - path) >= sizeof(head))
		return NULL;
	memcpy(head, path, (size_t)(dot - path));
	head[dot - path] = '\0';
	return json_object_get(json_object_get(o, head), dot + 1);
}

int
chan_state_of(const struct chan_state_map *map, size_t n, const char *status, int none)
{
	for (size_t i = 0; i < n; i++)
		if (strcmp(status, map[i].s) == 0)
			return map[i].st;
	return none;
}

int
chan_json_str(const json_t *o, const char *path, char *dst, size_t cap)
{
	const json_t *v = chan_json_at(o, path);

	dst[0] = '\0';
	if (v == NULL || json_is_null(v))
		return 0;
	if (!json_is_string(v) || json_string_length(v) >= cap ||
	    strlen(json_string_value(v)) != json_string_length(v))
		return -1;
	memcpy(dst, json_string_value(v), json_string_length(v) + 1);
	return 0;
}

int
chan_json_minor(const json_t *o, const char *path, int64_t *out)
{
	const json_t *v = chan_json_at(o, path);
	json_int_t i;

	if (v == NULL || !json_is_integer(v))
		return -1;
	i = json_integer_value(v);
	if (i < 0 || i > MONEY_MAX_MINOR)
		return -1;
	*out = (int64_t)i;
	return 0;
}

int
chan_keep_answer(struct chan_client *c, const void *text, size_t len)
{
	char *copy = malloc(len + 1);

	if (copy == NULL)
		return -1;
	memcpy(copy, text, len);
	copy[len] = '\0';
	free(c->answer);
	c->answer = copy;
	c->answer_len = len;
	return 0;
}

int
chan_keep_answer_json(struct chan_client *c, const json_t *j)
{
	char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
	int rc;

	if (s == NULL)
		return -1;
	rc = chan_keep_answer(c, s, strlen(s));
	free(s);
	return rc;
}

const char *
chan_last_answer(const struct chan_client *c, size_t *len)
{
	*len = c->answer_len;
	return c->answer;
}
