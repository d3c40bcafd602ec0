/*
 * httpc - a minimal blocking HTTP/1.1 client for tests: one request per connection, the raw
 * request bytes under the test's control (so tests can send malformed and partial requests).
 */
#ifndef PAYCB_HTTPC_H
#define PAYCB_HTTPC_H

#include <stddef.h>

struct httpc_resp {
	int status;         /* 0 when no response came (connection closed or timed out) */
	char body[1 << 16]; /* enough for a whole /metrics page */
	size_t body_len;
	long long elapsed_ms;
};

/* Sends raw bytes to 127.0.0.1:port and reads the answer until close or timeout_ms. */
int httpc_raw(int port, const void *req, size_t len, int timeout_ms, struct httpc_resp *out);
/*
 * Sends METHOD path with headers ("Name: value\r\n" lines, may be NULL) and body, with a
 * correct Content-Length and Connection: close.
 */
int httpc_request(int port, const char *method, const char *path, const char *headers,
                  const void *body, size_t blen, int timeout_ms, struct httpc_resp *out);
/* A free TCP port on 127.0.0.1 (bound and released). */
int httpc_free_port(void);

#endif
