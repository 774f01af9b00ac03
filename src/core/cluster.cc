#include "core/cluster.h"

#include <fmt/format.h>

#include <algorithm>

namespace arbiter::core {

uint32_t StringPool::Intern(std::string_view s) {
  auto it = ids_.find(std::string(s));
  if (it != ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  ids_.emplace(std::string(s), id);
  return id;
}

uint32_t StringPool::Find(std::string_view s) const {
  auto it = ids_.find(std::string(s));
  return it == ids_.end() ? Constraints::kUnknown : it->second;
}

uint32_t Cluster::FindImage(std::string_view name) const {
  auto it = image_ids_.find(std::string(name));
  return it == image_ids_.end() ? kNoImage : it->second;
}

int64_t Cluster::ImageSizeOn(NodeId n, uint32_t image) const {
  const auto& images = nodes_[n.value()].images;
  auto it = std::lower_bound(images.begin(), images.end(), std::pair<uint32_t, int64_t>{image, -1});
  return it != images.end() && it->first == image ? it->second : -1;
}

Result<Cluster> Cluster::Build(std::vector<GpuModel> models, const std::vector<Node>& nodes) {
  Cluster c;
  if (models.size() > static_cast<size_t>(kMaxGpuModels)) {
    return InvalidArgument("gpu_models", fmt::format("at most {} GPU models are supported, got {}",
                                                     kMaxGpuModels, models.size()));
  }
  for (size_t i = 0; i < models.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (models[j].name == models[i].name) {
        return InvalidArgument(fmt::format("gpu_models[{}].name", i),
                               fmt::format("duplicate GPU model '{}'", models[i].name));
      }
    }
  }
  c.models_ = std::move(models);
  c.strings_.Intern("");  // id 0: unknown / empty
  c.model_extents_.resize(c.models_.size());
  std::vector<std::map<uint16_t, int32_t>> counts(c.models_.size());
  std::vector<uint16_t> on_node(c.models_.size());
  c.nodes_.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const std::string field = fmt::format("nodes[{}]", i);
    ARBITER_RETURN_IF_ERROR(ValidateNode(n, field));
    if (!c.node_by_name_.emplace(n.name, static_cast<uint32_t>(i)).second) {
      return InvalidArgument(field + ".name", fmt::format("duplicate node name '{}'", n.name));
    }
    if (n.gpus.size() > 0xffff) return InvalidArgument(field + ".gpus", "too many GPUs");
    NodeInfo info;
    info.name = n.name;
    info.state = n.state;
    info.cpu_milli = n.cpu_milli;
    info.memory_mib = n.memory_mib;
    info.gpu_begin = static_cast<uint32_t>(c.gpus_.size());
    info.gpu_count = static_cast<uint16_t>(n.gpus.size());
    info.rack = c.strings_.Intern(n.rack);
    info.block = c.strings_.Intern(n.block);
    for (const auto& [k, v] : n.labels) {
      info.labels.emplace_back(c.strings_.Intern(k), c.strings_.Intern(v));
    }
    std::sort(info.labels.begin(), info.labels.end());
    for (const Taint& t : n.taints) {
      info.taints.emplace_back(c.strings_.Intern(t.key), c.strings_.Intern(t.value));
    }
    for (const NodeImage& img : n.images) {
      const auto [it, added] =
          c.image_ids_.emplace(img.name, static_cast<uint32_t>(c.image_nodes_.size()));
      if (added) c.image_nodes_.push_back(0);
      const bool seen = std::any_of(info.images.begin(), info.images.end(),
                                    [&](const auto& p) { return p.first == it->second; });
      if (seen) continue;
      ++c.image_nodes_[it->second];
      info.images.emplace_back(it->second, std::max<int64_t>(0, img.size_bytes));
    }
    std::sort(info.images.begin(), info.images.end());
    std::fill(on_node.begin(), on_node.end(), 0);
    for (size_t g = 0; g < n.gpus.size(); ++g) {
      const Gpu& gpu = n.gpus[g];
      GpuSlotInfo slot;
      slot.model = c.FindModel(gpu.model);
      if (slot.model == kNoModel) {
        return InvalidArgument(fmt::format("{}.gpus[{}].model", field, g),
                               fmt::format("unknown GPU model '{}'", gpu.model));
      }
      slot.index = gpu.index;
      slot.memory_mib =
          gpu.memory_mib > 0 ? gpu.memory_mib : c.models_[slot.model.value()].memory_mib;
      slot.healthy = gpu.healthy;
      slot.nvlink_domain = gpu.nvlink_domain;
      ++on_node[slot.model.value()];
      ModelExtent& me = c.model_extents_[slot.model.value()];
      ++me.total_gpus;
      me.max_gpu_memory_mib = std::max(me.max_gpu_memory_mib, slot.memory_mib);
      c.gpus_.push_back(slot);
      if (info.schedulable() && slot.healthy) {
        c.capacity_[kDimGpu] += kMilliPerGpu;
        c.capacity_[ModelDim(slot.model)] += kMilliPerGpu;
      }
    }
    if (info.schedulable()) {
      c.capacity_[kDimCpu] += n.cpu_milli;
      c.capacity_[kDimMemory] += n.memory_mib;
    }
    c.capacity_[kDimTasks] = kUnlimited;  // bounded by quota only
    c.max_gpus_per_node_ = std::max<int>(c.max_gpus_per_node_, info.gpu_count);
    c.max_cpu_milli_ = std::max(c.max_cpu_milli_, n.cpu_milli);
    c.extent_.max_memory_mib = std::max(c.extent_.max_memory_mib, n.memory_mib);
    c.extent_.total_cpu_milli += n.cpu_milli;
    c.extent_.total_memory_mib += n.memory_mib;
    for (size_t m = 0; m < on_node.size(); ++m) {
      if (on_node[m] > 0) ++counts[m][on_node[m]];
    }
    c.nodes_.push_back(std::move(info));
  }
  for (size_t m = 0; m < counts.size(); ++m) {
    c.model_extents_[m].nodes_by_count.assign(counts[m].begin(), counts[m].end());
  }
  return c;
}

