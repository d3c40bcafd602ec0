/*
 * log - one line per event on stderr, the callback id first, then key=value pairs.
 *
 * A line is written with a single write(2) so lines from several threads never interleave.
 * A busy daemon writes a few lines per request, so a line costs that write and nothing else:
 * the process id is read once (again in a forked child), and each thread formats the date
 * and time of a second once (docs/performance.md, "Ingest's cost per request").
 */
#include "log.h"

#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>
#include <sys/time.h>

static const char *log_prog = "paycb";
static enum log_level log_min = LOG_LVL_INFO;
static const char *const log_names[] = {"debug", "info", "warn", "error"};
static long log_pid;

static void log_forked(void);

static void
log_register_fork(void)
{
	(void)pthread_atfork(NULL, NULL, log_forked);
}

/* A child keeps logging under its own process id. */
static void
log_forked(void)
{
	log_pid = (long)getpid();
}

void
log_init(const char *prog)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	const char *slash = strrchr(prog, '/');

	log_prog = slash ? slash + 1 : prog;
	log_pid = (long)getpid();
	(void)pthread_once(&once, log_register_fork);
}

void
log_set_level(enum log_level level)
{
	log_min = level;
}

int
log_level_parse(const char *name, enum log_level *out)
{
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(name, log_names[i]) == 0) {
			*out = (enum log_level)i;
			return 0;
		}
	}
	return -1;
}

/* log_second - "YYYY-MM-DDTHH:MM:SS" of t, formatted once per second and thread. */
static const char *
log_second(time_t t)
{
	static _Thread_local time_t last = (time_t)-1;
	static _Thread_local char text[32];
	struct tm tm;

	if (t != last) {
		gmtime_r(&t, &tm);
		snprintf(text, sizeof(text), "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900,
		         tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
		last = t;
	}
	return text;
}

static void
log_vmsg(enum log_level level, const char *id, const char *fmt, va_list ap)
{
	char line[2048];
	struct timeval tv;
	int n, m;

	if (level < log_min)
		return;
	gettimeofday(&tv, NULL);
	n = snprintf(line, sizeof(line), "%s.%03ldZ %s[%ld]: %s: level=%s ", log_second(tv.tv_sec),
	             (long)(tv.tv_usec / 1000), log_prog, log_pid ? log_pid : (long)getpid(),
	             id ? id : "-", log_names[level]);
	if (n < 0 || (size_t)n >= sizeof(line))
		return;
	m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	if (m < 0)
		return;
	n += m;
	if ((size_t)n > sizeof(line) - 2)
		n = (int)sizeof(line) - 2;
	line[n++] = '\n';
	/* One write per line keeps concurrent writers' lines whole. */
	if (write(STDERR_FILENO, line, (size_t)n) < 0)
		return;
}

void
log_msg(enum log_level level, const char *id, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	log_vmsg(level, id, fmt, ap);
	va_end(ap);
}

/* log_escape - copies s into buf, writing each byte that keep() refuses as %XX. */
static const char *
log_escape(char *buf, unsigned long len, const char *s, int (*keep)(unsigned char))
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned long o = 0;

	if (len == 0)
		return "";
	for (unsigned long i = 0; s && s[i]; i++) {
		unsigned char c = (unsigned char)s[i];

		if (keep(c)) {
			if (o + 1 >= len)
				break;
			buf[o++] = (char)c;
		} else {
			if (o + 3 >= len)
				break;
			buf[o++] = '%';
			buf[o++] = hex[c >> 4];
			buf[o++] = hex[c & 15];
		}
	}
	buf[o] = '\0';
	return buf;
}

/* A bare value may not hold a space or '=', or it could add key=value pairs to its line. */
static int
log_keep_bare(unsigned char c)
{
	return c > 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '=' && c != '%';
}

/* A quoted value keeps spaces and '='; it may not end its quotes early. */
static int
log_keep_quoted(unsigned char c)
{
	return c >= 0x20 && c < 0x7f && c != '"' && c != '\\' && c != '%';
}

const char *
log_safe(char *buf, unsigned long len, const char *s)
{
	return log_escape(buf, len, s, log_keep_bare);
}

const char *
log_quoted(char *buf, unsigned long len, const char *s)
{
	return log_escape(buf, len, s, log_keep_quoted);
}
