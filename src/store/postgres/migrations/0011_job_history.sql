-- Schema version 10: the history of jobs is read from the store (docs/store.md, "Job history").
--
-- The server holds live jobs and a window of recently finished ones in memory; older finished
-- jobs are read back by id, by filters and pages, and a start reads only the live ones and the
-- window. Every index on jobs costs every insert and update of a job (SQLite evaluates each
-- partial index's condition even when the row does not enter it: five partial indexes halved the
-- store's submission ceiling), so there are two, both partial. (Queries write the same conditions,
-- for the planner to use them: store/job_history_sql.h.)
--
-- The live jobs, and the finished ones whose processes may still run: what a start loads,
-- without reading the history's rows.
CREATE INDEX jobs_live ON jobs (id)
  WHERE state NOT IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected')
    OR strpos(status_json, '"stopping":true') > 0;
-- One user's finished jobs in id order: the job list's pages over the history (a job enters it
-- once, when it finishes).
CREATE INDEX jobs_finished_by_user ON jobs ("user", id)
  WHERE state IN ('succeeded', 'failed', 'cancelled', 'timed-out', 'rejected');
