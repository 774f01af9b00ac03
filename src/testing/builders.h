// Fluent builders for tests of the scheduling core: clusters, queue trees, pending and running
// jobs, and a World that holds them together for RunCycle.
//
//   auto cluster = ClusterBuilder()
//                      .Node("n1").Gpus(4, "A100").Domain(0).Gpus(4, "A100").Domain(1).Rack("r1")
//                      .Node("n2").Gpus(8, "H100").Label("pool", "infer").Taint("dedicated",
//                      "infer") .Build();
//   auto tree = TreeBuilder()
//                   .Tenant("vision").Guaranteed("gpu", 16000)
//                   .Queue("vision-train", "vision").Guaranteed("gpu", 8000).Max("gpu", 12000)
//                   .Build(cluster.models());
//   PendingJob j = JobBuilder(1).Queue(q).Gpus(8).Model(a100).Build();
//
// Each call after Node()/Tenant()/Queue() describes the node or queue added last. Build() crashes
// (ARBITER_CHECK) on a configuration the code under test rejects; TryBuild() returns the Result.
//
// Header-only; test code only.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/check.h"
#include "common/result.h"
#include "core/cluster.h"
#include "core/cycle/cycle.h"
#include "core/placement/framework.h"
#include "core/quota/quota_tree.h"
#include "core/types.h"
#include "model/gpu_model.h"
#include "model/node.h"
#include "model/queue.h"
#include "testing/printers.h"

namespace arbiter::testing {

inline constexpr int64_t kMibPerGib = 1024;
inline constexpr int64_t kDefaultGpuMemoryMib = 80 * kMibPerGib;

// --- Cluster ---------------------------------------------------------------------------------

class ClusterBuilder {
 public:
  // Declares a GPU model; Gpus() declares models it does not know with 80 GiB of memory.
  ClusterBuilder& Model(const std::string& name, int64_t memory_mib = kDefaultGpuMemoryMib) {
    for (GpuModel& m : models_) {
      if (m.name == name) {
        m.memory_mib = memory_mib;
        return *this;
      }
    }
    models_.push_back({name, memory_mib, 0});
    return *this;
  }

  // Starts a node: 64 cores, 512 GiB RAM, no GPUs, ready.
  ClusterBuilder& Node(const std::string& name) {
    arbiter::Node n;
    n.name = name;
    n.cpu_milli = 64 * kMilliPerCpu;
    n.memory_mib = 512 * kMibPerGib;
    nodes_.push_back(std::move(n));
    batch_begin_ = 0;
    return *this;
  }

  // Adds `count` GPUs of `model` to the node, in NVLink domain 0, with the model's memory.
  ClusterBuilder& Gpus(int count, const std::string& model) {
    int64_t memory = 0;
    for (const GpuModel& m : models_) {
      if (m.name == model) memory = m.memory_mib;
    }
    if (memory == 0) {
      Model(model);
      memory = kDefaultGpuMemoryMib;
    }
    arbiter::Node& n = Current();
    batch_begin_ = n.gpus.size();
    for (int i = 0; i < count; ++i) {
      n.gpus.push_back({static_cast<int32_t>(n.gpus.size()), model, memory, true, 0});
    }
    return *this;
  }
  // NVLink domain of the GPUs added by the last Gpus() call.
  ClusterBuilder& Domain(int32_t domain) {
    for (size_t i = batch_begin_; i < Current().gpus.size(); ++i) {
      Current().gpus[i].nvlink_domain = domain;
    }
    return *this;
  }
  // Memory of each GPU added by the last Gpus() call.
  ClusterBuilder& GpuMemory(int64_t mib) {
    for (size_t i = batch_begin_; i < Current().gpus.size(); ++i)
      Current().gpus[i].memory_mib = mib;
    return *this;
  }
  // Marks the node's GPU with this index unhealthy.
  ClusterBuilder& Unhealthy(int32_t gpu_index) {
    for (Gpu& g : Current().gpus) {
      if (g.index == gpu_index) g.healthy = false;
    }
    return *this;
  }
  ClusterBuilder& Cpus(int64_t cores) {
    Current().cpu_milli = cores * kMilliPerCpu;
    return *this;
  }
  ClusterBuilder& MemoryGib(int64_t gib) {
    Current().memory_mib = gib * kMibPerGib;
    return *this;
  }
  ClusterBuilder& Label(const std::string& key, const std::string& value) {
    Current().labels[key] = value;
    return *this;
  }
  ClusterBuilder& Taint(const std::string& key, const std::string& value = "") {
    Current().taints.push_back({key, value});
    return *this;
  }
  ClusterBuilder& State(NodeState state) {
    Current().state = state;
    return *this;
  }
  ClusterBuilder& Cordoned() { return State(NodeState::kCordoned); }
  ClusterBuilder& Rack(const std::string& rack) {
    Current().rack = rack;
    return *this;
  }
  ClusterBuilder& Block(const std::string& block) {
    Current().block = block;
    return *this;
  }

