/*
 * reconciler_refund - submits refund_requests to the channels exactly once.
 *
 * A due row (REQUESTED, or SUBMITTED and awaiting settlement; with reconciler.
 * refund_approval only approved REQUESTED rows) is claimed by one conditional UPDATE of
 * next_attempt_at that names the values read, so one reconciler works it. Then:
 *
 *   REQUESTED, sent_at NULL   mark sent_at (conditional), submit with out_refund_no "rr<id>"
 *   REQUESTED, sent_at set    a request may have reached the channel (an UNKNOWN answer, a
 *                             crash after sending): query the refund first; only a verified
 *                             "no such refund" lets it be submitted again, with the same key
 *   SUBMITTED                 query the refund until it succeeds or fails
 *
 * Answers: accepted -> SUBMITTED (the channel's refund id); succeeded -> DONE; a final refusal
 * or a failed refund -> FAILED with a refund_failed alert; RETRY, UNKNOWN and FORGED -> the
 * next attempt on reconciler.refund_ladder_s (Retry-After honoured), past its last step one
 * refund_stuck alert. The processor settles REQUESTED and SUBMITTED rows to DONE when the
 * refund's notification comes (docs/processor.md, DX_SETTLE). Every transition is a
 * conditional UPDATE on the status read; an alert goes in the transaction of its transition.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "log.h"
#include "metrics.h"
#include "money.h"
#include "reconciler.h"

struct rrow {
	long long id;
	char merchant[65], channel[17], trade_no[129], order[129];
	char amount[40], currency[4], status[16];
	char out_refund_no[65], refund_id[129], due[32];
	long long sent, attempts, alerted;
};

struct rbatch {
	struct rrow *v;
	int n, cap;
};

static int
collect(void *arg, struct db_out *o)
{
	struct rbatch *b = arg;
	struct rrow *w;

	if (b->n >= b->cap)
		return 1;
	w = &b->v[b->n++];
	memset(w, 0, sizeof(*w));
	w->id = o[0].i;
#define CP(dst, k) snprintf(dst, sizeof(dst), "%s", o[k].is_null ? "" : o[k].buf)
	CP(w->merchant, 1);
	CP(w->channel, 2);
	CP(w->trade_no, 3);
	CP(w->order, 4);
	CP(w->amount, 5);
	CP(w->currency, 6);
	CP(w->status, 7);
	CP(w->out_refund_no, 8);
	CP(w->refund_id, 9);
	CP(w->due, 13);
#undef CP
	w->sent = o[10].i;
	w->attempts = o[11].i;
	w->alerted = o[12].i;
	return 0;
}

/* rid - the log id of a refund request: "rr<id>". */
static const char *
rid(const struct rrow *w, char *buf, size_t len)
{
	snprintf(buf, len, "rr%lld", w->id);
	return buf;
}

/* amount_minor - the DECIMAL(18,2) text as minor units of the currency. */
static int
amount_minor(const char *dec, const char *currency, int64_t *out)
{
	int scale = money_currency_scale(currency);
	int64_t cents;
	char err[96];

	if (scale < 0 || money_parse_decimal(dec, 2, &cents, err, sizeof(err)) != 0)
		return -1;
	if (scale == 2) {
		*out = cents;
		return 0;
	}
	if (scale == 0 && cents % 100 == 0) {
		*out = cents / 100;
		return 0;
	}
	return -1;
}

