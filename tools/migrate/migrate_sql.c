/*
 * migrate_sql - the SQL half of the migrate command (see migrate.h).
 *
 * Files are split into statements at a ';' that ends a line; our migrations contain no stored
 * programs, so that is exact. Each file is applied and then recorded; DDL commits implicitly
 * in MariaDB, so a file that fails halfway is reported with the statement that failed and is
 * not recorded, and the operator fixes the schema by hand before re-running.
 */
#include "migrate.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "digest.h"
#include "log.h"

static int
migrate_name_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *
migrate_slurp(const char *path, size_t *len)
{
	FILE *fp = fopen(path, "rb");
	char *buf = NULL;
	long n;

	if (fp == NULL)
		return NULL;
	if (fseek(fp, 0, SEEK_END) == 0 && (n = ftell(fp)) >= 0 && fseek(fp, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n + 1)) != NULL) {
		*len = fread(buf, 1, (size_t)n, fp);
		buf[*len] = '\0';
	}
	fclose(fp);
	return buf;
}

int
migrate_create_db(const struct conf *cf, char *err, size_t errlen)
{
	struct conf_db c = cf->db;
	char sql[256];
	struct db db;
	int rc = -1;

	for (const char *p = cf->db.name; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_')) {
			snprintf(err, errlen, "database name '%s': only [a-z0-9_] allowed",
			         cf->db.name);
			return -1;
		}
	c.name = "";
	if (db_open(&db, &c) != DB_OK) {
		snprintf(err, errlen, "connect: %s", db.last_error);
		goto done;
	}
	/* A schema name cannot be a placeholder; it was checked against [a-z0-9_] above. */
	snprintf(sql, sizeof(sql),
	         "CREATE DATABASE IF NOT EXISTS `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin",
	         cf->db.name);
	if (db_exec_once(&db, sql, NULL) != DB_OK) {
		snprintf(err, errlen, "create database: %s", db.last_error);
		goto done;
	}
	rc = 0;
done:
	db_close(&db);
	return rc;
}

static int
migrate_file(struct db *db, const char *path, char *text, char *err, size_t errlen)
{
	char *stmt = text, *p;

	for (;;) {
		char *end = NULL;

		for (p = stmt; *p; p++)
			if (*p == ';' && (p[1] == '\n' || p[1] == '\0')) {
				end = p;
				break;
			}
		if (end)
			*end = '\0';
		/* Skip statements that are only comments and blank lines. */
		{
			const char *q = stmt;
			int has = 0;
			while (*q) {
				while (*q == ' ' || *q == '\n' || *q == '\t' || *q == '\r')
					q++;
				if (q[0] == '-' && q[1] == '-') {
					while (*q && *q != '\n')
						q++;
					continue;
				}
				if (*q)
					has = 1;
				break;
			}
			if (has && db_exec_once(db, stmt, NULL) != DB_OK) {
				snprintf(err, errlen, "%s: %s", path, db->last_error);
				return -1;
			}
		}
		if (!end)
			break;
		stmt = end + 1;
	}
	return 0;
}

/*
 * migrate_one - applies schema file name unless schema_migrations has it; a recorded file
 * whose checksum changed is an error. Returns 0 or -1 with err.
 */
static int
migrate_one(struct db *db, const char *dir, const char *name, struct migrate_result *res, char *err,
            size_t errlen)
{
	char path[1024], sum[65], have[65];
	struct db_in in[2] = {DBI_STR(name), DBI_NULL};
	struct db_out out[1] = {DBO_STR(have, sizeof(have))};
	unsigned long long rows = 0;
	size_t len = 0;
	char *text = NULL;
	int rc = -1;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if ((text = migrate_slurp(path, &len)) == NULL) {
		snprintf(err, errlen, "cannot read %s", path);
		goto done;
	}
	digest_sha256_hex(text, len, sum);
	if (db_query(db, "SELECT sha256 FROM schema_migrations WHERE version = ?", in, 1, out, 1,
	             NULL, NULL, &rows) != DB_OK) {
		snprintf(err, errlen, "schema_migrations: %s", db->last_error);
		goto done;
	}
	if (rows) {
		if (strcmp(have, sum) != 0) {
			snprintf(err, errlen,
			         "%s was applied with sha256 %.12s but the file now has "
			         "%.12s; migrations are never edited, add a new one",
			         name, have, sum);
			goto done;
		}
		res->skipped++;
		rc = 0;
		goto done;
	}
	if (migrate_file(db, path, text, err, errlen) != 0)
		goto done;
	in[1] = DBI_STR(sum);
	if (db_exec(db, "INSERT INTO schema_migrations (version, sha256) VALUES (?, ?)", in, 2,
	            NULL, NULL) != DB_OK) {
		snprintf(err, errlen, "record %s: %s", name, db->last_error);
		goto done;
	}
	log_info(NULL, "event=migration_applied version=%s sha256=%.12s", name, sum);
	res->applied++;
	rc = 0;
done:
	free(text);
	return rc;
}

int
migrate_sql(const struct conf *cf, const char *dir, struct migrate_result *res, char *err,
            size_t errlen)
{
	char *names[256];
	struct dirent *de;
	struct db db;
	DIR *d = NULL;
	int n = 0, rc = -1;

	memset(&db, 0, sizeof(db));
	if ((d = opendir(dir)) == NULL) {
		snprintf(err, errlen, "cannot open schema directory '%s'", dir);
		goto done;
	}
	while ((de = readdir(d)) != NULL && n < 256) {
		size_t l = strlen(de->d_name);
		if (l > 8 && de->d_name[0] >= '0' && de->d_name[0] <= '9' &&
		    strcmp(de->d_name + l - 4, ".sql") == 0)
			names[n++] = strdup(de->d_name);
	}
	qsort(names, (size_t)n, sizeof(names[0]), migrate_name_cmp);
	if (db_open(&db, &cf->db) != DB_OK) {
		snprintf(err, errlen, "connect: %s", db.last_error);
		goto done;
	}
	if (db_exec(&db,
	            "CREATE TABLE IF NOT EXISTS schema_migrations ("
	            " version VARCHAR(128) NOT NULL PRIMARY KEY,"
	            " sha256 CHAR(64) NOT NULL,"
	            " applied_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3)"
	            ") ENGINE=InnoDB",
	            NULL, 0, NULL, NULL) != DB_OK) {
		snprintf(err, errlen, "schema_migrations: %s", db.last_error);
		goto done;
	}
	for (int i = 0; i < n; i++)
		if (migrate_one(&db, dir, names[i], res, err, errlen) != 0)
			goto done;
	rc = 0;
done:
	for (int i = 0; i < n; i++)
		free(names[i]);
	if (d)
		closedir(d);
	db_close(&db);
	return rc;
}
