/*
 * metrics - a process-wide Prometheus registry: counters, gauges and latency histograms,
 * rendered in the text exposition format by the admin listener.
 *
 * Metrics are created once at start-up (not thread-safe) and then updated from any thread
 * with atomics. Latencies are observed in integer microseconds; bucket bounds are printed in
 * seconds.
 */
#ifndef PAYCB_METRICS_H
#define PAYCB_METRICS_H

#include <stddef.h>

struct metric;

/* labels is the inside of {...}, e.g. "channel=\"wxpay\",outcome=\"ok\"", or "" for none. */
struct metric *metrics_counter(const char *name, const char *help, const char *labels);
struct metric *metrics_gauge(const char *name, const char *help, const char *labels);
struct metric *metrics_hist(const char *name, const char *help, const char *labels);

void metrics_inc(struct metric *m, unsigned long long n);
void metrics_set(struct metric *m, long long v);
void metrics_add(struct metric *m, long long delta);
void metrics_observe_us(struct metric *m, long long us);
long long metrics_value(const struct metric *m);

/* Renders every metric; *out is malloc'ed. Returns 0 or -1. */
int metrics_render(char **out, size_t *len);
/* Frees the registry (at exit). */
void metrics_free(void);

#endif
