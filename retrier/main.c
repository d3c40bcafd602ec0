/*
 * paycb-retrier - leases due callback rows and republishes them on the retry ladder's delay
 * topics, dead-letters rows past the last step, relays the order_events outbox, purges old
 * bodies and raises the stuck-row alarm (docs/retrier.md). Configuration: the retry and
 * retrier sections of paycb.conf. Any number of instances may run.
 */
#include "chan_conf.h"
#include "daemon.h"
#include "retrier.h"

DAEMON_MAIN(retrier, "paycb-retrier",
            "the retry scheduler: leases, backoff ladder, dead letters, outbox, purge",
            PROG_RETRIER, NULL, chan_conf_use)
