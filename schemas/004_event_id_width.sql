-- 004: order_events.event_id is "<merchant_id>|<out_trade_no>|<event_type>" (the processor's
-- stable id), up to 64 + 1 + 128 + 1 + 19 = 213 characters, more than the 200 of 002.
ALTER TABLE order_events MODIFY event_id VARCHAR(255) NOT NULL;
