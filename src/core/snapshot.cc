#include "core/snapshot.h"

#include <algorithm>

#include "common/check.h"

namespace arbiter::core {

Snapshot::Snapshot(const Cluster& cluster, const QuotaTree& tree)
    : cluster_(&cluster),
      quota_(tree, cluster.capacity()),
      free_cpu_(cluster.num_nodes()),
      free_mem_(cluster.num_nodes()),
      gpu_free_milli_(cluster.gpus().size(), static_cast<int32_t>(kMilliPerGpu)),
      gpu_free_mem_(cluster.gpus().size()),
      gpu_usable_(cluster.gpus().size()),
      schedulable_(cluster.num_nodes()),
      node_models_(cluster.num_nodes()),
      node_bucket_(cluster.num_nodes()),
      task_kinds_(cluster.num_nodes()) {
  const size_t nm = cluster.models().size();
  const size_t max_k = static_cast<size_t>(cluster.max_gpus_per_node()) + 1;
  buckets_.assign(nm, std::vector<NodeSet>(max_k, NodeSet(cluster.num_nodes())));
  partial_.assign(nm, NodeSet(cluster.num_nodes()));
  for (size_t i = 0; i < cluster.num_nodes(); ++i) {
    const NodeInfo& n = cluster.nodes()[i];
    free_cpu_[i] = n.cpu_milli;
    free_mem_[i] = n.memory_mib;
    for (uint32_t s = n.gpu_begin; s < n.gpu_begin + n.gpu_count; ++s) {
      const GpuSlotInfo& g = cluster.gpus()[s];
      gpu_free_mem_[s] = g.memory_mib;
      gpu_usable_[s] = g.healthy && n.schedulable();
      auto& models = node_models_[i];
      if (std::find(models.begin(), models.end(), g.model) == models.end())
        models.push_back(g.model);
    }
    node_bucket_[i].assign(node_models_[i].size(), -1);
    if (n.schedulable()) schedulable_.Insert(static_cast<uint32_t>(i));
    Reindex(NodeId(static_cast<uint32_t>(i)));
  }
}

int Snapshot::full_free_gpus(NodeId n, GpuModelId m) const {
  const auto& models = node_models_[n.value()];
  for (size_t i = 0; i < models.size(); ++i) {
    if (models[i] == m) return std::max<int>(0, node_bucket_[n.value()][i]);
  }
  return 0;
}

int Snapshot::max_free_bucket(GpuModelId m) const {
  const auto& b = buckets_[m.value()];
  for (int k = static_cast<int>(b.size()) - 1; k >= 0; --k) {
    if (!b[static_cast<size_t>(k)].empty()) return k;
  }
  return -1;
}

void Snapshot::Unindex(NodeId n) {
  const auto& models = node_models_[n.value()];
  for (size_t i = 0; i < models.size(); ++i) {
    const int16_t k = node_bucket_[n.value()][i];
    if (k >= 0) buckets_[models[i].value()][static_cast<size_t>(k)].Erase(n.value());
    partial_[models[i].value()].Erase(n.value());
  }
}

void Snapshot::Reindex(NodeId n) {
  Unindex(n);
  const NodeInfo& info = cluster_->node(n);
  if (!info.schedulable()) return;
  const auto& models = node_models_[n.value()];
  for (size_t i = 0; i < models.size(); ++i) {
    int16_t full = 0;
    bool partial = false;
    for (uint32_t s = info.gpu_begin; s < info.gpu_begin + info.gpu_count; ++s) {
      if (cluster_->gpus()[s].model != models[i] || !gpu_usable_[s]) continue;
      if (gpu_free_milli_[s] == kMilliPerGpu) {
        ++full;
      } else if (gpu_free_milli_[s] > 0) {
        partial = true;
      }
    }
    node_bucket_[n.value()][i] = full;
    buckets_[models[i].value()][static_cast<size_t>(full)].Insert(n.value());
    if (partial) partial_[models[i].value()].Insert(n.value());
  }
}

void Snapshot::ApplyTask(const TaskPlacement& t, int sign) {
  const uint32_t n = t.node.value();
  const NodeInfo& info = cluster_->node(t.node);
  free_cpu_[n] -= sign * t.cpu_milli;
  free_mem_[n] -= sign * t.memory_mib;
  for (const GpuShare& g : t.gpus) {
    ARBITER_CHECK(g.slot < info.gpu_count, "GPU slot out of range");
    const uint32_t s = info.gpu_begin + g.slot;
    gpu_free_milli_[s] -= sign * g.milli;
    gpu_free_mem_[s] -= sign * g.memory_mib;
  }
  if (!t.gpus.empty()) {
    // kind 0: a share of one GPU; k: k whole GPUs.
    const auto kind = static_cast<int16_t>(
        t.gpus.size() == 1 && t.gpus[0].milli < kMilliPerGpu ? 0 : t.gpus.size());
    auto& kinds = task_kinds_[n];
    auto it =
        std::find_if(kinds.begin(), kinds.end(), [&](const auto& k) { return k.first == kind; });
    if (it == kinds.end()) it = kinds.insert(kinds.end(), std::pair<int16_t, int32_t>{kind, 0});
    it->second += sign;
    ARBITER_CHECK(it->second >= 0, "GPU task kind count below zero");
    if (it->second == 0) kinds.erase(it);
    Reindex(t.node);
  }
  ++version_;
}

void Snapshot::Allocate(const TaskPlacement& t) {
  ApplyTask(t, +1);
  if (open_txns_ > 0) undo_.push_back({Undo::Kind::kAllocate, QueueId(), QuotaVec(), t});
}

void Snapshot::Release(const TaskPlacement& t) {
  ApplyTask(t, -1);
  ++release_version_;
  if (open_txns_ > 0) undo_.push_back({Undo::Kind::kRelease, QueueId(), QuotaVec(), t});
}

void Snapshot::Hold(const TaskPlacement& t) {
  ARBITER_CHECK(open_txns_ == 0, "Hold inside a Txn");
  ApplyTask(t, +1);
}

void Snapshot::Unhold(const TaskPlacement& t) {
  ARBITER_CHECK(open_txns_ == 0, "Unhold inside a Txn");
  ApplyTask(t, -1);
}

void Snapshot::ChargeQuota(QueueId leaf, const QuotaVec& r) {
  quota_.Add(leaf, r);
  ++version_;
  if (open_txns_ > 0) undo_.push_back({Undo::Kind::kCharge, leaf, r, TaskPlacement()});
}

void Snapshot::RefundQuota(QueueId leaf, const QuotaVec& r) {
  quota_.Remove(leaf, r);
  ++version_;
  ++release_version_;
  if (open_txns_ > 0) undo_.push_back({Undo::Kind::kRefund, leaf, r, TaskPlacement()});
}

void Snapshot::RollbackTo(size_t mark) {
  while (undo_.size() > mark) {
    Undo& u = undo_.back();
    switch (u.kind) {
      case Undo::Kind::kAllocate:
        // Back to the state at the Txn's start: nothing is freer than it was then, so
        // release_version_ stays (see the failure cache in the cycle).
        ApplyTask(u.task, -1);
        break;
      case Undo::Kind::kRelease:
        ApplyTask(u.task, +1);
        break;
      case Undo::Kind::kCharge:
        quota_.Remove(u.leaf, u.quota);
        break;
      case Undo::Kind::kRefund:
        quota_.Add(u.leaf, u.quota);
        break;
    }
    ++version_;
    undo_.pop_back();
  }
}

Snapshot::Txn::~Txn() {
  --s_->open_txns_;
  if (!committed_) {
    s_->RollbackTo(mark_);
    s_->release_version_ = release_version_;
  } else if (s_->open_txns_ == 0) {
    s_->undo_.clear();  // nothing can roll back past an outermost commit
  }
}

}  // namespace arbiter::core
