/*
 * paycb-sim - behaves toward paycb-ingest as WeChat Pay APIv3, Alipay and Stripe do.
 *
 *   keys       generate every merchant's channel keys and the matching paycb configuration
 *   conf       write a variant of a configuration (other ports, another database, ...)
 *   run        create orders, pay and refund them through ingest with each channel's
 *              delivery behaviour, then check the outcome in the database
 *   junk       a flood of requests that are not notifications, for make bench
 *   api        the channels' API side that paycb-reconciler calls
 *
 * The measurements of the database and the processors (dbceiling, drain) are paycb-bench's
 * (tools/bench/, docs/bench.md): the simulator only plays the channels. See docs/simulator.md.
 * Exit codes: 0 as expected, 1 a checked expectation failed, 64 usage, 69 a service is
 * unavailable, 70 an internal error, 78 a configuration error.
 */
#include <getopt.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chan_conf.h"
#include "daemon.h"
#include "log.h"
#include "tool.h"
#include "sim.h"

#define SIM_MAX_SETS 64

static void
usage(FILE *fp)
{
	fprintf(fp,
	        "usage: paycb-sim COMMAND [OPTIONS]\n\n"
	        "  keys --out DIR --conf FILE [--base CONF] [--merchants N] [--api URL]\n"
	        "        [--set PATH=VALUE]...\n"
	        "        generate the channels' keys of N merchants (default 2: default, shop2)\n"
	        "        into DIR and write the full paycb configuration FILE\n"
	        "  conf --base CONF --out FILE [--set PATH=VALUE]...\n"
	        "  run -c CONF --scenario NAME [--keys DIR] [--orders N] [--concurrency C]\n"
	        "        [--seed S] [--compress F] [--wait S] [--rate R] [--lost PERMILLE]\n"
	        "        [--copies N] [--timeout-ms MS] [--ingest-only] [--progress]\n"
	        "        [--report FILE] [--api URL [--api-channels LIST] [--dropped PERMILLE]]\n"
	        "  junk -c CONF [--concurrency C] [--seconds S] [--report FILE]\n"
	        "  api -c CONF --port P [--keys DIR]   (the channel API side, WeChat Pay)\n\n"
	        "scenarios:");
	for (int i = 0; sim_scenario_name(i) != NULL; i++)
		fprintf(fp, " %s", sim_scenario_name(i));
	fprintf(fp, "\n\n--set values are libconfig syntax (18480, [1, 2], true, \"x\") or a bare "
	            "string.\n--compress F: channel seconds per real second (default 60: a "
	            "channel minute takes 1 s).\n--keys defaults to the directory 'keys' beside "
	            "CONF. See docs/simulator.md.\n");
}

/* cmd_keys - `keys`: key files for every merchant, then the configuration naming them. */
static int
cmd_keys(int argc, char **argv)
{
	static const struct option lo[] = {{"out", 1, NULL, 'o'},  {"conf", 1, NULL, 'c'},
	                                   {"base", 1, NULL, 'b'}, {"merchants", 1, NULL, 'm'},
	                                   {"set", 1, NULL, 's'},  {"api", 1, NULL, 'a'},
	                                   {NULL, 0, NULL, 0}};
	const char *out = NULL, *conf = NULL, *base = NULL, *api = NULL;
	char *sets[SIM_MAX_SETS], err[4096];
	struct sim_mfiles *f = NULL;
	int nm = 2, nsets = 0, opt, rc = EXIT_USAGE;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 'c':
			conf = optarg;
			break;
		case 'b':
			base = optarg;
			break;
		case 'm':
			nm = atoi(optarg);
			break;
		case 's':
			if (nsets < SIM_MAX_SETS)
				sets[nsets++] = optarg;
			break;
		case 'a':
			api = optarg;
			break;
		default:
			goto done;
		}
	}
	if (out == NULL || conf == NULL || nm < 1 || nm > 50 || optind != argc) {
		fprintf(stderr, "usage: paycb-sim keys --out DIR --conf FILE [--base CONF] "
		                "[--merchants N] [--api URL] [--set PATH=VALUE]...\n");
		goto done;
	}
	rc = EXIT_SOFTWARE;
	if ((f = calloc((size_t)nm, sizeof(*f))) == NULL)
		goto done;
	for (int i = 0; i < nm; i++) {
		char id[32];

		if (i == 0)
			snprintf(id, sizeof(id), "default");
		else
			snprintf(id, sizeof(id), "shop%d", i + 1);
		if (sim_keys_make(out, id, i, &f[i], err, sizeof(err)) != 0) {
			fprintf(stderr, "paycb-sim keys: %s\n", err);
			goto done;
		}
		/* The channel API paycb-reconciler calls: the simulator's (`api`). */
		if (api != NULL)
			sim_mfiles_api(&f[i], api);
	}
	if (sim_conf_write(base, conf, f, nm, sets, nsets, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim keys: %s\n", err);
		rc = EXIT_CONFIG;
		goto done;
	}
	printf("paycb-sim keys: %d merchants' keys in %s (private keys 0600, kept by the "
	       "simulator); configuration %s\n",
	       nm, out, conf);
	rc = 0;
done:
	free(f);
	return rc;
}

