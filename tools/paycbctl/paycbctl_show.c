/*
 * paycbctl_show - `show ID`: every column of one callback row except raw_body, which is shown
 * only as its length and SHA-256, computed by the server so the body never leaves it.
 *
 * The column list is read from information_schema at run time, so columns added by later
 * migrations show up without a change here. The statement is built once per table into a
 * static buffer (the statement cache is keyed by the SQL text's address, so that text must
 * never change afterwards); every value comes back as text inside one JSON_OBJECT, amounts
 * included, so nothing passes through a float.
 */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paycbctl.h"

#define SHOW_COLS_MAX 64
#define SHOW_SQL_MAX  8192
#define SHOW_JSON_MAX 32768

struct show_table {
	const char *name;
	char cols[SHOW_COLS_MAX][65];
	int ncols;
	char sql[SHOW_SQL_MAX];
};

static struct show_table show_tables[CBLOG_N] = {{CBLOG_TABLE_PAY, {{0}}, 0, {0}},
                                                 {CBLOG_TABLE_REFUND, {{0}}, 0, {0}}};

static int
show_col(void *arg, struct db_out *o)
{
	struct show_table *t = arg;
	const char *p;

	/* Names come from the server's catalogue; still, only plain identifiers go into SQL. */
	for (p = o[0].buf; *p; p++)
		if (!(islower((unsigned char)*p) || isdigit((unsigned char)*p) || *p == '_'))
			return 0;
	if (t->ncols < SHOW_COLS_MAX && o[0].buf[0])
		snprintf(t->cols[t->ncols++], sizeof(t->cols[0]), "%s", o[0].buf);
	return 0;
}

/* show_prepare - builds t->sql from the table's columns (once). */
static int
show_prepare(struct ctl *c, struct show_table *t)
{
	char name[65];
	struct db_out out[1] = {DBO_STR(name, sizeof(name))};
	struct db_in in[1] = {DBI_STR(t->name)};
	size_t used;

	if (t->sql[0])
		return 0;
	if (db_query(&c->db,
	             "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = "
	             "DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION",
	             in, 1, out, 1, show_col, t, NULL) != DB_OK) {
		ctl_error(c, "show: %s", c->db.last_error);
		return -1;
	}
	used = (size_t)snprintf(t->sql, sizeof(t->sql), "SELECT JSON_OBJECT(");
	for (int i = 0; i < t->ncols && used < sizeof(t->sql); i++) {
		if (strcmp(t->cols[i], "raw_body") == 0)
			used += (size_t)snprintf(t->sql + used, sizeof(t->sql) - used,
			                         "%s'raw_body_length', LENGTH(raw_body), "
			                         "'raw_body_sha256', SHA2(raw_body, 256)",
			                         i ? ", " : "");
		else
			used += (size_t)snprintf(t->sql + used, sizeof(t->sql) - used,
			                         "%s'%s', CAST(`%s` AS CHAR)", i ? ", " : "",
			                         t->cols[i], t->cols[i]);
	}
	if (used < sizeof(t->sql))
		used += (size_t)snprintf(t->sql + used, sizeof(t->sql) - used,
		                         ") FROM %s WHERE id = ?", t->name);
	if (t->ncols == 0 || used >= sizeof(t->sql)) {
		ctl_error(c, "show: cannot build the query for %s", t->name);
		t->sql[0] = '\0';
		return -1;
	}
	return 0;
}

/* show_str - the value of key as text in buf ("NULL" for none); returns buf. */
static const char *
show_str(json_t *o, const char *key, char *buf, size_t len)
{
	json_t *v = json_object_get(o, key);

	if (v == NULL || json_is_null(v))
		snprintf(buf, len, "NULL");
	else if (json_is_string(v))
		ctl_clean(buf, len, json_string_value(v));
	else if (json_is_integer(v))
		snprintf(buf, len, "%lld", (long long)json_integer_value(v));
	else
		snprintf(buf, len, "?");
	return buf;
}

static void
show_print(struct ctl *c, struct show_table *t, json_t *o)
{
	char v[600], sha[80];

	for (int i = 0; i < t->ncols; i++) {
		if (strcmp(t->cols[i], "raw_body") == 0) {
			const char *len = show_str(o, "raw_body_length", v, sizeof(v));

			if (strcmp(len, "NULL") == 0)
				fprintf(c->out, "  %-18s (purged)\n", "raw_body");
			else
				fprintf(c->out, "  %-18s %s bytes, sha256 %s (content not shown)\n",
				        "raw_body", len,
				        show_str(o, "raw_body_sha256", sha, sizeof(sha)));
			continue;
		}
		show_str(o, t->cols[i], v, sizeof(v));
		if (strcmp(t->cols[i], "status") == 0 && strcmp(v, "NULL") != 0)
			fprintf(c->out, "  %-18s %s (%s)\n", "status", v,
			        ctl_status_name(atoll(v)));
		else
			fprintf(c->out, "  %-18s %s\n", t->cols[i], v);
	}
}

int
ctl_cmd_show(struct ctl *c, int argc, char **argv)
{
	char *json = NULL, ref[24];
	unsigned long long id, rows = 0;
	struct show_table *t;
	struct db_out out[1];
	json_error_t je;
	json_t *o = NULL;
	enum cblog lg;
	int rc = CTL_FAILED;

	if (argc != 2 || cblog_ref_parse(argv[1], &lg, &id) != 0) {
		ctl_error(c, "usage: show ID   (cb42 or 42 for a payment, rf7 for a refund)");
		return CTL_USAGE;
	}
	t = &show_tables[lg];
	if (show_prepare(c, t) != 0)
		goto done;
	if ((json = malloc(SHOW_JSON_MAX)) == NULL)
		goto done;
	out[0] = DBO_STR(json, SHOW_JSON_MAX);
	{
		struct db_in in[1] = {DBI_I64(id)};
		if (db_query(&c->db, t->sql, in, 1, out, 1, NULL, NULL, &rows) != DB_OK) {
			ctl_error(c, "show: %s", c->db.last_error);
			goto done;
		}
	}
	cblog_ref(ref, sizeof(ref), lg, id);
	if (rows == 0) {
		ctl_error(c, "%s: no such callback", ref);
		goto done;
	}
	if (out[0].truncated || (o = json_loads(json, 0, &je)) == NULL) {
		ctl_error(c, "%s: cannot read the row (%s)", ref,
		          out[0].truncated ? "too large" : je.text);
		goto done;
	}
	fprintf(c->out, "%s (%s)\n", ref, t->name);
	show_print(c, t, o);
	rc = CTL_OK;
done:
	json_decref(o);
	free(json);
	return rc;
}
