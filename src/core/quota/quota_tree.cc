#include "core/quota/quota_tree.h"

#include <fmt/format.h>

#include <algorithm>

#include "model/node.h"

namespace arbiter::core {

namespace {

// Parses a resource key into a dimension; -1 when unknown.
int DimForKey(const std::string& key, const std::vector<GpuModel>& models) {
  if (key == "cpu") return kDimCpu;
  if (key == "memory") return kDimMemory;
  if (key == "gpu") return kDimGpu;
  if (key == "tasks") return kDimTasks;
  if (key.rfind("gpu:", 0) == 0) {
    const std::string model = key.substr(4);
    for (size_t i = 0; i < models.size(); ++i) {
      if (models[i].name == model) return kFirstModelDim + static_cast<int>(i);
    }
  }
  return -1;
}

int64_t SatAdd(int64_t a, int64_t b) { return std::min(kUnlimited, a + b); }

}  // namespace

bool QuotaTree::Find(std::string_view name, QueueId* out) const {
  auto it = by_name_.find(std::string(name));
  if (it == by_name_.end()) return false;
  *out = QueueId(it->second);
  return true;
}

std::string QuotaTree::FormatAmount(int d, int64_t amount) const {
  if (amount >= kUnlimited) return "unlimited";
  if (d == kDimMemory) return fmt::format("{} MiB", amount);
  if (d == kDimTasks) return fmt::format("{}", amount);
  return FormatMilli(amount);
}

Result<QuotaTree> QuotaTree::Build(const std::vector<QueueSpec>& specs,
                                   const std::vector<GpuModel>& models) {
  if (models.size() > static_cast<size_t>(kMaxGpuModels)) {
    return InvalidArgument("gpu_models", fmt::format("at most {} GPU models", kMaxGpuModels));
  }
  QuotaTree t;
  t.num_dims_ = kFirstModelDim + static_cast<int>(models.size());
  t.dim_names_ = {"cpu", "memory", "gpu", "tasks"};
  for (const GpuModel& m : models) t.dim_names_.push_back("gpu:" + m.name);
  t.dim_names_.resize(kMaxDims);

  QuotaNode root;
  root.name = "(cluster)";
  root.parent = kRoot;
  root.tenant = kRoot;
  root.max.v.fill(kUnlimited);
  root.lending_limit.v.fill(kUnlimited);
  t.nodes_.push_back(root);

  // 1. Place nodes parents-first, so that a parent always has the smaller id.
  ARBITER_RETURN_IF_ERROR(t.CheckNames(specs));
  std::vector<int> spec_of_node = {-1};
  ARBITER_RETURN_IF_ERROR(t.PlaceParentsFirst(specs, &spec_of_node));

  // 2. Limits per node, then guarantees bottom-up (children have larger ids).
  std::vector<QuotaVec> explicit_g(t.nodes_.size());
  std::vector<std::array<bool, kMaxDims>> has_g(t.nodes_.size());
  for (size_t id = 1; id < t.nodes_.size(); ++id) {
    const auto spec = static_cast<size_t>(spec_of_node[id]);
    ARBITER_RETURN_IF_ERROR(t.SetLimits(id, specs[spec], fmt::format("queues[{}]", spec), models,
                                        &explicit_g[id], &has_g[id]));
  }
  ARBITER_RETURN_IF_ERROR(t.SumGuarantees(explicit_g, has_g, spec_of_node));
  return t;
}

Status QuotaTree::CheckNames(const std::vector<QueueSpec>& specs) const {
  for (size_t i = 0; i < specs.size(); ++i) {
    const QueueSpec& s = specs[i];
    const std::string f = fmt::format("queues[{}]", i);
    if (!IsValidName(s.name)) {
      return InvalidArgument(f + ".name", fmt::format("'{}' is not a valid name: use lower-case "
                                                      "letters, digits and '-'",
                                                      s.name));
    }
    if (s.is_tenant != s.parent.empty()) {
      return InvalidArgument(f + ".parent",
                             s.is_tenant ? "a tenant has no parent" : "a queue needs a parent");
    }
    for (size_t j = 0; j < i; ++j) {
      if (specs[j].name == s.name) {
        return InvalidArgument(f + ".name", fmt::format("duplicate name '{}'", s.name));
      }
    }
  }
  return Status::Ok();
}

Status QuotaTree::PlaceParentsFirst(const std::vector<QueueSpec>& specs,
                                    std::vector<int>* spec_of_node) {
  std::vector<bool> placed(specs.size(), false);
  for (size_t round = 0; round <= specs.size(); ++round) {
    bool progress = false;
    for (size_t i = 0; i < specs.size(); ++i) {
      if (placed[i]) continue;
      const QueueSpec& s = specs[i];
      QueueId parent = kRoot;
      if (!s.parent.empty() && !Find(s.parent, &parent)) continue;
      const auto id = static_cast<uint32_t>(nodes_.size());
      QuotaNode n;
      n.name = s.name;
      n.parent = parent;
      n.is_tenant = s.is_tenant;
      n.depth = nodes_[parent.value()].depth + 1;
      n.tenant = s.is_tenant ? QueueId(id) : nodes_[parent.value()].tenant;
      nodes_[parent.value()].children.push_back(QueueId(id));
      nodes_.push_back(std::move(n));
      by_name_.emplace(s.name, id);
      spec_of_node->push_back(static_cast<int>(i));
      placed[i] = true;
      progress = true;
    }
    if (!progress) break;
  }
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!placed[i]) {
      return InvalidArgument(fmt::format("queues[{}].parent", i),
                             fmt::format("parent '{}' of '{}' does not exist (or forms a cycle)",
                                         specs[i].parent, specs[i].name));
    }
  }
  return Status::Ok();
}

