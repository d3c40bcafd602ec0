-- 002: the merchant's orders, the transactional outbox and the refunds paycb decides to issue.

CREATE TABLE orders (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  merchant_id      VARCHAR(64)  NOT NULL,
  out_trade_no     VARCHAR(128) NOT NULL,
  amount           DECIMAL(18,2) NOT NULL,
  currency         CHAR(3)      NOT NULL,
  status           ENUM('PENDING','PAID','CLOSED','REFUNDING','REFUNDED') NOT NULL DEFAULT 'PENDING',
  channel          VARCHAR(16)  NULL,
  channel_trade_no VARCHAR(128) NULL,
  paid_at          DATETIME(3)  NULL,
  refunded_amount  DECIMAL(18,2) NOT NULL DEFAULT 0.00,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  updated_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3) ON UPDATE CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_order (merchant_id, out_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One row per business effect, written in the same transaction as the state change.
-- event_id is stable, so downstream consumers deduplicate on it.
CREATE TABLE order_events (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  event_id         VARCHAR(200) NOT NULL,
  merchant_id      VARCHAR(64)  NOT NULL,
  out_trade_no     VARCHAR(128) NOT NULL,
  event_type       VARCHAR(48)  NOT NULL,
  payload          JSON         NOT NULL,
  callback_id      BIGINT UNSIGNED NULL,
  sent_at          DATETIME(3)  NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_event (event_id),
  UNIQUE KEY uk_order_event (merchant_id, out_trade_no, event_type),
  KEY idx_unsent (sent_at, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Refunds paycb must issue: a second payment of a paid order, or a payment after close.
CREATE TABLE refund_requests (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  merchant_id      VARCHAR(64)  NOT NULL,
  channel          VARCHAR(16)  NOT NULL,
  channel_trade_no VARCHAR(128) NOT NULL,
  out_trade_no     VARCHAR(128) NOT NULL,
  amount           DECIMAL(18,2) NOT NULL,
  currency         CHAR(3)      NOT NULL,
  reason           VARCHAR(32)  NOT NULL,
  status           ENUM('REQUESTED','SUBMITTED','DONE','FAILED') NOT NULL DEFAULT 'REQUESTED',
  callback_id      BIGINT UNSIGNED NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_refund_trade (merchant_id, channel, channel_trade_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Refunds applied to orders, one row per channel refund number, so partial refunds add up
-- exactly once each.
CREATE TABLE order_refunds (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  merchant_id      VARCHAR(64)  NOT NULL,
  channel          VARCHAR(16)  NOT NULL,
  refund_no        VARCHAR(160) NOT NULL,
  out_trade_no     VARCHAR(128) NOT NULL,
  amount           DECIMAL(18,2) NOT NULL,
  callback_id      BIGINT UNSIGNED NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_order_refund (merchant_id, channel, refund_no)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
