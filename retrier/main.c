/*
 * paycb-retrier - leases due callback rows and republishes them on the retry ladder's delay
 * topics, dead-letters rows past the last step, relays the order_events outbox, purges old
 * bodies and raises the stuck-row alarm (docs/retrier.md). Configuration: the retry and
 * retrier sections of paycb.conf. Any number of instances may run.
 */
#include "daemon.h"
#include "retrier.h"

static const struct daemon_ops retrier_ops = {
    .name = "paycb-retrier",
    .summary = "the retry scheduler: leases, backoff ladder, dead letters, outbox, purge",
    .prog = PROG_RETRIER,
    .init = retrier_daemon_init,
    .loop = retrier_daemon_loop,
    .drain = retrier_daemon_drain,
};

int
main(int argc, char **argv)
{
	return daemon_main(argc, argv, &retrier_ops);
}
