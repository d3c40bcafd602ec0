/*
 * cfg - table-driven validation of a libconfig file (see cfg.h).
 *
 * The walk goes over the file and the tables together: every member of a group in the file
 * must be named by the group's table (so typos are errors, not silently ignored settings), and
 * every entry of the table is either found, defaulted or reported as missing.
 *
 * The files a setting names are read here too (cfg_read_file), so that every secret, key and
 * vector file goes through one bounded reader with one set of checks.
 */
#include "cfg.h"

#include <errno.h>
#include <libconfig.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

struct cfg_ctx {
	const char *file;
	unsigned prog;
	struct cfg_errors *errs;
	const config_setting_t *grp; /* the group being walked: a missing setting's line */
};

static void cfg_err(struct cfg_ctx *, const config_setting_t *, const char *, const char *, ...)
    __attribute__((format(printf, 4, 5)));

static void
cfg_err(struct cfg_ctx *c, const config_setting_t *s, const char *path, const char *fmt, ...)
{
	struct cfg_errors *e = c->errs;
	size_t used = strlen(e->text);
	char msg[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->n++;
	/* A missing setting has no line of its own; the group it is missing from has one. */
	if (s == NULL)
		s = c->grp;
	if (used + 1 < sizeof(e->text)) {
		if (s && config_setting_source_line(s) > 0)
			snprintf(e->text + used, sizeof(e->text) - used,
			         "%s:%d: setting '%s': %s\n", c->file,
			         config_setting_source_line(s), path, msg);
		else
			snprintf(e->text + used, sizeof(e->text) - used, "%s: setting '%s': %s\n",
			         c->file, path, msg);
	}
}

static void
cfg_check_file(struct cfg_ctx *c, const config_setting_t *s, const char *path,
               const struct cfg_setting *t, const char *file)
{
	if (!(t->flags & CFGF_FILE) || (t->progs && !(t->progs & c->prog)))
		return;
	if (access(file, R_OK) != 0)
		cfg_err(c, s, path, "cannot read file '%s': %s", file, strerror(errno));
}

/* cfg_is_name - whether s is made of letters, digits, '.', '_' and '-' only. */
static int
cfg_is_name(const char *s)
{
	for (; *s; s++)
		if (!((*s >= 'A' && *s <= 'Z') || (*s >= 'a' && *s <= 'z') ||
		      (*s >= '0' && *s <= '9') || *s == '.' || *s == '_' || *s == '-'))
			return 0;
	return 1;
}

static int
cfg_parse_int_text(const char *text, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(text, &end, 10);
	return (errno || *end != '\0') ? -1 : 0;
}

static void cfg_group(struct cfg_ctx *, const config_setting_t *, const struct cfg_setting *,
                      char *, const char *);

static void
cfg_scalar(struct cfg_ctx *c, const config_setting_t *s, const struct cfg_setting *t, char *base,
           const char *path)
{
	void *dst = base + t->off;
	long long v;

	switch (t->type) {
	case CFG_INT:
		if (s) {
			int ty = config_setting_type(s);
			if (ty != CONFIG_TYPE_INT && ty != CONFIG_TYPE_INT64) {
				cfg_err(c, s, path, "expected an integer");
				return;
			}
			v = config_setting_get_int64(s);
		} else if (t->def == NULL) {
			cfg_err(c, NULL, path, "required setting is missing");
			return;
		} else if (cfg_parse_int_text(t->def, &v) != 0) {
			cfg_err(c, NULL, path, "bad built-in default (a bug)");
			return;
		}
		if (v < t->min || v > t->max) {
			cfg_err(c, s, path, "value %lld is out of bounds [%lld, %lld]", v, t->min,
			        t->max);
			return;
		}
		*(long long *)dst = v;
		break;
	case CFG_BOOL:
		if (s) {
			if (config_setting_type(s) != CONFIG_TYPE_BOOL) {
				cfg_err(c, s, path, "expected true or false");
				return;
			}
			*(int *)dst = config_setting_get_bool(s);
		} else if (t->def == NULL) {
			cfg_err(c, NULL, path, "required setting is missing");
		} else {
			*(int *)dst = strcmp(t->def, "true") == 0;
		}
		break;
	case CFG_STR: {
		const char *str = t->def;
		if (s) {
			if (config_setting_type(s) != CONFIG_TYPE_STRING) {
				cfg_err(c, s, path, "expected a string");
				return;
			}
			str = config_setting_get_string(s);
		} else if (str == NULL) {
			cfg_err(c, NULL, path, "required setting is missing");
			return;
		}
		if ((t->flags & CFGF_NONEMPTY) && str[0] == '\0') {
			cfg_err(c, s, path, "must not be empty");
			return;
		}
		if ((long long)strlen(str) > (t->max > 0 ? t->max : 4096)) {
			cfg_err(c, s, path, "longer than %lld characters",
			        t->max > 0 ? t->max : 4096);
			return;
		}
		if ((t->flags & CFGF_NAME) && !cfg_is_name(str)) {
			cfg_err(c, s, path, "may hold only letters, digits, '.', '_' and '-'");
			return;
		}
		if (str[0] != '\0')
			cfg_check_file(c, s, path, t, str);
		*(char **)dst = strdup(str);
		break;
	}
	default:
		break;
	}
}

static void
cfg_list(struct cfg_ctx *c, const config_setting_t *s, const struct cfg_setting *t, char *base,
         const char *path)
{
	int n = s ? config_setting_length(s) : 0;
	char sub[256];

	if (s && config_setting_type(s) != CONFIG_TYPE_ARRAY &&
	    config_setting_type(s) != CONFIG_TYPE_LIST) {
		cfg_err(c, s, path, "expected a list [ ... ]");
		return;
	}
	if (n > CFG_LIST_MAX) {
		cfg_err(c, s, path, "more than %d entries", CFG_LIST_MAX);
		return;
	}
	if (t->type == CFG_INT_LIST) {
		struct cfg_ints *out = (struct cfg_ints *)(base + t->off);
		if (!s && t->def) {
			/* Defaults are written as space-separated integers. */
			char *dup = strdup(t->def), *save = NULL, *tok;
			out->n = 0;
			for (tok = strtok_r(dup, " ", &save); tok && out->n < CFG_LIST_MAX;
			     tok = strtok_r(NULL, " ", &save))
				out->v[out->n++] = strtoll(tok, NULL, 10);
			free(dup);
			return;
		}
		out->n = 0;
		for (int i = 0; i < n; i++) {
			config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
			snprintf(sub, sizeof(sub), "%s[%d]", path, i);
			if (config_setting_type(e) != CONFIG_TYPE_INT &&
			    config_setting_type(e) != CONFIG_TYPE_INT64) {
				cfg_err(c, e, sub, "expected an integer");
				continue;
			}
			long long v = config_setting_get_int64(e);
			if (v < t->min || v > t->max) {
				cfg_err(c, e, sub, "value %lld is out of bounds [%lld, %lld]", v,
				        t->min, t->max);
				continue;
			}
			out->v[out->n++] = v;
		}
	} else {
		struct cfg_strs *out = (struct cfg_strs *)(base + t->off);
		out->n = 0;
		for (int i = 0; i < n; i++) {
			config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
			snprintf(sub, sizeof(sub), "%s[%d]", path, i);
			if (config_setting_type(e) != CONFIG_TYPE_STRING) {
				cfg_err(c, e, sub, "expected a string");
				continue;
			}
			if ((t->flags & CFGF_NAME) &&
			    (!cfg_is_name(config_setting_get_string(e)) ||
			     config_setting_get_string(e)[0] == '\0' ||
			     (t->max > 0 &&
			      (long long)strlen(config_setting_get_string(e)) > t->max))) {
				cfg_err(c, e, sub,
				        "must be 1 to %lld letters, digits, '.', '_' or '-'",
				        t->max > 0 ? t->max : 4096);
				continue;
			}
			cfg_check_file(c, e, sub, t, config_setting_get_string(e));
			out->v[out->n++] = strdup(config_setting_get_string(e));
		}
	}
	if ((t->flags & CFGF_NONEMPTY) && n == 0 && (s || !t->def))
		cfg_err(c, s, path, "must have at least one entry");
}

static void
cfg_group_list(struct cfg_ctx *c, const config_setting_t *s, const struct cfg_setting *t,
               char *base, const char *path)
{
	int n = s ? config_setting_length(s) : 0;
	char sub[256];
	char *arr;

	if (s && config_setting_type(s) != CONFIG_TYPE_LIST) {
		cfg_err(c, s, path, "expected a list of groups ( { ... }, ... )");
		return;
	}
	if ((t->flags & CFGF_NONEMPTY) && n == 0) {
		cfg_err(c, s, path, "must have at least one entry");
		return;
	}
	arr = calloc((size_t)(n ? n : 1), t->elem_size);
	if (arr == NULL) {
		cfg_err(c, s, path, "out of memory");
		return;
	}
	*(char **)(base + t->off) = arr;
	*(int *)(base + t->count_off) = n;
	for (int i = 0; i < n; i++) {
		config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
		snprintf(sub, sizeof(sub), "%s[%d]", path, i);
		if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
			cfg_err(c, e, sub, "expected a group { ... }");
			continue;
		}
		cfg_group(c, e, t->sub, arr + (size_t)i * t->elem_size, sub);
	}
}

