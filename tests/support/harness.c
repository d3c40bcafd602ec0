/*
 * harness - shared setup of integration tests (see harness.h).
 */
#include "harness.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "migrate.h"

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
	const char *file = getenv("PAYCB_TEST_CONF") ? getenv("PAYCB_TEST_CONF") : "var/paycb.conf";
	struct migrate_result res = {0, 0, 0};
	struct cfg_errors errs;
	char buf[128], err[1024];

	if (conf_load(file, PROC_TOOL, cf, &errs) != 0) {
		printf("# harness: %s", errs.text);
		return -1;
	}
	snprintf(buf, sizeof(buf), "paycb_test_%s_%ld", tag, (long)getpid());
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
	if (migrate_create_db(cf, err, sizeof(err)) != 0 ||
	    migrate_sql(cf, "schemas", &res, err, sizeof(err)) != 0 ||
	    migrate_topics(cf, "schemas", &res, err, sizeof(err)) != 0) {
		printf("# harness: %s\n", err);
		return -1;
	}
	return 0;
}

void
harness_teardown(struct conf *cf)
{
	struct conf_db c = cf->db;
	char sql[256];
	struct db db;

	if (getenv("PAYCB_KEEP_TEST_DB") == NULL) {
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
