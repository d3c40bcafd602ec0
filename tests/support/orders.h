/*
 * orders - the steps and questions of the processor's edge-case tests: a payment or a
 * refund reserved as ingest reserves it and its callback message applied in-process
 * (proc_apply, the code the daemon's consumer path runs for each message); then the
 * order's fields, the row's outcome, the order's events and alerts.
 *
 * The cases run one after another against one in-process processor, so the helpers share
 * one context, set once by ord_run(); each case creates the orders it checks. Every helper asserts
 * (cmocka) on a failed step: a case that cannot set itself up fails where it happened.
 */
#ifndef PAYCB_ORDERS_H
#define PAYCB_ORDERS_H

#include "conf.h"
#include "db.h"

/* The merchant of every case (the test configuration's merchant). */
#define ORD_M       "default"
#define ORD_WAIT_MS 30000

struct CMUnitTest;
struct proc;

/*
 * ord_run - runs the cases of one test program against an in-process processor of its
 * own (proc_open): the configuration tagged tag (fx_processor_conf), its database and
 * topics, set up before the first case and torn down after the last. Returns cmocka's
 * result.
 */
int ord_run(const char *tag, struct conf *cf, struct db *db, const struct CMUnitTest *tests,
            size_t n);

/* A payment row applied, which must leave it done; returns its id. */
unsigned long long ord_pay(const char *channel, const char *order, const char *trade,
                           const char *amount, const char *currency);
/* A refund row (with the channel's event type and refund status) applied, which must
 * leave it done; returns its id. */
unsigned long long ord_refund(const char *channel, const char *order, const char *refund_no,
                              const char *pay_trade, const char *amount, int cumulative,
                              const char *currency, const char *type, const char *status);
/* The same, which must leave the row's status want (1 done, 2 dead). */
unsigned long long ord_refund_to(int want, const char *channel, const char *order,
                                 const char *refund_no, const char *pay_trade, const char *amount,
                                 int cumulative, const char *currency, const char *type,
                                 const char *status);

#define ORD_WX_REFUND(order, no, trade, amount, status)                                            \
	ord_refund("wxpay", order, no, trade, amount, 0, "CNY", "REFUND." status, status)
#define ORD_STRIPE_REFUND(order, no, trade, amount, status)                                        \
	ord_refund("stripe", order, no, trade, amount, 0, "USD", "refund.updated", status)
#define ORD_STRIPE_CHARGE_REFUNDED(order, no, trade, amount)                                       \
	ord_refund("stripe", order, no, trade, amount, 1, "USD", "charge.refunded", "succeeded")
/* Alipay tells a refund by trade_status_sync with the trade's refunded total (refund_fee). */
#define ORD_ALI_REFUND(order, no, trade, total)                                                    \
	ord_refund("alipay", order, no, trade, total, 1, "CNY", "trade_status_sync",               \
	           "TRADE_SUCCESS")

/* One number or string from a query with one string parameter ("" when no row). */
long long ord_q1(const char *sql, const char *s);
const char *ord_qs(const char *sql, const char *s, char *buf, size_t cap);
/* The outcome of a pay (refund 0) or refund (refund 1) row. */
const char *ord_outcome(int refund, unsigned long long id, char *buf, size_t cap);
/* The order's status or refunded amount. */
const char *ord_status(const char *order, char *buf, size_t cap);
const char *ord_refunded(const char *order, char *buf, size_t cap);
/* How many events have this id and this amount in their payload. */
long long ord_event_with(const char *event_id, const char *amount);
/* How many events of a type, and alerts of a kind, the order has. */
long long ord_events(const char *order, const char *type);
long long ord_alerts(const char *order, const char *kind);
/* Orders whose out_trade_no starts with prefix and whose refunded_amount differs from their
 * refund ledger's total, and their refund rows still pending (neither done nor dead). */
long long ord_ledger_mismatches(const char *prefix);
long long ord_refunds_pending(const char *prefix);
/*
 * The statements the in-process worker's connection has executed so far (its round trips
 * to MariaDB), read on that connection; -1 on failure. Between two reads, the second read
 * and the first's COMMIT count too: subtract what two reads in a row give.
 */
long long ord_worker_statements(void);
/* The in-process processor the group's cases apply through, for a case that drives it from
 * a thread of its own (inproc_apply: no cmocka assertion outside the test's thread). */
struct proc *ord_processor(void);

#endif
