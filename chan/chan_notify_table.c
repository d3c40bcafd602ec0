/*
 * chan_notify_table - every channel paycb speaks, and the lookup by name. The one place that
 * names them all: it stands above the channel files, which know nothing of each other.
 */
#include "chan_notify.h"

#include <string.h>

/* Every channel paycb speaks; the position is the channel's index in ingest's metrics. */
const struct chan_notify_ops *const chan_notify_table[CHAN_NOTIFY_COUNT] = {
    &notify_wx_ops,
    &notify_ali_ops,
    &notify_stripe_ops,
};

int
chan_notify_find(const char *name)
{
	for (int i = 0; i < CHAN_NOTIFY_COUNT; i++)
		if (strcmp(name, chan_notify_table[i]->name) == 0)
			return i;
	return -1;
}

const char *
chan_notify_name(int i)
{
	return i >= 0 && i < CHAN_NOTIFY_COUNT ? chan_notify_table[i]->name : "unknown";
}
