/*
 * processor_decide - the rule table of the order state machine and the pure functions
 * that measure its facts (see processor_decide.h). Rules are tried in order and the first
 * that matches decides; the last one matches everything, so a combination nobody foresaw
 * ends dead with an alert instead of being applied or dropped.
 */
#include "processor_decide.h"

#include <string.h>

#define B(x) (1u << (x))
#define ANY  0xffffffffu

/* Sets the rules use. */
#define N_REFUNDS  (B(DN_REFUND) | B(DN_REFUND_TOTAL) | B(DN_REFUND_FAILED))
#define N_SUCCESS  (B(DN_REFUND) | B(DN_REFUND_TOTAL))
#define S_PAIDLIKE (B(DS_PAID) | B(DS_REFUNDING) | B(DS_REFUNDED))
#define T_OWN      (B(DT_SAME) | B(DT_ORDER_NONE) | B(DT_ROW_NONE))
#define M_REQ_OPEN (B(DM_REQ_MATCH) | B(DM_REQ_DIFFERS))

static const struct dec_rule rules[] = {
    /* Payments. A CLOSED order is refunded whatever the payment carries. */
    {B(DN_PAY), B(DS_MISSING), ANY, ANY, DX_RETRY, "order not found", NULL},
    {B(DN_PAY), B(DS_CLOSED), ANY, ANY, DX_REQUEST_REFUND, "paid_after_close", "paid_after_close"},
    {B(DN_PAY), B(DS_PENDING), ANY, B(DM_CURRENCY), DX_DEAD, "currency_mismatch",
     "currency_mismatch"},
    {B(DN_PAY), B(DS_PENDING), ANY, B(DM_DIFFERS), DX_DEAD, "amount_mismatch", "amount_mismatch"},
    {B(DN_PAY), B(DS_PENDING), ANY, B(DM_EQUAL), DX_MARK_PAID, "paid", NULL},
    {B(DN_PAY), S_PAIDLIKE, B(DT_SAME), B(DM_EQUAL), DX_NOTHING, "duplicate", NULL},
    {B(DN_PAY), S_PAIDLIKE, B(DT_SAME), B(DM_DIFFERS) | B(DM_CURRENCY), DX_DEAD, "amount_mismatch",
     "amount_mismatch"},
    {B(DN_PAY), S_PAIDLIKE, B(DT_ORDER_NONE), B(DM_EQUAL), DX_CONFIRM_PAID, "paid_confirmed", NULL},
    {B(DN_PAY), S_PAIDLIKE, B(DT_ORDER_NONE), B(DM_DIFFERS) | B(DM_CURRENCY), DX_CONFIRM_PAID,
     "paid_confirmed", "amount_mismatch"},
    {B(DN_PAY), S_PAIDLIKE, B(DT_OTHER), ANY, DX_REQUEST_REFUND, "paid_twice", "paid_twice"},

    /* Refund statuses that moved no money, whatever the order. The same refund seen
     * succeeded before is past them (WeChat Pay's SUCCESS is final): such a status is an
     * older notification delivered late, and its alert would be false. */
    {B(DN_REFUND_ABNORMAL) | B(DN_REFUND_CLOSED), S_PAIDLIKE, T_OWN, B(DM_KNOWN), DX_NOTHING,
     "duplicate", NULL},
    {B(DN_REFUND_ABNORMAL), ANY, ANY, ANY, DX_NOTHING, "refund_abnormal", "refund_abnormal"},
    {B(DN_REFUND_CLOSED), ANY, ANY, ANY, DX_NOTHING, "refund_closed", "refund_closed"},
    {B(DN_REFUND_UNKNOWN), ANY, ANY, ANY, DX_DEAD, "refund_status_unknown",
     "refund_status_unknown"},

    /* Refunds of another payment settle its request and never touch the order. */
    {N_REFUNDS, B(DS_MISSING), ANY, ANY, DX_RETRY, "order not found", NULL},
    {N_SUCCESS, ANY, B(DT_OTHER), B(DM_REQ_MATCH), DX_SETTLE, "refund_other_payment", NULL},
    {N_SUCCESS, ANY, B(DT_OTHER), B(DM_REQ_DIFFERS), DX_SETTLE, "refund_other_payment",
     "refund_request_mismatch"},
    {N_SUCCESS, ANY, B(DT_OTHER), B(DM_REQ_NONE), DX_SETTLE, "refund_before_payment", NULL},
    {N_SUCCESS, ANY, B(DT_OTHER), B(DM_REQ_SETTLED), DX_NOTHING, "duplicate", NULL},
    {B(DN_REFUND_FAILED), ANY, B(DT_OTHER), B(DM_REQ_SETTLED), DX_REOPEN, "refund_reversed",
     "refund_reversed"},
    {B(DN_REFUND_FAILED), ANY, B(DT_OTHER), M_REQ_OPEN | B(DM_REQ_NONE), DX_NOTHING,
     "refund_failed", "refund_failed"},

    /* Refunds of the order's own payment. */
    {N_REFUNDS, B(DS_PENDING), ANY, ANY, DX_RETRY, "order not paid (PENDING)", NULL},
    {N_REFUNDS, B(DS_CLOSED), T_OWN, ANY, DX_DEAD, "refund_unmatched", "refund_unmatched"},
    {N_REFUNDS, S_PAIDLIKE, T_OWN, B(DM_CURRENCY), DX_DEAD, "currency_mismatch",
     "currency_mismatch"},
    {N_REFUNDS, S_PAIDLIKE, T_OWN, B(DM_KNOWN), DX_NOTHING, "duplicate", NULL},
    {N_REFUNDS, S_PAIDLIKE, T_OWN, B(DM_EXCEEDS), DX_DEAD, "amount_mismatch", "amount_mismatch"},
    {N_SUCCESS, S_PAIDLIKE, T_OWN, B(DM_UP_PARTIAL), DX_LEDGER, "refund_partial", NULL},
    {N_SUCCESS, S_PAIDLIKE, T_OWN, B(DM_UP_FULL), DX_LEDGER, "refunded", NULL},
    {N_SUCCESS, S_PAIDLIKE, T_OWN, B(DM_SAME), DX_LEDGER, "refund_covered", NULL},
    {B(DN_REFUND_FAILED), S_PAIDLIKE, T_OWN, B(DM_DOWN), DX_LEDGER, "refund_reversed",
     "refund_reversed"},
    {B(DN_REFUND_FAILED), S_PAIDLIKE, T_OWN, B(DM_SAME), DX_LEDGER, "refund_failed",
     "refund_failed"},

    /* Anything else is kept and alarmed, never applied. */
    {ANY, ANY, ANY, ANY, DX_DEAD, "decision_unexpected", "decision_unexpected"},
};

