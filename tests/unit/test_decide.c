/*
 * test_decide - the processor's decision table (processor/processor_decide.c) row by row,
 * its totality, and the refund ledger's arithmetic.
 *
 * Every rule of the table has at least one case here that must select it, with the action,
 * outcome and alert the docs promise. Every combination the transactions can produce must
 * be decided by a rule before the catch-all, so "decision_unexpected" is only reached by
 * combinations that cannot happen. The ledger cases replay real channel sequences: Stripe's
 * two refund representations in either order, a refund that fails after it succeeded,
 * Alipay's cumulative totals out of order.
 *
 * `test_decide --table` prints the table as docs/processor.md carries it (make docs, and
 * tests/docs/test_decision_doc.sh compares the two).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "processor_decide.h"

struct rule_case {
	int rule; /* 1-based, as numbered in the docs */
	struct dec_in in;
	enum dec_action action;
	const char *outcome;
	const char *alert;
};

#define C(r, n, s, t, m, a, o, al)                                                                 \
	{                                                                                          \
		r, {n, s, t, m}, a, o, al                                                          \
	}

static const struct rule_case cases[] = {
    C(1, DN_PAY, DS_MISSING, DT_ORDER_NONE, DM_NA, DX_RETRY, "order not found", NULL),
    C(2, DN_PAY, DS_CLOSED, DT_OTHER, DM_EQUAL, DX_REQUEST_REFUND, "paid_after_close",
      "paid_after_close"),
    /* A CLOSED order is refunded whatever amount or currency the payment carries. */
    C(2, DN_PAY, DS_CLOSED, DT_OTHER, DM_DIFFERS, DX_REQUEST_REFUND, "paid_after_close",
      "paid_after_close"),
    C(2, DN_PAY, DS_CLOSED, DT_OTHER, DM_CURRENCY, DX_REQUEST_REFUND, "paid_after_close",
      "paid_after_close"),
    C(3, DN_PAY, DS_PENDING, DT_ORDER_NONE, DM_CURRENCY, DX_DEAD, "currency_mismatch",
      "currency_mismatch"),
    C(4, DN_PAY, DS_PENDING, DT_ORDER_NONE, DM_DIFFERS, DX_DEAD, "amount_mismatch",
      "amount_mismatch"),
    C(5, DN_PAY, DS_PENDING, DT_ORDER_NONE, DM_EQUAL, DX_MARK_PAID, "paid", NULL),
    C(6, DN_PAY, DS_PAID, DT_SAME, DM_EQUAL, DX_NOTHING, "duplicate", NULL),
    C(6, DN_PAY, DS_REFUNDED, DT_SAME, DM_EQUAL, DX_NOTHING, "duplicate", NULL),
    C(7, DN_PAY, DS_PAID, DT_SAME, DM_DIFFERS, DX_DEAD, "amount_mismatch", "amount_mismatch"),
    C(8, DN_PAY, DS_PAID, DT_ORDER_NONE, DM_EQUAL, DX_CONFIRM_PAID, "paid_confirmed", NULL),
    C(9, DN_PAY, DS_PAID, DT_ORDER_NONE, DM_DIFFERS, DX_CONFIRM_PAID, "paid_confirmed",
      "amount_mismatch"),
    /* A second payment of another amount on a PAID order is paid twice, not a mismatch. */
    C(10, DN_PAY, DS_PAID, DT_OTHER, DM_DIFFERS, DX_REQUEST_REFUND, "paid_twice", "paid_twice"),
    C(10, DN_PAY, DS_REFUNDING, DT_OTHER, DM_EQUAL, DX_REQUEST_REFUND, "paid_twice", "paid_twice"),
    /* A status that moved no money, for a refund that succeeded before: delivered late. */
    C(11, DN_REFUND_ABNORMAL, DS_REFUNDED, DT_SAME, DM_KNOWN, DX_NOTHING, "duplicate", NULL),
    C(11, DN_REFUND_CLOSED, DS_REFUNDING, DT_ORDER_NONE, DM_KNOWN, DX_NOTHING, "duplicate", NULL),
    C(12, DN_REFUND_ABNORMAL, DS_PAID, DT_SAME, DM_SAME, DX_NOTHING, "refund_abnormal",
      "refund_abnormal"),
    C(12, DN_REFUND_ABNORMAL, DS_MISSING, DT_ORDER_NONE, DM_NA, DX_NOTHING, "refund_abnormal",
      "refund_abnormal"),
    C(13, DN_REFUND_CLOSED, DS_REFUNDING, DT_SAME, DM_SAME, DX_NOTHING, "refund_closed",
      "refund_closed"),
    C(14, DN_REFUND_UNKNOWN, DS_PAID, DT_SAME, DM_SAME, DX_DEAD, "refund_status_unknown",
      "refund_status_unknown"),
    C(15, DN_REFUND, DS_MISSING, DT_ORDER_NONE, DM_NA, DX_RETRY, "order not found", NULL),
    C(16, DN_REFUND, DS_PAID, DT_OTHER, DM_REQ_MATCH, DX_SETTLE, "refund_other_payment", NULL),
    /* Whatever the order's state: a CLOSED order's paid-after-close refund settles. */
    C(16, DN_REFUND_TOTAL, DS_CLOSED, DT_OTHER, DM_REQ_MATCH, DX_SETTLE, "refund_other_payment",
      NULL),
    C(17, DN_REFUND, DS_CLOSED, DT_OTHER, DM_REQ_DIFFERS, DX_SETTLE, "refund_other_payment",
      "refund_request_mismatch"),
    C(18, DN_REFUND, DS_PAID, DT_OTHER, DM_REQ_NONE, DX_SETTLE, "refund_before_payment", NULL),
    C(19, DN_REFUND_TOTAL, DS_PAID, DT_OTHER, DM_REQ_SETTLED, DX_NOTHING, "duplicate", NULL),
    C(20, DN_REFUND_FAILED, DS_PAID, DT_OTHER, DM_REQ_SETTLED, DX_REOPEN, "refund_reversed",
      "refund_reversed"),
    C(21, DN_REFUND_FAILED, DS_CLOSED, DT_OTHER, DM_REQ_MATCH, DX_NOTHING, "refund_failed",
      "refund_failed"),
    C(22, DN_REFUND, DS_PENDING, DT_ORDER_NONE, DM_UP_FULL, DX_RETRY, "order not paid (PENDING)",
      NULL),
    C(23, DN_REFUND, DS_CLOSED, DT_ROW_NONE, DM_UP_FULL, DX_DEAD, "refund_unmatched",
      "refund_unmatched"),
    C(24, DN_REFUND, DS_PAID, DT_SAME, DM_CURRENCY, DX_DEAD, "currency_mismatch",
      "currency_mismatch"),
    C(25, DN_REFUND, DS_REFUNDING, DT_SAME, DM_KNOWN, DX_NOTHING, "duplicate", NULL),
    C(25, DN_REFUND_FAILED, DS_PAID, DT_SAME, DM_KNOWN, DX_NOTHING, "duplicate", NULL),
    C(26, DN_REFUND, DS_REFUNDED, DT_SAME, DM_EXCEEDS, DX_DEAD, "amount_mismatch",
      "amount_mismatch"),
    C(27, DN_REFUND, DS_PAID, DT_SAME, DM_UP_PARTIAL, DX_LEDGER, "refund_partial", NULL),
    /* The merchant marked the order paid without a trade: its refunds are still its own. */
    C(27, DN_REFUND_TOTAL, DS_PAID, DT_ORDER_NONE, DM_UP_PARTIAL, DX_LEDGER, "refund_partial",
      NULL),
    C(28, DN_REFUND, DS_REFUNDING, DT_SAME, DM_UP_FULL, DX_LEDGER, "refunded", NULL),
    C(29, DN_REFUND_TOTAL, DS_REFUNDING, DT_SAME, DM_SAME, DX_LEDGER, "refund_covered", NULL),
    C(30, DN_REFUND_FAILED, DS_REFUNDED, DT_SAME, DM_DOWN, DX_LEDGER, "refund_reversed",
      "refund_reversed"),
    C(31, DN_REFUND_FAILED, DS_PAID, DT_SAME, DM_SAME, DX_LEDGER, "refund_failed", "refund_failed"),
    /* Combinations that cannot happen end dead and alarmed. */
    C(32, DN_PAY, DS_PAID, DT_SAME, DM_DOWN, DX_DEAD, "decision_unexpected", "decision_unexpected"),
    C(32, DN_REFUND, DS_PAID, DT_SAME, DM_DOWN, DX_DEAD, "decision_unexpected",
      "decision_unexpected"),
};

