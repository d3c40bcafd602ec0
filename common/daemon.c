/*
 * daemon - argv, configuration, logging, signals, the loop, reloads and the drain (see
 * daemon.h).
 */
#include "daemon.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "metrics.h"

#ifndef PAYCB_VERSION
#define PAYCB_VERSION "0.0.0"
#endif

/* Where daemon_main goes on after its command line: -1 = run, else the exit code. */
#define DAEMON_RUN -1

volatile sig_atomic_t daemon_stop_requested;
volatile sig_atomic_t daemon_reload_requested;
/* The eventfd the skeleton waits on; -1 until daemon_main creates it. */
static volatile sig_atomic_t daemon_wake_fd = -1;

/* What the loop needs to reload: the running configuration and the reload's metrics. */
struct daemon_run {
	const struct daemon_ops *ops;
	const char *file;
	const struct conf *cf; /* as started: what needs_restart is judged against */
	void *state;
	unsigned long long reloads;
	struct metric *ok, *failed, *last_ok, *last_ok_ts;
};

/* The collected names of changed settings a reload cannot apply. */
struct daemon_restart {
	unsigned prog;
	char list[1024];
};

void
daemon_wake(void)
{
	uint64_t one = 1;
	int saved = errno, fd = daemon_wake_fd;
	/* A full counter (EAGAIN) wakes the waiter as well, so the result does not matter;
	 * errno is restored for the code a signal handler interrupted. */
	ssize_t n = fd >= 0 ? write(fd, &one, sizeof(one)) : 0;

	(void)n;
	errno = saved;
}

static void
daemon_on_signal(int sig)
{
	(void)sig;
	daemon_stop_requested = 1;
	daemon_wake();
}

static void
daemon_on_hup(int sig)
{
	(void)sig;
	daemon_reload_requested = 1;
	daemon_wake();
}

/*
 * daemon_wait - the one place a daemon waits between two loop calls: ms milliseconds, or
 * until a signal or daemon_wake(), whichever comes first. A wake that arrives after the
 * eventfd was read stays counted and ends the next wait, so none is lost.
 */
static void
daemon_wait(long long ms)
{
	struct pollfd pfd = {.fd = daemon_wake_fd, .events = POLLIN};
	uint64_t n;
	ssize_t got;

	if (ms == 0 || daemon_stop_requested || daemon_reload_requested)
		return;
	/* EINTR only means that a handler ran; the flags it set are read by the caller. The read
	 * resets the counter, so that one wake ends one wait. */
	if (poll(&pfd, 1, ms < 0 ? -1 : ms > INT_MAX ? INT_MAX : (int)ms) > 0) {
		got = read(daemon_wake_fd, &n, sizeof(n));
		(void)got;
	}
}

int
daemon_stopping(void)
{
	return daemon_stop_requested != 0;
}

static void
daemon_usage(const struct daemon_ops *ops, FILE *fp)
{
	fprintf(fp,
	        "usage: %s [-n] [-c FILE]\n"
	        "%s\n\n"
	        "  -c FILE     configuration file (default /etc/paycb/paycb.conf, or $PAYCB_CONF)\n"
	        "  -n          check the configuration, print \"configuration OK\" and exit\n"
	        "  --help      this text\n"
	        "  --version   print the version\n\n"
	        "Exit codes: 0 orderly stop, 64 usage, 69 service unavailable, 70 internal error,\n"
	        "78 configuration error. SIGTERM or SIGINT drains and exits; SIGHUP reloads the\n"
	        "configuration and the key files.\n",
	        ops->name, ops->summary);
}

/* daemon_args - the command line: DAEMON_RUN, or the exit code of --help, --version or a
 * mistake. */
static int
daemon_args(int argc, char **argv, const struct daemon_ops *ops, const char **file, int *check)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
	                                         {"version", no_argument, NULL, 'V'},
	                                         {NULL, 0, NULL, 0}};
	int c;

	while ((c = getopt_long(argc, argv, "c:n", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			*file = optarg;
			break;
		case 'n':
			*check = 1;
			break;
		case 'h':
			daemon_usage(ops, stdout);
			return 0;
		case 'V':
			printf("%s %s\n", ops->name, PAYCB_VERSION);
			return 0;
		default:
			daemon_usage(ops, stderr);
			return EXIT_USAGE;
		}
	}
	if (optind != argc) {
		daemon_usage(ops, stderr);
		return EXIT_USAGE;
	}
	return DAEMON_RUN;
}

