/*
 * db - MariaDB/MySQL access through prepared statements (see db.h).
 */
#include "db.h"

#include <mysqld_error.h>
#include <errmsg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "log.h"

enum db_rc
db_classify(unsigned int err)
{
	switch (err) {
	case 0:
		return DB_OK;
	case ER_DUP_ENTRY:
	case ER_DUP_ENTRY_WITH_KEY_NAME:
		return DB_DUPLICATE;
	case ER_LOCK_DEADLOCK:
	case ER_LOCK_WAIT_TIMEOUT:
	case ER_QUERY_INTERRUPTED:
	case ER_CON_COUNT_ERROR:
	case ER_SERVER_SHUTDOWN:
	case ER_CONNECTION_KILLED:
	case ER_LOCK_ABORTED:
	case ER_CHECKREAD:
	case 1180: /* ER_ERROR_DURING_COMMIT */
	case 1637: /* ER_TOO_MANY_CONCURRENT_TRXS */
	case 4031: /* ER_CLIENT_INTERACTION_TIMEOUT */
	case CR_CONNECTION_ERROR:
	case CR_CONN_HOST_ERROR:
	case CR_SERVER_GONE_ERROR:
	case CR_SERVER_LOST:
	case CR_SERVER_LOST_EXTENDED:
	case CR_COMMANDS_OUT_OF_SYNC:
		return DB_RETRYABLE;
	default:
		return DB_FATAL;
	}
}

const char *
db_rc_name(enum db_rc rc)
{
	static const char *const n[] = {"ok", "duplicate", "retryable", "fatal"};

	return (unsigned)rc < 4 ? n[rc] : "unknown";
}

static int
db_is_connection_error(unsigned int err)
{
	return err == CR_SERVER_GONE_ERROR || err == CR_SERVER_LOST ||
	       err == CR_SERVER_LOST_EXTENDED || err == CR_CONNECTION_ERROR ||
	       err == CR_CONN_HOST_ERROR || err == ER_CONNECTION_KILLED ||
	       err == ER_SERVER_SHUTDOWN || err == 4031 || err == CR_COMMANDS_OUT_OF_SYNC;
}

static enum db_rc
db_fail(struct db *db, unsigned int err, const char *msg)
{
	char text[sizeof(db->last_error)];

	db->last_errno = err;
	/* The server's text can quote data; kept escaped, it is safe inside error="..." on any
	 * log line. */
	snprintf(text, sizeof(text), "%u %s", err, msg);
	log_quoted(db->last_error, sizeof(db->last_error), text);
	if (db_is_connection_error(err) || err == 0)
		db->broken = 1;
	return err == 0 ? DB_RETRYABLE : db_classify(err);
}

static void
db_drop_cache(struct db *db)
{
	for (int i = 0; i < DB_STMT_CACHE; i++) {
		if (db->cache[i].st)
			mysql_stmt_close(db->cache[i].st);
		db->cache[i].st = NULL;
		db->cache[i].sql = NULL;
	}
}

static enum db_rc
db_connect(struct db *db)
{
	const struct conf_db *cf = db->cf;
	unsigned int t;
	my_bool on = 1;
	MYSQL *my;

	if ((my = mysql_init(NULL)) == NULL)
		return db_fail(db, 0, "mysql_init failed");
	t = (unsigned)cf->connect_timeout_s;
	mysql_options(my, MYSQL_OPT_CONNECT_TIMEOUT, &t);
	t = (unsigned)cf->read_timeout_s;
	mysql_options(my, MYSQL_OPT_READ_TIMEOUT, &t);
	t = (unsigned)cf->write_timeout_s;
	mysql_options(my, MYSQL_OPT_WRITE_TIMEOUT, &t);
	mysql_options(my, MYSQL_SET_CHARSET_NAME, "utf8mb4");
	if (cf->ssl_ca && cf->ssl_ca[0]) {
		mysql_ssl_set(my, cf->ssl_key[0] ? cf->ssl_key : NULL,
		              cf->ssl_cert[0] ? cf->ssl_cert : NULL, cf->ssl_ca, NULL, NULL);
		if (cf->ssl_verify_server_cert)
			mysql_options(my, MYSQL_OPT_SSL_VERIFY_SERVER_CERT, &on);
	}
	/*
	 * An empty database name connects to none, for the migrate tool's CREATE DATABASE. A
	 * socket path connects to a server on this host without TCP (conf.c refuses it with
	 * TLS settings, which a socket connection would not use).
	 */
	if (mysql_real_connect(my, cf->socket && cf->socket[0] ? "localhost" : cf->host, cf->user,
	                       db->password, cf->name[0] ? cf->name : NULL, (unsigned)cf->port,
	                       cf->socket && cf->socket[0] ? cf->socket : NULL, 0) == NULL) {
		enum db_rc rc;
		unsigned int err = mysql_errno(my);
		char msg[200];

		snprintf(msg, sizeof(msg), "%s", mysql_error(my));
		mysql_close(my);
		rc = db_fail(db, err, msg);
		db->broken = 1;
		/* Authentication and unknown-database errors are configuration, not outages. */
		return err == CR_CONN_HOST_ERROR || err == CR_CONNECTION_ERROR ? DB_RETRYABLE : rc;
	}
	db->my = my;
	db->broken = 0;
	db->connects++;
	{
		struct db_in in[2] = {DBI_I64(cf->lock_wait_timeout_s), DBI_I64(!db->manual)};
		enum db_rc rc;

		/* UTC everywhere, strict modes, the lock wait the retry ladder expects, and the
		 * session's commit mode, in the one statement every connection sends anyway. */
		if ((rc = db_exec(db,
		                  "SET SESSION time_zone = '+00:00', "
		                  "sql_mode = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION', "
		                  "innodb_lock_wait_timeout = ?, autocommit = ?",
		                  in, 2, NULL, NULL)) != DB_OK)
			return rc;
	}
	return DB_OK;
}

