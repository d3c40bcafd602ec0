/*
 * sim_conf_tree - writing paycb configuration files, for paycb-sim and for the tests
 * (tests/support/harness.c): a libconfig tree built from a loaded configuration, settings
 * copied or added from libconfig text, and the file written whole or not at all. The
 * simulator's merchants and overrides on top of that are sim_conf_write's (sim.h).
 */
#ifndef PAYCB_SIM_CONF_TREE_H
#define PAYCB_SIM_CONF_TREE_H

#include <libconfig.h>
#include <stddef.h>

#include "conf.h"

/*
 * Adds every setting of cf under root, as conf_table describes them: optional groups only when
 * present, strings only when set. Returns 0 or -1.
 */
int sim_conf_tree(config_setting_t *root, const struct conf *cf);
/*
 * Adds each top-level setting of the libconfig text to root, replacing one of the same name.
 * Returns 0 or -1 with err.
 */
int sim_conf_add_text(config_setting_t *root, const char *text, char *err, size_t errlen);
/*
 * A deep copy of src as the member name of parent (name NULL in lists and arrays). Floating-point
 * settings are refused: paycb has none, so one is a typo. Returns 0 or -1.
 */
int sim_conf_copy(config_setting_t *parent, const char *name, const config_setting_t *src);
/* Writes c to out through out.tmp and a rename, mode 0644. Returns 0 or -1 with err. */
int sim_conf_save(config_t *c, const char *out, char *err, size_t errlen);

#endif
