/*
 * processor_decide - the order state machine's decision as a pure function.
 *
 * A notification is described by four facts: what it says (the note), the state of its
 * order, how its trade relates to the order's paid trade, and how its amount relates to
 * what it is measured against (the order for a payment, the refund ledger for a refund of
 * the order's own payment, the refund request for a refund of another payment). The rule
 * table maps those facts to one action, the row's outcome and an alert; the transactions
 * in processor_pay.c and processor_refund.c only measure the facts and carry out the
 * action. docs/processor.md holds the same table, printed by dec_table_markdown() and
 * compared with it by tests/unit/test_decide.c.
 *
 * Nothing here touches the database, the clock or the network.
 */
#ifndef PAYCB_PROCESSOR_DECIDE_H
#define PAYCB_PROCESSOR_DECIDE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the notification says. */
enum dec_note {
	DN_PAY = 0,         /* a payment succeeded */
	DN_REFUND,          /* one refund succeeded (WeChat Pay SUCCESS, Stripe re_ succeeded) */
	DN_REFUND_TOTAL,    /* the trade's refunded total (Stripe charge.refunded, Alipay) */
	DN_REFUND_FAILED,   /* one refund failed or was canceled (Stripe) */
	DN_REFUND_ABNORMAL, /* the refund did not reach the buyer (WeChat Pay ABNORMAL) */
	DN_REFUND_CLOSED,   /* the refund was closed, no money moved (WeChat Pay CLOSED) */
	DN_REFUND_UNKNOWN,  /* a refund status paycb does not know */
	DN_COUNT
};

/* The order's state, as locked by the transaction. */
enum dec_state {
	DS_MISSING = 0,
	DS_PENDING,
	DS_PAID,
	DS_REFUNDING,
	DS_REFUNDED,
	DS_CLOSED,
	DS_COUNT
};

/* How the notification's trade relates to the order's paid trade. */
enum dec_trade {
	DT_SAME = 0,   /* the order's paid trade (channel and trade number) */
	DT_OTHER,      /* another payment: a second one, or any payment of a CLOSED order */
	DT_ORDER_NONE, /* the order records no trade (not paid, or paid by the merchant) */
	DT_ROW_NONE,   /* the notification names no trade */
	DT_COUNT
};

/* How the amount relates to what it is measured against. */
enum dec_money {
	DM_NA = 0, /* not measured: no order */
	/* a payment against its order */
	DM_EQUAL,    /* amount and currency equal */
	DM_DIFFERS,  /* the amount differs */
	DM_CURRENCY, /* the currency differs (payments and refunds of the order's trade) */
	/* a refund of the order's own trade, against the refund ledger */
	DM_UP_PARTIAL, /* the refunded total rises and stays below the amount paid */
	DM_UP_FULL,    /* the refunded total rises to the amount paid */
	DM_SAME,       /* the refunded total does not change */
	DM_DOWN,       /* the refunded total falls (a refund reversed) */
	DM_EXCEEDS,    /* the refunded total would pass the amount paid */
	DM_KNOWN,      /* in the ledger already in this state (or succeeded: a late ABNORMAL) */
	/* a refund of another payment, against that payment's refund request */
	DM_REQ_MATCH,   /* an open request of the same amount and currency */
	DM_REQ_DIFFERS, /* an open request of another amount or currency */
	DM_REQ_NONE,    /* no request: the payment has not been processed yet */
	DM_REQ_SETTLED, /* the request is settled already */
	DM_COUNT
};

/* What the transaction does. */
enum dec_action {
	DX_RETRY = 0,      /* roll back; a retryable failure (the reason is the rule's) */
	DX_DEAD,           /* the row dead, with its alert and dead letter */
	DX_NOTHING,        /* the row done; no other effect (an alert when the rule has one) */
	DX_MARK_PAID,      /* PENDING -> PAID, order.paid.shipment and order.paid.points */
	DX_CONFIRM_PAID,   /* record the trade on an order the merchant marked paid */
	DX_REQUEST_REFUND, /* a refund_requests row for this payment (none if one exists) */
	DX_LEDGER,         /* record the refund in the ledger, move the order's amount and state */
	DX_SETTLE,         /* settle the payment's refund request, or record it as refunded */
	DX_REOPEN,         /* a settled request's refund failed: the request becomes FAILED */
	DX_COUNT
};

struct dec_rule {
	unsigned notes, states, trades, money; /* bit masks of the enums above */
	enum dec_action action;
	const char *outcome; /* the row's outcome (the retry reason for DX_RETRY) */
	const char *alert;   /* the alert kind, or NULL */
};

struct dec_in {
	enum dec_note note;
	enum dec_state state;
	enum dec_trade trade;
	enum dec_money money;
};

/* The first rule that matches in; never NULL (the last rule matches everything). */
const struct dec_rule *dec_decide(const struct dec_in *in);
/* The rule table and its length, for the tests and the docs. */
const struct dec_rule *dec_rules(size_t *n);
/* Whether the transactions can produce this combination at all. */
int dec_possible(const struct dec_in *in);

/* Names used in the docs table and the log: "pay", "PAID", "same", "up_full", "ledger". */
const char *dec_note_name(enum dec_note);
const char *dec_state_name(enum dec_state);
const char *dec_trade_name(enum dec_trade);
const char *dec_money_name(enum dec_money);
const char *dec_action_name(enum dec_action);

/* Facts from the rows. */
enum dec_note dec_note_of(const char *channel, const char *refund_status, int cumulative);
enum dec_state dec_state_of(const char *order_status, int found);
enum dec_trade dec_trade_of(enum dec_state st, const char *row_channel, const char *row_trade,
                            const char *order_channel, const char *order_trade);

/*
 * The refund ledger of one order's own trade: applied single refunds, the highest
 * cumulative total a channel reported, and single refunds that failed (before or after
 * succeeding). Its total is max(singles, max(0, cumulative - failed)): both representations
 * of one refund count once, and a failure lowers the cumulative figure, which counted the
 * refund while it stood.
 */
struct dec_ledger {
	int64_t singles, cumulative, failed;
};
/* The state of this refund number's ledger row. */
enum dec_entry { DE_NONE = 0, DE_APPLIED, DE_REVERSED, DE_FAILED };
/* What the transaction writes to the ledger. */
enum dec_ledger_op {
	DL_NONE = 0,       /* nothing */
	DL_ADD_SINGLE,     /* insert an APPLIED single refund */
	DL_ADD_CUMULATIVE, /* insert a cumulative total */
	DL_REVERSE,        /* mark the APPLIED entry REVERSED */
	DL_ADD_FAILED,     /* insert a FAILED single refund */
};
int64_t dec_ledger_total(const struct dec_ledger *l);
/*
 * The ledger after note for amount (minor units) given this refund number's entry (its
 * amount in entry_amount). *op is what to write; returns DM_KNOWN when the entry makes
 * the note a copy, else the relation of the new total to before (the order's refunded
 * amount) and paid: DM_UP_PARTIAL, DM_UP_FULL, DM_SAME, DM_DOWN or DM_EXCEEDS.
 */
enum dec_money dec_ledger_next(enum dec_note note, const struct dec_ledger *now,
                               enum dec_entry entry, int64_t entry_amount, int64_t amount,
                               int64_t before, int64_t paid, struct dec_ledger *after,
                               enum dec_ledger_op *op);

/* The table as the markdown docs/processor.md carries between its decision markers. */
void dec_table_markdown(FILE *fp);

#endif
