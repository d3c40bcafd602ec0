/*
 * chan_http - the outbound transport on libcurl: one easy handle per client so connections
 * are reused, connect and total timeouts, TLS verification (optionally against a CA file),
 * an optional proxy, bounded answers, and the one distinction a payment client cannot get
 * wrong: whether a failed request may have reached the channel.
 *
 * "Sent" is known from libcurl's debug callback, which reports the request headers as they
 * leave (CURLINFO_HEADER_OUT). A failure before that is CHAN_RETRY; after it, CHAN_UNKNOWN.
 * libcurl may itself resend a request once on a reused connection that the server had closed
 * before answering anything; every effectful call carries an idempotency key, so that resend
 * cannot do anything twice.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "chan_int.h"

struct chan_http {
	CURL *curl;
	int sent; /* the current request's headers have left */
};

static pthread_once_t chan_http_once = PTHREAD_ONCE_INIT;
static CURLcode chan_http_global_rc = CURLE_FAILED_INIT;

static void
chan_http_global(void)
{
	chan_http_global_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static int
chan_http_debug(CURL *c, curl_infotype type, char *data, size_t size, void *ud)
{
	struct chan_http *h = ud;

	(void)c, (void)data, (void)size;
	if (type == CURLINFO_HEADER_OUT)
		h->sent = 1;
	return 0;
}

int
chan_http_new(const struct chan_http_conf *cf, struct chan_http **out, char *err, size_t errlen)
{
	struct chan_http *h = NULL;
	CURL *c;
	int rc = -1;

	*out = NULL;
	pthread_once(&chan_http_once, chan_http_global);
	if (chan_http_global_rc != CURLE_OK) {
		snprintf(err, errlen, "curl_global_init failed");
		goto done;
	}
	if ((h = calloc(1, sizeof(*h))) == NULL || (h->curl = curl_easy_init()) == NULL) {
		snprintf(err, errlen, "out of memory");
		goto done;
	}
	c = h->curl;
	/* Redirects are never followed: an answer must come from the configured host. */
	if (curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, cf->allow_http ? "http,https" : "https") !=
	        CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
	                     cf->connect_timeout_ms > 0 ? cf->connect_timeout_ms : 3000L) !=
	        CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS,
	                     cf->total_timeout_ms > 0 ? cf->total_timeout_ms : 15000L) !=
	        CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_USERAGENT, cf->user_agent) != CURLE_OK ||
	    /* An explicit empty proxy also ignores http_proxy and friends in the environment. */
	    curl_easy_setopt(c, CURLOPT_PROXY, cf->proxy != NULL ? cf->proxy : "") != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_DEBUGFUNCTION, chan_http_debug) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_DEBUGDATA, h) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_VERBOSE, 1L) != CURLE_OK ||
	    curl_easy_setopt(c, CURLOPT_ACCEPT_ENCODING, NULL) != CURLE_OK) {
		snprintf(err, errlen, "libcurl refused an option (too old a version?)");
		goto done;
	}
	if (cf->ca_file != NULL && cf->ca_file[0] != '\0' &&
	    curl_easy_setopt(c, CURLOPT_CAINFO, cf->ca_file) != CURLE_OK) {
		snprintf(err, errlen, "libcurl refused the CA file setting");
		goto done;
	}
	*out = h;
	h = NULL;
	rc = 0;
done:
	chan_http_free(h);
	return rc;
}

void
chan_http_free(struct chan_http *h)
{
	if (h == NULL)
		return;
	if (h->curl != NULL)
		curl_easy_cleanup(h->curl);
	free(h);
}

static size_t
chan_http_body_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct chan_http_resp *r = ud;
	size_t n = size * nmemb;

	if (r->blen + n > CHAN_BODY_MAX) {
		r->body_overflow = 1;
		return 0; /* aborts the transfer */
	}
	if (r->blen + n + 1 > r->bcap) {
		size_t cap = r->bcap ? r->bcap : 4096;
		uint8_t *b;

		while (r->blen + n + 1 > cap)
			cap *= 2;
		if ((b = realloc(r->body, cap)) == NULL)
			return 0;
		r->body = b;
		r->bcap = cap;
	}
	memcpy(r->body + r->blen, p, n);
	r->blen += n;
	r->body[r->blen] = '\0';
	return n;
}

