/*
 * cfg_diff - which settings differ between two structs loaded from one table (see cfg.h).
 *
 * A reload compares the running configuration with the file just read, so that the settings
 * a program cannot change while it runs (a listener's address, the database, the brokers) are
 * named in the reload's log line instead of being changed silently or ignored silently.
 */
#include "cfg.h"

#include <stdio.h>
#include <string.h>

struct cfg_diff_ctx {
	void (*fn)(const char *path, void *arg);
	void *arg;
};

static void cfg_diff_group(struct cfg_diff_ctx *, const struct cfg_setting *, const char *,
                           const char *, const char *);

/* cfg_str_eq - two owned strings, either of which may be NULL (an unset optional setting). */
static int
cfg_str_eq(const char *a, const char *b)
{
	return strcmp(a ? a : "", b ? b : "") == 0;
}

static int
cfg_lists_eq(const struct cfg_setting *t, const char *a, const char *b)
{
	if (t->type == CFG_INT_LIST) {
		const struct cfg_ints *x = (const void *)(a + t->off),
		                      *y = (const void *)(b + t->off);

		return x->n == y->n && memcmp(x->v, y->v, (size_t)x->n * sizeof(x->v[0])) == 0;
	} else {
		const struct cfg_strs *x = (const void *)(a + t->off),
		                      *y = (const void *)(b + t->off);

		for (int i = 0; x->n == y->n && i < x->n; i++)
			if (!cfg_str_eq(x->v[i], y->v[i]))
				return 0;
		return x->n == y->n;
	}
}

/* cfg_diff_one - one entry of a table: 1 when its value differs (groups recurse instead). */
static int
cfg_diff_one(struct cfg_diff_ctx *c, const struct cfg_setting *t, const char *a, const char *b,
             const char *path)
{
	char sub[256];

	switch (t->type) {
	case CFG_INT:
		return *(const long long *)(a + t->off) != *(const long long *)(b + t->off);
	case CFG_BOOL:
		return *(const int *)(a + t->off) != *(const int *)(b + t->off);
	case CFG_STR:
		return !cfg_str_eq(*(char *const *)(a + t->off), *(char *const *)(b + t->off));
	case CFG_INT_LIST:
	case CFG_STR_LIST:
		return !cfg_lists_eq(t, a, b);
	case CFG_GROUP:
		/* An optional group present in one file only is one difference, its own. */
		if (t->count_off != (size_t)-1 &&
		    *(const int *)(a + t->count_off) != *(const int *)(b + t->count_off))
			return 1;
		cfg_diff_group(c, t->sub, a + t->off, b + t->off, path);
		return 0;
	case CFG_GROUP_LIST: {
		const char *xa = *(char *const *)(a + t->off), *xb = *(char *const *)(b + t->off);
		int n = *(const int *)(a + t->count_off);

		if (n != *(const int *)(b + t->count_off))
			return 1;
		for (int i = 0; i < n; i++) {
			snprintf(sub, sizeof(sub), "%s[%d]", path, i);
			cfg_diff_group(c, t->sub, xa + (size_t)i * t->elem_size,
			               xb + (size_t)i * t->elem_size, sub);
		}
		return 0;
	}
	}
	return 0;
}

static void
cfg_diff_group(struct cfg_diff_ctx *c, const struct cfg_setting *tab, const char *a, const char *b,
               const char *prefix)
{
	char path[256];

	for (const struct cfg_setting *t = tab; t->name; t++) {
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", t->name);
		if (cfg_diff_one(c, t, a, b, path))
			c->fn(path, c->arg);
	}
}

void
cfg_diff(const struct cfg_setting *tab, const void *a, const void *b,
         void (*fn)(const char *path, void *arg), void *arg)
{
	struct cfg_diff_ctx c = {fn, arg};

	cfg_diff_group(&c, tab, a, b, "");
}
