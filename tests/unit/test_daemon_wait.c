/*
 * test_daemon_wait - the skeleton owns the wait (daemon.h): daemon_main waits as long as the
 * loop asked, and no longer once a thread calls daemon_wake() or a signal arrives, whichever
 * thread takes it. The loop asks for a minute each time, so a wait that a wake or a signal
 * did not end makes a case take minutes and fail its bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <fcntl.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "daemon.h"
#include "metrics.h"

#define LONG_WAIT_MS 60000
/* Far below one LONG_WAIT_MS, far above what a loaded machine takes to deliver a wake. */
#define PROMPT_MS 10000

static char dir[] = "/tmp/paycb-wait-XXXXXX";
static char cpath[300];

/* What the test program's ops saw. */
static struct {
	int calls, reloads, drains;
	long long at[8];
} seen;

static void
write_file(const char *p, const char *text, mode_t mode)
{
	int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, mode);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

static int
t_init(const struct conf *cf, void **state)
{
	(void)cf;
	*state = &seen;
	return 0;
}

static int
t_drain(void *state)
{
	(void)state;
	seen.drains++;
	metrics_free();
	return 0;
}

static int
t_reload(void *state, struct conf *nc, char *err, size_t errlen)
{
	(void)state;
	(void)err;
	(void)errlen;
	seen.reloads++;
	conf_free(nc);
	free(nc);
	return 0;
}

static void *
t_wake_main(void *arg)
{
	(void)arg;
	daemon_wake();
	return NULL;
}

static void *
t_kill_main(void *arg)
{
	kill(getpid(), *(int *)arg);
	return NULL;
}

/* t_other - runs fn on a thread of its own, as a program's worker would. */
static void
t_other(void *(*fn)(void *), void *arg)
{
	pthread_t t;

	assert_int_equal(pthread_create(&t, NULL, fn, arg), 0);
	pthread_join(t, NULL);
}

/* Call 1: a worker wakes the loop; call 2: SIGHUP; call 3: SIGTERM. Each asks for a minute. */
static int
t_loop_woken(void *state, long long *wait_ms)
{
	static int hup = SIGHUP, term = SIGTERM;

	(void)state;
	seen.at[seen.calls++] = clock_mono_ms();
	if (seen.calls == 1)
		t_other(t_wake_main, NULL);
	else if (seen.calls == 2)
		t_other(t_kill_main, &hup);
	else if (seen.calls == 3)
		t_other(t_kill_main, &term);
	*wait_ms = LONG_WAIT_MS;
	return 0;
}

/* Call 1 asks for 300 ms, call 2 for none, call 3 stops with 70. */
static int
t_loop_timed(void *state, long long *wait_ms)
{
	(void)state;
	seen.at[seen.calls++] = clock_mono_ms();
	*wait_ms = seen.calls == 1 ? 300 : 0;
	return seen.calls == 3 ? EXIT_SOFTWARE : 0;
}

static int
run(int (*loop)(void *, long long *))
{
	const struct daemon_ops ops = {
	    .name = "test-wait",
	    .summary = "the skeleton's wait",
	    .prog = PROG_TOOL,
	    .init = t_init,
	    .loop = loop,
	    .drain = t_drain,
	    .reload = t_reload,
	};
	char *argv[] = {"test-wait", "-c", cpath, NULL};

	memset(&seen, 0, sizeof(seen));
	daemon_stop_requested = 0;
	daemon_reload_requested = 0;
	optind = 0; /* getopt starts afresh for each daemon_main */
	return daemon_main(3, argv, &ops);
}

static void
wake_and_signals_end_the_wait(void **state)
{
	(void)state;
	assert_int_equal(run(t_loop_woken), 0);
	assert_int_equal(seen.calls, 3);
	assert_int_equal(seen.reloads, 1);
	assert_int_equal(seen.drains, 1);
	/* daemon_wake() from a worker, then SIGHUP: each ended a minute's wait early. */
	assert_true(seen.at[1] - seen.at[0] < PROMPT_MS);
	assert_true(seen.at[2] - seen.at[1] < PROMPT_MS);
}

static void
the_wait_asked_for_is_kept(void **state)
{
	(void)state;
	assert_int_equal(run(t_loop_timed), EXIT_SOFTWARE);
	assert_int_equal(seen.calls, 3);
	assert_int_equal(seen.reloads, 0);
	/* The drain runs after a loop's exit code too. */
	assert_int_equal(seen.drains, 1);
	assert_true(seen.at[1] - seen.at[0] >= 300);
	assert_true(seen.at[2] - seen.at[1] < PROMPT_MS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(wake_and_signals_end_the_wait),
	    cmocka_unit_test(the_wait_asked_for_is_kept),
	};
	char secret[300], text[512];
	int rc;

	if (mkdtemp(dir) == NULL)
		return 1;
	snprintf(secret, sizeof(secret), "%s/db_password", dir);
	snprintf(cpath, sizeof(cpath), "%s/paycb.conf", dir);
	write_file(secret, "x\n", 0600);
	snprintf(text, sizeof(text), "database = { password_file = \"%s\"; };\n", secret);
	write_file(cpath, text, 0600);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	unlink(secret);
	unlink(cpath);
	rmdir(dir);
	return rc;
}