enum db_rc
db_open(struct db *db, const struct conf_db *cf)
{
	char err[256];
	size_t len;

	memset(db, 0, sizeof(*db));
	db->cf = cf;
	if (cfg_read_secret(cf->password_file, &db->password, &len, err, sizeof(err)) != 0) {
		log_quoted(db->last_error, sizeof(db->last_error), err);
		return DB_FATAL;
	}
	return db_connect(db);
}

void
db_close(struct db *db)
{
	db_drop_cache(db);
	if (db->my)
		mysql_close(db->my);
	db->my = NULL;
	if (db->password) {
		explicit_bzero(db->password, strlen(db->password));
		free(db->password);
	}
	db->password = NULL;
}

enum db_rc
db_ensure(struct db *db)
{
	if (db->my && !db->broken)
		return DB_OK;
	db_drop_cache(db);
	if (db->my)
		mysql_close(db->my);
	db->my = NULL;
	return db_connect(db);
}

static MYSQL_STMT *
db_prepare(struct db *db, const char *sql, enum db_rc *rc)
{
	int i, slot = -1;
	MYSQL_STMT *st;

	for (i = 0; i < DB_STMT_CACHE; i++) {
		if (db->cache[i].sql == sql)
			return db->cache[i].st;
		if (slot < 0 && db->cache[i].sql == NULL)
			slot = i;
	}
	if ((st = mysql_stmt_init(db->my)) == NULL) {
		*rc = db_fail(db, mysql_errno(db->my), "mysql_stmt_init failed");
		return NULL;
	}
	if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0) {
		*rc = db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_close(st);
		return NULL;
	}
	if (slot < 0) {
		/* The cache is full: a program uses more statements than expected; evict one. */
		mysql_stmt_close(db->cache[0].st);
		slot = 0;
	}
	db->cache[slot].sql = sql;
	db->cache[slot].st = st;
	return st;
}

static enum db_rc
db_run(struct db *db, const char *sql, const struct db_in *in, int nin, MYSQL_STMT **out)
{
	MYSQL_BIND b[32];
	enum db_rc rc = DB_FATAL;
	MYSQL_STMT *st;

	if (nin > 32)
		return db_fail(db, 0, "too many parameters");
	if ((rc = db_ensure(db)) != DB_OK)
		return rc;
	if ((st = db_prepare(db, sql, &rc)) == NULL)
		return rc;
	memset(b, 0, sizeof(b));
	for (int i = 0; i < nin; i++) {
		switch (in[i].t) {
		case DBT_NULL:
			b[i].buffer_type = MYSQL_TYPE_NULL;
			break;
		case DBT_I64:
			b[i].buffer_type = MYSQL_TYPE_LONGLONG;
			/* MYSQL_BIND has no const buffer; an input bind is only read. */
			b[i].buffer = (void *)(uintptr_t)&in[i].i;
			break;
		case DBT_STR:
			b[i].buffer_type = MYSQL_TYPE_STRING;
			b[i].buffer = (void *)(uintptr_t)in[i].s;
			b[i].buffer_length = (unsigned long)in[i].len;
			break;
		}
	}
	if ((nin && mysql_stmt_bind_param(st, b) != 0) || mysql_stmt_execute(st) != 0)
		return db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
	*out = st;
	return DB_OK;
}

