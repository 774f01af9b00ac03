// Store: the durable record of the control plane.
//
// The server keeps all live state in memory; the store is what survives a restart. The server loads
// everything with Load() at start and writes every mutation with Write()/WriteAsync() before it
// acknowledges it. SQLite (sqlite/sqlite_store.h) is the embedded implementation; PostgreSQL
// (postgres/postgres_store.h) serves a company's installation, and several servers over it
// (docs/store.md, docs/operations.md). OpenStore (open_store.h) opens either from a URL.
//
// Contract:
//   - A batch is atomic: all of its ops commit, or none of them.
//   - Batches commit in the order they were enqueued. A caller that enqueues while holding its own
//     lock therefore gets a total order that matches its in-memory order.
//   - A future that resolves OK means durable: the batch is committed and synced, and survives a
//     kill -9 of the process (and, with SqliteOptions::synchronous_full, a power loss).
//   - A batch that fails leaves no trace and fails alone: batches committed together with it in
//     one group commit are unaffected.
//   - A batch that was being committed when the process died may be present after a restart even
//     though it was never acknowledged (the classic "committed, reply lost"); callers that retry
//     rely on idempotent puts or idempotency keys.
//
// Errors: kUnavailable for I/O errors (disk full, read-only, cannot open), kFailedPrecondition for
// a database written by a newer version or a closed store, kInternal otherwise (a violated
// constraint is a bug in the caller). Messages name the op that failed.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/status.h"
#include "store/records.h"

namespace arbiter::store {

struct StoreStats {
  uint64_t batches = 0;         // batches finished (committed or failed)
  uint64_t failed_batches = 0;  // of those, failed
  uint64_t ops = 0;             // ops of committed batches
  uint64_t commits = 0;         // transactions committed (one group commit = one)
  uint64_t max_group = 0;       // most batches committed in one transaction
  uint64_t queued = 0;          // batches enqueued and not yet taken by the writer
  // Commit latency: from the start of the transaction to the return of the synced commit.
  uint64_t total_commit_us = 0;
  uint64_t max_commit_us = 0;
  // commit_us_histogram[i] counts commits that took <= kCommitUsBounds[i] microseconds (and more
  // than the bound before); the last bucket counts the rest.
  static constexpr std::array<uint64_t, 7> kCommitUsBounds = {100,   300,   1000,  3000,
                                                              10000, 30000, 100000};
  std::array<uint64_t, kCommitUsBounds.size() + 1> commit_us_histogram{};
};

// How a fenced batch's message starts (see Store::SetFence).
inline constexpr std::string_view kFencedPrefix = "store: fenced:";
inline bool IsFenced(const Status& st) {
  return st.code() == StatusCode::kUnavailable && st.message().starts_with(kFencedPrefix);
}

class Store {
 public:
  virtual ~Store() = default;

  // Enqueues the batch and returns at once; the future resolves once the batch is durable
  // (committed and synced) or failed. An empty batch resolves after every batch enqueued before it
  // (a barrier). After Close(), resolves at once with kFailedPrecondition.
  virtual std::shared_future<Status> WriteAsync(WriteBatch batch) = 0;
  // WriteAsync and wait.
  Status Write(WriteBatch batch) { return WriteAsync(std::move(batch)).get(); }

  // Every record of the state tables, read in one consistent snapshot (a batch is either wholly in
  // it or not at all). Load(LoadOptions) below reads only some of the finished jobs.
  Result<StoreState> Load() { return Load(LoadOptions{}); }
  // The events of one job, in seq order.
  virtual Result<std::vector<JobEventRecord>> JobEvents(uint64_t job_id) = 0;
  // At most `limit` events with seq > after_seq, in seq order (a change feed: pass the last seq).
  virtual Result<std::vector<JobEventRecord>> EventsSince(uint64_t after_seq, size_t limit) = 0;
  // Usage records overlapping [from_ms, to_ms): start_ms < to_ms and end_ms > from_ms, in seq
  // order.
  virtual Result<std::vector<UsageRecord>> Usage(int64_t from_ms, int64_t to_ms) = 0;
  // At most `limit` audit records with seq > after_seq, in seq order.
  virtual Result<std::vector<AuditRecord>> Audit(uint64_t after_seq, size_t limit) = 0;
  // At most `q.limit` audit records with seq > q.after_seq that pass every filter of `q`, in seq
  // order. Each filter has an index (docs/governance.md).
  virtual Result<std::vector<AuditRecord>> QueryAudit(const AuditQuery& q) = 0;
  // Cluster samples with from_ms <= at_ms < to_ms, in at_ms order.
  virtual Result<std::vector<ClusterSampleRecord>> ClusterSamples(int64_t from_ms,
                                                                  int64_t to_ms) = 0;
  // GPU samples (raw and hourly) overlapping [from_ms, to_ms): at_ms < to_ms and
  // at_ms + resolution_ms > from_ms, in (at_ms, node, gpu, resolution_ms) order.
  virtual Result<std::vector<GpuSampleRecord>> GpuSamples(int64_t from_ms, int64_t to_ms) = 0;

  // Serving stats with from_ms <= minute_ms < to_ms, in (minute_ms, service, revision) order.
  virtual Result<std::vector<ServingStatRecord>> ServingStats(int64_t from_ms, int64_t to_ms) = 0;

  // The newest `limit` deliveries of one webhook, newest first.
  virtual Result<std::vector<WebhookDeliveryRecord>> WebhookDeliveries(
      const std::string& webhook_id, size_t limit) = 0;

