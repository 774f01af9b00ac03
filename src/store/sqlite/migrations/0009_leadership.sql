-- Schema version 9: leadership of several servers over one store (docs/operations.md).
--
-- One lease row. `term` is the fencing epoch: +1 every time the lease is taken, never on a
-- renewal; a leader's every transaction checks that the term is still its own.
CREATE TABLE leader_lease (
  id            INTEGER PRIMARY KEY NOT NULL CHECK (id = 1),
  holder        TEXT NOT NULL,
  holder_url    TEXT NOT NULL,
  term          INTEGER NOT NULL CHECK (term >= 0),
  expires_at_ms INTEGER NOT NULL
);
INSERT INTO leader_lease (id, holder, holder_url, term, expires_at_ms) VALUES (1, '', '', 0, 0);

-- The servers sharing the store, each as it last reported itself.
CREATE TABLE servers (
  id            TEXT PRIMARY KEY NOT NULL CHECK (id <> ''),
  url           TEXT NOT NULL,
  role          TEXT NOT NULL CHECK (role IN ('leader', 'follower', 'stopped')),
  term          INTEGER NOT NULL CHECK (term >= 0),
  started_at_ms INTEGER NOT NULL,
  last_seen_ms  INTEGER NOT NULL
);
