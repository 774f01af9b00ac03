-- Schema version 1 of the Arbiter store: the state tables the server loads at start, and the
-- append-only tables it writes history to. The server owns referential integrity (a queue's
-- tenant, a job's queue): rows here refer to each other by name, without foreign keys, so that a
-- job's history outlives its queue.

-- Counters that must never go back, even when rows are deleted.
CREATE TABLE store_meta (
  key   TEXT PRIMARY KEY NOT NULL,
  value INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO store_meta (key, value) VALUES ('max_job_id', 0);

CREATE TABLE tenants (
  name          TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json     TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE queues (
  name      TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant    TEXT NOT NULL,
  parent    TEXT NOT NULL,
  spec_json TEXT NOT NULL
) WITHOUT ROWID;
CREATE INDEX queues_by_tenant ON queues (tenant);

CREATE TABLE users (
  name          TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant        TEXT NOT NULL,
  role          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX users_by_tenant ON users (tenant);

-- Tokens are stored only as hashes: hash_hex is the lowercase hex digest the server computes from
-- the plain token, which never reaches the store. The check refuses anything else.
CREATE TABLE tokens (
  id            TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  hash_hex      TEXT NOT NULL
                CONSTRAINT token_hash_is_lowercase_hex_digest
                CHECK (length(hash_hex) BETWEEN 32 AND 128 AND length(hash_hex) % 2 = 0
                       AND hash_hex NOT GLOB '*[^0-9a-f]*'),
  user          TEXT NOT NULL,
  tenant        TEXT NOT NULL,
  role          TEXT NOT NULL,
  kind          TEXT NOT NULL,
  created_at_ms INTEGER NOT NULL,
  expires_at_ms INTEGER NOT NULL,
  revoked       INTEGER NOT NULL CHECK (revoked IN (0, 1))
) WITHOUT ROWID;
CREATE UNIQUE INDEX tokens_by_hash ON tokens (hash_hex);
CREATE INDEX tokens_by_user ON tokens (user);

CREATE TABLE priority_classes (
  name      TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE gpu_models (
  name      TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE nodes (
  name          TEXT PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json     TEXT NOT NULL,
  state         TEXT NOT NULL,
  updated_at_ms INTEGER NOT NULL
) WITHOUT ROWID;

CREATE TABLE jobs (
  id              INTEGER PRIMARY KEY NOT NULL CHECK (id > 0),
  tenant          TEXT NOT NULL,
  queue           TEXT NOT NULL,
  user            TEXT NOT NULL,
  name            TEXT NOT NULL,
  type            TEXT NOT NULL,
  state           TEXT NOT NULL,
  spec_json       TEXT NOT NULL,
  status_json     TEXT NOT NULL,
  idempotency_key TEXT NOT NULL,
  submitted_at_ms INTEGER NOT NULL,
  updated_at_ms   INTEGER NOT NULL
);
CREATE INDEX jobs_by_tenant ON jobs (tenant, state);
CREATE INDEX jobs_by_queue ON jobs (queue, state);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_user ON jobs (user, tenant);
-- A retried submission carries the same key: a second job of the same tenant and user with the
-- same key is refused.
CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (tenant, user, idempotency_key)
  WHERE idempotency_key <> '';
-- Job ids are never reused: the highest id ever inserted is kept even after its row is deleted.
CREATE TRIGGER jobs_keep_max_id AFTER INSERT ON jobs
BEGIN
  UPDATE store_meta SET value = NEW.id WHERE key = 'max_job_id' AND value < NEW.id;
END;

CREATE TABLE kv (
  key   TEXT PRIMARY KEY NOT NULL CHECK (key <> ''),
  value BLOB NOT NULL
) WITHOUT ROWID;

-- Append-only history. seq is the rowid: a row given seq NULL gets max(seq) + 1.
CREATE TABLE job_events (
  seq         INTEGER PRIMARY KEY,
  job_id      INTEGER NOT NULL,
  at_ms       INTEGER NOT NULL,
  from_state  TEXT NOT NULL,
  to_state    TEXT NOT NULL,
  reason      TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events (job_id, seq);
CREATE TRIGGER job_events_no_update BEFORE UPDATE ON job_events
BEGIN
  SELECT RAISE(ABORT, 'job_events is append-only');
END;
CREATE TRIGGER job_events_no_delete BEFORE DELETE ON job_events
BEGIN
  SELECT RAISE(ABORT, 'job_events is append-only');
END;

CREATE TABLE usage (
  seq            INTEGER PRIMARY KEY,
  job_id         INTEGER NOT NULL,
  task           INTEGER NOT NULL,
  tenant         TEXT NOT NULL,
  queue          TEXT NOT NULL,
  user           TEXT NOT NULL,
  job_type       TEXT NOT NULL,
  gpu_model      TEXT NOT NULL,
  gpu_milli      INTEGER NOT NULL,
  gpu_memory_mib INTEGER NOT NULL,
  start_ms       INTEGER NOT NULL,
  end_ms         INTEGER NOT NULL CHECK (end_ms >= start_ms),
  cost_micro     INTEGER NOT NULL
);
-- Reports ask for the usage overlapping a window: end_ms > from AND start_ms < to.
CREATE INDEX usage_by_end ON usage (end_ms, start_ms);
CREATE INDEX usage_by_start ON usage (start_ms);
CREATE INDEX usage_by_tenant ON usage (tenant, start_ms);
CREATE TRIGGER usage_no_update BEFORE UPDATE ON usage
BEGIN
  SELECT RAISE(ABORT, 'usage is append-only');
END;
CREATE TRIGGER usage_no_delete BEFORE DELETE ON usage
BEGIN
  SELECT RAISE(ABORT, 'usage is append-only');
END;

CREATE TABLE audit (
  seq         INTEGER PRIMARY KEY,
  at_ms       INTEGER NOT NULL,
  actor       TEXT NOT NULL,
  action      TEXT NOT NULL,
  target      TEXT NOT NULL,
  result      TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_actor ON audit (actor, seq);
CREATE TRIGGER audit_no_update BEFORE UPDATE ON audit
BEGIN
  SELECT RAISE(ABORT, 'audit is append-only');
END;
CREATE TRIGGER audit_no_delete BEFORE DELETE ON audit
BEGIN
  SELECT RAISE(ABORT, 'audit is append-only');
END;
