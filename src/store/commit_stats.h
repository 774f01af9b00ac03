// StoreStats' accounting of one group commit, shared by the stores' writer threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace arbiter::store {

// Adds one group to `stats`: `group[i].batch` is the i-th batch, `statuses[i]` its outcome,
// `commit_us` the latency of each transaction committed (one for a group committed together).
template <typename Group>
void RecordGroupCommit(StoreStats& stats, const Group& group, const std::vector<Status>& statuses,
                       const std::vector<uint64_t>& commit_us) {
  stats.batches += group.size();
  for (size_t i = 0; i < group.size(); ++i) {
    if (statuses[i].ok()) {
      stats.ops += group[i].batch.size();
    } else {
      ++stats.failed_batches;
    }
  }
  if (commit_us.size() == 1) stats.max_group = std::max<uint64_t>(stats.max_group, group.size());
  for (uint64_t us : commit_us) {
    ++stats.commits;
    stats.total_commit_us += us;
    stats.max_commit_us = std::max(stats.max_commit_us, us);
    const auto& bounds = StoreStats::kCommitUsBounds;
    const auto bucket =
        static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), us) - bounds.begin());
    ++stats.commit_us_histogram[bucket];
  }
}

}  // namespace arbiter::store
