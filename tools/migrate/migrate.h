/*
 * migrate - applies schemas/NNN_*.sql in order and records each in schema_migrations with
 * its SHA-256, so a re-run is a no-op and an edited, already-applied file is an error; then
 * creates the Kafka topics of schemas/topics.tsv (one retry topic per ladder step).
 */
#ifndef PAYCB_MIGRATE_H
#define PAYCB_MIGRATE_H

#include <stddef.h>

#include "conf.h"

struct migrate_result {
	int applied; /* files applied by this run */
	int skipped; /* files already applied */
	int topics;  /* topics ensured */
};

/* Creates the configured database if it does not exist. */
int migrate_create_db(const struct conf *cf, char *err, size_t errlen);
int migrate_sql(const struct conf *cf, const char *dir, struct migrate_result *res, char *err,
                size_t errlen);
int migrate_topics(const struct conf *cf, const char *dir, struct migrate_result *res, char *err,
                   size_t errlen);

#endif