GpuModelId Cluster::FindModel(std::string_view name) const {
  for (size_t i = 0; i < models_.size(); ++i) {
    if (models_[i].name == name) return GpuModelId(static_cast<uint16_t>(i));
  }
  return kNoModel;
}

bool Cluster::FindNode(std::string_view name, NodeId* out) const {
  auto it = node_by_name_.find(std::string(name));
  if (it == node_by_name_.end()) return false;
  *out = NodeId(it->second);
  return true;
}

Constraints Cluster::MakeConstraints(const std::map<std::string, std::string>& selector,
                                     const std::vector<Toleration>& tolerations) const {
  Constraints c;
  for (const auto& [k, v] : selector) c.selector.emplace_back(strings_.Find(k), strings_.Find(v));
  std::sort(c.selector.begin(), c.selector.end());
  for (const Toleration& t : tolerations) {
    c.tolerations.emplace_back(strings_.Find(t.key),
                               t.value.empty() ? Constraints::kAnyValue : strings_.Find(t.value));
  }
  return c;
}

void Cluster::AddNodeConstraints(const std::vector<std::string>& only,
                                 const std::vector<std::string>& exclude, bool exclusive,
                                 Constraints* c) const {
  auto ids = [this](const std::vector<std::string>& names) {
    std::vector<uint32_t> out;
    for (const std::string& name : names) {
      NodeId n;
      if (FindNode(name, &n)) out.push_back(n.value());
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  };
  c->only_listed = !only.empty();
  c->nodes = ids(only);
  c->excluded = ids(exclude);
  c->exclusive = exclusive;
}

QuotaVec Cluster::PlacedQuota(const std::vector<TaskPlacement>& tasks) const {
  QuotaVec q;
  for (const TaskPlacement& t : tasks) {
    q[kDimCpu] += t.cpu_milli;
    q[kDimMemory] += t.memory_mib;
    q[kDimTasks] += 1;
    const NodeInfo& info = node(t.node);
    for (const GpuShare& g : t.gpus) {
      q[kDimGpu] += g.milli;
      q[ModelDim(gpus_[info.gpu_begin + g.slot].model)] += g.milli;
    }
  }
  return q;
}

QuotaVec Cluster::RunningQuota(const RunningJob& r) const {
  if (r.exclusive) return PlacedQuota(r.tasks);
  return JobQuotaRequest(r.resources, static_cast<int32_t>(r.tasks.size()), r.model);
}

}  // namespace arbiter::core
