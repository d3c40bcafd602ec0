-- 008: liveness bookkeeping (issue 17; docs/retrier.md).
--
-- republish_count: how often the retrier republished the row at its current retry_count
--   without the processor making progress. The retrier's lease adds one; the processor's
--   failure record, its ordering-guard deferral and `paycbctl replay` set it back to 0. A
--   first attempt's lease doubles with it (the backlog back-off), and a row republished more
--   than retrier.max_republish times at one attempt raises an alert.
-- old_alerted_at: when the end-to-end alarm wrote this row's alerts row (kind old_pending),
--   so a row still pending longer than retrier.stuck_after_s is alerted once, not every sweep.
-- idx_pending_age serves the end-to-end alarm: status = 0 AND created_at < ?.
-- order_events.lease_until: the retrier's outbox sweep leases an unsent event with one
--   conditional UPDATE before it publishes it, so N retriers send each event once.

ALTER TABLE pay_callback_log
  ADD COLUMN republish_count INT NOT NULL DEFAULT 0,
  ADD COLUMN old_alerted_at DATETIME(3) NULL,
  ADD KEY idx_pending_age (status, created_at);

ALTER TABLE refund_callback_log
  ADD COLUMN republish_count INT NOT NULL DEFAULT 0,
  ADD COLUMN old_alerted_at DATETIME(3) NULL,
  ADD KEY idx_pending_age (status, created_at);

ALTER TABLE order_events
  ADD COLUMN lease_until DATETIME(3) NULL;