const struct dec_rule *
dec_rules(size_t *n)
{
	*n = sizeof(rules) / sizeof(rules[0]);
	return rules;
}

const struct dec_rule *
dec_decide(const struct dec_in *in)
{
	size_t i, n = sizeof(rules) / sizeof(rules[0]);

	for (i = 0; i + 1 < n; i++) {
		const struct dec_rule *r = &rules[i];

		if ((r->notes & B(in->note)) && (r->states & B(in->state)) &&
		    (r->trades & B(in->trade)) && (r->money & B(in->money)))
			return r;
	}
	return &rules[n - 1];
}

int
dec_possible(const struct dec_in *in)
{
	int pay = in->note == DN_PAY;

	/* Without an order nothing is measured, and the order records no trade. */
	if (in->state == DS_MISSING)
		return in->money == DM_NA && in->trade == DT_ORDER_NONE;
	if (in->money == DM_NA)
		return 0;
	/* Neither PENDING nor CLOSED orders record a paid trade. */
	if ((in->state == DS_PENDING || in->state == DS_CLOSED) && in->trade == DT_SAME)
		return 0;
	/* Every payment names its trade; a CLOSED order's payments are all "other". */
	if (pay) {
		if (in->trade == DT_ROW_NONE || (in->state == DS_CLOSED && in->trade != DT_OTHER) ||
		    (in->state == DS_PENDING && in->trade != DT_ORDER_NONE))
			return 0;
		return in->money == DM_EQUAL || in->money == DM_DIFFERS || in->money == DM_CURRENCY;
	}
	if (in->state == DS_CLOSED && in->trade == DT_ORDER_NONE)
		return 0;
	/* A refund of another payment is measured against its request. */
	if (in->trade == DT_OTHER)
		return in->money >= DM_REQ_MATCH && in->money <= DM_REQ_SETTLED;
	if (in->money < DM_CURRENCY || in->money > DM_KNOWN)
		return 0;
	/* A success never lowers the ledger, a failure never raises it, and the statuses
	 * that moved no money leave it as it is. */
	switch (in->note) {
	case DN_REFUND:
	case DN_REFUND_TOTAL:
		return in->money != DM_DOWN;
	case DN_REFUND_FAILED:
		return in->money != DM_UP_PARTIAL && in->money != DM_UP_FULL &&
		       in->money != DM_EXCEEDS;
	default:
		return in->money == DM_SAME || in->money == DM_CURRENCY || in->money == DM_KNOWN;
	}
}

