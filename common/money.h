/*
 * money - exact amounts as int64 minor units, parsed from and formatted to decimal strings.
 *
 * Payment channels send amounts either as decimal strings in major units (Alipay
 * "total_amount=88.88") or as integers in minor units (WeChat "total":8888, Stripe
 * "amount":8888). Floating point never appears: every amount is an int64 count of minor units
 * and every conversion is exact or rejected.
 */
#ifndef PAYCB_MONEY_H
#define PAYCB_MONEY_H

#include <stddef.h>
#include <stdint.h>

/*
 * The largest amount we accept, in minor units: 10^15 (ten trillion yuan or dollars). It is far
 * above any real payment and far below INT64_MAX, so sums of a few amounts cannot overflow.
 */
#define MONEY_MAX_MINOR 1000000000000000LL

/* The longest string the parsers look at; anything longer is rejected before parsing. */
#define MONEY_STR_MAX 32

/* The largest scale (fraction digits) the parsers and the formatter accept. */
#define MONEY_SCALE_MAX 6

/*
 * Parses an exact decimal amount in major units ("88.88", "0.10", "100") with at most
 * `scale` fraction digits into minor units (10^scale per major unit). Grammar:
 * ("0" | [1-9][0-9]*) ( "." [0-9]{1,scale} )?, so "", "1.", ".5", "-0.01", "+1", "1e3", " 1",
 * "1 " and "01" are rejected, as are more than `scale` fraction digits and values above
 * MONEY_MAX_MINOR. err gets a message naming the problem, e.g.
 * `amount "1.234": more than 2 decimal places`. Returns 0 or -1.
 */
int money_parse_decimal(const char *s, int scale, int64_t *minor, char *err, size_t errlen);

/*
 * The same check without formatting: returns NULL on success, else a static text naming the
 * problem ("more than 2 decimal places" is reported as "too many decimal places"). Callers
 * that must not echo input (the notification verifiers) use this instead.
 */
const char *money_parse_decimal_why(const char *s, int scale, int64_t *minor);

/* Parses a non-negative integer count of minor units ("8888"); "0" is allowed, "08" is not. */
int money_parse_minor(const char *s, int64_t *minor, char *err, size_t errlen);

/*
 * Formats minor units as a decimal string with `scale` fraction digits ("88.88", "-0.05",
 * "100" for scale 0), for binding to SQL DECIMAL columns. Returns 0, or -1 if the scale is
 * out of range or buf is too small.
 */
int money_format(int64_t minor, int scale, char *buf, size_t len);

/*
 * Exponent of an ISO 4217 currency code, case-insensitive: 2 for most (CNY, USD, EUR, ...),
 * 0 for zero-decimal currencies (JPY, KRW, VND and the rest of Stripe's zero-decimal list),
 * -1 for unknown codes, for three-decimal currencies (BHD, KWD, ...: not supported in v1,
 * because no channel we serve uses them and Stripe requires rounding rules for them) and for
 * currencies whose ISO and Stripe exponents disagree (ISK).
 */
int money_currency_scale(const char *iso);

#endif
