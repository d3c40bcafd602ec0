/*
 * sim_keys - generates the keys of one merchant's three channels, as the channels' consoles
 * hand them out.
 *
 * WeChat Pay: an RSA platform key with a self-signed platform certificate (ingest selects
 * it by the certificate's serial, which WeChat sends as Wechatpay-Serial), a second RSA key
 * published as a "WeChat Pay public key" with its PUB_KEY_ID_ (the newer scheme), and the
 * 32-byte APIv3 key that encrypts resources. Alipay: an RSA key pair ("Alipay public key").
 * Stripe: two endpoint secrets, as while a secret is being rolled.
 *
 * The private keys stay with the simulator (0600); the certificate and the public keys go to
 * paycb's configuration. The APIv3 key and the Stripe secrets are shared by both sides by
 * nature, so paycb's configuration names their files, which are 0600 too.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/x509.h>

#include "sim.h"
#include "sim_pki.h"

/* Platform certificates are valid for five years, as WeChat's are. */
#define SIM_CERT_DAYS (5 * 365)

/* mkdirs - creates path and its parents with mode (existing directories are fine). */
static int
mkdirs(const char *path, mode_t mode)
{
	char buf[SIM_PATH];
	size_t n = strlen(path);

	if (n == 0 || n >= sizeof(buf))
		return -1;
	memcpy(buf, path, n + 1);
	for (char *p = buf + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(buf, mode) != 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(buf, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* write_file - writes len bytes to path with exactly mode, whatever the umask. */
static int
write_file(const char *path, const void *data, size_t len, mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
	int rc = -1;

	if (fd < 0)
		return -1;
	if (fchmod(fd, mode) != 0 || write(fd, data, len) != (ssize_t)len)
		goto done;
	rc = 0;
done:
	if (close(fd) != 0)
		rc = -1;
	return rc;
}

/* write_pem - writes PEM text made by sim_pki to path with mode; cleanses and frees it. */
static int
write_pem(const char *path, char *pem, mode_t mode)
{
	int rc = pem != NULL ? write_file(path, pem, strlen(pem), mode) : -1;

	if (pem != NULL)
		OPENSSL_cleanse(pem, strlen(pem));
	free(pem);
	return rc;
}

static int
write_privkey(const char *path, EVP_PKEY *key)
{
	return write_pem(path, sim_pki_privkey_pem(key), 0600);
}

static int
write_pubkey(const char *path, EVP_PKEY *key)
{
	return write_pem(path, sim_pki_pubkey_pem(key), 0644);
}

/* random_text - n random characters of alphabet, NUL-terminated. */
static int
random_text(char *out, size_t n, const char *alphabet)
{
	unsigned char raw[128];
	size_t k = strlen(alphabet);

	if (n > sizeof(raw) || RAND_bytes(raw, (int)n) != 1)
		return -1;
	for (size_t i = 0; i < n; i++)
		out[i] = alphabet[raw[i] % k];
	out[n] = '\0';
	OPENSSL_cleanse(raw, sizeof(raw));
	return 0;
}

static const char alnum[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/*
 * paycb_keys - the keys paycb's reconciler presents to the channels (the WeChat Pay merchant
 * API key, the Alipay app key, a Stripe secret key), which the channel API simulator checks.
 * On failure *what names the key.
 */
static int
paycb_keys(const char *mdir, struct sim_mfiles *f, const char **what)
{
	char secret[48];
	EVP_PKEY *k = NULL;
	int rc = -1;

	*what = "WeChat Pay merchant API key";
	snprintf(f->wx_merchant_key, sizeof(f->wx_merchant_key), "%s/%s", mdir, SIM_WX_MCH_KEY);
	if ((k = EVP_RSA_gen(2048)) == NULL || write_privkey(f->wx_merchant_key, k) != 0 ||
	    random_text(f->wx_merchant_serial, 40, "0123456789ABCDEF") != 0)
		goto done;
	*what = "Alipay app key";
	snprintf(f->ali_app_key, sizeof(f->ali_app_key), "%s/%s", mdir, SIM_ALI_APP_KEY);
	EVP_PKEY_free(k);
	if ((k = EVP_RSA_gen(2048)) == NULL || write_privkey(f->ali_app_key, k) != 0)
		goto done;
	*what = "Stripe secret key";
	memcpy(secret, "sk_test_", 8);
	snprintf(f->stripe_api_key, sizeof(f->stripe_api_key), "%s/stripe_api_key", mdir);
	if (random_text(secret + 8, 32, alnum) != 0 ||
	    write_file(f->stripe_api_key, secret, 40, 0600) != 0)
		goto done;
	rc = 0;
done:
	OPENSSL_cleanse(secret, sizeof(secret));
	EVP_PKEY_free(k);
	return rc;
}

int
sim_keys_make(const char *dir, const char *id, int index, struct sim_mfiles *f, char *err,
              size_t errlen)
{
	char mdir[SIM_PATH], path[SIM_PATH + 32], secret[64], digits[40];
	EVP_PKEY *wx = NULL, *wxpub = NULL, *ali = NULL;
	const char *what = "directory";
	X509 *cert = NULL;
	int rc = -1;

	memset(f, 0, sizeof(*f));
	errno = 0;
	snprintf(f->id, sizeof(f->id), "%s", id);
	if ((size_t)snprintf(mdir, sizeof(mdir), "%s/%s", dir, id) >= sizeof(mdir) - 40 ||
	    mkdirs(dir, 0700) != 0 || mkdirs(mdir, 0700) != 0 || chmod(mdir, 0700) != 0)
		goto done;
	/* Merchant numbers look like the channels' own: a 10-digit mchid, a 16-digit app_id. */
	snprintf(f->mchid, sizeof(f->mchid), "19%08d", 1000 + index);
	snprintf(f->app_id, sizeof(f->app_id), "20210%011d", 1 + index);

	what = "WeChat Pay platform key";
	if ((wx = EVP_RSA_gen(2048)) == NULL ||
	    (cert = sim_pki_cert(wx, NULL, SIM_CERT_DAYS)) == NULL)
		goto done;
	snprintf(path, sizeof(path), "%s/%s", mdir, SIM_WX_CERT_KEY);
	if (write_privkey(path, wx) != 0)
		goto done;
	snprintf(f->wx_cert, sizeof(f->wx_cert), "%s/wx_platform_cert.pem", mdir);
	if (write_pem(f->wx_cert, sim_pki_cert_pem(cert), 0644) != 0)
		goto done;

	what = "WeChat Pay public key";
	if ((wxpub = EVP_RSA_gen(2048)) == NULL || random_text(digits, 32, "0123456789") != 0)
		goto done;
	snprintf(f->wx_pubkey_id, sizeof(f->wx_pubkey_id), "PUB_KEY_ID_01%s", digits);
	snprintf(path, sizeof(path), "%s/%s", mdir, SIM_WX_PUB_KEY);
	snprintf(f->wx_pub, sizeof(f->wx_pub), "%s/wx_pubkey.pem", mdir);
	if (write_privkey(path, wxpub) != 0 || write_pubkey(f->wx_pub, wxpub) != 0)
		goto done;

	what = "WeChat Pay APIv3 key";
	snprintf(f->apiv3, sizeof(f->apiv3), "%s/wx_apiv3_key", mdir);
	if (random_text(secret, 32, alnum) != 0 || write_file(f->apiv3, secret, 32, 0600) != 0)
		goto done;

	what = "Alipay key pair";
	snprintf(path, sizeof(path), "%s/%s", mdir, SIM_ALI_KEY);
	snprintf(f->ali_pub, sizeof(f->ali_pub), "%s/alipay_public.pem", mdir);
	if ((ali = EVP_RSA_gen(2048)) == NULL || write_privkey(path, ali) != 0 ||
	    write_pubkey(f->ali_pub, ali) != 0)
		goto done;

	if (paycb_keys(mdir, f, &what) != 0)
		goto done;

	what = "Stripe endpoint secret";
	for (int i = 0; i < 2; i++) {
		memcpy(secret, "whsec_", 6);
		snprintf(f->stripe[i], sizeof(f->stripe[i]), "%s/stripe_whsec_%d", mdir, i + 1);
		if (random_text(secret + 6, 32, alnum) != 0 ||
		    write_file(f->stripe[i], secret, 38, 0600) != 0)
			goto done;
	}
	rc = 0;
done:
	if (rc != 0)
		snprintf(err, errlen, "%s for merchant %s under %s: %s", what, id, dir,
		         errno ? strerror(errno) : "OpenSSL failure");
	OPENSSL_cleanse(secret, sizeof(secret));
	X509_free(cert);
	EVP_PKEY_free(wx);
	EVP_PKEY_free(wxpub);
	EVP_PKEY_free(ali);
	ERR_clear_error();
	return rc;
}
