-- Schema version 4: tokens name their node, the audit log names the token (docs/security.md).
ALTER TABLE tokens ADD COLUMN node TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN token_id TEXT COLLATE "C" NOT NULL DEFAULT '';
