/*
 * test_conf_bootstrap - the tools' configuration bootstrap: the file read when none is named,
 * and a bad file reported the daemons' way (one heading, then every error on its own line
 * naming the file and its line) with exit code 78.
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
#include <unistd.h>

#include "chan_conf.h"
#include "conf.h"

static char dir[] = "/tmp/paycb-boot-XXXXXX";
static char path[512], out[512];

/* boot - runs conf_bootstrap on text (NULL: no file at all) with stderr captured in errtext. */
static int
boot(const char *text, char *errtext, size_t len)
{
	struct conf cf;
	FILE *fp;
	int saved, fd, rc;
	ssize_t n;

	assert_int_equal(chan_conf_use(), 0);
	unlink(path);
	if (text) {
		assert_non_null(fp = fopen(path, "w"));
		fputs(text, fp);
		fclose(fp);
	}
	fflush(stderr);
	assert_true((saved = dup(2)) >= 0);
	assert_true((fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0600)) >= 0);
	dup2(fd, 2);
	close(fd);
	rc = conf_bootstrap(path, PROG_TOOL, &cf, "paycb-test");
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	assert_true((fd = open(out, O_RDONLY)) >= 0);
	n = read(fd, errtext, len - 1);
	close(fd);
	errtext[n > 0 ? n : 0] = '\0';
	conf_free(&cf);
	return rc;
}

static void
bad_file_prints_every_error_with_its_line_and_exits_78(void **state)
{
	char text[8192], want[600], *line, *save = NULL;
	int lines = 0;

	(void)state;
	assert_int_equal(boot("database = { port = \"not a number\"; };\nno_such_setting = 1;\n",
	                      text, sizeof(text)),
	                 78);
	printf("# %s", text);
	assert_non_null(strstr(text, "paycb-test: configuration errors:\n"));
	assert_true(strncmp(text, "paycb-test: configuration errors:\n", 34) == 0);
	snprintf(want, sizeof(want), "%s:1: setting 'database.port'", path);
	assert_non_null(strstr(text, want));
	snprintf(want, sizeof(want), "%s:2: setting 'no_such_setting'", path);
	assert_non_null(strstr(text, want));
	/* After the heading, every line is one error that names the file. */
	for (line = strtok_r(text + 34, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
		assert_true(strncmp(line, path, strlen(path)) == 0);
		lines++;
	}
	assert_true(lines >= 2);
}

static void
missing_file_names_it_and_exits_78(void **state)
{
	char text[8192];

	(void)state;
	assert_int_equal(boot(NULL, text, sizeof(text)), 78);
	assert_true(strncmp(text, "paycb-test: configuration errors:\n", 34) == 0);
	assert_non_null(strstr(text, path));
}

/* A Unix socket connection does not use TLS: both set is refused, not TLS silently dropped. */
static void
socket_with_tls_settings_is_refused(void **state)
{
	char text[8192], conf[1200];

	(void)state;
	snprintf(conf, sizeof(conf),
	         "database = { password_file = \"%s\"; socket = \"/run/mysqld/mysqld.sock\"; "
	         "ssl_ca = \"%s\"; };\n",
	         path, path);
	assert_int_equal(boot(conf, text, sizeof(text)), 78);
	printf("# %s", text);
	assert_non_null(strstr(text, "'database.socket' and 'database.ssl_ca' exclude each other"));
	snprintf(conf, sizeof(conf), "database = { socket = \"/run/mysqld/mysqld.sock\"; };\n");
	boot(conf, text, sizeof(text));
	assert_null(strstr(text, "database.socket"));
}

static void
default_file_is_paycb_conf_or_etc(void **state)
{
	(void)state;
	setenv("PAYCB_CONF", "/srv/paycb.conf", 1);
	assert_string_equal(conf_default_file(), "/srv/paycb.conf");
	setenv("PAYCB_CONF", "", 1);
	assert_string_equal(conf_default_file(), "/etc/paycb/paycb.conf");
	unsetenv("PAYCB_CONF");
	assert_string_equal(conf_default_file(), "/etc/paycb/paycb.conf");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(bad_file_prints_every_error_with_its_line_and_exits_78),
	    cmocka_unit_test(missing_file_names_it_and_exits_78),
	    cmocka_unit_test(socket_with_tls_settings_is_refused),
	    cmocka_unit_test(default_file_is_paycb_conf_or_etc),
	};
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(path, sizeof(path), "%s/paycb.conf", dir);
	snprintf(out, sizeof(out), "%s/stderr", dir);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(path);
	unlink(out);
	rmdir(dir);
	return rc;
}
