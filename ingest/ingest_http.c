/*
 * ingest_http - the channel-facing HTTP listener on libmicrohttpd.
 *
 * Routes: POST /pay/callback/{channel} (merchant "default") and
 * POST /pay/callback/{channel}/{merchant_id}. Unknown route, channel or merchant: 404; other
 * methods: 405; a body declared over ingest.max_body_bytes: 413 without reading it (a chunked
 * body that grows past it is not drained: the connection is closed).
 *
 * Slots, in the order a request meets them: while its body is read it holds a reader
 * (ingest.max_readers), for at most ingest.request_timeout_s from its headers however steadily
 * it sends; once complete it must pass the cheap checks (ingest_precheck: headers, signature
 * length, parameter count), answered from the loop itself when it fails them; only then does
 * it take an in-flight slot (ingest.max_inflight). So neither a slow body nor junk can hold a
 * slot a genuine notification needs.
 *
 * One event loop (libmicrohttpd's internal thread on epoll) reads every connection; a
 * complete request is suspended and queued for a worker (ingest_work.c), which runs the flow
 * and resumes the connection with its answer. A request identical to one already in flight
 * is not queued but parked on it (ingest_flight.c), and the leader's reservation answers it.
 * The flow blocks on the database and on the delivery report, the loop never does, and the
 * number of threads competing for the cores is the worker count, not the connection count. The
 * in-flight limit answers 503 at once instead of queueing past a channel's time budget, and a
 * request that waited in the queue longer than ingest.publish_budget_ms is answered 503 without
 * being run (the channel pushes again).
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "clock.h"
#include "digest.h"
#include "httpd.h"
#include "ingest.h"
#include "log.h"

#define MAX_HDRS 64

struct hdr_set {
	struct http_hdr h[MAX_HDRS];
	size_t n;
	int overflow;
};

/* Where a request is: reading its body, waiting for or held by a worker, answered. */
enum req_state { RQ_READING = 0, RQ_QUEUED, RQ_DONE, RQ_SENT };

struct req_ctx {
	struct ingest_job job; /* first: a queued job is its request */
	struct MHD_Connection *conn;
	int ch;
	struct ingest_keyset *ks; /* the keys this request started with (a reference) */
	const struct ingest_merchant *im;
	uint8_t *buf;
	size_t len, cap;
	int counted;          /* holds an in-flight slot */
	int reading;          /* holds a reader slot */
	long long started_us; /* when its headers were complete */
	enum req_state state;
	long long queued_us;
	time_t arrived;                 /* wall second the request was complete */
	char sha[65];                   /* the body's SHA-256, hex */
	struct ingest_flight_entry *fe; /* the flight this request leads */
	struct hdr_set hs; /* the values point into the connection, valid until it completes */
	struct ingest_resp resp;
};

static enum MHD_Result
http_send(struct MHD_Connection *c, unsigned status, const char *type, const char *body)
{
	size_t len = body ? strlen(body) : 0;
	struct MHD_Response *r = httpd_response_copy(body, len);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	if (type && len)
		MHD_add_response_header(r, "Content-Type", type);
	rc = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return rc;
}

/* Splits the URL; returns 0 with the channel and merchant, or -1 for an unknown route. */
static int
http_route(const char *url, int *ch, char *merchant, size_t mlen)
{
	static const char prefix[] = "/pay/callback/";
	char chan[16];
	const char *p, *slash;
	size_t n;

	if (strncmp(url, prefix, sizeof(prefix) - 1) != 0)
		return -1;
	p = url + sizeof(prefix) - 1;
	slash = strchr(p, '/');
	n = slash ? (size_t)(slash - p) : strlen(p);
	if (n == 0 || n >= sizeof(chan))
		return -1;
	memcpy(chan, p, n);
	chan[n] = '\0';
	if ((*ch = chan_notify_find(chan)) < 0)
		return -1;
	if (slash == NULL) {
		snprintf(merchant, mlen, "default");
		return 0;
	}
	p = slash + 1;
	n = strlen(p);
	if (n == 0 || n >= mlen || strchr(p, '/'))
		return -1;
	memcpy(merchant, p, n + 1);
	return 0;
}

