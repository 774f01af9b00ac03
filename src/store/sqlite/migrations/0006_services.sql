-- Schema version 6: online services (docs/services.md) and what their gateways measured.
--
-- A service's replicas are ordinary jobs (the jobs table); this table holds the service object:
-- its spec, revisions and traffic as JSON (`spec_json`), and each revision's secret variables
-- apart (`secret_env_json`, '' for none), as jobs keep theirs.
CREATE TABLE services (
  name            TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant          TEXT NOT NULL,
  spec_json       TEXT NOT NULL,
  secret_env_json TEXT NOT NULL DEFAULT '',
  updated_at_ms   INTEGER NOT NULL
);

-- Serving figures per minute, service and revision: the gateways' request counts and latency
-- histograms, summed over gateways, and the controller's samples of ready replicas. Pruned by
-- age with the cluster samples.
CREATE TABLE serving_stats (
  minute_ms INTEGER NOT NULL,
  service   TEXT NOT NULL CHECK (service <> ''),
  revision  INTEGER NOT NULL,
  data_json TEXT NOT NULL,
  PRIMARY KEY (minute_ms, service, revision)
) WITHOUT ROWID;
