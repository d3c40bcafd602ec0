-- 003: operations: alerts raised by the pipeline and the SRE tool's audit trail.

CREATE TABLE alerts (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  kind             VARCHAR(48)  NOT NULL,
  callback_id      BIGINT UNSIGNED NULL,
  merchant_id      VARCHAR(64)  NULL,
  out_trade_no     VARCHAR(128) NULL,
  detail           VARCHAR(512) NOT NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id),
  KEY idx_kind (kind, created_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE audit_log (
  id               BIGINT UNSIGNED NOT NULL AUTO_INCREMENT,
  actor            VARCHAR(128) NOT NULL,
  action           VARCHAR(48)  NOT NULL,
  target           VARCHAR(256) NOT NULL,
  dry_run          TINYINT      NOT NULL DEFAULT 0,
  result           VARCHAR(512) NOT NULL,
  created_at       DATETIME(3)  NOT NULL DEFAULT CURRENT_TIMESTAMP(3),
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
