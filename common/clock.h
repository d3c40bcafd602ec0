/*
 * clock - the two clocks paycb reads, in the units its callers count in.
 *
 * The monotonic clock measures intervals (timeouts, rates, latencies) because it never jumps
 * when the wall clock is set. The wall clock is for times that leave the process (database
 * rows, logs, other hosts) and for the absolute deadlines that pthread_cond_timedwait and
 * pthread_timedjoin_np take, which are measured against CLOCK_REALTIME.
 */
#ifndef PAYCB_CLOCK_H
#define PAYCB_CLOCK_H

#include <time.h>

/* Milliseconds and microseconds on the monotonic clock (an arbitrary but fixed origin). */
long long clock_mono_ms(void);
long long clock_mono_us(void);
/* Milliseconds and microseconds since the Unix epoch on the wall clock. */
long long clock_wall_ms(void);
long long clock_wall_us(void);
/* Sets *dl to the wall-clock time timeout_ms from now, the form a timed wait takes. */
void clock_deadline(struct timespec *dl, int timeout_ms);
/* True once the wall clock has reached the deadline dl (from clock_deadline). */
int clock_deadline_passed(const struct timespec *dl);

#endif
