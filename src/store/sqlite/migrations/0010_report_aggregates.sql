-- Schema version 10: report aggregates and the retention of the raw history (docs/store.md,
-- docs/reports.md).
--
-- usage_rollups: the GPU time and cost of the usage records per hour (span_ms 3600000), per UTC
-- day (86400000) and per sixteen days (1382400000, from the epoch), and per (tenant, queue, user,
-- job_type, gpu_model). The store adds to them as it
-- appends a usage record, in the same transaction: the record's [start_ms, end_ms) is split at
-- every hour (and day) boundary, gpu_milli x overlap exactly, cost_micro x overlap / duration.
CREATE TABLE usage_rollups (
  span_ms      INTEGER NOT NULL CHECK (span_ms IN (3600000, 86400000, 1382400000)),
  at_ms        INTEGER NOT NULL,
  tenant       TEXT NOT NULL,
  queue        TEXT NOT NULL,
  user         TEXT NOT NULL,
  job_type     TEXT NOT NULL,
  gpu_model    TEXT NOT NULL,
  gpu_milli_ms INTEGER NOT NULL,
  cost_micro   REAL NOT NULL,
  PRIMARY KEY (span_ms, at_ms, tenant, queue, user, job_type, gpu_model)
) WITHOUT ROWID;

-- job_facts: what the wait, failures and preemptions reports count, one row per wait, run outcome
-- and preemption, with the job's attribution at the time. Written by the server in the batch of
-- the job event it comes from.
CREATE TABLE job_facts (
  seq           INTEGER PRIMARY KEY NOT NULL,
  job_id        INTEGER NOT NULL,
  at_ms         INTEGER NOT NULL,
  kind          TEXT NOT NULL
                CHECK (kind IN ('admitted', 'unqueued', 'succeeded', 'failed', 'preempted')),
  tenant        TEXT NOT NULL,
  queue         TEXT NOT NULL,
  user          TEXT NOT NULL,
  job_type      TEXT NOT NULL,
  gpu_model     TEXT NOT NULL,
  since_ms      INTEGER NOT NULL CHECK (since_ms <= at_ms),
  lost_milli_ms INTEGER NOT NULL,
  reason        TEXT NOT NULL,
  -- The job's GPUs (all tasks, milli-GPU): what a wait holds back from the forecast's demand.
  gpu_milli     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX job_facts_by_time ON job_facts (at_ms);

-- Retention (--retention-days) archives, then deletes, old events and usage records; updates stay
-- refused. It reads the old events by seq (their order) and time, without an index of its own:
-- an index on job_events.at_ms would cost every event's insert for an hourly read.
DROP TRIGGER job_events_no_delete;
DROP TRIGGER usage_no_delete;

-- Existing databases: the rollups from the usage records already there (split as the store does),
-- and the facts from the job events and the jobs' rows (attributed as the jobs are now).
WITH RECURSIVE parts(seq, span_ms, at_ms) AS (
  SELECT seq, 3600000, (start_ms / 3600000) * 3600000 FROM usage WHERE end_ms > start_ms
  UNION ALL
  SELECT seq, 86400000, (start_ms / 86400000) * 86400000 FROM usage WHERE end_ms > start_ms
  UNION ALL
  SELECT seq, 1382400000, (start_ms / 1382400000) * 1382400000 FROM usage WHERE end_ms > start_ms
  UNION ALL
  SELECT p.seq, p.span_ms, p.at_ms + p.span_ms FROM parts p JOIN usage u ON u.seq = p.seq
  WHERE p.at_ms + p.span_ms < u.end_ms
)
INSERT INTO usage_rollups (span_ms, at_ms, tenant, queue, user, job_type, gpu_model, gpu_milli_ms,
                           cost_micro)
  SELECT p.span_ms, p.at_ms, u.tenant, u.queue, u.user, u.job_type, u.gpu_model,
         sum(u.gpu_milli * (min(u.end_ms, p.at_ms + p.span_ms) - max(u.start_ms, p.at_ms))),
         sum(u.cost_micro * 1.0 * (min(u.end_ms, p.at_ms + p.span_ms) - max(u.start_ms, p.at_ms)) /
             (u.end_ms - u.start_ms))
  FROM parts p JOIN usage u ON u.seq = p.seq
  GROUP BY p.span_ms, p.at_ms, u.tenant, u.queue, u.user, u.job_type, u.gpu_model;

-- A wait ends at the first event out of pending after the job entered it (its last event into
-- pending from another state).
CREATE TEMP TABLE fact_events AS
  SELECT e.seq, e.job_id, e.at_ms, e.from_state, e.to_state, e.reason,
         j.tenant, j.queue, j.user, j.type AS job_type,
         coalesce(json_extract(j.status_json, '$.gpu_model'), '') AS gpu_model,
         (SELECT max(p.at_ms) FROM job_events p WHERE p.job_id = e.job_id AND p.seq < e.seq
            AND p.to_state = 'pending' AND p.from_state <> 'pending') AS pending_at,
         (SELECT max(p.seq) FROM job_events p WHERE p.job_id = e.job_id AND p.seq < e.seq
            AND p.to_state = 'pending' AND p.from_state <> 'pending') AS pending_seq,
         (SELECT max(p.seq) FROM job_events p WHERE p.job_id = e.job_id AND p.seq < e.seq
            AND p.to_state <> 'pending') AS left_seq
  FROM job_events e JOIN jobs j ON j.id = e.job_id
  WHERE e.to_state IN ('admitted', 'succeeded', 'failed', 'timed-out', 'lost', 'preempting')
     OR (e.from_state = 'pending' AND e.to_state <> 'pending');
INSERT INTO job_facts (job_id, at_ms, kind, tenant, queue, user, job_type, gpu_model, since_ms,
                       lost_milli_ms, reason)
  SELECT job_id, at_ms, CASE WHEN to_state = 'admitted' THEN 'admitted' ELSE 'unqueued' END,
         tenant, queue, user, job_type, gpu_model, min(pending_at, at_ms), 0, ''
  FROM fact_events
  WHERE pending_seq IS NOT NULL AND (left_seq IS NULL OR left_seq < pending_seq)
    AND to_state <> 'pending'
  ORDER BY seq;
INSERT INTO job_facts (job_id, at_ms, kind, tenant, queue, user, job_type, gpu_model, since_ms,
                       lost_milli_ms, reason)
  SELECT job_id, at_ms, CASE WHEN to_state = 'succeeded' THEN 'succeeded' ELSE 'failed' END,
         tenant, queue, user, job_type, gpu_model, at_ms, 0,
         CASE WHEN to_state = 'timed-out' THEN 'timeout'
              WHEN to_state = 'lost' THEN 'lost node'
              WHEN reason LIKE 'a task exited with code %' THEN 'exit code ' || substr(reason, 25)
              ELSE reason END
  FROM fact_events
  WHERE to_state IN ('succeeded', 'timed-out', 'lost')
     OR (to_state = 'failed' AND from_state <> 'lost')
  ORDER BY seq;
-- A preemption loses the run since its last event into running after its admission, at the
-- GPUs of the run (its tasks' usage records).
INSERT INTO job_facts (job_id, at_ms, kind, tenant, queue, user, job_type, gpu_model, since_ms,
                       lost_milli_ms, reason)
  SELECT job_id, at_ms, 'preempted', tenant, queue, user, job_type, gpu_model,
         coalesce(min(run_at, at_ms), at_ms),
         CASE WHEN run_at IS NULL THEN 0 ELSE (at_ms - run_at) * gpus END, reason
  FROM (SELECT f.*,
               (SELECT max(r.at_ms) FROM job_events r WHERE r.job_id = f.job_id AND r.seq < f.seq
                  AND r.to_state = 'running'
                  AND r.seq > coalesce((SELECT max(a.seq) FROM job_events a WHERE a.job_id = f.job_id
                                          AND a.seq < f.seq AND a.to_state = 'admitted'), 0))
                 AS run_at,
               (SELECT coalesce(sum(u.gpu_milli), 0) FROM usage u WHERE u.job_id = f.job_id
                  AND u.start_ms <= f.at_ms AND u.end_ms >= f.at_ms) AS gpus
        FROM fact_events f WHERE f.to_state = 'preempting')
  ORDER BY seq;
DROP TABLE fact_events;
