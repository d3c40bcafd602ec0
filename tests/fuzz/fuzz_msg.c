/*
 * fuzz_msg - the callback message decoder that processors run on whatever a topic holds.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "msg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	struct msg_callback m, m2;
	char buf[1024], err[256];
	int n;

	if (msg_callback_decode(data, len, &m, err, sizeof(err)) != 0)
		return 0;
	if ((n = msg_callback_encode(&m, buf, sizeof(buf))) < 0 ||
	    msg_callback_decode(buf, (size_t)n, &m2, err, sizeof(err)) != 0 || m.id != m2.id ||
	    strcmp(m.out_trade_no, m2.out_trade_no) != 0)
		abort();
	return 0;
}
