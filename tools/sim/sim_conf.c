/*
 * sim_conf - writes paycb configurations for the simulator's keys, and loads the merchants'
 * private side back for a run.
 *
 * The configuration is edited as a libconfig tree rather than as text, so the base file's
 * settings (database, kafka, security options, anything else) come through whole, the
 * merchants section is replaced as one unit, and an override such as
 * `ingest.listen_port=18480` lands in the right group whether or not the base has it. The
 * result is then loaded with the same validation every daemon runs, so a configuration the
 * simulator writes is one the pipeline accepts. Building and writing the tree are
 * sim_conf_tree.c's, which the tests' configurations go through too.
 */
#include <errno.h>
#include <libconfig.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <openssl/crypto.h>

#include "cfg.h"
#include "chan_conf.h"
#include "sim.h"
#include "sim_conf_tree.h"

/*
 * set_path - applies one "a.b.c=value" override under root. The value is parsed as
 * libconfig syntax ("18480", "[1, 2, 3]", "\"x\"", "true"); text that does not parse is
 * taken as a plain string, so `database.name=paycb_demo` needs no quotes.
 */
static int
set_path(config_setting_t *root, const char *spec, char *err, size_t errlen)
{
	char path[256], *save = NULL, *tok, *next, *text = NULL;
	const char *eq = strchr(spec, '=');
	config_setting_t *g = root, *v;
	config_t tmp;
	int rc = -1;

	config_init(&tmp);
	if (eq == NULL || eq == spec || (size_t)(eq - spec) >= sizeof(path)) {
		snprintf(err, errlen, "--set '%s': expected path=value", spec);
		goto done;
	}
	memcpy(path, spec, (size_t)(eq - spec));
	path[eq - spec] = '\0';
	if ((text = malloc(strlen(eq) + 16)) == NULL)
		goto done;
	sprintf(text, "v = %s;", eq + 1);
	if (config_read_string(&tmp, text) != CONFIG_TRUE) {
		config_destroy(&tmp);
		config_init(&tmp);
		if (config_setting_set_string(
		        config_setting_add(config_root_setting(&tmp), "v", CONFIG_TYPE_STRING),
		        eq + 1) != CONFIG_TRUE)
			goto done;
	}
	v = config_setting_get_member(config_root_setting(&tmp), "v");
	for (tok = strtok_r(path, ".", &save); tok != NULL; tok = next) {
		config_setting_t *child = config_setting_get_member(g, tok);

		if ((next = strtok_r(NULL, ".", &save)) == NULL) {
			if (child != NULL && config_setting_remove(g, tok) != CONFIG_TRUE)
				goto done;
			if (sim_conf_copy(g, tok, v) != 0) {
				snprintf(err, errlen, "--set '%s': cannot set this value", spec);
				goto done;
			}
			break;
		}
		if (child == NULL &&
		    (child = config_setting_add(g, tok, CONFIG_TYPE_GROUP)) == NULL)
			goto done;
		if (config_setting_type(child) != CONFIG_TYPE_GROUP) {
			snprintf(err, errlen, "--set '%s': %s is not a group", spec, tok);
			goto done;
		}
		g = child;
	}
	rc = 0;
done:
	if (rc != 0 && err[0] == '\0')
		snprintf(err, errlen, "--set '%s': invalid", spec);
	free(text);
	config_destroy(&tmp);
	return rc;
}

static config_setting_t *
add_str(config_setting_t *g, const char *name, const char *value)
{
	config_setting_t *s = config_setting_add(g, name, CONFIG_TYPE_STRING);

	return s != NULL && config_setting_set_string(s, value) == CONFIG_TRUE ? s : NULL;
}

