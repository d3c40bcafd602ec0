/*
 * test_processor_outage - losing the database does not lose or skip messages.
 *
 * The processor under test reaches MariaDB through a TCP proxy in this test program, so
 * the test can cut every connection and refuse new ones (the real server, which others
 * use, is never touched):
 *
 *   - cut in the middle of a load of 200 callbacks, restored a few seconds later: the
 *     processor holds the messages it cannot process, reconnects, and every callback ends
 *     with exactly one effect; the process stays up;
 *   - cut for longer than processor.db_outage_max_s (2 s): the processor drains and exits
 *     69, without storing the offset of the message it could not process; a processor
 *     started after the database is back applies that message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fixtures.h"
#include "harness.h"

#define WAIT_MS 90000
#define M       "default"

static struct conf cf;
static struct db db;

/* ---- a TCP proxy that can be cut ----------------------------------------------------- */

struct proxy {
	int lfd, port, target_port;
	atomic_int down, stop;
	pthread_t th;
	pthread_mutex_t mu;
	int fds[512];
	int nfds;
};

static struct proxy px;

struct pipe2 {
	int a, b;
};

static void
proxy_track(int fd, int add)
{
	pthread_mutex_lock(&px.mu);
	if (add && px.nfds < 512) {
		px.fds[px.nfds++] = fd;
	} else if (!add) {
		for (int i = 0; i < px.nfds; i++)
			if (px.fds[i] == fd) {
				px.fds[i] = px.fds[--px.nfds];
				break;
			}
	}
	pthread_mutex_unlock(&px.mu);
}

static void *
proxy_pump(void *arg)
{
	struct pipe2 p = *(struct pipe2 *)arg;
	char buf[16384];

	free(arg);
	for (;;) {
		struct pollfd pf[2] = {{p.a, POLLIN, 0}, {p.b, POLLIN, 0}};
		int from = -1;

		if (poll(pf, 2, 200) < 0 && errno != EINTR)
			break;
		if (atomic_load(&px.stop))
			break;
		if (pf[0].revents)
			from = 0;
		else if (pf[1].revents)
			from = 1;
		if (from < 0)
			continue;
		ssize_t n = recv(from ? p.b : p.a, buf, sizeof(buf), 0);
		if (n <= 0 || send(from ? p.a : p.b, buf, (size_t)n, MSG_NOSIGNAL) != n)
			break;
	}
	proxy_track(p.a, 0);
	proxy_track(p.b, 0);
	close(p.a);
	close(p.b);
	return NULL;
}

static void *
proxy_main(void *arg)
{
	(void)arg;
	while (!atomic_load(&px.stop)) {
		struct pollfd pf = {px.lfd, POLLIN, 0};
		struct sockaddr_in sa;
		struct pipe2 *p;
		pthread_t t;
		int c, s;

		if (poll(&pf, 1, 100) <= 0)
			continue;
		if ((c = accept(px.lfd, NULL, NULL)) < 0)
			continue;
		if (atomic_load(&px.down)) {
			close(c); /* the database is "away": the handshake is lost */
			continue;
		}
		memset(&sa, 0, sizeof(sa));
		sa.sin_family = AF_INET;
		sa.sin_port = htons((uint16_t)px.target_port);
		sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		if ((s = socket(AF_INET, SOCK_STREAM, 0)) < 0 ||
		    connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
			close(c);
			if (s >= 0)
				close(s);
			continue;
		}
		p = malloc(sizeof(*p));
		p->a = c;
		p->b = s;
		proxy_track(c, 1);
		proxy_track(s, 1);
		if (pthread_create(&t, NULL, proxy_pump, p) == 0)
			pthread_detach(t);
	}
	return NULL;
}

