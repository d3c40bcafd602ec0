/*
 * sim_stats - what the simulator counts and times: pushes, answers by channel and status,
 * lost acknowledgements, latency samples in integer microseconds, and the small helpers
 * (the seeded generator, channel names, key=value report lines) the modules share; the
 * clocks are common/clock's. The latency and report-file part is declared in sim_lat.h,
 * which paycb-bench (tools/bench/) links from the simulator's archive.
 *
 * Latencies are kept as every sample rather than as a histogram: a run has at most a few
 * hundred thousand of them, and exact percentiles (nearest rank) need no bucket choices.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "sim.h"

const char *
sim_ch_name(enum sim_ch ch)
{
	static const char *const n[SIM_NCH] = {"wxpay", "alipay", "stripe"};

	return (unsigned)ch < SIM_NCH ? n[ch] : "unknown";
}

uint64_t
sim_rand(uint64_t *s)
{
	uint64_t x = *s ? *s : 0x9e3779b97f4a7c15ULL;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*s = x;
	return x * 0x2545f4914f6cdd1dULL;
}

uint64_t
sim_rand_below(uint64_t *s, uint64_t n)
{
	return n > 0 ? sim_rand(s) % n : 0;
}

void
sim_lat_init(struct sim_lat *l)
{
	memset(l, 0, sizeof(*l));
	pthread_mutex_init(&l->mu, NULL);
}

void
sim_lat_add(struct sim_lat *l, int64_t us)
{
	pthread_mutex_lock(&l->mu);
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		int64_t *v = realloc(l->v, cap * sizeof(*v));

		if (v == NULL)
			goto done; /* a sample lost to memory pressure does not stop the run */
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = us;
	l->sorted = 0;
done:
	pthread_mutex_unlock(&l->mu);
}

static int
cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int64_t
sim_lat_pct(struct sim_lat *l, int permille)
{
	int64_t v = -1;
	size_t rank;

	pthread_mutex_lock(&l->mu);
	if (l->n == 0)
		goto done;
	if (!l->sorted) {
		qsort(l->v, l->n, sizeof(*l->v), cmp_i64);
		l->sorted = 1;
	}
	/* Nearest rank: the smallest sample with at least permille/1000 of them at or below. */
	rank = (l->n * (size_t)permille + 999) / 1000;
	v = l->v[rank > 0 ? rank - 1 : 0];
done:
	pthread_mutex_unlock(&l->mu);
	return v;
}

void
sim_lat_free(struct sim_lat *l)
{
	free(l->v);
	pthread_mutex_destroy(&l->mu);
	memset(l, 0, sizeof(*l));
}

void
sim_stats_init(struct sim_stats *s)
{
	memset(s, 0, sizeof(*s));
	sim_lat_init(&s->ack);
	sim_lat_init(&s->e2e);
}

void
sim_stats_free(struct sim_stats *s)
{
	sim_lat_free(&s->ack);
	sim_lat_free(&s->e2e);
}

const char *
sim_fmt_us(int64_t us, char *buf, size_t len)
{
	if (us < 0)
		snprintf(buf, len, "-");
	else if (us < 1000)
		snprintf(buf, len, "%lld us", (long long)us);
	else if (us < 10000000)
		snprintf(buf, len, "%lld.%lld ms", (long long)(us / 1000),
		         (long long)(us % 1000 / 100));
	else
		snprintf(buf, len, "%lld.%lld s", (long long)(us / 1000000),
		         (long long)(us % 1000000 / 100000));
	return buf;
}

long long
sim_cpu_ms(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru) != 0)
		return 0;
	return (long long)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
	       (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;
}

int
sim_report_kv(const char *path, const char *prefix, const char *key, long long v)
{
	FILE *fp;

	if (path == NULL)
		return 0;
	if ((fp = fopen(path, "a")) == NULL)
		return -1;
	fprintf(fp, "%s%s=%lld\n", prefix ? prefix : "", key, v);
	return fclose(fp);
}