static void
cfg_group(struct cfg_ctx *c, const config_setting_t *grp, const struct cfg_setting *tab, char *base,
          const char *prefix)
{
	const config_setting_t *outer = c->grp;
	char path[256];

	c->grp = grp;
	/* First every member of the file's group must be known to the table. */
	for (int i = 0; grp && i < config_setting_length(grp); i++) {
		config_setting_t *m = config_setting_get_elem(grp, (unsigned)i);
		const char *name = config_setting_name(m);
		const struct cfg_setting *t;

		for (t = tab; t->name; t++)
			if (strcmp(t->name, name) == 0)
				break;
		if (t->name == NULL) {
			snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", name);
			cfg_err(c, m, path, "unknown setting");
		}
	}
	/* Then every entry of the table is found, defaulted or missing. */
	for (const struct cfg_setting *t = tab; t->name; t++) {
		config_setting_t *m = grp ? config_setting_get_member(grp, t->name) : NULL;

		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", t->name);
		switch (t->type) {
		case CFG_GROUP:
			if (m && config_setting_type(m) != CONFIG_TYPE_GROUP) {
				cfg_err(c, m, path, "expected a group { ... }");
				break;
			}
			if (!m && (t->flags & CFGF_REQUIRED)) {
				cfg_err(c, NULL, path, "required group is missing");
				break;
			}
			/*
			 * A group with a present flag is optional as a whole: when absent it
			 * stays unset (flag 0) and its required members are not asked for.
			 * A group without one always applies, with its defaults.
			 */
			if (t->count_off != (size_t)-1) {
				*(int *)(base + t->count_off) = m != NULL;
				if (!m)
					break;
			}
			cfg_group(c, m, t->sub, base + t->off, path);
			break;
		case CFG_GROUP_LIST:
			cfg_group_list(c, m, t, base, path);
			break;
		case CFG_INT_LIST:
		case CFG_STR_LIST:
			cfg_list(c, m, t, base, path);
			break;
		default:
			cfg_scalar(c, m, t, base, path);
			break;
		}
	}
	c->grp = outer;
}

