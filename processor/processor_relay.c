/*
 * processor_relay - the outbox relay thread: publishes committed order_events rows to
 * <prefix>.order-events and marks them sent, off the consumer threads.
 *
 * A worker that committed a transaction queues its events here and goes on with its next
 * message; it no longer waits for two delivery reports and two autocommit UPDATEs per
 * callback, which cost more than the transaction itself. The relay takes everything queued at
 * once, produces it all and waits for the delivery reports against one deadline. The
 * delivered rows are marked sent in chunks of 32 to a statement, a chunk as soon as it is
 * full and whatever is left once the oldest delivered row has waited PROC_RELAY_MARK_DELAY_MS.
 * Marking each batch at once cost an autocommit UPDATE, and a redo log flush, per callback,
 * because batches are small when the processor is not behind.
 *
 * Nothing here can lose an effect: the events are committed rows before they are queued. A
 * crash with a full queue, a failed delivery or a failed mark leaves rows with sent_at NULL,
 * which the retrier's outbox sweep publishes later under the same event id; downstream
 * consumers deduplicate on it. One thread keeps the events of one order in commit order, and
 * an order's earlier event that is unsent and not delivered by this relay (lost, or committed
 * by a process that died) holds back its later ones, which the sweep then sends after it.
 *
 * The queue is bounded: a worker that finds it full waits, so a slow broker slows the
 * consumers instead of growing memory.
 */
#include "processor.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "outbox.h"

#define PROC_RELAY_QUEUE_MAX 4096
#define PROC_RELAY_BATCH_MAX 512
/*
 * How long a delivered row may wait for its sent mark. It only has to be well inside the
 * retrier's outbox_after_s (a row unsent for that long is published again), and the wait
 * lets the marks of many small batches share one statement.
 */
#define PROC_RELAY_MARK_DELAY_MS 200
#define PROC_RELAY_MARKS_MAX     (4 * PROC_RELAY_BATCH_MAX)
/*
 * How many delivered rows the relay remembers. An earlier event it delivered is unsent in the
 * database only until its mark, PROC_RELAY_MARK_DELAY_MS later, so this is plenty.
 */
#define PROC_RELAY_SEEN_MAX 8192

struct proc_relay_item {
	struct proc_relay_item *next;
	unsigned long long row;
	char cbid[24];
	char key[200];
	char payload[PROC_PAYLOAD_MAX];
};

/* How many earlier-event pairs one batch keeps; a batch with more holds back the rest. */
#define PROC_RELAY_DEPS_MAX 4096

struct proc_relay_deps {
	unsigned long long later[PROC_RELAY_DEPS_MAX], earlier[PROC_RELAY_DEPS_MAX];
	int n, overflow;
};

struct proc_relay {
	struct proc *p;
	struct db db;
	pthread_t thread;
	int started;
	pthread_mutex_t mu;
	pthread_cond_t more, room;
	struct proc_relay_item *head, *tail;
	int queued;
	long long head_since_ms; /* when the oldest queued item was queued */
	int stop;
	/* Delivered rows not yet marked sent, and when the oldest of them was delivered. */
	unsigned long long marks[PROC_RELAY_MARKS_MAX];
	int nmarks;
	long long marks_since_ms;
	/* The rows this relay delivered last, a ring: the earlier events it knows are out. */
	unsigned long long seen[PROC_RELAY_SEEN_MAX];
	int nseen, seen_next;
	struct proc_relay_deps deps; /* the current batch's earlier unsent events */
	/* One round's messages, their items' places in the batch, and their fates. */
	struct kq_msg msgs[PROC_RELAY_BATCH_MAX];
	int which[PROC_RELAY_BATCH_MAX];
	struct kq_result res[PROC_RELAY_BATCH_MAX];
};

/*
 * The order check takes PROC_RELAY_MARK_IDS rows to a statement, as many as a sent mark
 * (outbox_mark_sent), for the same reason: round trips are most of what the database spends
 * its CPU on here.
 */
#define PROC_RELAY_MARK_IDS OUTBOX_MARK_IDS

/*
 * proc_relay_mark - marks pending delivered rows sent: the full chunks, or every one when
 * all is set. A failed statement drops its chunk rather than keep it: a lost mark only
 * means the sweep publishes the event again.
 */
static void
proc_relay_mark(struct proc_relay *rl, int all)
{
	int done = all ? rl->nmarks : rl->nmarks / OUTBOX_MARK_IDS * OUTBOX_MARK_IDS;

	if (done > 0)
		outbox_mark_sent(&rl->db, rl->marks, done, NULL);
	memmove(rl->marks, rl->marks + done, (size_t)(rl->nmarks - done) * sizeof(rl->marks[0]));
	rl->nmarks -= done;
	if (rl->nmarks > 0 && done > 0)
		rl->marks_since_ms = clock_mono_ms();
}

