/*
 * paycbctl - the SRE tool: look at callbacks and dead letters, replay dead ones, approve and
 * inspect refunds, close orders, reconcile a window of orders by hand (docs/paycbctl.md).
 *
 *   paycbctl [-c FILE] [--actor NAME] list [--status pending|done|dead] [--since T] [--limit N]
 *   paycbctl [-c FILE] show ID
 *   paycbctl [-c FILE] dead [--since T] [--limit N]
 *   paycbctl [-c FILE] unroutable [--since T] [--limit N]
 *   paycbctl [-c FILE] [--actor NAME] replay [--dry-run] ID...
 *   paycbctl [-c FILE] [--actor NAME] replay --all --from T --to T [--dry-run]
 *   paycbctl [-c FILE] [--actor NAME] refund approve ID...
 *   paycbctl [-c FILE] refund list [--status S] [--since T] [--limit N]
 *   paycbctl [-c FILE] refund show ID
 *   paycbctl [-c FILE] [--actor NAME] order close MERCHANT ORDER...
 *   paycbctl [-c FILE] [--actor NAME] reconcile --merchant M --from T --to T [--dry-run]
 *            [--wait[=S]]
 *
 * It reads the daemons' configuration file and reports configuration errors like them (exit
 * 78). Exit codes are listed in paycbctl.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conf.h"
#include "daemon.h"
#include "log.h"
#include "paycbctl.h"

#ifndef PAYCB_VERSION
#define PAYCB_VERSION "0.0.0"
#endif

static void
usage(FILE *fp)
{
	fprintf(
	    fp,
	    "usage: paycbctl [-c FILE] [--actor NAME] COMMAND [ARGS]\n\n"
	    "  list [--status pending|done|dead] [--since T] [--limit N]\n"
	    "  show ID                       all columns; the raw body only as length + sha256\n"
	    "  dead [--since T] [--limit N]  dead letters\n"
	    "  unroutable [--since T] [--limit N]\n"
	    "                                authentic notifications kept, not applied\n"
	    "  replay [--dry-run] ID...      reset dead rows and publish them on the first\n"
	    "                                retry step's topic (audited)\n"
	    "  replay --all --from T --to T [--dry-run]\n"
	    "  refund approve ID...          let the reconciler submit these refund requests\n"
	    "                                (reconciler.refund_approval; audited)\n"
	    "  refund list [--status S] [--since T] [--limit N]\n"
	    "                                refund requests (REQUESTED, SUBMITTED, DONE, FAILED)\n"
	    "  refund show ID                one refund request, with its alerts and approval\n"
	    "  order close MERCHANT ORDER... close PENDING orders; the reconciler closes them\n"
	    "                                at the channels (audited)\n"
	    "  reconcile --merchant M --from T --to T [--dry-run] [--wait[=S]]\n"
	    "                                query the PENDING orders created in [T, T) at the\n"
	    "                                channels now (audited); --wait follows the "
	    "reconciler\n\n"
	    "ID: cb42 or 42 (payment log), rf7 (refund log). T: UTC 'YYYY-MM-DD[ HH:MM[:SS]]',\n"
	    "or an age such as 30m, 2h, 7d. -c FILE defaults to $PAYCB_CONF or\n"
	    "/etc/paycb/paycb.conf; --actor defaults to $SUDO_USER, then $USER.\n"
	    "Exit codes: 0 done, 1 a target failed, 64 usage, 69 unavailable, 78 config.\n");
}

/* The commands, each with the function that runs it. */
static const struct {
	const char *name;
	int (*run)(struct ctl *c, int argc, char **argv);
} commands[] = {
    {"list", ctl_cmd_list},     {"show", ctl_cmd_show},
    {"dead", ctl_cmd_dead},     {"unroutable", ctl_cmd_unroutable},
    {"replay", ctl_cmd_replay}, {"refund", ctl_cmd_refund},
    {"order", ctl_cmd_order},   {"reconcile", ctl_cmd_reconcile},
};

/* command - the runner of name, or NULL. */
static int (*command(const char *name))(struct ctl *, int, char **)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (strcmp(commands[i].name, name) == 0)
			return commands[i].run;
	return NULL;
}

/* options - the global options; returns -1 to go on, else the exit code (help, errors). */
static int
options(int argc, char **argv, const char **file, const char **actor)
{
	static const struct option lo[] = {{"actor", required_argument, NULL, 'a'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {"version", no_argument, NULL, 'V'},
	                                   {NULL, 0, NULL, 0}};
	int ch;

	while ((ch = getopt_long(argc, argv, "+c:", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			*file = optarg;
			break;
		case 'a':
			*actor = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("paycbctl %s\n", PAYCB_VERSION);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return EXIT_USAGE;
	}
	return -1;
}

int
main(int argc, char **argv)
{
	const char *file = conf_default_file();
	const char *actor = NULL;
	int (*run)(struct ctl *, int, char **);
	struct conf cf;
	struct ctl c;
	int rc;

	log_init("paycbctl");
	/* Every tool reads the whole file, the channels' merchant settings too. */
	if (chan_conf_use() != 0)
		return EXIT_SOFTWARE;
	/* Library warnings still reach stderr; routine info lines would clutter the output. */
	log_set_level(LOG_LVL_WARN);
	if ((rc = options(argc, argv, &file, &actor)) >= 0)
		return rc;
	if ((run = command(argv[optind])) == NULL) {
		fprintf(stderr, "paycbctl: unknown command '%s'\n", argv[optind]);
		usage(stderr);
		return EXIT_USAGE;
	}
	if ((rc = conf_bootstrap(file, PROG_TOOL, &cf, "paycbctl")) != 0)
		return rc;
	memset(&c, 0, sizeof(c));
	c.cf = &cf;
	c.out = stdout;
	c.err = stderr;
	ctl_set_actor(&c, actor);
	if (db_open(&c.db, &cf.db) != DB_OK) {
		fprintf(stderr, "paycbctl: database: %s\n", c.db.last_error);
		db_close(&c.db);
		conf_free(&cf);
		return EXIT_UNAVAILABLE;
	}
	rc = run(&c, argc - optind, argv + optind);
	if (c.kp) {
		if (kq_flush(c.kp, 10000) > 0 && rc == 0)
			rc = CTL_FAILED;
		kq_producer_free(c.kp);
	}
	db_close(&c.db);
	conf_free(&cf);
	return rc;
}
