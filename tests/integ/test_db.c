/*
 * test_db - the database helpers against the real MariaDB server: migrations, the
 * classification of errors, and reconnection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "db.h"
#include "harness.h"
#include "migrate.h"

static struct conf cf;

static const char *INSERT_LOG =
    "INSERT INTO pay_callback_log (merchant_id, channel, channel_trade_no, out_trade_no, "
    "amount, currency, body_sha256, next_retry_at) VALUES (?, ?, ?, ?, '88.88', 'CNY', "
    "REPEAT('0', 64), NOW(3))";

static long long
schema_fingerprint(struct db *db)
{
	/* A checksum of every column definition in the schema: any DDL change moves it. */
	return harness_count(db, "SELECT CRC32(GROUP_CONCAT(CONCAT_WS(',', TABLE_NAME, "
	                         "COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, IFNULL(COLUMN_DEFAULT,"
	                         "'~')) ORDER BY TABLE_NAME, ORDINAL_POSITION)) FROM "
	                         "information_schema.COLUMNS WHERE TABLE_SCHEMA = DATABASE()");
}

static void
migration_rerun_changes_nothing(void **state)
{
	struct migrate_result res = {0, 0, 0};
	char err[512];
	struct db db;
	long long before, after, nmig;

	(void)state;
	harness_db(&cf, &db);
	before = schema_fingerprint(&db);
	nmig = harness_count(&db, "SELECT COUNT(*) FROM schema_migrations");
	assert_true(nmig >= 3);
	assert_int_equal(migrate_sql(&cf, "schemas", &res, err, sizeof(err)), 0);
	assert_int_equal(res.applied, 0);
	assert_int_equal(res.skipped, nmig);
	after = schema_fingerprint(&db);
	assert_true(before == after);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM schema_migrations"), nmig);
	db_close(&db);
}

static void
second_insert_same_trade_is_duplicate(void **state)
{
	struct db_in in[4] = {DBI_STR("m1"), DBI_STR("wxpay"), DBI_STR("4200000001"),
	                      DBI_STR("order-1")};
	unsigned long long id1 = 0, id2 = 0;
	struct db db;

	(void)state;
	harness_db(&cf, &db);
	assert_int_equal(db_exec(&db, INSERT_LOG, in, 4, NULL, &id1), DB_OK);
	assert_true(id1 > 0);
	assert_int_equal(db_exec(&db, INSERT_LOG, in, 4, NULL, &id2), DB_DUPLICATE);
	assert_int_equal(db.last_errno, 1062);
	/* Another channel or merchant with the same trade number is a different row. */
	in[1] = DBI_STR("alipay");
	assert_int_equal(db_exec(&db, INSERT_LOG, in, 4, NULL, &id2), DB_OK);
	in[0] = DBI_STR("m2");
	assert_int_equal(db_exec(&db, INSERT_LOG, in, 4, NULL, &id2), DB_OK);
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                    "channel_trade_no = '4200000001'"),
	                 3);
	db_close(&db);
}

