#include "core/placement/framework.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <map>
#include <numeric>
#include <tuple>

#include "core/placement/plugins.h"

namespace arbiter::core {

std::string_view FilterCodeName(FilterCode c) {
  switch (c) {
    case FilterCode::kOk:
      return "ok";
    case FilterCode::kNodeNotReady:
      return "not ready";
    case FilterCode::kWrongModel:
      return "wrong GPU model";
    case FilterCode::kInsufficientGpu:
      return "not enough free GPUs";
    case FilterCode::kInsufficientGpuMemory:
      return "not enough GPU memory";
    case FilterCode::kInsufficientCpu:
      return "not enough CPU";
    case FilterCode::kInsufficientMemory:
      return "not enough memory";
    case FilterCode::kSelectorMismatch:
      return "node selector does not match";
    case FilterCode::kUntoleratedTaint:
      return "taint not tolerated";
    case FilterCode::kGangNodeTaken:
      return "already used by this gang";
    case FilterCode::kNodeNotListed:
      return "not in the job's node list";
    case FilterCode::kNodeExcluded:
      return "excluded by the job";
    case FilterCode::kNodeShared:
      return "in use (the job wants whole nodes)";
    case FilterCode::kCount:
      break;
  }
  return "unknown";
}

bool GangState::UsesNode(NodeId n) const {
  return std::find(nodes.begin(), nodes.end(), n) != nodes.end();
}
bool GangState::UsesRack(uint32_t r) const {
  return std::find(racks.begin(), racks.end(), r) != racks.end();
}
bool GangState::UsesBlock(uint32_t b) const {
  return std::find(blocks.begin(), blocks.end(), b) != blocks.end();
}

// --- Fragmentation ---------------------------------------------------------------------------

TaskDistribution TaskDistribution::FromTasks(const std::vector<TaskClass>& samples,
                                             double coverage) {
  using Key = std::tuple<int64_t, int32_t, int32_t, uint16_t, uint32_t>;
  std::map<Key, int64_t> counts;
  for (const TaskClass& t : samples) {
    ++counts[Key{t.cpu_milli, t.gpus, t.gpu_milli, t.model.value(), t.models}];
  }
  std::vector<std::pair<Key, int64_t>> sorted(counts.begin(), counts.end());
  // Most frequent first; equal counts in key order, so the result is deterministic.
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const auto& a, const auto& b) { return a.second > b.second; });
  TaskDistribution d;
  const auto total = static_cast<double>(samples.size());
  double covered = 0;
  for (const auto& [key, count] : sorted) {
    if (total == 0 || covered >= coverage) break;
    TaskClass c;
    std::tie(c.cpu_milli, c.gpus, c.gpu_milli, std::ignore, c.models) = key;
    c.model = GpuModelId(std::get<3>(key));
    c.weight = static_cast<double>(count);
    d.classes.push_back(c);
    covered += static_cast<double>(count) / total;
  }
  double sum = 0;
  for (const TaskClass& c : d.classes) sum += c.weight;
  for (TaskClass& c : d.classes) c.weight /= sum;
  d.SetDemandRatios(samples);
  return d;
}

