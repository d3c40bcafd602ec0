/*
 * log - one line per event on stderr.
 *
 * Every line reads "TIMESTAMP PROGRAM[PID]: ID: key=value ...". ID is the callback id
 * (cblog_ref: "cb42" for a payment-log row, "rf7" for a refund-log row) or "-" when there is
 * none yet, so one grep for the id follows a callback through ingest, processor and retrier.
 * Callers never pass secrets or bodies: they log lengths and hashes.
 */
#ifndef PAYCB_LOG_H
#define PAYCB_LOG_H

#include <stdarg.h>

enum log_level { LOG_LVL_DEBUG = 0, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

void log_init(const char *prog);
void log_set_level(enum log_level level);
int log_level_parse(const char *name, enum log_level *out);

void log_msg(enum log_level level, const char *id, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define log_debug(id, ...) log_msg(LOG_LVL_DEBUG, (id), __VA_ARGS__)
#define log_info(id, ...)  log_msg(LOG_LVL_INFO, (id), __VA_ARGS__)
#define log_warn(id, ...)  log_msg(LOG_LVL_WARN, (id), __VA_ARGS__)
#define log_error(id, ...) log_msg(LOG_LVL_ERROR, (id), __VA_ARGS__)

/*
 * Copies s into buf as a log-safe bare value (key=value): printable ASCII without spaces, '=',
 * quotes, backslashes or '%'; any other byte is written as %XX, so a hostile field value can
 * neither add key=value pairs nor start a line. At most len-1 bytes; truncated at a whole
 * character.
 */
const char *log_safe(char *buf, unsigned long len, const char *s);
/*
 * Like log_safe for a value inside double quotes (key="..."): spaces and '=' are kept, quotes,
 * backslashes, '%' and control bytes are written as %XX, so the value cannot end its quotes.
 */
const char *log_quoted(char *buf, unsigned long len, const char *s);

#endif
