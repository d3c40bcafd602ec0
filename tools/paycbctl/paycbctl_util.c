/*
 * paycbctl_util - what paycbctl's commands share: times, the actor and the audit trail
 * (callback references are cblog_ref and cblog_ref_parse).
 */
#include <ctype.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "paycbctl.h"

static int
ctl_valid_tm(int y, int mo, int d, int h, int mi, int sec, int ms)
{
	return y >= 1970 && y <= 9999 && mo >= 1 && mo <= 12 && d >= 1 && d <= 31 && h >= 0 &&
	       h <= 23 && mi >= 0 && mi <= 59 && sec >= 0 && sec <= 59 && ms >= 0 && ms <= 999;
}

int
ctl_parse_time(const char *s, char *buf, size_t len)
{
	int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0, ms = 0, n = 0;
	char t[64], unit = 0;
	long long amount;

	if (strlen(s) >= sizeof(t))
		return -1;
	snprintf(t, sizeof(t), "%s", s);
	if (strcmp(t, "now") == 0 || (sscanf(t, "%lld%c%n", &amount, &unit, &n) == 2 &&
	                              t[n] == '\0' && amount >= 0 && strchr("smhd", unit))) {
		long long mult = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 1;
		time_t at = time(NULL) - (strcmp(t, "now") == 0 ? 0 : (time_t)(amount * mult));
		struct tm tm;

		gmtime_r(&at, &tm);
		snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.000", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		return 0;
	}
	/* Accept ISO 8601's 'T' and a UTC 'Z'; nothing else about zones. */
	for (char *p = t; *p; p++)
		if (*p == 'T')
			*p = ' ';
	n = (int)strlen(t);
	if (n > 0 && t[n - 1] == 'Z')
		t[--n] = '\0';
	n = 0;
	if (sscanf(t, "%4d-%2d-%2d%n", &y, &mo, &d, &n) != 3 || n != 10)
		return -1;
	if (t[10] != '\0') {
		int m = 0;
		const char *p = t + 10;

		if (sscanf(p, " %2d:%2d%n", &h, &mi, &m) != 2)
			return -1;
		p += m;
		if (*p == ':') {
			if (sscanf(p, ":%2d%n", &sec, &m) != 1)
				return -1;
			p += m;
			if (*p == '.') {
				char frac[4] = "000";
				int i = 0;

				for (p++; isdigit((unsigned char)*p) && i < 3; p++)
					frac[i++] = *p;
				if (i == 0)
					return -1;
				ms = atoi(frac);
			}
		}
		if (*p != '\0')
			return -1;
	}
	if (!ctl_valid_tm(y, mo, d, h, mi, sec, ms))
		return -1;
	snprintf(buf, len, "%04d-%02d-%02d %02d:%02d:%02d.%03d", y, mo, d, h, mi, sec, ms);
	return 0;
}

const char *
ctl_clean(char *buf, size_t len, const char *s)
{
	size_t i;

	if (len == 0)
		return "";
	for (i = 0; s && s[i] && i + 1 < len; i++) {
		unsigned char ch = (unsigned char)s[i];
		buf[i] = ch < 0x20 || ch == 0x7f ? '?' : (char)ch;
	}
	buf[i] = '\0';
	return buf;
}

void
ctl_set_actor(struct ctl *c, const char *override)
{
	const char *who = override;
	struct passwd *pw;

	if (who == NULL || *who == '\0')
		who = getenv("SUDO_USER");
	if (who == NULL || *who == '\0')
		who = getenv("USER");
	if (who == NULL || *who == '\0') {
		if ((pw = getpwuid(getuid())) != NULL)
			who = pw->pw_name;
	}
	if (who == NULL || *who == '\0')
		snprintf(c->actor, sizeof(c->actor), "uid:%ld", (long)getuid());
	else
		ctl_clean(c->actor, sizeof(c->actor), who);
}

enum db_rc
ctl_audit(struct ctl *c, const char *action, const char *target, int dry_run, const char *result)
{
	struct db_in in[5] = {DBI_STR(c->actor), DBI_STR(action), DBI_STR(target),
	                      DBI_I64(dry_run ? 1 : 0), DBI_STR(result)};
	enum db_rc rc;

	rc = db_exec(&c->db,
	             "INSERT INTO audit_log (actor, action, target, dry_run, result) VALUES (?, ?, "
	             "?, ?, LEFT(?, 512))",
	             in, 5, NULL, NULL);
	if (rc != DB_OK)
		ctl_error(c, "audit_log: %s", c->db.last_error);
	return rc;
}

int
ctl_audited_update(struct ctl *c, const char *sql, const struct db_in *in, int nin,
                   const char *action, const char *target, const char *done, const char *not_done)
{
	unsigned long long n = 0;
	const char *result;

	if (db_begin(&c->db) != DB_OK || db_exec(&c->db, sql, in, nin, &n, NULL) != DB_OK)
		goto fail;
	result = n == 1 ? done : not_done;
	if (ctl_audit(c, action, target, 0, result) != DB_OK || db_commit(&c->db) != DB_OK)
		goto fail;
	fprintf(c->out, "%s: %s\n", target, result);
	return n == 1 ? CTL_OK : CTL_FAILED;
fail:
	ctl_error(c, "%s: %s", target, c->db.last_error);
	db_rollback(&c->db);
	return CTL_FAILED;
}

int
ctl_db_failed(struct ctl *c, const char *what, enum db_rc rc)
{
	ctl_error(c, "%s: %s", what, c->db.last_error);
	return rc == DB_RETRYABLE ? CTL_UNAVAIL : CTL_FAILED;
}

const char *
ctl_status_name(long long status)
{
	switch (status) {
	case 0:
		return "pending";
	case 1:
		return "done";
	case 2:
		return "dead";
	default:
		return "unknown";
	}
}

void
ctl_error(struct ctl *c, const char *fmt, ...)
{
	va_list ap;

	fputs("paycbctl: ", c->err);
	va_start(ap, fmt);
	vfprintf(c->err, fmt, ap);
	va_end(ap);
	fputc('\n', c->err);
}