static void
every_rule_decides_its_cases(void **state)
{
	size_t n, i;
	const struct dec_rule *rules = dec_rules(&n);
	int seen[64] = {0};

	(void)state;
	assert_true(n < 64);
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rule_case *c = &cases[i];
		const struct dec_rule *r = dec_decide(&c->in);

		printf("# case %zu: %s %s %s %s -> rule %td\n", i, dec_note_name(c->in.note),
		       dec_state_name(c->in.state), dec_trade_name(c->in.trade),
		       dec_money_name(c->in.money), r - rules + 1);
		assert_int_equal(r - rules + 1, c->rule);
		assert_int_equal(r->action, c->action);
		assert_string_equal(r->outcome, c->outcome);
		if (c->alert == NULL)
			assert_null(r->alert);
		else
			assert_string_equal(r->alert, c->alert);
		seen[c->rule] = 1;
	}
	/* The table has no row without a case. */
	for (i = 1; i <= n; i++) {
		if (!seen[i])
			printf("# rule %zu has no case\n", i);
		assert_true(seen[i]);
	}
}

static void
every_possible_combination_has_a_rule(void **state)
{
	size_t n, possible = 0;
	const struct dec_rule *rules = dec_rules(&n);

	(void)state;
	for (int a = 0; a < DN_COUNT; a++)
		for (int b = 0; b < DS_COUNT; b++)
			for (int c = 0; c < DT_COUNT; c++)
				for (int d = 0; d < DM_COUNT; d++) {
					struct dec_in in = {(enum dec_note)a, (enum dec_state)b,
					                    (enum dec_trade)c, (enum dec_money)d};
					const struct dec_rule *r = dec_decide(&in);

					if (!dec_possible(&in))
						continue;
					possible++;
					if (r == &rules[n - 1])
						printf("# no rule for %s %s %s %s\n",
						       dec_note_name(in.note),
						       dec_state_name(in.state),
						       dec_trade_name(in.trade),
						       dec_money_name(in.money));
					assert_true(r != &rules[n - 1]);
					/* Money moves only on the order's own trade. */
					if (r->action == DX_LEDGER)
						assert_true(in.trade != DT_OTHER);
					if (r->action == DX_MARK_PAID)
						assert_int_equal(in.state, DS_PENDING);
				}
	printf("# %zu possible combinations, each decided by a rule\n", possible);
	assert_true(possible > 100);
}

