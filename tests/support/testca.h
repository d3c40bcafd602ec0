/*
 * testca - a test certificate authority made at run time with the openssl command: a CA, a
 * server certificate it signed for 127.0.0.1 and localhost, and a second CA that signed
 * nothing of the server's (what a client trusting the wrong CA holds). Nothing is checked in:
 * every run has its own keys.
 */
#ifndef PAYCB_TESTCA_H
#define PAYCB_TESTCA_H

#include <stddef.h>

#define TESTCA_PATH 700

struct testca {
	char ca[TESTCA_PATH];       /* the CA certificate (PEM) the client trusts */
	char other_ca[TESTCA_PATH]; /* a CA that did not sign the server's certificate */
	char cert[TESTCA_PATH];     /* the server certificate (PEM), signed by ca */
	char key[TESTCA_PATH];      /* its private key (PEM, mode 0600) */
};

/* Makes them under dir (which must exist). Returns 0, or -1 with err. */
int testca_make(const char *dir, struct testca *ca, char *err, size_t errlen);

#endif