  // ---- Report aggregates: what the reports read instead of the raw history (docs/reports.md) ----
  //
  // The GPU time and cost of the usage records inside [from_ms, to_ms), summed per (tenant, queue,
  // user, job_type, gpu_model), each row with from_ms and to_ms set to the period; in (tenant,
  // queue, user, job_type, gpu_model) order. Read from the daily rows for the whole UTC days inside
  // the period and the hourly rows for the rest, so a year costs about what a day does. Both bounds
  // must be whole hours (InvalidArgument naming "from_ms" or "to_ms" otherwise). Exact: the sums
  // equal those of the usage records, each counted for its part inside the period.
  // `columns` (AttributionColumns): the columns summed by, besides the tenant; the others are
  // empty in the rows (and the rows are per distinct kept columns).
  virtual Result<std::vector<UsageRollupRecord>> UsageRollup(int64_t from_ms, int64_t to_ms,
                                                             uint32_t columns) = 0;
  // The job facts with at_ms >= from_ms and since_ms < to_ms (every wait that overlaps the period
  // and every other fact inside it, plus facts after it that began in it), in (at_ms, seq) order.
  virtual Result<std::vector<JobFactRecord>> JobFacts(int64_t from_ms, int64_t to_ms) = 0;
  // The waits among the same facts (kinds "admitted" and "unqueued": at_ms >= from_ms and
  // since_ms < to_ms), compactly, in (at_ms, seq) order: what the wait report and the forecast
  // read. Attributions hold the tenant and the `columns` (AttributionColumns) asked for, the others
  // empty. Served from a covering index of the waits alone (migration 0012).
  virtual Result<JobWaits> WaitFacts(int64_t from_ms, int64_t to_ms, uint32_t columns) = 0;
  // Retention: at most `limit` job events with at_ms < before_ms and seq > after_seq, in seq order.
  virtual Result<std::vector<JobEventRecord>> EventsBefore(int64_t before_ms, uint64_t after_seq,
                                                           size_t limit) = 0;
  // Retention: at most `limit` usage records with end_ms < before_ms and seq > after_seq, in seq
  // order.
  virtual Result<std::vector<UsageRecord>> UsageBefore(int64_t before_ms, uint64_t after_seq,
                                                       size_t limit) = 0;

  // ---- Job history: what the server no longer holds in memory (docs/store.md) ----
  //
  // As Load(), but of the finished jobs only those `o` keeps (with every unfinished one, and the
  // finished ones still stopping), so that a start costs the live work and a window, not the whole
  // history. max_job_id and max_event_seq are those of the whole store.
  virtual Result<StoreState> Load(const LoadOptions& o) = 0;
  // The job of that id; kNotFound when there is none.
  virtual Result<JobRecord> GetJob(uint64_t id) = 0;
  // At most `q.limit` jobs that pass every filter of `q`, by id (ascending, or descending with
  // newest_first). With finished_only, a filter on users reads a partial index over finished
  // jobs (0011_job_history.sql); other filters are checked on the rows in id order.
  virtual Result<std::vector<JobRecord>> ListJobs(const JobQuery& q) = 0;
  // The job of (tenant, user, idempotency_key); kNotFound when there is none.
  virtual Result<JobRecord> JobByIdempotencyKey(const std::string& tenant, const std::string& user,
                                                const std::string& key) = 0;

  // ---- Leadership: several servers over one store (docs/operations.md) ----
  //
  // Takes or renews the lease for `holder`, judged by the store's clock:
  //  - held by `holder` with `term` and not expired: renewed, to expire `lease_ms` from now, with
  //    the same term;
  //  - expired (whoever held it) or never held: taken by `holder` with term + 1;
  //  - otherwise: left as it is.
  // Returns the lease as it is after the call (with now_ms): the caller leads for `term` iff
  // holder == `holder` and expires_at_ms > now_ms. Atomic against every other server's call and
  // against fenced batches: a lease taken over waits for a fenced transaction in flight, which
  // then fails.
  virtual Result<LeaseRecord> AcquireLease(const std::string& holder, const std::string& holder_url,
                                           uint64_t term, int64_t lease_ms) = 0;
  // The lease as it is, with the store's clock.
  virtual Result<LeaseRecord> ReadLease() = 0;
  // Ends the lease now if `holder` holds it with `term` (a leader stepping down or stopping), so
  // a follower takes over without waiting for the expiry. The term stays: the next holder's is
  // term + 1.
  virtual Status ReleaseLease(const std::string& holder, uint64_t term) = 0;
  // Fencing. With a fence set, every transaction that commits batches first checks, inside that
  // transaction, that the lease's term is still `term`; if it is not, every batch of it fails with
  // kUnavailable and a message that starts with kFencedPrefix, and nothing of them commits.
  // 0 (the default) checks nothing: a server alone on its store.
  virtual void SetFence(uint64_t term) = 0;
  // Puts one server's row (replacing the row with its id); last_seen_ms is set to the store's
  // clock.
  virtual Status PutServer(const ServerRecord& r) = 0;
  // Every server row, by id.
  virtual Result<std::vector<ServerRecord>> Servers() = 0;

  virtual StoreStats stats() const = 0;

  // Stops the writer after committing everything enqueued so far, then releases the database.
  // Idempotent. Reads after Close() fail with kFailedPrecondition.
  virtual void Close() = 0;
};

}  // namespace arbiter::store