void TaskDistribution::SetDemandRatios(const std::vector<TaskClass>& samples) {
  double cpu = 0;
  double memory = 0;
  double gpu = 0;
  exclusive_share.clear();
  std::map<std::pair<int32_t, int64_t>, double> multi;  // (gpus, cpu): GPU milli
  for (const TaskClass& t : samples) {
    if (t.gpus <= 0) continue;
    const double milli = static_cast<double>(t.gpus) * t.gpu_milli;
    if (t.gpus >= 2 && t.gpu_milli >= kMilliPerGpu) multi[{t.gpus, t.cpu_milli}] += milli;
    cpu += static_cast<double>(t.cpu_milli);
    memory += static_cast<double>(t.memory_mib);
    gpu += milli;
    // The models this task allows: the bit set, else the one model, else any (not counted).
    uint32_t allowed = t.models;
    if (allowed == 0 && t.model != kNoModel && t.model.value() < 32)
      allowed = 1u << t.model.value();
    if (allowed == 0) continue;
    const int count = std::popcount(allowed);
    for (uint32_t m = 0; m < 32; ++m) {
      if (((allowed >> m) & 1u) == 0) continue;
      if (exclusive_share.size() <= m) exclusive_share.resize(m + 1, 0.0);
      exclusive_share[m] += milli / count;
    }
  }
  cpu_per_gpu_milli = gpu > 0 ? cpu / gpu : 0;
  memory_per_gpu_milli = gpu > 0 ? memory / gpu : 0;
  for (double& e : exclusive_share) e = gpu > 0 ? e / gpu : 0;
  multi_gpu.clear();
  for (const auto& [shape, milli] : multi) {
    multi_gpu.push_back({shape.first, shape.second, gpu > 0 ? milli / gpu : 0});
  }
  if (multi_gpu.size() > kMaxMultiGpuShapes) {
    // Keep the largest shares; a rarer shape's demand joins the next smaller kept shape of its
    // GPU count, whose room it can use (or is dropped when there is none).
    std::vector<size_t> order(multi_gpu.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return multi_gpu[a].share > multi_gpu[b].share; });
    std::vector<bool> keep(multi_gpu.size(), false);
    for (size_t i = 0; i < kMaxMultiGpuShapes; ++i) keep[order[i]] = true;
    std::vector<MultiGpuDemand> kept;
    for (size_t i = 0; i < multi_gpu.size(); ++i) {
      if (keep[i]) {
        kept.push_back(multi_gpu[i]);
      } else if (!kept.empty() && kept.back().gpus == multi_gpu[i].gpus) {
        kept.back().share += multi_gpu[i].share;
      }
    }
    multi_gpu = std::move(kept);
  }
}

TaskDistribution ScarceMultiGpu(const TaskDistribution& dist, const Snapshot& s) {
  TaskDistribution out;
  if (dist.multi_gpu.empty()) return out;
  const Cluster& c = s.cluster();
  const size_t k = dist.multi_gpu.size();
  const int fewest = dist.multi_gpu.front().gpus;
  std::vector<int64_t> room(k, 0);
  // Idle GPU milli: the whole free GPUs from the index, plus what is left on partly used GPUs.
  // Room: only nodes with at least `fewest` whole free GPUs of one model can hold any shape.
  int64_t idle = 0;
  for (size_t m = 0; m < c.models().size(); ++m) {
    const GpuModelId model(static_cast<uint16_t>(m));
    for (int free = 1; free <= s.max_free_bucket(model); ++free) {
      const NodeSet& nodes = s.nodes_with_free(model, free);
      idle += int64_t{free} * kMilliPerGpu * static_cast<int64_t>(nodes.size());
      if (free < fewest) continue;
      nodes.ForEach([&](uint32_t i) {
        const int64_t cpu = s.free_cpu(NodeId(i));
        for (size_t j = 0; j < k; ++j) {
          const auto& d = dist.multi_gpu[j];
          if (free >= d.gpus && cpu >= d.cpu_milli) room[j] += int64_t{free / d.gpus} * d.gpus;
        }
        return true;
      });
    }
    s.nodes_with_partial(model).ForEach([&](uint32_t i) {
      const NodeInfo& info = c.node(NodeId(i));
      for (uint16_t g = 0; g < info.gpu_count; ++g) {
        const uint32_t slot = info.gpu_begin + g;
        if (c.gpus()[slot].model != model || !s.gpu_usable(slot)) continue;
        const int32_t f = s.gpu_free_milli(slot);
        if (f < kMilliPerGpu) idle += f;
      }
      return true;
    });
  }
  for (size_t j = 0; j < k; ++j) {
    const auto& d = dist.multi_gpu[j];
    double need = 0;
    for (const auto& o : dist.multi_gpu) {
      if (o.gpus >= d.gpus && o.cpu_milli >= d.cpu_milli) need += o.share;
    }
    if (static_cast<double>(room[j]) * kMilliPerGpu >= need * static_cast<double>(idle)) continue;
    TaskClass t;
    t.gpus = d.gpus;
    t.gpu_milli = kMilliPerGpu;
    t.cpu_milli = d.cpu_milli;
    t.weight = 1;
    out.classes.push_back(t);
  }
  return out;
}

const TaskDistribution& FragmentationCache::ScarceMultiGpu(const Snapshot& s) {
  if (scarce_snapshot_ != &s || scarce_version_ != s.version()) {
    scarce_ = core::ScarceMultiGpu(*dist_, s);
    scarce_snapshot_ = &s;
    scarce_version_ = s.version();
  }
  return scarce_;
}

