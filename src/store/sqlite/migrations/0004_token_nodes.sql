-- Schema version 4: tokens name their node, the audit log names the token (docs/security.md).
--
-- A node token is good for one node only: `node` is its name ('' for user tokens, and for node
-- tokens made before this version, which the server no longer accepts on the agent routes).
-- Every audit record carries the id of the token that made the call ('' for calls without one
-- and for records written before this version), so two users of one name stay apart.
ALTER TABLE tokens ADD COLUMN node TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN token_id TEXT NOT NULL DEFAULT '';
