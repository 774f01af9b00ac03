-- Schema version 8: webhooks (docs/webhooks.md) and their deliveries.
CREATE TABLE webhooks (
  id            TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (id <> ''),
  tenant        TEXT COLLATE "C" NOT NULL,
  "user"        TEXT COLLATE "C" NOT NULL,
  spec_json     TEXT NOT NULL,
  secret        TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL
);

-- One event to deliver to one webhook: pending until delivered or given up. Deleted with its
-- webhook; finished ones pruned by age.
CREATE TABLE webhook_deliveries (
  id            TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (id <> ''),
  webhook_id    TEXT COLLATE "C" NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  created_at_ms BIGINT NOT NULL,
  updated_at_ms BIGINT NOT NULL,
  data_json     TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_by_hook ON webhook_deliveries (webhook_id, created_at_ms);
CREATE INDEX webhook_deliveries_by_state ON webhook_deliveries (state, updated_at_ms);
