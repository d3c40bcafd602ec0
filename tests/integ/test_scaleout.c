/*
 * test_scaleout - two ingest instances, three processors and two retriers on one machine
 * under load, with partitions added to the callbacks topic while it runs: the invariants of
 * the fault run hold, and every processor took a share of the partitions. The pipeline,
 * load and checks are test_chaos.c's, built here without the faults (see PAYCB_SCALEOUT
 * there), so the two runs cannot drift apart.
 */
#define PAYCB_SCALEOUT 1
#include "test_chaos.c"
