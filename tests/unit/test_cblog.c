/*
 * test_cblog - the names of the two callback logs (common/cblog.c): the kind's name in
 * messages, its table, and the "cb42"/"rf7" reference that logs print and paycbctl reads.
 *
 * A reference is how an operator follows one callback through every program's log and
 * names it to paycbctl, so what matters is that a printed reference parses back to the
 * same row and that anything else is refused rather than read as some other row.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cblog.h"

static void
test_names_and_tables(void **state)
{
	enum cblog lg;

	(void)state;
	assert_string_equal(cblog_name(CBLOG_PAY), "pay");
	assert_string_equal(cblog_name(CBLOG_REFUND), "refund");
	assert_string_equal(cblog_table(CBLOG_PAY), "pay_callback_log");
	assert_string_equal(cblog_table(CBLOG_REFUND), "refund_callback_log");
	assert_int_equal(cblog_from_name("refund", &lg), 0);
	assert_int_equal(lg, CBLOG_REFUND);
	assert_int_equal(cblog_from_name("pay", &lg), 0);
	assert_int_equal(lg, CBLOG_PAY);
	assert_int_equal(cblog_from_name("Pay", &lg), -1);
	assert_int_equal(cblog_from_name("", &lg), -1);
}

static void
test_reference_round_trip(void **state)
{
	char buf[CBLOG_REF_MAX];
	unsigned long long id = 0;
	enum cblog lg;

	(void)state;
	assert_string_equal(cblog_ref(buf, sizeof(buf), CBLOG_PAY, 42), "cb42");
	assert_string_equal(cblog_ref(buf, sizeof(buf), CBLOG_REFUND, 7), "rf7");
	assert_int_equal(cblog_ref_parse("rf7", &lg, &id), 0);
	assert_int_equal(lg, CBLOG_REFUND);
	assert_int_equal(id, 7);
	assert_int_equal(cblog_ref_parse("cb42", &lg, &id), 0);
	assert_int_equal(lg, CBLOG_PAY);
	assert_int_equal(id, 42);
	/* A bare number is a payment row, as paycbctl has always read it. */
	assert_int_equal(cblog_ref_parse("42", &lg, &id), 0);
	assert_int_equal(lg, CBLOG_PAY);
	assert_int_equal(id, 42);
}

static void
test_reference_refuses_anything_else(void **state)
{
	unsigned long long id = 0;
	enum cblog lg;

	(void)state;
	assert_int_equal(cblog_ref_parse("", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("cb", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("cb0", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("cb42:", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("cb-1", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("xx42", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("rf1234567890123456789", &lg, &id), -1);
	assert_int_equal(cblog_ref_parse("rf123456789012345678", &lg, &id), 0);
	assert_int_equal(id, 123456789012345678ULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_names_and_tables),
	    cmocka_unit_test(test_reference_round_trip),
	    cmocka_unit_test(test_reference_refuses_anything_else),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
