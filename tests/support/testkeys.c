/*
 * testkeys - key pairs, certificates and temporary key files for the channel tests.
 *
 * Generation uses OpenSSL 3's EVP_RSA_gen. Certificates and PEM text come from the simulator's
 * sim_pki (tools/sim/sim_pki.c), so the tests and paycb-sim make key material one way.
 */
#include "testkeys.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <openssl/rsa.h>
#include <openssl/x509.h>

#include "crypto.h"
#include "sim_pki.h"

EVP_PKEY *
tk_rsa_new(void)
{
	return EVP_RSA_gen(2048);
}

X509 *
tk_self_signed(EVP_PKEY *key, const char *serial_hex)
{
	return sim_pki_cert(key, serial_hex, 1);
}

char *
tk_cert_pem(X509 *cert)
{
	return sim_pki_cert_pem(cert);
}

char *
tk_pubkey_pem(EVP_PKEY *key)
{
	return sim_pki_pubkey_pem(key);
}

char *
tk_privkey_pem(EVP_PKEY *key)
{
	return sim_pki_privkey_pem(key);
}

char *
tk_pubkey_b64(EVP_PKEY *key)
{
	unsigned char *der = NULL;
	char *s;
	int n;

	if ((n = i2d_PUBKEY(key, &der)) <= 0)
		return NULL;
	s = crypto_b64_encode_alloc(der, (size_t)n);
	OPENSSL_free(der);
	return s;
}

int
tk_write_temp(const void *data, size_t len, char *path, size_t pathlen)
{
	const char *dir = getenv("TMPDIR");
	int fd;

	if (snprintf(path, pathlen, "%s/paycb-test-XXXXXX", dir != NULL ? dir : "/tmp") >=
	    (int)pathlen)
		return -1;
	if ((fd = mkstemp(path)) < 0)
		return -1;
	if (write(fd, data, len) != (ssize_t)len) {
		close(fd);
		unlink(path);
		return -1;
	}
	return close(fd);
}

void
tk_unlink(const char *path)
{
	unlink(path);
}
