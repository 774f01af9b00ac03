-- Schema version 3: indexes that no query reads are dropped. The server holds every job in memory
-- (loaded whole, by id, at start) and reads the audit log by seq only, so these indexes were
-- written at every submission and state change and never read: with them a submission's
-- transaction touched about 15 pages, without them about 9 (docs/benchmarks.md).
DROP INDEX jobs_by_tenant;
DROP INDEX jobs_by_queue;
DROP INDEX jobs_by_state;
DROP INDEX jobs_by_user;
DROP INDEX audit_by_time;
DROP INDEX audit_by_actor;
