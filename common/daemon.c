/*
 * daemon - argv, configuration, logging, signals, the loop and the drain (see daemon.h).
 */
#include "daemon.h"

#include <getopt.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

#ifndef PAYCB_VERSION
#define PAYCB_VERSION "0.0.0"
#endif

volatile sig_atomic_t daemon_stop_requested;

static void
daemon_on_signal(int sig)
{
	(void)sig;
	daemon_stop_requested = 1;
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
		"78 configuration error. SIGTERM or SIGINT drains and exits.\n",
		ops->name, ops->summary);
}

int
daemon_main(int argc, char **argv, const struct daemon_ops *ops)
{
	static const struct option longopts[] = {{"help", no_argument, NULL, 'h'},
						 {"version", no_argument, NULL, 'V'},
						 {NULL, 0, NULL, 0}};
	const char *file = getenv("PAYCB_CONF") ? getenv("PAYCB_CONF") : "/etc/paycb/paycb.conf";
	struct cfg_errors errs;
	char why[512];
	struct conf cf;
	struct sigaction sa;
	enum log_level lvl;
	void *state = NULL;
	int check = 0, c, rc;

	/* No core dumps, and no ptrace by other processes of this user: a dump would write the
	 * secrets in memory (APIv3 keys, Stripe secrets, passwords) to disk. */
	prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
	log_init(ops->name);
	while ((c = getopt_long(argc, argv, "c:n", longopts, NULL)) != -1) {
		switch (c) {
		case 'c':
			file = optarg;
			break;
		case 'n':
			check = 1;
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
	if (conf_load(file, ops->proc, &cf, &errs) != 0) {
		fprintf(stderr, "%s: configuration errors:\n%s", ops->name, errs.text);
		conf_free(&cf);
		return EXIT_CONFIG;
	}
	if (log_level_parse(cf.log_level, &lvl) != 0) {
		fprintf(stderr, "%s: %s: setting 'log_level': unknown level '%s'\n", ops->name,
			file, cf.log_level);
		conf_free(&cf);
		return EXIT_CONFIG;
	}
	if (conf_check_secrets(&cf, ops->proc, why, sizeof(why)) != 0) {
		fprintf(stderr, "%s: %s: %s\n", ops->name, file, why);
		conf_free(&cf);
		return EXIT_CONFIG;
	}
	if (check) {
		printf("%s: configuration OK\n", file);
		conf_free(&cf);
		return 0;
	}
	log_set_level(lvl);

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = daemon_on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, NULL);

	log_info(NULL, "event=start version=%s config=%s", PAYCB_VERSION, file);
	if ((rc = ops->init(&cf, &state)) != 0) {
		log_error(NULL, "event=init_failed exit=%d", rc);
		conf_free(&cf);
		return rc;
	}
	rc = 0;
	while (!daemon_stop_requested && rc == 0)
		rc = ops->loop(state);
	log_info(NULL, "event=drain reason=%s", rc ? "error" : "signal");
	c = ops->drain(state);
	if (rc == 0)
		rc = c;
	log_info(NULL, "event=exit code=%d", rc);
	conf_free(&cf);
	return rc;
}

int
daemon_db_open_exit(enum db_rc rc)
{
	return rc == DB_FATAL ? EXIT_CONFIG : 0;
}
