/*
 * test_money - exact amount parsing and formatting, and currency exponents.
 *
 * Each rejection also checks that the error message names the problem, because operators
 * read those messages to fix a channel's or a merchant's data.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "money.h"

struct accept_case {
	const char *s;
	int scale;
	int64_t want;
};

struct reject_case {
	const char *s;
	int scale;
	const char *want_in_err;
};

static void
test_decimal_accepts_exact_amounts(void **state)
{
	static const struct accept_case cases[] = {
	    {"88.88", 2, 8888},
	    {"0.10", 2, 10},
	    {"0.1", 2, 10},
	    {"100", 2, 10000},
	    {"0", 2, 0},
	    {"0.00", 2, 0},
	    {"0.01", 2, 1},
	    {"10000000000000", 2, 1000000000000000LL}, /* exactly MONEY_MAX_MINOR */
	    {"1099", 0, 1099},
	    {"0", 0, 0},
	    {"1.5", 1, 15},
	    {"1.234", 3, 1234},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[128] = "";
		int64_t v = -1;

		assert_int_equal(
		    money_parse_decimal(cases[i].s, cases[i].scale, &v, err, sizeof(err)), 0);
		assert_int_equal(v, cases[i].want);
		assert_null(money_parse_decimal_why(cases[i].s, cases[i].scale, &v));
	}
}

