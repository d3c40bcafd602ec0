/*
 * test_msg - the wire formats of common/msg.c: the callback message's round trip, the
 * partition key, the dead letter's and the order event's bytes, and the order event's id.
 *
 * Event ids are what downstream consumers deduplicate on, so the cases that matter are the
 * ones where two different events could be given one id: order numbers and refund numbers
 * that contain the separator, and ids too long for their column.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "msg.h"

static void
test_event_id_plain_parts_read_as_before(void **state)
{
	char id[MSG_EVENT_ID_MAX + 1];

	(void)state;
	assert_int_equal(msg_event_id("m1", "O-1", "order.paid.shipment", NULL, id, sizeof(id)),
	                 (int)strlen("m1|O-1|order.paid.shipment"));
	assert_string_equal(id, "m1|O-1|order.paid.shipment");
	assert_true(msg_event_id("m1", "O-1", "order.refund", "RF-9", id, sizeof(id)) > 0);
	assert_string_equal(id, "m1|O-1|order.refund|RF-9");
}

static void
test_event_id_separator_in_ids_cannot_collide(void **state)
{
	char a[MSG_EVENT_ID_MAX + 1], b[MSG_EVENT_ID_MAX + 1];

	(void)state;
	/* Unescaped, both are "m1|A|order.refund|B|order.refund|C". */
	assert_true(msg_event_id("m1", "A|order.refund|B", "order.refund", "C", a, sizeof(a)) > 0);
	assert_true(msg_event_id("m1", "A", "order.refund", "B|order.refund|C", b, sizeof(b)) > 0);
	assert_string_not_equal(a, b);
	assert_string_equal(a, "m1|A%7Corder.refund%7CB|order.refund|C");
	assert_string_equal(b, "m1|A|order.refund|B%7Corder.refund%7CC");
	/* The escape character is escaped too, so "%7C" written by a merchant stays itself. */
	assert_true(msg_event_id("m1", "A%7C", "order.refunded", NULL, a, sizeof(a)) > 0);
	assert_true(msg_event_id("m1", "A|", "order.refunded", NULL, b, sizeof(b)) > 0);
	assert_string_equal(a, "m1|A%257C|order.refunded");
	assert_string_equal(b, "m1|A%7C|order.refunded");
}

static void
test_event_id_too_long_becomes_a_digest(void **state)
{
	char order[129], ref[161], a[MSG_EVENT_ID_MAX + 1], b[MSG_EVENT_ID_MAX + 1];
	int n;

	(void)state;
	memset(order, '|', 128);
	order[128] = '\0';
	memset(ref, '|', 160);
	ref[160] = '\0';
	n = msg_event_id("merchant-with-a-long-name", order, "order.refund_reversed", ref, a,
	                 sizeof(a));
	assert_true(n > 0 && n <= MSG_EVENT_ID_MAX);
	assert_int_equal(strncmp(a, "merchant-with-a-long-name|order.refund_reversed|sha256:", 55),
	                 0);
	assert_int_equal(strlen(a), 55 + 64);
	/* One byte of difference gives another digest. */
	ref[159] = 'x';
	assert_true(msg_event_id("merchant-with-a-long-name", order, "order.refund_reversed", ref,
	                         b, sizeof(b)) > 0);
	assert_string_not_equal(a, b);
	/* An id within its column is kept as it is, however many parts are at their widest. */
	memset(order, 'o', 128);
	memset(ref, 'r', 160);
	assert_true(msg_event_id("m", order, "order.refund", ref, a, sizeof(a)) > 0);
	assert_int_equal(strlen(a), 1 + 1 + 128 + 1 + 12 + 1 + 160);
	assert_null(strstr(a, "sha256:"));
}

static void
test_event_id_small_buffer_is_an_error(void **state)
{
	char id[8];

	(void)state;
	assert_int_equal(msg_event_id("m1", "O-1", "order.refunded", NULL, id, sizeof(id)), -1);
}

