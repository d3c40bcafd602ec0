/*
 * test_ladder_topics - a ladder whose steps repeat a delay ("1 1 2") shares one delay topic
 * per delay: migrate creates each once and a processor subscribes to each once. Found by the
 * fault run, where both failed ("Duplicate topic name", "subscribe: Invalid argument").
 *
 * The delay topics take kafka.retry_partitions, the others kafka.partitions; a delay topic
 * that has more partitions than asked (created before the setting, when they took
 * kafka.partitions) is kept as it is, and one that has fewer is grown.
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
#include "kq.h"
#include "ladder.h"
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

/*
 * counts - the partitions of the main topic and of the two delay topics into n[3]: asking for
 * one partition of topics that exist creates and grows nothing and reports what they have.
 */
static void
counts(int n[3])
{
	char names[3][256], err[512];
	const char *const cn[3] = {names[0], names[1], names[2]};
	const int one[3] = {1, 1, 1};

	conf_topic(&cf, "callbacks", names[0], sizeof(names[0]));
	ladder_topic(&cf, 1, names[1], sizeof(names[1]));
	ladder_topic(&cf, 3, names[2], sizeof(names[2]));
	assert_int_equal(kq_create_topics(&cf.kafka, cn, one, NULL, 3, 30000, n, err, sizeof(err)),
	                 0);
}

static void
delay_topics_take_retry_partitions(void **state)
{
	struct migrate_result res = {0, 0, 0};
	int rp = (int)cf.kafka.retry_partitions, main_parts = (int)cf.kafka.partitions, n[3];
	char err[512];

	(void)state;
	assert_true(rp < main_parts);
	counts(n);
	assert_int_equal(n[0], main_parts);
	assert_int_equal(n[1], rp);
	assert_int_equal(n[2], rp);

	/* Fewer asked than the topics have: all kept as they are, and migrate succeeds. */
	cf.kafka.retry_partitions = 1;
	cf.kafka.partitions = 1;
	assert_int_equal(migrate_topics(&cf, "schemas", &res, err, sizeof(err)), 0);
	counts(n);
	assert_int_equal(n[0], main_parts);
	assert_int_equal(n[1], rp);
	assert_int_equal(n[2], rp);

	/* More asked: the delay topics grow, the main topic does not move. */
	cf.kafka.retry_partitions = rp + 1;
	assert_int_equal(migrate_topics(&cf, "schemas", &res, err, sizeof(err)), 0);
	counts(n);
	assert_int_equal(n[0], main_parts);
	assert_int_equal(n[1], rp + 1);
	assert_int_equal(n[2], rp + 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {cmocka_unit_test(equal_delays_share_a_topic),
	                                   cmocka_unit_test(delay_topics_take_retry_partitions)};
	int rc;

	if (harness_setup(&cf, "ladder", "1 1 2") != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
