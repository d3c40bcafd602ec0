/*
 * conf_boot - the configuration bootstrap of the tools (paycbctl, paycb-migrate, paycb-sim):
 * which file they read when none is named, and how they load it and report its errors.
 *
 * The daemons load theirs in daemon_main; the tools used to copy that code, each printing
 * errors its own way. One function keeps them alike: the same file, the same message, every
 * error on its own line naming the file and the line, and the same exit code.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cfg.h"
#include "conf.h"

const char *
conf_default_file(void)
{
	const char *env = getenv("PAYCB_CONF");

	return env && env[0] ? env : "/etc/paycb/paycb.conf";
}

int
conf_bootstrap(const char *file, unsigned prog, struct conf *cf, const char *name)
{
	struct cfg_errors errs;

	if (conf_load(file, prog, cf, &errs) == 0)
		return 0;
	/* The same form as the daemons' (daemon_main): errs.text is one error to a line. */
	fprintf(stderr, "%s: configuration errors:\n%s", name, errs.text);
	conf_free(cf);
	return CFG_EX_CONFIG;
}
