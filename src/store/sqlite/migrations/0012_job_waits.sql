-- Schema version 12: the waits among the job facts, read without the table's rows (docs/store.md,
-- "Report aggregates").
--
-- The wait report and the forecast read every wait that overlaps their period: millions of rows
-- over a quarter. A covering index of the waits alone, in (at_ms, seq) order, holds every column
-- they read, so the read walks one compact b-tree and never the table (nor the run outcomes and
-- preemptions, half the facts). Only waits enter it. (Store::JobWaits writes the same condition,
-- for the planner to use it.)
CREATE INDEX job_facts_waits
  ON job_facts (at_ms, seq, since_ms, gpu_milli, kind, tenant, queue, user, job_type, gpu_model)
  WHERE kind IN ('admitted', 'unqueued');
