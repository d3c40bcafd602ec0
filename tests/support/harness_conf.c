/*
 * harness_conf - the configuration written back for daemons started by tests (see
 * harness.h), by the simulator's configuration writer (tools/sim/sim_conf_tree.c), so both
 * write alike.
 *
 * Apart from harness.c because it stands on the simulator's archive: a test that starts no
 * daemon links neither (Makefile, TEST_LIBS_).
 */
#include "harness.h"

#include <stdio.h>

#include "sim_conf_tree.h"

int
harness_write_conf(const struct conf *cf, const char *path, const char *extra)
{
	char err[512] = "";
	config_t c;
	int rc = -1;

	config_init(&c);
	if (sim_conf_tree(config_root_setting(&c), cf) != 0) {
		snprintf(err, sizeof(err), "cannot build the configuration for %s", path);
		goto done;
	}
	if (extra != NULL &&
	    sim_conf_add_text(config_root_setting(&c), extra, err, sizeof(err)) != 0)
		goto done;
	rc = sim_conf_save(&c, path, err, sizeof(err));
done:
	if (rc != 0)
		printf("# harness: %s\n", err);
	config_destroy(&c);
	return rc;
}
