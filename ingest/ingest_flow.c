/*
 * ingest_flow - one notification from raw bytes to the channel's answer.
 *
 * 1. Verify on the raw bytes; a failure is answered with the channel's failure response,
 *    nothing is stored, and only lengths and hashes are logged.
 * 2. Reserve with one autocommit INSERT on the unique key; a duplicate-key error means "we
 *    already have it" and is answered with success at once, publishing nothing. The row is due
 *    only after the initial lease, so the retrier leaves the first attempt alone.
 * 3. Publish the row id and wait for the delivery report up to the budget; answer success
 *    either way, because the row is durable and the retrier recovers a lost publish.
 *
 * A notification that verifies but cannot be applied to this merchant (unroutable: no order
 * number, another merchant's identity, a test-mode event for a live merchant) is kept in the
 * unroutable table with one autocommit INSERT, raises an alert when it is new, and is answered
 * with success, so that the channel neither retries it forever nor disables the endpoint.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cblog.h"
#include "clock.h"
#include "ingest.h"
#include "log.h"
#include "money.h"
#include "msg.h"

const char *
outcome_name(enum outcome o)
{
	static const char *const n[] = {"stored",   "unpublished", "duplicate", "ignored",
	                                "rejected", "db_error",    "busy",      "unroutable"};

	return (unsigned)o < OUT_COUNT ? n[o] : "unknown";
}

void
ingest_answer(int ch, int ok, unsigned status, const char *msg, struct ingest_resp *resp)
{
	resp->status = status;
	resp->type = chan_notify_table[ch]->answer(ok, msg, resp->body, sizeof(resp->body));
}

/* ingest_chan_req - the request as its channel's operations take it, arrived now. */
static struct chan_req
ingest_chan_req(const struct ingest_req *req)
{
	return (struct chan_req){req->hdrs, req->nhdrs, req->body, req->len, time(NULL)};
}

static enum verr
ingest_verify(const struct ingest_req *req, struct notify *n, char *reason, size_t rlen)
{
	struct chan_req r = ingest_chan_req(req);

	return chan_notify_table[req->ch]->verify_parse(req->im->keys[req->ch], &r, n, reason,
	                                                rlen);
}

enum verr
ingest_precheck(const struct ingest_req *req, char *reason, size_t rlen)
{
	struct chan_req r = ingest_chan_req(req);

	return chan_notify_table[req->ch]->precheck(req->im->keys[req->ch], &r, reason, rlen);
}

void
ingest_reject(struct ingest *in, const struct ingest_req *req, enum verr ve, const char *reason,
              int pre, struct ingest_resp *resp)
{
	char s1[NOTIFY_STR];

	metrics_inc(in->m.verify_fail[req->ch][ve < VERR_COUNT ? ve : 0], 1);
	resp->outcome = OUT_REJECTED;
	log_warn(NULL,
	         "event=verify_failed channel=%s merchant=%s reason=%s detail=\"%s\" stage=%s "
	         "body_len=%zu body_sha256=%s",
	         chan_notify_name(req->ch), req->im->cm->id, notify_verr_name(ve),
	         log_quoted(s1, sizeof(s1), reason), pre ? "precheck" : "verify", req->len,
	         req->sha);
	ingest_answer(req->ch, 0, chan_notify_table[req->ch]->status(0, ve), notify_verr_name(ve),
	              resp);
}

static const char *SQL_UNROUTABLE =
    "INSERT INTO unroutable (merchant_id, channel, event_key, event_id, event_type, reason, "
    "raw_body, body_sha256) VALUES (?, ?, ?, ?, ?, ?, ?, ?)";
static const char *SQL_UNROUTABLE_ALERT =
    "INSERT INTO alerts (kind, merchant_id, detail) VALUES ('unroutable', ?, ?)";

/*
 * ingest_keep - keeps an unroutable notification: one autocommit INSERT on (merchant,
 * channel, event key), where a duplicate-key error means "already kept", and for a new row an
 * alert naming the channel, the event and the reason. Returns the class of the first INSERT,
 * with *id set on DB_OK; a failed alert is logged, not returned, since the row is kept and
 * the metric still counts it.
 */