enum db_rc
db_exec(struct db *db, const char *sql, const struct db_in *in, int nin,
        unsigned long long *affected, unsigned long long *insert_id)
{
	MYSQL_STMT *st;
	enum db_rc rc;

	if ((rc = db_run(db, sql, in, nin, &st)) != DB_OK)
		return rc;
	if (affected)
		*affected = (unsigned long long)mysql_stmt_affected_rows(st);
	if (insert_id)
		*insert_id = (unsigned long long)mysql_stmt_insert_id(st);
	/*
	 * A statement run for its effect may still return rows (a probe's SELECT 1). Unread
	 * rows would leave the connection out of sync, and the next statement of whoever uses
	 * it after us would fail with error 2014.
	 */
	if (mysql_stmt_field_count(st) > 0) {
		if (mysql_stmt_store_result(st) != 0)
			rc = db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_free_result(st);
	}
	return rc;
}

enum db_rc
db_query(struct db *db, const char *sql, const struct db_in *in, int nin, struct db_out *out,
         int nout, int (*row_cb)(void *arg, struct db_out *out), void *arg,
         unsigned long long *nrows)
{
	MYSQL_BIND b[32];
	my_bool isnull[32], err[32];
	unsigned long len[32];
	unsigned long long rows = 0;
	MYSQL_STMT *st;
	enum db_rc rc;
	int r, stop = 0;

	if (nout > 32)
		return db_fail(db, 0, "too many result columns");
	if ((rc = db_run(db, sql, in, nin, &st)) != DB_OK)
		return rc;
	memset(b, 0, sizeof(b));
	for (int i = 0; i < nout; i++) {
		b[i].is_null = &isnull[i];
		b[i].error = &err[i];
		b[i].length = &len[i];
		if (out[i].t == DBT_I64) {
			b[i].buffer_type = MYSQL_TYPE_LONGLONG;
			b[i].buffer = &out[i].i;
		} else {
			b[i].buffer_type = MYSQL_TYPE_STRING;
			b[i].buffer = out[i].buf;
			b[i].buffer_length = out[i].cap ? out[i].cap - 1 : 0;
		}
	}
	if (mysql_stmt_bind_result(st, b) != 0) {
		rc = db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_free_result(st);
		return rc;
	}
	while ((r = mysql_stmt_fetch(st)) == 0 || r == MYSQL_DATA_TRUNCATED) {
		rows++;
		if (stop)
			continue;
		for (int i = 0; i < nout; i++) {
			out[i].is_null = isnull[i] != 0;
			out[i].len = len[i];
			out[i].truncated = 0;
			if (out[i].t == DBT_STR && out[i].cap) {
				unsigned long n = len[i] < out[i].cap - 1 ? len[i] : out[i].cap - 1;
				out[i].truncated = len[i] > out[i].cap - 1;
				out[i].buf[isnull[i] ? 0 : n] = '\0';
			}
		}
		if (row_cb == NULL || row_cb(arg, out) != 0)
			stop = 1;
	}
	if (r == 1) {
		rc = db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_free_result(st);
		return rc;
	}
	mysql_stmt_free_result(st);
	if (nrows)
		*nrows = rows;
	return DB_OK;
}

enum db_rc
db_exec_once(struct db *db, const char *sql, unsigned long long *affected)
{
	MYSQL_STMT *st;
	enum db_rc rc;

	if ((rc = db_ensure(db)) != DB_OK)
		return rc;
	if ((st = mysql_stmt_init(db->my)) == NULL)
		return db_fail(db, mysql_errno(db->my), "mysql_stmt_init failed");
	if (mysql_stmt_prepare(st, sql, strlen(sql)) != 0 || mysql_stmt_execute(st) != 0) {
		rc = db_fail(db, mysql_stmt_errno(st), mysql_stmt_error(st));
		mysql_stmt_close(st);
		return rc;
	}
	if (affected)
		*affected = (unsigned long long)mysql_stmt_affected_rows(st);
	mysql_stmt_close(st);
	return DB_OK;
}

enum db_rc
db_manual_commit(struct db *db)
{
	db->manual = 1;
	if (db->my == NULL || db->broken)
		return DB_OK;
	return db_exec(db, "SET SESSION autocommit = 0", NULL, 0, NULL, NULL);
}

int
db_in_transaction(const struct db *db)
{
	return db->my != NULL && !db->broken && (db->my->server_status & SERVER_STATUS_IN_TRANS);
}

enum db_rc
db_begin(struct db *db)
{
	if (db->manual && db_in_transaction(db)) {
		/* A path that did not end its transaction is a bug; its locks must not outlive
		 * it, and nothing of it may commit with the next one. */
		db_rollback(db);
		snprintf(db->last_error, sizeof(db->last_error),
		         "a transaction was left open; rolled back");
		return DB_FATAL;
	}
	if (db->manual)
		return db_ensure(db);
	return db_exec(db, "START TRANSACTION", NULL, 0, NULL, NULL);
}

enum db_rc
db_commit(struct db *db)
{
	return db_exec(db, "COMMIT", NULL, 0, NULL, NULL);
}

enum db_rc
db_rollback(struct db *db)
{
	return db_exec(db, "ROLLBACK", NULL, 0, NULL, NULL);
}