static enum MHD_Result
http_collect(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct hdr_set *s = cls;

	(void)kind;
	if (s->n >= MAX_HDRS) {
		s->overflow = 1;
		return MHD_NO;
	}
	s->h[s->n].name = key;
	s->h[s->n].value = value ? value : "";
	s->n++;
	return MHD_YES;
}

static enum MHD_Result
http_fail(struct MHD_Connection *c, int ch, unsigned status, const char *msg)
{
	struct ingest_resp resp;

	memset(&resp, 0, sizeof(resp));
	ingest_answer(ch, 0, status, msg, &resp);
	return http_send(c, status, resp.type, resp.body);
}

/* http_unread - gives back the reader slot of a request whose reading has ended. */
static void
http_unread(struct ingest *in, struct req_ctx *x)
{
	if (!x->reading)
		return;
	x->reading = 0;
	atomic_fetch_sub(&in->reading, 1);
	metrics_set(in->m.reading, atomic_load(&in->reading));
}

static enum MHD_Result
http_first(struct ingest *in, struct MHD_Connection *c, const char *url, const char *method,
           void **con_cls)
{
	const struct ingest_merchant *im;
	struct ingest_keyset *ks;
	char merchant[80];
	enum MHD_Result r;
	const char *cl;
	struct req_ctx *x;
	int ch;

	if (http_route(url, &ch, merchant, sizeof(merchant)) != 0) {
		metrics_inc(in->m.http_errors[0], 1);
		return http_send(c, 404, "text/plain", "not found\n");
	}
	if (strcmp(method, "POST") != 0) {
		metrics_inc(in->m.http_errors[1], 1);
		return http_fail(c, ch, 405, "method not allowed");
	}
	/* One reference per request: the request keeps it, or done gives it back. */
	ks = ingest_keyset_get(in);
	if ((im = ingest_merchant_find(ks, merchant, ch)) == NULL) {
		metrics_inc(in->m.http_errors[0], 1);
		r = http_fail(c, ch, 404, "unknown merchant");
		goto done;
	}
	cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > (unsigned long long)in->cf->ingest.max_body_bytes) {
		metrics_inc(in->m.http_errors[2], 1);
		log_warn(NULL, "event=body_too_large channel=%s merchant=%s declared=%s",
		         chan_notify_name(ch), merchant, cl);
		r = http_fail(c, ch, 413, "body too large");
		goto done;
	}
	if (atomic_fetch_add(&in->reading, 1) >= in->cf->ingest.max_readers) {
		atomic_fetch_sub(&in->reading, 1);
		metrics_inc(in->m.requests[ch][OUT_BUSY], 1);
		r = http_fail(c, ch, 503, "busy");
		goto done;
	}
	metrics_set(in->m.reading, atomic_load(&in->reading));
	if ((x = calloc(1, sizeof(*x))) == NULL) {
		atomic_fetch_sub(&in->reading, 1);
		r = MHD_NO;
		goto done;
	}
	x->ch = ch;
	x->ks = ks;
	ks = NULL;
	x->im = im;
	x->reading = 1;
	x->started_us = clock_mono_us();
	*con_cls = x;
	r = MHD_YES;
done:
	ingest_keyset_put(ks);
	return r;
}

/* http_req - the request as the flow sees it (without a flight). */
static void
http_req(const struct req_ctx *x, struct ingest_req *req)
{
	memset(req, 0, sizeof(*req));
	req->ch = x->ch;
	req->im = x->im;
	req->hdrs = x->hs.h;
	req->nhdrs = x->hs.n;
	req->body = x->buf ? x->buf : (const uint8_t *)"";
	req->len = x->len;
	req->sha = x->sha;
}

