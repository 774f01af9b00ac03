-- Schema version 5: a job's secret variables and the digest of its submission (docs/security.md).
--
-- `secret_env_json` holds the values of the job's `secret_env` as a JSON object ('' for none):
-- kept apart from `spec_json`, which the API returns, so that no answer carries them.
-- `request_digest` is the SHA-256 of the submission a job was created from ('' for jobs made
-- before this version), so that a repeated Idempotency-Key with another body can be refused.
ALTER TABLE jobs ADD COLUMN secret_env_json TEXT NOT NULL DEFAULT '';
ALTER TABLE jobs ADD COLUMN request_digest TEXT NOT NULL DEFAULT '';