/*
 * daemon_conf_read - loads and validates file whole, as at start and on every reload: the
 * settings table, the log level, and the mode of every secret file the program reads. 0; 1
 * when the table refused settings, or -1 when a setting's value or a file failed a later
 * check, with the errors in text (lines ending in '\n', each naming the file and, for the
 * table's, the line); cf is to be freed either way.
 */
static int
daemon_conf_read(const struct daemon_ops *ops, const char *file, struct conf *cf,
                 enum log_level *lvl, char *text, size_t len)
{
	struct cfg_errors errs;
	char why[512];

	if (conf_load(file, ops->prog, cf, &errs) != 0) {
		snprintf(text, len, "%s", errs.text);
		return 1;
	}
	if (log_level_parse(cf->log_level, lvl) != 0) {
		snprintf(text, len, "%s: setting 'log_level': unknown level '%s'\n", file,
		         cf->log_level);
		return -1;
	}
	if (conf_check_secrets(cf, ops->prog, why, sizeof(why)) != 0) {
		snprintf(text, len, "%s: %s\n", file, why);
		return -1;
	}
	return 0;
}

/* daemon_signals - the wake eventfd and the handlers that write it: 0, or EXIT_SOFTWARE when
 * no descriptor is left. */
static int
daemon_signals(void)
{
	struct sigaction sa;
	int fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);

	if (fd < 0) {
		log_error(NULL, "event=eventfd_failed error=\"%s\"", strerror(errno));
		return EXIT_SOFTWARE;
	}
	daemon_wake_fd = fd;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = daemon_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	/* Restarted system calls: a reload request must not fail a read in progress. */
	sa.sa_handler = daemon_on_hup;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	sa.sa_flags = 0;
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);
	return 0;
}

static void
daemon_reload_metrics(struct daemon_run *r)
{
	r->ok = metrics_counter("paycb_config_reload_total",
	                        "configuration reloads (SIGHUP) by result", "result=\"ok\"");
	r->failed =
	    metrics_counter("paycb_config_reload_total", "configuration reloads (SIGHUP) by result",
	                    "result=\"failed\"");
	r->last_ok = metrics_gauge("paycb_config_last_reload_successful",
	                           "1 when the last reload was applied (or none was asked for), 0 "
	                           "when it was refused and the previous set is serving",
	                           "");
	r->last_ok_ts = metrics_gauge("paycb_config_last_reload_success_timestamp_seconds",
	                              "when the configuration serving now was loaded", "");
	metrics_set(r->last_ok, 1);
	metrics_set(r->last_ok_ts, (long long)time(NULL));
}

static void
daemon_restart_add(const char *path, void *arg)
{
	struct daemon_restart *d = arg;
	size_t used = strlen(d->list);

	if (conf_reloadable(path, d->prog))
		return;
	snprintf(d->list + used, sizeof(d->list) - used, "%s%s", used ? "," : "", path);
}

/* daemon_oneline - the errors of text on one line ("; " between them), for a log value. */
static void
daemon_oneline(char *text)
{
	size_t n = strlen(text);

	while (n > 0 && text[n - 1] == '\n')
		text[--n] = '\0';
	for (char *p = text; *p; p++)
		if (*p == '\n')
			*p = ';';
}

/*
 * daemon_reload - SIGHUP: the file read and validated whole, the program's keys swapped in
 * by its reload op, the log level set; or, on any error, nothing changed and one line saying
 * why.
 */
