-- Schema version 7: webhooks (docs/webhooks.md) and their deliveries.
--
-- A webhook belongs to a user or a tenant (or the cluster); its settings (url, events, scope,
-- format, description) are the server's JSON (`spec_json`). `secret` is the key its deliveries
-- are signed with (HMAC-SHA256): kept because signing needs it, never returned by the API after
-- the hook's creation.
CREATE TABLE webhooks (
  id            TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  tenant        TEXT NOT NULL,
  user          TEXT NOT NULL,
  spec_json     TEXT NOT NULL,
  secret        TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
);

-- One event to deliver to one webhook: pending until delivered or given up. `data_json` holds
-- the event, the body sent, the attempts and their outcomes (the delivery log). Deleted with
-- its webhook; finished ones pruned by age.
CREATE TABLE webhook_deliveries (
  id            TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  webhook_id    TEXT NOT NULL,
  state         TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
  created_at_ms INTEGER NOT NULL,
  updated_at_ms INTEGER NOT NULL,
  data_json     TEXT NOT NULL
);
CREATE INDEX webhook_deliveries_by_hook ON webhook_deliveries (webhook_id, created_at_ms);
CREATE INDEX webhook_deliveries_by_state ON webhook_deliveries (state, updated_at_ms);
