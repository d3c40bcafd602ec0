/*
 * paycb-reconciler - submits paycb's refunds exactly once, recovers payments whose
 * notification never came by querying the channels, and closes merchants' closed orders at
 * the channels (docs/reconciler.md). Configuration: the reconciler section and the
 * merchants' API keys in paycb.conf. Any number of instances may run.
 */
#include "chan_conf.h"
#include "daemon.h"
#include "reconciler.h"

DAEMON_MAIN(recon, "paycb-reconciler",
            "the outbound side: refunds, payment queries, closes at the channels", PROG_RECONCILER,
            recon_daemon_reload, chan_conf_use)
