/*
 * ingest - private interfaces of the ingest daemon: the merchants' loaded keys, the database
 * connection pool, the request flow (verify, reserve, publish, answer) and the HTTP front.
 */
#ifndef PAYCB_INGEST_H
#define PAYCB_INGEST_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "chan_notify.h"
#include "conf.h"
#include "db.h"
#include "kq.h"
#include "metrics.h"

/*
 * A channel is its index in chan_notify_table (chan/chan_notify.h), which also indexes the
 * metrics; keys[ch] is what that channel's keys_load made, NULL where the merchant does not
 * use the channel.
 */
struct ingest_merchant {
	const struct conf_merchant *cm;
	void *keys[CHAN_NOTIFY_MAX];
};

/*
 * One generation of every merchant's keys (ingest_merchants.c): immutable once built, held by
 * each request that started with it, freed by the last one after a reload replaced it.
 */
struct ingest_keyset {
	atomic_int refs;
	struct conf *owned; /* the reloaded file its merchants point into; NULL at start-up */
	struct ingest_merchant *merchants;
	int nmerchants;
};

struct ingest_pool {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct db *conns;
	int *free_list;
	int nfree, size;
};

/* Reservations in flight, by request (ingest_flight.c). */
#define INGEST_FLIGHT_BUCKETS 1024
/* Longest flight key; a request whose signature headers are longer runs alone. */
#define INGEST_FLIGHT_KEY_MAX 4096
struct ingest_flight_entry;
struct ingest_flight {
	pthread_mutex_t mu;
	struct ingest_flight_entry *buckets[INGEST_FLIGHT_BUCKETS];
};

/* What a flight's leader hands to the copies parked on it. */
struct ingest_landing {
	int stored; /* 1: the row exists; 0: every parked copy runs the flow by itself */
	/* Arrival seconds (time(NULL)) for which the leader's verdict is also the copy's. */
	int64_t valid_from, valid_to;
	const char *trade, *order; /* log-safe, for the copies' log lines */
};

struct ingest;
/* One request waiting for a worker (ingest_work.c); run is called on a worker thread. */
struct ingest_job {
	struct ingest_job *next;
	void (*run)(struct ingest *in, struct ingest_job *j);
	/* For a copy parked on a flight: called once by the leader when its flight lands (l NULL
	 * when it landed without a reservation). */
	void (*settle)(struct ingest *in, struct ingest_job *j, const struct ingest_landing *l);
};
/* One worker thread: its own condition variable, and the job handed to it while it was idle. */
struct ingest_worker {
	struct ingest *in;
	pthread_t thread;
	pthread_cond_t cv;
	struct ingest_job *job;
	struct ingest_worker *next_idle;
};
struct ingest_work {
	pthread_mutex_t mu;
	struct ingest_job *head, *tail; /* jobs that found no idle worker */
	struct ingest_worker *idle;     /* idle workers, the most recently idle first */
	int queued, stop;
	struct ingest_worker *workers;
	int nthreads;
};

/* Outcomes of one request, for metrics and the answer. */
enum outcome {
	OUT_STORED = 0,  /* verified, reserved, published */
	OUT_UNPUBLISHED, /* verified, reserved, publish failed or timed out: the retrier recovers */
	OUT_DUPLICATE,   /* the unique key said we already have it */
	OUT_IGNORED,     /* verified, not a payment or refund: acknowledged, not stored */
	OUT_REJECTED,    /* verification failed: nothing stored */
	OUT_DB_ERROR,    /* could not reserve: the channel will push again */
	OUT_BUSY,        /* over a concurrency limit: 503 */
	OUT_UNROUTABLE,  /* verified, not this merchant's to apply: kept in unroutable, acked */
	OUT_COUNT
};

struct ingest_metrics {
	struct metric *requests[CHAN_NOTIFY_MAX][OUT_COUNT];
	struct metric *verify_fail[CHAN_NOTIFY_MAX][VERR_COUNT];
	struct metric *reserve_lat, *publish_lat, *request_lat;
	struct metric *publish_failures, *inflight, *unverified, *queued, *reading, *http_errors[5];
	struct metric *coalesced, *coalescing;
};

struct ingest {
	const struct conf *cf;
	pthread_mutex_t keys_mu; /* guards the pointer; the set itself never changes */
	struct ingest_keyset *keys;
	struct ingest_pool pool;
	struct ingest_flight flight;
	struct ingest_work work;
	struct kq_producer *kp;
	char topic[256];
	atomic_int inflight, unverified, reading;
	struct ingest_metrics m;
	struct MHD_Daemon *http;
	struct admin *admin;
	struct db ready_db; /* /readyz's own connection (main.c), never one of the pool's */
	int ready_db_open;
};