namespace {

// F_n(m) given the node's idle GPU milli (the sum of gpu_free).
int64_t ClassFragmentationOf(const TaskClass& m, GpuModelId model, int64_t free_cpu,
                             const int32_t* gpu_free, int num_gpus, int64_t idle) {
  // F_n(m) = idle  when m cannot run on n at all; else the idle milli on GPUs too small for m.
  if (idle == 0 || m.gpus <= 0 || !m.AllowsModel(model) || m.cpu_milli > free_cpu) return idle;
  int fitting = 0;
  int64_t small = 0;
  for (int i = 0; i < num_gpus; ++i) {
    if (gpu_free[i] >= m.gpu_milli) {
      ++fitting;
    } else {
      small += gpu_free[i];
    }
  }
  return fitting >= m.gpus ? small : idle;
}

int64_t IdleOf(const int32_t* gpu_free, int num_gpus) {
  int64_t idle = 0;
  for (int i = 0; i < num_gpus; ++i) idle += gpu_free[i];
  return idle;
}

}  // namespace

int64_t ClassFragmentation(const TaskClass& m, GpuModelId model, int64_t free_cpu,
                           const int32_t* gpu_free, int num_gpus) {
  return ClassFragmentationOf(m, model, free_cpu, gpu_free, num_gpus, IdleOf(gpu_free, num_gpus));
}

double NodeFragmentation(const TaskDistribution& dist, GpuModelId model, int64_t free_cpu,
                         const int32_t* gpu_free, int num_gpus) {
  const int64_t idle = IdleOf(gpu_free, num_gpus);
  if (idle == 0) return 0;
  double f = 0;
  for (const TaskClass& m : dist.classes) {
    f += m.weight *
         static_cast<double>(ClassFragmentationOf(m, model, free_cpu, gpu_free, num_gpus, idle));
  }
  return f;
}

FragmentationCache::FragmentationCache(const TaskDistribution& dist) : dist_(&dist) {
  for (const TaskClass& c : dist.classes) cpu_steps_.push_back(c.cpu_milli);
  std::sort(cpu_steps_.begin(), cpu_steps_.end());
  cpu_steps_.erase(std::unique(cpu_steps_.begin(), cpu_steps_.end()), cpu_steps_.end());
  table_.resize(1u << 12);
}

double FragmentationCache::Get(GpuModelId model, int64_t free_cpu, const int32_t* gpu_free,
                               int num_gpus) {
  constexpr int kMaxKeyGpus = 8;
  if (num_gpus > kMaxKeyGpus) return NodeFragmentation(*dist_, model, free_cpu, gpu_free, num_gpus);
  // Key: the frees sorted (10 bits each), the GPU count, the model and the CPU step (how many
  // distinct class CPU requests fit).
  int32_t f[kMaxKeyGpus];
  for (int i = 0; i < num_gpus; ++i) {
    const int32_t v = gpu_free[i];
    if (v < 0 || v > 1023) return NodeFragmentation(*dist_, model, free_cpu, gpu_free, num_gpus);
    int j = i;
    for (; j > 0 && f[j - 1] < v; --j) f[j] = f[j - 1];  // insertion sort, descending
    f[j] = v;
  }
  const auto step = static_cast<uint64_t>(
      std::upper_bound(cpu_steps_.begin(), cpu_steps_.end(), free_cpu) - cpu_steps_.begin());
  uint64_t k0 = static_cast<uint64_t>(num_gpus);
  uint64_t k1 = (uint64_t{1} << 63) | (uint64_t{model.value()} << 20) | (step << 36);
  for (int i = 0; i < num_gpus; ++i) {
    if (i < 6) {
      k0 |= static_cast<uint64_t>(f[i]) << (4 + 10 * i);
    } else {
      k1 |= static_cast<uint64_t>(f[i]) << (10 * (i - 6));
    }
  }
  uint64_t h = k0 * 0x9e3779b97f4a7c15ULL ^ k1 * 0xc2b2ae3d27d4eb4fULL;
  h ^= h >> 29;
  const size_t mask = table_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    Entry& e = table_[i];
    if (e.k1 == 0) {
      e = {k0, k1, NodeFragmentation(*dist_, model, free_cpu, f, num_gpus)};
      const double v = e.value;
      if (++used_ * 2 > table_.size()) Grow();
      return v;
    }
    if (e.k0 == k0 && e.k1 == k1) return e.value;
  }
}

