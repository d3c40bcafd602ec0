/*
 * test_harness - the integration harness's teardown after a failed setup.
 *
 * Every integration test's group teardown calls harness_teardown, and cmocka runs it even
 * when the group setup failed. It must then neither crash (a configuration that could not be
 * read leaves no names) nor drop anything: the database and the topics it drops are the
 * test's own, never the ones a configuration names. Each case points the configuration at
 * listening sockets of its own and checks that the teardown connected to neither, so no
 * MariaDB or Kafka is needed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "conf.h"
#include "harness.h"

static char dir[] = "/tmp/paycb-harness-XXXXXX";
static char conf_path[512], pass_path[512];
/* Stand-ins for the database and the broker: listening sockets nothing should reach. */
static int db_fd = -1, kafka_fd = -1, db_port, kafka_port;

static int
listener(int *port)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if ((fd = socket(AF_INET, SOCK_STREAM, 0)) < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(fd, 8) != 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
		close(fd);
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* Whether a connection is waiting on the listening socket fd. */
static int
reached(int fd)
{
	struct pollfd p = {fd, POLLIN, 0};

	return poll(&p, 1, 0) > 0;
}

/* teardown_reaches_nothing - runs harness_teardown(cf), which must connect to neither the
 * database nor the broker cf names. */
static void
teardown_reaches_nothing(struct conf *cf)
{
	harness_teardown(cf);
	assert_false(reached(db_fd));
	assert_false(reached(kafka_fd));
}

/* write_conf - a configuration naming the stand-ins, a database "precious" and topic prefix
 * "precious"; without the password file (a required setting) unless with_password. */
static void
write_conf(int with_password)
{
	FILE *fp;

	assert_non_null(fp = fopen(conf_path, "w"));
	fprintf(fp,
	        "database = { host = \"127.0.0.1\"; port = %d; name = \"precious\";%s%s%s };\n"
	        "kafka = { brokers = \"127.0.0.1:%d\"; topic_prefix = \"precious\"; };\n",
	        db_port, with_password ? " password_file = \"" : "", with_password ? pass_path : "",
	        with_password ? "\";" : "", kafka_port);
	fclose(fp);
}

static void
missing_conf_fails_setup_and_teardown_is_safe(void **state)
{
	struct conf cf;

	(void)state;
	setenv("PAYCB_TEST_CONF", "/nonexistent/paycb.conf", 1);
	assert_int_equal(harness_setup(&cf, "harness", NULL), -1);
	assert_null(cf.db.name);
	assert_null(cf.kafka.topic_prefix);
	teardown_reaches_nothing(&cf);
}

static void
broken_conf_keeps_no_names_and_teardown_drops_nothing(void **state)
{
	struct conf cf;

	(void)state;
	write_conf(0);
	setenv("PAYCB_TEST_CONF", conf_path, 1);
	assert_int_equal(harness_setup(&cf, "harness", NULL), -1);
	assert_null(cf.db.name);
	teardown_reaches_nothing(&cf);
}

static void
teardown_drops_no_configured_names(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	write_conf(1);
	assert_int_equal(conf_load(conf_path, PROG_TOOL, &cf, &errs), 0);
	assert_string_equal(cf.db.name, "precious");
	teardown_reaches_nothing(&cf);
}

static int
setup(void **state)
{
	FILE *fp;

	(void)state;
	if (mkdtemp(dir) == NULL)
		return -1;
	snprintf(conf_path, sizeof(conf_path), "%s/paycb.conf", dir);
	snprintf(pass_path, sizeof(pass_path), "%s/db.pass", dir);
	if ((fp = fopen(pass_path, "w")) == NULL)
		return -1;
	fputs("secret\n", fp);
	fclose(fp);
	chmod(pass_path, 0600);
	db_fd = listener(&db_port);
	kafka_fd = listener(&kafka_port);
	return db_fd >= 0 && kafka_fd >= 0 ? 0 : -1;
}

static int
teardown(void **state)
{
	(void)state;
	if (db_fd >= 0)
		close(db_fd);
	if (kafka_fd >= 0)
		close(kafka_fd);
	unlink(conf_path);
	unlink(pass_path);
	rmdir(dir);
	return 0;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(missing_conf_fails_setup_and_teardown_is_safe),
	    cmocka_unit_test(broken_conf_keeps_no_names_and_teardown_drops_nothing),
	    cmocka_unit_test(teardown_drops_no_configured_names),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
