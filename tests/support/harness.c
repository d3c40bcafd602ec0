/*
 * harness - shared setup of integration tests (see harness.h): the private database and
 * topic prefix, queries and waits with deadlines, and starting and stopping daemons. The
 * configuration written back for those daemons is harness_conf.c's.
 */
#include "harness.h"
#include "topics.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chan_conf.h"
#include "migrate.h"

/* Every test database's name starts with this; the teardown drops no other. */
#define HARNESS_DB_PREFIX "paycb_test_"

void
harness_set(char **field, const char *value)
{
	free(*field);
	*field = strdup(value);
}

long long
harness_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int
harness_setup(struct conf *cf, const char *tag, const char *ladder)
{
	return harness_setup_parts(cf, tag, ladder, 0);
}

int
harness_setup_parts(struct conf *cf, const char *tag, const char *ladder, int partitions)
{
	const char *file = getenv("PAYCB_TEST_CONF") ? getenv("PAYCB_TEST_CONF") : "var/paycb.conf";
	struct migrate_result res = {0, 0, 0};
	struct cfg_errors errs;
	char buf[128], err[1024];

	if (chan_conf_use() != 0) {
		printf("# harness: the channels' settings do not fit the configuration\n");
		return -1;
	}
	if (conf_load(file, PROG_TOOL, cf, &errs) != 0) {
		printf("# harness: %s", errs.text);
		/* Nothing of a configuration that failed is kept: the group teardown that runs
		 * after a failed setup then finds no names and drops nothing. */
		conf_free(cf);
		return -1;
	}
	snprintf(buf, sizeof(buf), HARNESS_DB_PREFIX "%s_%ld", tag, (long)getpid());
	harness_set(&cf->db.name, buf);
	snprintf(buf, sizeof(buf), "t%ld_%s", (long)getpid(), tag);
	harness_set(&cf->kafka.topic_prefix, buf);
	if (ladder) {
		char *dup = strdup(ladder), *save = NULL;
		cf->retry.ladder_s.n = 0;
		for (char *t = strtok_r(dup, " ", &save); t && cf->retry.ladder_s.n < CFG_LIST_MAX;
		     t = strtok_r(NULL, " ", &save))
			cf->retry.ladder_s.v[cf->retry.ladder_s.n++] = atoll(t);
		free(dup);
	}
	if (partitions > 0)
		cf->kafka.partitions = partitions;
	if (migrate_create_db(cf, err, sizeof(err)) != 0 ||
	    migrate_sql(cf, "schemas", &res, err, sizeof(err)) != 0 ||
	    migrate_topics(cf, "schemas", &res, err, sizeof(err)) != 0) {
		printf("# harness: %s\n", err);
		return -1;
	}
	return 0;
}

/* Whether cf carries the database and topic names harness_setup gives a test. */
static int
harness_named(const struct conf *cf)
{
	return cf->db.name != NULL &&
	       strncmp(cf->db.name, HARNESS_DB_PREFIX, strlen(HARNESS_DB_PREFIX)) == 0 &&
	       cf->kafka.topic_prefix != NULL && cf->kafka.topic_prefix[0] != '\0';
}

void
harness_teardown(struct conf *cf)
{
	struct conf_db c = cf->db;
	char sql[256];
	struct db db;

	/* Only what harness_setup named is dropped. A setup that failed early leaves no names
	 * (or, had it kept them, the configured ones, which belong to no test). */
	if (getenv("PAYCB_KEEP_TEST_DB") == NULL && harness_named(cf)) {
		/* Best effort: a broker already stopped by the test keeps them. */
		topics_drop_prefix(&cf->kafka, 5000);
		c.name = "";
		if (db_open(&db, &c) == DB_OK) {
			snprintf(sql, sizeof(sql), "DROP DATABASE IF EXISTS `%s`", cf->db.name);
			db_exec_once(&db, sql, NULL);
		}
		db_close(&db);
	}
	conf_free(cf);
}

void
harness_db(const struct conf *cf, struct db *db)
{
	if (db_open(db, &cf->db) != DB_OK) {
		printf("# harness: connect: %s\n", db->last_error);
		abort();
	}
}

long long
harness_count(struct db *db, const char *sql)
{
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(db, sql, NULL, 0, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0)
		return -1;
	return out[0].i;
}

long long
harness_query_i64(struct db *db, const char *sql, const struct db_in *in, int nin)
{
	struct db_out out[1] = {DBO_I64()};
	unsigned long long rows = 0;

	if (db_query(db, sql, in, nin, out, 1, NULL, NULL, &rows) != DB_OK || rows == 0 ||
	    out[0].is_null)
		return -1;
	return out[0].i;
}

int
harness_wait_until(int (*cond)(void *arg), void *arg, long long timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;
	struct timespec ts = {0, 20 * 1000 * 1000};

	while (harness_now_ms() < end) {
		if (cond(arg))
			return 0;
		nanosleep(&ts, NULL);
	}
	return cond(arg) ? 0 : -1;
}

struct harness_i64 {
	struct db *db;
	const char *sql;
	const struct db_in *in;
	int nin;
	long long want, last;
};

static int
harness_i64_cond(void *arg)
{
	struct harness_i64 *c = arg;

	c->last = harness_query_i64(c->db, c->sql, c->in, c->nin);
	return c->last == c->want;
}

int
harness_wait_i64(struct db *db, const char *sql, const struct db_in *in, int nin, long long want,
                 long long timeout_ms)
{
	struct harness_i64 c = {db, sql, in, nin, want, -1};

	if (harness_wait_until(harness_i64_cond, &c, timeout_ms) == 0)
		return 0;
	printf("# harness: waited %lld ms for %lld, last %lld: %s\n", timeout_ms, want, c.last,
	       sql);
	return -1;
}

/* ---- daemons started by tests ------------------------------------------------------- */

int
harness_spawn(const char *bin, const char *conf, const char *log)
{
	pid_t pid;
	int fd;

	fflush(stdout);
	if ((pid = fork()) < 0)
		return -1;
	if (pid == 0) {
		if ((fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644)) >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
			close(fd);
		}
		execl(bin, bin, "-c", conf, (char *)NULL);
		_exit(127);
	}
	return (int)pid;
}

int
harness_stop(int pid, int sig, long long timeout_ms)
{
	long long end = harness_now_ms() + timeout_ms;
	struct timespec ts = {0, 10 * 1000 * 1000};
	int status;

	if (pid <= 0)
		return -1;
	if (sig)
		kill((pid_t)pid, sig);
	while (harness_now_ms() < end) {
		pid_t r = waitpid((pid_t)pid, &status, WNOHANG);
		if (r == (pid_t)pid)
			return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
		if (r < 0)
			return -1;
		nanosleep(&ts, NULL);
	}
	printf("# harness: pid %d did not exit within %lld ms; killing it\n", pid, timeout_ms);
	kill((pid_t)pid, SIGKILL);
	waitpid((pid_t)pid, &status, 0);
	return -1;
}

long long
harness_file_count(const char *path, const char *needle)
{
	char line[4096];
	long long n = 0;
	FILE *fp;

	if ((fp = fopen(path, "r")) == NULL)
		return 0;
	while (fgets(line, sizeof(line), fp))
		if (strstr(line, needle))
			n++;
	fclose(fp);
	return n;
}
