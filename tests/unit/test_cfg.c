/*
 * test_cfg - the configuration loader rejects bad files with errors that name the file, the
 * line and the setting, and accepts a complete one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "chan_conf.h"
#include "conf.h"

static char dir[] = "/tmp/paycb-cfg-XXXXXX";
static char path[512], secret[512];

static void
write_file(const char *p, const char *text)
{
	FILE *fp = fopen(p, "w");

	assert_non_null(fp);
	fputs(text, fp);
	fclose(fp);
}

/* Loads text as a config; returns the error count, errors in *errs. */
static int
load(const char *text, struct cfg_errors *errs, struct conf *cf)
{
	char buf[4096];

	assert_int_equal(chan_conf_use(), 0);
	snprintf(buf, sizeof(buf), text, secret, secret, secret, secret, secret, secret);
	write_file(path, buf);
	return conf_load(path, PROG_INGEST, cf, errs);
}

#define GOOD_DB "database = { password_file = \"%s\"; };\n"

static void
complete_file_is_accepted_with_defaults(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(load(GOOD_DB "merchants = ( { id = \"default\"; stripe = { secret_files = "
	                              "[ \"%s\" ]; }; } );\n",
	                      &errs, &cf),
	                 0);
	assert_int_equal(cf.db.port, 23306);
	assert_int_equal(cf.ingest.max_body_bytes, 65536);
	assert_int_equal(cf.retry.ladder_s.n, 8);
	assert_int_equal(cf.retry.ladder_s.v[0], 10);
	assert_int_equal(cf.retry.ladder_s.v[7], 7200);
	assert_int_equal(cf.nmerchants, 1);
	assert_non_null(chan_conf_stripe(&cf.merchants[0]));
	assert_null(chan_conf_wx(&cf.merchants[0]));
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->order_metadata_key, "order_id");
	conf_free(&cf);
}

static void
syntax_error_names_file_and_line(void **state)
{
	struct cfg_errors errs;
	struct conf cf;
	char want[600];

	(void)state;
	assert_int_equal(load(GOOD_DB "\n\ningest = { listen_port = = 8480; };\n", &errs, &cf), 1);
	snprintf(want, sizeof(want), "%s:4: syntax error", path);
	assert_non_null(strstr(errs.text, want));
	conf_free(&cf);
}

static void
unknown_setting_is_an_error_with_its_line(void **state)
{
	struct cfg_errors errs;
	struct conf cf;
	char want[600];

	(void)state;
	assert_int_equal(load(GOOD_DB "ingest = {\n  listen_prot = 8480;\n};\n", &errs, &cf), 1);
	snprintf(want, sizeof(want), "%s:3: setting 'ingest.listen_prot': unknown setting", path);
	assert_non_null(strstr(errs.text, want));
	conf_free(&cf);
}

static void
out_of_bounds_value_is_an_error(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(
	    load(GOOD_DB "ingest = { listen_port = 70000; max_body_bytes = 10; };\n", &errs, &cf),
	    2);
	assert_non_null(strstr(errs.text, ":2: setting 'ingest.listen_port': value 70000 is out of "
	                                  "bounds [1, 65535]"));
	assert_non_null(strstr(errs.text, "setting 'ingest.max_body_bytes': value 10 is out of "
	                                  "bounds [1024, 1048576]"));
	conf_free(&cf);
}

static void
wrong_type_is_an_error(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(load(GOOD_DB "ingest = { listen_port = \"8480\"; };\n", &errs, &cf), 1);
	assert_non_null(strstr(errs.text, "setting 'ingest.listen_port': expected an integer"));
	conf_free(&cf);
}

static void
missing_secret_file_is_an_error(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(
	    load("database = { password_file = \"/nonexistent/db_password\"; };\n", &errs, &cf), 1);
	assert_non_null(strstr(errs.text, ":1: setting 'database.password_file': cannot read "
	                                  "file '/nonexistent/db_password': No such file"));
	conf_free(&cf);
}

static void
missing_required_setting_is_an_error(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(load("log_level = \"info\";\n", &errs, &cf), 1);
	assert_non_null(strstr(errs.text, "setting 'database.password_file': required setting is "
	                                  "missing"));
	conf_free(&cf);
}

