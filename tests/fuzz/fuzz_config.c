/*
 * fuzz_config - the configuration loader on arbitrary files: errors, never crashes or leaks.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "chan_conf.h"
#include "conf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t len);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t len)
{
	static char path[64];
	struct cfg_errors errs;
	struct conf cf;
	FILE *fp;

	if (path[0] == '\0') {
		if (chan_conf_use() != 0)
			abort();
		snprintf(path, sizeof(path), "/tmp/paycb-fuzz-config-%ld.conf", (long)getpid());
	}
	if ((fp = fopen(path, "wb")) == NULL)
		return 0;
	fwrite(data, 1, len, fp);
	fclose(fp);
	conf_load(path, PROG_INGEST, &cf, &errs);
	conf_free(&cf);
	/* Removed at once: a fuzzing run ends by a signal or a time limit, never by returning. */
	unlink(path);
	return 0;
}
