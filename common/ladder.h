/*
 * ladder - the retry ladder: after failure k (1..n) the next attempt waits step k's delay;
 * failure n+1 makes a row dead. Each step has its own delay topic.
 */
#ifndef PAYCB_LADDER_H
#define PAYCB_LADDER_H

#include <stddef.h>

#include "conf.h"

/* Number of steps. */
int ladder_steps(const struct conf_retry *r);
/* Delay in seconds before the attempt after `failures` failures, or -1 when the row is dead. */
long long ladder_delay(const struct conf_retry *r, int failures);
/* Topic of step k (1-based): "<prefix>.callbacks.retry.<delay>s". */
void ladder_topic(const struct conf *c, int step, char *buf, size_t len);
/* Step whose topic is `topic`, or 0 for the main topic / unknown. */
int ladder_step_of_topic(const struct conf *c, const char *topic, long long *delay_s);

#endif