void FragmentationCache::Grow() {
  std::vector<Entry> old(table_.size() * 2);
  old.swap(table_);
  const size_t mask = table_.size() - 1;
  for (const Entry& e : old) {
    if (e.k1 == 0) continue;
    uint64_t h = e.k0 * 0x9e3779b97f4a7c15ULL ^ e.k1 * 0xc2b2ae3d27d4eb4fULL;
    h ^= h >> 29;
    size_t i = h & mask;
    while (table_[i].k1 != 0) i = (i + 1) & mask;
    table_[i] = e;
  }
}

double ContextFragmentation(const PlacementContext& ctx, GpuModelId model, int64_t free_cpu,
                            const int32_t* gpu_free, int num_gpus) {
  if (ctx.frag_cache != nullptr && &ctx.frag_cache->distribution() == ctx.distribution) {
    return ctx.frag_cache->Get(model, free_cpu, gpu_free, num_gpus);
  }
  return NodeFragmentation(*ctx.distribution, model, free_cpu, gpu_free, num_gpus);
}

// --- Profiles --------------------------------------------------------------------------------

std::vector<std::string> Profile::NamedProfiles() {
  return {"default", "binpack", "spread",     "topology",      "fgd",
          "bestfit", "dotprod", "gpupacking", "gpuclustering", "random"};
}

Result<ProfileSpec> Profile::Named(std::string_view name) {
  ProfileSpec p;
  p.name = std::string(name);
  if (name == "binpack") {
    p.scores = {{"binpack", 1}};
  } else if (name == "spread") {
    p.scores = {{"spread", 1}};
  } else if (name == "topology") {
    p.scores = {{"binpack", 1}, {"topology", 1}};
  } else if (name == "default") {
    // Fragmentation, stranded GPUs, reserved GPU models and a little best fit for where a task
    // goes (fgd-plus),
    // topology for which GPUs and, for gangs, which nodes: the topology score is the same for
    // every node that holds a task inside one NVLink domain, so for single tasks it only breaks
    // NVLink islands when nothing else fits; for a gang its node, rack and block terms
    // (up to kMaxScore / 2) outweigh fgd-plus's usual differences.
    // image-locality, with the same modest weight, prefers among otherwise equal nodes one that
    // holds the job's container image (it starts without a pull).
    p.scores = {{"fgd-plus", 1}, {"topology", 1}, {"image-locality", 1}};
    p.gpu_selector = "fgd";
  } else if (name == "fgd") {
    p.scores = {{"fgd", 1}};
    p.gpu_selector = "fgd";
  } else if (name == "bestfit" || name == "dotprod" || name == "gpupacking" ||
             name == "gpuclustering" || name == "random") {
    p.scores = {{std::string(name), 1}};  // the FGD paper's baselines, best-fit GPU selection
  } else {
    std::string known;
    for (const std::string& n : NamedProfiles()) known += (known.empty() ? "" : ", ") + n;
    return InvalidArgument("policy", fmt::format("unknown policy '{}'; known: {}", name, known));
  }
  return p;
}

