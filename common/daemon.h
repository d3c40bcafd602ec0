/*
 * daemon - the skeleton every paycb program runs in.
 *
 * daemon_main() owns argv (-c FILE, -n, --help, --version), loads and validates the one
 * configuration file, sets up logging and signals, then calls the program's init, runs its
 * loop until a stop is asked for, and calls its drain.
 *
 * The skeleton owns the wait: the loop never sleeps, it says how long the skeleton is to wait
 * before calling it again, and the skeleton waits in one place, in poll() on an eventfd.
 * Signal handlers only set a flag and write that eventfd, so SIGTERM, SIGINT and SIGHUP end
 * the wait at once, whichever thread took them; a program's own threads end it early with
 * daemon_wake() (a worker asking the process to exit, Kafka's fatal producer error). An idle
 * program therefore wakes only when it has something timed to do.
 *
 * SIGHUP reloads: between two loop calls the skeleton reads the file again and validates it
 * whole, exactly as at start (every setting, every secret file's mode), then hands it to the
 * program's reload, which loads its keys into a new set and swaps it in only when all of them
 * loaded. Anything wrong keeps the running set: one log line names the file, the line or the
 * key file and why. The settings a program cannot change while it runs (conf_reloadable says
 * which it can) are named in the line as needs_restart and keep their running values.
 * Metrics: paycb_config_reload_total{result="ok|failed"},
 * paycb_config_last_reload_successful and paycb_config_last_reload_success_timestamp_seconds.
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

/* The loop's *wait_ms for "until a signal or daemon_wake()". */
#define DAEMON_WAIT_FOREVER (-1LL)

/*
 * A daemon's operations are named <prefix>_daemon_init, _loop, _drain and _reload
 * (ingest_daemon_init, proc_daemon_loop, retrier_daemon_drain, recon_daemon_reload): the
 * word "daemon" says the skeleton calls them, and keeps them apart from the in-process
 * entry points the tests drive (proc_open, retrier_open/cycle/close).
 */
struct daemon_ops {
	const char *name; /* program name for --help and logs */
	const char *summary;
	unsigned prog; /* PROG_* mask for config checks */
	/* Hands the configuration the channels whose merchant settings it takes (conf_channels;
	 * chan_conf_use for every program that links chan/), before the file is read: 0 or -1. */
	int (*channels)(void);
	/* Builds the program's state; returns 0 or an exit code. */
	int (*init)(const struct conf *cf, void **state);
	/* Does one bounded piece of work without waiting; returns 0 to go on, with *wait_ms
	 * set to how long the skeleton waits before the next call (0: at once;
	 * DAEMON_WAIT_FOREVER, the value it holds on entry: until a signal or daemon_wake()),
	 * or an exit code to stop with. A wait can end early, so a call may find nothing due. */
	int (*loop)(void *state, long long *wait_ms);
	/* Stops accepting, finishes in-flight work, flushes; returns the exit code. */
	int (*drain)(void *state);
	/*
	 * Optional (NULL: a reload changes the log level only). On the loop's thread, between
	 * two loop calls: takes what conf_reloadable allows from nc, a configuration already
	 * validated whole. Returns 0 once the new set is swapped in, and then owns nc (the
	 * program frees it with conf_free and free when nothing uses it any more); or -1 with
	 * err naming the file and the problem, the running set untouched and nc the skeleton's.
	 */
	int (*reload)(void *state, struct conf *nc, char *err, size_t errlen);
};

/*
 * DAEMON_MAIN - a daemon's whole main(): the skeleton with the ops <prefix>_daemon_init,
 * _loop and _drain, reload (NULL when the program has none) and channels_fn (chan_conf_use).
 * The pasted names hold every daemon to the one naming pattern.
 */
#define DAEMON_MAIN(prefix, prog_name, text, prog_mask, reload_fn, channels_fn)                    \
	static const struct daemon_ops prefix##_daemon_ops = {                                     \
	    .name = (prog_name),                                                                   \
	    .summary = (text),                                                                     \
	    .prog = (prog_mask),                                                                   \
	    .channels = (channels_fn),                                                             \
	    .init = prefix##_daemon_init,                                                          \
	    .loop = prefix##_daemon_loop,                                                          \
	    .drain = prefix##_daemon_drain,                                                        \
	    .reload = (reload_fn),                                                                 \
	};                                                                                         \
	int main(int argc, char **argv)                                                            \
	{                                                                                          \
		return daemon_main(argc, argv, &prefix##_daemon_ops);                              \
	}

extern volatile sig_atomic_t daemon_stop_requested;
extern volatile sig_atomic_t daemon_reload_requested;

int daemon_main(int argc, char **argv, const struct daemon_ops *ops);
/* db_open's verdict at start-up as an exit code: 0 to go on (a database that is down is an
 * outage, and every statement reconnects first), EXIT_CONFIG when it refused (the password
 * file unreadable, the account or the database name refused). */
int daemon_db_open_exit(enum db_rc rc);
/* True once SIGTERM or SIGINT arrived. */
int daemon_stopping(void);
/* Ends the skeleton's current or next wait, so that the loop runs at once. Any thread, and
 * async-signal-safe (one write); a no-op in a program that does not run daemon_main. */
void daemon_wake(void);

#endif
