-- Schema version 3: less written per submission and per state change (docs/benchmarks.md).
--
-- Indexes that no query reads are dropped: the server holds every job in memory and reads the
-- audit log by seq only.
DROP INDEX jobs_by_tenant;
DROP INDEX jobs_by_queue;
DROP INDEX jobs_by_state;
DROP INDEX jobs_by_user;
DROP INDEX audit_by_time;
DROP INDEX audit_by_actor;

-- Job ids are still never reused, but the highest id is noted only when a job row is deleted:
-- the loader takes the larger of that note and max(id) of the rows.
DROP TRIGGER jobs_keep_max_id ON jobs;
DROP FUNCTION jobs_keep_max_id();
CREATE FUNCTION jobs_note_max_id_on_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE store_meta SET value = OLD.id WHERE key = 'max_job_id' AND value < OLD.id;
  RETURN OLD;
END $$;
CREATE TRIGGER jobs_note_max_id_on_delete BEFORE DELETE ON jobs
  FOR EACH ROW EXECUTE FUNCTION jobs_note_max_id_on_delete();
