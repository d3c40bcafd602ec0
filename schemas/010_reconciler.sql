-- 009: the reconciler (issue 20; docs/reconciler.md).
--
-- refund_requests gains what paycb-reconciler needs to submit a refund exactly once:
--   out_refund_no: the idempotency key sent to the channel (WeChat Pay out_refund_no, Alipay
--     out_request_no, Stripe Idempotency-Key paycb-refund-<out_refund_no>), derived from the
--     request's id ("rr<id>") when the reconciler first leases the row, and never changed.
--   channel_refund_id: the channel's refund id once it accepted the refund (SUBMITTED).
--   sent_at: set by a conditional UPDATE before the first request leaves; a row with it set
--     may have taken effect at the channel, so it is queried before anything is sent again.
--   attempts / next_attempt_at: the backoff ladder and the lease. A reconciler claims a due
--     row with UPDATE ... SET next_attempt_at = NOW(3) + lease WHERE id = ? AND status = ? AND
--     next_attempt_at = ? (the values it read): one statement wins, judged by affected rows.
--   last_error: the channel's or the local code of the last failed attempt.
--   approved_at / approved_by: with reconciler.refund_approval on, only approved rows are
--     submitted (`paycbctl refund approve ID`, audited in audit_log).
--   alerted_at: when a row past the last ladder step raised its refund_stuck alert (once).
-- pay_callback_log.source: who told paycb about the payment: 'notify' (ingest) or 'query'
--   (the reconciler's payment query, the verified answer kept as raw_body).
-- orders.close_requested_at / channel_closed_at: a merchant's close (`paycbctl order close`)
--   sets the order CLOSED and close_requested_at; the reconciler closes it at every channel the
--   merchant has and sets channel_closed_at. recon_step is how many reconciliation queries of a
--   PENDING order were made (reconciler.query_steps_s), recon_next_at when the next is due.

ALTER TABLE refund_requests
  ADD COLUMN out_refund_no VARCHAR(64) NULL,
  ADD COLUMN channel_refund_id VARCHAR(128) NULL,
  ADD COLUMN sent_at DATETIME(3) NULL,
  ADD COLUMN attempts INT NOT NULL DEFAULT 0,
  ADD COLUMN next_attempt_at DATETIME(3) NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  ADD COLUMN last_error VARCHAR(160) NULL,
  ADD COLUMN approved_at DATETIME(3) NULL,
  ADD COLUMN approved_by VARCHAR(128) NULL,
  ADD COLUMN alerted_at DATETIME(3) NULL,
  ADD KEY idx_due (status, next_attempt_at);

ALTER TABLE pay_callback_log
  ADD COLUMN source ENUM('notify','query') NOT NULL DEFAULT 'notify';

ALTER TABLE orders
  ADD COLUMN close_requested_at DATETIME(3) NULL,
  ADD COLUMN channel_closed_at DATETIME(3) NULL,
  ADD COLUMN recon_step INT NOT NULL DEFAULT 0,
  ADD COLUMN recon_next_at DATETIME(3) NULL,
  ADD KEY idx_recon (status, recon_next_at);