/* to_state - a conditional transition with its metric and, for FAILED, its alert. */
static int
to_state(struct reconciler *r, const struct rrow *w, const char *to, const char *refund_id,
         const char *why, struct recon_counts *c)
{
	static const char *const names[4] = {"REQUESTED", "SUBMITTED", "DONE", "FAILED"};
	struct db_in in[9] = {DBI_STR(to),
	                      DBI_STR(refund_id),
	                      DBI_STR(refund_id),
	                      DBI_STR(why),
	                      DBI_STR(to),
	                      DBI_STR(to),
	                      DBI_I64(recon_ladder_delay(r->cf, 1)),
	                      DBI_I64(w->id),
	                      DBI_STR(w->status)};
	unsigned long long n = 0;
	char id[32], detail[256];
	int failed = strcmp(to, "FAILED") == 0;

	if (failed && db_begin(&r->db) != DB_OK)
		return -1;
	if (db_exec(
	        &r->db,
	        "UPDATE refund_requests SET status = ?, channel_refund_id = IF(? = '', "
	        "channel_refund_id, ?), last_error = ?, settled_at = IF(? = 'DONE', NOW(3), "
	        "settled_at), next_attempt_at = IF(? = 'SUBMITTED', NOW(3) + INTERVAL ? SECOND, "
	        "next_attempt_at) WHERE id = ? AND status = ?",
	        in, 9, &n, NULL) != DB_OK)
		goto fail;
	if (failed && n == 1) {
		snprintf(detail, sizeof(detail),
		         "refund request %lld (%s %s %s) failed at the channel: %s", w->id,
		         w->amount, w->currency, w->channel, why);
		if (recon_alert(r, "refund_failed", w->merchant, w->order, detail) != DB_OK)
			goto fail;
	}
	if (failed && db_commit(&r->db) != DB_OK)
		goto fail;
	if (n != 1) {
		log_info(rid(w, id, sizeof(id)), "event=transition_lost from=%s to=%s", w->status,
		         to);
		return 0;
	}
	for (int k = 0; k < 4; k++)
		if (strcmp(names[k], to) == 0)
			metrics_inc(recon_mx.transitions[k], 1);
	if (strcmp(to, "SUBMITTED") == 0)
		c->submitted++;
	else if (strcmp(to, "DONE") == 0)
		c->done++;
	else if (failed)
		c->failed++;
	if (failed)
		log_error(rid(w, id, sizeof(id)),
		          "event=alert kind=refund_failed merchant=%s order=%s "
		          "channel=%s amount=%s code=%s",
		          w->merchant, w->order, w->channel, w->amount, why);
	else
		log_info(rid(w, id, sizeof(id)),
		         "event=refund_%s merchant=%s order=%s channel=%s amount=%s refund_id=%s",
		         strcmp(to, "DONE") == 0 ? "done" : "submitted", w->merchant, w->order,
		         w->channel, w->amount, refund_id[0] ? refund_id : "-");
	return 0;
fail:
	if (failed)
		db_rollback(&r->db);
	return -1;
}

/*
 * backoff - the next attempt on the ladder (Retry-After when longer). The row past the last
 * step raises one refund_stuck alert, in the same transaction, and keeps its last interval.
 */
static int
backoff(struct reconciler *r, const struct rrow *w, const struct chan_result *res,
        struct recon_counts *c)
{
	long long k = w->attempts + 1, delay = recon_ladder_delay(r->cf, k);
	int stuck = k > recon_ladder_steps(r->cf) && !w->alerted;
	char id[32], detail[256];
	unsigned long long n = 0;
	struct db_in in[4];

	if (res->retry_after_s > delay)
		delay = res->retry_after_s;
	in[0] = DBI_I64(delay);
	in[1] = DBI_STR(res->code);
	in[2] = DBI_I64(w->id);
	in[3] = DBI_STR(w->status);
	if (stuck && db_begin(&r->db) != DB_OK)
		return -1;
	if (db_exec(
	        &r->db,
	        "UPDATE refund_requests SET attempts = attempts + 1, next_attempt_at = NOW(3) + "
	        "INTERVAL ? SECOND, last_error = ? WHERE id = ? AND status = ?",
	        in, 4, &n, NULL) != DB_OK)
		goto fail;
	if (stuck && n == 1) {
		struct db_in a[1] = {DBI_I64(w->id)};
		unsigned long long m = 0;

		if (db_exec(&r->db,
		            "UPDATE refund_requests SET alerted_at = NOW(3) WHERE id = ? AND "
		            "alerted_at IS NULL",
		            a, 1, &m, NULL) != DB_OK)
			goto fail;
		snprintf(detail, sizeof(detail),
		         "refund request %lld (%s %s %s) still %s after %lld attempts: %s", w->id,
		         w->amount, w->currency, w->channel, w->status, k, res->code);
		if (m == 1 &&
		    recon_alert(r, "refund_stuck", w->merchant, w->order, detail) != DB_OK)
			goto fail;
		if (m == 1)
			c->stuck_alerts++;
	}
	if (stuck && db_commit(&r->db) != DB_OK)
		goto fail;
	c->retried++;
	if (res->outcome == CHAN_UNKNOWN || res->outcome == CHAN_FORGED)
		c->unknown++;
	log_msg(res->outcome == CHAN_FORGED ? LOG_LVL_ERROR : LOG_LVL_WARN, rid(w, id, sizeof(id)),
	        "event=refund_retry status=%s outcome=%s code=%s http=%d attempt=%lld "
	        "next_in_s=%lld%s",
	        w->status, chan_outcome_name(res->outcome), res->code, res->http_status, k, delay,
	        stuck ? " alert=refund_stuck" : "");
	return 0;
fail:
	if (stuck)
		db_rollback(&r->db);
	return -1;
}

