/*
 * ladder - the retry ladder and its delay topics (see ladder.h).
 */
#include "ladder.h"

#include <stdio.h>
#include <string.h>

int
ladder_steps(const struct conf_retry *r)
{
	return r->ladder_s.n;
}

long long
ladder_delay(const struct conf_retry *r, int failures)
{
	if (failures < 1 || failures > r->ladder_s.n)
		return -1;
	return r->ladder_s.v[failures - 1];
}

void
ladder_topic(const struct conf *c, int step, char *buf, size_t len)
{
	snprintf(buf, len, "%s.callbacks.retry.%llds", c->kafka.topic_prefix,
	         ladder_delay(&c->retry, step));
}

int
ladder_step_of_topic(const struct conf *c, const char *topic, long long *delay_s)
{
	char t[256];

	for (int k = 1; k <= c->retry.ladder_s.n; k++) {
		ladder_topic(c, k, t, sizeof(t));
		if (strcmp(t, topic) == 0) {
			if (delay_s)
				*delay_s = ladder_delay(&c->retry, k);
			return k;
		}
	}
	return 0;
}
