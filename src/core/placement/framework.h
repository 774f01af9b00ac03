// The placement framework: named extension points in the spirit of the Kubernetes scheduler
// framework. For each task the runtime
//   1. enumerates candidate nodes from the snapshot's index (nodes with enough free GPUs of the
//      task's model, in the order the profile's leading score prefers),
//   2. runs every Filter plugin on a candidate (first failure wins; the code is counted for the
//      verdict),
//   3. picks the GPUs the task would use on each feasible node (the profile's GPU selector),
//   4. sums weight x Score over the Score plugins (each 0..kMaxScore), highest wins, ties by node
//   id,
//   5. reserves the winner on the snapshot (Snapshot::Allocate); a gang's reservations are undone
//      together by the caller's Snapshot::Txn when any task fails.
// "Does not fit" is an answer (PlacementFailure), never an error.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "core/snapshot.h"
#include "core/types.h"

namespace arbiter::core {

// Scores are fixed point, 0..kMaxScore, fine enough that fgd's small differences survive.
inline constexpr int64_t kMaxScore = 1000000;

enum class FilterCode : uint8_t {
  kOk,
  kNodeNotReady,
  kWrongModel,
  kInsufficientGpu,
  kInsufficientGpuMemory,
  kInsufficientCpu,
  kInsufficientMemory,
  kSelectorMismatch,
  kUntoleratedTaint,
  kGangNodeTaken,
  kNodeNotListed,  // not in the job's node list (--nodelist)
  kNodeExcluded,   // in the job's excluded nodes (--exclude)
  kNodeShared,     // an exclusive task needs a node nothing else uses
  kCount,
};
std::string_view FilterCodeName(FilterCode c);

// Where the jobs of one spread group run (PendingJob::spread): tasks per node and per rack.
struct SpreadCounts {
  std::map<uint32_t, int32_t> nodes;  // node id -> tasks of the group there
  std::map<uint32_t, int32_t> racks;  // rack id (not 0) -> tasks of the group there
  void Add(NodeId n, uint32_t rack);
  int32_t on_node(NodeId n) const;
  int32_t on_rack(uint32_t rack) const;
};

struct TaskRequest {
  const TaskResources* resources = nullptr;
  GpuModelId model = kNoModel;  // kNoModel for CPU-only tasks
  const Constraints* constraints = nullptr;
  JobType type = JobType::kTraining;
  // Its spread group's tasks (null: none). Placement then prefers, before any score, the nodes
  // with fewest of them, then the racks with fewest (lexicographically: the profile's scores only
  // break ties), and visits every feasible node to find them. With `spread_distinct`, a node that
  // has one is not feasible.
  const SpreadCounts* spread = nullptr;
  bool spread_distinct = false;
  uint32_t image = kNoImage;  // its container image (Cluster::FindImage)
};

// What the tasks of the gang placed so far occupy (for distinct nodes and topology).
struct GangState {
  bool distinct_nodes = false;
  int tasks_total = 1;
  std::vector<NodeId> nodes;
  std::vector<uint32_t> racks;
  std::vector<uint32_t> blocks;
  bool UsesNode(NodeId n) const;
  bool UsesRack(uint32_t r) const;
  bool UsesBlock(uint32_t b) const;
};

// The distribution of "typical tasks" that fragmentation is measured against (FGD).
struct TaskClass {
  int64_t cpu_milli = 0;
  int32_t gpus = 0;
  int32_t gpu_milli = 0;        // per GPU
  GpuModelId model = kNoModel;  // kNoModel: any model
  double weight = 0;            // p_m, sums to 1 over the distribution
  // When non-zero, the allowed models as a bit set (bit m: GpuModelId m), used instead of `model`
  // for tasks that may run on several models.
  uint32_t models = 0;
  // RAM of one task (of a sample; not part of a class's identity): feeds the distribution's
  // memory_per_gpu_milli.
  int64_t memory_mib = 0;
  bool AllowsModel(GpuModelId m) const {
    if (models != 0) return m.value() < 32 && ((models >> m.value()) & 1u) != 0;
    return model == kNoModel || model == m;
  }
};
struct TaskDistribution {
  std::vector<TaskClass> classes;
  // What the GPU tasks ask for besides GPUs, per GPU milli, over all the GPU tasks the
  // distribution was made from (not only the typical ones):
  //   cpu_per_gpu_milli    = sum of cpu_milli / sum of GPU milli
  //   memory_per_gpu_milli = sum of memory_mib / sum of GPU milli
  // 0 when unknown. The fgd-plus score uses them to tell how much idle GPU capacity a node's
  // remaining CPU and memory can still feed.
  double cpu_per_gpu_milli = 0;
  double memory_per_gpu_milli = 0;
  // By GPU model id: the share of all GPU milli asked for by tasks that may run on some models
  // only and list this one, each task's request split evenly over the models it allows (empty
  // when no task names a model). fgd-plus compares it with the model's share of the cluster.
  std::vector<double> exclusive_share;
  // The shapes of the tasks of several whole GPUs (GPU count, CPU), ascending, with their share
  // of all GPU milli asked for; at most kMaxMultiGpuShapes (the rarer folded into the next
  // smaller shape of their GPU count). fgd-plus keeps room for them while it is scarce.
  struct MultiGpuDemand {
    int32_t gpus = 0;
    int64_t cpu_milli = 0;
    double share = 0;
  };
  static constexpr size_t kMaxMultiGpuShapes = 16;
  std::vector<MultiGpuDemand> multi_gpu;
  // Sets the ratios and exclusive_share from samples (TaskClass values with cpu_milli, gpus,
  // gpu_milli, memory_mib and model or models of one task each).
  void SetDemandRatios(const std::vector<TaskClass>& samples);
  // The most frequent shapes covering `coverage` of the tasks, weights renormalised.
  static TaskDistribution FromTasks(const std::vector<TaskClass>& samples, double coverage = 0.95);
};

// Fragmentation of one node's idle GPU milli against a distribution (see docs/architecture.md):
// F_n = sum_m p_m F_n(m), F_n(m) = all idle GPU milli when m cannot run on n, else the idle milli
// on GPUs each too small for m. `gpu_free` are the free milli of the node's usable GPUs of `model`.
double NodeFragmentation(const TaskDistribution& dist, GpuModelId model, int64_t free_cpu,
                         const int32_t* gpu_free, int num_gpus);
// F_n(m) for one class.
int64_t ClassFragmentation(const TaskClass& m, GpuModelId model, int64_t free_cpu,
                           const int32_t* gpu_free, int num_gpus);

// Memoises NodeFragmentation for one distribution. The value depends on a node only through its
// model, which classes' CPU fits into free_cpu, and the multiset of GPU frees, so that is the key
// (nodes of up to 8 GPUs; larger ones are computed directly): a hit returns the bit-identical
// value, and decisions do not change. Owned by one driver thread; the distribution must outlive it.
class FragmentationCache {
 public:
  explicit FragmentationCache(const TaskDistribution& dist);
  const TaskDistribution& distribution() const { return *dist_; }
  // NodeFragmentation(distribution(), model, free_cpu, gpu_free, num_gpus).
  double Get(GpuModelId model, int64_t free_cpu, const int32_t* gpu_free, int num_gpus);
  size_t size() const { return used_; }
  // ScarceMultiGpu(distribution(), s), memoised by the snapshot's address and version.
  const TaskDistribution& ScarceMultiGpu(const Snapshot& s);

