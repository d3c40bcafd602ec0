/*
 * retrier_publish - publishes a batch of the retrier's messages, each confirmed by its
 * delivery report.
 *
 * The jobs of a sweep (republished rows, dead letters, outbox rows) go out together through
 * kq_publish_batch, the path the processor's relay takes too: all are queued, then their
 * reports are awaited against one deadline, the delivery timeout plus a second for the
 * poller. When the broker is down the phase therefore ends at that deadline whatever the
 * batch's size, with the jobs unknown; their rows' leases, longer than the phase, simply
 * expire and the rows come due again. Only a job with rc == KQ_DELIVERED counts as done.
 */
#include <stdio.h>
#include <stdlib.h>

#include "retrier.h"

/* How long a phase waits for its reports: the delivery timeout and a second for the poller. */
static int
retrier_publish_wait_ms(const struct retrier *r)
{
	return (int)r->cf->kafka.delivery_timeout_ms + 1000;
}

/* retrier_publish - publishes jobs[0..n) as one batch; returns how many were delivered. */
int
retrier_publish(struct retrier *r, struct retrier_job *jobs, int n)
{
	struct kq_msg *msgs = NULL;
	struct kq_result *res = NULL;
	int ok = 0;

	if (n <= 0)
		return 0;
	if ((msgs = calloc((size_t)n, sizeof(*msgs))) == NULL ||
	    (res = calloc((size_t)n, sizeof(*res))) == NULL) {
		for (int i = 0; i < n; i++) {
			jobs[i].rc = KQ_FAILED;
			snprintf(jobs[i].err, sizeof(jobs[i].err), "out of memory");
		}
		goto done;
	}
	for (int i = 0; i < n; i++)
		msgs[i] = (struct kq_msg){jobs[i].topic, jobs[i].key, jobs[i].klen, jobs[i].val,
		                          jobs[i].vlen};
	ok = kq_publish_batch(r->kp, msgs, n, retrier_publish_wait_ms(r), res);
	for (int i = 0; i < n; i++) {
		jobs[i].rc = res[i].rc;
		snprintf(jobs[i].err, sizeof(jobs[i].err), "%s", res[i].err);
	}
done:
	free(res);
	free(msgs);
	return ok;
}

long long
retrier_publish_lease_s(const struct retrier *r)
{
	/* The phase's wait, a second more for queueing the batch, and the lease margin. */
	return (retrier_publish_wait_ms(r) + 1000 + 999) / 1000 + r->cf->retry.lease_margin_s;
}
