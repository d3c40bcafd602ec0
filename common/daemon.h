/*
 * daemon - the skeleton every paycb program runs in.
 *
 * daemon_main() owns argv (-c FILE, -n, --help, --version), loads and validates the one
 * configuration file, sets up logging and signals, then calls the program's init, runs its
 * loop until a stop is asked for, and calls its drain. Signal handlers only set a flag.
 *
 * Exit codes: one mapping for every program, so that one mistake stops every unit the same
 * way (the systemd units say RestartPreventExitStatus=64 78: they are restarted after 69 and
 * 70 and stay stopped after 64 and 78, where a restart cannot help):
 *   0  after an orderly drain;
 *   64 EXIT_USAGE        a bad command line;
 *   78 EXIT_CONFIG       a setting, a key or secret file, a Kafka client setting, or the
 *                        database refusing the account (daemon_db_open_exit);
 *   69 EXIT_UNAVAILABLE  a listener that cannot bind, the database away for longer than the
 *                        program tolerates, messages Kafka did not take by the drain's end;
 *   70 EXIT_SOFTWARE     out of memory or threads, and Kafka's fatal idempotent-producer
 *                        error (a new producer starts with a clean sequence).
 */
#ifndef PAYCB_DAEMON_H
#define PAYCB_DAEMON_H

#include <signal.h>

#include "conf.h"
#include "db.h"

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
/* db_open's verdict at start-up as an exit code: 0 to go on (a database that is down is an
 * outage, and every statement reconnects first), EXIT_CONFIG when it refused (the password
 * file unreadable, the account or the database name refused). */
int daemon_db_open_exit(enum db_rc rc);
/* True once SIGTERM or SIGINT arrived. */
int daemon_stopping(void);

#endif