  const std::vector<GpuModel>& models() const { return models_; }
  const std::vector<arbiter::Node>& nodes() const { return nodes_; }

  Result<core::Cluster> TryBuild() const { return core::Cluster::Build(models_, nodes_); }
  core::Cluster Build() const {
    Result<core::Cluster> c = TryBuild();
    ARBITER_CHECK(c.ok(), "ClusterBuilder: " + c.status().ToString());
    return std::move(c).value();
  }

 private:
  arbiter::Node& Current() {
    ARBITER_CHECK(!nodes_.empty(), "ClusterBuilder: call Node() first");
    return nodes_.back();
  }

  std::vector<GpuModel> models_;
  std::vector<arbiter::Node> nodes_;
  size_t batch_begin_ = 0;
};

// --- Queue tree ------------------------------------------------------------------------------

class TreeBuilder {
 public:
  TreeBuilder& Tenant(const std::string& name) {
    QueueSpec s;
    s.name = name;
    s.is_tenant = true;
    specs_.push_back(std::move(s));
    return *this;
  }
  TreeBuilder& Queue(const std::string& name, const std::string& parent) {
    QueueSpec s;
    s.name = name;
    s.parent = parent;
    specs_.push_back(std::move(s));
    return *this;
  }
  // Limits on a resource key ("gpu", "gpu:A100", "cpu", "memory"), in the key's unit (milli-GPU,
  // milli-CPU, MiB).
  TreeBuilder& Guaranteed(const std::string& key, int64_t v) {
    Current().quota[key].guaranteed = v;
    return *this;
  }
  TreeBuilder& Max(const std::string& key, int64_t v) {
    Current().quota[key].max = v;
    return *this;
  }
  TreeBuilder& LendingLimit(const std::string& key, int64_t v) {
    Current().quota[key].lending_limit = v;
    return *this;
  }
  TreeBuilder& Weight(int64_t weight_milli) {
    Current().weight_milli = weight_milli;
    return *this;
  }
  TreeBuilder& HalfLife(int64_t seconds) {
    Current().decay.half_life_seconds = seconds;
    return *this;
  }
  TreeBuilder& AllowedTypes(std::vector<std::string> types) {
    Current().allowed_types = std::move(types);
    return *this;
  }
  TreeBuilder& DefaultWalltime(int64_t seconds) {
    Current().default_walltime_seconds = seconds;
    return *this;
  }
  // The spec added last, for edits no method covers.
  QueueSpec& Last() { return Current(); }

  const std::vector<QueueSpec>& specs() const { return specs_; }
  Result<core::QuotaTree> TryBuild(const std::vector<GpuModel>& models) const {
    return core::QuotaTree::Build(specs_, models);
  }
  core::QuotaTree Build(const std::vector<GpuModel>& models) const {
    Result<core::QuotaTree> t = TryBuild(models);
    ARBITER_CHECK(t.ok(), "TreeBuilder: " + t.status().ToString());
    return std::move(t).value();
  }

