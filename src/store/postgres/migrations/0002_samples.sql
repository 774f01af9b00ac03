-- Schema version 2: the samples reports are computed from (docs/reports.md). Unlike the history
-- tables these are pruned by age (CompactSamples), so they are not append-only.

-- What the cluster looked like at one instant; the sample stands for [at_ms, at_ms + interval_ms).
CREATE TABLE cluster_samples (
  at_ms       BIGINT PRIMARY KEY NOT NULL,
  interval_ms BIGINT NOT NULL CHECK (interval_ms > 0),
  data_json   TEXT NOT NULL
);

-- Telemetry of one GPU. Raw rows (resolution_ms below 3,600,000) are rolled up into hourly rows
-- (resolution_ms = 3,600,000, at_ms the start of the hour) by summing span_ms, busy_ms and
-- memory_mib_ms and keeping the highest memory_max_mib; the raw rows are deleted in the same
-- transaction, so each raw sample is counted exactly once.
CREATE TABLE gpu_samples (
  resolution_ms  BIGINT NOT NULL CHECK (resolution_ms > 0),
  node           TEXT COLLATE "C" NOT NULL CHECK (node <> ''),
  gpu            INTEGER NOT NULL,
  at_ms          BIGINT NOT NULL,
  span_ms        BIGINT NOT NULL CHECK (span_ms >= 0),
  busy_ms        BIGINT NOT NULL CHECK (busy_ms >= 0),
  memory_max_mib BIGINT NOT NULL,
  memory_mib_ms  BIGINT NOT NULL,
  PRIMARY KEY (at_ms, node, gpu, resolution_ms)
);