static enum db_rc
ingest_keep(struct db *db, const struct ingest_req *req, const struct notify *n,
            unsigned long long *id)
{
	const char *merchant = req->im->cm->id, *ch = chan_notify_name(req->ch), *sha = req->sha;
	const char *key = n->event_id[0] != '\0' ? n->event_id : sha;
	struct db_in p[8] = {DBI_STR(merchant),
	                     DBI_STR(ch),
	                     DBI_STR(key),
	                     DBI_STR(n->event_id),
	                     DBI_STR(n->event_type),
	                     DBI_STR(n->unroutable),
	                     DBI_BIN(req->body, req->len),
	                     DBI_STR(sha)};
	char detail[512], s1[NOTIFY_STR], s2[64];
	enum db_rc rc;

	if ((rc = db_exec(db, SQL_UNROUTABLE, p, 8, NULL, id)) != DB_OK)
		return rc;
	snprintf(detail, sizeof(detail),
	         "unroutable notification %llu: channel=%s event=%s type=%s reason=%s", *id, ch,
	         log_safe(s1, sizeof(s1), key), log_safe(s2, sizeof(s2), n->event_type),
	         n->unroutable);
	{
		struct db_in a[2] = {DBI_STR(merchant), DBI_STR(detail)};

		if ((rc = db_exec(db, SQL_UNROUTABLE_ALERT, a, 2, NULL, NULL)) != DB_OK)
			log_error(
			    NULL,
			    "event=alert_failed kind=unroutable channel=%s merchant=%s id=%llu "
			    "class=%s",
			    ch, merchant, *id, db_rc_name(rc));
	}
	return DB_OK;
}

/* ingest_log - the callback log of a payment or refund notification */
static enum cblog
ingest_log(const struct notify *n)
{
	return n->kind == NOTIFY_REFUND ? CBLOG_REFUND : CBLOG_PAY;
}

/* Reserves the row (cblog_reserve); returns the db class, with *id set on DB_OK. */
static enum db_rc
ingest_reserve(struct ingest *in, struct db *db, const struct ingest_req *req,
               const struct notify *n, const char *amount, unsigned long long *id)
{
	struct cblog_row r = {
	    .cblog = ingest_log(n),
	    .merchant_id = req->im->cm->id,
	    .channel = chan_notify_name(req->ch),
	    .channel_trade_no = n->channel_trade_no,
	    .out_trade_no = n->out_trade_no,
	    .refund_no = n->refund_no,
	    .event_id = n->event_id,
	    .event_type = n->event_type,
	    .status = n->status,
	    .amount = amount,
	    .currency = n->currency,
	    .cumulative = n->refund_cumulative,
	    .body = req->body,
	    .body_len = req->len,
	    .body_sha256 = req->sha,
	    .lease_s = in->cf->retry.initial_lease_s,
	};

	return cblog_reserve(db, &r, id);
}

/* The channel's success answer: WeChat Pay's 204, the others' 200. */
static void
ingest_ok(int ch, struct ingest_resp *resp)
{
	ingest_answer(ch, 1, chan_notify_table[ch]->status(1, VERR_OK), "", resp);
}

/*
 * ingest_publish_log - what became of a stored notification's message, logged and counted
 * (us: from the publish to its report or its budget). Stored but not published is still a
 * success for the channel: the retrier republishes the row once its initial lease runs out.
 */
static void
ingest_publish_log(struct ingest *in, const char *cbid, long long us, int rc, const char *err)
{
	char e[256];

	metrics_observe_us(in->m.publish_lat, us);
	if (rc == 0) {
		log_info(cbid, "event=published topic=%s publish_ms=%lld", in->topic, us / 1000);
		return;
	}
	metrics_inc(in->m.publish_failures, 1);
	log_warn(cbid, "event=publish_failed topic=%s publish_ms=%lld error=\"%s\"", in->topic,
	         us / 1000, log_quoted(e, sizeof(e), err));
}

/*
 * ingest_published - on the producer's poller thread: the message's delivery report, or the
 * budget passed without one. The request ends here, so the worker that stored it did not wait
 * for the report (and be woken by this thread only to resume the connection). The answer goes
 * first and the log line after it, from copies, since resp belongs to the connection from then.
 */