Result<Profile> Profile::Build(const ProfileSpec& spec) {
  Profile p;
  p.name_ = spec.name;
  std::vector<std::string> filters = spec.filters;
  if (filters.empty()) {
    for (std::string_view f : BuiltinFilterNames()) filters.emplace_back(f);
  }
  for (size_t i = 0; i < filters.size(); ++i) {
    auto f = MakeFilter(filters[i]);
    if (f == nullptr) {
      return InvalidArgument(fmt::format("filters[{}]", i),
                             fmt::format("unknown filter plugin '{}'", filters[i]));
    }
    for (const auto& existing : p.filters_) {
      if (existing->name() == f->name()) {
        return InvalidArgument(fmt::format("filters[{}]", i),
                               fmt::format("filter '{}' listed twice", filters[i]));
      }
    }
    p.filters_.push_back(std::move(f));
  }
  if (spec.scores.empty()) return InvalidArgument("scores", "a profile needs at least one score");
  int64_t best_weight = -1;
  p.stop_at_first_bucket_ = true;
  for (size_t i = 0; i < spec.scores.size(); ++i) {
    auto s = MakeScore(spec.scores[i].plugin);
    if (s == nullptr) {
      return InvalidArgument(fmt::format("scores[{}].plugin", i),
                             fmt::format("unknown score plugin '{}'", spec.scores[i].plugin));
    }
    if (spec.scores[i].weight < 1 || spec.scores[i].weight > 1000) {
      return InvalidArgument(
          fmt::format("scores[{}].weight", i),
          fmt::format("must be between 1 and 1000, got {}", spec.scores[i].weight));
    }
    if (spec.scores[i].weight > best_weight) {
      best_weight = spec.scores[i].weight;
      p.order_ = s->order();
    }
    if (s->name() == "fgd" || s->name() == "fgd-plus") p.needs_distribution_ = true;
    p.scores_.emplace_back(std::move(s), spec.scores[i].weight);
  }
  for (const auto& [s, w] : p.scores_) {
    if (!s->bucket_monotone() || s->order() != p.order_) p.stop_at_first_bucket_ = false;
  }
  if (spec.gpu_selector == "best-fit") {
    p.gpu_selector_ = GpuSelector::kBestFit;
  } else if (spec.gpu_selector == "fgd") {
    p.gpu_selector_ = GpuSelector::kFgd;
    p.needs_distribution_ = true;
  } else {
    return InvalidArgument("gpu_selector", fmt::format("unknown GPU selector '{}'; known: "
                                                       "best-fit, fgd",
                                                       spec.gpu_selector));
  }
  if (spec.nodes_to_score < 0) {
    return InvalidArgument("nodes_to_score",
                           fmt::format("must be >= 0, got {}", spec.nodes_to_score));
  }
  p.nodes_to_score_ = spec.nodes_to_score;
  return p;
}

size_t Profile::NodesToScore(size_t n) const {
  if (nodes_to_score_ > 0) return static_cast<size_t>(nodes_to_score_);
  if (n <= 100) return n;
  // percentage = max(5, 50 - n / 125), as Kubernetes' adaptive percentageOfNodesToScore.
  const int64_t pct = std::max<int64_t>(5, 50 - static_cast<int64_t>(n) / 125);
  return std::max<size_t>(100, n * static_cast<size_t>(pct) / 100);
}

// --- GPU selection ---------------------------------------------------------------------------

