/*
 * processor - private interface of the processor daemon's modules.
 *
 * The processor turns callback ids read from Kafka (<prefix>.callbacks and the delay topics
 * <prefix>.callbacks.retry.<delay>s) into exactly-once order updates. A process runs
 * processor.threads workers; each has its own consumer in kafka.group_id and its own database
 * connection, and all share one idempotent producer (outbox relay and dead letters).
 *
 * Modules:
 *   processor_daemon.c   init / loop / drain for daemon_main(), the worker threads
 *   processor_core.c     the state without consumers; the in-process API (proc_open,
 *                        proc_apply, proc_close) that runs one message as the daemon does
 *   processor_consume.c  a worker's poll loop, the rebalance callback, pause/seek holds
 *   processor_handle.c   one message: route to pay or refund, log
 *   processor_open.c     the opening both transactions share (proc_tx_open: the callback
 *                        row's and the order's locks, the ordering guard)
 *   processor_pay.c      the payment transaction
 *   processor_refund.c   the refund transaction
 *   processor_decide.c   the state machine's decision: a rule table and pure functions
 *   processor_ledger.c   the refund ledger and the refund requests, read and written
 *   processor_outbox.c   order_events rows, written in the transaction
 *   processor_relay.c    the relay thread: publishes committed events, marks them sent
 *   processor_fail.c     recording a retryable failure, dead rows, alerts, dead letters
 */
#ifndef PAYCB_PROCESSOR_H
#define PAYCB_PROCESSOR_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <stdatomic.h>

#include "conf.h"
#include "db.h"
#include "kq.h"
#include "msg.h"
#include "processor_decide.h"

#define PROC_TOPIC_MAX   256
#define PROC_EVENTS_MAX  2
#define PROC_PAYLOAD_MAX 1536

/* Backoff of a message that could not be processed or recorded (database or broker down). */
#define PROC_BACKOFF_MIN_MS 200
#define PROC_BACKOFF_MAX_MS 5000
/* Longest wait for a delivery report of an outbox event or a dead letter. */
#define PROC_PUBLISH_WAIT_MS 10000

struct proc;
struct proc_relay;

/*
 * A partition this worker paused: its next message (offset) is redelivered once due_ms
 * (wall clock) has passed, by seeking back to it before resuming.
 */
struct proc_hold {
	char topic[PROC_TOPIC_MAX];
	int32_t partition;
	int64_t offset;
	long long due_ms;
};

/*
 * When this worker first saw the head message (offset) of a delay-topic partition that it
 * holds: the hold lasts until the message's timestamp plus the step's delay, but never more
 * than the delay from first_ms, so a message stamped in the future (a skewed clock) cannot
 * stop its partition for the skew.
 */
struct proc_seen {
	char topic[PROC_TOPIC_MAX];
	int32_t partition;
	int64_t offset;
	long long first_ms;
};

struct proc_worker {
	struct proc *p;
	int index;
	rd_kafka_t *rk;
	struct db db;
	pthread_t thread;
	int started;
	struct proc_hold *holds;
	int nholds, capholds;
	struct proc_seen *seen;
	int nseen, capseen;
	long long outage_since_ms; /* monotonic; 0 while the database answers */
	long long backoff_ms;
	/* Set while a batch's transaction is open: the per-message BEGIN and COMMIT are the
	 * batch's own (processor_handle.c, proc_handle_batch). */
	int batching;
	/*
	 * Whether this connection's server gives a multi-row INSERT consecutive ids (step
	 * ai_step; 0 = not guaranteed), as read for its session number ai_connects (db.connects):
	 * processor_outbox.c writes a payment's two events in one INSERT only then.
	 */
	unsigned long ai_connects;
	long long ai_step;
	/* The outcome of the last message proc_handle handled (a static string), for proc_apply. */
	const char *outcome;
};

struct proc {
	const struct conf *cf;
	struct kq_producer *prod;
	char topic_main[PROC_TOPIC_MAX];
	char topic_dlq[PROC_TOPIC_MAX];
	char topic_events[PROC_TOPIC_MAX];
	int nworkers;
	struct proc_worker *workers;
	struct proc_relay *relay;
	atomic_int stop;
	atomic_int exit_code; /* first worker's reason to stop the process, 0 = none */
};

