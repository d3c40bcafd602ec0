/*
 * httpc - the tests' minimal HTTP client (see httpc.h), on the simulator's HTTP client
 * (tools/sim/sim_http.c), so the tests and paycb-sim share one implementation.
 */
#include "httpc.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "sim_http.h"

/* Answers up to this size are read whole; /metrics pages are the largest. */
#define HTTPC_BUF (1 << 18)

int
httpc_free_port(void)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&sin, &sl) == 0)
		port = ntohs(sin.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

int
httpc_raw(int port, const void *req, size_t len, int timeout_ms, struct httpc_resp *out)
{
	struct sim_reply r = {0, out->body, sizeof(out->body), 0};
	long long t0 = clock_mono_ms();
	int rc;

	rc = sim_http_once("127.0.0.1", port, req, len, timeout_ms, HTTPC_BUF, &r);
	out->status = r.status;
	out->body_len = r.body_len;
	out->elapsed_ms = clock_mono_ms() - t0;
	return rc;
}

int
httpc_request(int port, const char *method, const char *path, const char *headers, const void *body,
              size_t blen, int timeout_ms, struct httpc_resp *out)
{
	size_t hl = 512 + (headers ? strlen(headers) : 0) + strlen(path);
	char *req = malloc(hl + blen);
	int n, rc;

	if (req == NULL)
		return -1;
	n = snprintf(req, hl,
	             "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
	             "Content-Length: %zu\r\n%s\r\n",
	             method, path, blen, headers ? headers : "");
	/* A request without a body passes NULL, which memcpy may not be given even for 0. */
	if (blen > 0)
		memcpy(req + n, body, blen);
	rc = httpc_raw(port, req, (size_t)n + blen, timeout_ms, out);
	free(req);
	return rc;
}