namespace {

bool SelectWholeGpus(const Snapshot& s, const TaskRequest& req, NodeId n,
                     std::vector<GpuShare>* out) {
  const NodeInfo& info = s.cluster().node(n);
  const int want = req.resources->gpus;
  // Eligible GPUs grouped by NVLink domain (no allocation: this runs for every candidate node).
  constexpr int kMaxDomains = 64;
  constexpr int kMaxSlots = 256;
  int32_t domain_id[kMaxDomains];
  int domain_count[kMaxDomains];
  int num_domains = 0;
  uint16_t slots[kMaxSlots];
  int slot_domain[kMaxSlots];
  int eligible = 0;
  for (uint16_t k = 0; k < info.gpu_count && eligible < kMaxSlots; ++k) {
    const uint32_t g = info.gpu_begin + k;
    const GpuSlotInfo& slot = s.cluster().gpus()[g];
    if (slot.model != req.model || !s.gpu_usable(g) || s.gpu_free_milli(g) != kMilliPerGpu ||
        slot.memory_mib < req.resources->gpu_memory_mib) {
      continue;
    }
    int d = 0;
    while (d < num_domains && domain_id[d] != slot.nvlink_domain) ++d;
    if (d == num_domains) {
      if (num_domains == kMaxDomains)
        d = kMaxDomains - 1;  // lump the rest together
      else {
        domain_id[num_domains] = slot.nvlink_domain;
        domain_count[num_domains++] = 0;
      }
    }
    ++domain_count[d];
    slots[eligible] = k;
    slot_domain[eligible++] = d;
  }
  if (eligible < want) return false;
  // One domain when possible: the one with the fewest eligible GPUs that still holds the task, so
  // that larger free islands stay whole. Otherwise fill from the largest domains down.
  int best = -1;
  for (int d = 0; d < num_domains; ++d) {
    if (domain_count[d] >= want && (best < 0 || domain_count[d] < domain_count[best])) best = d;
  }
  out->clear();
  auto take = [&](int d, int count) {
    for (int i = 0; i < eligible && count > 0; ++i) {
      if (slot_domain[i] != d) continue;
      out->push_back({slots[i], static_cast<int16_t>(kMilliPerGpu),
                      s.gpu_free_memory(info.gpu_begin + slots[i])});
      --count;
    }
  };
  if (best >= 0) {
    take(best, want);
  } else {
    bool used[kMaxDomains] = {};
    int left = want;
    while (left > 0) {
      int pick = -1;
      for (int d = 0; d < num_domains; ++d) {
        if (!used[d] && (pick < 0 || domain_count[d] > domain_count[pick])) pick = d;
      }
      used[pick] = true;
      const int c = std::min(left, domain_count[pick]);
      take(pick, c);
      left -= c;
    }
    std::sort(out->begin(), out->end(),
              [](const GpuShare& a, const GpuShare& b) { return a.slot < b.slot; });
  }
  return true;
}

bool SelectShare(const PlacementContext& ctx, GpuSelector selector, const TaskRequest& req,
                 NodeId n, std::vector<GpuShare>* out) {
  const Snapshot& s = *ctx.snapshot;
  const NodeInfo& info = s.cluster().node(n);
  const TaskResources& r = *req.resources;
  const bool fgd = selector == GpuSelector::kFgd && ctx.distribution != nullptr &&
                   !ctx.distribution->classes.empty();
  int32_t free[256];
  uint16_t slot_of[256];
  int ng = 0;
  for (uint16_t k = 0; k < info.gpu_count && ng < 256; ++k) {
    const uint32_t g = info.gpu_begin + k;
    if (s.cluster().gpus()[g].model != req.model || !s.gpu_usable(g)) continue;
    free[ng] = s.gpu_free_milli(g);
    slot_of[ng] = k;
    ++ng;
  }
  int best = -1;
  double best_frag = 0;
  int32_t tried[256];  // free milli of the GPUs fgd evaluated: an equal one scores the same
  int num_tried = 0;
  for (int i = 0; i < ng; ++i) {
    const uint32_t g = info.gpu_begin + slot_of[i];
    if (free[i] < r.gpu_milli || s.gpu_free_memory(g) < r.gpu_memory_mib) continue;
    if (fgd) {
      // A later GPU with the same free milli gives the same fragmentation and loses the tie.
      if (std::find(tried, tried + num_tried, free[i]) != tried + num_tried) continue;
      tried[num_tried++] = free[i];
      free[i] -= r.gpu_milli;
      const double f = ContextFragmentation(ctx, req.model, s.free_cpu(n) - r.cpu_milli, free, ng);
      free[i] += r.gpu_milli;
      if (best < 0 || f < best_frag || (f == best_frag && free[i] < free[best])) {
        best = i;
        best_frag = f;
      }
    } else if (best < 0 || free[i] < free[best]) {
      best = i;  // best fit: the least free GPU that still holds the share
    }
  }
  if (best < 0) return false;
  out->assign(1, GpuShare{slot_of[best], static_cast<int16_t>(r.gpu_milli), r.gpu_memory_mib});
  return true;
}

}  // namespace

bool SelectGpus(const PlacementContext& ctx, GpuSelector selector, const TaskRequest& req, NodeId n,
                std::vector<GpuShare>* out) {
  out->clear();
  if (req.resources->gpus == 0) return true;
  if (req.resources->fractional()) return SelectShare(ctx, selector, req, n, out);
  return SelectWholeGpus(*ctx.snapshot, req, n, out);
}

// --- PlaceTask / PlaceGang -------------------------------------------------------------------

namespace {

FilterCode RunFilters(const Profile& profile, const PlacementContext& ctx, const TaskRequest& req,
                      NodeId n) {
  for (const auto& f : profile.filters()) {
    const FilterCode c = f->Filter(ctx, req, n);
    if (c != FilterCode::kOk) return c;
  }
  return FilterCode::kOk;
}

// Visits candidate nodes in the profile's order, one index bucket at a time. `visit(node)` returns
// false to stop; `bucket_done()` returns false to stop after a bucket.
template <typename Visit, typename BucketDone>
void ForEachCandidate(const Snapshot& s, const Profile& profile, const TaskRequest& req,
                      Visit&& visit, BucketDone&& bucket_done) {
  const TaskResources& r = *req.resources;
  if (r.gpus == 0) {
    s.schedulable_nodes().ForEach([&](uint32_t n) { return visit(NodeId(n)); });
    bucket_done();
    return;
  }
  const int max_k = s.max_free_bucket(req.model);
  if (max_k < 0) return;
  const bool ascending = profile.order() == CandidateOrder::kFewestFreeFirst;
  bool stop = false;
  auto visit_bucket = [&](const NodeSet& set, const NodeSet* skip) {
    set.ForEach([&](uint32_t n) {
      if (skip != nullptr && skip->Contains(n)) return true;
      if (!visit(NodeId(n))) stop = true;
      return !stop;
    });
    if (!stop && !bucket_done()) stop = true;
  };
  const int min_k = r.fractional() ? 1 : r.gpus;
  const NodeSet& partial = s.nodes_with_partial(req.model);
  if (r.fractional() && ascending) visit_bucket(partial, nullptr);
  const NodeSet* skip = r.fractional() ? &partial : nullptr;
  if (ascending) {
    for (int k = min_k; k <= max_k && !stop; ++k)
      visit_bucket(s.nodes_with_free(req.model, k), skip);
  } else {
    for (int k = max_k; k >= min_k && !stop; --k)
      visit_bucket(s.nodes_with_free(req.model, k), skip);
  }
  if (r.fractional() && !ascending && !stop) visit_bucket(partial, nullptr);
}

}  // namespace