static void
note_and_relations_from_rows(void **state)
{
	(void)state;
	assert_int_equal(dec_note_of("wxpay", "SUCCESS", 0), DN_REFUND);
	assert_int_equal(dec_note_of("wxpay", "ABNORMAL", 0), DN_REFUND_ABNORMAL);
	assert_int_equal(dec_note_of("wxpay", "CLOSED", 0), DN_REFUND_CLOSED);
	assert_int_equal(dec_note_of("wxpay", "PROCESSING", 0), DN_REFUND_UNKNOWN);
	assert_int_equal(dec_note_of("stripe", "succeeded", 0), DN_REFUND);
	assert_int_equal(dec_note_of("stripe", "failed", 0), DN_REFUND_FAILED);
	assert_int_equal(dec_note_of("stripe", "canceled", 0), DN_REFUND_FAILED);
	assert_int_equal(dec_note_of("stripe", "succeeded", 1), DN_REFUND_TOTAL);
	assert_int_equal(dec_note_of("alipay", "TRADE_SUCCESS", 1), DN_REFUND_TOTAL);
	assert_int_equal(dec_state_of("PAID", 1), DS_PAID);
	assert_int_equal(dec_state_of("CLOSED", 1), DS_CLOSED);
	assert_int_equal(dec_state_of("", 0), DS_MISSING);
	assert_int_equal(dec_trade_of(DS_PAID, "wxpay", "T1", "wxpay", "T1"), DT_SAME);
	assert_int_equal(dec_trade_of(DS_PAID, "wxpay", "T2", "wxpay", "T1"), DT_OTHER);
	assert_int_equal(dec_trade_of(DS_PAID, "alipay", "T1", "wxpay", "T1"), DT_OTHER);
	assert_int_equal(dec_trade_of(DS_PAID, "wxpay", "T1", "", ""), DT_ORDER_NONE);
	assert_int_equal(dec_trade_of(DS_CLOSED, "wxpay", "T1", "", ""), DT_OTHER);
	assert_int_equal(dec_trade_of(DS_PAID, "stripe", "", "stripe", "pi_1"), DT_ROW_NONE);
}

