/*
 * paycb-migrate - applies the SQL migrations and creates the Kafka topics.
 *
 * usage: paycb-migrate [-c FILE] [-s DIR] [--create-db] [--no-topics] [--topics-only]
 * Exit codes: 0 done (also when there was nothing to do), 64 usage, 69 a server was
 * unreachable or refused a step, 78 configuration error.
 */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conf.h"
#include "daemon.h"
#include "log.h"
#include "migrate.h"

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: paycb-migrate [-c FILE] [-s DIR] [--create-db] [--no-topics] "
	        "[--topics-only]\n"
	        "  -c FILE        configuration (default $PAYCB_CONF or /etc/paycb/paycb.conf)\n"
	        "  -s DIR         schema directory (default $PAYCB_SCHEMAS or ./schemas)\n"
	        "  --create-db    create the configured database first if it is missing\n"
	        "  --no-topics    apply SQL only\n"
	        "  --topics-only  create topics only\n"
	        "  --config-doc   print the table of every setting (Markdown) and exit\n");
}

int
main(int argc, char **argv)
{
	static const struct option lo[] = {{"create-db", no_argument, NULL, 'C'},
	                                   {"no-topics", no_argument, NULL, 'T'},
	                                   {"topics-only", no_argument, NULL, 'O'},
	                                   {"config-doc", no_argument, NULL, 'D'},
	                                   {"help", no_argument, NULL, 'h'},
	                                   {"version", no_argument, NULL, 'V'},
	                                   {NULL, 0, NULL, 0}};
	const char *file = conf_default_file();
	const char *dir = getenv("PAYCB_SCHEMAS") ? getenv("PAYCB_SCHEMAS") : "schemas";
	int create = 0, sql = 1, topics = 1, c, rc = 0;
	struct migrate_result res = {0, 0, 0};
	struct conf cf;
	char err[1024];

	log_init("paycb-migrate");
	/* Every tool reads the whole file, the channels' merchant settings too. */
	if (chan_conf_use() != 0)
		return EXIT_SOFTWARE;
	while ((c = getopt_long(argc, argv, "c:s:", lo, NULL)) != -1) {
		switch (c) {
		case 'c':
			file = optarg;
			break;
		case 's':
			dir = optarg;
			break;
		case 'C':
			create = 1;
			break;
		case 'T':
			topics = 0;
			break;
		case 'O':
			sql = 0;
			break;
		case 'D':
			/* The settings table rendered as Markdown, for docs/config.md. */
			printf("| setting | type | default | meaning |\n|---|---|---|---|\n");
			cfg_doc(conf_table, "", stdout);
			return 0;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("paycb-migrate %s\n", PAYCB_VERSION);
			return 0;
		default:
			usage(stderr);
			return EXIT_USAGE;
		}
	}
	if ((rc = conf_bootstrap(file, PROG_TOOL, &cf, "paycb-migrate")) != 0)
		return rc;
	if (create && migrate_create_db(&cf, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-migrate: %s\n", err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	if (sql && migrate_sql(&cf, dir, &res, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-migrate: %s\n", err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	if (topics && migrate_topics(&cf, dir, &res, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-migrate: %s\n", err);
		rc = EXIT_UNAVAILABLE;
		goto done;
	}
	printf("paycb-migrate: database %s: %d applied, %d already applied; %d topics ensured\n",
	       cf.db.name, res.applied, res.skipped, res.topics);
done:
	conf_free(&cf);
	return rc;
}
