/*
 * retrier_publish - publishes a batch of messages, each confirmed by its delivery report.
 *
 * kq_produce_wait() blocks for one message's report, which takes a broker round trip; a few
 * threads share the one idempotent producer so a batch of hundreds of leased rows is not
 * published one round trip at a time. The phase has a budget: once it is spent (the broker is
 * down), the remaining jobs are skipped rather than queued, and their rows' leases simply
 * expire, so the rows come due again. Only a job with rc == 0 counts as done.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "retrier.h"

#define PUB_THREADS 8

struct pub_phase {
	struct retrier *r;
	struct retrier_job *jobs;
	int n;
	atomic_int next;
	long long deadline_ms;
	int wait_ms;
};

/* pub_one - publishes job i, or skips it when the budget is spent. */
static void
pub_one(struct pub_phase *ph, struct retrier_job *j)
{
	long long left = ph->deadline_ms - clock_mono_ms();

	if (left <= 0) {
		j->rc = 1;
		snprintf(j->err, sizeof(j->err), "publish budget spent");
		return;
	}
	j->err[0] = '\0';
	j->rc =
	    kq_produce_wait(ph->r->kp, j->topic, j->key, j->klen, j->val, j->vlen,
	                    (int)(left < ph->wait_ms ? left : ph->wait_ms), j->err, sizeof(j->err));
}

static void *
pub_main(void *arg)
{
	struct pub_phase *ph = arg;
	int i;

	while ((i = atomic_fetch_add(&ph->next, 1)) < ph->n)
		pub_one(ph, &ph->jobs[i]);
	return NULL;
}

/* retrier_publish - publishes jobs[0..n) in parallel; returns how many were delivered. */
int
retrier_publish(struct retrier *r, struct retrier_job *jobs, int n)
{
	struct pub_phase ph;
	pthread_t th[PUB_THREADS];
	int nth = 0, ok = 0;

	if (n <= 0)
		return 0;
	memset(&ph, 0, sizeof(ph));
	ph.r = r;
	ph.jobs = jobs;
	ph.n = n;
	atomic_init(&ph.next, 0);
	/* A delivery report comes within message.timeout.ms; a little more covers the poller. */
	ph.wait_ms = (int)r->cf->kafka.delivery_timeout_ms + 1000;
	ph.deadline_ms = clock_mono_ms() + ph.wait_ms + 1000;
	for (int t = 0; t < PUB_THREADS && t < n - 1; t++) {
		if (pthread_create(&th[nth], NULL, pub_main, &ph) != 0)
			break; /* fewer threads only make the phase slower */
		nth++;
	}
	pub_main(&ph);
	for (int t = 0; t < nth; t++)
		pthread_join(th[t], NULL);
	for (int i = 0; i < n; i++)
		if (jobs[i].rc == 0)
			ok++;
	return ok;
}

long long
retrier_publish_lease_s(const struct retrier *r)
{
	/* pub_phase: wait_ms = delivery timeout + 1 s, the phase's deadline 1 s more. */
	return (r->cf->kafka.delivery_timeout_ms + 2000 + 999) / 1000 + r->cf->retry.lease_margin_s;
}