static void
daemon_reload(struct daemon_run *r)
{
	struct daemon_restart restart = {r->ops->prog, ""};
	struct conf *nc = calloc(1, sizeof(*nc));
	char text[4096], q[4096];
	enum log_level lvl;
	int ok = 0;

	r->reloads++;
	text[0] = '\0';
	if (nc == NULL) {
		snprintf(text, sizeof(text), "out of memory");
	} else if (daemon_conf_read(r->ops, r->file, nc, &lvl, text, sizeof(text)) == 0) {
		cfg_diff(conf_table, r->cf, nc, daemon_restart_add, &restart);
		ok =
		    r->ops->reload == NULL || r->ops->reload(r->state, nc, text, sizeof(text)) == 0;
	}
	metrics_inc(ok ? r->ok : r->failed, 1);
	metrics_set(r->last_ok, ok);
	if (ok) {
		metrics_set(r->last_ok_ts, (long long)time(NULL));
		/* Logged before the new level applies, so that a quieter level still shows it. */
		log_info(NULL,
		         "event=config_reload result=ok reload=%llu config=%s needs_restart=%s",
		         r->reloads, r->file, restart.list[0] ? restart.list : "none");
		log_set_level(lvl);
	} else {
		daemon_oneline(text);
		log_error(NULL,
		          "event=config_reload result=failed reload=%llu config=%s action=kept_old "
		          "error=\"%s\"",
		          r->reloads, r->file, log_quoted(q, sizeof(q), text));
	}
	/* An applied nc is the program's now, unless it has no reload op to take it. */
	if (nc != NULL && (!ok || r->ops->reload == NULL)) {
		conf_free(nc);
		free(nc);
	}
}

/*
 * daemon_serve - init, the loop with its reloads, the drain: the exit code. SIGHUP is blocked
 * while init starts the program's threads, which inherit the mask, so that only this thread
 * ever takes it and no worker's system call is interrupted by it.
 */
static int
daemon_serve(struct daemon_run *r, const struct conf *cf)
{
	long long wait_ms;
	sigset_t hup;
	int rc, c;

	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	daemon_reload_metrics(r);
	rc = r->ops->init(cf, &r->state);
	pthread_sigmask(SIG_UNBLOCK, &hup, NULL);
	if (rc != 0) {
		log_error(NULL, "event=init_failed exit=%d", rc);
		return rc;
	}
	while (!daemon_stop_requested && rc == 0) {
		if (daemon_reload_requested) {
			daemon_reload_requested = 0;
			daemon_reload(r);
		}
		wait_ms = DAEMON_WAIT_FOREVER;
		if ((rc = r->ops->loop(r->state, &wait_ms)) == 0)
			daemon_wait(wait_ms);
	}
	log_info(NULL, "event=drain reason=%s", rc ? "error" : "signal");
	c = r->ops->drain(r->state);
	return rc == 0 ? c : rc;
}

int
daemon_main(int argc, char **argv, const struct daemon_ops *ops)
{
	const char *file = conf_default_file();
	struct daemon_run run;
	char text[4096];
	struct conf cf;
	enum log_level lvl;
	int check = 0, rc;

	/* No core dumps, and no ptrace by other processes of this user: a dump would write the
	 * secrets in memory (APIv3 keys, Stripe secrets, passwords) to disk. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	log_init(ops->name);
	if ((rc = daemon_args(argc, argv, ops, &file, &check)) != DAEMON_RUN)
		return rc;
	if (ops->channels != NULL && ops->channels() != 0) {
		fprintf(stderr, "%s: the channels' settings do not fit the configuration\n",
		        ops->name);
		return EXIT_SOFTWARE;
	}
	memset(&cf, 0, sizeof(cf));
	if ((rc = daemon_conf_read(ops, file, &cf, &lvl, text, sizeof(text))) != 0) {
		fprintf(stderr, "%s: %s%s", ops->name, rc > 0 ? "configuration errors:\n" : "",
		        text);
		conf_free(&cf);
		return EXIT_CONFIG;
	}
	if (check) {
		printf("%s: configuration OK\n", file);
		conf_free(&cf);
		return 0;
	}
	log_set_level(lvl);
	if ((rc = daemon_signals()) != 0) {
		conf_free(&cf);
		return rc;
	}
	log_info(NULL, "event=start version=%s config=%s", PAYCB_VERSION, file);
	memset(&run, 0, sizeof(run));
	run.ops = ops;
	run.file = file;
	run.cf = &cf;
	rc = daemon_serve(&run, &cf);
	log_info(NULL, "event=exit code=%d", rc);
	conf_free(&cf);
	return rc;
}

int
daemon_db_open_exit(enum db_rc rc)
{
	return rc == DB_FATAL ? EXIT_CONFIG : 0;
}