/* http_deliver - the answer is in x->resp: the connection resumes and the loop sends it. */
static void
http_deliver(struct ingest *in, struct ingest_resp *resp)
{
	struct req_ctx *x = (struct req_ctx *)((char *)resp - offsetof(struct req_ctx, resp));

	(void)in;
	x->state = RQ_DONE;
	MHD_resume_connection(x->conn);
}

/*
 * http_run - on a worker: the flow for one queued request, then the connection resumes, or the
 * delivery report of its message resumes it later (ingest_handle).
 */
static void
http_run(struct ingest *in, struct ingest_job *j)
{
	struct req_ctx *x = (struct req_ctx *)j;
	long long waited_ms = (clock_mono_us() - x->queued_us) / 1000;
	struct ingest_req req;

	if (waited_ms > in->cf->ingest.publish_budget_ms) {
		/* Past the budget already: answering now beats running it late. Copies parked on
		 * it go to the queue by themselves and are judged by the same rule. */
		ingest_flight_land(in, x->fe, NULL);
		memset(&x->resp, 0, sizeof(x->resp));
		x->resp.outcome = OUT_BUSY;
		ingest_answer(x->ch, 0, 503, "busy", &x->resp);
		metrics_inc(in->m.requests[x->ch][OUT_BUSY], 1);
		log_warn(NULL, "event=queue_timeout channel=%s merchant=%s queued_ms=%lld",
		         chan_notify_name(x->ch), x->im->cm->id, waited_ms);
	} else {
		http_req(x, &req);
		req.flight = x->fe;
		x->fe = NULL;
		x->resp.deliver = http_deliver;
		if (ingest_handle(in, &req, &x->resp) != 0)
			return; /* x may be answered and freed already */
	}
	x->fe = NULL;
	http_deliver(in, &x->resp);
}

/*
 * http_settle - on the leader's worker: a copy parked on its flight. When the row exists and
 * the copy came within the seconds the leader's verdict covers, it is answered at once;
 * otherwise it is queued to run the whole flow by itself.
 */
static void
http_settle(struct ingest *in, struct ingest_job *j, const struct ingest_landing *l)
{
	struct req_ctx *x = (struct req_ctx *)j;

	if (l == NULL || !l->stored || (int64_t)x->arrived < l->valid_from ||
	    (int64_t)x->arrived > l->valid_to) {
		ingest_work_push(in, &x->job);
		return;
	}
	ingest_coalesced(in, x->ch, x->im->cm->id, l, x->sha, x->queued_us, &x->resp);
	http_deliver(in, &x->resp);
}

/*
 * http_flight_key - everything verification reads: channel, merchant, the body's digest and
 * each Wechatpay-* and Stripe-* header in order (ingest_flight.c says why). Returns the
 * length, or 0 when it does not fit and the request is to run alone.
 */
static size_t
http_flight_key(const struct req_ctx *x, char *key, size_t cap)
{
	size_t n = 0;
	int k;

	k = snprintf(key, cap, "%s%c%s%c%s", chan_notify_name(x->ch), 0, x->im->cm->id, 0, x->sha);
	if (k < 0 || (size_t)k >= cap)
		return 0;
	n = (size_t)k + 1;
	for (size_t i = 0; i < x->hs.n; i++) {
		const struct http_hdr *h = &x->hs.h[i];
		size_t nl, vl;

		if (strncasecmp(h->name, "Wechatpay-", 10) != 0 &&
		    strncasecmp(h->name, "Stripe-", 7) != 0)
			continue;
		nl = strlen(h->name);
		vl = strlen(h->value);
		if (n + nl + vl + 2 > cap)
			return 0;
		/* Lower-cased names: header names are case-insensitive, values are not. */
		for (size_t c = 0; c < nl; c++)
			key[n++] = (char)((h->name[c] >= 'A' && h->name[c] <= 'Z') ? h->name[c] + 32
			                                                           : h->name[c]);
		key[n++] = '\0';
		memcpy(key + n, h->value, vl);
		n += vl;
		key[n++] = '\0';
	}
	return n;
}