static void
ingest_published(void *arg, int rc, const char *err)
{
	struct ingest_resp *resp = arg;
	struct ingest *in = resp->in;
	long long now = clock_mono_us(), us = now - resp->publish_us;
	char cbid[sizeof(resp->cbid)];

	memcpy(cbid, resp->cbid, sizeof(cbid));
	if (rc != 0)
		resp->outcome = OUT_UNPUBLISHED;
	ingest_ok(resp->ch, resp);
	metrics_inc(in->m.requests[resp->ch][resp->outcome], 1);
	metrics_observe_us(in->m.request_lat, now - resp->t0_us);
	resp->deliver(in, resp);
	ingest_publish_log(in, cbid, us, rc, err);
}

/*
 * ingest_publish - publishes a stored notification's row id. Returns 1 when the answer waits
 * for the delivery report (ingest_published sends it), 0 when resp is the answer already.
 */
static int
ingest_publish(struct ingest *in, const struct ingest_req *req, const struct notify *n,
               unsigned long long id, struct ingest_resp *resp)
{
	struct msg_callback m;
	char key[256], val[512], err[256];
	int klen, vlen, rc;

	memset(&m, 0, sizeof(m));
	m.cblog = ingest_log(n);
	m.id = id;
	m.attempt = 1;
	snprintf(m.merchant_id, sizeof(m.merchant_id), "%s", req->im->cm->id);
	snprintf(m.channel, sizeof(m.channel), "%s", chan_notify_name(req->ch));
	snprintf(m.out_trade_no, sizeof(m.out_trade_no), "%s", n->out_trade_no);
	klen = msg_callback_key(&m, key, sizeof(key));
	vlen = msg_callback_encode(&m, val, sizeof(val));
	resp->in = in;
	resp->ch = req->ch;
	resp->publish_us = clock_mono_us();
	if (klen < 0 || vlen < 0) {
		rc = -1;
		snprintf(err, sizeof(err), "cannot encode the message");
	} else if (kq_brokers_down(in->kp)) {
		/*
		 * Every broker is known to be down: waiting would hold this request for the whole
		 * budget for a report that cannot come in it. The message is queued for when a
		 * broker is back, the answer goes now, and the retrier republishes the row after
		 * its lease if the message never arrives.
		 */
		if ((rc = kq_produce(in->kp, in->topic, key, (size_t)klen, val, (size_t)vlen, err,
		                     sizeof(err))) == 0) {
			rc = -1;
			snprintf(err, sizeof(err), "all brokers down: queued, not waited for");
		}
	} else if ((rc = kq_produce_then(in->kp, in->topic, key, (size_t)klen, val, (size_t)vlen,
	                                 (int)in->cf->ingest.publish_budget_ms, ingest_published,
	                                 resp, err, sizeof(err))) == 0) {
		return 1; /* resp may be answered and gone already */
	}
	resp->outcome = OUT_UNPUBLISHED;
	ingest_publish_log(in, resp->cbid, clock_mono_us() - resp->publish_us, rc, err);
	ingest_ok(req->ch, resp);
	return 0;
}

/* Answers a copy whose row is known to exist. */
static void
ingest_duplicate(int ch, const char *merchant, const char *trade, const char *order,
                 const char *sha, int coalesced, struct ingest_resp *resp)
{
	resp->outcome = OUT_DUPLICATE;
	log_info(NULL,
	         "event=duplicate channel=%s merchant=%s trade=%s order=%s coalesced=%d "
	         "body_sha256=%s",
	         chan_notify_name(ch), merchant, trade, order, coalesced, sha);
	ingest_ok(ch, resp);
}

void
ingest_coalesced(struct ingest *in, int ch, const char *merchant, const struct ingest_landing *l,
                 const char *sha, long long since_us, struct ingest_resp *resp)
{
	ingest_duplicate(ch, merchant, l->trade, l->order, sha, 1, resp);
	metrics_inc(in->m.coalesced, 1);
	metrics_inc(in->m.requests[ch][OUT_DUPLICATE], 1);
	metrics_observe_us(in->m.request_lat, clock_mono_us() - since_us);
}

/*
 * ingest_unroutable - keeps an authentic notification that cannot be applied and answers it:
 * success once it is kept (new or already), 503 when it could not be stored, so the channel
 * pushes it again. The copies parked on it are settled like a reservation's.
 */
static void
ingest_unroutable(struct ingest *in, const struct ingest_req *req, const struct notify *n,
                  struct ingest_resp *resp)
{
	const char *merchant = req->im->cm->id, *ch = chan_notify_name(req->ch);
	char s1[NOTIFY_STR], s2[64];
	unsigned long long id = 0;
	enum db_rc rc = DB_RETRYABLE;
	struct db *db;