/* What became of a message. */
enum proc_rc {
	PROC_DONE = 0,    /* applied, skipped, dead or failure recorded: store the offset */
	PROC_DB_DOWN,     /* the database could not be reached: hold, redeliver, store nothing */
	PROC_BROKER_DOWN, /* a dead letter could not be published: hold, redeliver */
};

/* How a transaction ended. */
enum proc_tx {
	TX_COMMITTED = 0, /* effects and the row's final state are committed */
	TX_FINAL,         /* the row was already done or dead: nothing was changed */
	TX_MISSING,       /* no such row */
	TX_RETRY,         /* a retryable failure (business reason or deadlock): rolled back */
	TX_DB_DOWN,       /* connection lost: rolled back or unknown; redeliver */
	TX_BROKER_DOWN,   /* the dead letter could not be published: rolled back */
	TX_MISMATCH, /* the row names another merchant or order than the message: rolled back */
	TX_DEFERRED, /* the ordering guard deferred the row (committed), or, in a batch,
	                would defer it (rolled back) */
};

/* An outbox row written by the transaction, relayed after the commit. */
struct proc_event {
	unsigned long long id;
	char payload[PROC_PAYLOAD_MAX];
};

/* The result of one transaction, for the log line and the work after the commit. */
struct proc_result {
	const char *outcome; /* paid, duplicate, paid_twice, paid_after_close, dead, ... */
	char reason[400];    /* a retryable failure's or a dead row's reason */
	char merchant[65];
	char order[129];
	char detail[160];       /* extra key=value text for the log line */
	int retry_count;        /* after recording a failure */
	const char *alert_kind; /* non-NULL when an alert was raised */
	char alert_detail[400];
	char row_merchant[65]; /* TX_MISMATCH: what the row names */
	char row_order[129];
	long long earlier, age_ms; /* TX_DEFERRED: the guard's measures */
	int nevents;
	struct proc_event events[PROC_EVENTS_MAX];
};

/* A callback-log row as the transactions read it. */
struct proc_row {
	enum cblog cblog;
	unsigned long long id;
	char merchant[65];
	char channel[17];
	char trade_no[161];     /* payments: channel trade number; refunds: refund number */
	char pay_trade_no[129]; /* refunds: the channel trade number of the payment, may be "" */
	char order[129];
	char amount[40];
	int cumulative;
	char currency[4];
	char chan_status[33]; /* refunds: the channel's refund status as stored */
	long long status;
	long long retry_count;
	char created_at[32];
	char now[32];
	long long earlier; /* the ordering guard: earlier pending callbacks of the order */
	long long age_ms;  /* since the row came in */
};

/* The order row as the transactions read it (locked FOR UPDATE). */
struct proc_order {
	unsigned long long id;
	char amount[40];
	char currency[4];
	char status[16];
	char channel[17];
	char trade_no[129];
	char refunded[40];
};

/* The refund ledger of an order as the refund transaction measured it (processor_ledger.c). */
struct proc_ledger_view {
	struct dec_ledger now, after;
	enum dec_entry entry;      /* this refund number's ledger row */
	int64_t entry_amount;      /* its amount */
	int64_t amount;            /* the notification's amount */
	int64_t before, paid;      /* the order's refunded amount and amount paid */
	enum dec_ledger_op op;     /* what to write */
	long long refunded_events; /* the order's order.refunded events so far */
};

/* A payment's refund request as read under its order's lock. id 0: none. */
struct proc_request {
	unsigned long long id;
	char status[16];
	char amount[40];
	char currency[4];
};

/* processor_core.c */
/*
 * The processor's state with nworkers workers, each with its database connection but no
 * consumer, the producer and the running outbox relay. Returns 0, or the exit code.
 */