static const char *const note_names[DN_COUNT] = {
    "pay",           "refund",        "refund_total", "refund_failed", "refund_abnormal",
    "refund_closed", "refund_unknown"};
static const char *const state_names[DS_COUNT] = {"MISSING",   "PENDING",  "PAID",
                                                  "REFUNDING", "REFUNDED", "CLOSED"};
static const char *const trade_names[DT_COUNT] = {"same", "other", "order_none", "row_none"};
static const char *const money_names[DM_COUNT] = {
    "na",   "equal",   "differs", "currency",  "up_partial",  "up_full",  "same",
    "down", "exceeds", "known",   "req_match", "req_differs", "req_none", "req_settled"};
static const char *const action_names[DX_COUNT] = {"retry",     "dead",         "nothing",
                                                   "mark_paid", "confirm_paid", "request_refund",
                                                   "ledger",    "settle",       "reopen"};

/* Each dimension's name function is the same bounded lookup in its table. */
#define DEC_NAME_FN(fn, type, names, count)                                                        \
	const char *fn(type v)                                                                     \
	{                                                                                          \
		return (unsigned)v < (count) ? names[v] : "?";                                     \
	}

DEC_NAME_FN(dec_note_name, enum dec_note, note_names, DN_COUNT)
DEC_NAME_FN(dec_state_name, enum dec_state, state_names, DS_COUNT)
DEC_NAME_FN(dec_trade_name, enum dec_trade, trade_names, DT_COUNT)
DEC_NAME_FN(dec_money_name, enum dec_money, money_names, DM_COUNT)
DEC_NAME_FN(dec_action_name, enum dec_action, action_names, DX_COUNT)

enum dec_note
dec_note_of(const char *channel, const char *status, int cumulative)
{
	if (cumulative)
		return DN_REFUND_TOTAL;
	if (strcmp(channel, "wxpay") == 0) {
		if (strcmp(status, "SUCCESS") == 0)
			return DN_REFUND;
		if (strcmp(status, "ABNORMAL") == 0)
			return DN_REFUND_ABNORMAL;
		if (strcmp(status, "CLOSED") == 0)
			return DN_REFUND_CLOSED;
		return DN_REFUND_UNKNOWN;
	}
	if (strcmp(channel, "stripe") == 0) {
		if (strcmp(status, "succeeded") == 0)
			return DN_REFUND;
		if (strcmp(status, "failed") == 0 || strcmp(status, "canceled") == 0)
			return DN_REFUND_FAILED;
		return DN_REFUND_UNKNOWN;
	}
	/* Alipay reports refunds as the trade's cumulative refund_fee; a single one is its
	 * only refund so far. */
	return DN_REFUND;
}

enum dec_state
dec_state_of(const char *status, int found)
{
	for (int i = DS_PENDING; found && i < DS_COUNT; i++)
		if (strcmp(status, state_names[i]) == 0)
			return (enum dec_state)i;
	return DS_MISSING;
}

