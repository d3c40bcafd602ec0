/*
 * sim_http - the simulator's HTTP/1.1 client: one keep-alive connection per sender, one
 * request at a time, answers read by Content-Length (or until close).
 *
 * The channels keep connections to a merchant open between notifications, and a server
 * may close an idle one at any moment; a request whose reused connection turns out closed
 * before any answer byte arrived is sent once more on a fresh connection. That second send
 * is not a re-push in the channel's sense, and ingest deduplicates it anyway.
 *
 * The tests send their requests through sim_http_once (tests/support/httpc.c), so the
 * simulator and the tests speak HTTP through this one client.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "clock.h"
#include "sim_http.h"

#define SIM_HTTP_BUF 16384

void
sim_conn_init(struct sim_conn *c, const char *addr, int port)
{
	memset(c, 0, sizeof(*c));
	c->fd = -1;
	snprintf(c->addr, sizeof(c->addr), "%s", addr);
	c->port = port;
}

void
sim_conn_close(struct sim_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}

int
sim_conn_open(struct sim_conn *c, int timeout_ms)
{
	struct sockaddr_in sin;
	struct pollfd p;
	int one = 1, soerr = 0, rc = -1;
	socklen_t sl = sizeof(soerr);

	sim_conn_close(c);
	if (c->buf == NULL) {
		if ((c->buf = malloc(SIM_HTTP_BUF)) == NULL)
			return -1;
		c->cap = SIM_HTTP_BUF;
	}
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)c->port);
	if (inet_pton(AF_INET, c->addr, &sin.sin_addr) != 1)
		return -1;
	if ((c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0)
		return -1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(c->fd, (struct sockaddr *)&sin, sizeof(sin)) != 0) {
		if (errno != EINPROGRESS)
			goto done;
		p = (struct pollfd){c->fd, POLLOUT, 0};
		if (poll(&p, 1, timeout_ms) != 1 ||
		    getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0 || soerr != 0)
			goto done;
	}
	rc = 0;
done:
	if (rc != 0)
		sim_conn_close(c);
	return rc;
}

/* wait_fd - polls fd for ev until the deadline; 0 when ready. */
static int
wait_fd(int fd, short ev, long long deadline_us)
{
	long long left = deadline_us - clock_mono_us();
	struct pollfd p = {fd, ev, 0};

	if (left <= 0)
		return -1;
	return poll(&p, 1, (int)((left + 999) / 1000)) == 1 ? 0 : -1;
}

