-- 007: notifications that verified but cannot be applied to the merchant whose endpoint
-- received them (no order number, another merchant's identity, a test-mode event for a live
-- merchant). ingest answers them with the channel's success and keeps them here, with one
-- autocommit INSERT, for people to look at (`paycbctl unroutable`); a duplicate-key error
-- means the notification is already kept. event_key is the channel's event id (WeChat Pay
-- envelope id, Alipay notify_id, Stripe evt_ id), or the body's SHA-256 when there is none.

CREATE TABLE unroutable (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  merchant_id      VARCHAR(64)  NOT NULL,
  channel          VARCHAR(16)  NOT NULL,
  event_key        VARCHAR(128) NOT NULL,
  event_id         VARCHAR(128) NOT NULL DEFAULT '',
  event_type       VARCHAR(64)  NOT NULL DEFAULT '',
  reason           VARCHAR(32)  NOT NULL,
  raw_body         MEDIUMBLOB   NULL,
  body_sha256      CHAR(64)     NOT NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  UNIQUE KEY uk_event (merchant_id, channel, event_key),
  KEY idx_created (created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