Status QuotaTree::SetLimits(size_t id, const QueueSpec& s, const std::string& f,
                            const std::vector<GpuModel>& models, QuotaVec* g,
                            std::array<bool, kMaxDims>* has_g) {
  QuotaNode& n = nodes_[id];
  n.max.v.fill(kUnlimited);
  n.lending_limit.v.fill(kUnlimited);
  if (s.weight_milli <= 0) {
    return InvalidArgument(f + ".weight",
                           fmt::format("must be > 0, got {}", FormatMilli(s.weight_milli)));
  }
  n.weight = static_cast<double>(s.weight_milli) / 1000.0;
  if (s.decay.half_life_seconds < 0) {
    return InvalidArgument(f + ".fair_share.half_life_seconds", "must be >= 0");
  }
  n.half_life_seconds = s.decay.half_life_seconds;
  if (s.default_walltime_seconds < 0) {
    return InvalidArgument(f + ".default_walltime_seconds", "must be >= 0");
  }
  n.default_walltime_seconds = s.default_walltime_seconds;
  for (size_t k = 0; k < s.allowed_types.size(); ++k) {
    JobType jt;
    if (!ParseJobType(s.allowed_types[k], &jt)) {
      return InvalidArgument(fmt::format("{}.allowed_types[{}]", f, k),
                             fmt::format("unknown job type '{}'", s.allowed_types[k]));
    }
    n.allowed_types_mask |= 1u << static_cast<unsigned>(jt);
  }
  for (const auto& [key, lim] : s.quota) {
    const int d = DimForKey(key, models);
    const std::string qf = f + ".quota." + key;
    if (d < 0) {
      return InvalidArgument(qf, fmt::format("unknown resource '{}': use cpu, memory, tasks, "
                                             "gpu or gpu:<model>",
                                             key));
    }
    if (d == kDimTasks && (lim.guaranteed || lim.lending_limit)) {
      return InvalidArgument(qf, "tasks takes a max only (a ceiling on live tasks)");
    }
    // Tasks are never guaranteed, lent or borrowed: only their max counts, so the dimension
    // stays transparent to the guarantee arithmetic (reclaim, borrowing) everywhere.
    if (d != kDimTasks) n.configured[static_cast<size_t>(d)] = true;
    for (auto [v, name] : {std::pair{lim.guaranteed, "guaranteed"},
                           {lim.max, "max"},
                           {lim.lending_limit, "lending_limit"}}) {
      if (v && (*v < 0 || *v >= kUnlimited)) {
        return InvalidArgument(qf + "." + name, fmt::format("must be >= 0, got {}", *v));
      }
    }
    if (lim.guaranteed) {
      (*g)[d] = *lim.guaranteed;
      (*has_g)[static_cast<size_t>(d)] = true;
    }
    if (lim.max) n.max[d] = *lim.max;
    if (lim.lending_limit) n.lending_limit[d] = *lim.lending_limit;
    if (lim.max && lim.guaranteed && *lim.max < *lim.guaranteed) {
      return InvalidArgument(
          qf + ".max", fmt::format("max ({}) is below guaranteed ({})", FormatAmount(d, *lim.max),
                                   FormatAmount(d, *lim.guaranteed)));
    }
  }
  return Status::Ok();
}

