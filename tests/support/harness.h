/*
 * harness - what integration tests share: the local configuration with a database and a
 * topic prefix of their own (so test programs never see each other's rows or messages),
 * migrated and with topics created, and waiting for conditions with a deadline.
 */
#ifndef PAYCB_HARNESS_H
#define PAYCB_HARNESS_H

#include "conf.h"
#include "db.h"

/*
 * Loads $PAYCB_TEST_CONF, renames the database to paycb_test_<tag>_<pid> and the topic
 * prefix to t<pid>_<tag>, compresses the retry ladder if ladder is non-NULL
 * ("1 2 3" style), creates and migrates the database and creates the topics.
 * Returns 0 or -1 (the reason is printed as a TAP diagnostic).
 */
int harness_setup(struct conf *cf, const char *tag, const char *ladder);
/* Drops the test database. */
void harness_teardown(struct conf *cf);
/* Replaces a string setting (frees the old one). */
void harness_set(char **field, const char *value);
/* Writes cf's settings back to a libconfig file (for daemons started by tests). */
int harness_write_conf(const struct conf *cf, const char *path, const char *extra);
/* Milliseconds on the monotonic clock. */
long long harness_now_ms(void);
/* Opens a connection to the test database or fails the test. */
void harness_db(const struct conf *cf, struct db *db);
/* SELECT COUNT(*)-style query returning one integer (-1 on error). */
long long harness_count(struct db *db, const char *sql);

#endif
