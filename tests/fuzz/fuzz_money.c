/*
 * fuzz_money - the money parser: whatever it accepts must format back to the same value.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "money.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	char s[64], out[64], err[128];
	int64_t v, w;

	if (len >= sizeof(s))
		return 0;
	memcpy(s, data, len);
	s[len] = '\0';
	for (int scale = 0; scale <= 2; scale += 2) {
		if (money_parse_decimal(s, scale, &v, err, sizeof(err)) == 0) {
			if (v < 0 || money_format(v, scale, out, sizeof(out)) < 0 ||
			    money_parse_decimal(out, scale, &w, err, sizeof(err)) != 0 || v != w)
				abort();
		}
	}
	if (money_parse_minor(s, &v, err, sizeof(err)) == 0 && v < 0)
		abort();
	return 0;
}
