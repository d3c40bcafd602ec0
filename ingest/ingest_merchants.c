/*
 * ingest_merchants - every merchant's channel keys, loaded from the files the configuration
 * names into one immutable key set: at start-up, where a missing or malformed key stops the
 * daemon before it serves, and on every reload (SIGHUP), where it keeps the running set.
 *
 * A request takes a reference to the set serving when its headers arrive and gives it back
 * when its connection completes, so it finishes with the keys it started with; a reload swaps
 * the pointer under a mutex, and the last request holding the old set frees it (its keys
 * wiped, and the configuration it was read from).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ingest.h"
#include "log.h"

/*
 * ingest_merchant_load - the merchant's keys on every channel, each by its channel's
 * keys_load; err names the merchant, the file and the problem.
 */
static int
ingest_merchant_load(const struct conf *cf, struct ingest_merchant *im, char *err, size_t errlen)
{
	char e[512];

	for (int c = 0; c < chan_notify_count; c++)
		if (chan_notify_table[c]->keys_load(cf, im->cm, &im->keys[c], e, sizeof(e)) != 0) {
			snprintf(err, errlen, "merchant '%s': %s", im->cm->id, e);
			return -1;
		}
	return 0;
}

/* ingest_keyset_log - one line per merchant: what the set serving from now on holds. */
static void
ingest_keyset_log(const struct ingest_keyset *ks)
{
	for (int i = 0; i < ks->nmerchants; i++) {
		const struct ingest_merchant *im = &ks->merchants[i];
		char keys[256] = "", part[96];

		/* Each channel says what it holds: "wxpay_keys=1 apiv3_keys=1 alipay_keys=0 ...".
		 */
		for (int c = 0; c < chan_notify_count; c++) {
			size_t at = strlen(keys);

			chan_notify_table[c]->keys_describe(im->keys[c], part, sizeof(part));
			snprintf(keys + at, sizeof(keys) - at, "%s%s", c > 0 ? " " : "", part);
		}
		log_info(NULL, "event=keys_loaded merchant=%s %s", im->cm->id, keys);
	}
}

static void
ingest_keyset_free(struct ingest_keyset *ks)
{
	for (int i = 0; i < ks->nmerchants && ks->merchants; i++)
		for (int c = 0; c < chan_notify_count; c++)
			chan_notify_table[c]->keys_free(ks->merchants[i].keys[c]);
	free(ks->merchants);
	if (ks->owned != NULL) {
		conf_free(ks->owned);
		free(ks->owned);
	}
	free(ks);
}

struct ingest_keyset *
ingest_keyset_build(const struct conf *cf, char *err, size_t errlen)
{
	struct ingest_keyset *ks = calloc(1, sizeof(*ks));

	if (ks == NULL || (ks->merchants = calloc((size_t)(cf->nmerchants ? cf->nmerchants : 1),
	                                          sizeof(*ks->merchants))) == NULL) {
		snprintf(err, errlen, "out of memory");
		free(ks);
		return NULL;
	}
	atomic_init(&ks->refs, 1);
	ks->nmerchants = cf->nmerchants;
	for (int i = 0; i < ks->nmerchants; i++) {
		ks->merchants[i].cm = &cf->merchants[i];
		if (ingest_merchant_load(cf, &ks->merchants[i], err, errlen) != 0) {
			ingest_keyset_free(ks);
			return NULL;
		}
	}
	ingest_keyset_log(ks);
	return ks;
}

struct ingest_keyset *
ingest_keyset_get(struct ingest *in)
{
	struct ingest_keyset *ks;

	pthread_mutex_lock(&in->keys_mu);
	ks = in->keys;
	atomic_fetch_add(&ks->refs, 1);
	pthread_mutex_unlock(&in->keys_mu);
	return ks;
}

void
ingest_keyset_put(struct ingest_keyset *ks)
{
	if (ks != NULL && atomic_fetch_sub(&ks->refs, 1) == 1)
		ingest_keyset_free(ks);
}

void
ingest_keyset_swap(struct ingest *in, struct ingest_keyset *ks)
{
	struct ingest_keyset *old;

	pthread_mutex_lock(&in->keys_mu);
	old = in->keys;
	in->keys = ks;
	pthread_mutex_unlock(&in->keys_mu);
	ingest_keyset_put(old);
}

const struct ingest_merchant *
ingest_merchant_find(const struct ingest_keyset *ks, const char *id, int ch)
{
	for (int i = 0; i < ks->nmerchants; i++) {
		const struct conf_merchant *cm = ks->merchants[i].cm;
		if (strcmp(cm->id, id) != 0)
			continue;
		return ch >= 0 && ch < chan_notify_count && ks->merchants[i].keys[ch] != NULL
		           ? &ks->merchants[i]
		           : NULL;
	}
	return NULL;
}
