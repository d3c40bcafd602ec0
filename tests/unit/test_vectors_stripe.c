/*
 * test_vectors_stripe - every Stripe vector in tests/vectors/inbound/stripe/derived/cases.json, one
 * cmocka test per case, data-driven: the case's body file, header, secret, clock and tolerance
 * go to notify_stripe_verify_parse(), the outcome must match the table below (which must agree with
 * the case's "expect" text), and accepted event bodies must parse into the fields the body
 * itself holds. Our signer must also reproduce each plain valid header byte for byte.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>

#include "chan_notify.h"
#include "vectors.h"

#define ST "stripe/derived/"

/*
 * sdk_payload_uppercase_hex is SDK-dependent; we decode hex before comparing, like stripe-go,
 * so it is valid. sdk_payload_future_1000 is valid in all three SDKs (only age is checked).
 * A header without any v1 (only v0, no t, empty, unparsable) is a header error.
 */
static const struct {
	const char *name;
	enum verr want;
} st_expect[] = {
    {"sdk_payload_valid", VERR_OK},          {"sdk_payload_multi_v1_second_matches", VERR_OK},
    {"sdk_payload_v0_present", VERR_OK},     {"sdk_payload_only_v0", VERR_HEADER},
    {"sdk_payload_unknown_keys", VERR_OK},   {"sdk_payload_wrong_secret", VERR_SIGNATURE},
    {"sdk_payload_age_300", VERR_OK},        {"sdk_payload_age_301", VERR_TIMESTAMP},
    {"sdk_payload_future_1000", VERR_OK},    {"sdk_payload_uppercase_hex", VERR_OK},
    {"sdk_payload_missing_t", VERR_HEADER},  {"sdk_payload_empty_header", VERR_HEADER},
    {"sdk_payload_bad_format", VERR_HEADER}, {"sdk_payload_body_trailing_lf", VERR_SIGNATURE},
    {"payment_intent_succeeded", VERR_OK},   {"charge_refunded", VERR_OK},
    {"checkout_session_completed", VERR_OK},
};

static void
upper3(const char *s, char out[4])
{
	for (int i = 0; i < 3; i++)
		out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
	out[3] = '\0';
}

/* check_fields - what the event body says, read independently with jansson. */
static void
check_fields(const struct notify *n, const uint8_t *body, size_t len)
{
	json_t *ev = json_loadb((const char *)body, len, 0, NULL);
	const json_t *o = json_object_get(json_object_get(ev, "data"), "object");
	const json_t *md = json_object_get(o, "metadata");
	const char *type = vec_str(ev, "type");
	char cur[4], refund_no[160];

	assert_non_null(ev);
	assert_string_equal(n->event_id, vec_str(ev, "id"));
	if (type == NULL) {
		/* The SDK's test payload is a terminal.reader event with no type: ignored. */
		assert_int_equal(n->kind, NOTIFY_IGNORED);
		json_decref(ev);
		return;
	}
	assert_string_equal(n->event_type, type);
	upper3(vec_str(o, "currency"), cur);
	assert_string_equal(n->currency, cur);
	assert_string_equal(n->out_trade_no, vec_str(md, "order_id"));
	if (strcmp(type, "payment_intent.succeeded") == 0) {
		assert_int_equal(n->kind, NOTIFY_PAYMENT);
		assert_string_equal(n->channel_trade_no, vec_str(o, "id"));
		assert_int_equal(n->amount_minor,
		                 json_integer_value(json_object_get(o, "amount_received")));
	} else if (strcmp(type, "checkout.session.completed") == 0) {
		assert_int_equal(n->kind, NOTIFY_PAYMENT);
		assert_string_equal(n->channel_trade_no, vec_str(o, "payment_intent"));
		assert_int_equal(n->amount_minor,
		                 json_integer_value(json_object_get(o, "amount_total")));
	} else {
		assert_string_equal(type, "charge.refunded");
		assert_int_equal(n->kind, NOTIFY_REFUND);
		assert_int_equal(n->refund_cumulative, 1);
		assert_int_equal(n->amount_minor,
		                 json_integer_value(json_object_get(o, "amount_refunded")));
		assert_int_equal(n->order_total_minor,
		                 json_integer_value(json_object_get(o, "amount")));
		snprintf(refund_no, sizeof(refund_no), "%s:%lld", vec_str(o, "id"),
		         (long long)json_integer_value(json_object_get(o, "amount_refunded")));
		assert_string_equal(n->refund_no, refund_no);
		/* payment_intent is null in this fixture: the charge is its own trade. */
		assert_string_equal(n->channel_trade_no, vec_str(o, "payment_intent")
		                                             ? vec_str(o, "payment_intent")
		                                             : vec_str(o, "id"));
	}
	json_decref(ev);
}

