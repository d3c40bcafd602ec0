/*
 * sim_http - the HTTP/1.1 client of paycb-sim, which the tests link too (tests/support/httpc.c):
 * keep-alive connections for the simulator's senders, and one request on a connection of its
 * own for readiness checks and the tests' raw requests.
 */
#ifndef PAYCB_SIM_HTTP_H
#define PAYCB_SIM_HTTP_H

#include <stddef.h>
#include <sys/uio.h>

/* One keep-alive connection to ingest. */
struct sim_conn {
	int fd;
	char addr[64];
	int port;
	char *buf;
	size_t cap;
};

struct sim_answer {
	int status; /* 0 when no answer came (connection error or timeout) */
	char body[256];
	size_t body_len;
	long long us; /* from sending to the whole answer */
};

void sim_conn_init(struct sim_conn *c, const char *addr, int port);
/*
 * Connects within timeout_ms. The answer buffer is allocated on the first open (16 KiB)
 * unless the caller gave the connection one of its own (buf and cap).
 */
int sim_conn_open(struct sim_conn *c, int timeout_ms);
/*
 * Posts one request (headers are "Name: value\r\n" lines) and reads the answer. A reused
 * connection the server closed meanwhile is reopened once. Returns 0 with an answer in a,
 * or -1 (a->status 0) on a connection error or timeout; the connection is then closed.
 */
int sim_http_post(struct sim_conn *c, const char *path, const char *headers, const void *body,
                  size_t len, int timeout_ms, struct sim_answer *a);
/*
 * An iovec that sends n bytes from p. POSIX declares iov_base without const although
 * writev() and sendmsg() only read it; this is the one place that drops the qualifier.
 */
struct iovec sim_iov_out(const void *p, size_t n);
/* Formats a POST's request line and headers into out; returns their length or -1. */
int sim_http_head(const struct sim_conn *c, const char *path, const char *headers, size_t len,
                  char *out, size_t outlen);
/*
 * Parses the got bytes of an answer in buf (which has room for one more byte, a NUL).
 * closed says the connection has ended. Returns 0 with a filled (status, body), 1 when more
 * bytes are needed, -1 for a malformed or cut-off answer. *keep: the connection may be reused.
 */
int sim_http_parse(char *buf, size_t got, int closed, struct sim_answer *a, int *keep);
/* A GET, for readiness checks. */
int sim_http_get(const char *addr, int port, const char *path, int timeout_ms,
                 struct sim_answer *a);
void sim_conn_close(struct sim_conn *c);

/* One answer as sim_http_once returns it: its body goes to the caller's buffer. */
struct sim_reply {
	int status; /* 0 when no answer came (closed, malformed or timed out) */
	char *body; /* the caller's buffer of cap bytes; the body is cut to cap - 1, NUL-ended */
	size_t cap, body_len;
};

/*
 * Sends the raw bytes req on a connection of its own (all of them, unless the server answers
 * early and closes, as with a 413) and reads one answer within timeout_ms, by Content-Length
 * or until the server closes. Answers up to bufcap bytes are read whole. Returns 0 when the
 * connection opened (r->status 0 when no answer came), -1 when it did not.
 */
int sim_http_once(const char *addr, int port, const void *req, size_t len, int timeout_ms,
                  size_t bufcap, struct sim_reply *r);

#endif
