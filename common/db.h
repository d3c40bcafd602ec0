/*
 * db - MariaDB/MySQL access for paycb: connect with timeouts, prepared statements only,
 * reconnect after a lost connection, and one classification of errors.
 *
 * A struct db is one connection, used by one thread at a time. Statements are prepared once
 * per connection and cached by their SQL text's address (callers pass string literals).
 * After a connection-level error the next call reconnects first; a statement is never
 * re-run silently, because whether it took effect is the caller's question.
 */
#ifndef PAYCB_DB_H
#define PAYCB_DB_H

#include <mysql.h>
#include <stddef.h>
#include <string.h>

#include "conf.h"

enum db_rc {
	DB_OK = 0,
	DB_DUPLICATE = 1, /* duplicate key: "we already have it" */
	DB_RETRYABLE = 2, /* deadlock, lock wait timeout, server gone, cannot connect */
	DB_FATAL = 3,     /* anything else: a bug or a schema mismatch */
};

enum db_type { DBT_NULL = 0, DBT_I64, DBT_STR };

/* A parameter. */
struct db_in {
	enum db_type t;
	long long i;
	const char *s;
	size_t len;
};
#define DBI_I64(v)    ((struct db_in){DBT_I64, (long long)(v), NULL, 0})
#define DBI_STR(v)    ((struct db_in){DBT_STR, 0, (v), strlen(v)})
#define DBI_BIN(v, n) ((struct db_in){DBT_STR, 0, (const char *)(v), (n)})
#define DBI_NULL      ((struct db_in){DBT_NULL, 0, NULL, 0})

/* A result column: DBT_I64 into i, DBT_STR into buf (NUL-terminated, truncated to cap-1). */
struct db_out {
	enum db_type t;
	long long i;
	char *buf;
	unsigned long cap;
	unsigned long len;
	int is_null;
	int truncated;
};
#define DBO_I64()     ((struct db_out){DBT_I64, 0, NULL, 0, 0, 0, 0})
#define DBO_STR(b, n) ((struct db_out){DBT_STR, 0, (b), (n), 0, 0, 0})

#define DB_STMT_CACHE 48

struct db {
	MYSQL *my;
	const struct conf_db *cf;
	char *password;
	int broken; /* reconnect before the next statement */
	/*
	 * Set by db_manual_commit: the session runs with autocommit off, so a transaction starts
	 * with its first statement (db_begin sends nothing) and every path must end it with
	 * db_commit or db_rollback. Kept across reconnects.
	 */
	int manual;
	unsigned long connects; /* connections made so far, to tell a new session */
	unsigned int last_errno;
	char last_error[256];
	struct {
		const char *sql;
		MYSQL_STMT *st;
	} cache[DB_STMT_CACHE];
};

enum db_rc db_classify(unsigned int err);
const char *db_rc_name(enum db_rc rc);

/* Connects (reads the password file). Returns DB_OK, or a class with db->last_error set. */
enum db_rc db_open(struct db *db, const struct conf_db *cf);
void db_close(struct db *db);
/* Makes sure the connection is up, reconnecting if it broke. */
enum db_rc db_ensure(struct db *db);

/* Runs a statement; affected rows and insert id are optional outputs. */
enum db_rc db_exec(struct db *db, const char *sql, const struct db_in *in, int nin,
                   unsigned long long *affected, unsigned long long *insert_id);
/*
 * Runs a query. For each row, outs are filled and row_cb is called (it returns non-zero to
 * stop early). With row_cb NULL only the first row is kept. *nrows counts rows seen.
 */
enum db_rc db_query(struct db *db, const char *sql, const struct db_in *in, int nin,
                    struct db_out *out, int nout, int (*row_cb)(void *arg, struct db_out *out),
                    void *arg, unsigned long long *nrows);

/* Prepares, runs and closes a statement built at run time (DDL in the migrate tool): it
 * bypasses the cache, whose keys are the addresses of literal SQL strings. */
enum db_rc db_exec_once(struct db *db, const char *sql, unsigned long long *affected);

/*
 * Turns autocommit off for this connection and every reconnect of it (see manual above).
 * Saves the START TRANSACTION round trip of each transaction. Returns DB_OK, or the error
 * of applying it now (it is applied again on the next connect).
 */
enum db_rc db_manual_commit(struct db *db);
/* Whether the server reports a transaction open on this connection (no round trip). */
int db_in_transaction(const struct db *db);

/* START TRANSACTION; with db_manual_commit, nothing is sent (the next statement starts it). */
enum db_rc db_begin(struct db *db);
enum db_rc db_commit(struct db *db);
enum db_rc db_rollback(struct db *db);

#endif