int proc_core_new(const struct conf *cf, int nworkers, struct proc **out);
/* Frees what proc_core_new and the daemon built (consumers included) without draining. */
void proc_core_free(struct proc *p);
/*
 * The in-process API: a processor without consumers, for tests and tools. proc_open builds
 * one worker; proc_apply handles the callback message m exactly as the daemon's consumer
 * path does (proc_handle: ordering guard, transaction, outbox rows queued for the relay, the log
 * line) and sets *outcome, when outcome is not NULL, to what became of it ("paid",
 * "duplicate", "retry", "retry_stale", "skipped", "deferred", "row_missing",
 * "db_unavailable", ...). Where the daemon would store the message's offset only for
 * PROC_DONE, the caller decides what to do with any other code. proc_close relays what is
 * queued, flushes the producer and frees p; it returns how many events were left undelivered
 * (the retrier's outbox sweep sends them later).
 */
int proc_open(const struct conf *cf, struct proc **out);
enum proc_rc proc_apply(struct proc *p, const struct msg_callback *m, const char **outcome);
int proc_close(struct proc *p);

/* processor_daemon.c */
int proc_daemon_init(const struct conf *cf, void **state);
int proc_daemon_loop(void *state, long long *wait_ms);
int proc_daemon_drain(void *state);

/* processor_consume.c */
/* Stops every worker and makes the process exit with code; the first caller's code wins. */
void proc_request_exit(struct proc *p, int code);
/* Ends every worker's poll now, so that a stop is seen at once. */
void proc_wake_workers(struct proc *p);
/*
 * The longest a worker's poll waits when no hold is due sooner. Only an idle worker waits
 * this long: a message, a due hold or a stop ends the wait (docs/performance.md, "Kafka's
 * cost per payment and idle"); 100 ms woke every idle worker ten times a second.
 */
#define PROC_POLL_IDLE_MS 1000
void *proc_worker_main(void *arg);
void proc_rebalance(rd_kafka_t *rk, rd_kafka_resp_err_t err, rd_kafka_topic_partition_list_t *parts,
                    void *opaque);

/* processor_handle.c */
enum proc_rc proc_handle(struct proc_worker *w, const struct msg_callback *m);
/* The most messages of one partition applied in one transaction. */
#define PROC_BATCH_MAX 8
/*
 * Applies the n callback messages ms (of one partition, in order) in one transaction, each
 * with its own unchanged state machine, and after the commit logs and relays each as
 * proc_handle does. Returns 1 when all were applied (the caller stores their offsets), 0
 * when nothing was (a message that needs anything but a plain first application, any
 * failure: the transaction is rolled back). Then *at is the message that ended the batch,
 * which the caller handles alone while the messages before and after it may form batches
 * once more; it is 0 when the batch could not begin or its commit failed (then nothing is known
 * about any message, and the caller handles them from the first).
 */
int proc_handle_batch(struct proc_worker *w, const struct msg_callback *ms, int n, int *at);

/* processor_open.c */
/*
 * Begins the transaction of callback m, the same way for payments and refunds: locks its
 * row in the table m->cblog names, copies the row's merchant and order into r and locks the order.
 * Returns 1 with row and o filled when the caller is to go on (o->id 0: no such order, which the
 * decision table turns into a retry). Returns 0 with *tx set when the transaction has
 * ended already: a database error, a row already done or dead (TX_FINAL) or no such row
 * (TX_MISSING).
 */
int proc_tx_open(struct proc_worker *w, const struct msg_callback *m, struct proc_row *row,
                 struct proc_order *o, struct proc_result *r, enum proc_tx *tx);

/* processor_pay.c */
enum proc_tx proc_pay(struct proc_worker *w, const struct msg_callback *m, struct proc_result *r);
/*
 * A conditional UPDATE of the order locked by proc_tx_open, judged by affected rows. Returns 1
 * when it changed the one row; else 0 with *tx set: the statement failed, or the order was
 * not in the state the decision read (rolled back, a retryable failure).
 */
int proc_order_change(struct proc_worker *w, const char *sql, const struct db_in *in, int nin,
                      struct proc_result *r, enum proc_tx *tx);

/* processor_refund.c */
enum proc_tx proc_refund(struct proc_worker *w, const struct msg_callback *m,
                         struct proc_result *r);