static void
test_callback_round_trip_and_hostile_input(void **state)
{
	struct msg_callback m = {CBLOG_REFUND, 42, "m1", "wxpay", "O|1", 3}, back;
	char buf[512], err[160];
	int n;

	(void)state;
	n = msg_callback_encode(&m, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(msg_callback_decode(buf, (size_t)n, &back, err, sizeof(err)), 0);
	assert_int_equal(back.cblog, CBLOG_REFUND);
	assert_int_equal(back.id, 42);
	assert_int_equal(back.attempt, 3);
	assert_string_equal(back.out_trade_no, "O|1");
	assert_int_equal(msg_callback_decode("{\"v\":1,\"log\":\"pay\",\"id\":0,\"merchant_id\":"
	                                     "\"m\",\"channel\":\"c\",\"out_trade_no\":\"o\"}",
	                                     strlen("{\"v\":1,\"log\":\"pay\",\"id\":0,\"merchant_"
	                                            "id\":\"m\",\"channel\":\"c\",\"out_trade_no\""
	                                            ":\"o\"}"),
	                                     &back, err, sizeof(err)),
	                 -1);
	assert_non_null(strstr(err, "id=0"));
	assert_int_equal(msg_callback_decode("{\"v\":1,\"v\":1}", 14, &back, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "not JSON"));
}

static void
test_key_is_merchant_bar_order(void **state)
{
	char key[200];

	(void)state;
	assert_int_equal(msg_key("m1", "O|1", key, sizeof(key)), 6);
	assert_string_equal(key, "m1|O|1");
	assert_int_equal(msg_key("m1", "O-1", key, 5), -1);
}

static void
test_dead_letter_bytes(void **state)
{
	struct msg_dead_letter d = {.cblog = CBLOG_REFUND,
	                            .id = 7,
	                            .merchant_id = "m1",
	                            .channel = "wxpay",
	                            .channel_trade_no = "R1",
	                            .out_trade_no = "O1",
	                            .retry_count = 9,
	                            .last_error = "say \"no\"",
	                            .reason = "ladder_exhausted",
	                            .created_at = "2026-01-02 03:04:05.006",
	                            .dead_at = "2026-01-02 04:04:05.006"};
	size_t len = 0;
	char *s = msg_dead_letter_encode(&d, &len);

	(void)state;
	assert_non_null(s);
	/* Consumers read these bytes: the fields keep their order and their JSON types. */
	assert_string_equal(s, "{\"v\":1,\"log\":\"refund\",\"id\":7,\"merchant_id\":\"m1\","
	                       "\"channel\":\"wxpay\",\"channel_trade_no\":\"R1\","
	                       "\"out_trade_no\":\"O1\",\"retry_count\":9,"
	                       "\"last_error\":\"say \\\"no\\\"\",\"reason\":\"ladder_exhausted\","
	                       "\"created_at\":\"2026-01-02 03:04:05.006\","
	                       "\"dead_at\":\"2026-01-02 04:04:05.006\"}");
	assert_int_equal(len, strlen(s));
	free(s);
}

static void
test_order_event_bytes(void **state)
{
	struct msg_order_event e = {.event_id = "m1|O1|order.paid",
	                            .event_type = "order.paid",
	                            .merchant_id = "m1",
	                            .out_trade_no = "O1",
	                            .amount = "1.00",
	                            .currency = "CNY",
	                            .channel = "alipay",
	                            .channel_trade_no = "T1",
	                            .callback_id = 42,
	                            .at = "2026-01-02 03:04:05.006"};
	char buf[512];
	int n;

	(void)state;
	n = msg_order_event_encode(&e, buf, sizeof(buf));
	assert_int_equal(n, (int)strlen(buf));
	assert_string_equal(buf, "{\"v\":1,\"event_id\":\"m1|O1|order.paid\","
	                         "\"event_type\":\"order.paid\",\"merchant_id\":\"m1\","
	                         "\"out_trade_no\":\"O1\",\"amount\":\"1.00\",\"currency\":\"CNY\","
	                         "\"channel\":\"alipay\",\"channel_trade_no\":\"T1\","
	                         "\"callback_id\":42,\"at\":\"2026-01-02 03:04:05.006\"}");
	assert_int_equal(msg_order_event_encode(&e, buf, 40), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_event_id_plain_parts_read_as_before),
	    cmocka_unit_test(test_event_id_separator_in_ids_cannot_collide),
	    cmocka_unit_test(test_event_id_too_long_becomes_a_digest),
	    cmocka_unit_test(test_event_id_small_buffer_is_an_error),
	    cmocka_unit_test(test_callback_round_trip_and_hostile_input),
	    cmocka_unit_test(test_key_is_merchant_bar_order),
	    cmocka_unit_test(test_dead_letter_bytes),
	    cmocka_unit_test(test_order_event_bytes),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
