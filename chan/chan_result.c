/*
 * chan_result - the outcome names and chan_res, which every module of chan/ uses to classify
 * a call that ended (see chan_result.h for why results sit below the transport and client).
 */
#include <stdarg.h>
#include <stdio.h>

#include "chan_int.h"

const char *
chan_outcome_name(enum chan_outcome o)
{
	static const char *const n[] = {"ok", "final", "retry", "unknown", "forged"};

	return (unsigned)o < sizeof(n) / sizeof(n[0]) ? n[o] : "invalid";
}

int
chan_res(struct chan_result *r, enum chan_outcome o, const char *code, const char *fmt, ...)
{
	va_list ap;

	r->outcome = o;
	snprintf(r->code, sizeof(r->code), "%s", code != NULL ? code : "");
	va_start(ap, fmt);
	vsnprintf(r->detail, sizeof(r->detail), fmt, ap);
	va_end(ap);
	return o == CHAN_OK ? 0 : -1;
}
