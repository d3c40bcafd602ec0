-- 006: the refund ledger (docs/processor.md, "Refund").
--
-- refund_callback_log.uk_refund gains refund_status: a refund whose status advances at the
--   channel (WeChat Pay ABNORMAL then SUCCESS for one refund_id, Stripe succeeded then
--   failed for one re_ id) is a new notification with its own row, while a copy of the same
--   status is still a duplicate key at ingest.
-- order_refunds becomes the ledger of an order's own refunds: kind 'single' rows are one
--   refund each (WeChat Pay refund_id, Stripe re_), kind 'cumulative' rows are a channel's
--   running total for the trade (Stripe charge.refunded, Alipay refund_fee). state APPLIED
--   counts; REVERSED is a refund that failed after it had succeeded; FAILED is a failure
--   seen before any success. The order's refunded amount is
--   max(sum of APPLIED singles, max(cumulative) - sum of REVERSED and FAILED singles).
-- order_events: one order can now have several events of one type (one per refund), told
--   apart by the refund number in event_id, so the (merchant, order, type) key goes and the
--   id widens for "<merchant>|<order>|<type>|<refund number>".

ALTER TABLE refund_callback_log
  DROP INDEX uk_refund,
  ADD UNIQUE KEY uk_refund (merchant_id, channel, refund_no, refund_status);

ALTER TABLE order_refunds
  ADD COLUMN pay_trade_no VARCHAR(128) NOT NULL DEFAULT '',
  ADD COLUMN kind ENUM('single','cumulative') NOT NULL DEFAULT 'single',
  ADD COLUMN state ENUM('APPLIED','REVERSED','FAILED') NOT NULL DEFAULT 'APPLIED',
  ADD COLUMN reversed_callback_id BIGINT UNSIGNED NULL,
  ADD KEY idx_order (merchant_id, out_trade_no);

ALTER TABLE order_events
  DROP INDEX uk_order_event,
  MODIFY event_id VARCHAR(400) NOT NULL;

-- refund_requests: a refund of a payment that is processed before the payment itself is
-- recorded here as DONE (reason refunded_early), so the payment finds its money returned.
ALTER TABLE refund_requests
  ADD COLUMN refund_no VARCHAR(160) NULL,
  ADD COLUMN settled_at DATETIME(3) NULL;
