/*
 * fuzz_alipay - the Alipay verifier and parser. Mode 0 feeds the raw form body (decoding,
 * the string to sign, rejection); mode 1 reads "key=value" lines, has the harness sign them
 * as Alipay would, and checks the parser behind a valid signature.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct fuzz_keys *k = fuzz_keys();
	struct notify n;
	char reason[256];

	if (len < 1 || len > 65536)
		return 0;
	if ((data[0] & 1) == 0) {
		notify_ali_verify_parse(&k->ali, data + 1, len - 1, &n, reason, sizeof(reason));
		return 0;
	}
	{
		char *copy = malloc(len), *save = NULL, *line, *body = NULL;
		const char *keys[32], *vals[32];
		size_t cnt = 0;

		if (copy == NULL)
			return 0;
		memcpy(copy, data + 1, len - 1);
		copy[len - 1] = '\0';
		for (line = strtok_r(copy, "\n", &save); line && cnt < 32;
		     line = strtok_r(NULL, "\n", &save)) {
			char *eq = strchr(line, '=');
			if (!eq)
				continue;
			*eq = '\0';
			keys[cnt] = line;
			vals[cnt++] = eq + 1;
		}
		if (notify_ali_sign(k->priv, keys, vals, cnt, &body) == 0)
			notify_ali_verify_parse(&k->ali, (const uint8_t *)body, strlen(body), &n,
			                        reason, sizeof(reason));
		free(body);
		free(copy);
	}
	return 0;
}
