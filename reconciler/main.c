/*
 * paycb-reconciler - submits paycb's refunds exactly once, recovers payments whose
 * notification never came by querying the channels, and closes merchants' closed orders at
 * the channels (docs/reconciler.md). Configuration: the reconciler section and the
 * merchants' API keys in paycb.conf. Any number of instances may run.
 */
#include "daemon.h"
#include "reconciler.h"

static const struct daemon_ops reconciler_ops = {
    .name = "paycb-reconciler",
    .summary = "the outbound side: refunds, payment queries, closes at the channels",
    .prog = PROG_RECONCILER,
    .init = recon_daemon_init,
    .loop = recon_daemon_loop,
    .drain = recon_daemon_drain,
    .reload = recon_daemon_reload,
};

int
main(int argc, char **argv)
{
	return daemon_main(argc, argv, &reconciler_ops);
}
