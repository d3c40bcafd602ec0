/*
 * metrics - the Prometheus registry (see metrics.h).
 */
#include "metrics.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum metric_kind { MK_COUNTER, MK_GAUGE, MK_HIST };

/* Bucket bounds in microseconds: 0.5 ms to 10 s. */
static const long long hist_bounds[] = {500,     1000,    2000,    5000,    10000,
                                        20000,   50000,   100000,  200000,  500000,
                                        1000000, 2000000, 5000000, 10000000};
#define NBOUNDS (sizeof(hist_bounds) / sizeof(hist_bounds[0]))

struct metric {
	enum metric_kind kind;
	char name[96];
	char help[160];
	char labels[160];
	atomic_llong value;
	atomic_llong sum_us;
	atomic_llong count;
	atomic_llong buckets[NBOUNDS];
	struct metric *next;
};

static struct metric *reg_head, *reg_tail;

static struct metric *
metrics_new(enum metric_kind kind, const char *name, const char *help, const char *labels)
{
	struct metric *m = calloc(1, sizeof(*m));

	if (m == NULL)
		abort(); /* start-up only: no memory means no process */
	m->kind = kind;
	snprintf(m->name, sizeof(m->name), "%s", name);
	snprintf(m->help, sizeof(m->help), "%s", help);
	snprintf(m->labels, sizeof(m->labels), "%s", labels ? labels : "");
	if (reg_tail)
		reg_tail->next = m;
	else
		reg_head = m;
	reg_tail = m;
	return m;
}

struct metric *
metrics_counter(const char *name, const char *help, const char *labels)
{
	return metrics_new(MK_COUNTER, name, help, labels);
}

struct metric *
metrics_gauge(const char *name, const char *help, const char *labels)
{
	return metrics_new(MK_GAUGE, name, help, labels);
}

struct metric *
metrics_hist(const char *name, const char *help, const char *labels)
{
	return metrics_new(MK_HIST, name, help, labels);
}

void
metrics_inc(struct metric *m, unsigned long long n)
{
	atomic_fetch_add(&m->value, (long long)n);
}

void
metrics_set(struct metric *m, long long v)
{
	atomic_store(&m->value, v);
}

void
metrics_add(struct metric *m, long long delta)
{
	atomic_fetch_add(&m->value, delta);
}

long long
metrics_value(const struct metric *m)
{
	return atomic_load(&m->value);
}

void
metrics_observe_us(struct metric *m, long long us)
{
	for (size_t i = 0; i < NBOUNDS; i++)
		if (us <= hist_bounds[i]) {
			atomic_fetch_add(&m->buckets[i], 1);
			break;
		}
	atomic_fetch_add(&m->sum_us, us);
	atomic_fetch_add(&m->count, 1);
}

static void
metrics_le(char *buf, size_t len, long long us)
{
	/* Seconds with six decimals, from integers: no float in the exposition path. */
	snprintf(buf, len, "%lld.%06lld", us / 1000000, us % 1000000);
}

int
metrics_render(char **out, size_t *len)
{
	static const char *const types[] = {"counter", "gauge", "histogram"};
	const char *last = "";
	char le[32];
	size_t size = 0;
	FILE *fp = open_memstream(out, &size);

	if (fp == NULL)
		return -1;
	for (struct metric *m = reg_head; m; m = m->next) {
		const char *sep = m->labels[0] ? "," : "";

		if (strcmp(last, m->name) != 0)
			fprintf(fp, "# HELP %s %s\n# TYPE %s %s\n", m->name, m->help, m->name,
			        types[m->kind]);
		last = m->name;
		if (m->kind != MK_HIST) {
			fprintf(fp, "%s%s%s%s %lld\n", m->name, m->labels[0] ? "{" : "", m->labels,
			        m->labels[0] ? "}" : "", (long long)atomic_load(&m->value));
			continue;
		}
		long long cum = 0;
		for (size_t i = 0; i < NBOUNDS; i++) {
			cum += atomic_load(&m->buckets[i]);
			metrics_le(le, sizeof(le), hist_bounds[i]);
			fprintf(fp, "%s_bucket{%s%sle=\"%s\"} %lld\n", m->name, m->labels, sep, le,
			        cum);
		}
		fprintf(fp, "%s_bucket{%s%sle=\"+Inf\"} %lld\n", m->name, m->labels, sep,
		        (long long)atomic_load(&m->count));
		metrics_le(le, sizeof(le), atomic_load(&m->sum_us));
		fprintf(fp, "%s_sum%s%s%s %s\n", m->name, m->labels[0] ? "{" : "", m->labels,
		        m->labels[0] ? "}" : "", le);
		fprintf(fp, "%s_count%s%s%s %lld\n", m->name, m->labels[0] ? "{" : "", m->labels,
		        m->labels[0] ? "}" : "", (long long)atomic_load(&m->count));
	}
	if (fclose(fp) != 0)
		return -1;
	*len = size;
	return 0;
}

void
metrics_free(void)
{
	struct metric *m = reg_head, *n;

	for (; m; m = n) {
		n = m->next;
		free(m);
	}
	reg_head = reg_tail = NULL;
}
