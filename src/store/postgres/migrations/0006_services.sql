-- Schema version 6: online services (docs/services.md) and what their gateways measured.
CREATE TABLE services (
  name            TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant          TEXT COLLATE "C" NOT NULL,
  spec_json       TEXT NOT NULL,
  secret_env_json TEXT NOT NULL DEFAULT '',
  updated_at_ms   BIGINT NOT NULL
);

-- Serving figures per minute, service and revision. Pruned by age with the cluster samples.
CREATE TABLE serving_stats (
  minute_ms BIGINT NOT NULL,
  service   TEXT COLLATE "C" NOT NULL CHECK (service <> ''),
  revision  BIGINT NOT NULL,
  data_json TEXT NOT NULL,
  PRIMARY KEY (minute_ms, service, revision)
);
