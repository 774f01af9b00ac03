// Cluster: the nodes and GPU models compiled into dense, indexed form for the core.
//
// Built once by a driver from model::Node values (and rebuilt when nodes change); immutable after
// Build(), so a cycle and any number of readers may share it. Strings (labels, racks, taints) are
// interned: the core compares integers only.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "core/types.h"
#include "model/gpu_model.h"
#include "model/node.h"

namespace arbiter::core {

// Interns strings to dense ids, for labels, taints, racks and blocks.
class StringPool {
 public:
  uint32_t Intern(std::string_view s);
  // Id of `s`, or Constraints::kUnknown when no node uses it.
  uint32_t Find(std::string_view s) const;
  const std::string& Get(uint32_t id) const { return strings_[id]; }

 private:
  std::unordered_map<std::string, uint32_t> ids_;
  std::vector<std::string> strings_;
};

struct GpuSlotInfo {
  GpuModelId model;
  int32_t index = 0;  // the GPU's index on its node (CUDA_VISIBLE_DEVICES)
  int64_t memory_mib = 0;
  bool healthy = true;
  int32_t nvlink_domain = 0;
};

struct NodeInfo {
  std::string name;
  NodeState state = NodeState::kReady;
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  uint32_t gpu_begin = 0;  // this node's GPUs are Cluster::gpus()[gpu_begin, gpu_begin+gpu_count)
  uint16_t gpu_count = 0;
  uint32_t rack = 0;                                  // interned; 0 = unknown
  uint32_t block = 0;                                 // interned; 0 = unknown
  std::vector<std::pair<uint32_t, uint32_t>> labels;  // sorted (key, value)
  std::vector<std::pair<uint32_t, uint32_t>> taints;  // (key, value)
  // The container images the node holds: (image id, size in bytes, 0: unknown), sorted by id.
  std::vector<std::pair<uint32_t, int64_t>> images;
  bool schedulable() const { return state == NodeState::kReady; }
};

class Cluster {
 public:
  // Compiles models and nodes. Fails on unknown GPU models, duplicate names, more than
  // kMaxGpuModels models, or invalid nodes; errors name the field ("nodes[3].gpus[1].model").
  static Result<Cluster> Build(std::vector<GpuModel> models, const std::vector<Node>& nodes);

  const std::vector<GpuModel>& models() const { return models_; }
  const std::vector<NodeInfo>& nodes() const { return nodes_; }
  const std::vector<GpuSlotInfo>& gpus() const { return gpus_; }
  const NodeInfo& node(NodeId id) const { return nodes_[id.value()]; }
  size_t num_nodes() const { return nodes_.size(); }
  int num_dims() const { return kFirstModelDim + static_cast<int>(models_.size()); }

  // Model id by name, or kNoModel.
  GpuModelId FindModel(std::string_view name) const;
  // Node id by name; false when absent.
  bool FindNode(std::string_view name, NodeId* out) const;

  // Capacity of schedulable nodes (ready, healthy GPUs), per quota dimension.
  const QuotaVec& capacity() const { return capacity_; }
  // Largest number of GPUs on any node.
  int max_gpus_per_node() const { return max_gpus_per_node_; }
  // Largest CPU capacity of any node, in milli-cores.
  int64_t max_cpu_milli() const { return max_cpu_milli_; }

  // What no wait can exceed: the nodes' sizes and totals over every node whatever its state or
  // its GPUs' health (a node that is down or cordoned may come back; one that is removed does
  // not). The cycle checks pending jobs against these (admissible.h) with a few comparisons.
  struct Extent {
    int64_t max_memory_mib = 0;  // largest RAM of one node
    int64_t total_cpu_milli = 0;
    int64_t total_memory_mib = 0;
  };
  // Per GPU model: how many nodes hold how many of its GPUs, and its largest GPU memory.
  struct ModelExtent {
    std::vector<std::pair<uint16_t, int32_t>> nodes_by_count;  // (GPUs on a node, nodes), by count
    int64_t total_gpus = 0;
    int64_t max_gpu_memory_mib = 0;
  };
  const Extent& extent() const { return extent_; }
  const ModelExtent& model_extent(GpuModelId m) const { return model_extents_[m.value()]; }

  const StringPool& strings() const { return strings_; }

  // Container images on the nodes (the image-locality score): an image's id by its name as the
  // nodes list it (kNoImage when no node holds it), its size on node n (-1: not there, 0: there,
  // size unknown), and how many nodes hold it.
  uint32_t FindImage(std::string_view name) const;
  int64_t ImageSizeOn(NodeId n, uint32_t image) const;
  uint32_t image_nodes(uint32_t image) const { return image_nodes_[image]; }

  // Interns a node selector and tolerations into Constraints using this cluster's strings. Names no
  // node uses map to Constraints::kUnknown (a selector on them matches nothing).
  Constraints MakeConstraints(const std::map<std::string, std::string>& selector,
                              const std::vector<Toleration>& tolerations) const;
  // Adds a job's node list (`only`, Slurm's --nodelist; empty: any node), the nodes it excludes
  // and whether it takes its nodes whole. Names the cluster does not have are left out.
  void AddNodeConstraints(const std::vector<std::string>& only,
                          const std::vector<std::string>& exclude, bool exclusive,
                          Constraints* c) const;

  // What tasks placed this way hold, as quota: CPU, memory, tasks, and each GPU's milli under
  // `gpu` and its own model's dimension.
  QuotaVec PlacedQuota(const std::vector<TaskPlacement>& tasks) const;
  // The quota a running job charges: its request (JobQuotaRequest), or, for a job that took its
  // nodes whole (exclusive), what its placement holds.
  QuotaVec RunningQuota(const RunningJob& r) const;

 private:
  std::vector<GpuModel> models_;
  std::vector<NodeInfo> nodes_;
  std::vector<GpuSlotInfo> gpus_;
  std::unordered_map<std::string, uint32_t> node_by_name_;
  QuotaVec capacity_;
  int max_gpus_per_node_ = 0;
  int64_t max_cpu_milli_ = 0;
  Extent extent_;
  std::vector<ModelExtent> model_extents_;  // by model id
  StringPool strings_;
  std::unordered_map<std::string, uint32_t> image_ids_;
  std::vector<uint32_t> image_nodes_;  // by image id
};

}  // namespace arbiter::core
