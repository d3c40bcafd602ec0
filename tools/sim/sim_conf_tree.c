/*
 * sim_conf_tree - paycb configuration files as libconfig trees (see sim_conf_tree.h): built from a
 * loaded struct conf through the settings table, extended from libconfig text or by copying
 * settings, and written whole or not at all. paycb-sim's configuration writer (sim_conf.c)
 * and the tests' harness_write_conf both go through it.
 *
 * A tree rather than text: libconfig quotes the strings and marks the 64-bit integers, so a
 * value the struct holds comes back as the same value when a daemon loads the file.
 */
#include <errno.h>
#include <libconfig.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg.h"
#include "sim_conf_tree.h"

int
sim_conf_copy(config_setting_t *parent, const char *name, const config_setting_t *src)
{
	int type = config_setting_type(src);
	config_setting_t *dst = config_setting_add(parent, name, type);

	if (dst == NULL)
		return -1;
	switch (type) {
	case CONFIG_TYPE_INT:
		return config_setting_set_int(dst, config_setting_get_int(src)) == CONFIG_TRUE ? 0
		                                                                               : -1;
	case CONFIG_TYPE_INT64:
		return config_setting_set_int64(dst, config_setting_get_int64(src)) == CONFIG_TRUE
		           ? 0
		           : -1;
	case CONFIG_TYPE_BOOL:
		return config_setting_set_bool(dst, config_setting_get_bool(src)) == CONFIG_TRUE
		           ? 0
		           : -1;
	case CONFIG_TYPE_STRING:
		return config_setting_set_string(dst, config_setting_get_string(src)) == CONFIG_TRUE
		           ? 0
		           : -1;
	case CONFIG_TYPE_GROUP:
	case CONFIG_TYPE_ARRAY:
	case CONFIG_TYPE_LIST:
		for (int i = 0; i < config_setting_length(src); i++) {
			const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
			if (sim_conf_copy(dst,
			                  type == CONFIG_TYPE_GROUP ? config_setting_name(e) : NULL,
			                  e) != 0)
				return -1;
		}
		return 0;
	default:
		/* paycb has no floating-point settings; refusing them keeps typos visible. */
		return -1;
	}
}

/* add_int - name = v in g (name NULL in arrays), 64-bit only when v needs it (the L suffix). */
static int
add_int(config_setting_t *g, const char *name, long long v, int big)
{
	config_setting_t *s =
	    config_setting_add(g, name, big ? CONFIG_TYPE_INT64 : CONFIG_TYPE_INT);

	if (s == NULL)
		return -1;
	return (big ? config_setting_set_int64(s, v) : config_setting_set_int(s, (int)v)) ==
	               CONFIG_TRUE
	           ? 0
	           : -1;
}

static int
is_big(long long v)
{
	return v > INT_MAX || v < INT_MIN;
}

/* add_list - an integer or string list; a libconfig array holds one type, so any 64-bit
 * integer makes every element 64-bit. */
static int
add_list(config_setting_t *g, const struct cfg_setting *t, const char *p)
{
	config_setting_t *a = config_setting_add(g, t->name, CONFIG_TYPE_ARRAY);
	const struct cfg_ints *ints = (const struct cfg_ints *)p;
	const struct cfg_strs *strs = (const struct cfg_strs *)p;
	int big = 0;

	if (a == NULL)
		return -1;
	if (t->type == CFG_STR_LIST) {
		for (int i = 0; i < strs->n; i++)
			if (config_setting_set_string_elem(a, -1, strs->v[i]) == NULL)
				return -1;
		return 0;
	}
	for (int i = 0; i < ints->n; i++)
		big |= is_big(ints->v[i]);
	for (int i = 0; i < ints->n; i++)
		if (add_int(a, NULL, ints->v[i], big) != 0)
			return -1;
	return 0;
}

static int tree_group(config_setting_t *g, const struct cfg_setting *tab, const char *base);