/* proc_relay_marks_due - whether the oldest pending mark has waited long enough */
static int
proc_relay_marks_due(const struct proc_relay *rl)
{
	return rl->nmarks > 0 && clock_mono_ms() - rl->marks_since_ms >= PROC_RELAY_MARK_DELAY_MS;
}

/*
 * Earlier unsent events of the batch's orders: for each of up to PROC_RELAY_MARK_IDS rows
 * of the batch, the ids of its order's events that are older (a smaller id) and not marked
 * sent. Unused places repeat the chunk's first id, like the marks.
 */
static const char SQL_EARLIER[] =
    "SELECT e.id, p.id FROM order_events e JOIN order_events p ON p.merchant_id = "
    "e.merchant_id AND p.out_trade_no = e.out_trade_no AND p.sent_at IS NULL AND p.id < e.id "
    "WHERE e.id IN (" OUTBOX_ID_PLACES ")";

static int
proc_relay_dep_row(void *arg, struct db_out *o)
{
	struct proc_relay_deps *d = arg;

	if (d->n == PROC_RELAY_DEPS_MAX) {
		d->overflow = 1;
		return 1;
	}
	d->later[d->n] = (unsigned long long)o[0].i;
	d->earlier[d->n++] = (unsigned long long)o[1].i;
	return 0;
}

/* proc_relay_earlier - fills d for the n items; returns 0, or -1 when it cannot tell. */
static int
proc_relay_earlier(struct proc_relay *rl, struct proc_relay_item **items, int n,
                   struct proc_relay_deps *d)
{
	struct db_out out[2] = {DBO_I64(), DBO_I64()};

	d->n = d->overflow = 0;
	for (int done = 0; done < n;) {
		struct db_in in[PROC_RELAY_MARK_IDS];
		int k = 0;

		for (; done < n && k < PROC_RELAY_MARK_IDS; done++)
			in[k++] = DBI_I64(items[done]->row);
		for (int j = k; j < PROC_RELAY_MARK_IDS; j++)
			in[j] = in[0];
		if (db_query(&rl->db, SQL_EARLIER, in, PROC_RELAY_MARK_IDS, out, 2,
		             proc_relay_dep_row, d, NULL) != DB_OK) {
			log_warn(NULL, "event=outbox_order_check_failed error=\"%s\"",
			         rl->db.last_error);
			return -1;
		}
	}
	return d->overflow ? -1 : 0;
}

/* proc_relay_seen - whether this relay had row delivered (its recent deliveries). */
static int
proc_relay_seen(const struct proc_relay *rl, unsigned long long row)
{
	for (int i = 0; i < rl->nseen; i++)
		if (rl->seen[i] == row)
			return 1;
	return 0;
}

static void
proc_relay_delivered(struct proc_relay *rl, unsigned long long row)
{
	rl->seen[rl->seen_next] = row;
	rl->seen_next = (rl->seen_next + 1) % PROC_RELAY_SEEN_MAX;
	if (rl->nseen < PROC_RELAY_SEEN_MAX)
		rl->nseen++;
	if (rl->nmarks == PROC_RELAY_MARKS_MAX)
		proc_relay_mark(rl, 1);
	if (rl->nmarks == 0)
		rl->marks_since_ms = clock_mono_ms();
	rl->marks[rl->nmarks++] = row;
}

enum { IT_WAIT, IT_GO, IT_DONE, IT_FAILED, IT_HELD };

/*
 * proc_relay_ready - whether item i may be published now: IT_GO, IT_WAIT (an earlier event
 * of its order is in this batch and not delivered yet) or IT_HELD (an earlier event of its
 * order is unsent and this relay did not deliver it: lost, or another process's).
 */
static int
proc_relay_ready(const struct proc_relay *rl, struct proc_relay_item **items, int n,
                 const int *state, int i, const struct proc_relay_deps *d)
{
	int verdict = IT_GO;

	for (int k = 0; k < d->n; k++) {
		int j;

		if (d->later[k] != items[i]->row || proc_relay_seen(rl, d->earlier[k]))
			continue;
		for (j = 0; j < n && items[j]->row != d->earlier[k]; j++)
			;
		if (j == n || state[j] == IT_HELD || state[j] == IT_FAILED)
			return IT_HELD;
		/* Events of one transaction are one step of the order: no order among them. */
		if (state[j] == IT_GO && strcmp(items[j]->cbid, items[i]->cbid) == 0)
			continue;
		if (state[j] != IT_DONE)
			verdict = IT_WAIT;
	}
	return verdict;
}