 private:
  struct Entry {
    uint64_t k0 = 0;
    uint64_t k1 = 0;  // 0: empty slot (a used key always has its top bit set)
    double value = 0;
  };
  void Grow();
  const TaskDistribution* dist_;
  std::vector<int64_t> cpu_steps_;  // the classes' distinct CPU requests, ascending
  std::vector<Entry> table_;
  size_t used_ = 0;
  const Snapshot* scarce_snapshot_ = nullptr;
  uint64_t scarce_version_ = 0;
  TaskDistribution scarce_;
};

// The multi-GPU task shapes of `dist` (TaskDistribution::multi_gpu) whose room in `s` is scarce,
// as classes (of weight 1). A shape's room is the whole free GPUs, in multiples of its GPU count,
// on the schedulable nodes with enough whole free GPUs and free CPU for it; it is scarce when that
// is less than the share of the idle GPU milli asked for by the shapes that need at least as much
// (as many GPUs or more, as much CPU or more), which can use no other room.
TaskDistribution ScarceMultiGpu(const TaskDistribution& dist, const Snapshot& s);

struct PlacementContext {
  const Snapshot* snapshot = nullptr;
  const GangState* gang = nullptr;
  const TaskDistribution* distribution = nullptr;  // for fgd; may be empty
  // Seeds the scores that draw lots (random): with the snapshot's version it gives each decision
  // its own draw, reproducibly.
  uint64_t seed = 0;
  // Optional memo of NodeFragmentation over `distribution` for fgd (null: computed each time).
  FragmentationCache* frag_cache = nullptr;
};

// NodeFragmentation against ctx.distribution, through ctx.frag_cache when there is one.
double ContextFragmentation(const PlacementContext& ctx, GpuModelId model, int64_t free_cpu,
                            const int32_t* gpu_free, int num_gpus);

class FilterPlugin {
 public:
  virtual ~FilterPlugin() = default;
  virtual std::string_view name() const = 0;
  virtual FilterCode Filter(const PlacementContext& ctx, const TaskRequest& req,
                            NodeId n) const = 0;
};

enum class CandidateOrder { kFewestFreeFirst, kMostFreeFirst };

class ScorePlugin {
 public:
  virtual ~ScorePlugin() = default;
  virtual std::string_view name() const = 0;
  // 0..kMaxScore for placing `req` on `n` using `gpus`.
  virtual int64_t Score(const PlacementContext& ctx, const TaskRequest& req, NodeId n,
                        const std::vector<GpuShare>& gpus) const = 0;
  virtual CandidateOrder order() const { return CandidateOrder::kFewestFreeFirst; }
  // True when the score depends (almost) only on how many GPUs stay free: the runtime may then
  // stop at the first index bucket that has a feasible node.
  virtual bool bucket_monotone() const { return false; }
};

enum class GpuSelector {
  kBestFit,  // least-sufficient GPUs, whole-GPU tasks inside one NVLink domain when possible
  kFgd,      // for GPU-sharing tasks, the GPU whose use grows the node's fragmentation least
};

struct ScoreWeightSpec {
  std::string plugin;
  int64_t weight = 1;
};

// The active profile as configured: which filters, which scores with which weights.
struct ProfileSpec {
  std::string name = "default";
  std::vector<std::string> filters;  // empty: all built-in filters
  std::vector<ScoreWeightSpec> scores;
  std::string gpu_selector = "best-fit";
  // Feasible nodes to score per task; 0: adaptive, as Kubernetes' percentageOfNodesToScore
  // (all up to 100 nodes, then max(100, N x max(5%, 50% - N/125 %))).
  int32_t nodes_to_score = 0;
};

class Profile {
 public:
  // Validates and instantiates the plugins; errors name the field ("scores[1].plugin").
  static Result<Profile> Build(const ProfileSpec& spec);
  // The built-in profiles: "binpack", "spread", "topology", "fgd", "default", and the baselines of
  // the FGD paper: "bestfit", "dotprod", "gpupacking", "gpuclustering", "random" (baselines.h).
  static Result<ProfileSpec> Named(std::string_view name);
  static std::vector<std::string> NamedProfiles();