/* tree_setting - one setting of a conf_table-described struct at base under g. */
static int
tree_setting(config_setting_t *g, const struct cfg_setting *t, const char *base)
{
	const char *p = base + t->off;
	config_setting_t *s;

	switch (t->type) {
	case CFG_INT:
		return add_int(g, t->name, *(const long long *)p, is_big(*(const long long *)p));
	case CFG_BOOL:
		s = config_setting_add(g, t->name, CONFIG_TYPE_BOOL);
		return s != NULL && config_setting_set_bool(s, *(const int *)p) == CONFIG_TRUE ? 0
		                                                                               : -1;
	case CFG_STR:
		if (*(char *const *)p == NULL)
			return 0;
		s = config_setting_add(g, t->name, CONFIG_TYPE_STRING);
		return s != NULL && config_setting_set_string(s, *(char *const *)p) == CONFIG_TRUE
		           ? 0
		           : -1;
	case CFG_INT_LIST:
	case CFG_STR_LIST:
		return add_list(g, t, p);
	case CFG_GROUP:
		/* An optional group (one with a present flag) is written only when present. */
		if (t->count_off != (size_t)-1 && !*(const int *)(base + t->count_off))
			return 0;
		s = config_setting_add(g, t->name, CONFIG_TYPE_GROUP);
		return s != NULL ? tree_group(s, t->sub, p) : -1;
	case CFG_GROUP_LIST: {
		const char *arr = *(char *const *)p;
		int n = *(const int *)(base + t->count_off);

		if (arr == NULL || n == 0)
			return 0;
		if ((s = config_setting_add(g, t->name, CONFIG_TYPE_LIST)) == NULL)
			return -1;
		for (int i = 0; i < n; i++) {
			config_setting_t *e = config_setting_add(s, NULL, CONFIG_TYPE_GROUP);

			if (e == NULL || tree_group(e, t->sub, arr + (size_t)i * t->elem_size) != 0)
				return -1;
		}
		return 0;
	}
	}
	return -1;
}

static int
tree_group(config_setting_t *g, const struct cfg_setting *tab, const char *base)
{
	for (const struct cfg_setting *t = tab; t->name; t++)
		if (tree_setting(g, t, base) != 0)
			return -1;
	return 0;
}

int
sim_conf_tree(config_setting_t *root, const struct conf *cf)
{
	return tree_group(root, conf_table, (const char *)cf);
}

int
sim_conf_add_text(config_setting_t *root, const char *text, char *err, size_t errlen)
{
	config_setting_t *src;
	config_t tmp;
	int rc = -1;

	config_init(&tmp);
	if (config_read_string(&tmp, text) != CONFIG_TRUE) {
		snprintf(err, errlen, "line %d: %s", config_error_line(&tmp),
		         config_error_text(&tmp) ? config_error_text(&tmp) : "cannot parse");
		goto done;
	}
	src = config_root_setting(&tmp);
	for (int i = 0; i < config_setting_length(src); i++) {
		const config_setting_t *e = config_setting_get_elem(src, (unsigned)i);
		const char *name = config_setting_name(e);

		if ((config_setting_get_member(root, name) != NULL &&
		     config_setting_remove(root, name) != CONFIG_TRUE) ||
		    sim_conf_copy(root, name, e) != 0) {
			snprintf(err, errlen, "cannot add setting %s", name);
			goto done;
		}
	}
	rc = 0;
done:
	config_destroy(&tmp);
	return rc;
}

int
sim_conf_save(config_t *c, const char *out, char *err, size_t errlen)
{
	char tmp[PATH_MAX];

	errno = 0;
	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", out) >= sizeof(tmp) ||
	    config_write_file(c, tmp) != CONFIG_TRUE || chmod(tmp, 0644) != 0 ||
	    rename(tmp, out) != 0) {
		snprintf(err, errlen, "cannot write %s: %s", out,
		         errno ? strerror(errno) : "too long");
		return -1;
	}
	return 0;
}
