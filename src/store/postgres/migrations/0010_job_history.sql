-- Schema version 10: the history of jobs is read from the store (docs/store.md, "Job history").
--
-- The server holds live jobs and a window of recently finished ones in memory; older finished
-- jobs are read back by id, by filters and pages, and a start reads only the live ones and the
-- window. The indexes over history are partial, over finished jobs only: a job enters them once,
-- when it finishes, so submissions and the transitions of live jobs do not write them.
-- (Queries must write the same condition for the planner to use them: store/job_history_sql.h.)
CREATE INDEX jobs_finished_by_user ON jobs ("user", id)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
CREATE INDEX jobs_finished_by_tenant ON jobs (tenant, id)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
CREATE INDEX jobs_finished_by_queue ON jobs (queue, id)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
-- The window a start loads: the latest finished.
CREATE INDEX jobs_finished_by_update ON jobs (updated_at_ms)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
-- Finished jobs whose processes may still run: always loaded.
CREATE INDEX jobs_finished_stopping ON jobs (id)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected')
    AND strpos(status_json, '"stopping":true') > 0;
-- The live jobs a start loads, without reading the history's rows.
CREATE INDEX jobs_unfinished ON jobs (id)
  WHERE state NOT IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
