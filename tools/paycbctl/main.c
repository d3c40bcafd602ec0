/*
 * paycbctl - the SRE tool: look at callbacks and dead letters, replay dead ones
 * (docs/paycbctl.md).
 *
 *   paycbctl [-c FILE] [--actor NAME] list [--status pending|done|dead] [--since T] [--limit N]
 *   paycbctl [-c FILE] show ID
 *   paycbctl [-c FILE] dead [--since T] [--limit N]
 *   paycbctl [-c FILE] unroutable [--since T] [--limit N]
 *   paycbctl [-c FILE] [--actor NAME] replay [--dry-run] ID...
 *   paycbctl [-c FILE] [--actor NAME] replay --all --from T --to T [--dry-run]
 *   paycbctl [-c FILE] [--actor NAME] refund approve ID...
 *   paycbctl [-c FILE] [--actor NAME] order close MERCHANT ORDER...
 *
 * It reads the daemons' configuration file and reports configuration errors like them (exit
 * 78). Exit codes are listed in paycbctl.h.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
	    "  order close MERCHANT ORDER... close PENDING orders; the reconciler closes them\n"
	    "                                at the channels (audited)\n\n"
	    "ID: cb42 or 42 (payment log), rf7 (refund log). T: UTC 'YYYY-MM-DD[ HH:MM[:SS]]',\n"
	    "or an age such as 30m, 2h, 7d. -c FILE defaults to $PAYCB_CONF or\n"
	    "/etc/paycb/paycb.conf; --actor defaults to $SUDO_USER, then $USER.\n"
	    "Exit codes: 0 done, 1 a target failed, 64 usage, 69 unavailable, 78 config.\n");
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"actor", required_argument, NULL, 'a'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {"version", no_argument, NULL, 'V'},
	                                   {NULL, 0, NULL, 0}};
	const char *file = getenv("PAYCB_CONF") ? getenv("PAYCB_CONF") : "/etc/paycb/paycb.conf";
	const char *actor = NULL, *cmd;
	struct cfg_errors errs;
	struct conf cf;
	struct ctl c;
	int ch, rc;

	log_init("paycbctl");
	/* Library warnings still reach stderr; routine info lines would clutter the output. */
	log_set_level(LOG_LVL_WARN);
	while ((ch = getopt_long(argc, argv, "+c:", lo, NULL)) != -1) {
		switch (ch) {
		case 'c':
			file = optarg;
			break;
		case 'a':
			actor = optarg;
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
	cmd = argv[optind];
	if (strcmp(cmd, "list") && strcmp(cmd, "show") && strcmp(cmd, "dead") &&
	    strcmp(cmd, "unroutable") && strcmp(cmd, "replay") && strcmp(cmd, "refund") &&
	    strcmp(cmd, "order")) {
		fprintf(stderr, "paycbctl: unknown command '%s'\n", cmd);
		usage(stderr);
		return EXIT_USAGE;
	}
	if (conf_load(file, PROC_TOOL, &cf, &errs) != 0) {
		fprintf(stderr, "paycbctl: configuration errors:\n%s", errs.text);
		conf_free(&cf);
		return EXIT_CONFIG;
	}
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
	argc -= optind;
	argv += optind;
	if (strcmp(cmd, "list") == 0)
		rc = ctl_cmd_list(&c, argc, argv);
	else if (strcmp(cmd, "show") == 0)
		rc = ctl_cmd_show(&c, argc, argv);
	else if (strcmp(cmd, "dead") == 0)
		rc = ctl_cmd_dead(&c, argc, argv);
	else if (strcmp(cmd, "unroutable") == 0)
		rc = ctl_cmd_unroutable(&c, argc, argv);
	else if (strcmp(cmd, "refund") == 0)
		rc = ctl_cmd_refund(&c, argc, argv);
	else if (strcmp(cmd, "order") == 0)
		rc = ctl_cmd_order(&c, argc, argv);
	else
		rc = ctl_cmd_replay(&c, argc, argv);
	if (c.kp) {
		if (kq_flush(c.kp, 10000) > 0 && rc == 0)
			rc = CTL_FAILED;
		kq_producer_free(c.kp);
	}
	db_close(&c.db);
	conf_free(&cf);
	return rc;
}