	log_safe(s1, sizeof(s1), n->event_id[0] != '\0' ? n->event_id : req->sha);
	log_safe(s2, sizeof(s2), n->event_type);
	if ((db = ingest_pool_get(&in->pool, 1000)) != NULL) {
		rc = ingest_keep(db, req, n, &id);
		ingest_pool_put(&in->pool, db);
	}
	{
		struct ingest_landing land = {rc == DB_OK || rc == DB_DUPLICATE, n->valid_from,
		                              n->valid_to, s1, "-"};

		ingest_flight_land(in, req->flight, &land);
	}
	if (rc != DB_OK && rc != DB_DUPLICATE) {
		resp->outcome = db == NULL ? OUT_BUSY : OUT_DB_ERROR;
		log_error(NULL,
		          "event=unroutable_not_kept channel=%s merchant=%s event_id=%s reason=%s "
		          "class=%s body_len=%zu body_sha256=%s",
		          ch, merchant, s1, n->unroutable, db == NULL ? "pool" : db_rc_name(rc),
		          req->len, req->sha);
		ingest_answer(req->ch, 0, 503, db == NULL ? "busy" : "storage unavailable", resp);
		return;
	}
	resp->outcome = OUT_UNROUTABLE;
	resp->id = id;
	log_warn(NULL,
	         "event=unroutable channel=%s merchant=%s event_id=%s type=%s reason=%s kept=%s "
	         "id=%llu body_len=%zu body_sha256=%s",
	         ch, merchant, s1, s2, n->unroutable, rc == DB_OK ? "new" : "already", id, req->len,
	         req->sha);
	ingest_ok(req->ch, resp);
}

/*
 * ingest_check - verification, under the limit of requests verified at once, then what an
 * authentic payment or refund needs to be stored: VERR_OK with n and amount set, or why not
 * in reason. -1 when over the limit (resp answered busy).
 */
static int
ingest_check(struct ingest *in, const struct ingest_req *req, struct notify *n, char *amount,
             size_t alen, char *reason, size_t rlen, struct ingest_resp *resp, enum verr *ve)
{
	int scale;

	if (atomic_fetch_add(&in->unverified, 1) >= in->cf->ingest.max_unverified) {
		atomic_fetch_sub(&in->unverified, 1);
		resp->outcome = OUT_BUSY;
		ingest_answer(req->ch, 0, 503, "busy", resp);
		return -1;
	}
	metrics_set(in->m.unverified, atomic_load(&in->unverified));
	reason[0] = '\0';
	*ve = ingest_verify(req, n, reason, rlen);
	atomic_fetch_sub(&in->unverified, 1);
	if (*ve != VERR_OK || (n->kind != NOTIFY_PAYMENT && n->kind != NOTIFY_REFUND))
		return 0;
	/* Authentic, but without an order number it cannot be applied to any order. */
	if (n->out_trade_no[0] == '\0') {
		notify_unroutable(n, "no_order");
		return 0;
	}
	if ((n->kind == NOTIFY_PAYMENT && n->channel_trade_no[0] == '\0') ||
	    (n->kind == NOTIFY_REFUND && n->refund_no[0] == '\0')) {
		*ve = VERR_BODY;
		snprintf(reason, rlen, "missing trade or refund number");
	} else if ((scale = money_currency_scale(n->currency)) < 0 ||
	           money_format(n->amount_minor, scale, amount, alen) < 0) {
		*ve = VERR_UNSUPPORTED;
		snprintf(reason, rlen, "unsupported currency or amount");
	}
	return 0;
}

/*
 * ingest_store - reserves a verified payment or refund, settles the copies parked on it,
 * publishes a new row's id and answers (1: later, ingest_publish says). The flight always
 * lands here.
 */