/* One request, as the HTTP front hands it to the flow. */
struct ingest_req {
	int ch; /* the channel: its index in chan_notify_table */
	const struct ingest_merchant *im;
	const struct http_hdr *hdrs;
	size_t nhdrs;
	const uint8_t *body;
	size_t len;
	const char *sha;                    /* the body's SHA-256, hex */
	struct ingest_flight_entry *flight; /* set when this request leads a flight */
};

/*
 * The answer. body points to static or owned text. A stored notification's answer waits for
 * its message's delivery report, which the producer's poller thread serves (kq_then.c): the
 * flow leaves the rest of the request in the answer itself, and the front's deliver sends it.
 */
struct ingest_resp {
	unsigned status;
	const char *type;
	char body[160];
	enum outcome outcome;
	unsigned long long id; /* the row id, once reserved */
	/* set by the front before ingest_handle: called once the answer is ready, when later */
	void (*deliver)(struct ingest *in, struct ingest_resp *resp);
	/* the flow's, while the delivery report is awaited */
	struct ingest *in;
	int ch;
	long long t0_us, publish_us; /* the request's start and its publish's */
	char cbid[32];
};

const char *outcome_name(enum outcome o);

/*
 * The cheap checks of a complete request (chan_notify.h), run on the event loop before it
 * takes a slot; and the answer to a request refused by them or by verification.
 */
enum verr ingest_precheck(const struct ingest_req *req, char *reason, size_t rlen);
void ingest_reject(struct ingest *in, const struct ingest_req *req, enum verr ve,
                   const char *reason, int pre, struct ingest_resp *resp);

/*
 * Loads every merchant of cf (whose merchants the set points into, so cf must outlive it) into
 * a new set holding one reference; NULL with err naming the merchant, the file and the problem.
 */
struct ingest_keyset *ingest_keyset_build(const struct conf *cf, char *err, size_t errlen);
/* A reference to the set serving now, for one request; give it back with ingest_keyset_put. */
struct ingest_keyset *ingest_keyset_get(struct ingest *in);
void ingest_keyset_put(struct ingest_keyset *ks);
/* Makes ks (its reference passes to in) the set new requests get; the old one is freed by
 * the last request still holding it. */
void ingest_keyset_swap(struct ingest *in, struct ingest_keyset *ks);
const struct ingest_merchant *ingest_merchant_find(const struct ingest_keyset *ks, const char *id,
                                                   int ch);

/* Opens size connections; 0, or the exit code (daemon.h) with err saying why. */
int ingest_pool_init(struct ingest_pool *p, const struct conf_db *cf, int size, char *err,
                     size_t errlen);
/* Takes a connection, waiting up to wait_ms; NULL when none came free. */
struct db *ingest_pool_get(struct ingest_pool *p, int wait_ms);
void ingest_pool_put(struct ingest_pool *p, struct db *db);
void ingest_pool_free(struct ingest_pool *p);

void ingest_metrics_init(struct ingest_metrics *m);

void ingest_flight_init(struct ingest_flight *f);
void ingest_flight_free(struct ingest_flight *f);
/*
 * Joins j to the flight of an identical request, or starts one. Returns 1 when j leads (its
 * flow must end with ingest_flight_land; *e is NULL when memory ran out, and land accepts
 * that), 0 when j was parked: its settle is called when the leader lands.
 */
int ingest_flight_join(struct ingest *in, const char *key, size_t klen, struct ingest_job *j,
                       struct ingest_flight_entry **e);
/* The leader's reservation answered (l), or its flow ended without one (l NULL: each parked
 * copy runs by itself); settles the parked copies. */
void ingest_flight_land(struct ingest *in, struct ingest_flight_entry *e,
                        const struct ingest_landing *l);

/*
 * The whole flow for one request: verify, reserve, publish, answer. Returns 0 when resp is the
 * answer, 1 when it comes later: resp->deliver is then called once it is (on another thread,
 * possibly before ingest_handle returns), and the caller must not touch resp any more.
 */
int ingest_handle(struct ingest *in, const struct ingest_req *req, struct ingest_resp *resp);
/* Answers and counts a copy parked on a flight whose row exists (l from the leader); since_us
 * is when the copy was complete. */
void ingest_coalesced(struct ingest *in, int ch, const char *merchant,
                      const struct ingest_landing *l, const char *sha, long long since_us,
                      struct ingest_resp *resp);
/* The channel's failure / success answers, by its operations (chan_notify_ops.answer). */
void ingest_answer(int ch, int ok, unsigned status, const char *msg, struct ingest_resp *resp);

/* Starts n workers; ingest_work_stop runs what is queued, then ends them. */
int ingest_work_start(struct ingest *in, int n, char *err, size_t errlen);
void ingest_work_push(struct ingest *in, struct ingest_job *j);
void ingest_work_stop(struct ingest *in);
int ingest_http_start(struct ingest *in, char *err, size_t errlen);
/* Stops accepting connections; in-flight requests go on. */
void ingest_http_quiesce(struct ingest *in);
void ingest_http_stop(struct ingest *in);

#endif
