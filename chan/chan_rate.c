/*
 * chan_rate - token buckets, one per merchant and channel in the process, shared by every
 * client of that pair (clients are per thread). The channels publish their limits (WeChat Pay
 * 150 QPS, Stripe 100 per second live, 25 per endpoint); the bucket keeps paycb under the
 * share configured for it and, after a 429, pauses the pair instead of hammering.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "chan_int.h"
#include "clock.h"

struct chan_rate {
	struct chan_rate *next;
	char merchant[64];
	enum chan_id channel;
	int refs;
	pthread_mutex_t mu;
	double per_ms, burst, tokens;
	long long last_ms;
};

static pthread_mutex_t chan_rate_mu = PTHREAD_MUTEX_INITIALIZER;
static struct chan_rate *chan_rate_all;

struct chan_rate *
chan_rate_get(const char *merchant_id, enum chan_id channel, double per_s, double burst)
{
	struct chan_rate *r;

	if (per_s <= 0)
		per_s = 10;
	if (burst < 1)
		burst = per_s < 1 ? 1 : per_s;
	pthread_mutex_lock(&chan_rate_mu);
	for (r = chan_rate_all; r != NULL; r = r->next)
		if (r->channel == channel && strcmp(r->merchant, merchant_id) == 0)
			break;
	if (r != NULL) {
		/* The first client's settings hold; later ones share them. */
		r->refs++;
	} else if ((r = calloc(1, sizeof(*r))) != NULL) {
		strncpy(r->merchant, merchant_id, sizeof(r->merchant) - 1);
		r->channel = channel;
		r->refs = 1;
		pthread_mutex_init(&r->mu, NULL);
		r->per_ms = per_s / 1000.0;
		r->burst = burst;
		r->tokens = burst;
		r->last_ms = clock_mono_ms();
		r->next = chan_rate_all;
		chan_rate_all = r;
	}
	pthread_mutex_unlock(&chan_rate_mu);
	return r;
}

void
chan_rate_put(struct chan_rate *r)
{
	struct chan_rate **pp;

	if (r == NULL)
		return;
	pthread_mutex_lock(&chan_rate_mu);
	if (--r->refs == 0) {
		for (pp = &chan_rate_all; *pp != NULL; pp = &(*pp)->next)
			if (*pp == r) {
				*pp = r->next;
				break;
			}
		pthread_mutex_destroy(&r->mu);
		free(r);
	}
	pthread_mutex_unlock(&chan_rate_mu);
}

/* chan_rate_refill - adds the tokens earned since last_ms; the caller holds r->mu. */
static void
chan_rate_refill(struct chan_rate *r, long long now_ms)
{
	if (now_ms > r->last_ms) {
		r->tokens += (double)(now_ms - r->last_ms) * r->per_ms;
		if (r->tokens > r->burst)
			r->tokens = r->burst;
		r->last_ms = now_ms;
	}
}

long
chan_rate_take(struct chan_rate *r, long long now_ms)
{
	long wait = 0;

	pthread_mutex_lock(&r->mu);
	chan_rate_refill(r, now_ms);
	if (r->tokens >= 1.0)
		r->tokens -= 1.0;
	else
		wait = (long)((1.0 - r->tokens) / r->per_ms) + 1;
	pthread_mutex_unlock(&r->mu);
	return wait;
}

void
chan_rate_pause(struct chan_rate *r, long long now_ms, long pause_ms)
{
	pthread_mutex_lock(&r->mu);
	chan_rate_refill(r, now_ms);
	/* Negative tokens take pause_ms to climb back to one. */
	r->tokens = 1.0 - (double)pause_ms * r->per_ms;
	if (r->tokens > 0)
		r->tokens = 0;
	pthread_mutex_unlock(&r->mu);
}
