/*
 * paycb-processor - the exactly-once order state machine, a member of a Kafka consumer group.
 *
 * It reads callback ids from <prefix>.callbacks and the delay topics, applies each to its
 * order in one database transaction together with the callback row's final state, and relays
 * the business effects to <prefix>.order-events. Scale it by starting more processes, or
 * more consumer threads per process (processor.threads), in one kafka.group_id.
 * See docs/processor.md. Exit codes: 0 after a drain, 69 the database stayed unreachable
 * longer than processor.db_outage_max_s, 78 configuration error.
 */
#include "chan_conf.h"
#include "daemon.h"
#include "processor.h"

DAEMON_MAIN(proc, "paycb-processor",
            "Applies payment and refund callbacks to orders, exactly once.", PROG_PROCESSOR, NULL,
            chan_conf_use)