static int
proxy_start(int target_port)
{
	struct sockaddr_in sa;
	socklen_t len = sizeof(sa);

	memset(&px, 0, sizeof(px));
	pthread_mutex_init(&px.mu, NULL);
	px.target_port = target_port;
	if ((px.lfd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (bind(px.lfd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(px.lfd, 64) != 0 ||
	    getsockname(px.lfd, (struct sockaddr *)&sa, &len) != 0)
		return -1;
	px.port = ntohs(sa.sin_port);
	return pthread_create(&px.th, NULL, proxy_main, NULL) == 0 ? 0 : -1;
}

/* proxy_cut - every open connection breaks and new ones are dropped at once */
static void
proxy_cut(void)
{
	atomic_store(&px.down, 1);
	pthread_mutex_lock(&px.mu);
	for (int i = 0; i < px.nfds; i++)
		shutdown(px.fds[i], SHUT_RDWR);
	pthread_mutex_unlock(&px.mu);
}

static void
proxy_restore(void)
{
	atomic_store(&px.down, 0);
}

static int
proxy_idle(void *arg)
{
	int n;

	(void)arg;
	pthread_mutex_lock(&px.mu);
	n = px.nfds;
	pthread_mutex_unlock(&px.mu);
	return n == 0;
}

static void
proxy_stop(void)
{
	atomic_store(&px.stop, 1);
	pthread_join(px.th, NULL);
	close(px.lfd);
	/* The pump threads see the stop flag within their poll timeout. */
	harness_wait_until(proxy_idle, NULL, 5000);
}

/* ---- the cases --------------------------------------------------------------------------- */

/* Starts a processor whose database is the proxy. */
static int
start_via_proxy(const char *name, char *log, size_t len)
{
	long long port = cf.db.port;
	int pid;

	cf.db.port = px.port;
	pid = fx_processor_start(&cf, name, log, len);
	cf.db.port = port;
	return pid;
}

static void
short_outage_mid_load_loses_nothing(void **state)
{
	char logs[1][1024];
	struct fx_load l;
	struct fx_pub *pub;
	struct fx_progress pr;
	struct fx_logwait lw;
	long long at_cut, during, skipped = 0;
	int pid;

	(void)state;
	assert_int_equal(fx_load_create(&db, &cf, &l, "outage", 100), 0);
	assert_non_null(pub = fx_pub_new(&cf));
	pid = start_via_proxy("short", logs[0], sizeof(logs[0]));
	assert_true(pid > 0);
	assert_int_equal(fx_load_publish(pub, &l, 0, 100), 0);
	pr = (struct fx_progress){&db, &l, 40};
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	proxy_cut();
	at_cut = fx_load_done(&db, &l);
	/* The processor notices, holds what it cannot do and retries with backoff. */
	lw = (struct fx_logwait){logs[0], "event=db_unavailable", 3};
	assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
	during = fx_load_done(&db, &l);
	printf("# cut with %lld of 200 done; %lld done while the database was away\n", at_cut,
	       during);
	assert_true(during < 200);
	proxy_restore();
	pr.want = 200;
	assert_int_equal(harness_wait_until(fx_load_done_at_least, &pr, WAIT_MS), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);
	assert_int_equal(fx_load_check(&db, &l, logs, 1, &skipped), 0);
	printf("# db_unavailable lines: %lld\n",
	       harness_file_count(logs[0], "event=db_unavailable"));
	fx_pub_free(pub);
	fx_load_free(&l);
}

static void
long_outage_exits_69_and_the_message_waits_for_the_next_processor(void **state)
{
	char log1[1024], log2[1024];
	struct fx_pub *pub;
	struct fx_pos pos;
	unsigned long long id;
	long long max_s = cf.processor.db_outage_max_s;
	int pid, rc;

	(void)state;
	assert_int_equal(fx_order(&db, M, "O-outage", "3.00", "CNY", "PENDING"), 0);
	id = fx_pay_row(&db, &cf, M, "wxpay", "T-outage", "O-outage", "3.00", "CNY");
	assert_true(id > 0);
	cf.processor.db_outage_max_s = 2;
	pid = start_via_proxy("long", log1, sizeof(log1));
	cf.processor.db_outage_max_s = max_s;
	assert_true(pid > 0);
	{
		struct fx_logwait lw = {log1, "event=assigned", 1};
		assert_int_equal(harness_wait_until(fx_log_has, &lw, WAIT_MS), 0);
	}
	proxy_cut();
	assert_non_null(pub = fx_pub_new(&cf));
	assert_int_equal(
	    fx_publish(pub, NULL, 0, id, M, "wxpay", "O-outage", 1, RD_KAFKA_PARTITION_UA, &pos),
	    0);
	rc = harness_stop(pid, 0, 60000);
	printf("# processor exited with %d after the outage outlasted 2 s\n", rc);
	assert_int_equal(rc, 69);
	assert_true(harness_file_count(log1, "event=db_outage") >= 1);
	proxy_restore();
	assert_int_equal(harness_query_i64(&db,
	                                   "SELECT status FROM pay_callback_log WHERE id = "
	                                   "(SELECT MAX(id) FROM pay_callback_log WHERE "
	                                   "out_trade_no = 'O-outage')",
	                                   NULL, 0),
	                 0);
	/* Its offset was not stored: the next member of the group reads it again. */
	pid = fx_processor_start(&cf, "after", log2, sizeof(log2));
	assert_true(pid > 0);
	assert_int_equal(fx_wait_row(&db, 0, id, 1, WAIT_MS), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM order_events WHERE out_trade_no "
	                                    "= 'O-outage'"),
	                 2);
	fx_pub_free(pub);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(short_outage_mid_load_loses_nothing),
	    cmocka_unit_test(long_outage_exits_69_and_the_message_waits_for_the_next_processor),
	};
	int rc;

	if (fx_processor_conf(&cf, "poutage", NULL, 2) != 0)
		return 1;
	/* Short timeouts, so a cut connection is noticed at once. */
	cf.db.connect_timeout_s = 2;
	cf.db.read_timeout_s = 5;
	cf.db.write_timeout_s = 5;
	if (proxy_start((int)cf.db.port) != 0) {
		printf("# cannot start the proxy\n");
		return 1;
	}
	harness_db(&cf, &db);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	db_close(&db);
	proxy_stop();
	harness_teardown(&cf);
	return rc;
}