static size_t
chan_http_header_cb(char *p, size_t size, size_t nmemb, void *ud)
{
	struct chan_http_resp *r = ud;
	size_t n = size * nmemb, k, e;
	char *colon;

	/* A status line starts a new header block (after a 100 Continue, for example). */
	if (n >= 5 && memcmp(p, "HTTP/", 5) == 0) {
		for (size_t i = 0; i < r->nhdrs; i++)
			free(r->hdrs[i].name);
		r->nhdrs = 0;
		return n;
	}
	if ((colon = memchr(p, ':', n)) == NULL)
		return n; /* the blank line, or junk we ignore */
	if (r->nhdrs >= CHAN_HDR_MAX || n > 8192) {
		r->hdr_overflow = 1;
		return n;
	}
	k = (size_t)(colon - p);
	e = n;
	while (e > k + 1 &&
	       (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' ' || p[e - 1] == '\t'))
		e--;
	{
		char *s = malloc(n + 2);
		size_t v = k + 1;

		if (s == NULL)
			return 0;
		while (v < e && (p[v] == ' ' || p[v] == '\t'))
			v++;
		memcpy(s, p, k);
		s[k] = '\0';
		memcpy(s + k + 1, p + v, e - v);
		s[k + 1 + (e - v)] = '\0';
		r->hdrs[r->nhdrs].name = s;
		r->hdrs[r->nhdrs].value = s + k + 1;
		r->nhdrs++;
	}
	return n;
}

void
chan_http_resp_free(struct chan_http_resp *r)
{
	for (size_t i = 0; i < r->nhdrs; i++)
		free(r->hdrs[i].name);
	free(r->body);
	memset(r, 0, sizeof(*r));
}

const char *
chan_http_header(const struct chan_http_resp *r, const char *name, int *dup)
{
	const char *v = NULL;
	int n = 0;

	for (size_t i = 0; i < r->nhdrs; i++)
		if (strcasecmp(r->hdrs[i].name, name) == 0 && n++ == 0)
			v = r->hdrs[i].value;
	if (dup != NULL)
		*dup = n > 1;
	return v;
}

/* chan_http_classify - a failed transfer as CHAN_RETRY (not sent) or CHAN_UNKNOWN. */
static int
chan_http_classify(struct chan_http *h, CURLcode cc, const struct chan_http_resp *resp,
                   struct chan_result *res)
{
	const char *code;

	switch (cc) {
	case CURLE_OPERATION_TIMEDOUT:
		code = "timeout";
		break;
	case CURLE_COULDNT_CONNECT:
	case CURLE_COULDNT_RESOLVE_HOST:
	case CURLE_COULDNT_RESOLVE_PROXY:
		code = "connect";
		break;
	case CURLE_SSL_CONNECT_ERROR:
	case CURLE_PEER_FAILED_VERIFICATION:
	case CURLE_SSL_CACERT_BADFILE:
	case CURLE_SSL_CERTPROBLEM:
		code = "tls";
		break;
	case CURLE_WRITE_ERROR:
		code = resp->body_overflow ? "answer_too_large" : "internal";
		break;
	case CURLE_UNSUPPORTED_PROTOCOL:
		/* The URL's scheme is not allowed (http without allow_http): never sent. */
		return chan_res(res, CHAN_FINAL, "invalid_argument", "scheme not allowed");
	default:
		code = "reset";
		break;
	}
	if (!h->sent)
		return chan_res(res, CHAN_RETRY, code, "not sent: %s", curl_easy_strerror(cc));
	return chan_res(res, CHAN_UNKNOWN, code, "sent, no complete answer: %s",
	                curl_easy_strerror(cc));
}

int
chan_http_do(struct chan_http *h, const struct chan_http_req *req, struct chan_http_resp *resp,
             struct chan_result *res)
{
	struct curl_slist *hl = NULL, *t;
	CURL *c = h->curl;
	CURLcode cc;
	int rc = -1;

	memset(resp, 0, sizeof(*resp));
	h->sent = 0;
	for (size_t i = 0; i < req->nheaders; i++) {
		if ((t = curl_slist_append(hl, req->headers[i])) == NULL) {
			chan_res(res, CHAN_RETRY, "internal", "out of memory");
			goto done;
		}
		hl = t;
	}
	/* No "Expect: 100-continue" round trip: bodies are small. */
	if ((t = curl_slist_append(hl, "Expect:")) == NULL) {
		chan_res(res, CHAN_RETRY, "internal", "out of memory");
		goto done;
	}
	hl = t;
	curl_easy_setopt(c, CURLOPT_URL, req->url);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, chan_http_body_cb);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, resp);
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, chan_http_header_cb);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, resp);
	if (strcmp(req->method, "POST") == 0) {
		curl_easy_setopt(c, CURLOPT_POST, 1L);
		curl_easy_setopt(c, CURLOPT_POSTFIELDS,
		                 req->body != NULL ? (const char *)req->body : "");
		curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->blen);
	} else {
		curl_easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	cc = curl_easy_perform(c);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &resp->status);
	/* The easy handle keeps no pointer to our stack or headers between requests. */
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(c, CURLOPT_POSTFIELDS, NULL);
	if (cc != CURLE_OK) {
		chan_http_classify(h, cc, resp, res);
		chan_http_resp_free(resp);
		goto done;
	}
	if (resp->body == NULL && (resp->body = calloc(1, 1)) == NULL) {
		chan_res(res, CHAN_UNKNOWN, "internal", "out of memory");
		goto done;
	}
	res->http_status = (int)resp->status;
	rc = 0;
done:
	curl_slist_free_all(hl);
	return rc;
}