/* add_merchant - one element of the merchants list, naming only public material. */
static int
add_merchant(config_setting_t *list, const struct sim_mfiles *f)
{
	config_setting_t *m = config_setting_add(list, NULL, CONFIG_TYPE_GROUP), *g, *keys, *k, *a;

	if (m == NULL || add_str(m, "id", f->id) == NULL)
		return -1;
	if ((g = config_setting_add(m, "wxpay", CONFIG_TYPE_GROUP)) == NULL ||
	    add_str(g, "mchid", f->mchid) == NULL ||
	    add_str(g, "apiv3_key_file", f->apiv3) == NULL ||
	    (keys = config_setting_add(g, "keys", CONFIG_TYPE_LIST)) == NULL)
		return -1;
	/* The certificate names its own serial; the public key needs its PUB_KEY_ID_. */
	if ((k = config_setting_add(keys, NULL, CONFIG_TYPE_GROUP)) == NULL ||
	    add_str(k, "file", f->wx_cert) == NULL ||
	    (k = config_setting_add(keys, NULL, CONFIG_TYPE_GROUP)) == NULL ||
	    add_str(k, "serial", f->wx_pubkey_id) == NULL || add_str(k, "file", f->wx_pub) == NULL)
		return -1;
	/* The merchant's API key, for paycb-reconciler's calls (files made by older versions
	 * of `keys` have none). */
	if (f->wx_merchant_key[0] != '\0' &&
	    (add_str(g, "merchant_key_file", f->wx_merchant_key) == NULL ||
	     add_str(g, "merchant_serial", f->wx_merchant_serial) == NULL))
		return -1;
	if (f->wx_api_base[0] != '\0' && add_str(g, "api_base_url", f->wx_api_base) == NULL)
		return -1;
	if ((g = config_setting_add(m, "alipay", CONFIG_TYPE_GROUP)) == NULL ||
	    add_str(g, "app_id", f->app_id) == NULL ||
	    (a = config_setting_add(g, "public_key_files", CONFIG_TYPE_ARRAY)) == NULL ||
	    config_setting_set_string_elem(a, -1, f->ali_pub) == NULL)
		return -1;
	if (f->ali_api_base[0] != '\0' &&
	    (add_str(g, "app_private_key_file", f->ali_app_key) == NULL ||
	     add_str(g, "api_base_url", f->ali_api_base) == NULL))
		return -1;
	/* The simulator is a test environment: its Stripe events say livemode false, so its
	 * merchants are test-mode merchants (docs/ingest.md, "Unroutable notifications"). */
	if ((g = config_setting_add(m, "stripe", CONFIG_TYPE_GROUP)) == NULL ||
	    (k = config_setting_add(g, "test_mode", CONFIG_TYPE_BOOL)) == NULL ||
	    config_setting_set_bool(k, 1) == CONFIG_FALSE ||
	    (a = config_setting_add(g, "secret_files", CONFIG_TYPE_ARRAY)) == NULL ||
	    config_setting_set_string_elem(a, -1, f->stripe[0]) == NULL ||
	    config_setting_set_string_elem(a, -1, f->stripe[1]) == NULL)
		return -1;
	if (f->stripe_api_base[0] != '\0' &&
	    (add_str(g, "api_key_file", f->stripe_api_key) == NULL ||
	     add_str(g, "api_base_url", f->stripe_api_base) == NULL))
		return -1;
	return 0;
}

void
sim_mfiles_api(struct sim_mfiles *f, const char *url)
{
	snprintf(f->wx_api_base, sizeof(f->wx_api_base), "%s/wx", url);
	snprintf(f->ali_api_base, sizeof(f->ali_api_base), "%s/ali/gateway.do", url);
	snprintf(f->stripe_api_base, sizeof(f->stripe_api_base), "%s/stripe", url);
}

