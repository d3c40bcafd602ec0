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
 * proc_outbox_add - writes one order_events row in the open transaction. A row that exists
 * already (the effect was written before) is kept as it is and not relayed again here.
 */
enum db_rc
proc_outbox_add(struct proc_worker *w, const struct proc_row *row, const char *event_type,
                const char *ref, const char *amount, const char *currency, const char *trade_no,
                struct proc_result *r)
{
	char event_id[MSG_EVENT_ID_MAX + 1];
	struct proc_event *ev;
	unsigned long long id = 0;
	enum db_rc rc;

	if (r->nevents >= PROC_EVENTS_MAX)
		return DB_FATAL;
	ev = &r->events[r->nevents];
	if (msg_event_id(row->merchant, row->order, event_type, ref, event_id, sizeof(event_id)) <
	        0 ||
	    msg_order_event_encode(&(struct msg_order_event){.event_id = event_id,
	                                                     .event_type = event_type,
	                                                     .merchant_id = row->merchant,
	                                                     .out_trade_no = row->order,
	                                                     .amount = amount,
	                                                     .currency = currency,
	                                                     .channel = row->channel,
	                                                     .channel_trade_no = trade_no,
	                                                     .callback_id = row->id,
	                                                     .at = row->now},
	                           ev->payload, sizeof(ev->payload)) < 0) {
		snprintf(w->db.last_error, sizeof(w->db.last_error), "cannot encode the event");
		return DB_FATAL;
	}
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
