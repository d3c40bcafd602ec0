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
/* harness_setup with the topics created with this many partitions (0: as configured). */
int harness_setup_parts(struct conf *cf, const char *tag, const char *ladder, int partitions);
/* Drops the test database and deletes the test's topics (both kept with
 * PAYCB_KEEP_TEST_DB) and frees cf. Safe after a harness_setup that failed: it drops only
 * names harness_setup gave. */
void harness_teardown(struct conf *cf);
/* Replaces a string setting (frees the old one). */
void harness_set(char **field, const char *value);
/*
 * Writes cf's settings back to a libconfig file (for daemons started by tests): every
 * section of conf_table, with optional groups only when present. extra, if not NULL, is
 * appended verbatim (top-level settings the struct does not carry). Returns 0 or -1.
 * In harness_conf.c: it writes with the simulator's writer, so a test that calls it links
 * the simulator's archive (Makefile, TEST_LIBS_).
 */
int harness_write_conf(const struct conf *cf, const char *path, const char *extra);
/* Milliseconds on the monotonic clock. */
long long harness_now_ms(void);
/* Opens a connection to the test database or fails the test. */
void harness_db(const struct conf *cf, struct db *db);
/* SELECT COUNT(*)-style query returning one integer (-1 on error). */
long long harness_count(struct db *db, const char *sql);

/* A query with parameters returning one integer (-1 on error or no row). sql must be a
 * string literal: db.c caches statements by the address of their text. */
long long harness_query_i64(struct db *db, const char *sql, const struct db_in *in, int nin);

/*
 * Polls cond(arg) every 20 ms until it returns non-zero or timeout_ms passes. Returns 0 when
 * the condition held, -1 at the deadline (the condition is checked once more at the end).
 */
int harness_wait_until(int (*cond)(void *arg), void *arg, long long timeout_ms);
/* Waits until harness_query_i64(db, sql, in, nin) == want; returns 0 or -1 (timeout). */
int harness_wait_i64(struct db *db, const char *sql, const struct db_in *in, int nin,
                     long long want, long long timeout_ms);

/*
 * Starts `bin -c conf` with stdout and stderr appended to log. Returns the pid or -1.
 * The child inherits the environment (ASAN_OPTIONS and the like).
 */
int harness_spawn(const char *bin, const char *conf, const char *log);
/*
 * Sends sig to pid (0 = none) and waits up to timeout_ms for its exit. Returns the exit
 * status (0..255), 128 + the signal that ended it, or -1 when it did not exit in time (it
 * is then killed with SIGKILL and reaped).
 */
int harness_stop(int pid, int sig, long long timeout_ms);
/* Lines of file containing needle (0 when the file is missing). */
long long harness_file_count(const char *path, const char *needle);

#endif