int
sim_conf_write(const char *base, const char *out, const struct sim_mfiles *m, int nm,
               char *const *sets, int nsets, char *err, size_t errlen)
{
	config_setting_t *root, *list;
	struct cfg_errors errs;
	struct conf check;
	config_t c;
	int rc = -1;

	err[0] = '\0';
	memset(&check, 0, sizeof(check));
	config_init(&c);
	if (base != NULL && config_read_file(&c, base) != CONFIG_TRUE) {
		snprintf(err, errlen, "%s:%d: %s", base, config_error_line(&c),
		         config_error_text(&c) ? config_error_text(&c) : "cannot read");
		goto done;
	}
	root = config_root_setting(&c);
	if (m != NULL) {
		if (config_setting_get_member(root, "merchants") != NULL &&
		    config_setting_remove(root, "merchants") != CONFIG_TRUE)
			goto done;
		if ((list = config_setting_add(root, "merchants", CONFIG_TYPE_LIST)) == NULL)
			goto done;
		for (int i = 0; i < nm; i++)
			if (add_merchant(list, &m[i]) != 0)
				goto done;
	}
	for (int i = 0; i < nsets; i++)
		if (set_path(root, sets[i], err, errlen) != 0)
			goto done;
	if (sim_conf_save(&c, out, err, errlen) != 0)
		goto done;
	/* Checked as every program reads it, key files and channels included. */
	if (chan_conf_use() != 0 ||
	    conf_load(out, PROG_INGEST | PROG_PROCESSOR | PROG_RETRIER | PROG_SIM, &check, &errs) !=
	        0) {
		snprintf(err, errlen, "the written configuration %s does not validate:\n%s", out,
		         errs.text);
		goto done;
	}
	rc = 0;
done:
	if (rc != 0 && err[0] == '\0')
		snprintf(err, errlen, "cannot build the configuration for %s", out);
	conf_free(&check);
	config_destroy(&c);
	return rc;
}

/* ---- loading the merchants for a run ------------------------------------------------- */

static int
load_priv(const char *dir, const char *id, const char *file, EVP_PKEY **out, char *err,
          size_t errlen)
{
	char path[SIM_PATH + 128];

	snprintf(path, sizeof(path), "%s/%s/%s", dir, id, file);
	return crypto_load_privkey_file(path, out, err, errlen);
}

/* same_key - whether the private key priv belongs to the public key (or certificate) file. */
static int
same_key(EVP_PKEY *priv, const char *pubfile)
{
	EVP_PKEY *pub = NULL;
	char err[128];
	int eq;

	if (crypto_load_pubkey_file(pubfile, &pub, err, sizeof(err)) != 0)
		return 0;
	eq = EVP_PKEY_eq(priv, pub) == 1;
	EVP_PKEY_free(pub);
	return eq;
}

static int
load_wx(const struct conf_merchant *cm, const char *dir, struct sim_merchant *m, char *err,
        size_t errlen)
{
	const struct conf_wxpay *w = chan_conf_wx(cm);
	char *secret = NULL;
	size_t len = 0;
	int rc = -1;

	snprintf(m->mchid, sizeof(m->mchid), "%s", w->mchid ? w->mchid : "");
	if (cfg_read_secret(w->apiv3_key_file, &secret, &len, err, errlen) != 0)
		goto done;
	if (len != 32) {
		snprintf(err, errlen, "%s: the APIv3 key is not 32 bytes", w->apiv3_key_file);
		goto done;
	}
	memcpy(m->apiv3, secret, 32);
	for (int i = 0; i < w->nkeys; i++) {
		const struct conf_wx_key *k = &w->keys[i];
		int pubkey = k->serial != NULL && strncmp(k->serial, "PUB_KEY_ID_", 11) == 0;
		EVP_PKEY **slot = pubkey ? &m->wx_pub_key : &m->wx_cert_key;
		char serial[CRYPTO_SERIAL_MAX + 1];
		EVP_PKEY *pub = NULL;

		if (*slot != NULL)
			continue; /* the first of each kind signs; the rest are older keys */
		if (load_priv(dir, cm->id, pubkey ? SIM_WX_PUB_KEY : SIM_WX_CERT_KEY, slot, err,
		              errlen) != 0)
			goto done;
		if (!same_key(*slot, k->file)) {
			snprintf(err, errlen,
			         "merchant %s: the simulator's WeChat Pay key does not "
			         "match %s",
			         cm->id, k->file);
			goto done;
		}
		if (pubkey) {
			snprintf(m->wx_pubkey_id, sizeof(m->wx_pubkey_id), "%s", k->serial);
			continue;
		}
		if (crypto_load_pubkey_file_serial(k->file, &pub, serial, sizeof(serial), err,
		                                   errlen) != 0)
			goto done;
		EVP_PKEY_free(pub);
		snprintf(m->wx_serial, sizeof(m->wx_serial), "%s", serial);
	}
	if (m->wx_cert_key == NULL && m->wx_pub_key == NULL) {
		snprintf(err, errlen, "merchant %s: no WeChat Pay key", cm->id);
		goto done;
	}
	rc = 0;
done:
	if (secret != NULL) {
		OPENSSL_cleanse(secret, len);
		free(secret);
	}
	return rc;
}