/* outcome - the row's next state from a verified refund object. */
static int
settle_from(struct reconciler *r, const struct rrow *w, const struct chan_refund *f,
            struct recon_counts *c)
{
	struct chan_result pend = {.outcome = CHAN_RETRY};

	switch (f->state) {
	case CHAN_REFUND_SUCCEEDED:
		return to_state(r, w, "DONE", f->refund_id, "", c);
	case CHAN_REFUND_FAILED:
		return to_state(r, w, "FAILED", f->refund_id, f->status, c);
	case CHAN_REFUND_PENDING:
	case CHAN_REFUND_ABNORMAL:
		if (strcmp(w->status, "REQUESTED") == 0)
			return to_state(r, w, "SUBMITTED", f->refund_id, "", c);
		snprintf(pend.code, sizeof(pend.code), "%s",
		         f->state == CHAN_REFUND_ABNORMAL ? "abnormal" : "pending");
		return backoff(r, w, &pend, c);
	default:
		return -1;
	}
}

/* submit - marks the request as possibly sent, then sends it. */
static int
submit(struct reconciler *r, struct chan_client *cl, const struct rrow *w, int64_t minor,
       struct recon_counts *c)
{
	struct db_in in[1] = {DBI_I64(w->id)};
	struct chan_refund_req q = {
	    {w->order, w->trade_no}, w->out_refund_no, minor, minor, w->currency, NULL, NULL};
	struct chan_refund f;
	struct chan_result res;
	unsigned long long n = 0;
	long long t0;
	char id[32];

	/* Before anything leaves: from here on the request may have taken effect. */
	if (db_exec(&r->db,
	            "UPDATE refund_requests SET sent_at = NOW(3) WHERE id = ? AND status = "
	            "'REQUESTED' AND sent_at IS NULL",
	            in, 1, &n, NULL) != DB_OK)
		return -1;
	if (n != 1) {
		log_info(rid(w, id, sizeof(id)), "event=send_mark_lost");
		return 0;
	}
	t0 = clock_mono_ms();
	chan_refund(cl, &q, &f, &res);
	recon_count_call(chan_client_channel(cl), EP_REFUND, &res, (clock_mono_ms() - t0) * 1000);
	log_info(rid(w, id, sizeof(id)),
	         "event=refund_sent merchant=%s order=%s channel=%s out_refund_no=%s amount=%s "
	         "outcome=%s code=%s http=%d",
	         w->merchant, w->order, w->channel, w->out_refund_no, w->amount,
	         chan_outcome_name(res.outcome), res.code[0] ? res.code : "-", res.http_status);
	switch (res.outcome) {
	case CHAN_OK:
		return settle_from(r, w, &f, c);
	case CHAN_FINAL:
		return to_state(r, w, "FAILED", "", res.code, c);
	default:
		/* RETRY: not done; UNKNOWN and FORGED: may be done. The next attempt queries. */
		return backoff(r, w, &res, c);
	}
}

/* not_found - a channel's "no such refund" code on a refund query. */
static int
not_found(const char *code)
{
	return strcmp(code, "RESOURCE_NOT_EXISTS") == 0 || strcmp(code, "resource_missing") == 0 ||
	       strcmp(code, "ACQ.TRADE_NOT_EXIST") == 0;
}

