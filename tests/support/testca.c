/*
 * testca - the test certificate authority (testca.h), made with the openssl command the
 * project's dependencies already install, so the certificates are ordinary X.509 v3 ones
 * with the extensions a TLS client checks (basicConstraints on the CA, subjectAltName on the
 * server certificate).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "testca.h"

int
testca_make(const char *dir, struct testca *ca, char *err, size_t errlen)
{
	char cmd[4096];
	int n, rc;

	snprintf(ca->ca, sizeof(ca->ca), "%s/ca.pem", dir);
	snprintf(ca->other_ca, sizeof(ca->other_ca), "%s/other-ca.pem", dir);
	snprintf(ca->cert, sizeof(ca->cert), "%s/server.pem", dir);
	snprintf(ca->key, sizeof(ca->key), "%s/server.key", dir);
	/* Two days of validity: enough for a run, and no certificate outlives its test. */
	n = snprintf(
	    cmd, sizeof(cmd),
	    "set -e; cd '%s'; exec 2>testca.log; "
	    "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
	    "-subj /CN=paycb-test-ca -addext basicConstraints=critical,CA:TRUE; "
	    "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem "
	    "-days 2 -subj /CN=paycb-other-ca -addext basicConstraints=critical,CA:TRUE; "
	    "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr "
	    "-subj /CN=127.0.0.1; "
	    "printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\\n' >server.ext; "
	    "openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial "
	    "-out server.pem -days 2 -extfile server.ext; chmod 600 server.key ca.key "
	    "other-ca.key",
	    dir);
	if (n < 0 || (size_t)n >= sizeof(cmd) || strchr(dir, '\'') != NULL) {
		snprintf(err, errlen, "testca: unusable directory %s", dir);
		return -1;
	}
	if ((rc = system(cmd)) != 0) {
		snprintf(err, errlen, "testca: openssl failed (status %d), see %s/testca.log", rc,
		         dir);
		return -1;
	}
	return 0;
}