/* http_upload - one piece of a body: kept, or the connection closed past a limit. */
static enum MHD_Result
http_upload(struct ingest *in, struct req_ctx *x, const char *upload, size_t n)
{
	if (clock_mono_us() - x->started_us > in->cf->ingest.request_timeout_s * 1000000LL) {
		/* The idle timeout never fires on a client that keeps sending a byte now and
		 * then: the whole request has a deadline, and past it the connection is closed
		 * (libmicrohttpd cannot answer in the middle of an upload). */
		metrics_inc(in->m.http_errors[4], 1);
		log_warn(NULL, "event=request_deadline channel=%s merchant=%s received=%zu",
		         chan_notify_name(x->ch), x->im->cm->id, x->len + n);
		return MHD_NO;
	}
	if (x->len + n > (size_t)in->cf->ingest.max_body_bytes) {
		/* A chunked body grew past the limit: the connection is closed rather than
		 * drained, since a sender that never stops would hold it for ever. */
		metrics_inc(in->m.http_errors[2], 1);
		log_warn(NULL, "event=body_too_large channel=%s merchant=%s chunked=1",
		         chan_notify_name(x->ch), x->im->cm->id);
		return MHD_NO;
	}
	if (x->len + n > x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 4096;
		while (cap < x->len + n)
			cap *= 2;
		uint8_t *nb = realloc(x->buf, cap);
		if (nb == NULL)
			return MHD_NO;
		x->buf = nb;
		x->cap = cap;
	}
	memcpy(x->buf + x->len, upload, n);
	x->len += n;
	return MHD_YES;
}

/*
 * http_precheck - the cheap checks, here on the loop: junk is answered without taking a slot.
 * MHD_YES to go on to a slot, else the answer already queued (*answered set).
 */
static enum MHD_Result
http_precheck(struct ingest *in, struct MHD_Connection *c, struct req_ctx *x, int *answered)
{
	struct ingest_req req;
	char reason[256];
	enum verr ve;

	http_req(x, &req);
	*answered = 0;
	if ((ve = ingest_precheck(&req, reason, sizeof(reason))) == VERR_OK)
		return MHD_YES;
	*answered = 1;
	memset(&x->resp, 0, sizeof(x->resp));
	ingest_reject(in, &req, ve, reason, 1, &x->resp);
	metrics_inc(in->m.requests[x->ch][OUT_REJECTED], 1);
	return http_send(c, x->resp.status, x->resp.type, x->resp.body);
}

/* http_admit - a complete request past the cheap checks: a slot, then a worker or a flight. */
static enum MHD_Result
http_admit(struct ingest *in, struct MHD_Connection *c, struct req_ctx *x)
{
	char key[INGEST_FLIGHT_KEY_MAX];
	size_t klen;

	if (atomic_fetch_add(&in->inflight, 1) >= in->cf->ingest.max_inflight) {
		atomic_fetch_sub(&in->inflight, 1);
		metrics_inc(in->m.requests[x->ch][OUT_BUSY], 1);
		return http_fail(c, x->ch, 503, "busy");
	}
	x->counted = 1;
	metrics_set(in->m.inflight, atomic_load(&in->inflight));
	/* Suspended before it is queued or parked, so that a fast worker never resumes it too
	 * early. */
	x->state = RQ_QUEUED;
	x->conn = c;
	x->queued_us = clock_mono_us();
	x->arrived = time(NULL);
	x->job.run = http_run;
	x->job.settle = http_settle;
	MHD_suspend_connection(c);
	klen = http_flight_key(x, key, sizeof(key));
	if (klen == 0 || ingest_flight_join(in, key, klen, &x->job, &x->fe))
		ingest_work_push(in, &x->job);
	return MHD_YES;
}