enum dec_trade
dec_trade_of(enum dec_state st, const char *row_channel, const char *row_trade,
             const char *order_channel, const char *order_trade)
{
	if (st == DS_MISSING)
		return DT_ORDER_NONE;
	if (row_trade[0] == '\0')
		return DT_ROW_NONE;
	/* A CLOSED order was never paid: every payment it sees is one to give back. */
	if (st == DS_CLOSED)
		return DT_OTHER;
	if (order_trade[0] == '\0')
		return DT_ORDER_NONE;
	return strcmp(row_trade, order_trade) == 0 && strcmp(row_channel, order_channel) == 0
	           ? DT_SAME
	           : DT_OTHER;
}

int64_t
dec_ledger_total(const struct dec_ledger *l)
{
	int64_t cum = l->cumulative > l->failed ? l->cumulative - l->failed : 0;

	return l->singles > cum ? l->singles : cum;
}

enum dec_money
dec_ledger_next(enum dec_note note, const struct dec_ledger *now, enum dec_entry entry,
                int64_t entry_amount, int64_t amount, int64_t before, int64_t paid,
                struct dec_ledger *after, enum dec_ledger_op *op)
{
	int64_t total;

	*after = *now;
	*op = DL_NONE;
	switch (note) {
	case DN_REFUND:
		if (entry != DE_NONE)
			return DM_KNOWN;
		after->singles += amount;
		*op = DL_ADD_SINGLE;
		break;
	case DN_REFUND_TOTAL:
		if (entry != DE_NONE)
			return DM_KNOWN;
		if (amount > after->cumulative)
			after->cumulative = amount;
		*op = DL_ADD_CUMULATIVE;
		break;
	case DN_REFUND_FAILED:
		if (entry == DE_APPLIED) {
			after->singles -= entry_amount;
			after->failed += entry_amount;
			*op = DL_REVERSE;
		} else if (entry == DE_NONE) {
			after->failed += amount;
			*op = DL_ADD_FAILED;
		} else {
			return DM_KNOWN;
		}
		break;
	default:
		/* A status that moved no money, for a refund the ledger holds as succeeded. */
		if (entry == DE_APPLIED)
			return DM_KNOWN;
		break;
	}
	total = dec_ledger_total(after);
	if (total > paid)
		return DM_EXCEEDS;
	if (total == before)
		return DM_SAME;
	if (total < before)
		return DM_DOWN;
	return total == paid ? DM_UP_FULL : DM_UP_PARTIAL;
}

/* dec_mask_text - the names of the bits of mask, "any" when all of count are set */
static void
dec_mask_text(unsigned mask, int count, const char *const *names, char *buf, size_t len)
{
	size_t used = 0;
	int all = 1;

	for (int i = 0; i < count; i++)
		all &= (mask & B(i)) != 0;
	if (all) {
		snprintf(buf, len, "any");
		return;
	}
	buf[0] = '\0';
	for (int i = 0; i < count && used < len; i++)
		if (mask & B(i))
			used += (size_t)snprintf(buf + used, len - used, "%s%s", used ? ", " : "",
			                         names[i]);
}

void
dec_table_markdown(FILE *fp)
{
	char n[160], s[160], t[160], m[200], o[80];

	fprintf(fp, "| # | note | order | trade | amount | action | outcome | alert |\n");
	fprintf(fp, "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
	for (size_t i = 0; i < sizeof(rules) / sizeof(rules[0]); i++) {
		const struct dec_rule *r = &rules[i];

		dec_mask_text(r->notes, DN_COUNT, note_names, n, sizeof(n));
		dec_mask_text(r->states, DS_COUNT, state_names, s, sizeof(s));
		dec_mask_text(r->trades, DT_COUNT, trade_names, t, sizeof(t));
		dec_mask_text(r->money, DM_COUNT, money_names, m, sizeof(m));
		/* A retry leaves the row pending; its rule names the reason instead. */
		if (r->action == DX_RETRY)
			snprintf(o, sizeof(o), "retry: %s", r->outcome);
		else
			snprintf(o, sizeof(o), "`%s`", r->outcome);
		fprintf(fp, "| %zu | %s | %s | %s | %s | %s | %s | %s |\n", i + 1, n, s, t, m,
		        dec_action_name(r->action), o, r->alert ? r->alert : "-");
	}
}