int
cfg_load(const char *file, const struct cfg_setting *tab, void *out, unsigned prog,
         struct cfg_errors *errs)
{
	struct cfg_ctx c = {file, prog, errs, NULL};
	config_t cf;

	memset(errs, 0, sizeof(*errs));
	config_init(&cf);
	if (config_read_file(&cf, file) != CONFIG_TRUE) {
		errs->n = 1;
		if (config_error_type(&cf) == CONFIG_ERR_FILE_IO)
			snprintf(errs->text, sizeof(errs->text), "%s: cannot read file: %s\n", file,
			         strerror(errno));
		else
			snprintf(errs->text, sizeof(errs->text), "%s:%d: syntax error: %s\n", file,
			         config_error_line(&cf), config_error_text(&cf));
		goto out;
	}
	cfg_group(&c, config_root_setting(&cf), tab, out, "");
out:
	config_destroy(&cf);
	return errs->n;
}

void
cfg_free(const struct cfg_setting *tab, void *out)
{
	char *base = out;

	for (const struct cfg_setting *t = tab; t->name; t++) {
		switch (t->type) {
		case CFG_STR:
			free(*(char **)(base + t->off));
			*(char **)(base + t->off) = NULL;
			break;
		case CFG_STR_LIST: {
			struct cfg_strs *l = (struct cfg_strs *)(base + t->off);
			for (int i = 0; i < l->n; i++)
				free(l->v[i]);
			l->n = 0;
			break;
		}
		case CFG_GROUP:
			cfg_free(t->sub, base + t->off);
			break;
		case CFG_GROUP_LIST: {
			char *arr = *(char **)(base + t->off);
			int n = *(int *)(base + t->count_off);
			for (int i = 0; arr && i < n; i++)
				cfg_free(t->sub, arr + (size_t)i * t->elem_size);
			free(arr);
			*(char **)(base + t->off) = NULL;
			break;
		}
		default:
			break;
		}
	}
}