static void
test_decimal_rejects_with_named_problem(void **state)
{
	static const struct reject_case cases[] = {
	    {"", 2, "empty"},
	    {"1.", 2, "no digits after '.'"},
	    {".5", 2, "no digits before '.'"},
	    {"1.234", 2, "more than 2 decimal places"},
	    {"1.5", 0, "more than 0 decimal places"},
	    {"-0.01", 2, "not a plain decimal"},
	    {"+1", 2, "not a plain decimal"},
	    {"1e3", 2, "not a plain decimal"},
	    {" 1", 2, "not a plain decimal"},
	    {"1 ", 2, "not a plain decimal"},
	    {"1,00", 2, "not a plain decimal"},
	    {"1.2.3", 2, "not a plain decimal"},
	    {"0x10", 2, "not a plain decimal"},
	    {"01", 2, "leading zero"},
	    {"01.00", 2, "leading zero"},
	    {"00", 0, "leading zero"},
	    {"99999999999999999999", 2, "above the maximum"},
	    {"10000000000000.01", 2, "above the maximum"},
	    {"1000000000000001", 0, "above the maximum"},
	    {"123456789012345678901234567890123", 2, "too long"},
	    {"1", 7, "unsupported scale"},
	    {"1", -1, "unsupported scale"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char err[128] = "";
		int64_t v = 42;

		assert_int_equal(
		    money_parse_decimal(cases[i].s, cases[i].scale, &v, err, sizeof(err)), -1);
		assert_int_equal(v, 42); /* untouched on failure */
		if (strstr(err, cases[i].want_in_err) == NULL)
			fail_msg("\"%s\" scale %d: error \"%s\" lacks \"%s\"", cases[i].s,
			         cases[i].scale, err, cases[i].want_in_err);
		assert_non_null(money_parse_decimal_why(cases[i].s, cases[i].scale, &v));
	}
}

static void
test_decimal_error_quotes_the_input(void **state)
{
	char err[128];
	int64_t v;

	(void)state;
	assert_int_equal(money_parse_decimal("1.234", 2, &v, err, sizeof(err)), -1);
	assert_string_equal(err, "amount \"1.234\": more than 2 decimal places");
	/* Control bytes are not echoed raw into logs. */
	assert_int_equal(money_parse_decimal("1\n", 2, &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "\"1?\""));
	/* NULL is an error, not a crash, and err may be NULL too. */
	assert_int_equal(money_parse_decimal(NULL, 2, &v, NULL, 0), -1);
}

static void
test_minor_accepts_integers_only(void **state)
{
	static const char *const bad[] = {"",
	                                  "-1",
	                                  "+1",
	                                  "08",
	                                  "1.0",
	                                  "1e2",
	                                  " 8",
	                                  "8 ",
	                                  "0x1",
	                                  "1000000000000001",
	                                  "99999999999999999999"};
	char err[128];
	int64_t v;

	(void)state;
	assert_int_equal(money_parse_minor("8888", &v, err, sizeof(err)), 0);
	assert_int_equal(v, 8888);
	assert_int_equal(money_parse_minor("0", &v, err, sizeof(err)), 0);
	assert_int_equal(v, 0);
	assert_int_equal(money_parse_minor("1000000000000000", &v, err, sizeof(err)), 0);
	assert_int_equal(v, MONEY_MAX_MINOR);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		assert_int_equal(money_parse_minor(bad[i], &v, err, sizeof(err)), -1);
		assert_non_null(strstr(err, "amount \""));
	}
	assert_int_equal(money_parse_minor("1.0", &v, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not a plain decimal"));
}

static void
test_format_round_trips(void **state)
{
	static const struct accept_case cases[] = {
	    {"88.88", 2, 8888},
	    {"0.10", 2, 10},
	    {"100.00", 2, 10000},
	    {"0.00", 2, 0},
	    {"0.01", 2, 1},
	    {"1099", 0, 1099},
	    {"10000000000000.00", 2, MONEY_MAX_MINOR},
	};
	char buf[40];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int64_t v;

		assert_int_equal(money_format(cases[i].want, cases[i].scale, buf, sizeof(buf)), 0);
		assert_string_equal(buf, cases[i].s);
		assert_int_equal(money_parse_decimal(buf, cases[i].scale, &v, NULL, 0), 0);
		assert_int_equal(v, cases[i].want);
	}
	assert_int_equal(money_format(-5, 2, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "-0.05");
	assert_int_equal(money_format(INT64_MIN, 2, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "-92233720368547758.08");
}

static void
test_format_refuses_small_buffer_and_bad_scale(void **state)
{
	char buf[5];

	(void)state;
	assert_int_equal(money_format(8888, 2, buf, sizeof(buf)), -1); /* "88.88" needs 6 */
	assert_string_equal(buf, "");
	assert_int_equal(money_format(1, 7, buf, sizeof(buf)), -1);
	assert_int_equal(money_format(1, -1, buf, sizeof(buf)), -1);
	assert_int_equal(money_format(888, 2, buf, sizeof(buf)), 0);
	assert_string_equal(buf, "8.88");
}

static void
test_currency_scales(void **state)
{
	(void)state;
	assert_int_equal(money_currency_scale("CNY"), 2);
	assert_int_equal(money_currency_scale("usd"), 2);
	assert_int_equal(money_currency_scale("Eur"), 2);
	assert_int_equal(money_currency_scale("JPY"), 0);
	assert_int_equal(money_currency_scale("krw"), 0);
	assert_int_equal(money_currency_scale("VND"), 0);
	assert_int_equal(money_currency_scale("XPF"), 0);
	assert_int_equal(money_currency_scale("MGA"), 0); /* Stripe's exponent, not ISO's */
	/* Three-decimal currencies are not supported in v1, nor is ISK (ISO and Stripe differ). */
	assert_int_equal(money_currency_scale("KWD"), -1);
	assert_int_equal(money_currency_scale("BHD"), -1);
	assert_int_equal(money_currency_scale("ISK"), -1);
	assert_int_equal(money_currency_scale("XXX"), -1);
	assert_int_equal(money_currency_scale(""), -1);
	assert_int_equal(money_currency_scale("US"), -1);
	assert_int_equal(money_currency_scale("USDX"), -1);
	assert_int_equal(money_currency_scale("U$D"), -1);
	assert_int_equal(money_currency_scale(NULL), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_decimal_accepts_exact_amounts),
	    cmocka_unit_test(test_decimal_rejects_with_named_problem),
	    cmocka_unit_test(test_decimal_error_quotes_the_input),
	    cmocka_unit_test(test_minor_accepts_integers_only),
	    cmocka_unit_test(test_format_round_trips),
	    cmocka_unit_test(test_format_refuses_small_buffer_and_bad_scale),
	    cmocka_unit_test(test_currency_scales),
	};

	return cmocka_run_group_tests_name("money", tests, NULL, NULL);
}
