/*
 * daemon - the skeleton every paycb program runs in.
 *
 * daemon_main() owns argv (-c FILE, -n, --help, --version), loads and validates the one
 * configuration file, sets up logging and signals, then calls the program's init, runs its
 * loop until a stop is asked for, and calls its drain. Signal handlers only set a flag.
 *
 * Exit codes: 0 after an orderly drain; 64 usage error; 78 configuration error; 69 a service
 * (database, Kafka) stayed unavailable; 70 an internal error.
 */
#ifndef PAYCB_DAEMON_H
#define PAYCB_DAEMON_H

#include <signal.h>

#include "conf.h"

#define EXIT_USAGE       64
#define EXIT_UNAVAILABLE 69
#define EXIT_SOFTWARE    70
#define EXIT_CONFIG      78

struct daemon_ops {
	const char *name; /* program name for --help and logs */
	const char *summary;
	unsigned proc; /* PROC_* mask for config checks */
	/* Builds the program's state; returns 0 or an exit code. */
	int (*init)(const struct conf *cf, void **state);
	/* Does one bounded piece of work (at most ~100 ms of waiting); returns 0 to go on,
	 * or an exit code to stop with. */
	int (*loop)(void *state);
	/* Stops accepting, finishes in-flight work, flushes; returns the exit code. */
	int (*drain)(void *state);
};

extern volatile sig_atomic_t daemon_stop_requested;

int daemon_main(int argc, char **argv, const struct daemon_ops *ops);
/* True once SIGTERM or SIGINT arrived. */
int daemon_stopping(void);

#endif
