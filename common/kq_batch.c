/*
 * kq_batch - paycb's one confirmed-publish path: a batch of messages produced at once and
 * each confirmed by its own delivery report (see kq.h).
 *
 * Every message is queued first and the reports are then awaited against one deadline, as
 * librdkafka's own producer example does: the messages share produce requests and the batch
 * costs about one broker round trip, with no thread blocked per message. The processor's
 * outbox relay and the retrier's republishes, dead letters and outbox sweep all publish this
 * way, so a message is confirmed by the same rules wherever it comes from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "kq.h"

/* kq_batch_fail - records that no message of res[0..n) went out, with why. */
static void
kq_batch_fail(struct kq_result *res, int n, const char *why)
{
	for (int i = 0; i < n; i++) {
		res[i].rc = KQ_FAILED;
		snprintf(res[i].err, sizeof(res[i].err), "%s", why);
	}
}

int
kq_publish_batch(struct kq_producer *p, const struct kq_msg *msgs, int n, int timeout_ms,
                 struct kq_result *res)
{
	struct kq_wait **waits;
	struct timespec dl;
	int delivered = 0;

	if (n <= 0)
		return 0;
	if ((waits = calloc((size_t)n, sizeof(*waits))) == NULL) {
		kq_batch_fail(res, n, "out of memory");
		return 0;
	}
	for (int i = 0; i < n; i++) {
		const struct kq_msg *m = &msgs[i];

		res[i].err[0] = '\0';
		waits[i] = kq_produce_start(p, m->topic, m->key, m->klen, m->val, m->vlen,
		                            res[i].err, sizeof(res[i].err));
		/* Not queued: it cannot be delivered, so it is a failure, not an unknown. */
		if (waits[i] == NULL)
			res[i].rc = KQ_FAILED;
	}
	/* One deadline for all, from when the last was queued, as one message would get. */
	clock_deadline(&dl, timeout_ms);
	for (int i = 0; i < n; i++) {
		if (waits[i] == NULL)
			continue;
		res[i].rc = kq_wait_end(waits[i], &dl, res[i].err, sizeof(res[i].err));
		if (res[i].rc == KQ_DELIVERED)
			delivered++;
	}
	free(waits);
	return delivered;
}
