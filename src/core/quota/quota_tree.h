// QuotaTree: the tenant/queue tree compiled for quota arithmetic, and QuotaState: its usage.
//
// The arithmetic (in the spirit of Kueue's hierarchical cohorts), per resource dimension d:
//
//   G(n)   guaranteed. A dimension a node does not configure is transparent there:
//          G(n) = sum of the children's G, no max, no lending limit.
//   L(n)   lending limit (unlimited when unset): how much of n's quota its parent's pool may use.
//   M(n)   max: ceiling of n's total subtree usage U(n) (unlimited when unset).
//   own(n) = G(n) - sum_c G(c)                      the part of G(n) not handed to a child
//   SQ(n)  = own(n) + sum_c min(SQ(c), L(c))        quota n brings into its own pool
//   LQ(n)  = max(0, SQ(n) - L(n))                   quota kept local: n's alone, never lent
//   K(n)   = U(n) for a leaf;  sum_c max(0, K(c) - LQ(c)) otherwise   (usage drawn from n's pool)
//   avail(root) = SQ(root) - K(root),   G(root) = the cluster's schedulable capacity
//   avail(n)    = min(M(n) - U(n),  max(0, LQ(n) - K(n)) + avail(parent(n)),
//                     M(a) - U(a) for every ancestor a)
//
// A job with request r may be admitted to leaf q when r[d] <= avail(q, d) for every d, which also
// guarantees U(a) + r <= M(a) for every ancestor a. Usage above G(n) is borrowed:
//   borrowed(n) = max(0, U(n) - G(n)) on the dimensions n configures.
//
// Thread safety: QuotaTree is immutable after Build(); a QuotaState belongs to one cycle.
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "core/types.h"
#include "model/gpu_model.h"
#include "model/queue.h"

namespace arbiter::core {

struct QuotaNode {
  std::string name;
  QueueId parent;  // root's parent is itself
  std::vector<QueueId> children;
  bool is_tenant = false;
  int depth = 0;                            // root 0, tenants 1
  QueueId tenant;                           // the tenant this node belongs to (root: itself)
  std::array<bool, kMaxDims> configured{};  // the node sets some limit on this dimension
  QuotaVec guaranteed;                      // G, transparent dimensions resolved
  QuotaVec max;                             // M (kUnlimited when unset)
  QuotaVec lending_limit;                   // L (kUnlimited when unset)
  QuotaVec own;                             // own(n)
  QuotaVec subtree_quota;                   // SQ(n)
  QuotaVec local_quota;                     // LQ(n)
  double weight = 1.0;
  int64_t half_life_seconds = 0;
  int64_t default_walltime_seconds = 0;
  uint32_t allowed_types_mask = 0;  // bit per JobType; 0 = all
  bool is_leaf() const { return children.empty(); }
};

class QuotaTree {
 public:
  static constexpr QueueId kRoot{0};

  // Compiles the specs. Tenants have no parent; queues name an existing parent. Errors name the
  // field ("queues[2].quota.gpu.guaranteed") and the problem, e.g. children guaranteeing more than
  // their parent, max below guaranteed, an unknown GPU model, a cycle, a duplicate name.
  static Result<QuotaTree> Build(const std::vector<QueueSpec>& specs,
                                 const std::vector<GpuModel>& models);

  size_t size() const { return nodes_.size(); }
  const QuotaNode& node(QueueId id) const { return nodes_[id.value()]; }
  const std::vector<QuotaNode>& nodes() const { return nodes_; }
  int num_dims() const { return num_dims_; }
  // Node by name, or false.
  bool Find(std::string_view name, QueueId* out) const;
  // Name of a dimension: "cpu", "memory", "gpu", "gpu:A100-80G".
  const std::string& DimName(int d) const { return dim_names_[static_cast<size_t>(d)]; }
  // Formats an amount of dimension d for people: GPUs and CPUs in units, memory in MiB.
  std::string FormatAmount(int d, int64_t amount) const;

 private:
  std::vector<QuotaNode> nodes_;
  std::unordered_map<std::string, uint32_t> by_name_;
  std::vector<std::string> dim_names_;
  int num_dims_ = kFirstModelDim;

