/*
 * clock - reads the monotonic and wall clocks (see clock.h).
 *
 * Every reading of a clock in the programs goes through here, so the choice of clock for each
 * purpose is made in one place and no module defines its own copy for the others to call.
 */
#include "clock.h"

static long long
clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static long long
clock_us(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

long long
clock_mono_ms(void)
{
	return clock_ms(CLOCK_MONOTONIC);
}

long long
clock_mono_us(void)
{
	return clock_us(CLOCK_MONOTONIC);
}

long long
clock_wall_ms(void)
{
	return clock_ms(CLOCK_REALTIME);
}

long long
clock_wall_us(void)
{
	return clock_us(CLOCK_REALTIME);
}

void
clock_deadline(struct timespec *dl, int timeout_ms)
{
	clock_gettime(CLOCK_REALTIME, dl);
	dl->tv_sec += timeout_ms / 1000;
	dl->tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (dl->tv_nsec >= 1000000000L) {
		dl->tv_sec++;
		dl->tv_nsec -= 1000000000L;
	}
}

int
clock_deadline_passed(const struct timespec *dl)
{
	struct timespec now;

	clock_gettime(CLOCK_REALTIME, &now);
	return now.tv_sec > dl->tv_sec || (now.tv_sec == dl->tv_sec && now.tv_nsec >= dl->tv_nsec);
}
