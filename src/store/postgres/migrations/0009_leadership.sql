-- Schema version 9: leadership of several servers over one store (docs/operations.md).
--
-- One lease row. `term` is the fencing epoch: +1 every time the lease is taken, never on a
-- renewal; a leader's every transaction checks that the term is still its own.
CREATE TABLE leader_lease (
  id            INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
  holder        TEXT NOT NULL,
  holder_url    TEXT NOT NULL,
  term          BIGINT NOT NULL CHECK (term >= 0),
  expires_at_ms BIGINT NOT NULL
);
INSERT INTO leader_lease (id, holder, holder_url, term, expires_at_ms) VALUES (1, '', '', 0, 0);

-- The fence of a write transaction: takes the lease row FOR SHARE (so a takeover, which takes it
-- FOR UPDATE, waits for this transaction) and raises SQLSTATE AR001 when its term is no longer
-- `expected`, which aborts the transaction.
CREATE FUNCTION arbiter_check_fence(expected BIGINT) RETURNS BIGINT LANGUAGE plpgsql AS $$
DECLARE
  current BIGINT;
BEGIN
  SELECT term INTO current FROM leader_lease WHERE id = 1 FOR SHARE;
  IF current IS DISTINCT FROM expected THEN
    RAISE EXCEPTION 'the leadership term % is over (the lease is at term %)', expected, current
      USING ERRCODE = 'AR001';
  END IF;
  RETURN current;
END $$;

-- The servers sharing the store, each as it last reported itself.
CREATE TABLE servers (
  id            TEXT COLLATE "C" PRIMARY KEY NOT NULL CHECK (id <> ''),
  url           TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('leader', 'follower', 'stopped')),
  term          BIGINT NOT NULL CHECK (term >= 0),
  started_at_ms BIGINT NOT NULL,
  last_seen_ms  BIGINT NOT NULL
);