/* One step of a ledger sequence: the note, the refund's entry as the ledger holds it. */
struct step {
	enum dec_note note;
	const char *refund_no;
	int64_t amount;
	enum dec_money want;
	int64_t want_total;
};

/*
 * ledger_run - applies steps to an empty ledger of an order of paid minor units the way
 * the transaction does, keeping each refund number's entry, and checks each relation and
 * total.
 */
static void
ledger_run(const struct step *steps, size_t n, int64_t paid)
{
	struct dec_ledger l = {0, 0, 0}, after;
	struct {
		const char *no;
		enum dec_entry e;
		int64_t amount;
	} entries[16];
	size_t nentries = 0;
	int64_t before = 0;

	for (size_t i = 0; i < n; i++) {
		enum dec_entry e = DE_NONE;
		int64_t eamount = 0;
		enum dec_ledger_op op;
		enum dec_money m;
		size_t k;

		for (k = 0; k < nentries; k++)
			if (strcmp(entries[k].no, steps[i].refund_no) == 0) {
				e = entries[k].e;
				eamount = entries[k].amount;
				break;
			}
		m = dec_ledger_next(steps[i].note, &l, e, eamount, steps[i].amount, before, paid,
		                    &after, &op);
		printf("# step %zu %s %s: %s total %lld\n", i, dec_note_name(steps[i].note),
		       steps[i].refund_no, dec_money_name(m), (long long)dec_ledger_total(&after));
		assert_int_equal(m, steps[i].want);
		if (m == DM_KNOWN || m == DM_EXCEEDS)
			continue;
		assert_int_equal(dec_ledger_total(&after), steps[i].want_total);
		if (op == DL_REVERSE) {
			entries[k].e = DE_REVERSED;
		} else if (op != DL_NONE) {
			assert_true(nentries < 16);
			entries[nentries].no = steps[i].refund_no;
			entries[nentries].e = op == DL_ADD_FAILED ? DE_FAILED : DE_APPLIED;
			entries[nentries].amount = steps[i].amount;
			nentries++;
		}
		l = after;
		before = dec_ledger_total(&l);
	}
}

static void
stripe_both_representations_count_once_in_any_order(void **state)
{
	/* 100.00 paid; refunds of 40.00 (re_1) and 60.00 (re_2), each also told by
	 * charge.refunded with the charge's running total. */
	static const struct step a[] = {
	    {DN_REFUND, "re_1", 4000, DM_UP_PARTIAL, 4000},
	    {DN_REFUND_TOTAL, "ch_1:4000", 4000, DM_SAME, 4000},
	    {DN_REFUND_TOTAL, "ch_1:10000", 10000, DM_UP_FULL, 10000},
	    {DN_REFUND, "re_2", 6000, DM_SAME, 10000},
	    {DN_REFUND, "re_2", 6000, DM_KNOWN, 0},
	};
	static const struct step b[] = {
	    {DN_REFUND_TOTAL, "ch_1:4000", 4000, DM_UP_PARTIAL, 4000},
	    {DN_REFUND, "re_2", 6000, DM_UP_PARTIAL, 6000},
	    {DN_REFUND, "re_1", 4000, DM_UP_FULL, 10000},
	    {DN_REFUND_TOTAL, "ch_1:10000", 10000, DM_SAME, 10000},
	};
	/* A 4.00 refund told both ways counts 4.00, not 8.00, and the order stays REFUNDING. */
	static const struct step c[] = {
	    {DN_REFUND_TOTAL, "ch_1:400", 400, DM_UP_PARTIAL, 400},
	    {DN_REFUND, "re_1", 400, DM_SAME, 400},
	};

	(void)state;
	ledger_run(a, sizeof(a) / sizeof(a[0]), 10000);
	ledger_run(b, sizeof(b) / sizeof(b[0]), 10000);
	ledger_run(c, sizeof(c) / sizeof(c[0]), 1000);
}

