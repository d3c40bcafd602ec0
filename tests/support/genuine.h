/*
 * genuine - genuine notifications of all three channels, sent from a thread of their own
 * while a hostile test attacks the same ingest: every one must be stored and answered with
 * its channel's success within the channel's budget, whatever the attack does.
 *
 * Their orders are named "G<tag><pid>-<n>", so a test counts hostile rows as the rows whose
 * order does not start with "G" (GENUINE_NOT clause below).
 */
#ifndef PAYCB_GENUINE_H
#define PAYCB_GENUINE_H

#include <pthread.h>
#include <stdatomic.h>

#include "chan.h"
#include "db.h"

/* WeChat Pay's answer deadline, the strictest of the three channels. */
#define GENUINE_BUDGET_MS 5000
/* Rows that are not genuine traffic's, for chan_rows(). */
#define GENUINE_NOT "out_trade_no NOT LIKE 'G%'"

struct genuine {
	atomic_int stop, ok, bad, late;
	atomic_llong max_ms;
	pthread_t t;
	char tag[8];
	int port;
	const struct chan_keys *k;
};

/* Starts sending to ingest on port, one notification every 100 ms. */
void genuine_start(struct genuine *g, const struct chan_keys *k, int port, const char *tag);
/* Stops the sender and asserts (cmocka) that at least min were sent, every one was answered
 * with success within the budget, and every one has its row. */
void genuine_check(struct genuine *g, struct db *db, int min, const char *what);

#endif