  const std::string& name() const { return name_; }
  const std::vector<std::unique_ptr<FilterPlugin>>& filters() const { return filters_; }
  const std::vector<std::pair<std::unique_ptr<ScorePlugin>, int64_t>>& scores() const {
    return scores_;
  }
  GpuSelector gpu_selector() const { return gpu_selector_; }
  CandidateOrder order() const { return order_; }
  bool stop_at_first_bucket() const { return stop_at_first_bucket_; }
  bool needs_distribution() const { return needs_distribution_; }
  // Feasible nodes to score in a cluster of n nodes.
  size_t NodesToScore(size_t n) const;

  Profile(Profile&&) = default;
  Profile& operator=(Profile&&) = default;

 private:
  Profile() = default;
  std::string name_;
  std::vector<std::unique_ptr<FilterPlugin>> filters_;
  std::vector<std::pair<std::unique_ptr<ScorePlugin>, int64_t>> scores_;
  GpuSelector gpu_selector_ = GpuSelector::kBestFit;
  CandidateOrder order_ = CandidateOrder::kFewestFreeFirst;
  bool stop_at_first_bucket_ = false;
  bool needs_distribution_ = false;
  int32_t nodes_to_score_ = 0;
};

// Per-filter counts over the nodes a task was tried on, for verdicts.
struct FilterCounts {
  std::array<int32_t, static_cast<size_t>(FilterCode::kCount)> by_code{};
  int32_t& operator[](FilterCode c) { return by_code[static_cast<size_t>(c)]; }
  int32_t operator[](FilterCode c) const { return by_code[static_cast<size_t>(c)]; }
};

struct PlacementFailure {
  int tasks_placed = 0;  // how many tasks of the gang did fit before one did not
};

// What a task's spread costs on `n` (0 without a spread group): larger than any sum of the
// profile's weighted scores per task of the group on the node, and per task on its rack.
int64_t SpreadPenalty(const Snapshot& snap, const Profile& profile, const TaskRequest& req,
                      NodeId n);

// Finds the GPUs a task would use on node n (empty for CPU-only tasks); false when none fit.
bool SelectGpus(const PlacementContext& ctx, GpuSelector selector, const TaskRequest& req, NodeId n,
                std::vector<GpuShare>* out);

// Finds where PlaceTask would put one task, without reserving it: the best node, its GPUs and
// (when `score` is not null) its summed weighted score. Returns false when no node fits. A task
// whose constraints are exclusive takes its node whole (TakeWholeNode).
bool FindPlacement(const Snapshot& snap, const Profile& profile, const PlacementContext& ctx,
                   const TaskRequest& req, TaskPlacement* out, int64_t* score);

// Makes `t` hold all of its node's free capacity: every usable GPU (its free milli and memory),
// the free CPU and memory. For exclusive tasks, on nodes with nothing allocated.
void TakeWholeNode(const Snapshot& snap, TaskPlacement* t);

// Places one task: filter, select GPUs, score, and allocate the best node on the snapshot.
// Returns false when no node fits.
bool PlaceTask(Snapshot& snap, const Profile& profile, const PlacementContext& ctx,
               const TaskRequest& req, TaskPlacement* out);

// Places all `tasks` tasks of a gang on the snapshot, or none: on failure every reservation made
// here is undone before returning. `frag_cache`, when not null, memoises fragmentation over
// `dist` (it must have been made for that distribution).
bool PlaceGang(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
               const TaskRequest& req, int tasks, bool distinct_nodes,
               std::vector<TaskPlacement>* out, PlacementFailure* why,
               FragmentationCache* frag_cache = nullptr);

// Runs the filters on every node for a task and counts why each one fails (verdict diagnostics;
// O(nodes), used once per failing shape). `best_free` gets the most GPUs of the model free on one
// node that passes every non-GPU filter.
FilterCounts DiagnoseTask(const Snapshot& snap, const Profile& profile, const TaskRequest& req,
                          int* best_free_whole, int32_t* best_free_milli);

}  // namespace arbiter::core