/*
 * proc_relay_round - one round of a batch: finds the waiting items that may go now, publishes
 * them together (kq_publish_batch) and records what became of each. Returns how many went;
 * *waiting gets how many still wait for an earlier event of this batch.
 */
static int
proc_relay_round(struct proc_relay *rl, struct proc_relay_item **items, int n, int *state,
                 int *waiting)
{
	int go = 0;

	*waiting = 0;
	for (int i = 0; i < n; i++) {
		struct proc_relay_item *it = items[i];

		if (state[i] != IT_WAIT)
			continue;
		state[i] = proc_relay_ready(rl, items, n, state, i, &rl->deps);
		if (state[i] == IT_HELD)
			log_warn(it->cbid,
			         "event=outbox_held_back event_row=%llu "
			         "reason=earlier_event_unsent",
			         it->row);
		if (state[i] != IT_GO) {
			*waiting += state[i] == IT_WAIT;
			continue;
		}
		rl->msgs[go] = (struct kq_msg){rl->p->topic_events, it->key, strlen(it->key),
		                               it->payload, strlen(it->payload)};
		rl->which[go++] = i;
	}
	kq_publish_batch(rl->p->prod, rl->msgs, go, PROC_PUBLISH_WAIT_MS, rl->res);
	for (int k = 0; k < go; k++) {
		int i = rl->which[k];

		if (rl->res[k].rc != KQ_DELIVERED) {
			log_warn(items[i]->cbid, "event=outbox_unsent event_row=%llu error=\"%s\"",
			         items[i]->row, rl->res[k].err);
			state[i] = IT_FAILED;
			continue;
		}
		state[i] = IT_DONE;
		proc_relay_delivered(rl, items[i]->row);
	}
	return go;
}

/*
 * proc_relay_batch - publishes a batch in rounds and marks what was delivered. Events of one
 * order leave in commit order: an event whose order has an earlier unsent event waits for
 * that event's delivery report when it is in this batch (the next round), and is held back,
 * left unsent for the retrier's sweep, when it is not (the relay lost it, or the process that
 * committed it died before relaying it). The sweep publishes an order's events one after
 * another, earliest first. The check costs one query per 32 events.
 */
static void
proc_relay_batch(struct proc_relay *rl, struct proc_relay_item **items, int n)
{
	int state[PROC_RELAY_BATCH_MAX];
	int known = proc_relay_earlier(rl, items, n, &rl->deps) == 0;

	for (int i = 0; i < n; i++)
		state[i] = known ? IT_WAIT : IT_HELD;
	if (!known)
		log_warn(NULL, "event=outbox_held_back rows=%d reason=order_unknown", n);
	for (;;) {
		int waiting, go = proc_relay_round(rl, items, n, state, &waiting);

		if (waiting == 0)
			break;
		if (go == 0) { /* cannot happen: a wait is always on an item that went */
			for (int i = 0; i < n; i++)
				if (state[i] == IT_WAIT)
					state[i] = IT_HELD;
			break;
		}
	}
	proc_relay_mark(rl, proc_relay_marks_due(rl));
}

static void *
proc_relay_main(void *arg)
{
	struct proc_relay *rl = arg;
	struct proc_relay_item *items[PROC_RELAY_BATCH_MAX];
	long long linger_ms = rl->p->cf->processor.relay_linger_ms;

	for (;;) {
		int n = 0;

		pthread_mutex_lock(&rl->mu);
		while (rl->head == NULL && !rl->stop) {
			struct timespec dl;
			long long left;

			if (rl->nmarks == 0) {
				pthread_cond_wait(&rl->more, &rl->mu);
				continue;
			}
			if (proc_relay_marks_due(rl))
				break;
			/* Nothing to relay: wake when the pending marks are due. */
			left = rl->marks_since_ms + PROC_RELAY_MARK_DELAY_MS - clock_mono_ms();
			clock_deadline(&dl, left > 1 ? (int)left : 1);
			pthread_cond_timedwait(&rl->more, &rl->mu, &dl);
		}
		if (rl->head == NULL) {
			int stopping = rl->stop;

			pthread_mutex_unlock(&rl->mu);
			/* Marks due, or stopping with everything queued relayed: the last marks. */
			proc_relay_mark(rl, 1);
			if (stopping)
				break;
			continue;
		}
		/*
		 * Linger: every batch costs the broker a produce request per partition in it
		 * (librdkafka sends one partition to a request), and a request costs it more
		 * than the events in it, so the relay lets a batch gather for a moment.
		 */
		while (rl->head && !rl->stop && rl->queued < PROC_RELAY_BATCH_MAX) {
			long long left = rl->head_since_ms + linger_ms - clock_mono_ms();
			struct timespec dl;

			if (left <= 0)
				break;
			clock_deadline(&dl, (int)left);
			pthread_cond_timedwait(&rl->more, &rl->mu, &dl);
		}
		while (rl->head && n < PROC_RELAY_BATCH_MAX) {
			items[n++] = rl->head;
			rl->head = rl->head->next;
		}
		if (rl->head == NULL)
			rl->tail = NULL;
		else
			rl->head_since_ms = clock_mono_ms();
		rl->queued -= n;
		pthread_cond_broadcast(&rl->room);
		pthread_mutex_unlock(&rl->mu);

		proc_relay_batch(rl, items, n);
		for (int i = 0; i < n; i++)
			free(items[i]);
	}
	return NULL;
}

