/*
 * fuzz_form - form-urlencoded decoding: a decoded form encodes and decodes back to the same
 * pairs.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "form.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct form f, g;
	char err[128], *enc;

	memset(&f, 0, sizeof(f));
	memset(&g, 0, sizeof(g));
	if (form_decode(data, len, &f, err, sizeof(err)) == 0) {
		if ((enc = form_encode(&f)) == NULL)
			abort();
		if (form_decode((const uint8_t *)enc, strlen(enc), &g, err, sizeof(err)) != 0)
			abort();
		free(enc);
	}
	form_free(&f);
	form_free(&g);
	return 0;
}