/* cmd_conf - `conf`: the base configuration with overrides, merchants kept. */
static int
cmd_conf(int argc, char **argv)
{
	static const struct option lo[] = {{"out", 1, NULL, 'o'},
	                                   {"base", 1, NULL, 'b'},
	                                   {"set", 1, NULL, 's'},
	                                   {NULL, 0, NULL, 0}};
	const char *out = NULL, *base = NULL;
	char *sets[SIM_MAX_SETS], err[4096];
	int nsets = 0, opt;

	while ((opt = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (opt) {
		case 'o':
			out = optarg;
			break;
		case 'b':
			base = optarg;
			break;
		case 's':
			if (nsets < SIM_MAX_SETS)
				sets[nsets++] = optarg;
			break;
		default:
			return EXIT_USAGE;
		}
	}
	if (out == NULL || base == NULL || optind != argc) {
		fprintf(stderr,
		        "usage: paycb-sim conf --base CONF --out FILE [--set PATH=VALUE]...\n");
		return EXIT_USAGE;
	}
	if (sim_conf_write(base, out, NULL, 0, sets, nsets, err, sizeof(err)) != 0) {
		fprintf(stderr, "paycb-sim conf: %s\n", err);
		return EXIT_CONFIG;
	}
	return 0;
}

/* number - parses a whole decimal number in [lo, hi] or fails the option. */
static int
number(const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	long long v = strtoll(s, &end, 10);

	if (*s == '\0' || *end != '\0' || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

/* The options of `run` that take a bounded whole number into an int of struct sim_opts. */
static const struct int_opt {
	int opt;
	long long lo, hi;
	size_t off;
} int_opts[] = {
    {'n', 1, 10000000, offsetof(struct sim_opts, orders)},
    {'C', 1, 4096, offsetof(struct sim_opts, concurrency)},
    {'w', 1, 86400, offsetof(struct sim_opts, wait_s)},
    {'r', 0, 1000000, offsetof(struct sim_opts, rate)},
    {'l', 0, 1000, offsetof(struct sim_opts, lost_permille)},
    {'y', 1, 10000, offsetof(struct sim_opts, copies)},
    {'t', 100, 600000, offsetof(struct sim_opts, timeout_ms)},
    {'D', 0, 1000, offsetof(struct sim_opts, dropped_permille)},
};

/* run_opt - one option of `run` into o; returns non-zero when its value is bad. */
static int
run_opt(struct sim_opts *o, int opt, const char *arg)
{
	long long v = 0;
	int bad = 0;

	for (size_t i = 0; i < sizeof(int_opts) / sizeof(int_opts[0]); i++) {
		int *field = (int *)(void *)((char *)o + int_opts[i].off);

		if (int_opts[i].opt != opt)
			continue;
		if (number(arg, int_opts[i].lo, int_opts[i].hi, &v) != 0)
			return -1;
		*field = (int)v;
		return 0;
	}
	switch (opt) {
	case 'c':
		o->conf = arg;
		break;
	case 'S':
		o->scenario = arg;
		break;
	case 'k':
		o->keys_dir = arg;
		break;
	case 'e':
		bad = number(arg, 0, 1LL << 62, &v);
		o->seed = (uint64_t)v;
		break;
	case 'x':
		bad = number(arg, 1, 100000, &v);
		o->compress = v;
		break;
	case 'i':
		o->ingest_only = 1;
		break;
	case 'p':
		o->progress = 1;
		break;
	case 'R':
		o->report = arg;
		break;
	case 'A':
		o->api = arg;
		break;
	case 'H':
		bad = sim_api_channels(o, arg);
		break;
	default:
		bad = 1;
		break;
	}
	return bad;
}

static int
cmd_run(int argc, char **argv)
{
	static const struct option lo[] = {
	    {"scenario", 1, NULL, 'S'},   {"keys", 1, NULL, 'k'},
	    {"orders", 1, NULL, 'n'},     {"concurrency", 1, NULL, 'C'},
	    {"seed", 1, NULL, 'e'},       {"compress", 1, NULL, 'x'},
	    {"wait", 1, NULL, 'w'},       {"rate", 1, NULL, 'r'},
	    {"lost", 1, NULL, 'l'},       {"copies", 1, NULL, 'y'},
	    {"timeout-ms", 1, NULL, 't'}, {"ingest-only", 0, NULL, 'i'},
	    {"progress", 0, NULL, 'p'},   {"report", 1, NULL, 'R'},
	    {"api", 1, NULL, 'A'},        {"api-channels", 1, NULL, 'H'},
	    {"dropped", 1, NULL, 'D'},    {NULL, 0, NULL, 0}};
	struct sim_opts o = {.conf = getenv("PAYCB_CONF"),
	                     .orders = 100,
	                     .concurrency = 16,
	                     .copies = 1000,
	                     .seed = 1,
	                     .compress = 60,
	                     .wait_s = 120,
	                     .timeout_ms = 10000,
	                     .lost_permille = -1,
	                     .max_mismatches = 50};
	int opt, bad = 0;

	/* The channels `paycb-sim api` serves, all three unless --api-channels says otherwise. */
	for (int ch = 0; ch < SIM_NCH; ch++)
		o.api_ch[ch] = 1;
	while ((opt = getopt_long(argc, argv, "c:", lo, NULL)) != -1)
		bad |= run_opt(&o, opt, optarg);
	if (bad || o.conf == NULL || o.scenario == NULL || optind != argc ||
	    (o.dropped_permille > 0 && o.api == NULL)) {
		fprintf(stderr, "paycb-sim run: need -c CONF and --scenario NAME; bad or missing "
		                "option (see paycb-sim --help)\n");
		return EXIT_USAGE;
	}
	/* Lost acknowledgements are part of the mixed demo; elsewhere only when asked for. */
	if (o.lost_permille < 0)
		o.lost_permille = strcmp(o.scenario, "mixed") == 0 ? 20 : 0;
	if (o.report != NULL)
		remove(o.report);
	return sim_run(&o);
}

int
main(int argc, char **argv)
{
	static const struct tool_cmd cmds[] = {
	    {"keys", cmd_keys},      {"conf", cmd_conf},    {"run", cmd_run},
	    {"junk", sim_junk_main}, {"api", sim_api_main},
	};

	log_init("paycb-sim");
	/* Every tool reads the whole file, the channels' merchant settings too. */
	if (chan_conf_use() != 0)
		return EXIT_SOFTWARE;
	return tool_main("paycb-sim", cmds, (int)(sizeof(cmds) / sizeof(cmds[0])), usage, argc,
	                 argv);
}