static int
ingest_store(struct ingest *in, const struct ingest_req *req, const struct notify *n,
             const char *amount, long long t0, struct ingest_resp *resp)
{
	const char *merchant = req->im->cm->id, *ch = chan_notify_name(req->ch), *sha = req->sha;
	char reason[256], s1[NOTIFY_STR], s2[NOTIFY_STR];
	unsigned long long id = 0;
	long long r0 = clock_mono_us();
	struct db *db;
	enum db_rc rc;

	if ((db = ingest_pool_get(&in->pool, 1000)) == NULL) {
		resp->outcome = OUT_BUSY;
		log_warn(NULL, "event=db_pool_exhausted channel=%s merchant=%s body_sha256=%s", ch,
		         merchant, sha);
		ingest_answer(req->ch, 0, 503, "busy", resp);
		ingest_flight_land(in, req->flight, NULL);
		return 0;
	}
	rc = ingest_reserve(in, db, req, n, amount, &id);
	metrics_observe_us(in->m.reserve_lat, clock_mono_us() - r0);
	if (rc != DB_OK && rc != DB_DUPLICATE)
		snprintf(reason, sizeof(reason), "%s", db->last_error);
	ingest_pool_put(&in->pool, db);
	log_safe(s1, sizeof(s1), n->kind == NOTIFY_REFUND ? n->refund_no : n->channel_trade_no);
	log_safe(s2, sizeof(s2), n->out_trade_no);
	/* The copies parked on this one are answered as soon as the row is known to exist. */
	{
		struct ingest_landing land = {rc == DB_OK || rc == DB_DUPLICATE, n->valid_from,
		                              n->valid_to, s1, s2};

		ingest_flight_land(in, req->flight, &land);
	}
	if (rc == DB_DUPLICATE) {
		ingest_duplicate(req->ch, merchant, s1, s2, sha, 0, resp);
		return 0;
	}
	if (rc != DB_OK) {
		/* Not stored: the channel's failure answer makes it push again later. */
		resp->outcome = OUT_DB_ERROR;
		log_error(NULL,
		          "event=reserve_failed channel=%s merchant=%s trade=%s class=%s "
		          "error=\"%s\" body_sha256=%s",
		          ch, merchant, s1, db_rc_name(rc), reason, sha);
		ingest_answer(req->ch, 0, 503, "storage unavailable", resp);
		return 0;
	}
	resp->id = id;
	resp->outcome = OUT_STORED;
	cblog_ref(resp->cbid, sizeof(resp->cbid), ingest_log(n), id);
	resp->t0_us = t0;
	log_info(resp->cbid,
	         "event=reserved channel=%s merchant=%s kind=%s trade=%s order=%s amount=%s "
	         "currency=%s body_len=%zu body_sha256=%s reserve_ms=%lld",
	         ch, merchant, n->kind == NOTIFY_REFUND ? "refund" : "payment", s1, s2, amount,
	         n->currency, req->len, sha, (clock_mono_us() - t0) / 1000);
	return ingest_publish(in, req, n, id, resp);
}

int
ingest_handle(struct ingest *in, const struct ingest_req *req, struct ingest_resp *resp)
{
	struct ingest_flight_entry *fe = req->flight;
	void (*deliver)(struct ingest *, struct ingest_resp *) = resp->deliver;
	long long t0 = clock_mono_us();
	char reason[256], amount[32], s1[NOTIFY_STR];
	struct notify n;
	enum verr ve;

	memset(resp, 0, sizeof(*resp));
	resp->deliver = deliver;
	if (ingest_check(in, req, &n, amount, sizeof(amount), reason, sizeof(reason), resp, &ve) !=
	    0)
		goto out;
	if (ve != VERR_OK) {
		ingest_reject(in, req, ve, reason, 0, resp);
	} else if (n.kind == NOTIFY_IGNORED) {
		resp->outcome = OUT_IGNORED;
		log_info(NULL,
		         "event=ignored channel=%s merchant=%s type=%s body_len=%zu "
		         "body_sha256=%s",
		         chan_notify_name(req->ch), req->im->cm->id,
		         log_safe(s1, sizeof(s1), n.event_type), req->len, req->sha);
		ingest_ok(req->ch, resp);
	} else if (n.kind == NOTIFY_UNROUTABLE) {
		ingest_unroutable(in, req, &n, resp);
		fe = NULL; /* landed there */
	} else {
		/* The flight landed there; a later answer counts the request itself. */
		if (ingest_store(in, req, &n, amount, t0, resp) != 0)
			return 1;
		fe = NULL;
	}
out:
	/* A flow that ended before its reservation answered: each parked copy runs alone. */
	ingest_flight_land(in, fe, NULL);
	metrics_inc(in->m.requests[req->ch][resp->outcome], 1);
	metrics_observe_us(in->m.request_lat, clock_mono_us() - t0);
	return 0;
}