static int
load_merchant(const struct conf_merchant *cm, const char *dir, struct sim_merchant *m, char *err,
              size_t errlen)
{
	const struct conf_alipay *a = chan_conf_ali(cm);
	const struct conf_stripe *st = chan_conf_stripe(cm);

	m->id = cm->id;
	snprintf(m->order_key, sizeof(m->order_key), "%s",
	         st && st->order_metadata_key ? st->order_metadata_key : "order_id");
	if (chan_conf_wx(cm) != NULL) {
		if (load_wx(cm, dir, m, err, errlen) != 0)
			return -1;
		m->has[SIM_WX] = 1;
	}
	if (a != NULL) {
		int match = 0;

		snprintf(m->app_id, sizeof(m->app_id), "%s", a->app_id);
		if (load_priv(dir, cm->id, SIM_ALI_KEY, &m->ali_key, err, errlen) != 0)
			return -1;
		for (int i = 0; i < a->public_key_files.n; i++)
			match |= same_key(m->ali_key, a->public_key_files.v[i]);
		if (!match) {
			snprintf(err, errlen,
			         "merchant %s: the simulator's Alipay key matches none "
			         "of public_key_files",
			         cm->id);
			return -1;
		}
		m->has[SIM_ALI] = 1;
	}
	if (st != NULL) {
		/* The last two secrets: the newest signs, the one before it joins during a roll. */
		int n = st->secret_files.n, first = n > 2 ? n - 2 : 0;

		for (int i = first; i < n; i++) {
			char *s = NULL;
			size_t len = 0;

			if (cfg_read_secret(st->secret_files.v[i], &s, &len, err, errlen) != 0)
				return -1;
			m->stripe[m->nstripe] = (uint8_t *)s;
			m->stripe_len[m->nstripe++] = len;
		}
		m->has[SIM_STRIPE] = m->nstripe > 0;
	}
	return 0;
}

int
sim_merchants_load(const struct conf *cf, const char *keys_dir, struct sim_merchant **out, int *n,
                   char *err, size_t errlen)
{
	struct sim_merchant *m =
	    calloc((size_t)(cf->nmerchants > 0 ? cf->nmerchants : 1), sizeof(*m));
	int rc = -1;

	*out = NULL;
	*n = 0;
	if (m == NULL)
		goto done;
	if (cf->nmerchants == 0) {
		snprintf(err, errlen,
		         "the configuration has no merchants (paycb-sim keys writes "
		         "them)");
		goto done;
	}
	for (int i = 0; i < cf->nmerchants; i++)
		if (load_merchant(&cf->merchants[i], keys_dir, &m[i], err, errlen) != 0)
			goto done;
	rc = 0;
done:
	if (rc != 0) {
		sim_merchants_free(m, cf->nmerchants);
		return -1;
	}
	*out = m;
	*n = cf->nmerchants;
	return 0;
}

void
sim_merchants_free(struct sim_merchant *m, int n)
{
	if (m == NULL)
		return;
	for (int i = 0; i < n; i++) {
		EVP_PKEY_free(m[i].wx_cert_key);
		EVP_PKEY_free(m[i].wx_pub_key);
		EVP_PKEY_free(m[i].ali_key);
		OPENSSL_cleanse(m[i].apiv3, sizeof(m[i].apiv3));
		for (int k = 0; k < m[i].nstripe; k++) {
			OPENSSL_cleanse(m[i].stripe[k], m[i].stripe_len[k]);
			free(m[i].stripe[k]);
		}
	}
	free(m);
}