static int
send_all(int fd, struct iovec *iov, int n, long long deadline_us)
{
	struct msghdr mh;

	while (n > 0) {
		ssize_t k;

		memset(&mh, 0, sizeof(mh));
		mh.msg_iov = iov;
		mh.msg_iovlen = (size_t)n;
		k = sendmsg(fd, &mh, MSG_NOSIGNAL);
		if (k < 0) {
			if ((errno == EAGAIN || errno == EINTR) &&
			    wait_fd(fd, POLLOUT, deadline_us) == 0)
				continue;
			return -1;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
	return 0;
}

/* The parts of one answer parsed in place: where its body starts and how long it is. */
struct parts {
	int status, keep;
	size_t hlen, body_len;
};

/* parse_parts - sim_http_parse's work, leaving the body in buf (see sim_http.h). */
static int
parse_parts(char *buf, size_t got, int closed, struct parts *p)
{
	const char *cl, *conn;
	char *end;
	long long clen = -1;

	p->keep = 0;
	p->status = -1; /* until the status line is read */
	buf[got] = '\0';
	if (got <= 4 || (end = strstr(buf, "\r\n\r\n")) == NULL)
		return closed ? -1 : 1;
	if (got < 12 || strncmp(buf, "HTTP/1.", 7) != 0)
		return -1;
	p->hlen = (size_t)(end - buf) + 4;
	cl = strcasestr(buf, "\r\ncontent-length:");
	conn = strcasestr(buf, "\r\nconnection:");
	p->status = atoi(buf + 9);
	if (cl != NULL && cl < end)
		clen = strtoll(cl + 17, NULL, 10);
	/* 204 and 304 have no body whatever the headers say, so they end where their headers
	 * do and leave the connection open (WeChat Pay's success answer is a 204 without
	 * Content-Length: taken for the end of the connection, it cost a connection each). */
	if (p->status == 204 || p->status == 304)
		clen = 0;
	p->keep = clen >= 0 && buf[7] == '1' &&
	          !(conn != NULL && conn < end &&
	            strncasecmp(conn + 13 + strspn(conn + 13, " "), "close", 5) == 0);
	if (clen >= 0 ? got < p->hlen + (size_t)clen : !closed)
		return closed ? -1 : 1;
	p->body_len = got - p->hlen;
	return 0;
}

/* copy_body - the body of a parsed answer into out, cut to cap - 1 bytes and NUL-ended. */
static size_t
copy_body(const char *buf, const struct parts *p, char *out, size_t cap)
{
	size_t n = p->body_len < cap ? p->body_len : cap - 1;

	memcpy(out, buf + p->hlen, n);
	out[n] = '\0';
	return n;
}

int
sim_http_parse(char *buf, size_t got, int closed, struct sim_answer *a, int *keep)
{
	struct parts p;
	int r = parse_parts(buf, got, closed, &p);

	*keep = p.keep;
	if (p.status >= 0)
		a->status = p.status;
	if (r != 0)
		return r;
	a->body_len = copy_body(buf, &p, a->body, sizeof(a->body));
	return 0;
}

/*
 * read_answer - reads one answer into the connection's buffer. Returns 0 with p filled, 1
 * when the connection closed before the first byte (a stale keep-alive connection), -1 on
 * anything else. p->keep says whether the connection may be reused.
 *
 * An answer is never there the instant its request left, so the socket is waited on first:
 * a request costs one sendmsg, one poll and (for answers of one segment) one recv, not an
 * extra recv that fails with EAGAIN.
 */
static int
read_answer(struct sim_conn *c, long long deadline_us, struct parts *p)
{
	size_t got = 0;

	p->keep = 0;
	if (wait_fd(c->fd, POLLIN, deadline_us) != 0)
		return -1;
	for (;;) {
		ssize_t k;
		int r = got > 0 ? parse_parts(c->buf, got, 0, p) : 1;

		if (r <= 0)
			return r;
		if (got >= c->cap - 1)
			return -1;
		k = recv(c->fd, c->buf + got, c->cap - 1 - got, 0);
		if (k == 0) {
			if (got == 0)
				return 1;
			/* The body may end with the connection. */
			return parse_parts(c->buf, got, 1, p) == 0 ? 0 : -1;
		}
		if (k < 0) {
			if ((errno == EAGAIN || errno == EINTR) &&
			    wait_fd(c->fd, POLLIN, deadline_us) == 0)
				continue;
			return got == 0 && errno == ECONNRESET ? 1 : -1;
		}
		got += (size_t)k;
	}
}

int
sim_http_head(const struct sim_conn *c, const char *path, const char *headers, size_t len,
              char *out, size_t outlen)
{
	int n = snprintf(out, outlen,
	                 "POST %s HTTP/1.1\r\nHost: %s:%d\r\nUser-Agent: paycb-sim\r\n"
	                 "Accept: */*\r\nContent-Length: %zu\r\n%s\r\n",
	                 path, c->addr, c->port, len, headers ? headers : "");

	return n < 0 || (size_t)n >= outlen ? -1 : n;
}

struct iovec
sim_iov_out(const void *p, size_t n)
{
	return (struct iovec){(void *)(uintptr_t)p, n};
}

int
sim_http_post(struct sim_conn *c, const char *path, const char *headers, const void *body,
              size_t len, int timeout_ms, struct sim_answer *a)
{
	char head[2048];
	struct parts p;
	int n;

	memset(a, 0, sizeof(*a));
	if ((n = sim_http_head(c, path, headers, len, head, sizeof(head))) < 0)
		return -1;
	for (int attempt = 0; attempt < 2; attempt++) {
		long long t0 = clock_mono_us(), deadline = t0 + (long long)timeout_ms * 1000;
		int reused = c->fd >= 0, r;
		struct iovec iov[2] = {{head, (size_t)n}, sim_iov_out(body, len)};

		if (!reused && sim_conn_open(c, timeout_ms) != 0)
			break;
		if (send_all(c->fd, iov, 2, deadline) != 0) {
			sim_conn_close(c);
			if (reused)
				continue;
			break;
		}
		r = read_answer(c, deadline, &p);
		a->us = clock_mono_us() - t0;
		if (r == 0) {
			a->status = p.status;
			a->body_len = copy_body(c->buf, &p, a->body, sizeof(a->body));
			if (!p.keep)
				sim_conn_close(c);
			return 0;
		}
		sim_conn_close(c);
		if (r == 1 && reused)
			continue;
		break;
	}
	a->status = 0;
	return -1;
}

int
sim_http_once(const char *addr, int port, const void *req, size_t len, int timeout_ms,
              size_t bufcap, struct sim_reply *r)
{
	struct sim_conn c;
	struct parts p;
	long long deadline = clock_mono_us() + (long long)timeout_ms * 1000;
	struct iovec iov[1] = {{(void *)(uintptr_t)req, len}};
	int rc = -1;

	r->status = 0;
	r->body_len = 0;
	if (r->cap > 0)
		r->body[0] = '\0';
	sim_conn_init(&c, addr, port);
	if ((c.buf = malloc(bufcap)) == NULL)
		goto done;
	c.cap = bufcap;
	if (sim_conn_open(&c, timeout_ms) != 0)
		goto done;
	rc = 0;
	/* A server may answer before it has read everything (413) and close: read the answer
	 * whatever became of the sending. */
	(void)send_all(c.fd, iov, 1, deadline);
	if (read_answer(&c, deadline, &p) == 0 && r->cap > 0) {
		r->status = p.status;
		r->body_len = copy_body(c.buf, &p, r->body, r->cap);
	}
done:
	sim_conn_close(&c);
	free(c.buf);
	return rc;
}

int
sim_http_get(const char *addr, int port, const char *path, int timeout_ms, struct sim_answer *a)
{
	struct sim_reply r = {0, a->body, sizeof(a->body), 0};
	char req[512];
	int n;

	memset(a, 0, sizeof(*a));
	n = snprintf(req, sizeof(req),
	             "GET %s HTTP/1.1\r\nHost: %s:%d\r\nConnection: close\r\n\r\n", path, addr,
	             port);
	if (n < 0 || (size_t)n >= sizeof(req) ||
	    sim_http_once(addr, port, req, (size_t)n, timeout_ms, SIM_HTTP_BUF, &r) != 0 ||
	    r.status == 0)
		return -1;
	a->status = r.status;
	a->body_len = r.body_len;
	return 0;
}
