/*
 * bench - private interfaces of paycb-bench, the measurements `make bench` sets beside the
 * pipeline's own figures (docs/bench.md): the database's ceilings by a plain client and the
 * rate at which the processors finish a backlog.
 *
 * Modules: bench_ceiling.c (`dbceiling`: ingest's INSERT, the processor's transaction, a whole
 * payment or an INSERT-then-publish, from C connections at once) and bench_drain.c (`drain`:
 * how fast a backlog of rows got done). The latency percentiles and the key=value report file
 * are the simulator's (tools/sim/sim_lat.h), linked from its archive, so both tools' figures
 * come from the same code.
 */
#ifndef PAYCB_BENCH_H
#define PAYCB_BENCH_H

/* Exit code beyond the daemon ones (daemon.h): a measurement did not finish what it must. */
#define BENCH_EXIT_MISMATCH 1

/*
 * The configuration view the bench loads: the simulator's. It reads the same settings (the
 * database, Kafka, the callbacks topic and ingest's publish budget) and adding a process kind
 * to the settings table for a tool that owns none would change nothing a user sees.
 */
#define BENCH_PROG PROG_SIM

/* `paycb-bench dbceiling`: the database's own ceiling for ingest's INSERT or the processor's
 * transaction, by a plain client. */
int bench_dbceiling_main(int argc, char **argv);
/* `paycb-bench drain`: how fast the processors finished a backlog of rows. */
int bench_drain_main(int argc, char **argv);

#endif
