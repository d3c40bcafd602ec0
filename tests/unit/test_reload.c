/*
 * test_reload - the parts of a SIGHUP reload that need no daemon: which changed settings a
 * reload names (cfg_diff), which of them each program applies (conf_reloadable), and the
 * previous WeChat Pay APIv3 key a rotation holds beside the current one.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chan_conf.h"
#include "chan_notify.h"
#include "conf.h"
#include "testkeys.h"

static char dir[] = "/tmp/paycb-reload-XXXXXX";
static char secret[300], secret2[300], cpath[300];

static void
write_file(const char *p, const char *text)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* load - text (its %s the secret files) as a configuration for the program mask prog. */
static void
load(struct conf *cf, const char *text, unsigned prog)
{
	struct cfg_errors errs;
	char buf[2048];

	assert_int_equal(chan_conf_use(), 0);
	snprintf(buf, sizeof(buf), text, secret, secret, secret2);
	write_file(cpath, buf);
	assert_int_equal(conf_load(cpath, prog, cf, &errs), 0);
}

struct seen {
	char list[1024];
};

static void
collect(const char *path, void *arg)
{
	struct seen *s = arg;

	snprintf(s->list + strlen(s->list), sizeof(s->list) - strlen(s->list), "%s;", path);
}

#define BASE                                                                                       \
	"database = { password_file = \"%s\"; };\n"                                                \
	"merchants = ( { id = \"default\"; stripe = { secret_files = [ \"%s\" ]; }; } );\n"

static void
diff_names_each_changed_setting(void **state)
{
	struct conf a, b;
	struct seen s = {""};

	(void)state;
	load(&a, BASE, PROG_INGEST);
	load(&b, BASE, PROG_INGEST);
	cfg_diff(conf_table, &a, &b, collect, &s);
	assert_string_equal(s.list, "");
	conf_free(&b);
	load(&b,
	     "log_level = \"debug\";\n"
	     "ingest = { listen_port = 9999; };\n"
	     "retry = { ladder_s = [ 1, 2 ]; };\n"
	     "database = { password_file = \"%s\"; };\n"
	     "merchants = ( { id = \"default\"; stripe = { secret_files = [ \"%s\", \"%s\" ]; }; "
	     "} );\n",
	     PROG_INGEST);
	cfg_diff(conf_table, &a, &b, collect, &s);
	assert_string_equal(s.list, "log_level;retry.ladder_s;ingest.listen_port;"
	                            "merchants[0].stripe.secret_files;");
	conf_free(&b);
	/* A merchant more, or a channel group added, is one difference of its own. */
	memset(s.list, 0, sizeof(s.list));
	load(&b,
	     "database = { password_file = \"%s\"; };\n"
	     "merchants = ( { id = \"default\"; stripe = { secret_files = [ \"%s\" ]; };\n"
	     "  alipay = { app_id = \"2021\"; public_key_files = [ \"%s\" ]; }; } );\n",
	     PROG_TOOL);
	cfg_diff(conf_table, &a, &b, collect, &s);
	assert_string_equal(s.list, "merchants[0].alipay;");
	conf_free(&b);
	conf_free(&a);
}

static void
reloadable_settings_by_program(void **state)
{
	(void)state;
	assert_true(conf_reloadable("log_level", PROG_PROCESSOR));
	assert_true(conf_reloadable("log_level", PROG_RETRIER));
	assert_true(conf_reloadable("merchants", PROG_INGEST));
	assert_true(conf_reloadable("merchants[3].wxpay.keys[1].file", PROG_INGEST));
	assert_true(conf_reloadable("merchants[0].stripe.api_key_file", PROG_RECONCILER));
	assert_true(conf_reloadable("ingest.timestamp_tolerance_s", PROG_INGEST));
	assert_true(conf_reloadable("reconciler.proxy", PROG_RECONCILER));
	/* What a program reads once at start needs a restart. */
	assert_false(conf_reloadable("merchants[0].stripe.secret_files", PROG_PROCESSOR));
	assert_false(conf_reloadable("ingest.listen_port", PROG_INGEST));
	assert_false(conf_reloadable("ingest.timestamp_tolerance_s", PROG_RECONCILER));
	assert_false(conf_reloadable("reconciler.batch", PROG_RECONCILER));
	assert_false(conf_reloadable("database.host", PROG_INGEST));
	assert_false(conf_reloadable("kafka.brokers", PROG_RECONCILER));
	/* A prefix names a whole setting, not the start of another one's name. */
	assert_false(conf_reloadable("log_levels", PROG_INGEST));
	assert_false(conf_reloadable("merchantsx", PROG_INGEST));
}

#define APIV3_OLD "abcdefghijklmnopqrstuvwxyz012345"
#define APIV3_NEW "ZYXWVUTSRQPONMLKJIHGFEDCBA543210"

static void
previous_apiv3_key_opens_the_old_resources(void **state)
{
	static const char plain[] = "{\"mchid\":\"1\",\"out_trade_no\":\"o1\"}";
	struct wx_merchant m;
	EVP_PKEY *key = tk_rsa_new();
	char ts[24], nonce[40], *sig = NULL, *body = NULL, err[256], reason[128];
	uint8_t *out = NULL;
	size_t olen = 0;

	(void)state;
	assert_non_null(key);
	assert_int_equal(notify_wx_sign(key, "5A", (const uint8_t *)APIV3_OLD,
	                                "TRANSACTION.SUCCESS", plain, time(NULL), &body, ts, nonce,
	                                &sig),
	                 0);
	write_file(secret, APIV3_NEW "\n");
	write_file(secret2, APIV3_OLD);
	memset(&m, 0, sizeof(m));
	assert_int_equal(notify_keys_wx_apiv3_load(&m, secret, err, sizeof(err)), 0);
	/* The current key alone: the tag refuses it. */
	assert_int_equal(notify_wx_decrypt_body(&m, (const uint8_t *)body, strlen(body), &out,
	                                        &olen, reason, sizeof(reason)),
	                 VERR_DECRYPT);
	assert_int_equal(notify_keys_wx_apiv3_previous(&m, secret2, err, sizeof(err)), 0);
	assert_int_equal(notify_wx_decrypt_body(&m, (const uint8_t *)body, strlen(body), &out,
	                                        &olen, reason, sizeof(reason)),
	                 VERR_OK);
	assert_int_equal(olen, strlen(plain));
	assert_memory_equal(out, plain, olen);
	free(out);
	/* The same key as both is a mistake, named without the key. */
	notify_keys_wx_free(&m);
	assert_int_equal(notify_keys_wx_apiv3_load(&m, secret2, err, sizeof(err)), 0);
	assert_int_equal(notify_keys_wx_apiv3_previous(&m, secret2, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "previous APIv3 key is the current one"));
	assert_null(strstr(err, APIV3_OLD));
	assert_int_equal(m.apiv3_prev_len, 0);
	notify_keys_wx_free(&m);
	free(body);
	free(sig);
	EVP_PKEY_free(key);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(diff_names_each_changed_setting),
	    cmocka_unit_test(reloadable_settings_by_program),
	    cmocka_unit_test(previous_apiv3_key_opens_the_old_resources),
	};
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(secret, sizeof(secret), "%s/secret", dir);
	snprintf(secret2, sizeof(secret2), "%s/secret2", dir);
	snprintf(cpath, sizeof(cpath), "%s/paycb.conf", dir);
	write_file(secret, "whsec_test");
	write_file(secret2, "whsec_test2");
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(secret);
	unlink(secret2);
	unlink(cpath);
	rmdir(dir);
	return rc;
}