static void
merchant_errors_name_the_list_entry(void **state)
{
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(load(GOOD_DB "merchants = ( { id = \"a\"; alipay = { app_id = \"1\"; "
	                              "public_key_files = [ \"/nonexistent.pem\" ]; }; },\n"
	                              "  { id = \"a\"; wxpay = { mchid = \"1900000001\"; "
	                              "apiv3_key_file = \"%s\"; }; } );\n",
	                      &errs, &cf),
	                 2);
	assert_non_null(strstr(errs.text, "setting 'merchants[0].alipay.public_key_files[0]': "
	                                  "cannot read file '/nonexistent.pem'"));
	assert_non_null(strstr(errs.text, "setting 'merchants[1].wxpay.keys': must have at least "
	                                  "one entry"));
	conf_free(&cf);
	/* Cross-setting checks run once every setting is valid. */
	assert_int_equal(load(GOOD_DB
	                      "merchants = ( { id = \"a\"; stripe = { secret_files = "
	                      "[ \"%s\" ]; }; },\n"
	                      "  { id = \"a\"; stripe = { secret_files = [ \"%s\" ]; }; } );\n",
	                      &errs, &cf),
	                 1);
	assert_non_null(strstr(errs.text, "merchant id 'a' appears twice"));
	conf_free(&cf);
}

static void
merchant_ids_are_checked_with_their_line(void **state)
{
	static const char *bad[] = {
	    "a b", "a|b", "", "x1234567890123456789012345678901234567890123456789012345678901234"};
	char text[1024], want[600];
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
		         "database = { password_file = \"%%s\"; };\n"
		         "merchants = (\n  { id = \"ok.shop_1-A\"; stripe = { secret_files = "
		         "[ \"%%s\" ]; }; },\n  { id = \"%s\";\n    stripe = { secret_files = "
		         "[ \"%%s\" ]; }; } );\n",
		         bad[i]);
		assert_int_equal(load(text, &errs, &cf), 1);
		snprintf(want, sizeof(want), "%s:4: setting 'merchants[1].id': ", path);
		if (strstr(errs.text, want) == NULL)
			fail_msg("id '%s': %s", bad[i], errs.text);
		conf_free(&cf);
	}
	/* 64 characters of the allowed set are fine. */
	assert_int_equal(
	    load(GOOD_DB "merchants = ( { id = \"A.b_c-0123456789012345678901234567890123456789"
	                 "012345678901234567\"; stripe = { secret_files = [ \"%s\" ]; }; } );\n",
	         &errs, &cf),
	    0);
	assert_int_equal(strlen(cf.merchants[0].id), 64);
	conf_free(&cf);
}

static void
wxpay_mchid_is_required_and_binding_settings_load(void **state)
{
	char want[600];
	struct cfg_errors errs;
	struct conf cf;

	(void)state;
	assert_int_equal(load(GOOD_DB "merchants = (\n  { id = \"a\";\n"
	                              "    wxpay = { apiv3_key_file = \"%s\";\n"
	                              "      keys = ( { file = \"%s\"; } ); }; } );\n",
	                      &errs, &cf),
	                 1);
	/* A missing setting is reported at the line of the group it is missing from. */
	snprintf(want, sizeof(want),
	         "%s:4: setting 'merchants[0].wxpay.mchid': required setting is missing", path);
	if (strstr(errs.text, want) == NULL)
		fail_msg("%s", errs.text);
	conf_free(&cf);
	assert_int_equal(
	    load(GOOD_DB "merchants = ( { id = \"a\";\n"
	                 "    wxpay = { mchid = \"1900000001\"; sp_mchid = \"1230000109\";"
	                 " sub_mchids = [ \"1900000002\", \"1900000003\" ]; appids = [ \"wx1\" ];"
	                 " apiv3_key_file = \"%s\"; keys = ( { file = \"%s\"; } ); };\n"
	                 "    alipay = { app_id = \"2021\"; seller_id = \"2088000000000001\";"
	                 " public_key_files = [ \"%s\" ]; };\n"
	                 "    stripe = { secret_files = [ \"%s\" ]; test_mode = true;"
	                 " connect_accounts = [ \"acct_1\" ]; }; } );\n",
	         &errs, &cf),
	    0);
	assert_string_equal(chan_conf_wx(&cf.merchants[0])->sp_mchid, "1230000109");
	assert_int_equal(chan_conf_wx(&cf.merchants[0])->sub_mchids.n, 2);
	assert_string_equal(chan_conf_wx(&cf.merchants[0])->appids.v[0], "wx1");
	assert_string_equal(chan_conf_ali(&cf.merchants[0])->seller_id, "2088000000000001");
	assert_true(chan_conf_stripe(&cf.merchants[0])->test_mode);
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->connect_accounts.v[0], "acct_1");
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->api_base_url,
	                    "https://api.stripe.com");
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->api_key_file, "");
	conf_free(&cf);
	/* The reconciler's Stripe key and base URL (the simulator stands in for the API). */
	assert_int_equal(load(GOOD_DB "merchants = ( { id = \"a\"; stripe = { secret_files = "
	                              "[ \"%s\" ]; api_key_file = \"%s\";"
	                              " api_base_url = \"http://127.0.0.1:9\"; }; } );\n",
	                      &errs, &cf),
	                 0);
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->api_key_file, secret);
	assert_string_equal(chan_conf_stripe(&cf.merchants[0])->api_base_url, "http://127.0.0.1:9");
	conf_free(&cf);
	/* Defaults: no partner mode, no lists, live mode only. */
	assert_int_equal(load(GOOD_DB "merchants = ( { id = \"a\"; stripe = { secret_files = "
	                              "[ \"%s\" ]; }; } );\n",
	                      &errs, &cf),
	                 0);
	assert_false(chan_conf_stripe(&cf.merchants[0])->test_mode);
	assert_int_equal(chan_conf_stripe(&cf.merchants[0])->connect_accounts.n, 0);
	conf_free(&cf);
	/* Sub-merchants without a service provider, and a list entry that is not an id. */
	assert_int_equal(
	    load(GOOD_DB "merchants = ( { id = \"a\"; wxpay = { mchid = \"1\"; sub_mchids = "
	                 "[ \"2\" ]; apiv3_key_file = \"%s\"; keys = ( { file = \"%s\"; } ); };"
	                 " stripe = { secret_files = [ \"%s\" ]; connect_accounts = [ \"a b\" ]; };"
	                 " } );\n",
	         &errs, &cf),
	    1);
	assert_non_null(strstr(errs.text, "setting 'merchants[0].stripe.connect_accounts[0]'"));
	conf_free(&cf);
	assert_int_equal(
	    load(GOOD_DB "merchants = ( { id = \"a\"; wxpay = { mchid = \"1\"; sub_mchids = "
	                 "[ \"2\" ]; apiv3_key_file = \"%s\"; keys = ( { file = \"%s\"; } ); };"
	                 " } );\n",
	         &errs, &cf),
	    1);
	assert_non_null(strstr(errs.text, "wxpay.sub_mchids needs wxpay.sp_mchid"));
	conf_free(&cf);
}