 private:
  QueueSpec& Current() {
    ARBITER_CHECK(!specs_.empty(), "TreeBuilder: call Tenant() or Queue() first");
    return specs_.back();
  }
  std::vector<QueueSpec> specs_;
};

inline QueueId QueueNamed(const core::QuotaTree& tree, std::string_view name) {
  QueueId id;
  ARBITER_CHECK(tree.Find(name, &id), "no queue named " + std::string(name));
  return id;
}

inline GpuModelId ModelNamed(const core::Cluster& cluster, std::string_view name) {
  const GpuModelId m = cluster.FindModel(name);
  ARBITER_CHECK(m != core::kNoModel, "no GPU model named " + std::string(name));
  return m;
}

inline NodeId NodeNamed(const core::Cluster& cluster, std::string_view name) {
  NodeId id;
  ARBITER_CHECK(cluster.FindNode(name, &id), "no node named " + std::string(name));
  return id;
}

// --- Jobs ------------------------------------------------------------------------------------

class JobBuilder {
 public:
  explicit JobBuilder(uint64_t id) {
    job_.id = JobId(id);
    job_.submit_time = static_cast<TimeMs>(id);
  }
  JobBuilder& Queue(QueueId q) {
    job_.queue = q;
    return *this;
  }
  // Whole GPUs per task.
  JobBuilder& Gpus(int32_t n) {
    job_.resources.gpus = n;
    job_.resources.gpu_milli = static_cast<int32_t>(kMilliPerGpu);
    return *this;
  }
  // A share of one GPU per task (milli-GPU), optionally with GPU memory.
  JobBuilder& GpuShare(int32_t milli, int64_t memory_mib = 0) {
    job_.resources.gpus = 1;
    job_.resources.gpu_milli = milli;
    job_.resources.gpu_memory_mib = memory_mib;
    return *this;
  }
  JobBuilder& GpuMemory(int64_t mib) {
    job_.resources.gpu_memory_mib = mib;
    return *this;
  }
  JobBuilder& CpuMilli(int64_t milli) {
    job_.resources.cpu_milli = milli;
    return *this;
  }
  JobBuilder& MemoryMib(int64_t mib) {
    job_.resources.memory_mib = mib;
    return *this;
  }
  JobBuilder& Tasks(int32_t n) {
    job_.tasks = n;
    return *this;
  }
  JobBuilder& DistinctNodes(bool v = true) {
    job_.distinct_nodes = v;
    return *this;
  }
  // Allowed GPU models in order of preference.
  JobBuilder& Models(std::vector<GpuModelId> models) {
    job_.models = std::move(models);
    return *this;
  }
  JobBuilder& Model(GpuModelId m) { return Models({m}); }
  JobBuilder& Priority(int32_t p) {
    job_.priority = p;
    return *this;
  }
  JobBuilder& SubmitTime(TimeMs t) {
    job_.submit_time = t;
    return *this;
  }
  JobBuilder& Type(JobType t) {
    job_.type = t;
    return *this;
  }
  JobBuilder& Suspended(bool v = true) {
    job_.suspended = v;
    return *this;
  }
  JobBuilder& NotBefore(TimeMs t) {
    job_.not_before = t;
    return *this;
  }
  JobBuilder& Constraints(uint32_t index) {
    job_.constraints = index;
    return *this;
  }
  JobBuilder& Walltime(DurationMs d) {
    job_.walltime = d;
    return *this;
  }
  // A spread group (a service's replicas); `distinct`: never beside one of the group.
  JobBuilder& Spread(uint32_t group, bool distinct = false) {
    job_.spread = group;
    job_.spread_distinct = distinct;
    return *this;
  }
  core::PendingJob Build() const { return job_; }

