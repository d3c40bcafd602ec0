/*
 * admin - the admin listener every daemon may run: GET /healthz (the process is alive),
 * GET /readyz (its dependencies answer: the program's ready callback), GET /metrics (the
 * Prometheus registry). Loopback by default; it never serves channel traffic.
 */
#ifndef PAYCB_ADMIN_H
#define PAYCB_ADMIN_H

#include <stddef.h>

struct admin;

/* ready returns 0 when ready, else non-zero and a reason in why. */
typedef int (*admin_ready_fn)(void *arg, char *why, size_t len);

int admin_start(const char *addr, int port, admin_ready_fn ready, void *arg, struct admin **out,
		char *err, size_t errlen);
void admin_stop(struct admin *a);

#endif