/* processor_outbox.c */
/* One event for proc_outbox_add_all: the arguments of proc_outbox_add. */
struct proc_event_spec {
	const char *event_type, *ref, *amount, *currency, *trade_no;
};
/*
 * Writes n events (at most PROC_EVENTS_MAX) in the open transaction, in one INSERT when the
 * server gives it consecutive ids, else one by one; existing rows are kept as proc_outbox_add
 * keeps them.
 */
enum db_rc proc_outbox_add_all(struct proc_worker *w, const struct proc_row *row,
                               const struct proc_event_spec *ev, int n, struct proc_result *r);
/* ref, when not NULL, tells apart events of one type for one order (a refund number). */
enum db_rc proc_outbox_add(struct proc_worker *w, const struct proc_row *row,
                           const char *event_type, const char *ref, const char *amount,
                           const char *currency, const char *trade_no, struct proc_result *r);

/* processor_ledger.c: each returns DB_DUPLICATE when a row changed under the lock */
enum db_rc proc_ledger_measure(struct proc_worker *w, const struct proc_row *row,
                               const struct proc_order *o, enum dec_note note,
                               struct proc_ledger_view *v, enum dec_money *money);
enum db_rc proc_ledger_write(struct proc_worker *w, const struct proc_row *row,
                             const struct proc_ledger_view *v);
enum db_rc proc_request_measure(struct proc_worker *w, const struct proc_row *row,
                                struct proc_request *q, enum dec_money *money);
enum db_rc proc_request_settle(struct proc_worker *w, const struct proc_row *row,
                               const struct proc_request *q);
enum db_rc proc_request_record_early(struct proc_worker *w, const struct proc_row *row);
enum db_rc proc_request_reopen(struct proc_worker *w, const struct proc_request *q);

/* processor_relay.c */
int proc_relay_start(struct proc *p);
/* Relays what is queued, then stops the thread. */
void proc_relay_stop(struct proc *p);
/* Queues the committed events of r for the relay; waits while the queue is full. */
void proc_outbox_relay(struct proc_worker *w, const char *cbid, struct proc_result *r);

/* processor_fail.c */
enum proc_tx proc_tx_error(struct proc_worker *w, enum db_rc rc, const char *what,
                           struct proc_result *r);
/* Rolls back and returns TX_RETRY, reason the failure's reason. */
enum proc_tx proc_tx_retry(struct proc_worker *w, const char *reason, struct proc_result *r);
void proc_rollback(struct db *db);
/* BEGIN and COMMIT of one message's transaction; no-ops inside a batch's transaction. */
enum db_rc proc_begin(struct proc_worker *w);
enum db_rc proc_commit(struct proc_worker *w);
/* proc_alert_insert - one alerts row naming callback_id, in the worker's transaction. */
enum db_rc proc_alert_insert(struct proc_worker *w, unsigned long long callback_id,
                             const char *merchant, const char *order, const char *kind,
                             const char *detail);
enum db_rc proc_alert(struct proc_worker *w, const struct proc_row *row, const char *kind,
                      const char *detail, struct proc_result *r);
enum proc_tx proc_dead(struct proc_worker *w, const struct proc_row *row, const char *reason,
                       const char *detail, struct proc_result *r);
/* Commits the transaction a final UPDATE ended: TX_COMMITTED, or the commit's failure. */
enum proc_tx proc_tx_commit(struct proc_worker *w, struct proc_result *r);
enum proc_tx proc_mark_done(struct proc_worker *w, const struct proc_row *row, const char *outcome,
                            struct proc_result *r);
/*
 * Records a retryable failure of attempt on the row, unless one was recorded for that
 * attempt already (*counted = 0: this message was a second copy of it).
 */
enum db_rc proc_record_failure(struct proc_worker *w, enum cblog lg, unsigned long long id,
                               int attempt, const char *reason, struct proc_result *r,
                               int *counted);
int proc_amount_parse(const char *s, long long *minor);

/* processor_metrics.c */
void proc_metrics_init(void);
void proc_metrics_outcome(const char *outcome, long long elapsed_ms);
int proc_admin_start(struct proc *p);
void proc_admin_stop(void);

#endif