Status QuotaTree::SumGuarantees(const std::vector<QuotaVec>& explicit_g,
                                const std::vector<std::array<bool, kMaxDims>>& has_g,
                                const std::vector<int>& spec_of_node) {
  for (size_t id = nodes_.size() - 1; id >= 1; --id) {
    QuotaNode& n = nodes_[id];
    QuotaVec child_g;
    QuotaVec child_sq;
    for (QueueId c : n.children) {
      const QuotaNode& cn = nodes_[c.value()];
      child_g += cn.guaranteed;
      for (int d = 0; d < num_dims_; ++d) {
        child_sq[d] += std::min(cn.subtree_quota[d], cn.lending_limit[d]);
      }
    }
    for (int d = 0; d < num_dims_; ++d) {
      const auto ud = static_cast<size_t>(d);
      n.guaranteed[d] = has_g[id][ud] ? explicit_g[id][d] : child_g[d];
      if (child_g[d] > n.guaranteed[d]) {
        return InvalidArgument(
            fmt::format("queues[{}].quota.{}.guaranteed", spec_of_node[id], dim_names_[ud]),
            fmt::format("the children of '{}' guarantee {} in all, more than its own {}", n.name,
                        FormatAmount(d, child_g[d]), FormatAmount(d, n.guaranteed[d])));
      }
      n.own[d] = n.guaranteed[d] - child_g[d];
      n.subtree_quota[d] = n.own[d] + child_sq[d];
      n.local_quota[d] = std::max<int64_t>(0, n.subtree_quota[d] - n.lending_limit[d]);
    }
  }
  return Status::Ok();
}

QuotaState::QuotaState(const QuotaTree& tree, const QuotaVec& capacity)
    : tree_(&tree), capacity_(capacity), usage_(tree.size()), pool_usage_(tree.size()) {
  // The root guarantees the cluster: own(root) = capacity - sum of tenants' G (may be negative
  // when tenants are promised more than exists; then only local quotas are certain).
  const QuotaNode& root = tree.node(QuotaTree::kRoot);
  for (int d = 0; d < tree.num_dims(); ++d) {
    int64_t sq = capacity[d];
    for (QueueId c : root.children) {
      const QuotaNode& cn = tree.node(c);
      sq += std::min(cn.subtree_quota[d], cn.lending_limit[d]) - cn.guaranteed[d];
    }
    root_subtree_quota_[d] = sq;
  }
}

int64_t QuotaState::SubtreeQuota(QueueId n, int d) const {
  return n == QuotaTree::kRoot ? root_subtree_quota_[d] : tree_->node(n).subtree_quota[d];
}

int64_t QuotaState::LocalQuota(QueueId n, int d) const {
  return n == QuotaTree::kRoot ? 0 : tree_->node(n).local_quota[d];
}

int64_t QuotaState::Available(QueueId n, int d) const {
  if (n == QuotaTree::kRoot) return SubtreeQuota(n, d) - pool_usage_[0][d];
  const QuotaNode& node = tree_->node(n);
  const int64_t local = std::max<int64_t>(0, node.local_quota[d] - pool_usage_[n.value()][d]);
  const int64_t from_parent = std::max<int64_t>(0, Available(node.parent, d));
  int64_t avail = std::min(node.max[d] - usage_[n.value()][d], SatAdd(local, from_parent));
  // Local quota bypasses the parents' pools, not their maxes.
  for (QueueId a = node.parent; a != QuotaTree::kRoot; a = tree_->node(a).parent) {
    avail = std::min(avail, tree_->node(a).max[d] - usage_[a.value()][d]);
  }
  return avail;
}

void QuotaState::SetLendGraceLimit(QueueId n, DurationMs limit_ms) {
  for (auto it = lend_limits_.begin(); it != lend_limits_.end(); ++it) {
    if (it->first == n) {
      if (limit_ms > 0) {
        it->second = limit_ms;
      } else {
        lend_limits_.erase(it);
      }
      return;
    }
  }
  if (limit_ms > 0) lend_limits_.emplace_back(n, limit_ms);
}

DurationMs QuotaState::LendGraceLimit(QueueId n) const {
  for (const auto& [q, limit] : lend_limits_) {
    if (q == n) return limit;
  }
  return 0;
}

