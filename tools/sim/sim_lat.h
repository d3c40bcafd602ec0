/*
 * sim_lat - latency samples, their formatting and the key=value report file: the part of
 * sim_stats.c that paycb-bench (tools/bench/) links from the simulator's archive too, so
 * both tools' figures come from the same percentile and report code.
 */
#ifndef PAYCB_SIM_LAT_H
#define PAYCB_SIM_LAT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

/* Latency samples in microseconds. */
struct sim_lat {
	pthread_mutex_t mu;
	int64_t *v;
	size_t n, cap;
	int sorted;
};
void sim_lat_init(struct sim_lat *l);
void sim_lat_add(struct sim_lat *l, int64_t us);
/* The permille-th percentile (500 = p50, 999 = p99.9), nearest rank; -1 without samples. */
int64_t sim_lat_pct(struct sim_lat *l, int permille);
void sim_lat_free(struct sim_lat *l);

/* Formats microseconds as "12.3 ms" / "850 us". */
const char *sim_fmt_us(int64_t us, char *buf, size_t len);

/* The report file, key=value lines for tools/bench.sh; path NULL writes nothing. */
int sim_report_kv(const char *path, const char *prefix, const char *key, long long v);

/* The process's CPU time so far (user and system), in milliseconds. */
long long sim_cpu_ms(void);

#endif
