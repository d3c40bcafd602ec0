/*
 * money - exact decimal parsing and formatting of amounts in int64 minor units, and the
 * ISO 4217 exponents of the currencies we support.
 *
 * The parsers accept exactly one spelling per value, so two notifications that mean the same
 * amount also carry the same string, and nothing a hostile sender writes (signs, exponents,
 * spaces, leading zeros, huge digit runs) is silently reinterpreted.
 */
#include "money.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

enum money_problem {
	MP_OK = 0,
	MP_EMPTY,
	MP_TOO_LONG,
	MP_SCALE,
	MP_CHAR,
	MP_LEADING_ZERO,
	MP_NO_INT,
	MP_NO_FRAC,
	MP_FRAC_DIGITS,
	MP_RANGE,
};

static const char *const money_texts[] = {
    [MP_OK] = "ok",
    [MP_EMPTY] = "empty",
    [MP_TOO_LONG] = "too long",
    [MP_SCALE] = "unsupported scale",
    [MP_CHAR] = "not a plain decimal number (only digits and one '.')",
    [MP_LEADING_ZERO] = "leading zero",
    [MP_NO_INT] = "no digits before '.'",
    [MP_NO_FRAC] = "no digits after '.'",
    [MP_FRAC_DIGITS] = "too many decimal places",
    [MP_RANGE] = "above the maximum amount",
};

/*
 * money_scan - the one parser behind both public entry points. scale 0 makes it the integer
 * parser. The value is accumulated in minor units with an overflow check on every digit, so
 * the MONEY_MAX_MINOR bound is exact whatever the number of digits.
 */
static enum money_problem
money_scan(const char *s, int scale, int64_t *minor)
{
	size_t len, i = 0, nint = 0, nfrac = 0;
	int64_t v = 0;

	if (scale < 0 || scale > MONEY_SCALE_MAX)
		return MP_SCALE;
	if (s == NULL || s[0] == '\0')
		return MP_EMPTY;
	len = strnlen(s, MONEY_STR_MAX + 1);
	if (len > MONEY_STR_MAX)
		return MP_TOO_LONG;
	for (; i < len && s[i] >= '0' && s[i] <= '9'; i++, nint++) {
		if (v > (MONEY_MAX_MINOR - (s[i] - '0')) / 10)
			return MP_RANGE;
		v = v * 10 + (s[i] - '0');
	}
	if (i < len && s[i] == '.') {
		if (nint == 0)
			return MP_NO_INT;
		for (i++; i < len && s[i] >= '0' && s[i] <= '9'; i++, nfrac++) {
			if ((int)nfrac >= scale)
				return MP_FRAC_DIGITS;
			if (v > (MONEY_MAX_MINOR - (s[i] - '0')) / 10)
				return MP_RANGE;
			v = v * 10 + (s[i] - '0');
		}
		if (nfrac == 0)
			return i < len ? MP_CHAR : MP_NO_FRAC;
	}
	if (i != len)
		return MP_CHAR;
	if (nint == 0)
		return MP_CHAR;
	if (nint > 1 && s[0] == '0')
		return MP_LEADING_ZERO;
	/* Scale the value up for fraction digits that were not written ("88.8" is 8880). */
	for (; (int)nfrac < scale; nfrac++) {
		if (v > MONEY_MAX_MINOR / 10)
			return MP_RANGE;
		v *= 10;
	}
	*minor = v;
	return MP_OK;
}

/* money_report - formats `amount "<s>": <problem>` with the input made printable and short. */
static void
money_report(char *err, size_t errlen, const char *s, enum money_problem p, int scale)
{
	char shown[MONEY_STR_MAX + 1];
	size_t i;

	if (err == NULL || errlen == 0)
		return;
	for (i = 0; s != NULL && s[i] != '\0' && i < MONEY_STR_MAX; i++)
		shown[i] = isprint((unsigned char)s[i]) ? s[i] : '?';
	shown[i] = '\0';
	if (p == MP_FRAC_DIGITS)
		snprintf(err, errlen, "amount \"%s%s\": more than %d decimal places", shown,
		         s != NULL && s[i] != '\0' ? "..." : "", scale);
	else
		snprintf(err, errlen, "amount \"%s%s\": %s", shown,
		         s != NULL && s[i] != '\0' ? "..." : "", money_texts[p]);
}

