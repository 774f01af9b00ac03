// Store: the durable record of the control plane.
//
// The server keeps all live state in memory; the store is what survives a restart. The server loads
// everything with Load() at start and writes every mutation with Write()/WriteAsync() before it
// acknowledges it. SQLite (sqlite/sqlite_store.h) is the embedded implementation; a PostgreSQL
// implementation can follow behind the same interface (docs/store.md).
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
  // it or not at all).
  virtual Result<StoreState> Load() = 0;
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

  virtual StoreStats stats() const = 0;

  // Stops the writer after committing everything enqueued so far, then releases the database.
  // Idempotent. Reads after Close() fail with kFailedPrecondition.
  virtual void Close() = 0;
};

}  // namespace arbiter::store