void SpreadCounts::Add(NodeId n, uint32_t rack) {
  ++nodes[n.value()];
  if (rack != 0) ++racks[rack];
}

int32_t SpreadCounts::on_node(NodeId n) const {
  auto it = nodes.find(n.value());
  return it == nodes.end() ? 0 : it->second;
}

int32_t SpreadCounts::on_rack(uint32_t rack) const {
  if (rack == 0) return 0;
  auto it = racks.find(rack);
  return it == racks.end() ? 0 : it->second;
}

// penalty = node_tasks x B x (max tasks per rack + 1) + rack_tasks x B, where
// B = (sum of score weights + 1) x kMaxScore exceeds any difference of profile scores: so one
// task fewer on a node always wins over any number fewer on its rack, and either over any score.
int64_t SpreadPenalty(const Snapshot& snap, const Profile& profile, const TaskRequest& req,
                      NodeId n) {
  if (req.spread == nullptr) return 0;
  int64_t weights = 1;
  for (const auto& [plugin, weight] : profile.scores()) weights += std::max<int64_t>(weight, 0);
  const int64_t b = weights * kMaxScore;
  int64_t max_rack = 0;
  for (const auto& [rack, count] : req.spread->racks) max_rack = std::max<int64_t>(max_rack, count);
  const uint32_t rack = snap.cluster().node(n).rack;
  return int64_t{req.spread->on_node(n)} * b * (max_rack + 1) +
         int64_t{req.spread->on_rack(rack)} * b;
}

bool FindPlacement(const Snapshot& snap, const Profile& profile, const PlacementContext& ctx,
                   const TaskRequest& req, TaskPlacement* out, int64_t* score_out) {
  // A spread group looks at every feasible node: the one with fewest of its tasks may be anywhere.
  const size_t limit = req.spread != nullptr ? snap.cluster().num_nodes() + 1
                                             : profile.NodesToScore(snap.cluster().num_nodes());
  size_t feasible = 0;
  bool found = false;
  int64_t best_score = -1;
  NodeId best_node;
  std::vector<GpuShare> gpus;
  std::vector<GpuShare> best_gpus;
  ForEachCandidate(
      snap, profile, req,
      [&](NodeId n) {
        if (req.spread_distinct && req.spread != nullptr && req.spread->on_node(n) > 0) {
          return true;
        }
        if (RunFilters(profile, ctx, req, n) != FilterCode::kOk) return true;
        if (!SelectGpus(ctx, profile.gpu_selector(), req, n, &gpus)) return true;
        int64_t score = -SpreadPenalty(snap, profile, req, n);
        for (const auto& [plugin, weight] : profile.scores()) {
          score += weight * plugin->Score(ctx, req, n, gpus);
        }
        // Highest score wins and equal scores go to the lower node id, whatever the order the
        // candidates arrive in, so the choice is deterministic (and the same when a driver
        // compares the best of several models).
        if (!found || score > best_score || (score == best_score && n < best_node)) {
          found = true;
          best_score = score;
          best_node = n;
          best_gpus.swap(gpus);
        }
        return ++feasible < limit;
      },
      [&]() { return !(profile.stop_at_first_bucket() && found && req.spread == nullptr); });
  if (!found) return false;
  out->node = best_node;
  out->gpus = std::move(best_gpus);
  out->cpu_milli = req.resources->cpu_milli;
  out->memory_mib = req.resources->memory_mib;
  if (req.constraints != nullptr && req.constraints->exclusive) TakeWholeNode(snap, out);
  if (score_out != nullptr) *score_out = best_score;
  return true;
}