static void
test_case(void **state)
{
	const json_t *c = *state;
	const char *name = vec_str(c, "name"), *expect = vec_str(c, "expect");
	const char *header = vec_str(c, "header"), *secret = vec_str(c, "secret");
	/* The vectors' events are test-mode events (livemode false): a test-mode merchant. */
	struct stripe_merchant m = {.nsecrets = 1, .test_mode = 1};
	struct http_hdr h = {"Stripe-Signature", header};
	long long t = 0;
	struct notify n;
	char path[256], reason[160], mine[128];
	uint8_t *body;
	char *owned;
	size_t len, i;
	enum verr got;
	int pos = 0;

	for (i = 0; i < sizeof(st_expect) / sizeof(st_expect[0]); i++)
		if (strcmp(st_expect[i].name, name) == 0)
			break;
	if (i == sizeof(st_expect) / sizeof(st_expect[0]))
		fail_msg("case %s is not in this test's table: decide its outcome", name);
	if (strncmp(expect, "SDK-dependent", 13) != 0)
		assert_int_equal(strncmp(expect, "valid", 5) == 0, st_expect[i].want == VERR_OK);
	snprintf(path, sizeof(path), ST "%s", vec_str(c, "body_file"));
	assert_non_null(body = vec_read(path, &len));
	/* A merchant owns its secret's bytes (the daemons clear them): give it a copy. */
	assert_non_null(owned = strdup(secret));
	m.secrets[0] = (struct stripe_secret){(uint8_t *)owned, strlen(owned)};
	m.tolerance_s = (int)json_integer_value(json_object_get(c, "tolerance"));
	got = notify_stripe_verify_parse(&m, &h, 1, body, len,
	                                 (time_t)json_integer_value(json_object_get(c, "now")), &n,
	                                 reason, sizeof(reason));
	if (got != st_expect[i].want)
		fail_msg("%s: got %s (%s), want %s", name, notify_verr_name(got), reason,
		         notify_verr_name(st_expect[i].want));
	if (got == VERR_OK)
		check_fields(&n, body, len);
	/* A live merchant keeps such an event but does not apply it. */
	if (got == VERR_OK && n.kind != NOTIFY_IGNORED) {
		m.test_mode = 0;
		assert_int_equal(notify_stripe_verify_parse(
		                     &m, &h, 1, body, len,
		                     (time_t)json_integer_value(json_object_get(c, "now")), &n,
		                     reason, sizeof(reason)),
		                 VERR_OK);
		assert_int_equal(n.kind, NOTIFY_UNROUTABLE);
		assert_string_equal(n.unroutable, "test_mode");
	}
	/* A plain "t=...,v1=<lower hex>" valid header is exactly what our signer writes. */
	if (got == VERR_OK && sscanf(header, "t=%lld,v1=%*64[0-9a-f]%n", &t, &pos) == 1 &&
	    header[pos] == '\0') {
		assert_int_equal(notify_stripe_sign_header((const uint8_t *)secret, strlen(secret),
		                                           body, len, (time_t)t, mine,
		                                           sizeof(mine)),
		                 0);
		assert_string_equal(mine, header);
	}
	free(owned);
	free(body);
}

int
main(void)
{
	json_t *doc = vec_json(ST "cases.json"), *c;
	struct CMUnitTest tests[64];
	size_t n = 0, i;
	int rc;

	if (doc == NULL) {
		printf("not ok 1 - cannot read %s/" ST "cases.json\n", vec_dir());
		return 1;
	}
	/* One test per case, named after it; names live in the JSON, alive until the end. */
	json_array_foreach(json_object_get(doc, "cases"), i, c)
	{
		if (n == 64)
			return 1;
		tests[n++] = (struct CMUnitTest){vec_str(c, "name"), test_case, NULL, NULL, c};
	}
	rc = _cmocka_run_group_tests("vectors_stripe", tests, n, NULL, NULL);
	json_decref(doc);
	return rc;
}