static void
secret_is_read_without_trailing_newline(void **state)
{
	char err[256], *s = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(cfg_read_secret(secret, &s, &len, err, sizeof(err)), 0);
	assert_string_equal(s, "s3cret");
	assert_int_equal(len, 6);
	free(s);
	assert_int_equal(cfg_read_secret("/nonexistent", &s, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "/nonexistent"));
	/* Only a regular file is read, as for keys: a directory or a pipe is not a secret. */
	assert_int_equal(cfg_read_secret("/", &s, &len, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a regular file"));
}

/* As ssh does: a secret readable by group or others, or owned by another user, is refused
 * with an error naming the file, by the reader and by the startup check alike. */
static void
shared_secret_files_are_refused(void **state)
{
	char err[256], *s = NULL;
	size_t len = 0;

	(void)state;
	assert_int_equal(cfg_secret_file_ok(secret, err, sizeof(err)), 0);
	assert_int_equal(chmod(secret, 0640), 0);
	assert_int_equal(cfg_read_secret(secret, &s, &len, err, sizeof(err)), -1);
	assert_null(s);
	assert_non_null(strstr(err, secret));
	assert_non_null(strstr(err, "readable or writable by group or others (mode 0640)"));
	assert_int_equal(chmod(secret, 0604), 0);
	assert_int_equal(cfg_secret_file_ok(secret, err, sizeof(err)), -1);
	assert_int_equal(chmod(secret, 0600), 0);
	if (geteuid() == 0) {
		/* Another owner: only root can hand a file to someone else. */
		assert_int_equal(chown(secret, 65534, (gid_t)-1), 0);
		assert_int_equal(cfg_read_secret(secret, &s, &len, err, sizeof(err)), -1);
		assert_non_null(strstr(err, secret));
		assert_non_null(strstr(err, "is owned by uid 65534"));
		assert_int_equal(chown(secret, 0, (gid_t)-1), 0);
	} else {
		printf("# not root: the owner check needs chown, skipped\n");
	}
	assert_int_equal(cfg_read_secret(secret, &s, &len, err, sizeof(err)), 0);
	free(s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(complete_file_is_accepted_with_defaults),
	    cmocka_unit_test(syntax_error_names_file_and_line),
	    cmocka_unit_test(unknown_setting_is_an_error_with_its_line),
	    cmocka_unit_test(out_of_bounds_value_is_an_error),
	    cmocka_unit_test(wrong_type_is_an_error),
	    cmocka_unit_test(missing_secret_file_is_an_error),
	    cmocka_unit_test(missing_required_setting_is_an_error),
	    cmocka_unit_test(merchant_errors_name_the_list_entry),
	    cmocka_unit_test(merchant_ids_are_checked_with_their_line),
	    cmocka_unit_test(wxpay_mchid_is_required_and_binding_settings_load),
	    cmocka_unit_test(secret_is_read_without_trailing_newline),
	    cmocka_unit_test(shared_secret_files_are_refused),
	};
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/paycb.conf", dir);
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	write_file(secret, "s3cret\n");
	chmod(secret, 0600);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	unlink(secret);
	rmdir(dir);
	return rc;
}