 private:
  core::PendingJob job_;
};

// A running job placed by hand: `tasks` on the given nodes, each taking the listed GPU slots whole
// (or, for a fractional job, `resources.gpu_milli` of the one slot).
inline core::RunningJob MakeRunning(
    uint64_t id, QueueId queue, GpuModelId model, const TaskResources& per_task,
    const std::vector<std::pair<NodeId, std::vector<uint16_t>>>& tasks) {
  core::RunningJob r;
  r.id = JobId(id);
  r.queue = queue;
  r.model = model;
  r.resources = per_task;
  for (const auto& [node, slots] : tasks) {
    core::TaskPlacement t;
    t.node = node;
    t.cpu_milli = per_task.cpu_milli;
    t.memory_mib = per_task.memory_mib;
    for (uint16_t s : slots) {
      t.gpus.push_back({s, static_cast<int16_t>(per_task.fractional() ? per_task.gpu_milli : 1000),
                        per_task.gpu_memory_mib});
    }
    r.tasks.push_back(std::move(t));
  }
  return r;
}

inline TaskResources WholeGpus(int32_t n, int64_t cpu_milli = 0, int64_t memory_mib = 0) {
  TaskResources r;
  r.gpus = n;
  r.cpu_milli = cpu_milli;
  r.memory_mib = memory_mib;
  return r;
}

inline TaskResources GpuFraction(int32_t milli, int64_t gpu_memory_mib = 0) {
  TaskResources r;
  r.gpus = 1;
  r.gpu_milli = milli;
  r.gpu_memory_mib = gpu_memory_mib;
  return r;
}

// --- Profiles and a whole world --------------------------------------------------------------

inline core::Profile NamedProfile(std::string_view name) {
  Result<core::ProfileSpec> spec = core::Profile::Named(name);
  ARBITER_CHECK(spec.ok(), spec.status().ToString());
  Result<core::Profile> p = core::Profile::Build(*spec);
  ARBITER_CHECK(p.ok(), p.status().ToString());
  return std::move(p).value();
}

// A cluster, a queue tree, running and pending jobs and interned constraints: everything RunCycle
// reads. Not movable once Input() has been taken (the input points into it).
struct World {
  World(const ClusterBuilder& c, const TreeBuilder& t)
      : cluster(c.Build()), tree(t.Build(cluster.models())) {}

  QueueId Queue(std::string_view name) const { return QueueNamed(tree, name); }
  GpuModelId Model(std::string_view name) const { return ModelNamed(cluster, name); }
  arbiter::NodeId Node(std::string_view name) const { return NodeNamed(cluster, name); }

  // Interns a selector and tolerations; returns the index for JobBuilder::Constraints.
  uint32_t AddConstraints(const std::map<std::string, std::string>& selector,
                          const std::vector<Toleration>& tolerations = {}) {
    constraints.push_back(cluster.MakeConstraints(selector, tolerations));
    return static_cast<uint32_t>(constraints.size() - 1);
  }

  // Interns a node list (`only`, empty: any), excluded nodes and exclusive use; the index for
  // JobBuilder::Constraints.
  uint32_t AddNodeConstraints(const std::vector<std::string>& only,
                              const std::vector<std::string>& exclude = {},
                              bool exclusive = false) {
    core::Constraints c;
    cluster.AddNodeConstraints(only, exclude, exclusive, &c);
    constraints.push_back(std::move(c));
    return static_cast<uint32_t>(constraints.size() - 1);
  }

  void Add(const JobBuilder& b) { pending.push_back(b.Build()); }

  core::CycleInput Input() const {
    core::CycleInput in;
    in.cluster = &cluster;
    in.tree = &tree;
    in.running = &running;
    in.pending = &pending;
    in.constraints = &constraints;
    in.usage_history = history.empty() ? nullptr : &history;
    in.now = now;
    return in;
  }
  core::CycleResult Run(const core::Profile& profile) const {
    return core::RunCycle(Input(), profile);
  }

  core::Cluster cluster;
  core::QuotaTree tree;
  std::vector<core::RunningJob> running;
  std::vector<core::PendingJob> pending;
  std::vector<core::Constraints> constraints{1};  // [0]: no constraints
  std::vector<core::QuotaVec> history;            // by QueueId; empty: none
  TimeMs now = 0;
};

}  // namespace arbiter::testing