/* work - one claimed row. */
static int
work(struct reconciler *r, const struct rrow *w, struct recon_counts *c)
{
	struct chan_client *cl = recon_client(r, w->merchant, w->channel);
	struct chan_refund_ref ref = {
	    {w->order, w->trade_no}, w->out_refund_no, w->refund_id[0] ? w->refund_id : NULL};
	struct chan_refund f;
	struct chan_result res;
	int64_t minor;
	long long t0;

	if (cl == NULL) {
		struct chan_result none = {.outcome = CHAN_RETRY};

		snprintf(none.code, sizeof(none.code), "no_api_credentials");
		return backoff(r, w, &none, c);
	}
	if (amount_minor(w->amount, w->currency, &minor) != 0) {
		struct chan_result bad = {.outcome = CHAN_RETRY};

		snprintf(bad.code, sizeof(bad.code), "bad_amount");
		return backoff(r, w, &bad, c);
	}
	if (strcmp(w->status, "REQUESTED") == 0 && !w->sent)
		return submit(r, cl, w, minor, c);
	/* SUBMITTED, or a request that may have left: the channel says what happened. */
	t0 = clock_mono_ms();
	chan_query_refund(cl, &ref, &f, &res);
	recon_count_call(chan_client_channel(cl), EP_QUERY_REFUND, &res,
	                 (clock_mono_ms() - t0) * 1000);
	if (res.outcome == CHAN_FINAL && not_found(res.code)) {
		/* WeChat Pay answers an unknown refund number with an unsigned 404: a hint, not
		 * proof. Acting on it is safe all the same: what follows is the same request with
		 * the same key, which the channel can only apply once. */
		f.state = CHAN_REFUND_NONE;
	} else if (res.outcome != CHAN_OK) {
		return backoff(r, w, &res, c);
	}
	if (f.state == CHAN_REFUND_NONE) {
		if (strcmp(w->status, "REQUESTED") == 0) {
			/* A verified "no such refund": the earlier request never took effect. The
			 * same key goes again; should that one also have arrived, the channel
			 * answers with the refund it made, not a second one. */
			struct db_in in[1] = {DBI_I64(w->id)};

			if (db_exec(
			        &r->db,
			        "UPDATE refund_requests SET sent_at = NULL WHERE id = ? AND status "
			        "= 'REQUESTED'",
			        in, 1, NULL, NULL) != DB_OK)
				return -1;
			return submit(r, cl, w, minor, c);
		}
		snprintf(res.code, sizeof(res.code), "refund_not_found");
		return backoff(r, w, &res, c);
	}
	return settle_from(r, w, &f, c);
}

int
recon_refunds(struct reconciler *r, struct recon_counts *c, int *full)
{
	struct db_in in[2] = {DBI_I64(r->cf->reconciler.refund_approval),
	                      DBI_I64(r->cf->reconciler.batch)};
	struct db_out out[14];
	struct rbatch b = {0};
	unsigned long long rows = 0;
	int rc = 0;

	*full = 0;
	b.cap = (int)r->cf->reconciler.batch;
	if ((b.v = calloc((size_t)b.cap, sizeof(*b.v))) == NULL)
		return -1;
	{
		static char bufs[11][160];

		out[0] = DBO_I64();
		for (int k = 1; k <= 9; k++)
			out[k] = DBO_STR(bufs[k], sizeof(bufs[k]));
		out[10] = DBO_I64();
		out[11] = DBO_I64();
		out[12] = DBO_I64();
		out[13] = DBO_STR(bufs[10], sizeof(bufs[10]));
	}
	if (db_query(&r->db,
	             "SELECT id, merchant_id, channel, channel_trade_no, out_trade_no, CAST(amount "
	             "AS CHAR), currency, status, IFNULL(out_refund_no, ''), "
	             "IFNULL(channel_refund_id, ''), sent_at IS NOT NULL, attempts, alerted_at IS "
	             "NOT NULL, CAST(next_attempt_at AS CHAR) FROM refund_requests "
	             "WHERE " RECON_REFUND_DUE " ORDER BY next_attempt_at LIMIT ?",
	             in, 2, out, 14, collect, &b, &rows) != DB_OK) {
		rc = -1;
		goto done;
	}
	*full = b.n == b.cap;
	c->refunds_due += b.n;
	for (int i = 0; i < b.n; i++) {
		struct rrow *w = &b.v[i];
		struct db_in l[4] = {DBI_I64(r->cf->reconciler.lease_s), DBI_I64(w->id),
		                     DBI_STR(w->status), DBI_STR(w->due)};
		unsigned long long n = 0;

		/* The claim: one statement changes the row, judged by affected rows. The key is
		 * fixed by the first claim and never changes. */
		if (db_exec(
		        &r->db,
		        "UPDATE refund_requests SET next_attempt_at = NOW(3) + INTERVAL ? SECOND, "
		        "out_refund_no = IFNULL(out_refund_no, CONCAT('rr', id)) WHERE id = ? AND "
		        "status = ? AND next_attempt_at = ?",
		        l, 4, &n, NULL) != DB_OK) {
			rc = -1;
			break;
		}
		if (n != 1) {
			c->refunds_lost_race++;
			continue;
		}
		c->refunds_leased++;
		if (w->out_refund_no[0] == '\0')
			snprintf(w->out_refund_no, sizeof(w->out_refund_no), "rr%lld", w->id);
		if (work(r, w, c) != 0)
			rc = -1;
	}
done:
	free(b.v);
	return rc;
}
