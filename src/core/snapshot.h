// Snapshot: the per-cycle working state of the cluster: free capacity of every node and GPU, an
// index of nodes by free GPUs, and queue usage. Trial moves (gang placement, later preemption) run
// on it inside a Snapshot::Txn, which restores it exactly unless committed.
//
// Thread safety: owned by one cycle; not shared.
#pragma once

#include <cstdint>
#include <vector>

#include "core/cluster.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"

namespace arbiter::core {

// A set of node ids as a bitset, iterated in id order (deterministic tie-breaking).
class NodeSet {
 public:
  explicit NodeSet(size_t n = 0) : words_((n + 63) / 64, 0) {}
  void Insert(uint32_t i) {
    uint64_t& w = words_[i >> 6];
    const uint64_t bit = uint64_t{1} << (i & 63);
    count_ += (w & bit) ? 0 : 1;
    w |= bit;
  }
  void Erase(uint32_t i) {
    uint64_t& w = words_[i >> 6];
    const uint64_t bit = uint64_t{1} << (i & 63);
    count_ -= (w & bit) ? 1 : 0;
    w &= ~bit;
  }
  bool Contains(uint32_t i) const { return (words_[i >> 6] >> (i & 63)) & 1; }
  size_t size() const { return count_; }
  bool empty() const { return count_ == 0; }
  // Calls f(id) for each member in increasing order until f returns false.
  template <typename F>
  void ForEach(F&& f) const {
    for (size_t w = 0; w < words_.size(); ++w) {
      uint64_t bits = words_[w];
      while (bits != 0) {
        const int b = __builtin_ctzll(bits);
        bits &= bits - 1;
        if (!f(static_cast<uint32_t>(w * 64 + static_cast<size_t>(b)))) return;
      }
    }
  }

 private:
  std::vector<uint64_t> words_;
  size_t count_ = 0;
};

class Snapshot {
 public:
  // Empty cluster: everything free, no queue usage. Queue usage and node allocations are added by
  // the cycle from running jobs.
  Snapshot(const Cluster& cluster, const QuotaTree& tree);

  const Cluster& cluster() const { return *cluster_; }
  const QuotaState& quota() const { return quota_; }

  // Free capacity.
  int64_t free_cpu(NodeId n) const { return free_cpu_[n.value()]; }
  int64_t free_memory(NodeId n) const { return free_mem_[n.value()]; }
  // By global GPU slot (Cluster::gpus() index).
  int32_t gpu_free_milli(uint32_t slot) const { return gpu_free_milli_[slot]; }
  int64_t gpu_free_memory(uint32_t slot) const { return gpu_free_mem_[slot]; }
  // Whether the GPU can take work: healthy, on a schedulable node.
  bool gpu_usable(uint32_t slot) const { return gpu_usable_[slot]; }

  // Nodes that are schedulable and have exactly k fully free usable GPUs of model m.
  const NodeSet& nodes_with_free(GpuModelId m, int k) const {
    return buckets_[m.value()][static_cast<size_t>(k)];
  }
  // Schedulable nodes with a usable GPU of model m that is partly used (0 < free < 1000).
  const NodeSet& nodes_with_partial(GpuModelId m) const { return partial_[m.value()]; }
  // All schedulable nodes.
  const NodeSet& schedulable_nodes() const { return schedulable_; }
  // Fully free usable GPUs of model m on node n.
  int full_free_gpus(NodeId n, GpuModelId m) const;
  // Largest k with a non-empty nodes_with_free(m, k) set; -1 when no node has model m.
  int max_free_bucket(GpuModelId m) const;
  // The GPU tasks on node n by kind, as (kind, count) pairs with count > 0 in the order the kinds
  // first arrived: kind 0 is a share of one GPU, kind k >= 1 is k whole GPUs. CPU-only tasks are
  // not counted. (For scores that group like tasks together, such as gpuclustering.)
  const std::vector<std::pair<int16_t, int32_t>>& gpu_task_kinds(NodeId n) const {
    return task_kinds_[n.value()];
  }

  // Applies (or removes) a task's allocation to its node.
  void Allocate(const TaskPlacement& t);
  void Release(const TaskPlacement& t);
  // Applies (or lifts) a reservation's hold on capacity: like Allocate/Release, but it is neither
  // logged for a Txn nor counted as freed capacity (the hold is lifted only around one placement
  // and put back right after). Must not be called while a Txn is open.
  void Hold(const TaskPlacement& t);
  void Unhold(const TaskPlacement& t);
  // Charges (or refunds) a job's quota at its leaf queue.
  void ChargeQuota(QueueId leaf, const QuotaVec& r);
  void RefundQuota(QueueId leaf, const QuotaVec& r);
  void SetLendGraceLimit(QueueId n, DurationMs limit_ms) { quota_.SetLendGraceLimit(n, limit_ms); }

  // A change counter: bumped by every mutation (and by rollbacks).
  uint64_t version() const { return version_; }
  // Bumped only when capacity is freed (Release, rollback of an Allocate, refund).
  uint64_t release_version() const { return release_version_; }

  // Trial scope: every change made while a Txn is open is undone when it is destroyed, unless
  // Commit() was called. Txns nest.
  class Txn {
   public:
    explicit Txn(Snapshot& s)
        : s_(&s), mark_(s.undo_.size()), release_version_(s.release_version_) {
      ++s.open_txns_;
    }
    ~Txn();
    Txn(const Txn&) = delete;
    Txn& operator=(const Txn&) = delete;
    void Commit() { committed_ = true; }

   private:
    Snapshot* s_;
    size_t mark_;
    uint64_t release_version_;  // restored on rollback: the state is back to what it was then
    bool committed_ = false;
  };

 private:
  struct Undo {
    enum class Kind : uint8_t { kAllocate, kRelease, kCharge, kRefund };
    Kind kind;
    QueueId leaf;
    QuotaVec quota;
    TaskPlacement task;
  };
  void RollbackTo(size_t mark);
  void ApplyTask(const TaskPlacement& t, int sign);
  void Reindex(NodeId n);
  void Unindex(NodeId n);

  const Cluster* cluster_;
  QuotaState quota_;
  std::vector<int64_t> free_cpu_;
  std::vector<int64_t> free_mem_;
  std::vector<int32_t> gpu_free_milli_;
  std::vector<int64_t> gpu_free_mem_;
  std::vector<bool> gpu_usable_;
  // buckets_[model][k], partial_[model]
  std::vector<std::vector<NodeSet>> buckets_;
  std::vector<NodeSet> partial_;
  NodeSet schedulable_;
  // Per node: the models it has (most nodes have one), and its current bucket per model.
  std::vector<std::vector<GpuModelId>> node_models_;
  std::vector<std::vector<int16_t>> node_bucket_;
  std::vector<std::vector<std::pair<int16_t, int32_t>>> task_kinds_;
  std::vector<Undo> undo_;
  int open_txns_ = 0;
  uint64_t version_ = 0;
  uint64_t release_version_ = 0;
};

}  // namespace arbiter::core
