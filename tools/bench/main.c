/*
 * paycb-bench - the measurements `make bench` (tools/bench.sh) sets beside the pipeline's:
 *
 *   dbceiling  the database's own ceiling for ingest's INSERT, the processor's transaction,
 *              a whole payment, or an INSERT with its publish waited for, by a plain client
 *   drain      how fast the processors finish a backlog, from the rows' own done_at
 *
 * The load itself comes from paycb-sim, which plays the channels (run, junk). See
 * docs/bench.md. Exit codes: 0 measured, 1 the measurement did not finish (failed items, a
 * backlog not drained in time), 64 usage, 69 a service is unavailable, 70 an internal error,
 * 78 a configuration error.
 */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "chan_conf.h"
#include "daemon.h"
#include "log.h"
#include "tool.h"

static void
usage(FILE *fp)
{
	fprintf(fp, "usage: paycb-bench COMMAND [OPTIONS]\n\n"
	            "  dbceiling -c CONF [--shape reserve|process|payment|publish] "
	            "[--concurrency C]\n"
	            "        [--count N] [--report FILE]\n"
	            "  drain -c CONF (--mark | --after-id ID --count N) [--wait S] "
	            "[--report FILE]\n\n"
	            "CONF defaults to $PAYCB_CONF. See docs/bench.md.\n");
}

int
main(int argc, char **argv)
{
	static const struct tool_cmd cmds[] = {
	    {"dbceiling", bench_dbceiling_main},
	    {"drain", bench_drain_main},
	};

	log_init("paycb-bench");
	/* Every tool reads the whole file, the channels' merchant settings too. */
	if (chan_conf_use() != 0)
		return EXIT_SOFTWARE;
	return tool_main("paycb-bench", cmds, (int)(sizeof(cmds) / sizeof(cmds[0])), usage, argc,
	                 argv);
}
