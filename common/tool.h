/*
 * tool - the command dispatch of paycb's multi-command tools (paycb-sim, paycb-bench): the
 * first argument names a command, --help and --version are answered alike by all, and each
 * command parses its own options after its name.
 */
#ifndef PAYCB_TOOL_H
#define PAYCB_TOOL_H

#include <stdio.h>

struct tool_cmd {
	const char *name;
	int (*run)(int argc, char **argv); /* argv[0] is the program, argv[1] the first option */
};

/*
 * Runs the command argv[1] names among the ncmds of cmds with stdout line-buffered (so
 * reports interleave with progress lines on stderr), answers --help/-h/help with usage on
 * stdout and --version with "prog VERSION". Returns the command's exit code, 0 for help and
 * version, or EXIT_USAGE with usage on stderr for anything else.
 */
int tool_main(const char *prog, const struct tool_cmd *cmds, int ncmds, void (*usage)(FILE *),
              int argc, char **argv);

#endif