/* The permission check of an open secret file: 0 or -1 with err naming path. */
static int
cfg_secret_perms(int fd, const char *path, char *err, size_t errlen)
{
	struct stat st;

	if (fstat(fd, &st) != 0) {
		snprintf(err, errlen, "secret file '%s': %s", path, strerror(errno));
		return -1;
	}
	/* As ssh does with private keys: a secret others could read is already half-shared. */
	if ((st.st_mode & 077) != 0) {
		snprintf(err, errlen,
		         "secret file '%s' is readable or writable by group or others (mode %04o); "
		         "chmod 600 it",
		         path, (unsigned)(st.st_mode & 07777));
		return -1;
	}
	if (st.st_uid != geteuid() && st.st_uid != 0) {
		snprintf(err, errlen,
		         "secret file '%s' is owned by uid %u, not by this user (uid %u) or root",
		         path, (unsigned)st.st_uid, (unsigned)geteuid());
		return -1;
	}
	return 0;
}

int
cfg_secret_file_ok(const char *path, char *err, size_t errlen)
{
	int fd, rc;

	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "cannot open secret file '%s': %s", path, strerror(errno));
		return -1;
	}
	rc = cfg_secret_perms(fd, path, err, errlen);
	close(fd);
	return rc;
}

int
cfg_read_file(const char *path, size_t max, int secret, char **buf, size_t *len, char *err,
              size_t errlen)
{
	const char *what = secret ? "secret file" : "file";
	struct stat st;
	char *p = NULL;
	size_t n = 0;
	ssize_t r;
	int fd, rc = -1;

	*buf = NULL;
	*len = 0;
	/* Plain read(2), not stdio: a FILE buffer would keep a copy of the secret. */
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		snprintf(err, errlen, "cannot open %s '%s': %s", what, path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		snprintf(err, errlen, "%s '%s' is not a regular file", what, path);
		goto done;
	}
	if (secret && cfg_secret_perms(fd, path, err, errlen) != 0)
		goto done;
	/* Read up to max + 1 bytes whatever st_size says, so a growing file is still bounded. */
	if ((p = malloc(max + 1)) == NULL) {
		snprintf(err, errlen, "%s '%s': out of memory", what, path);
		goto done;
	}
	while (n <= max && (r = read(fd, p + n, max + 1 - n)) != 0) {
		if (r < 0) {
			if (errno == EINTR)
				continue;
			snprintf(err, errlen, "cannot read %s '%s': %s", what, path,
			         strerror(errno));
			goto done;
		}
		n += (size_t)r;
	}
	if (n > max) {
		snprintf(err, errlen, "cannot read %s '%s' (larger than %zu bytes)", what, path,
		         max);
		goto done;
	}
	p[n] = '\0';
	*buf = p;
	*len = n;
	p = NULL;
	rc = 0;
done:
	if (p != NULL) {
		explicit_bzero(p, max + 1);
		free(p);
	}
	close(fd);
	return rc;
}

int
cfg_read_secret(const char *path, char **out, size_t *len, char *err, size_t errlen)
{
	char *buf;
	size_t n;

	if (cfg_read_file(path, 65536, 1, &buf, &n, err, errlen) != 0)
		return -1;
	if (n > 0 && buf[n - 1] == '\n')
		n--;
	if (n > 0 && buf[n - 1] == '\r')
		n--;
	if (n == 0) {
		snprintf(err, errlen, "secret file '%s' is empty", path);
		free(buf);
		return -1;
	}
	/* The dropped bytes are a newline, nothing secret, and the buffer stays the caller's. */
	buf[n] = '\0';
	*out = buf;
	*len = n;
	return 0;
}

void
cfg_doc(const struct cfg_setting *tab, const char *prefix, FILE *fp)
{
	static const char *const tn[] = {"integer",     "bool",  "string",        "integer list",
	                                 "string list", "group", "list of groups"};
	char path[256];

	for (const struct cfg_setting *t = tab; t->name; t++) {
		snprintf(path, sizeof(path), "%s%s%s", prefix, *prefix ? "." : "", t->name);
		if (t->type == CFG_GROUP || t->type == CFG_GROUP_LIST) {
			if (t->doc)
				fprintf(fp, "| `%s` | %s | | %s |\n", path, tn[t->type], t->doc);
			snprintf(path + strlen(path), sizeof(path) - strlen(path), "%s",
			         t->type == CFG_GROUP_LIST ? "[]" : "");
			cfg_doc(t->sub, path, fp);
			continue;
		}
		fprintf(fp, "| `%s` | %s | %s | %s |\n", path, tn[t->type],
		        t->def ? t->def : "(required)", t->doc ? t->doc : "");
	}
}
