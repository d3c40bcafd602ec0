/*
 * test_ladder_topics - a ladder whose steps repeat a delay ("1 1 2") shares one delay topic
 * per delay: migrate creates each once and a processor subscribes to each once. Found by the
 * fault run, where both failed ("Duplicate topic name", "subscribe: Invalid argument").
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "migrate.h"

static struct conf cf;

static int
processor_ready(void *arg)
{
	return harness_file_count(arg, "event=ready") > 0;
}

static void
equal_delays_share_a_topic(void **state)
{
	struct migrate_result res = {0, 0, 0};
	char err[512], conf[128], log[128];
	int pid;

	(void)state;
	/* harness_setup already created the topics once; a second run must agree. */
	assert_int_equal(migrate_topics(&cf, "schemas", &res, err, sizeof(err)), 0);
	/* callbacks, retry.1s, retry.2s, dlq, order-events */
	assert_int_equal(res.topics, 5);
	snprintf(conf, sizeof(conf), "/tmp/paycb-ladder-%ld.conf", (long)getpid());
	snprintf(log, sizeof(log), "/tmp/paycb-ladder-%ld.log", (long)getpid());
	assert_int_equal(harness_write_conf(&cf, conf, NULL), 0);
	pid = harness_spawn("bin/paycb-processor", conf, log);
	assert_true(pid > 0);
	assert_int_equal(harness_wait_until(processor_ready, log, 30000), 0);
	assert_int_equal(harness_stop(pid, SIGTERM, 30000), 0);
	unlink(conf);
	unlink(log);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(equal_delays_share_a_topic)};
	int rc;

	if (harness_setup(&cf, "ladder", "1 1 2") != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
