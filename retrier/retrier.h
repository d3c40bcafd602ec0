/*
 * retrier - the one scheduler of paycb's retries (docs/retrier.md).
 *
 * Every cycle the retrier checks for stuck rows, leases the due rows of both callback logs
 * and republishes them on their ladder step's delay topic (or the main topic for a lost
 * first attempt), makes rows past the last step dead and dead-letters them, relays the
 * order_events outbox rows the processor left unsent, clears the bodies of old done rows,
 * and refreshes its gauges. Each row is claimed by one conditional UPDATE, so any number of
 * retriers can run side by side; each publish waits for its delivery report.
 *
 * Modules: retrier_daemon.c (state, cycle, daemon callbacks), retrier_sweep.c (due rows),
 * retrier_dlq.c (dead rows), retrier_publish.c (confirmed publishing in batches),
 * retrier_outbox.c, retrier_purge.c, retrier_alarm.c (stuck rows, alerts, gauges),
 * retrier_lag.c (the processors' lag) and retrier_metrics.c (the metrics every module counts
 * into). The two callback logs, which index every per-table SQL array, are enum cblog
 * (cblog.h).
 */
#ifndef PAYCB_RETRIER_H
#define PAYCB_RETRIER_H

#include <stdatomic.h>
#include <stddef.h>

#include "cblog.h"
#include "cfg.h"
#include "conf.h"
#include "db.h"
#include "kq.h"

/* One confirmed publish (retrier_publish, through kq_publish_batch). */
struct retrier_job {
	const char *topic;
	char key[200];
	size_t klen;
	char *val; /* owned by the caller */
	size_t vlen;
	int rc; /* enum kq_outcome: delivered, failed, or unknown (no report by the deadline) */
	char err[256];
};

/* What one cycle did, summed over both logs. */
struct retrier_counts {
	long long due;         /* due pending rows seen */
	long long leased;      /* leases won */
	long long lost_race;   /* leases another retrier (or the processor) won */
	long long republished; /* confirmed publishes of due rows */
	long long failed;      /* publishes that failed; their leases expire */
	long long dead;        /* rows this retrier made dead */
	long long dlq_sent;    /* dead letters confirmed */
	long long outbox_sent; /* outbox rows relayed */
	long long purged;      /* bodies cleared */
	long long stuck;       /* pending rows overdue by more than stuck_after_s */
	long long old;         /* pending rows created longer ago than the end-to-end threshold */
	long long old_alerted; /* of them, alerted by this cycle */
	long long storms;      /* rows this cycle republished past retrier.max_republish */
};

struct admin;
struct retrier_lag;

struct retrier {
	const struct conf *cf;
	struct db db;
	struct kq_producer *kp;
	struct admin *admin;
	struct retrier_lag *lag; /* the lag measurement (retrier_lag.c), made on first use */
	char topic_main[256], topic_dlq[256], topic_events[256];
	char topic_step[CFG_LIST_MAX + 1][256]; /* 1-based */
	long long next_cycle_ms;
	unsigned int rng;
	atomic_int ready; /* the last cycle reached the database */
	/* Stuck-row alarm: whether it is up and when it last raised an alert. */
	int alarm_up;
	long long alarm_alert_ms;
	/* Purge cursors: done_at up to which bodies were cleared, per log. */
	char purge_cursor[CBLOG_N][32];
	struct retrier_counts last; /* the last cycle's counts, for tests and logs */
};

/* retrier_daemon.c */
int retrier_open(const struct conf *cf, struct retrier **out, char *err, size_t errlen);
/* Flushes the producer; returns the number of messages left undelivered. */
int retrier_close(struct retrier *r);
/* One full cycle. *more is set when a batch was full (run the next cycle at once). Returns 0,
 * or -1 when a step failed (logged; the next cycle tries again). */
int retrier_cycle(struct retrier *r, int *more);
int retrier_daemon_init(const struct conf *cf, void **state);
int retrier_daemon_loop(void *state, long long *wait_ms);
int retrier_daemon_drain(void *state);

/* retrier_sweep.c: leases and republishes due rows of one log. */
extern const char *const retrier_sql_due[CBLOG_N];
int retrier_sweep(struct retrier *r, enum cblog lg, struct retrier_counts *c, int *full);

/* retrier_dlq.c */
/* Makes a due row past the last step dead, with its alert, in one transaction. Returns 1 when
 * this retrier made it dead, 0 when another won, -1 on a database error. */
int retrier_make_dead(struct retrier *r, enum cblog lg, unsigned long long id, int retry_count,
                      const char *next_retry_at, const char *merchant, const char *order,
                      const char *last_error);
/* Publishes dead rows whose dead letter is not yet confirmed. */
int retrier_dlq_sweep(struct retrier *r, enum cblog lg, struct retrier_counts *c, int *full);

