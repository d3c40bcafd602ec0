/*
 * processor_outbox - the transactional outbox: business effects are order_events rows
 * written in the same transaction as the order's state change, and relayed to
 * <prefix>.order-events after the commit by the relay thread (processor_relay.c).
 *
 * Each event has a stable id (msg_event_id), "<merchant_id>|<out_trade_no>|<event_type>",
 * with "|<refund number>" after it for the events of one refund (order.refund,
 * order.refund_reversed) and "|<n>" for the n-th order.refunded of an order whose full
 * refund was reversed and made again, which downstream consumers deduplicate on: a crash between
 * the commit and the relay leaves the row unsent (sent_at NULL) and the retrier's sweep publishes
 * it later, so delivery is at least once and the id makes it effectively once. The row's payload is
 * the event as msg_order_event_encode writes it (common/msg.c).
 */
#include "processor.h"

#include <stdio.h>
#include <string.h>

#include "log.h"
#include "msg.h"

/*
 * proc_outbox_encode - the event id and payload of event sp of row into *ev (its id not
 * yet known). Returns 0, or -1 when they do not fit.
 */
static int
proc_outbox_encode(struct proc_worker *w, const struct proc_row *row,
                   const struct proc_event_spec *sp, char *event_id, size_t idlen,
                   struct proc_event *ev)
{
	if (msg_event_id(row->merchant, row->order, sp->event_type, sp->ref, event_id, idlen) < 0 ||
	    msg_order_event_encode(&(struct msg_order_event){.event_id = event_id,
	                                                     .event_type = sp->event_type,
	                                                     .merchant_id = row->merchant,
	                                                     .out_trade_no = row->order,
	                                                     .amount = sp->amount,
	                                                     .currency = sp->currency,
	                                                     .channel = row->channel,
	                                                     .channel_trade_no = sp->trade_no,
	                                                     .callback_id = row->id,
	                                                     .at = row->now},
	                           ev->payload, sizeof(ev->payload)) < 0) {
		snprintf(w->db.last_error, sizeof(w->db.last_error), "cannot encode the event");
		return -1;
	}
	return 0;
}

/*
 * proc_outbox_add - writes one order_events row in the open transaction. A row that exists
 * already (the effect was written before) is kept as it is and not relayed again here.
 */
enum db_rc
proc_outbox_add(struct proc_worker *w, const struct proc_row *row, const char *event_type,
                const char *ref, const char *amount, const char *currency, const char *trade_no,
                struct proc_result *r)
{
	const struct proc_event_spec sp = {event_type, ref, amount, currency, trade_no};
	char event_id[MSG_EVENT_ID_MAX + 1];
	struct proc_event *ev;
	unsigned long long id = 0;
	enum db_rc rc;

	if (r->nevents >= PROC_EVENTS_MAX)
		return DB_FATAL;
	ev = &r->events[r->nevents];
	if (proc_outbox_encode(w, row, &sp, event_id, sizeof(event_id), ev) != 0)
		return DB_FATAL;
	{
		struct db_in in[6] = {DBI_STR(event_id),    DBI_STR(row->merchant),
		                      DBI_STR(row->order),  DBI_STR(event_type),
		                      DBI_STR(ev->payload), DBI_I64(row->id)};

		rc = db_exec(&w->db,
		             "INSERT INTO order_events (event_id, merchant_id, out_trade_no, "
		             "event_type, payload, callback_id) VALUES (?, ?, ?, ?, ?, ?)",
		             in, 6, NULL, &id);
	}
	if (rc == DB_DUPLICATE)
		return DB_OK;
	if (rc != DB_OK)
		return rc;
	ev->id = id;
	r->nevents++;
	return DB_OK;
}

/*
 * proc_outbox_step - the step between the ids of one multi-row INSERT on this connection,
 * 0 when they are not guaranteed consecutive. With innodb_autoinc_lock_mode 0 or 1 an
 * INSERT whose row count is known takes its ids as one consecutive run (first, first +
 * auto_increment_increment, ...); mode 2 interleaves concurrent INSERTs. Read once per
 * session, inside the open transaction (it reads no table).
 */
static enum db_rc
proc_outbox_step(struct proc_worker *w, long long *step)
{
	struct db_out out[2] = {DBO_I64(), DBO_I64()};
	unsigned long long rows = 0;
	enum db_rc rc;

	if (w->ai_connects != w->db.connects) {
		rc = db_query(&w->db,
		              "SELECT @@innodb_autoinc_lock_mode, @@auto_increment_increment", NULL,
		              0, out, 2, NULL, NULL, &rows);
		if (rc != DB_OK)
			return rc;
		w->ai_step = rows == 1 && out[0].i <= 1 && out[1].i >= 1 ? out[1].i : 0;
		w->ai_connects = w->db.connects;
	}
	*step = w->ai_step;
	return DB_OK;
}

/* Two events in one statement: a paid payment's shipment and points, or a refund that
 * completes its order's refund and order.refunded. */
static const char SQL_EVENTS_2[] =
    "INSERT INTO order_events (event_id, merchant_id, out_trade_no, event_type, payload, "
    "callback_id) VALUES (?, ?, ?, ?, ?, ?), (?, ?, ?, ?, ?, ?)";

enum db_rc
proc_outbox_add_all(struct proc_worker *w, const struct proc_row *row,
                    const struct proc_event_spec *sp, int n, struct proc_result *r)
{
	char event_id[2][MSG_EVENT_ID_MAX + 1];
	struct db_in in[12];
	struct proc_event *ev = &r->events[r->nevents];
	unsigned long long first = 0, added = 0;
	long long step = 0;
	enum db_rc rc = DB_OK;
	int i;

	if (n == 2 && r->nevents + 2 <= PROC_EVENTS_MAX &&
	    (rc = proc_outbox_step(w, &step)) == DB_OK && step > 0) {
		for (i = 0; i < 2; i++) {
			if (proc_outbox_encode(w, row, &sp[i], event_id[i], sizeof(event_id[i]),
			                       &ev[i]) != 0)
				return DB_FATAL;
			in[6 * i] = DBI_STR(event_id[i]);
			in[6 * i + 1] = DBI_STR(row->merchant);
			in[6 * i + 2] = DBI_STR(row->order);
			in[6 * i + 3] = DBI_STR(sp[i].event_type);
			in[6 * i + 4] = DBI_STR(ev[i].payload);
			in[6 * i + 5] = DBI_I64(row->id);
		}
		rc = db_exec(&w->db, SQL_EVENTS_2, in, 12, &added, &first);
		if (rc == DB_OK && added == 2) {
			ev[0].id = first;
			ev[1].id = first + (unsigned long long)step;
			r->nevents += 2;
			return DB_OK;
		}
		/* A duplicate event id rolled back the statement alone; the events go one by
		 * one, which keeps the rows that exist. */
		if (rc != DB_OK && rc != DB_DUPLICATE)
			return rc;
	}
	if (rc != DB_OK && rc != DB_DUPLICATE)
		return rc;
	for (i = 0; i < n; i++)
		if ((rc = proc_outbox_add(w, row, sp[i].event_type, sp[i].ref, sp[i].amount,
		                          sp[i].currency, sp[i].trade_no, r)) != DB_OK)
			return rc;
	return DB_OK;
}
