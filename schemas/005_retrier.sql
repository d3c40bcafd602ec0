-- 005: the retrier's dead-letter bookkeeping and the replay marker (docs/retrier.md).
--
-- dead_at, dead_reason: when and why a row became dead (2).
-- dlq_sent_at: set once the dead-letter message is confirmed delivered; a row the retrier
--   made dead (dead_reason set) with dlq_sent_at NULL is published again by the retrier's
--   dead-letter sweep. While such a row is being published its next_retry_at is the
--   publisher's lease, as for pending rows.
-- replayed_at: set by `paycbctl replay`; a replayed row whose first attempt is lost is
--   republished on the first retry step's topic, never on the main topic.
-- idx_dlq serves the dead-letter sweep: status = 2 AND dlq_sent_at IS NULL AND
--   next_retry_at <= NOW(3), without reading the dead rows that were already sent.

ALTER TABLE pay_callback_log
  ADD COLUMN dead_at DATETIME(3) NULL,
  ADD COLUMN dead_reason VARCHAR(32) NULL,
  ADD COLUMN dlq_sent_at DATETIME(3) NULL,
  ADD COLUMN replayed_at DATETIME(3) NULL,
  ADD KEY idx_dlq (status, dlq_sent_at, next_retry_at);

ALTER TABLE refund_callback_log
  ADD COLUMN dead_at DATETIME(3) NULL,
  ADD COLUMN dead_reason VARCHAR(32) NULL,
  ADD COLUMN dlq_sent_at DATETIME(3) NULL,
  ADD COLUMN replayed_at DATETIME(3) NULL,
  ADD KEY idx_dlq (status, dlq_sent_at, next_retry_at);