/* retrier_publish.c: publishes jobs as one batch; returns how many were delivered. */
int retrier_publish(struct retrier *r, struct retrier_job *jobs, int n);
/* A lease longer than a publish phase can take (delivery timeout + its slack + the lease
 * margin), for jobs that must not be sent by two retriers at once. */
long long retrier_publish_lease_s(const struct retrier *r);

/* retrier_outbox.c */
int retrier_outbox_sweep(struct retrier *r, struct retrier_counts *c, int *full);

/* retrier_purge.c */
int retrier_purge(struct retrier *r, enum cblog lg, struct retrier_counts *c);
/* The done_at up to which log lg's bodies were cleared (the start of time before the first). */
const char *retrier_purge_cursor(struct retrier *r, enum cblog lg);

/* retrier_probe.c: which sweeps of a cycle have work, and the gauges, in one statement. */
struct retrier_probe {
	int due[CBLOG_N];   /* pending rows are due: the sweep */
	int stuck[CBLOG_N]; /* due for longer than stuck_after_s: the alarm counts them */
	int old[CBLOG_N];   /* pending rows created before the end-to-end threshold */
	int dlq[CBLOG_N];   /* a dead letter is due */
	int purge[CBLOG_N]; /* a done body is past purge_after_s beyond the cursor */
	int outbox;         /* an outbox row is unsent for longer than outbox_after_s */
	long long pending[CBLOG_N][CFG_LIST_MAX + 2], storms[CBLOG_N];
	long long dead[CBLOG_N], unsent[CBLOG_N];
	int last; /* the last pending step counted: ladder steps + 1 */
};
extern const char *const retrier_sql_probe;
/* Runs the probe, fills *p and sets the gauges it carries; 0, or -1 (logged). */
int retrier_probe(struct retrier *r, struct retrier_probe *p);
/* The probe for its gauges only: dead rows, unsent dead letters, pending rows per step. */
int retrier_gauges(struct retrier *r);

/* retrier_alarm.c */
int retrier_alert(struct db *db, const char *kind, unsigned long long id, const char *merchant,
                  const char *order, const char *detail);
int retrier_alarm_check(struct retrier *r, struct retrier_counts *c);
/* The same for the logs whose flag is set; the others' gauges are set to 0 without a query
 * (the probe saw no stuck row in them). */
int retrier_alarm_check_logs(struct retrier *r, struct retrier_counts *c, const int logs[CBLOG_N]);
/* The end-to-end threshold: retrier.stuck_after_s, raised to the ladder's total plus every
 * lease and two sweeps when that is longer (a healthy row may take that long). */
long long retrier_old_after_s(const struct conf *cf);
/* The end-to-end alarm: counts pending rows older than the threshold (gauges) and alerts
 * each such row once. */
int retrier_old_check(struct retrier *r, struct retrier_counts *c);
/* The same for the logs whose flag is set; the others have no old row (gauge 0). */
int retrier_old_check_logs(struct retrier *r, struct retrier_counts *c, const int logs[CBLOG_N]);

/* retrier_lag.c: the processors' lag on the main and every delay topic (docs/retrier.md). */
/* Measures now; returns 0, or -1 when it could not (paycb_consumer_lag_check_ok 0). */
int retrier_lag_check(struct retrier *r);
/* Measures when retrier.lag_interval_s has passed since the last time; 1 when it did. */
int retrier_lag_due(struct retrier *r);
/* The last measurement of one topic; 0, or -1 when the topic is not measured. */
int retrier_lag_topic(const struct retrier *r, const char *topic, long long *lag,
                      long long *due_lag, long long *overdue_ms);
void retrier_lag_free(struct retrier *r);

/* retrier_metrics.c: the metrics, created once per process by retrier_metrics_init. */
struct metric;
struct retrier_metrics {
	struct metric *republished[CBLOG_N][CFG_LIST_MAX + 1]; /* per step; 0 = main topic */
	struct metric *lost_race, *publish_failed, *dead, *dlq_sent, *outbox_sent, *purged;
	struct metric *pending[CBLOG_N][CFG_LIST_MAX + 2]; /* per retry_count 0..n+1 */
	struct metric *dead_rows[CBLOG_N], *dlq_unsent[CBLOG_N], *stuck[CBLOG_N];
	struct metric *stuck_oldest_s, *sweep_us, *cycle_errors;
	struct metric *old[CBLOG_N], *old_oldest_s, *old_after_s, *storm_rows[CBLOG_N], *storms;
	struct metric *lag[CFG_LIST_MAX + 1], *due_lag[CFG_LIST_MAX + 1];
	struct metric *head_overdue_s[CFG_LIST_MAX + 1], *lag_ok;
};
extern struct retrier_metrics retrier_mx;
void retrier_metrics_init(const struct retrier *r, int steps);

#endif
