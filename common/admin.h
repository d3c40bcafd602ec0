/*
 * admin - the admin listener every daemon may run: GET /healthz (the process is alive),
 * GET /readyz (its dependencies answer: the program's ready callback), GET /metrics (the
 * Prometheus registry). Loopback by default; it never serves channel traffic. /readyz answers
 * fixed text ("ready" or "not ready"); the reason goes to the log, never to the caller. With a
 * token file every path requires "Authorization: Bearer <token>" (401 otherwise).
 */
#ifndef PAYCB_ADMIN_H
#define PAYCB_ADMIN_H

#include <stddef.h>

struct admin;

/* ready returns 0 when ready, else non-zero and a reason in why. */
typedef int (*admin_ready_fn)(void *arg, char *why, size_t len);

/* token_file NULL or "" = no token. */
int admin_start(const char *addr, int port, admin_ready_fn ready, void *arg, const char *token_file,
                struct admin **out, char *err, size_t errlen);
void admin_stop(struct admin *a);

#endif