int
money_parse_decimal(const char *s, int scale, int64_t *minor, char *err, size_t errlen)
{
	enum money_problem p = money_scan(s, scale, minor);

	if (p != MP_OK) {
		money_report(err, errlen, s, p, scale);
		return -1;
	}
	return 0;
}

const char *
money_parse_decimal_why(const char *s, int scale, int64_t *minor)
{
	enum money_problem p = money_scan(s, scale, minor);

	return p == MP_OK ? NULL : money_texts[p];
}

int
money_parse_minor(const char *s, int64_t *minor, char *err, size_t errlen)
{
	enum money_problem p = money_scan(s, 0, minor);

	/* With scale 0 a '.' can only fail as "too many decimal places"; say what it is. */
	if (p == MP_FRAC_DIGITS || p == MP_NO_FRAC || p == MP_NO_INT)
		p = MP_CHAR;
	if (p != MP_OK) {
		money_report(err, errlen, s, p, 0);
		return -1;
	}
	return 0;
}

int
money_format(int64_t minor, int scale, char *buf, size_t len)
{
	/* Work on the magnitude as unsigned so INT64_MIN has a representable absolute value. */
	uint64_t mag = minor < 0 ? (uint64_t)0 - (uint64_t)minor : (uint64_t)minor;
	uint64_t div = 1;
	int n;

	if (scale < 0 || scale > MONEY_SCALE_MAX || buf == NULL || len == 0)
		return -1;
	for (int i = 0; i < scale; i++)
		div *= 10;
	if (scale == 0)
		n = snprintf(buf, len, "%s%llu", minor < 0 ? "-" : "", (unsigned long long)mag);
	else
		n = snprintf(buf, len, "%s%llu.%0*llu", minor < 0 ? "-" : "",
		             (unsigned long long)(mag / div), scale,
		             (unsigned long long)(mag % div));
	if (n < 0 || (size_t)n >= len) {
		buf[0] = '\0';
		return -1;
	}
	return 0;
}

/*
 * Currency tables, upper case, three letters each, separated by spaces. The zero-decimal list
 * is Stripe's (docs.stripe.com/currencies), which includes MGA although ISO 4217 gives it 2:
 * Stripe amounts are what we receive in minor units, so its exponent is the one that must be
 * right. ISK is left out of both lists: ISO says 0 while Stripe represents it with 2, and an
 * amount off by a factor of 100 is worse than an unsupported currency.
 */
static const char money_zero_decimal[] =
    "BIF CLP DJF GNF JPY KMF KRW MGA PYG RWF UGX VND VUV XAF XOF XPF";
static const char money_two_decimal[] =
    "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BMD BND BOB BRL BSD BTN BWP BYN "
    "BZD CAD CDF CHF CNY COP CRC CUP CVE CZK DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS "
    "GIP GMD GTQ GYD HKD HNL HTG HUF IDR ILS INR IRR JMD KES KGS KHR KPW KYD KZT LAK LBP LKR "
    "LRD LSL MAD MDL MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD PAB "
    "PEN PGK PHP PKR PLN QAR RON RSD RUB SAR SBD SCR SDG SEK SGD SHP SLE SOS SRD SSP STN SVC "
    "SYP SZL THB TJS TMT TOP TRY TTD TWD TZS UAH USD UYU UZS VES WST XCD YER ZAR ZMW ZWL";

/* money_in_list - whether the upper-case code is one of the space-separated entries. */
static int
money_in_list(const char *list, const char code[4])
{
	for (const char *p = list; *p != '\0'; p += (p[3] == ' ') ? 4 : 3)
		if (memcmp(p, code, 3) == 0)
			return 1;
	return 0;
}

int
money_currency_scale(const char *iso)
{
	char code[4];

	if (iso == NULL)
		return -1;
	for (int i = 0; i < 3; i++) {
		if (!isalpha((unsigned char)iso[i]) || (unsigned char)iso[i] >= 0x80)
			return -1;
		code[i] = (char)toupper((unsigned char)iso[i]);
	}
	if (iso[3] != '\0')
		return -1;
	code[3] = '\0';
	if (money_in_list(money_zero_decimal, code))
		return 0;
	if (money_in_list(money_two_decimal, code))
		return 2;
	return -1;
}
