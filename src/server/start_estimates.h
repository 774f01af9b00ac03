// StartEstimates: the expected start of pending jobs (plan/expected_start.h) as the server
// computes it for `GET /api/v1/jobs/{id}/why` (docs/cli.md, "why").
//
// Who owns what:
//  - The scheduler thread publishes each cycle's input (CycleSnapshot: the running and pending
//    jobs as the core saw them, the compiled cluster, tree and profile) under the control plane's
//    mu_ by moving the cycle's own vectors: nothing is copied.
//  - A `why` (an HTTP thread) takes the latest snapshot and, under mu_, only the owners (tenant,
//    user, queue) of the running jobs and of the pending jobs it replays (SelectPending's cap);
//    then, without mu_, it asks this component, which answers from its cache (an estimate of that
//    job made less than `cache_ttl` ago) or computes one: one computation at a time (compute_mu_),
//    so `why`s never take more than one core between them.
//  - The run-time history (completed runs, by user, queue and cluster) is read from the store's
//    usage records and job facts of the last `history_window`, at most `history_per_key` runs per
//    user and queue (the latest), and kept for `history_refresh`; the computation that finds it
//    older reloads it (under compute_mu_, never under mu_).
//
// Thread safety: every method may be called from any thread; its locks are leaves (it calls
// nothing of the control plane, and the store only under compute_mu_).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "core/cluster.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"
#include "plan/expected_start.h"
#include "store/store.h"

namespace arbiter::server {

// A scheduling cycle's input, immutable once published.
struct CycleSnapshot {
  std::shared_ptr<const core::Cluster> cluster;
  std::shared_ptr<const core::QuotaTree> tree;
  std::shared_ptr<const core::Profile> profile;
  std::vector<core::RunningJob> running;
  std::vector<core::PendingJob> pending;
  std::vector<core::Constraints> constraints;
  std::vector<core::Nomination> nominations;  // preemptors waiting for their victims
  TimeMs now = 0;
};

// What a `why` collects under mu_ for one estimate: the owners of the running jobs, and the
// pending jobs replayed (a subset of the snapshot's, SelectPending's) with theirs.
struct EstimateRequest {
  uint64_t job = 0;
  std::shared_ptr<const CycleSnapshot> snapshot;
  std::vector<plan::JobOwner> running_owners;
  std::vector<core::PendingJob> pending;
  std::vector<plan::JobOwner> pending_owners;
  std::vector<DurationMs> pending_min_runtime;
  size_t pending_left_out = 0;
  // The batch jobs submitted in the last Options::arrival_window (any state now), the templates
  // of the arrivals to come (plan::RecentArrival); the window their rate is over (shorter when
  // only the latest max_recent were kept).
  std::vector<plan::RecentArrival> recent;
  DurationMs arrival_window = 0;
};

class StartEstimates {
 public:
  struct Options {
    int32_t samples = 32;
    size_t max_pending = 1000;
    DurationMs horizon = SecondsToMs(14 * 86400);
    DurationMs history_window = SecondsToMs(14 * 86400);
    DurationMs history_refresh = SecondsToMs(600);
    size_t history_per_key = 200;
    size_t min_samples = 5;
    DurationMs cache_ttl = SecondsToMs(5);
    // Future arrivals are drawn from the submissions of this last period (0: none arrive), at
    // most max_recent of them (the latest).
    DurationMs arrival_window = SecondsToMs(3600);
    size_t max_recent = 2000;
    // Bounds one estimate's work (plan::StartEstimateOptions::max_work): on this bound a `why`
    // costs at most about a second of one core, whatever the queue and the cluster.
    int64_t max_work = 2'000'000;
  };

  StartEstimates(store::Store* store, Options o);

  const Options& options() const { return o_; }

  // An estimate of job `id` made less than cache_ttl before `now`, if any.
  std::optional<plan::StartEstimate> Cached(uint64_t id, TimeMs now) const;

  // Computes the estimate of `r.job` from its request, caches and returns it. `now`: the wall
  // clock, for the history's window and refresh.
  plan::StartEstimate Compute(const EstimateRequest& r, TimeMs now);

  // The `expected_start` object of `why` (docs/api.md): only the job's own figures.
  static nlohmann::json ToJson(const plan::StartEstimate& e, TimeMs now,
                               std::optional<TimeMs> reservation_start);

 private:
  Status LoadHistory(TimeMs now);  // requires compute_mu_

  store::Store* store_;
  const Options o_;
  std::mutex compute_mu_;  // one computation (and history load) at a time
  plan::RunTimeHistory history_;
  TimeMs history_loaded_ = -1;  // guarded by compute_mu_
  mutable std::mutex cache_mu_;
  struct Entry {
    TimeMs at = 0;
    plan::StartEstimate estimate;
  };
  std::map<uint64_t, Entry> cache_;  // guarded by cache_mu_
};

}  // namespace arbiter::server
