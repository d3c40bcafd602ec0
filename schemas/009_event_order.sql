-- 009: events of one order leave in commit order (issue 17 item 8; docs/processor.md).
--
-- idx_order_unsent serves the question both the processor's relay and the retrier's outbox
-- sweep ask before they publish an event: has this order an earlier event (a smaller id)
-- that is still unsent? Such an event holds back the later ones, so a refund is never
-- published before the payment it follows.

ALTER TABLE order_events
  ADD KEY idx_order_unsent (merchant_id, out_trade_no, sent_at, id);
