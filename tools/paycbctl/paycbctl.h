/*
 * paycbctl - the SRE tool (docs/paycbctl.md): list, show, dead, unroutable, replay.
 *
 * It is not a daemon but reads the same configuration (-c) and reports errors the same way.
 * Read-only commands never print a raw body, only its length and SHA-256. Every replay, dry
 * run or not, leaves an audit_log row naming who, what, and the result.
 *
 * Exit codes: 0 done (including "nothing to do"), 1 some target failed or was not found,
 * 64 usage, 69 database or Kafka unavailable, 78 configuration error.
 */
#ifndef PAYCB_PAYCBCTL_H
#define PAYCB_PAYCBCTL_H

#include <stdio.h>

#include "cblog.h"
#include "conf.h"
#include "db.h"
#include "kq.h"

#define CTL_OK      0
#define CTL_FAILED  1
#define CTL_USAGE   64
#define CTL_UNAVAIL 69

struct ctl {
	const struct conf *cf;
	struct db db;
	struct kq_producer *kp; /* opened by the first replay */
	FILE *out;              /* results */
	FILE *err;              /* errors, "paycbctl: ..." */
	char actor[129];
};

/* paycbctl_util.c */
/*
 * Parses a UTC time: "YYYY-MM-DD", "YYYY-MM-DD HH:MM[:SS[.mmm]]" (or with 'T' and a trailing
 * 'Z'), "now", or an age such as "30m", "2h", "7d" (that long ago). Writes
 * "YYYY-MM-DD HH:MM:SS.mmm" into buf. Returns 0 or -1.
 */
int ctl_parse_time(const char *s, char *buf, size_t len);
/* Copies s for a terminal: control characters become '?', at most len-1 bytes. */
const char *ctl_clean(char *buf, size_t len, const char *s);
/* Writes an audit_log row. Returns the db result. */
enum db_rc ctl_audit(struct ctl *c, const char *action, const char *target, int dry_run,
                     const char *result);
/* Sets c->actor: override, else $SUDO_USER, else $USER, else uid:N. */
void ctl_set_actor(struct ctl *c, const char *override);
/*
 * Runs sql, one conditional UPDATE, and its audit_log row (action, target and the result:
 * done when one row changed, else not_done) in one transaction, and prints the result.
 * Returns CTL_OK when one row changed, else CTL_FAILED.
 */
int ctl_audited_update(struct ctl *c, const char *sql, const struct db_in *in, int nin,
                       const char *action, const char *target, const char *done,
                       const char *not_done);
const char *ctl_status_name(long long status);
/* Reports a failed query of what; returns CTL_UNAVAIL when a retry may work, else CTL_FAILED. */
int ctl_db_failed(struct ctl *c, const char *what, enum db_rc rc);
void ctl_error(struct ctl *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* paycbctl_list.c */
int ctl_cmd_list(struct ctl *c, int argc, char **argv);
int ctl_cmd_dead(struct ctl *c, int argc, char **argv);
int ctl_cmd_unroutable(struct ctl *c, int argc, char **argv);

/* paycbctl_show.c */
int ctl_cmd_show(struct ctl *c, int argc, char **argv);

/* paycbctl_replay.c */
int ctl_cmd_replay(struct ctl *c, int argc, char **argv);

/* paycbctl_refund.c: `refund approve ID...` (audited), `refund list`, `refund show ID`. */
int ctl_cmd_refund(struct ctl *c, int argc, char **argv);
/* paycbctl_order.c: `order close MERCHANT ORDER...` (audited). */
int ctl_cmd_order(struct ctl *c, int argc, char **argv);
/* paycbctl_reconcile.c: `reconcile --merchant M --from T --to T` (audited), [--wait]. */
int ctl_cmd_reconcile(struct ctl *c, int argc, char **argv);

#endif
