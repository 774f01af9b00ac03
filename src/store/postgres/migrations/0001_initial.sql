-- Schema version 1 of the Arbiter store on PostgreSQL: the same tables as the SQLite store's
-- version 1 (src/store/sqlite/migrations), in PostgreSQL's types. Text keys and the columns that
-- are compared or ordered use the "C" collation, so that order is byte order, as in SQLite.
-- The server owns referential integrity: rows refer to each other by name, without foreign keys.

-- Counters that must never go back, even when rows are deleted.
CREATE TABLE store_meta (
  key   TEXT COLLATE "C" PRIMARY KEY NOT NULL,
  value BIGINT NOT NULL
);
INSERT INTO store_meta (key, value) VALUES ('max_job_id', 0);

CREATE TABLE tenants (
  name          TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json     TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL
);

CREATE TABLE queues (
  name      TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant    TEXT COLLATE "C" NOT NULL,
  parent    TEXT COLLATE "C" NOT NULL,
  spec_json TEXT NOT NULL
);
CREATE INDEX queues_by_tenant ON queues (tenant);

CREATE TABLE users (
  name          TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  tenant        TEXT COLLATE "C" NOT NULL,
  role          TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL
);
CREATE INDEX users_by_tenant ON users (tenant);

-- Tokens are stored only as hashes: hash_hex is the lowercase hex digest the server computes from
-- the plain token, which never reaches the store. The check refuses anything else.
CREATE TABLE tokens (
  id            TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (id <> ''),
  hash_hex      TEXT COLLATE "C" NOT NULL
                CONSTRAINT token_hash_is_lowercase_hex_digest
                CHECK (length(hash_hex) BETWEEN 32 AND 128 AND length(hash_hex) % 2 = 0
                       AND hash_hex ~ '^[0-9a-f]*$'),
  "user"        TEXT COLLATE "C" NOT NULL,
  tenant        TEXT COLLATE "C" NOT NULL,
  role          TEXT NOT NULL,
  kind          TEXT NOT NULL,
  created_at_ms BIGINT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  revoked       BOOLEAN NOT NULL
);
CREATE UNIQUE INDEX tokens_by_hash ON tokens (hash_hex);
CREATE INDEX tokens_by_user ON tokens ("user");

CREATE TABLE priority_classes (
  name      TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json TEXT NOT NULL
);

CREATE TABLE gpu_models (
  name      TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json TEXT NOT NULL
);

CREATE TABLE nodes (
  name          TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (name <> ''),
  spec_json     TEXT NOT NULL,
  state         TEXT NOT NULL,
  updated_at_ms BIGINT NOT NULL
);

CREATE TABLE jobs (
  id              BIGINT PRIMARY KEY NOT NULL CHECK (id > 0),
  tenant          TEXT COLLATE "C" NOT NULL,
  queue           TEXT COLLATE "C" NOT NULL,
  "user"          TEXT COLLATE "C" NOT NULL,
  name            TEXT NOT NULL,
  type            TEXT NOT NULL,
  state           TEXT NOT NULL,
  spec_json       TEXT NOT NULL,
  status_json     TEXT NOT NULL,
  idempotency_key TEXT COLLATE "C" NOT NULL,
  submitted_at_ms BIGINT NOT NULL,
  updated_at_ms   BIGINT NOT NULL
);
CREATE INDEX jobs_by_tenant ON jobs (tenant, state);
CREATE INDEX jobs_by_queue ON jobs (queue, state);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_user ON jobs ("user", tenant);
-- A retried submission carries the same key: a second job of the same tenant and user with the
-- same key is refused.
CREATE UNIQUE INDEX jobs_by_idempotency_key ON jobs (tenant, "user", idempotency_key)
  WHERE idempotency_key <> '';
-- Job ids are never reused: the highest id ever inserted is kept even after its row is deleted.
CREATE FUNCTION jobs_keep_max_id() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE store_meta SET value = NEW.id WHERE key = 'max_job_id' AND value < NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER jobs_keep_max_id AFTER INSERT ON jobs
  FOR EACH ROW EXECUTE FUNCTION jobs_keep_max_id();

CREATE TABLE kv (
  key   TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (key <> ''),
  value BYTEA NOT NULL
);

-- Append-only history: no row is ever updated or deleted.
CREATE FUNCTION refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION '% is append-only', TG_TABLE_NAME USING ERRCODE = 'integrity_constraint_violation';
END $$;

-- seq: a row given seq NULL gets max(seq) + 1 (the store's insert does it, as SQLite's rowid).
CREATE TABLE job_events (
  seq         BIGINT PRIMARY KEY NOT NULL,
  job_id      BIGINT NOT NULL,
  at_ms       BIGINT NOT NULL,
  from_state  TEXT NOT NULL,
  to_state    TEXT NOT NULL,
  reason      TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events (job_id, seq);
CREATE TRIGGER job_events_append_only BEFORE UPDATE OR DELETE ON job_events
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TABLE usage (
  seq            BIGINT PRIMARY KEY NOT NULL,
  job_id         BIGINT NOT NULL,
  task           INTEGER NOT NULL,
  tenant         TEXT COLLATE "C" NOT NULL,
  queue          TEXT COLLATE "C" NOT NULL,
  "user"         TEXT COLLATE "C" NOT NULL,
  job_type       TEXT NOT NULL,
  gpu_model      TEXT NOT NULL,
  gpu_milli      BIGINT NOT NULL,
  gpu_memory_mib BIGINT NOT NULL,
  start_ms       BIGINT NOT NULL,
  end_ms         BIGINT NOT NULL CHECK (end_ms >= start_ms),
  cost_micro     BIGINT NOT NULL
);
-- Reports ask for the usage overlapping a window: end_ms > from AND start_ms < to.
CREATE INDEX usage_by_end ON usage (end_ms, start_ms);
CREATE INDEX usage_by_start ON usage (start_ms);
CREATE INDEX usage_by_tenant ON usage (tenant, start_ms);
CREATE TRIGGER usage_append_only BEFORE UPDATE OR DELETE ON usage
  FOR EACH ROW EXECUTE FUNCTION refuse_change();

CREATE TABLE audit (
  seq         BIGINT PRIMARY KEY NOT NULL,
  at_ms       BIGINT NOT NULL,
  actor       TEXT COLLATE "C" NOT NULL,
  action      TEXT COLLATE "C" NOT NULL,
  target      TEXT COLLATE "C" NOT NULL,
  result      TEXT NOT NULL,
  detail_json TEXT NOT NULL
);
CREATE INDEX audit_by_time ON audit (at_ms);
CREATE INDEX audit_by_actor ON audit (actor, seq);
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
  FOR EACH ROW EXECUTE FUNCTION refuse_change();
