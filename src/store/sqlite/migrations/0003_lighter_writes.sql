-- Schema version 3: less written per submission and per state change (docs/benchmarks.md).
--
-- Indexes that no query reads are dropped. The server holds every job in memory (loaded whole,
-- by id, at start) and reads the audit log by seq only, so these were written at every
-- submission and state change and never read.
DROP INDEX jobs_by_tenant;
DROP INDEX jobs_by_queue;
DROP INDEX jobs_by_state;
DROP INDEX jobs_by_user;
DROP INDEX audit_by_time;
DROP INDEX audit_by_actor;

-- Job ids are still never reused, but the highest id is noted only when a job row is deleted:
-- the loader takes the larger of that note and max(id) of the rows. Before, every insert ran a
-- trigger and rewrote store_meta's page in the same transaction.
DROP TRIGGER jobs_keep_max_id;
CREATE TRIGGER jobs_note_max_id_on_delete BEFORE DELETE ON jobs
BEGIN
  UPDATE store_meta SET value = OLD.id WHERE key = 'max_job_id' AND value < OLD.id;
END;