int
proc_relay_start(struct proc *p)
{
	struct proc_relay *rl;

	if ((rl = calloc(1, sizeof(*rl))) == NULL)
		return -1;
	rl->p = p;
	pthread_mutex_init(&rl->mu, NULL);
	pthread_cond_init(&rl->more, NULL);
	pthread_cond_init(&rl->room, NULL);
	/* A database that is down now is reconnected to by the first batch that needs it. */
	if (db_open(&rl->db, &p->cf->db) == DB_FATAL) {
		log_error(NULL, "event=db_open_failed thread=relay error=\"%s\"",
		          rl->db.last_error);
		goto fail;
	}
	if (pthread_create(&rl->thread, NULL, proc_relay_main, rl) != 0) {
		log_error(NULL, "event=thread_failed thread=relay");
		goto fail;
	}
	rl->started = 1;
	p->relay = rl;
	return 0;
fail:
	db_close(&rl->db);
	pthread_cond_destroy(&rl->room);
	pthread_cond_destroy(&rl->more);
	pthread_mutex_destroy(&rl->mu);
	free(rl);
	return -1;
}

void
proc_relay_stop(struct proc *p)
{
	struct proc_relay *rl = p->relay;
	struct proc_relay_item *it;

	if (rl == NULL)
		return;
	pthread_mutex_lock(&rl->mu);
	rl->stop = 1;
	pthread_cond_broadcast(&rl->more);
	pthread_cond_broadcast(&rl->room);
	pthread_mutex_unlock(&rl->mu);
	if (rl->started)
		pthread_join(rl->thread, NULL);
	while ((it = rl->head) != NULL) { /* only when the thread never started */
		rl->head = it->next;
		free(it);
	}
	db_close(&rl->db);
	pthread_cond_destroy(&rl->room);
	pthread_cond_destroy(&rl->more);
	pthread_mutex_destroy(&rl->mu);
	free(rl);
	p->relay = NULL;
}

void
proc_outbox_relay(struct proc_worker *w, const char *cbid, struct proc_result *r)
{
	struct proc_relay *rl = w->p->relay;

	for (int i = 0; i < r->nevents; i++) {
		struct proc_relay_item *it;

		if ((it = malloc(sizeof(*it))) == NULL) {
			log_warn(cbid, "event=outbox_unsent event_row=%llu error=\"out of memory\"",
			         r->events[i].id);
			continue;
		}
		it->next = NULL;
		it->row = r->events[i].id;
		snprintf(it->cbid, sizeof(it->cbid), "%s", cbid);
		/* A merchant id and an order number at their columns' widths always fit. */
		msg_key(r->merchant, r->order, it->key, sizeof(it->key));
		memcpy(it->payload, r->events[i].payload, sizeof(it->payload));
		pthread_mutex_lock(&rl->mu);
		while (rl->queued >= PROC_RELAY_QUEUE_MAX && !rl->stop)
			pthread_cond_wait(&rl->room, &rl->mu);
		if (rl->tail) {
			rl->tail->next = it;
		} else {
			rl->head = it;
			rl->head_since_ms = clock_mono_ms();
		}
		rl->tail = it;
		rl->queued++;
		/* The relay waits for a first item, or lingers until a batch is full. */
		if (rl->head == it || rl->queued == PROC_RELAY_BATCH_MAX)
			pthread_cond_signal(&rl->more);
		pthread_mutex_unlock(&rl->mu);
	}
}