void TakeWholeNode(const Snapshot& snap, TaskPlacement* t) {
  // The exclusive filter admitted only a node with nothing allocated: its free capacity is all
  // of it.
  const NodeInfo& info = snap.cluster().node(t->node);
  t->gpus.clear();
  for (uint16_t s = 0; s < info.gpu_count; ++s) {
    const uint32_t g = info.gpu_begin + s;
    if (!snap.gpu_usable(g)) continue;
    t->gpus.push_back({s, static_cast<int16_t>(snap.gpu_free_milli(g)), snap.gpu_free_memory(g)});
  }
  t->cpu_milli = snap.free_cpu(t->node);
  t->memory_mib = snap.free_memory(t->node);
}

bool PlaceTask(Snapshot& snap, const Profile& profile, const PlacementContext& ctx,
               const TaskRequest& req, TaskPlacement* out) {
  if (!FindPlacement(snap, profile, ctx, req, out, nullptr)) return false;
  snap.Allocate(*out);
  return true;
}

bool PlaceGang(Snapshot& snap, const Profile& profile, const TaskDistribution* dist,
               const TaskRequest& req, int tasks, bool distinct_nodes,
               std::vector<TaskPlacement>* out, PlacementFailure* why,
               FragmentationCache* frag_cache) {
  GangState gang;
  gang.distinct_nodes = distinct_nodes;
  gang.tasks_total = tasks;
  PlacementContext ctx{&snap, &gang, dist, 0, frag_cache};
  Snapshot::Txn txn(snap);
  out->clear();
  out->reserve(static_cast<size_t>(tasks));
  for (int i = 0; i < tasks; ++i) {
    TaskPlacement t;
    if (!PlaceTask(snap, profile, ctx, req, &t)) {
      if (why != nullptr) why->tasks_placed = i;
      out->clear();
      return false;  // txn rolls every reservation of this gang back
    }
    const NodeInfo& info = snap.cluster().node(t.node);
    if (!gang.UsesNode(t.node)) gang.nodes.push_back(t.node);
    if (info.rack != 0 && !gang.UsesRack(info.rack)) gang.racks.push_back(info.rack);
    if (info.block != 0 && !gang.UsesBlock(info.block)) gang.blocks.push_back(info.block);
    out->push_back(std::move(t));
  }
  txn.Commit();
  return true;
}

FilterCounts DiagnoseTask(const Snapshot& snap, const Profile& profile, const TaskRequest& req,
                          int* best_free_whole, int32_t* best_free_milli) {
  FilterCounts counts;
  GangState gang;
  PlacementContext ctx{&snap, &gang, nullptr};
  *best_free_whole = 0;
  *best_free_milli = 0;
  for (size_t i = 0; i < snap.cluster().num_nodes(); ++i) {
    const NodeId n(static_cast<uint32_t>(i));
    FilterCode first = FilterCode::kOk;
    for (const auto& f : profile.filters()) {
      const FilterCode c = f->Filter(ctx, req, n);
      if (c == FilterCode::kOk) continue;
      if (first == FilterCode::kOk) first = c;
    }
    ++counts[first];
    // Best node among those the GPU-independent filters accept.
    const bool eligible =
        snap.cluster().node(n).schedulable() &&
        (req.resources->gpus == 0 || req.model == kNoModel || first == FilterCode::kOk ||
         first == FilterCode::kInsufficientGpu || first == FilterCode::kInsufficientGpuMemory ||
         first == FilterCode::kInsufficientCpu || first == FilterCode::kInsufficientMemory);
    if (eligible && req.model != kNoModel) {
      *best_free_whole = std::max(*best_free_whole, snap.full_free_gpus(n, req.model));
      const NodeInfo& info = snap.cluster().node(n);
      for (uint32_t g = info.gpu_begin; g < info.gpu_begin + info.gpu_count; ++g) {
        if (snap.cluster().gpus()[g].model == req.model && snap.gpu_usable(g)) {
          *best_free_milli = std::max(*best_free_milli, snap.gpu_free_milli(g));
        }
      }
    }
  }
  return counts;
}

}  // namespace arbiter::core
