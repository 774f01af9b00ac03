-- Schema version 2: the samples reports are computed from (docs/reports.md). Unlike the history
-- tables these are pruned by age (CompactSamples), so they are not append-only.

-- What the cluster looked like at one instant; the sample stands for [at_ms, at_ms + interval_ms).
CREATE TABLE cluster_samples (
  at_ms       INTEGER PRIMARY KEY NOT NULL,
  interval_ms INTEGER NOT NULL CHECK (interval_ms > 0),
  data_json   TEXT NOT NULL
);

-- Telemetry of one GPU. Raw rows (resolution_ms below 3,600,000: the sampler's interval) are rolled
-- up into hourly rows (resolution_ms = 3,600,000, at_ms the start of the hour) by summing span_ms,
-- busy_ms and memory_mib_ms and keeping the highest memory_max_mib; the raw rows are deleted in
-- the same transaction, so each raw sample is counted exactly once.
CREATE TABLE gpu_samples (
  resolution_ms  INTEGER NOT NULL CHECK (resolution_ms > 0),
  node           TEXT NOT NULL CHECK (node <> ''),
  gpu            INTEGER NOT NULL,
  at_ms          INTEGER NOT NULL,
  span_ms        INTEGER NOT NULL CHECK (span_ms >= 0),
  busy_ms        INTEGER NOT NULL CHECK (busy_ms >= 0),
  memory_max_mib INTEGER NOT NULL,
  memory_mib_ms  INTEGER NOT NULL,
  -- Time first: reports read a window, the roll-up and retention delete the oldest rows, and no
  -- second index is needed (about 50 bytes a row; docs/reports.md has the sizes).
  PRIMARY KEY (at_ms, node, gpu, resolution_ms)
) WITHOUT ROWID;
