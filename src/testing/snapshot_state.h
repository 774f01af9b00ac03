// SnapshotState: everything a Snapshot exposes, copied into plain vectors, so that tests can
// compare a snapshot before and after a trial move (free capacity, the node index, quota usage and
// availability).
//
// Header-only; test code only.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/snapshot.h"

namespace arbiter::testing {

struct SnapshotState {
  std::vector<int64_t> free_cpu;         // by node
  std::vector<int64_t> free_memory;      // by node
  std::vector<int32_t> gpu_free_milli;   // by GPU slot
  std::vector<int64_t> gpu_free_memory;  // by GPU slot
  // buckets[m][k]: nodes with exactly k fully free GPUs of model m; partial[m]: nodes with a partly
  // used GPU of model m.
  std::vector<std::vector<std::vector<uint32_t>>> buckets;
  std::vector<std::vector<uint32_t>> partial;
  std::vector<int> max_free_bucket;              // by model
  std::vector<std::vector<int>> full_free_gpus;  // [node][model]
  std::vector<std::vector<int64_t>> usage;       // [queue][dim]
  std::vector<std::vector<int64_t>> available;   // [queue][dim]

  bool operator==(const SnapshotState&) const = default;
};

inline std::vector<uint32_t> Members(const core::NodeSet& set) {
  std::vector<uint32_t> out;
  set.ForEach([&](uint32_t n) {
    out.push_back(n);
    return true;
  });
  return out;
}

inline SnapshotState CaptureSnapshot(const core::Snapshot& s) {
  const core::Cluster& c = s.cluster();
  SnapshotState st;
  for (size_t n = 0; n < c.num_nodes(); ++n) {
    const NodeId id(static_cast<uint32_t>(n));
    st.free_cpu.push_back(s.free_cpu(id));
    st.free_memory.push_back(s.free_memory(id));
    std::vector<int> per_model;
    for (size_t m = 0; m < c.models().size(); ++m) {
      per_model.push_back(s.full_free_gpus(id, GpuModelId(static_cast<uint16_t>(m))));
    }
    st.full_free_gpus.push_back(std::move(per_model));
  }
  for (uint32_t g = 0; g < c.gpus().size(); ++g) {
    st.gpu_free_milli.push_back(s.gpu_free_milli(g));
    st.gpu_free_memory.push_back(s.gpu_free_memory(g));
  }
  for (size_t m = 0; m < c.models().size(); ++m) {
    const GpuModelId model(static_cast<uint16_t>(m));
    std::vector<std::vector<uint32_t>> by_k;
    for (int k = 0; k <= c.max_gpus_per_node(); ++k)
      by_k.push_back(Members(s.nodes_with_free(model, k)));
    st.buckets.push_back(std::move(by_k));
    st.partial.push_back(Members(s.nodes_with_partial(model)));
    st.max_free_bucket.push_back(s.max_free_bucket(model));
  }
  const core::QuotaTree& tree = s.quota().tree();
  for (uint32_t q = 0; q < tree.size(); ++q) {
    std::vector<int64_t> u;
    std::vector<int64_t> a;
    for (int d = 0; d < tree.num_dims(); ++d) {
      u.push_back(s.quota().usage(QueueId(q))[d]);
      a.push_back(s.quota().Available(QueueId(q), d));
    }
    st.usage.push_back(std::move(u));
    st.available.push_back(std::move(a));
  }
  return st;
}

// The fields in which two states differ, with both values, for failure messages ("" when equal).
inline std::string DiffSnapshots(const SnapshotState& a, const SnapshotState& b) {
  std::string out;
  auto field = [&out](const char* name, const auto& x, const auto& y) {
    if (x == y) return;
    out += fmt::format("{}: {} vs {}\n", name, x, y);
  };
  field("free_cpu", a.free_cpu, b.free_cpu);
  field("free_memory", a.free_memory, b.free_memory);
  field("gpu_free_milli", a.gpu_free_milli, b.gpu_free_milli);
  field("gpu_free_memory", a.gpu_free_memory, b.gpu_free_memory);
  field("buckets", a.buckets, b.buckets);
  field("partial", a.partial, b.partial);
  field("max_free_bucket", a.max_free_bucket, b.max_free_bucket);
  field("full_free_gpus", a.full_free_gpus, b.full_free_gpus);
  field("usage", a.usage, b.usage);
  field("available", a.available, b.available);
  return out;
}

}  // namespace arbiter::testing
