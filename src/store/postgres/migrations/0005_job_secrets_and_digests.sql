-- Schema version 5: a job's secret variables and the digest of its submission (docs/security.md).
ALTER TABLE jobs ADD COLUMN secret_env_json TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