static void
a_refund_failing_after_success_is_reversed(void **state)
{
	static const struct step a[] = {
	    {DN_REFUND, "re_1", 4000, DM_UP_PARTIAL, 4000},
	    {DN_REFUND_TOTAL, "ch_1:4000", 4000, DM_SAME, 4000},
	    {DN_REFUND_FAILED, "re_1", 4000, DM_DOWN, 0},
	    {DN_REFUND_FAILED, "re_1", 4000, DM_KNOWN, 0},
	    /* A new refund after the failure counts from zero. */
	    {DN_REFUND, "re_2", 3000, DM_UP_PARTIAL, 3000},
	    {DN_REFUND_TOTAL, "ch_1:3000", 3000, DM_SAME, 3000},
	};
	/* The failure arrives first: the later success copy is a known entry, never applied. */
	static const struct step b[] = {
	    {DN_REFUND_FAILED, "re_1", 4000, DM_SAME, 0},
	    {DN_REFUND, "re_1", 4000, DM_KNOWN, 0},
	    {DN_REFUND_TOTAL, "ch_1:4000", 4000, DM_SAME, 0},
	};
	/* A full refund reversed brings the order back from REFUNDED. */
	static const struct step c[] = {
	    {DN_REFUND, "re_1", 10000, DM_UP_FULL, 10000},
	    {DN_REFUND_FAILED, "re_1", 10000, DM_DOWN, 0},
	};
	/* WeChat Pay: ABNORMAL before SUCCESS changes nothing; an ABNORMAL or CLOSED delivered
	 * after the SUCCESS of its refund is known, never a new fact. */
	static const struct step d[] = {
	    {DN_REFUND_ABNORMAL, "503", 10000, DM_SAME, 0},
	    {DN_REFUND, "503", 10000, DM_UP_FULL, 10000},
	    {DN_REFUND_ABNORMAL, "503", 10000, DM_KNOWN, 0},
	    {DN_REFUND_CLOSED, "503", 10000, DM_KNOWN, 0},
	    {DN_REFUND_CLOSED, "504", 10000, DM_SAME, 10000},
	};

	(void)state;
	ledger_run(a, sizeof(a) / sizeof(a[0]), 10000);
	ledger_run(b, sizeof(b) / sizeof(b[0]), 10000);
	ledger_run(c, sizeof(c) / sizeof(c[0]), 10000);
	ledger_run(d, sizeof(d) / sizeof(d[0]), 10000);
}

static void
cumulative_totals_out_of_order_and_overflow(void **state)
{
	/* Alipay: refund_fee is the trade's refunded total; an older total adds nothing. */
	static const struct step a[] = {
	    {DN_REFUND_TOTAL, "B2", 3550, DM_UP_PARTIAL, 3550},
	    {DN_REFUND_TOTAL, "B1", 1000, DM_SAME, 3550},
	    {DN_REFUND_TOTAL, "B3", 10000, DM_UP_FULL, 10000},
	    {DN_REFUND_TOTAL, "B4", 10001, DM_EXCEEDS, 0},
	};
	/* WeChat Pay: partial refunds add up exactly; one too many exceeds. */
	static const struct step b[] = {
	    {DN_REFUND, "R1", 3001, DM_UP_PARTIAL, 3001},
	    {DN_REFUND, "R2", 5887, DM_UP_FULL, 8888},
	    {DN_REFUND, "R3", 1, DM_EXCEEDS, 0},
	};

	(void)state;
	ledger_run(a, sizeof(a) / sizeof(a[0]), 10000);
	ledger_run(b, sizeof(b) / sizeof(b[0]), 8888);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(every_rule_decides_its_cases),
	    cmocka_unit_test(every_possible_combination_has_a_rule),
	    cmocka_unit_test(note_and_relations_from_rows),
	    cmocka_unit_test(stripe_both_representations_count_once_in_any_order),
	    cmocka_unit_test(a_refund_failing_after_success_is_reversed),
	    cmocka_unit_test(cumulative_totals_out_of_order_and_overflow),
	};

	if (argc > 1 && strcmp(argv[1], "--table") == 0) {
		dec_table_markdown(stdout);
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