static void
lock_wait_timeout_is_retryable(void **state)
{
	struct db_in in[4] = {DBI_STR("m1"), DBI_STR("stripe"), DBI_STR("pi_lock"),
	                      DBI_STR("order-lock")};
	struct conf_db c2 = cf.db;
	struct db a, b;
	long long t0;

	(void)state;
	harness_db(&cf, &a);
	c2.lock_wait_timeout_s = 1;
	assert_int_equal(db_open(&b, &c2), DB_OK);
	assert_int_equal(db_exec(&a, INSERT_LOG, in, 4, NULL, NULL), DB_OK);
	assert_int_equal(db_begin(&a), DB_OK);
	assert_int_equal(db_exec(&a,
	                         "UPDATE pay_callback_log SET retry_count = retry_count + 1 "
	                         "WHERE channel_trade_no = 'pi_lock'",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	t0 = harness_now_ms();
	assert_int_equal(db_exec(&b,
	                         "UPDATE pay_callback_log SET retry_count = retry_count + 1 "
	                         "WHERE channel_trade_no = 'pi_lock'",
	                         NULL, 0, NULL, NULL),
	                 DB_RETRYABLE);
	assert_int_equal(b.last_errno, 1205);
	assert_true(harness_now_ms() - t0 >= 900);
	assert_int_equal(db_rollback(&a), DB_OK);
	/* The same connection goes on working after the timeout. */
	assert_int_equal(db_exec(&b,
	                         "UPDATE pay_callback_log SET retry_count = retry_count + 1 "
	                         "WHERE channel_trade_no = 'pi_lock'",
	                         NULL, 0, NULL, NULL),
	                 DB_OK);
	db_close(&a);
	db_close(&b);
}

static void
killed_connection_is_retryable_then_reconnects(void **state)
{
	struct db a, b;
	long long id;

	(void)state;
	harness_db(&cf, &a);
	harness_db(&cf, &b);
	id = harness_count(&a, "SELECT CONNECTION_ID()");
	assert_true(id > 0);
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(db_exec(&b, "KILL CONNECTION ?", in, 1, NULL, NULL), DB_OK);
	}
	assert_int_equal(db_exec(&a, "SELECT 1", NULL, 0, NULL, NULL), DB_RETRYABLE);
	/* The next call reconnects by itself. */
	assert_true(harness_count(&a, "SELECT CONNECTION_ID()") != id);
	db_close(&a);
	db_close(&b);
}

/*
 * Regression: ingest's /readyz probes a pooled connection with SELECT 1 through db_exec. Its
 * unread row left the connection out of sync, and the next reservation on it failed with
 * error 2014 (the channel got a 503). A statement run for its effect now leaves the
 * connection clean: the next statement succeeds on the same connection.
 */
static void
probe_with_rows_leaves_the_connection_in_sync(void **state)
{
	struct db db;
	long long id;

	(void)state;
	harness_db(&cf, &db);
	id = harness_count(&db, "SELECT CONNECTION_ID()");
	assert_int_equal(db_exec(&db, "SELECT 1", NULL, 0, NULL, NULL), DB_OK);
	assert_int_equal(db_exec(&db, "SELECT 1 UNION ALL SELECT 2", NULL, 0, NULL, NULL), DB_OK);
	{
		struct db_in in[4] = {DBI_STR("default"), DBI_STR("wxpay"), DBI_STR("probe-sync"),
		                      DBI_STR("probe-sync")};
		assert_int_equal(db_exec(&db, INSERT_LOG, in, 4, NULL, NULL), DB_OK);
	}
	assert_int_equal(db.broken, 0);
	assert_int_equal(harness_count(&db, "SELECT CONNECTION_ID()"), id);
	db_close(&db);
}

/*
 * A connection with autocommit off (the processor's workers): a transaction begins with its
 * first statement, without START TRANSACTION, nothing is visible to others before COMMIT,
 * the mode survives a reconnect, and a transaction left open is rolled back by the next
 * db_begin, which fails, rather than continued.
 */
static void
manual_commit_begins_with_the_first_statement(void **state)
{
	struct db a, b;
	long long id;

	(void)state;
	harness_db(&cf, &a);
	harness_db(&cf, &b);
	assert_int_equal(db_manual_commit(&a), DB_OK);
	assert_int_equal(harness_count(&a, "SELECT @@autocommit"), 0);
	assert_false(db_in_transaction(&a));
	assert_int_equal(db_begin(&a), DB_OK);
	{
		struct db_in in[4] = {DBI_STR("default"), DBI_STR("wxpay"), DBI_STR("manual-1"),
		                      DBI_STR("manual-1")};
		assert_int_equal(db_exec(&a, INSERT_LOG, in, 4, NULL, NULL), DB_OK);
	}
	assert_true(db_in_transaction(&a));
	assert_int_equal(harness_count(&b, "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                   "channel_trade_no = 'manual-1'"),
	                 0);
	assert_int_equal(db_commit(&a), DB_OK);
	assert_false(db_in_transaction(&a));
	assert_int_equal(harness_count(&b, "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                   "channel_trade_no = 'manual-1'"),
	                 1);
	/* Left open: the next db_begin rolls it back and says so. */
	{
		struct db_in in[4] = {DBI_STR("default"), DBI_STR("wxpay"), DBI_STR("manual-2"),
		                      DBI_STR("manual-2")};
		assert_int_equal(db_exec(&a, INSERT_LOG, in, 4, NULL, NULL), DB_OK);
	}
	assert_int_equal(db_begin(&a), DB_FATAL);
	assert_false(db_in_transaction(&a));
	assert_int_equal(harness_count(&b, "SELECT COUNT(*) FROM pay_callback_log WHERE "
	                                   "channel_trade_no = 'manual-2'"),
	                 0);
	/* A reconnect keeps the mode. */
	id = harness_count(&a, "SELECT CONNECTION_ID()");
	assert_int_equal(db_commit(&a), DB_OK);
	{
		struct db_in in[1] = {DBI_I64(id)};
		assert_int_equal(db_exec(&b, "KILL CONNECTION ?", in, 1, NULL, NULL), DB_OK);
	}
	assert_int_equal(db_exec(&a, "SELECT 1", NULL, 0, NULL, NULL), DB_RETRYABLE);
	assert_int_equal(harness_count(&a, "SELECT @@autocommit"), 0);
	assert_int_equal(db_rollback(&a), DB_OK);
	db_close(&a);
	db_close(&b);
}

/*
 * database.socket: the connection goes through the local server's Unix socket, whatever host
 * and port say (here ones that cannot answer). The local services keep it at
 * $PAYCB_VAR/mariadb/mysqld.sock; without it (a server elsewhere) the test is skipped.
 */
static void
socket_setting_connects_without_tcp(void **state)
{
	struct conf_db c2 = cf.db;
	const char *var = getenv("PAYCB_VAR");
	char sock[600];
	struct db db;

	(void)state;
	snprintf(sock, sizeof(sock), "%s/mariadb/mysqld.sock", var ? var : "");
	if (var == NULL || access(sock, F_OK) != 0) {
		skip();
		return;
	}
	c2.socket = sock;
	c2.host = "192.0.2.1";
	c2.port = 1;
	assert_int_equal(db_open(&db, &c2), DB_OK);
	/* Over TCP the server names the client host:port; over the socket, "localhost". */
	assert_int_equal(harness_count(&db, "SELECT COUNT(*) FROM information_schema.PROCESSLIST "
	                                    "WHERE ID = CONNECTION_ID() AND HOST = 'localhost'"),
	                 1);
	db_close(&db);
}

static void
classification_table(void **state)
{
	(void)state;
	assert_int_equal(db_classify(1062), DB_DUPLICATE);
	assert_int_equal(db_classify(1213), DB_RETRYABLE); /* deadlock */
	assert_int_equal(db_classify(1205), DB_RETRYABLE); /* lock wait timeout */
	assert_int_equal(db_classify(2006), DB_RETRYABLE); /* server gone */
	assert_int_equal(db_classify(2013), DB_RETRYABLE); /* lost during query */
	assert_int_equal(db_classify(1146), DB_FATAL);     /* no such table */
	assert_int_equal(db_classify(1064), DB_FATAL);     /* syntax */
}

static void
money_round_trips_through_decimal(void **state)
{
	char buf[32];
	struct db_out out[1] = {DBO_STR(buf, sizeof(buf))};
	struct db_in in[1] = {DBI_STR("99999999999999.99")};
	struct db db;

	(void)state;
	harness_db(&cf, &db);
	/* DECIMAL(18,2) keeps the largest amount exactly, with no float anywhere. */
	assert_int_equal(
	    db_query(&db, "SELECT CAST(? AS DECIMAL(18,2))", in, 1, out, 1, NULL, NULL, NULL),
	    DB_OK);
	assert_string_equal(buf, "99999999999999.99");
	db_close(&db);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(migration_rerun_changes_nothing),
	    cmocka_unit_test(second_insert_same_trade_is_duplicate),
	    cmocka_unit_test(lock_wait_timeout_is_retryable),
	    cmocka_unit_test(killed_connection_is_retryable_then_reconnects),
	    cmocka_unit_test(probe_with_rows_leaves_the_connection_in_sync),
	    cmocka_unit_test(manual_commit_begins_with_the_first_statement),
	    cmocka_unit_test(socket_setting_connects_without_tcp),
	    cmocka_unit_test(classification_table),
	    cmocka_unit_test(money_round_trips_through_decimal),
	};
	int rc;

	if (harness_setup(&cf, "db", NULL) != 0)
		return 1;
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	harness_teardown(&cf);
	return rc;
}