QuotaFailure QuotaState::Check(QueueId leaf, const QuotaVec& r, DurationMs grace) const {
  QuotaFailure f = Check(leaf, r);
  if (!f.ok() || lend_limits_.empty()) return f;
  for (int d = 0; d < tree_->num_dims(); ++d) {
    if (r[d] <= 0) continue;
    int64_t held = 0;
    QueueId first;
    DurationMs first_limit = 0;
    for (const auto& [x, limit] : lend_limits_) {
      if (limit >= grace) continue;
      bool above = false;  // x is leaf or one of its ancestors: its guarantee is the job's own
      for (QueueId a = leaf;; a = tree_->node(a).parent) {
        if (a == x) above = true;
        if (a == QuotaTree::kRoot || above) break;
      }
      const QuotaNode& xn = tree_->node(x);
      if (above || !xn.configured[static_cast<size_t>(d)]) continue;
      const int64_t idle = std::max<int64_t>(
          0, std::min(xn.guaranteed[d], xn.lending_limit[d]) - usage_[x.value()][d]);
      if (idle > 0 && held == 0) {
        first = x;
        first_limit = limit;
      }
      held += idle;
    }
    if (held == 0) continue;
    const QuotaNode& ln = tree_->node(leaf);
    const int64_t own =
        std::min(ln.max[d] - usage_[leaf.value()][d],
                 std::max<int64_t>(0, ln.local_quota[d] - pool_usage_[leaf.value()][d]));
    const int64_t avail = std::max(own, Available(leaf, d) - held);
    if (r[d] <= avail) continue;
    f.kind = QuotaFailure::Kind::kLendDeadline;
    f.node = first;
    f.dim = d;
    f.used = usage_[first.value()][d];
    f.limit = first_limit;
    f.requested = r[d];
    return f;
  }
  return f;
}

int64_t QuotaState::Borrowed(QueueId n, int d) const {
  const QuotaNode& node = tree_->node(n);
  if (n != QuotaTree::kRoot && !node.configured[static_cast<size_t>(d)]) return 0;
  return std::max<int64_t>(0, usage_[n.value()][d] - node.guaranteed[d]);
}

QuotaFailure QuotaState::Check(QueueId leaf, const QuotaVec& r) const {
  QuotaFailure f;
  // GPU dimensions first: they are what people read about.
  auto check_dim = [&](int d) {
    if (r[d] <= 0) return false;
    const int64_t avail = Available(leaf, d);
    if (r[d] <= avail) return false;
    f.dim = d;
    f.requested = r[d];
    for (QueueId a = leaf;; a = tree_->node(a).parent) {
      const QuotaNode& an = tree_->node(a);
      if (usage_[a.value()][d] + r[d] > an.max[d]) {
        f.kind = QuotaFailure::Kind::kMax;
        f.node = a;
        f.used = usage_[a.value()][d];
        f.limit = an.max[d];
        return true;
      }
      if (a == QuotaTree::kRoot) break;
    }
    if (capacity_[d] - usage_[0][d] < r[d]) {
      f.kind = QuotaFailure::Kind::kCapacity;
      f.node = QuotaTree::kRoot;
      f.used = usage_[0][d];
      f.limit = capacity_[d];
      return true;
    }
    f.kind = QuotaFailure::Kind::kBorrow;
    f.node = leaf;
    f.used = usage_[leaf.value()][d];
    f.limit = std::max<int64_t>(0, avail);
    return true;
  };
  if (check_dim(kDimGpu)) return f;
  for (int d = kFirstModelDim; d < tree_->num_dims(); ++d) {
    if (check_dim(d)) return f;
  }
  if (check_dim(kDimTasks)) return f;
  if (check_dim(kDimCpu)) return f;
  if (check_dim(kDimMemory)) return f;
  return f;
}

void QuotaState::Add(QueueId leaf, const QuotaVec& r) { Apply(leaf, r, +1); }
void QuotaState::Remove(QueueId leaf, const QuotaVec& r) { Apply(leaf, r, -1); }

void QuotaState::Apply(QueueId leaf, const QuotaVec& r, int sign) {
  for (int d = 0; d < tree_->num_dims(); ++d) {
    const int64_t delta = sign * r[d];
    if (delta == 0) continue;
    // U changes by delta everywhere on the path; K changes by how much the child's draw on its
    // parent's pool changed: max(0, K(c) - LQ(c)) before and after.
    QueueId c = leaf;
    int64_t k_old = pool_usage_[c.value()][d];
    usage_[c.value()][d] += delta;
    pool_usage_[c.value()][d] += delta;
    int64_t k_new = pool_usage_[c.value()][d];
    while (c != QuotaTree::kRoot) {
      const QueueId p = tree_->node(c).parent;
      const int64_t lq = LocalQuota(c, d);
      const int64_t draw_delta =
          std::max<int64_t>(0, k_new - lq) - std::max<int64_t>(0, k_old - lq);
      usage_[p.value()][d] += delta;
      k_old = pool_usage_[p.value()][d];
      pool_usage_[p.value()][d] += draw_delta;
      k_new = pool_usage_[p.value()][d];
      c = p;
    }
  }
}

}  // namespace arbiter::core
