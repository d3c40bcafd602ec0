/*
 * ops_wxsign - signs one WeChat Pay APIv3 notification for the shell tests in tests/ops.
 *
 *   ops_wxsign PRIVKEY.pem SERIAL APIV3_KEY_FILE EVENT_TYPE PLAINTEXT_JSON BODY_OUT
 *
 * Encrypts PLAINTEXT_JSON into the resource (AEAD_AES_256_GCM with the APIv3 key), signs
 * "timestamp\nnonce\nbody\n" with the platform private key exactly as WeChat Pay does
 * (through the channel library's notify_wx_sign, chan/chan_notify.h), writes the body to
 * BODY_OUT and prints the Wechatpay-* headers on stdout, one "Name: value" per line, for
 * `curl -H @file`. The openssl command line cannot do the AES-GCM part, hence this helper.
 * Exit 0, or 1 with a message on stderr.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <openssl/pem.h>

#include "chan_notify.h"

int
main(int argc, char **argv)
{
	char ts[24], nonce[40], *sig = NULL, *body = NULL;
	uint8_t key[33];
	EVP_PKEY *pk = NULL;
	FILE *fp;
	size_t n;
	int rc = 1;

	if (argc != 7) {
		fprintf(stderr, "usage: ops_wxsign PRIVKEY.pem SERIAL APIV3_KEY_FILE EVENT_TYPE "
		                "PLAINTEXT_JSON BODY_OUT\n");
		return 64;
	}
	if ((fp = fopen(argv[1], "r")) != NULL) {
		pk = PEM_read_PrivateKey(fp, NULL, NULL, NULL);
		fclose(fp);
	}
	if (pk == NULL) {
		fprintf(stderr, "ops_wxsign: cannot read private key %s\n", argv[1]);
		goto done;
	}
	if ((fp = fopen(argv[3], "r")) == NULL) {
		fprintf(stderr, "ops_wxsign: cannot read %s\n", argv[3]);
		goto done;
	}
	n = fread(key, 1, sizeof(key), fp);
	fclose(fp);
	if (n < 32) {
		fprintf(stderr, "ops_wxsign: %s: the APIv3 key must be 32 bytes\n", argv[3]);
		goto done;
	}
	if (notify_wx_sign(pk, argv[2], key, argv[4], argv[5], time(NULL), &body, ts, nonce,
	                   &sig) != 0) {
		fprintf(stderr, "ops_wxsign: signing failed\n");
		goto done;
	}
	if ((fp = fopen(argv[6], "w")) == NULL) {
		fprintf(stderr, "ops_wxsign: cannot write %s\n", argv[6]);
		goto done;
	}
	n = fputs(body, fp) == EOF;
	if (fclose(fp) != 0 || n) {
		fprintf(stderr, "ops_wxsign: cannot write %s\n", argv[6]);
		goto done;
	}
	printf("Content-Type: application/json\n"
	       "Wechatpay-Timestamp: %s\n"
	       "Wechatpay-Nonce: %s\n"
	       "Wechatpay-Signature: %s\n"
	       "Wechatpay-Serial: %s\n"
	       "Wechatpay-Signature-Type: WECHATPAY2-SHA256-RSA2048\n",
	       ts, nonce, sig, argv[2]);
	rc = 0;
done:
	free(sig);
	free(body);
	EVP_PKEY_free(pk);
	return rc;
}
