/*
 * test_sim_http - the simulator's HTTP client (tools/sim/sim_http.c), which paycb-sim's
 * senders and every test speak through: when an answer is whole and when the connection may
 * carry the next request. A keep-alive connection that the client drops after a complete
 * answer costs ingest and the load generator a new connection per request, so the bench
 * would measure connection set-up rather than notifications.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sim_http.h"

/* parse - sim_http_parse on a copy of text (it needs one spare byte); its return code. */
static int
parse(const char *text, int closed, struct sim_answer *a, int *keep)
{
	static char buf[1024];
	size_t n = strlen(text);

	memset(a, 0, sizeof(*a));
	memcpy(buf, text, n + 1);
	return sim_http_parse(buf, n, closed, a, keep);
}

static void
no_content_is_whole_and_keeps_the_connection(void **state)
{
	struct sim_answer a;
	int keep = 0;

	(void)state;
	/* WeChat Pay's success answer as ingest sends it: no Content-Length, no body. */
	assert_int_equal(parse("HTTP/1.1 204 No Content\r\nDate: Sun, 06 Dec 2026 02:44:00 "
	                       "GMT\r\n\r\n",
	                       0, &a, &keep),
	                 0);
	assert_int_equal(a.status, 204);
	assert_int_equal(a.body_len, 0);
	assert_int_equal(keep, 1);
	/* Even with a stray Content-Length a 204 has no body. */
	assert_int_equal(
	    parse("HTTP/1.1 204 No Content\r\nContent-Length: 5\r\n\r\n", 0, &a, &keep), 0);
	assert_int_equal(keep, 1);
}

static void
close_and_old_versions_end_the_connection(void **state)
{
	struct sim_answer a;
	int keep = 1;

	(void)state;
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess", 0, &a, &keep),
	                 0);
	assert_int_equal(keep, 1);
	assert_string_equal(a.body, "success");
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 7\r\n\r\n"
	                       "success",
	                       0, &a, &keep),
	                 0);
	assert_int_equal(keep, 0);
	assert_int_equal(parse("HTTP/1.0 204 No Content\r\n\r\n", 0, &a, &keep), 0);
	assert_int_equal(keep, 0);
	/* Without a length the body ends with the connection. */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n\r\nsucc", 0, &a, &keep), 1);
	assert_int_equal(parse("HTTP/1.1 200 OK\r\n\r\nsuccess", 1, &a, &keep), 0);
	assert_int_equal(keep, 0);
	assert_string_equal(a.body, "success");
	/* A body cut short by the close is no answer. */
	assert_int_equal(parse("HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsucc", 1, &a, &keep),
	                 -1);
}

/* A one-connection-at-a-time server: answers each request in turn from a fixed list. */
static struct {
	int lfd, port;
	atomic_int accepted, requests;
} srv;

static const char *const answers[] = {
    "HTTP/1.1 204 No Content\r\nDate: Sun, 06 Dec 2026 02:44:00 GMT\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 7\r\n\r\nsuccess",
};

/* serve_one - reads one request (headers and Content-Length body) from fd and answers it;
 * -1 when the connection ended. */
static int
serve_one(int fd, char *buf, size_t cap)
{
	size_t got = 0, need = 0;
	char *end = NULL;

	while (end == NULL || got < need) {
		ssize_t k = recv(fd, buf + got, cap - 1 - got, 0);
		const char *cl;

		if (k <= 0)
			return -1;
		got += (size_t)k;
		buf[got] = '\0';
		if (end == NULL && (end = strstr(buf, "\r\n\r\n")) != NULL) {
			cl = strstr(buf, "Content-Length: ");
			need = (size_t)(end - buf) + 4 + (cl ? strtoul(cl + 16, NULL, 10) : 0);
		}
	}
	{
		const char *ans = answers[atomic_fetch_add(&srv.requests, 1) % 2];

		return send(fd, ans, strlen(ans), MSG_NOSIGNAL) < 0 ? -1 : 0;
	}
}

static void *
server(void *arg)
{
	static char buf[8192];
	int fd;

	(void)arg;
	while ((fd = accept(srv.lfd, NULL, NULL)) >= 0) {
		atomic_fetch_add(&srv.accepted, 1);
		while (serve_one(fd, buf, sizeof(buf)) == 0)
			;
		close(fd);
	}
	return NULL;
}

static void
one_connection_carries_every_request(void **state)
{
	struct sockaddr_in sin;
	socklen_t sl = sizeof(sin);
	struct sim_conn c;
	struct sim_answer a;
	pthread_t t;

	(void)state;
	memset(&sin, 0, sizeof(sin));
	sin.sin_family = AF_INET;
	sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	srv.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_true(srv.lfd >= 0);
	assert_int_equal(bind(srv.lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
	assert_int_equal(listen(srv.lfd, 8), 0);
	assert_int_equal(getsockname(srv.lfd, (struct sockaddr *)&sin, &sl), 0);
	srv.port = ntohs(sin.sin_port);
	assert_int_equal(pthread_create(&t, NULL, server, NULL), 0);
	sim_conn_init(&c, "127.0.0.1", srv.port);
	for (int i = 0; i < 6; i++) {
		assert_int_equal(
		    sim_http_post(&c, "/pay/callback/wxpay", "X-Test: 1\r\n", "{}", 2, 5000, &a),
		    0);
		assert_int_equal(a.status, i % 2 == 0 ? 204 : 200);
		assert_true(a.us >= 0);
	}
	sim_conn_close(&c);
	free(c.buf);
	shutdown(srv.lfd, SHUT_RDWR);
	pthread_join(t, NULL);
	close(srv.lfd);
	assert_int_equal(atomic_load(&srv.requests), 6);
	/* The 204s left the connection open: all six went on the first one. */
	assert_int_equal(atomic_load(&srv.accepted), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(no_content_is_whole_and_keeps_the_connection),
	    cmocka_unit_test(close_and_old_versions_end_the_connection),
	    cmocka_unit_test(one_connection_carries_every_request),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
