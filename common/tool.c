/*
 * tool - the command dispatch shared by paycb's multi-command tools (see tool.h), so each
 * tool's main is its table of commands and its usage text.
 */
#include "tool.h"

#include <string.h>

#include "daemon.h"

#ifndef PAYCB_VERSION
#define PAYCB_VERSION "0.0.0"
#endif

int
tool_main(const char *prog, const struct tool_cmd *cmds, int ncmds, void (*usage)(FILE *), int argc,
          char **argv)
{
	const char *cmd = argc > 1 ? argv[1] : "";

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(cmd, "--version") == 0) {
		printf("%s %s\n", prog, PAYCB_VERSION);
		return 0;
	}
	for (int i = 0; i < ncmds; i++)
		if (strcmp(cmd, cmds[i].name) == 0) {
			/* The command sees its own options after the program name. */
			argv[1] = argv[0];
			return cmds[i].run(argc - 1, argv + 1);
		}
	usage(stderr);
	return EXIT_USAGE;
}
