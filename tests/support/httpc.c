/*
 * httpc - the tests' minimal HTTP client (see httpc.h).
 */
#include "httpc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static long long
httpc_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

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
	struct sockaddr_in sin;
	char *buf = malloc(1 << 18);
	size_t got = 0, off = 0;
	long long t0 = httpc_ms(), end = t0 + timeout_ms;
	int fd, rc = -1;

	memset(out, 0, sizeof(*out));
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_port = htons((unsigned short)port);
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (buf == NULL || (fd = socket(AF_INET, SOCK_STREAM, 0)) < 0) {
		free(buf);
		return -1;
	}
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) != 0)
		goto done;
	while (off < len) {
		ssize_t n = send(fd, (const char *)req + off, len - off, MSG_NOSIGNAL);
		if (n <= 0)
			break; /* the server may answer early (413) and close */
		off += (size_t)n;
	}
	for (;;) {
		struct pollfd p = {fd, POLLIN, 0};
		long long left = end - httpc_ms();
		ssize_t n;

		if (left <= 0 || poll(&p, 1, (int)left) <= 0)
			break;
		if (got >= (1 << 18) - 1)
			break;
		n = recv(fd, buf + got, (size_t)(1 << 18) - 1 - got, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	if (got > 12 && strncmp(buf, "HTTP/1.", 7) == 0) {
		char *b = strstr(buf, "\r\n\r\n");
		out->status = atoi(buf + 9);
		if (b) {
			b += 4;
			out->body_len = got - (size_t)(b - buf);
			if (out->body_len >= sizeof(out->body))
				out->body_len = sizeof(out->body) - 1;
			memcpy(out->body, b, out->body_len);
			out->body[out->body_len] = '\0';
		}
	}
	rc = 0;
done:
	out->elapsed_ms = httpc_ms() - t0;
	close(fd);
	free(buf);
	return rc;
}

int
httpc_request(int port, const char *method, const char *path, const char *headers,
	      const void *body, size_t blen, int timeout_ms, struct httpc_resp *out)
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
