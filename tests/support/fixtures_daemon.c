/*
 * fixtures_daemon - the processor daemon of processor tests (see fixtures.h): its
 * configuration written with harness_write_conf, started, waited for until it owns its
 * partitions, and stopped.
 *
 * Apart from fixtures.c because harness_write_conf stands on the simulator's archive: a test
 * that only builds rows and messages links neither (Makefile, TEST_LIBS_).
 */
#include "fixtures.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "harness.h"

int
fx_processor_start(const struct conf *cf, const char *name, char *log, size_t loglen)
{
	const char *bin =
	    getenv("PAYCB_PROCESSOR_BIN") ? getenv("PAYCB_PROCESSOR_BIN") : "bin/paycb-processor";
	char path[1024], dir[600];

	snprintf(dir, sizeof(dir), "%s/test-logs", fx_dir());
	mkdir(dir, 0755);
	snprintf(path, sizeof(path), "%s/%s-%s.conf", dir, cf->kafka.topic_prefix, name);
	snprintf(log, loglen, "%s/%s-%s.log", dir, cf->kafka.topic_prefix, name);
	if (harness_write_conf(cf, path, NULL) != 0)
		return -1;
	return harness_spawn(bin, path, log);
}

int
fx_processor_up(const struct conf *cf, struct fx_pub **pub, int *pid, char *log, size_t loglen,
                long long timeout_ms)
{
	if ((*pub = fx_pub_new(cf)) == NULL)
		return -1;
	*pid = fx_processor_start(cf, "processor", log, loglen);
	if (*pid <= 0)
		return -1;
	return fx_wait_log(log, "event=assigned", 1, timeout_ms);
}

int
fx_processor_stop(struct fx_pub *pub, int pid, const char *log)
{
	int rc;

	fx_pub_free(pub);
	rc = harness_stop(pid, SIGTERM, 30000);
	printf("# processor exited with %d (log %s)\n", rc, log);
	return rc == 0 ? 0 : -1;
}