  // The steps of Build (quota_tree.cc). `spec_of_node`: for each node, the index of its spec.
  Status CheckNames(const std::vector<QueueSpec>& specs) const;
  Status PlaceParentsFirst(const std::vector<QueueSpec>& specs, std::vector<int>* spec_of_node);
  // The limits of node `id` from its spec; explicit guarantees go to `g`, marked in `has_g`.
  Status SetLimits(size_t id, const QueueSpec& s, const std::string& field,
                   const std::vector<GpuModel>& models, QuotaVec* g,
                   std::array<bool, kMaxDims>* has_g);
  Status SumGuarantees(const std::vector<QuotaVec>& explicit_g,
                       const std::vector<std::array<bool, kMaxDims>>& has_g,
                       const std::vector<int>& spec_of_node);
};

// Why a request does not fit the quota.
struct QuotaFailure {
  // kMax: a max binds. kBorrow: not enough may be borrowed. kCapacity: the cluster itself has
  // less of the dimension free than requested (node = root, limit = capacity).
  // kLendDeadline: the capacity left is a queue's idle guarantee that it lends only to jobs whose
  // grace period is within its reclaim deadline (node = that queue, limit = the deadline in ms).
  enum class Kind { kNone, kMax, kBorrow, kCapacity, kLendDeadline };
  Kind kind = Kind::kNone;
  QueueId node;  // the node whose limit binds
  int dim = 0;
  int64_t used = 0;   // U(node, dim)
  int64_t limit = 0;  // M(node, dim) for kMax; for kBorrow, what was available
  int64_t requested = 0;
  bool ok() const { return kind == Kind::kNone; }
};

class QuotaState {
 public:
  // Usage is zero; the root's guarantee is `capacity`.
  QuotaState(const QuotaTree& tree, const QuotaVec& capacity);

  const QuotaTree& tree() const { return *tree_; }

  // Adds (or removes) a job's request at a leaf and everywhere above it.
  void Add(QueueId leaf, const QuotaVec& r);
  void Remove(QueueId leaf, const QuotaVec& r);

  // Whether `r` can be admitted at `leaf`; on failure, the binding limit.
  QuotaFailure Check(QueueId leaf, const QuotaVec& r) const;
  // The same for a job whose grace period (SIGTERM to SIGKILL) is `grace`: the idle guarantee of
  // a queue that lends only within a shorter deadline (SetLendGraceLimit) is not available to it,
  // unless that queue is `leaf` or above it. Conservative: the whole idle guarantee of each such
  // lender is held back from what the pools offer, the job's own local quota always counts.
  QuotaFailure Check(QueueId leaf, const QuotaVec& r, DurationMs grace) const;

  // Node `n` lends its idle guarantee only to jobs with a grace period of at most `limit_ms`
  // (a service's reclaim_deadline_seconds): lent GPUs come back within it. 0: no limit.
  void SetLendGraceLimit(QueueId n, DurationMs limit_ms);
  DurationMs LendGraceLimit(QueueId n) const;

  // avail(n, d) as defined above.
  int64_t Available(QueueId n, int d) const;

  const QuotaVec& usage(QueueId n) const { return usage_[n.value()]; }
  // max(0, U - G) on configured dimensions (0 elsewhere).
  int64_t Borrowed(QueueId n, int d) const;
  const QuotaVec& capacity() const { return capacity_; }

 private:
  int64_t SubtreeQuota(QueueId n, int d) const;
  int64_t LocalQuota(QueueId n, int d) const;
  void Apply(QueueId leaf, const QuotaVec& r, int sign);

  const QuotaTree* tree_;
  QuotaVec capacity_;
  QuotaVec root_subtree_quota_;
  std::vector<QuotaVec> usage_;                              // U(n)
  std::vector<QuotaVec> pool_usage_;                         // K(n)
  std::vector<std::pair<QueueId, DurationMs>> lend_limits_;  // nodes with a lending deadline
};

}  // namespace arbiter::core
