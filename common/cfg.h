/*
 * cfg - table-driven validation of a libconfig file.
 *
 * A program describes its settings as a tree of tables (struct cfg_setting). cfg_load()
 * parses the file, rejects every setting the tables do not name, checks types and bounds,
 * applies defaults, checks that named files are readable, and stores the values at their
 * offsets in a caller's struct. All errors are collected, each naming the file, the line and
 * the setting, so one run of `-n` shows every mistake.
 */
#ifndef PAYCB_CFG_H
#define PAYCB_CFG_H

#include <stddef.h>
#include <stdio.h>

#define CFG_EX_CONFIG 78 /* sysexits(3) EX_CONFIG */
#define CFG_LIST_MAX  16

enum cfg_type {
	CFG_INT,        /* long long */
	CFG_BOOL,       /* int */
	CFG_STR,        /* char * (owned) */
	CFG_INT_LIST,   /* struct cfg_ints */
	CFG_STR_LIST,   /* struct cfg_strs */
	CFG_GROUP,      /* nested table at off; present flag at count_off */
	CFG_GROUP_LIST, /* array of elem_size structs: pointer at off, int count at count_off */
};

/* Flags. */
#define CFGF_FILE     0x1 /* a path (or list of paths) that must be a readable file */
#define CFGF_REQUIRED 0x2 /* a group that must be present */
#define CFGF_NONEMPTY 0x4 /* a string or list that must not be empty */
#define CFGF_NAME     0x8 /* a string (or each string of a list) of [A-Za-z0-9._-] only */

struct cfg_ints {
	int n;
	long long v[CFG_LIST_MAX];
};

struct cfg_strs {
	int n;
	char *v[CFG_LIST_MAX];
};

struct cfg_setting {
	const char *name;
	enum cfg_type type;
	const char *def; /* default as text; NULL = no default (required for scalars) */
	long long min, max;
	size_t off;
	unsigned flags;
	unsigned progs; /* CFGF_FILE checks apply only to these programs (bit mask); 0 = all */
	const struct cfg_setting *sub; /* CFG_GROUP, CFG_GROUP_LIST: the element table */
	size_t elem_size;              /* CFG_GROUP_LIST */
	size_t count_off;              /* CFG_GROUP: int present; CFG_GROUP_LIST: int count */
	const char *doc;
};

/*
 * One setting per line in a table: an integer within [lo, hi], a string (flags fl, file
 * checks for programs pr), a boolean, and the end of a table. off is the value's offset in
 * the struct the table fills; d its default as text (NULL: required).
 */
#define CFG_SET_INT(n, d, lo, hi, off, doc)                                                        \
	{                                                                                          \
		n, CFG_INT, d, lo, hi, off, 0, 0, NULL, 0, 0, doc                                  \
	}
#define CFG_SET_STR(n, d, off, fl, pr, doc)                                                        \
	{                                                                                          \
		n, CFG_STR, d, 0, 0, off, fl, pr, NULL, 0, 0, doc                                  \
	}
#define CFG_SET_BOOL(n, d, off, doc)                                                               \
	{                                                                                          \
		n, CFG_BOOL, d, 0, 0, off, 0, 0, NULL, 0, 0, doc                                   \
	}
#define CFG_SET_END                                                                                \
	{                                                                                          \
		NULL, 0, NULL, 0, 0, 0, 0, 0, NULL, 0, 0, NULL                                     \
	}

struct cfg_errors {
	int n;
	char text[4096];
};

/*
 * Loads file into out (a zeroed struct described by tab) for the program mask prog.
 * Returns the number of errors (0 = valid); the messages are in errs.
 */
int cfg_load(const char *file, const struct cfg_setting *tab, void *out, unsigned prog,
             struct cfg_errors *errs);
/* Frees the strings and arrays cfg_load allocated in out. */
void cfg_free(const struct cfg_setting *tab, void *out);

/*
 * cfg_read_file - the one reader of key, secret and vector files: the whole regular file
 * path, at most max bytes, into a new buffer to free with a NUL after the data (wipe a
 * secret's first). When secret is set, a file readable or writable by group or others, or
 * owned by neither this user nor root, is refused (cfg_secret_perms), as ssh refuses such
 * private keys. Returns 0, or -1 with err naming the file and the problem.
 */
int cfg_read_file(const char *path, size_t max, int secret, char **buf, size_t *len, char *err,
                  size_t errlen);

/*
 * Reads a secret file of at most 64 KiB (cfg_read_file) into a NUL-terminated buffer,
 * dropping one trailing newline ("\n", "\r\n" or "\r"); an empty secret is refused.
 */
int cfg_read_secret(const char *path, char **out, size_t *len, char *err, size_t errlen);

/* The same check by path, for the daemons' check of every secret at startup. */
int cfg_secret_file_ok(const char *path, char *err, size_t errlen);

/*
 * Calls fn(path, arg) once for each setting whose value differs between a and b, two structs
 * loaded from tab ("ingest.listen_port", "merchants[1].stripe.secret_files"). A group list of
 * another length, or an optional group present in only one of them, is one difference named
 * by its own path.
 */
void cfg_diff(const struct cfg_setting *tab, const void *a, const void *b,
              void (*fn)(const char *path, void *arg), void *arg);

/*
 * Writes the documentation table (Markdown) of tab to fp, one row per setting, so
 * docs/config.md can be checked against the code.
 */
void cfg_doc(const struct cfg_setting *tab, const char *prefix, FILE *fp);

#endif