static enum MHD_Result
http_handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
            const char *version, const char *upload, size_t *upload_len, void **con_cls)
{
	struct ingest *in = cls;
	struct req_ctx *x = *con_cls;
	enum MHD_Result r;
	int answered;

	(void)version;
	if (x == NULL)
		return http_first(in, c, url, method, con_cls);
	if (*upload_len) {
		size_t n = *upload_len;

		*upload_len = 0;
		return http_upload(in, x, upload, n);
	}
	if (x->state == RQ_DONE) {
		/* Resumed by the worker: the answer is ready. */
		x->state = RQ_SENT;
		return http_send(c, x->resp.status, x->resp.type, x->resp.body);
	}
	if (x->state != RQ_READING)
		return MHD_YES;
	x->state = RQ_SENT;
	http_unread(in, x);
	MHD_get_connection_values(c, MHD_HEADER_KIND, http_collect, &x->hs);
	if (x->hs.overflow)
		return http_fail(c, x->ch, 400, "too many headers");
	digest_sha256_hex(x->buf ? x->buf : (const uint8_t *)"", x->len, x->sha);
	r = http_precheck(in, c, x, &answered);
	return answered ? r : http_admit(in, c, x);
}

static void
http_completed(void *cls, struct MHD_Connection *c, void **con_cls,
               enum MHD_RequestTerminationCode toe)
{
	struct ingest *in = cls;
	struct req_ctx *x = *con_cls;

	(void)c;
	(void)toe;
	if (x == NULL)
		return;
	http_unread(in, x);
	if (x->counted) {
		atomic_fetch_sub(&in->inflight, 1);
		metrics_set(in->m.inflight, atomic_load(&in->inflight));
	}
	ingest_keyset_put(x->ks);
	free(x->buf);
	free(x);
	*con_cls = NULL;
}

int
ingest_http_start(struct ingest *in, char *err, size_t errlen)
{
	const struct conf_ingest *ci = &in->cf->ingest;
	struct sockaddr_in sin;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)ci->listen_port);
	if (inet_pton(AF_INET, ci->listen_addr, &sin.sin_addr) != 1) {
		snprintf(err, errlen, "ingest.listen_addr '%s' is not an IPv4 address",
		         ci->listen_addr);
		return -1;
	}
	/* Connections beyond max_inflight are still accepted so that they get a 503, up to a
	 * hard cap that protects the process itself. Each connection's memory pool is touched
	 * whole the first time it is used: at libmicrohttpd's 32 KiB default, the first storm of
	 * 1,000 connections took ~9,600 page faults and twice the CPU of later ones, at 8 KiB
	 * ~3,700. Channels' header blocks are 1-2 KiB, and bodies stream through the pool. */
	in->http = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
	        MHD_USE_ITC | MHD_USE_ERROR_LOG,
	    0, NULL, NULL, http_handle, in, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sin,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)ci->connection_timeout_s,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)(ci->max_inflight * 4 + 64),
	    MHD_OPTION_NOTIFY_COMPLETED, http_completed, in, MHD_OPTION_LISTEN_BACKLOG_SIZE,
	    (unsigned)1024, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)ci->connection_memory_bytes,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)ci->per_ip_connections, MHD_OPTION_END);
	if (in->http == NULL) {
		snprintf(err, errlen, "cannot listen on %s:%lld", ci->listen_addr, ci->listen_port);
		return -1;
	}
	return 0;
}

void
ingest_http_quiesce(struct ingest *in)
{
	if (in->http) {
		MHD_socket s = MHD_quiesce_daemon(in->http);
		if (s != MHD_INVALID_SOCKET)
			close(s);
	}
}

void
ingest_http_stop(struct ingest *in)
{
	if (in->http)
		MHD_stop_daemon(in->http);
	in->http = NULL;
}
