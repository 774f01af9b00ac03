// Randomised invariant tests of RunCycle: random clusters, queue trees and backlogs, several
// cycles with jobs finishing in between, and after every cycle the rules a user relies on:
//   - no GPU above 1000 milli or its memory, no node above its CPU or RAM;
//   - no queue or tenant above its max on any dimension;
//   - every admission fitted the quota when it was made, and its borrowed part is exact;
//   - a gang is all or nothing (exactly `tasks` placements, distinct nodes when asked);
//   - placements honour models, health, node state, selectors and taints;
//   - every pending job is admitted or has exactly one verdict, at its position in its queue;
//   - a job told NoFeasibleNode / GangIncomplete really does not fit.
// Every failure names its seed; rerun one with --gtest_filter and the seed in SCOPED_TRACE.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/synthetic.h"
#include "common/rng.h"
#include "core/cycle/cycle.h"
#include "core/fairshare/fair_share.h"
#include "testing/printers.h"

namespace arbiter::core {
namespace {

constexpr int64_t kGib = 1024;

// A world and the model-level facts the checks use independently of the core's compiled form.
struct RandomWorld {
  std::vector<GpuModel> models;
  std::vector<Node> nodes;
  std::vector<QueueSpec> specs;
  Cluster cluster;
  QuotaTree tree;
  std::vector<Constraints> constraints{1};
  // Source of each interned constraint: selector and tolerations as the job gave them.
  std::vector<std::pair<std::map<std::string, std::string>, std::vector<Toleration>>> sources{1};
  std::vector<QueueId> leaves;
};

int64_t Pick(Rng& rng, std::initializer_list<int64_t> values) {
  return *(values.begin() + static_cast<std::ptrdiff_t>(rng.Uniform(values.size())));
}

bool Chance(Rng& rng, int percent) { return rng.Uniform(100) < static_cast<uint64_t>(percent); }

std::vector<Node> RandomNodes(Rng& rng, const std::vector<GpuModel>& models) {
  std::vector<Node> nodes;
  const int count = 3 + static_cast<int>(rng.Uniform(14));
  for (int i = 0; i < count; ++i) {
    Node n;
    n.name = fmt::format("node-{}", i);
    n.cpu_milli = 1000 * Pick(rng, {16, 32, 64, 128});
    n.memory_mib = kGib * Pick(rng, {128, 256, 512, 1024});
    n.rack = fmt::format("rack-{}", rng.Uniform(4));
    n.block = fmt::format("block-{}", rng.Uniform(2));
    n.labels["pool"] = Chance(rng, 70) ? "train" : "infer";
    if (Chance(rng, 15)) n.taints.push_back({"dedicated", "infer"});
    if (Chance(rng, 15)) {
      n.state = static_cast<NodeState>(1 + rng.Uniform(3));  // cordoned, draining or down
    }
    if (!Chance(rng, 10)) {  // else a CPU-only node
      const int gpus = static_cast<int>(Pick(rng, {1, 2, 4, 8, 8}));
      const size_t model = rng.Uniform(models.size());
      const size_t second = Chance(rng, 20) ? rng.Uniform(models.size()) : model;
      for (int g = 0; g < gpus; ++g) {
        const GpuModel& m = models[g < gpus / 2 ? model : second];
        Gpu gpu;
        gpu.index = g;
        gpu.model = m.name;
        gpu.memory_mib = Chance(rng, 10) ? m.memory_mib / 2 : m.memory_mib;
        gpu.healthy = !Chance(rng, 5);
        gpu.nvlink_domain = gpus >= 4 ? (g * 2 / gpus) : 0;
        n.gpus.push_back(gpu);
      }
    }
    nodes.push_back(std::move(n));
  }
  return nodes;
}

// Quota limits for one node of the tree, in milli-GPU, below `room` of guarantee.
void RandomLimits(Rng& rng, QueueSpec* s, int64_t* room, const std::vector<GpuModel>& models,
                  int64_t gpu_capacity) {
  if (Chance(rng, 70)) {
    QuotaLimits l;
    const int64_t g = *room > 0 ? 1000 * static_cast<int64_t>(rng.Uniform(*room / 1000 + 1)) : 0;
    l.guaranteed = g;
    *room -= g;
    if (Chance(rng, 50))
      l.max = g + 1000 * static_cast<int64_t>(rng.Uniform(gpu_capacity / 1000 + 1));
    if (Chance(rng, 30)) l.lending_limit = 1000 * static_cast<int64_t>(rng.Uniform(g / 1000 + 1));
    s->quota["gpu"] = l;
  }
  if (Chance(rng, 15)) {
    QuotaLimits l;
    l.max = 1000 * static_cast<int64_t>(rng.Uniform(5));
    s->quota["gpu:" + models[rng.Uniform(models.size())].name] = l;
  }
  if (Chance(rng, 10)) {
    QuotaLimits l;
    l.max = 1000 * Pick(rng, {8, 32, 128});
    s->quota["cpu"] = l;
  }
}

std::vector<QueueSpec> RandomTree(Rng& rng, const std::vector<GpuModel>& models,
                                  int64_t gpu_capacity) {
  std::vector<QueueSpec> specs;
  const int tenants = 1 + static_cast<int>(rng.Uniform(3));
  int64_t cluster_room = gpu_capacity;
  for (int t = 0; t < tenants; ++t) {
    QueueSpec tenant;
    tenant.name = fmt::format("tenant-{}", t);
    tenant.is_tenant = true;
    int64_t tenant_room = cluster_room / (tenants - t);
    RandomLimits(rng, &tenant, &cluster_room, models, gpu_capacity);
    if (tenant.quota.count("gpu") != 0 && tenant.quota["gpu"].guaranteed) {
      tenant_room = *tenant.quota["gpu"].guaranteed;
    } else {
      cluster_room -= tenant_room;
    }
    tenant.weight_milli = Pick(rng, {500, 1000, 1000, 3000});
    tenant.decay.half_life_seconds = Chance(rng, 30) ? 3600 : 0;
    specs.push_back(tenant);
    const int queues = 1 + static_cast<int>(rng.Uniform(3));
    for (int q = 0; q < queues; ++q) {
      QueueSpec s;
      s.name = fmt::format("queue-{}-{}", t, q);
      s.parent = tenant.name;
      s.weight_milli = Pick(rng, {500, 1000, 2000});
      s.decay.half_life_seconds = Chance(rng, 30) ? 1800 : 0;
      if (Chance(rng, 15)) s.allowed_types = {"training", "experiment"};
      RandomLimits(rng, &s, &tenant_room, models, gpu_capacity);
      // The leaves of an inner queue share its guarantee, or the tenant's when it has none.
      int64_t queue_room = 0;
      int64_t* leaf_room = &tenant_room;
      if (s.quota.count("gpu") != 0 && s.quota["gpu"].guaranteed) {
        queue_room = *s.quota["gpu"].guaranteed;
        leaf_room = &queue_room;
      }
      specs.push_back(s);
      if (Chance(rng, 20)) {  // an inner queue with two leaves
        for (int c = 0; c < 2; ++c) {
          QueueSpec leaf;
          leaf.name = fmt::format("{}-{}", s.name, c);
          leaf.parent = s.name;
          RandomLimits(rng, &leaf, leaf_room, models, gpu_capacity);
          specs.push_back(leaf);
        }
      }
    }
  }
  return specs;
}

uint32_t RandomConstraints(Rng& rng, RandomWorld& w) {
  std::map<std::string, std::string> selector;
  std::vector<Toleration> tolerations;
  const uint64_t kind = rng.Uniform(10);
  if (kind == 0) selector["pool"] = "train";
  if (kind == 1) selector["pool"] = "infer";
  if (kind == 2) selector["zone"] = "nowhere";  // matches no node
  if (kind == 3 || kind == 1) tolerations.push_back({"dedicated", Chance(rng, 50) ? "" : "infer"});
  if (selector.empty() && tolerations.empty()) return 0;
  w.constraints.push_back(w.cluster.MakeConstraints(selector, tolerations));
  w.sources.emplace_back(selector, tolerations);
  return static_cast<uint32_t>(w.constraints.size() - 1);
}

PendingJob RandomJob(Rng& rng, RandomWorld& w, uint64_t id, TimeMs now) {
  PendingJob j;
  j.id = JobId(id);
  j.submit_time = static_cast<TimeMs>(id * 10 + rng.Uniform(30));  // some ties and reorderings
  j.priority = static_cast<int32_t>(Pick(rng, {0, 0, 100, 1000}));
  if (Chance(rng, 3)) {
    j.queue = QueueId(static_cast<uint32_t>(rng.Uniform(w.tree.size() + 2)));  // any node
  } else {
    j.queue = w.leaves[rng.Uniform(w.leaves.size())];
  }
  const uint64_t kind = rng.Uniform(10);
  if (kind == 0) {  // CPU only
    j.resources.cpu_milli = 1000 * Pick(rng, {1, 4, 16, 64});
    j.resources.memory_mib = kGib * Pick(rng, {1, 16, 128});
  } else if (kind <= 2) {  // a share of one GPU
    j.resources.gpus = 1;
    j.resources.gpu_milli = static_cast<int32_t>(Pick(rng, {100, 250, 500, 750}));
    j.resources.gpu_memory_mib = kGib * Pick(rng, {0, 0, 8, 20, 40});
    j.resources.cpu_milli = 1000 * Pick(rng, {0, 2, 4});
    j.resources.memory_mib = kGib * Pick(rng, {0, 8});
  } else {  // whole GPUs
    j.resources.gpus = static_cast<int32_t>(Pick(rng, {1, 1, 2, 4, 8, 16}));
    j.resources.gpu_memory_mib = Chance(rng, 10) ? kGib * Pick(rng, {40, 80}) : 0;
    j.resources.cpu_milli = 1000 * j.resources.gpus * Pick(rng, {0, 4, 12});
    j.resources.memory_mib = kGib * j.resources.gpus * Pick(rng, {0, 32, 96});
  }
  if (Chance(rng, 20)) {
    j.tasks = static_cast<int32_t>(2 + rng.Uniform(3));
    j.distinct_nodes = Chance(rng, 50);
  }
  if (j.resources.gpus > 0 && Chance(rng, 60)) {
    std::vector<uint16_t> all;
    for (size_t m = 0; m < w.models.size(); ++m) all.push_back(static_cast<uint16_t>(m));
    for (size_t k = all.size(); k > 1; --k) std::swap(all[k - 1], all[rng.Uniform(k)]);
    const size_t take = 1 + rng.Uniform(all.size());
    for (size_t k = 0; k < take; ++k) j.models.emplace_back(all[k]);
  }
  j.constraints = RandomConstraints(rng, w);
  j.type = static_cast<JobType>(rng.Uniform(6));
  j.suspended = Chance(rng, 3);
  if (Chance(rng, 4)) j.not_before = now + static_cast<TimeMs>(rng.Uniform(120000));
  if (Chance(rng, 3)) j.not_before = now;  // a backoff that just ended
  j.walltime = Chance(rng, 50) ? SecondsToMs(60 * Pick(rng, {5, 30, 120})) : 0;
  j.preemptible = !Chance(rng, 10);
  return j;
}

void CollectLeaves(RandomWorld& w) {
  w.leaves.clear();
  for (uint32_t q = 1; q < w.tree.size(); ++q) {
    if (w.tree.node(QueueId(q)).is_leaf()) w.leaves.emplace_back(q);
  }
}

RandomWorld MakeRandomWorld(Rng& rng) {
  RandomWorld w;
  const std::vector<GpuModel> all = {
      {"a100", 80 * kGib, 0}, {"h100", 80 * kGib, 0}, {"l4", 24 * kGib, 0}};
  w.models.assign(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(1 + rng.Uniform(3)));
  w.nodes = RandomNodes(rng, w.models);
  w.cluster = *Cluster::Build(w.models, w.nodes);
  w.specs = RandomTree(rng, w.models, w.cluster.capacity()[kDimGpu]);
  Result<QuotaTree> tree = QuotaTree::Build(w.specs, w.models);
  ARBITER_CHECK(tree.ok(), tree.status().ToString());
  w.tree = std::move(tree).value();
  CollectLeaves(w);
  return w;
}

RandomWorld FromSynthetic(const bench::SyntheticWorld& s) {
  RandomWorld w;
  w.models = s.models;
  w.nodes = s.nodes;
  w.specs = s.queues;
  w.cluster = *Cluster::Build(w.models, w.nodes);
  w.tree = *QuotaTree::Build(w.specs, w.models);
  CollectLeaves(w);
  return w;
}

// --- Independent accounting ------------------------------------------------------------------

struct Load {
  std::vector<int64_t> gpu_milli;  // by global GPU slot
  std::vector<int64_t> gpu_memory;
  std::vector<int64_t> cpu;  // by node
  std::vector<int64_t> memory;
};

Load LoadOf(const Cluster& c, const std::vector<RunningJob>& running) {
  Load l;
  l.gpu_milli.assign(c.gpus().size(), 0);
  l.gpu_memory.assign(c.gpus().size(), 0);
  l.cpu.assign(c.num_nodes(), 0);
  l.memory.assign(c.num_nodes(), 0);
  for (const RunningJob& r : running) {
    for (const TaskPlacement& t : r.tasks) {
      l.cpu[t.node.value()] += t.cpu_milli;
      l.memory[t.node.value()] += t.memory_mib;
      for (const GpuShare& g : t.gpus) {
        const uint32_t s = c.node(t.node).gpu_begin + g.slot;
        l.gpu_milli[s] += g.milli;
        l.gpu_memory[s] += g.memory_mib;
      }
    }
  }
  return l;
}

QuotaState QuotaOf(const RandomWorld& w, const std::vector<RunningJob>& running) {
  QuotaState q(w.tree, w.cluster.capacity());
  for (const RunningJob& r : running) {
    q.Add(r.queue, JobQuotaRequest(r.resources, static_cast<int32_t>(r.tasks.size()), r.model));
  }
  return q;
}

bool SelectorMatches(const Node& n, const std::map<std::string, std::string>& selector) {
  for (const auto& [k, v] : selector) {
    auto it = n.labels.find(k);
    if (it == n.labels.end() || it->second != v) return false;
  }
  return true;
}

bool Tolerated(const Node& n, const std::vector<Toleration>& tolerations) {
  for (const Taint& t : n.taints) {
    bool ok = false;
    for (const Toleration& tol : tolerations) {
      ok = ok || (tol.key == t.key && (tol.value.empty() || tol.value == t.value));
    }
    if (!ok) return false;
  }
  return true;
}

std::vector<GpuModelId> CandidateModels(const RandomWorld& w, const PendingJob& j) {
  if (j.resources.gpus == 0) return {kNoModel};
  if (!j.models.empty()) return j.models;
  std::vector<GpuModelId> all;
  for (size_t m = 0; m < w.models.size(); ++m) all.emplace_back(static_cast<uint16_t>(m));
  return all;
}

// How many tasks of j could still start on model m, given the load: the brute-force answer that
// a NoFeasibleNode or GangIncomplete verdict must agree with.
int64_t TaskSlots(const RandomWorld& w, const Load& load, const PendingJob& j, GpuModelId m) {
  const TaskResources& r = j.resources;
  const auto& src = w.sources[j.constraints < w.sources.size() ? j.constraints : 0];
  constexpr int64_t kMany = 1 << 20;
  int64_t total = 0;
  for (size_t i = 0; i < w.cluster.num_nodes(); ++i) {
    const NodeInfo& info = w.cluster.nodes()[i];
    const Node& node = w.nodes[i];
    if (!info.schedulable() || !SelectorMatches(node, src.first) || !Tolerated(node, src.second)) {
      continue;
    }
    const int64_t cpu_free = info.cpu_milli - load.cpu[i];
    const int64_t mem_free = info.memory_mib - load.memory[i];
    int64_t slots = kMany;
    if (r.cpu_milli > 0) slots = std::min(slots, cpu_free / r.cpu_milli);
    if (r.memory_mib > 0) slots = std::min(slots, mem_free / r.memory_mib);
    if (r.gpus > 0) {
      int64_t gpu_slots = 0;
      for (uint32_t s = info.gpu_begin; s < info.gpu_begin + info.gpu_count; ++s) {
        const GpuSlotInfo& g = w.cluster.gpus()[s];
        if (g.model != m || !g.healthy) continue;
        const int64_t free = kMilliPerGpu - load.gpu_milli[s];
        const int64_t free_mem = g.memory_mib - load.gpu_memory[s];
        if (r.fractional()) {
          int64_t k = free / r.gpu_milli;
          if (r.gpu_memory_mib > 0) k = std::min(k, free_mem / r.gpu_memory_mib);
          gpu_slots += std::max<int64_t>(0, k);
        } else if (free == kMilliPerGpu && g.memory_mib >= r.gpu_memory_mib) {
          ++gpu_slots;
        }
      }
      if (!r.fractional()) gpu_slots /= r.gpus;
      slots = std::min(slots, gpu_slots);
    }
    slots = std::max<int64_t>(0, slots);
    total += j.distinct_nodes ? std::min<int64_t>(1, slots) : std::min(slots, kMany);
  }
  return total;
}

// --- The checks ------------------------------------------------------------------------------

// What the runs exercised, so that a generator that stops producing some case fails loudly.
struct Coverage {
  int64_t admissions = 0;
  int64_t gang_admissions = 0;
  int64_t fractional_admissions = 0;
  int64_t borrowing_admissions = 0;
  int64_t preemptions = 0;
  int64_t reservations = 0;
  int64_t false_negative_checks = 0;
  std::map<VerdictCode, int64_t> verdicts;
};

struct Driver {
  bool preemption = true;
  std::string profile = "binpack";
};

class Checker {
 public:
  Checker(const RandomWorld& w, const CycleInput& in, const CycleResult& r, bool exact_quota,
          Coverage* cov)
      : w_(w), in_(in), r_(r), exact_quota_(exact_quota), cov_(cov) {
    for (const PendingJob& j : *in.pending) pending_.emplace(j.id.value(), &j);
  }

  void Run() {
    for (const Admission& a : r_.admissions) {
      const PendingJob& j = *pending_.at(a.job.value());
      ++cov_->admissions;
      cov_->gang_admissions += j.tasks > 1 ? 1 : 0;
      cov_->fractional_admissions += j.resources.fractional() ? 1 : 0;
      cov_->borrowing_admissions += a.borrowing() ? 1 : 0;
    }
    for (const Verdict& v : r_.verdicts) ++cov_->verdicts[v.code];
    cov_->preemptions += static_cast<int64_t>(r_.preemptions.size());
    cov_->reservations += static_cast<int64_t>(r_.reservations.size());
    Answers();
    Positions();
    Preemptions();
    std::vector<RunningJob> after = *in_.running;
    ApplyAdmissions(in_, r_, in_.now, &after);
    for (const Admission& a : r_.admissions) Shape(a);
    Capacity(after);
    Quota(after);
    if (exact_quota_) {
      Replay();
      NoFalseNegatives(after);
    }
  }

 private:
  // Every pending job is admitted or has exactly one verdict; verdict codes match the job.
  void Answers() {
    std::map<uint64_t, int> answers;
    for (const Admission& a : r_.admissions) ++answers[a.job.value()];
    for (const Verdict& v : r_.verdicts) {
      ++answers[v.job.value()];
      ASSERT_TRUE(pending_.count(v.job.value())) << "verdict for unknown job " << v.job.value();
      EXPECT_FALSE(v.message.empty()) << "job " << v.job.value();
      const PendingJob& j = *pending_.at(v.job.value());
      const bool leaf = j.queue.value() != 0 && j.queue.value() < w_.tree.size() &&
                        w_.tree.node(j.queue).is_leaf();
      if (!leaf) {
        EXPECT_EQ(v.code, VerdictCode::kNotAllowed) << "job " << j.id.value();
        EXPECT_EQ(v.position, 0);
      } else if (j.suspended) {
        EXPECT_EQ(v.code, VerdictCode::kSuspended) << "job " << j.id.value();
      } else if (j.not_before > in_.now) {
        EXPECT_EQ(v.code, VerdictCode::kBackoff) << "job " << j.id.value();
        EXPECT_EQ(v.estimated_start, j.not_before);
      }
    }
    for (const Admission& a : r_.admissions) {
      ASSERT_TRUE(pending_.count(a.job.value())) << "admission of unknown job " << a.job.value();
      const PendingJob& j = *pending_.at(a.job.value());
      EXPECT_FALSE(j.suspended) << "job " << j.id.value();
      EXPECT_LE(j.not_before, in_.now) << "job " << j.id.value();
      EXPECT_EQ(a.queue, j.queue);
      const uint32_t mask = w_.tree.node(j.queue).allowed_types_mask;
      EXPECT_TRUE(mask == 0 || (mask >> static_cast<unsigned>(j.type)) & 1u)
          << "job " << j.id.value() << " of a type its queue does not take";
    }
    EXPECT_EQ(answers.size(), pending_.size());
    for (const auto& [job, n] : answers) EXPECT_EQ(n, 1) << "job " << job << " answered " << n;
  }

  // A victim is a running, preemptible job past its minimum runtime, not already stopping, and
  // chosen once; its preemptor waits with a verdict.
  void Preemptions() {
    std::map<uint64_t, const RunningJob*> running;
    for (const RunningJob& r : *in_.running) running.emplace(r.id.value(), &r);
    std::set<uint64_t> chosen;
    for (const PreemptionDecision& p : r_.preemptions) {
      SCOPED_TRACE(fmt::format("preemption by job {}", p.preemptor.value()));
      EXPECT_FALSE(p.victims.empty());
      const Verdict* v = nullptr;
      for (const Verdict& x : r_.verdicts) v = x.job == p.preemptor ? &x : v;
      ASSERT_NE(v, nullptr) << "the preemptor has no verdict";
      EXPECT_EQ(v->code, VerdictCode::kWaitingForReservation);
      for (JobId id : p.victims) {
        ASSERT_TRUE(running.count(id.value())) << "victim " << id.value() << " is not running";
        const RunningJob& victim = *running.at(id.value());
        EXPECT_TRUE(victim.preemptible) << "victim " << id.value();
        EXPECT_FALSE(victim.terminating) << "victim " << id.value();
        EXPECT_GE(in_.now - victim.start_time, victim.min_runtime) << "victim " << id.value();
        EXPECT_TRUE(chosen.insert(id.value()).second) << "victim " << id.value() << " twice";
      }
    }
  }

  // A verdict's position is the job's 1-based place in its queue's order.
  void Positions() {
    std::map<uint32_t, std::vector<const PendingJob*>> by_queue;
    for (const PendingJob& j : *in_.pending) by_queue[j.queue.value()].push_back(&j);
    std::map<uint64_t, int32_t> want;
    for (auto& [q, jobs] : by_queue) {
      std::sort(jobs.begin(), jobs.end(), [](const PendingJob* a, const PendingJob* b) {
        if (a->priority != b->priority) return a->priority > b->priority;
        if (a->submit_time != b->submit_time) return a->submit_time < b->submit_time;
        return a->id < b->id;
      });
      for (size_t k = 0; k < jobs.size(); ++k) {
        want[jobs[k]->id.value()] = static_cast<int32_t>(k + 1);
      }
    }
    for (const Verdict& v : r_.verdicts) {
      if (v.position == 0) continue;
      EXPECT_EQ(v.position, want[v.job.value()]) << "job " << v.job.value();
    }
  }

  // Gangs are all or nothing; each task is where the job may run.
  void Shape(const Admission& a) {
    const PendingJob& j = *pending_.at(a.job.value());
    SCOPED_TRACE(fmt::format("admission of job {}", j.id.value()));
    ASSERT_EQ(a.tasks.size(), static_cast<size_t>(j.tasks));
    const std::vector<GpuModelId> allowed = CandidateModels(w_, j);
    EXPECT_NE(std::find(allowed.begin(), allowed.end(), a.model), allowed.end());
    std::set<uint32_t> nodes;
    const auto& src = w_.sources[j.constraints];
    for (const TaskPlacement& t : a.tasks) {
      ASSERT_LT(t.node.value(), w_.cluster.num_nodes());
      const NodeInfo& info = w_.cluster.node(t.node);
      const Node& node = w_.nodes[t.node.value()];
      nodes.insert(t.node.value());
      EXPECT_TRUE(info.schedulable()) << info.name;
      EXPECT_TRUE(SelectorMatches(node, src.first)) << info.name;
      EXPECT_TRUE(Tolerated(node, src.second)) << info.name;
      EXPECT_EQ(t.cpu_milli, j.resources.cpu_milli);
      EXPECT_EQ(t.memory_mib, j.resources.memory_mib);
      if (j.resources.gpus == 0) {
        EXPECT_TRUE(t.gpus.empty());
        continue;
      }
      const size_t want = j.resources.fractional() ? 1 : static_cast<size_t>(j.resources.gpus);
      ASSERT_EQ(t.gpus.size(), want);
      std::set<uint16_t> slots;
      for (const GpuShare& g : t.gpus) {
        ASSERT_LT(g.slot, info.gpu_count);
        const GpuSlotInfo& slot = w_.cluster.gpus()[info.gpu_begin + g.slot];
        EXPECT_TRUE(slots.insert(g.slot).second) << "GPU used twice by one task";
        EXPECT_EQ(slot.model, a.model);
        EXPECT_TRUE(slot.healthy) << info.name << " GPU " << g.slot;
        EXPECT_EQ(g.milli, j.resources.gpu_milli);
        if (j.resources.fractional()) {
          EXPECT_EQ(g.memory_mib, j.resources.gpu_memory_mib);
        } else {
          EXPECT_GE(slot.memory_mib, j.resources.gpu_memory_mib);
        }
      }
    }
    if (j.distinct_nodes) {
      EXPECT_EQ(nodes.size(), a.tasks.size()) << "tasks share a node";
    }
  }

  void Capacity(const std::vector<RunningJob>& after) {
    const Load l = LoadOf(w_.cluster, after);
    for (uint32_t s = 0; s < w_.cluster.gpus().size(); ++s) {
      EXPECT_LE(l.gpu_milli[s], kMilliPerGpu) << "GPU slot " << s << ": " << WhoUses(after, s);
      EXPECT_LE(l.gpu_memory[s], w_.cluster.gpus()[s].memory_mib) << "GPU slot " << s;
    }
    for (size_t n = 0; n < w_.cluster.num_nodes(); ++n) {
      EXPECT_LE(l.cpu[n], w_.cluster.nodes()[n].cpu_milli) << w_.cluster.nodes()[n].name;
      EXPECT_LE(l.memory[n], w_.cluster.nodes()[n].memory_mib) << w_.cluster.nodes()[n].name;
    }
  }

  // The jobs on a GPU slot, for failure messages: id, milli, and whether it is admitted now, a
  // preemption victim of this cycle or already terminating.
  std::string WhoUses(const std::vector<RunningJob>& after, uint32_t slot) const {
    std::set<uint64_t> victims;
    for (const PreemptionDecision& p : r_.preemptions) {
      for (JobId v : p.victims) victims.insert(v.value());
    }
    std::string out;
    for (size_t i = 0; i < after.size(); ++i) {
      for (const TaskPlacement& t : after[i].tasks) {
        for (const GpuShare& g : t.gpus) {
          if (w_.cluster.node(t.node).gpu_begin + g.slot != slot) continue;
          out += fmt::format("job {} ({} milli{}{}{}) ", after[i].id.value(), g.milli,
                             i >= in_.running->size() ? ", admitted now" : "",
                             victims.count(after[i].id.value()) ? ", victim now" : "",
                             after[i].terminating ? ", terminating" : "");
        }
      }
    }
    return out;
  }

  // No node of the tree above its max; the cluster's pool never overdrawn by this cycle. A job
  // being preempted gives its quota to its preemptor when chosen (it stops within its grace
  // period), so it does not count here.
  void Quota(const std::vector<RunningJob>& after) {
    const QuotaState before = QuotaOf(w_, Staying(*in_.running));
    const QuotaState now = QuotaOf(w_, Staying(after));
    for (uint32_t n = 0; n < w_.tree.size(); ++n) {
      const QuotaNode& node = w_.tree.node(QueueId(n));
      for (int d = 0; d < w_.tree.num_dims(); ++d) {
        EXPECT_LE(now.usage(QueueId(n))[d], std::max(node.max[d], before.usage(QueueId(n))[d]))
            << node.name << " above its max on " << w_.tree.DimName(d);
      }
    }
    if (!exact_quota_) return;
    for (int d = 0; d < w_.tree.num_dims(); ++d) {
      EXPECT_GE(now.Available(QuotaTree::kRoot, d),
                std::min<int64_t>(0, before.Available(QuotaTree::kRoot, d)))
          << "the cluster's pool is overdrawn on " << w_.tree.DimName(d);
    }
  }

  std::vector<RunningJob> Staying(const std::vector<RunningJob>& jobs) const {
    std::set<uint64_t> victims;
    for (const PreemptionDecision& p : r_.preemptions) {
      for (JobId v : p.victims) victims.insert(v.value());
    }
    std::vector<RunningJob> out;
    for (const RunningJob& j : jobs) {
      if (!j.terminating && victims.count(j.id.value()) == 0) out.push_back(j);
    }
    return out;
  }

  // Replays the admissions on the quota, in order: each fitted when it was made, and its borrowed
  // part is what it took above the guarantee of the node that accounts each dimension.
  void Replay() {
    QuotaState q = QuotaOf(w_, *in_.running);
    for (const Admission& a : r_.admissions) {
      const PendingJob& j = *pending_.at(a.job.value());
      SCOPED_TRACE(fmt::format("admission of job {}", j.id.value()));
      const QuotaVec r = JobQuotaRequest(j.resources, j.tasks, a.model);
      const QuotaFailure f = q.Check(j.queue, r);
      EXPECT_TRUE(f.ok()) << "admitted beyond its quota: " << QuotaFailureKindName(f.kind) << " at "
                          << w_.tree.node(f.node).name << " on " << w_.tree.DimName(f.dim);
      for (int d = 0; d < w_.tree.num_dims(); ++d) {
        QueueId acc = j.queue;
        while (acc != QuotaTree::kRoot && !w_.tree.node(acc).configured[static_cast<size_t>(d)]) {
          acc = w_.tree.node(acc).parent;
        }
        int64_t want = 0;
        if (acc != QuotaTree::kRoot && r[d] > 0) {
          const int64_t g = w_.tree.node(acc).guaranteed[d];
          const int64_t u = q.usage(acc)[d];
          want = std::max<int64_t>(0, u + r[d] - g) - std::max<int64_t>(0, u - g);
        }
        EXPECT_EQ(a.borrowed[d], want) << w_.tree.DimName(d);
        EXPECT_GE(a.borrowed[d], 0);
        EXPECT_LE(a.borrowed[d], r[d]);
      }
      q.Add(j.queue, r);
    }
  }

  // A job with one candidate model that was told it does not fit indeed does not fit, even after
  // the cycle (capacity only shrinks within a cycle).
  void NoFalseNegatives(const std::vector<RunningJob>& after) {
    const Load load = LoadOf(w_.cluster, after);
    for (const Verdict& v : r_.verdicts) {
      if (v.code != VerdictCode::kNoFeasibleNode && v.code != VerdictCode::kGangIncomplete) {
        continue;
      }
      const PendingJob& j = *pending_.at(v.job.value());
      const std::vector<GpuModelId> models = CandidateModels(w_, j);
      if (models.size() != 1) continue;
      ++cov_->false_negative_checks;
      EXPECT_LT(TaskSlots(w_, load, j, models[0]), j.tasks)
          << "job " << j.id.value() << " was told " << VerdictCodeName(v.code) << " (" << v.message
          << ") but fits";
    }
  }

  const RandomWorld& w_;
  const CycleInput& in_;
  const CycleResult& r_;
  bool exact_quota_;
  Coverage* cov_;
  std::map<uint64_t, const PendingJob*> pending_;
};

// Runs `cycles` cycles: after each, admitted jobs start, preempted victims stop before the next
// cycle, some running jobs finish and new jobs arrive.
void RunCycles(RandomWorld& w, std::vector<PendingJob> pending, Rng& rng, const Driver& d,
               int cycles, uint64_t* next_id, Coverage* cov) {
  const Result<ProfileSpec> spec = Profile::Named(d.profile);
  ASSERT_TRUE(spec.ok());
  const Result<Profile> profile = Profile::Build(*spec);
  ASSERT_TRUE(profile.ok());
  std::vector<RunningJob> running;
  std::vector<Nomination> nominations;
  std::vector<QuotaVec> history(w.tree.size());
  TimeMs now = SecondsToMs(600);
  for (int cycle = 0; cycle < cycles; ++cycle) {
    SCOPED_TRACE(
        fmt::format("cycle {} ({} pending, {} running)", cycle, pending.size(), running.size()));
    CycleInput in;
    in.cluster = &w.cluster;
    in.tree = &w.tree;
    in.running = &running;
    in.pending = &pending;
    in.constraints = &w.constraints;
    in.usage_history = &history;
    in.nominations = &nominations;
    in.preemption.enabled = d.preemption;
    in.now = now;
    in.seed = rng.Next();
    const CycleResult r = RunCycle(in, *profile);
    Checker(w, in, r, !d.preemption, cov).Run();
    if (::testing::Test::HasFailure()) return;
    if (cycle == 0) {
      const CycleResult again = RunCycle(in, *profile);
      ASSERT_EQ(again.admissions.size(), r.admissions.size()) << "not deterministic";
      for (size_t i = 0; i < r.admissions.size(); ++i) {
        EXPECT_EQ(again.admissions[i].job, r.admissions[i].job);
        EXPECT_EQ(again.admissions[i].tasks, r.admissions[i].tasks);
      }
    }

    // The driver: start the admitted, stop the preempted, let some finish, queue new work.
    ApplyAdmissions(in, r, now, &running);
    ApplyPreemptions(r, &running);
    std::set<uint64_t> done;
    for (const Admission& a : r.admissions) done.insert(a.job.value());
    for (JobId id : r.finished_nominations) {
      nominations.erase(std::remove_if(nominations.begin(), nominations.end(),
                                       [&](const Nomination& n) { return n.preemptor == id; }),
                        nominations.end());
    }
    for (const PreemptionDecision& p : r.preemptions)
      nominations.push_back({p.preemptor, p.victims, p.tasks, p.model});
    const QuotaState usage = QuotaOf(w, running);
    for (uint32_t q = 0; q < w.tree.size(); ++q) {
      history[q] = DecayUsage(history[q], usage.usage(QueueId(q)), SecondsToMs(120), 3600,
                              w.tree.num_dims());
    }
    running.erase(
        std::remove_if(running.begin(), running.end(),
                       [&](const RunningJob& j) { return j.terminating || rng.Uniform(100) < 30; }),
        running.end());
    pending.erase(std::remove_if(pending.begin(), pending.end(),
                                 [&](const PendingJob& j) { return done.count(j.id.value()) > 0; }),
                  pending.end());
    now += SecondsToMs(120);
    const int arrivals = static_cast<int>(rng.Uniform(15));
    for (int i = 0; i < arrivals; ++i) pending.push_back(RandomJob(rng, w, (*next_id)++, now));
  }
}

const std::vector<std::string>& Policies() {
  static const std::vector<std::string> p = Profile::NamedProfiles();
  return p;
}

void RunSmallWorlds(bool preemption, uint64_t first_seed, uint64_t seeds, Coverage* cov) {
  for (uint64_t seed = first_seed; seed < first_seed + seeds; ++seed) {
    Rng rng(seed);
    RandomWorld w = MakeRandomWorld(rng);
    Driver d;
    d.preemption = preemption;
    d.profile = Policies()[seed % Policies().size()];
    SCOPED_TRACE(fmt::format("seed {} (policy {}, {} nodes, {} queues, {} models)", seed, d.profile,
                             w.nodes.size(), w.tree.size() - 1, w.models.size()));
    uint64_t next_id = 1;
    std::vector<PendingJob> pending;
    const int jobs = 10 + static_cast<int>(rng.Uniform(70));
    for (int i = 0; i < jobs; ++i) pending.push_back(RandomJob(rng, w, next_id++, 0));
    RunCycles(w, std::move(pending), rng, d, 6, &next_id, cov);
    if (::testing::Test::HasFailure()) return;
  }
}

std::string Describe(const Coverage& c) {
  std::string v;
  for (const auto& [code, n] : c.verdicts) v += fmt::format(" {}={}", VerdictCodeName(code), n);
  return fmt::format(
      "admissions={} gangs={} fractional={} borrowing={} preemptions={} reservations={} "
      "false-negative checks={} verdicts:{}",
      c.admissions, c.gang_admissions, c.fractional_admissions, c.borrowing_admissions,
      c.preemptions, c.reservations, c.false_negative_checks, v);
}

// The generator must keep producing the cases the checks are about.
void ExpectCovered(const Coverage& c, bool preemption) {
  std::printf("%s\n", Describe(c).c_str());
  EXPECT_GT(c.gang_admissions, 500);
  EXPECT_GT(c.fractional_admissions, 500);
  EXPECT_GT(c.borrowing_admissions, 500);
  EXPECT_GT(c.reservations, 100);
  for (VerdictCode code :
       {VerdictCode::kQuotaExceeded, VerdictCode::kBorrowLimit, VerdictCode::kNoFeasibleNode,
        VerdictCode::kGangIncomplete, VerdictCode::kSuspended, VerdictCode::kBackoff,
        VerdictCode::kNotAllowed}) {
    EXPECT_GT(c.verdicts.count(code) ? c.verdicts.at(code) : 0, 100) << VerdictCodeName(code);
  }
  if (preemption) {
    EXPECT_GT(c.preemptions, 50);
  } else {
    EXPECT_GT(c.false_negative_checks, 1000);
  }
}

TEST(CycleRandomTest, InvariantsHoldWithoutPreemption) {
  Coverage cov;
  RunSmallWorlds(false, 1, 800, &cov);
  ExpectCovered(cov, false);
}

TEST(CycleRandomTest, InvariantsHoldWithPreemption) {
  Coverage cov;
  RunSmallWorlds(true, 100001, 800, &cov);
  ExpectCovered(cov, true);
}

TEST(CycleRandomTest, InvariantsHoldOnSyntheticWorlds) {
  Coverage cov;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    bench::SyntheticSpec spec;
    spec.nodes = 40;
    spec.gpus_per_node = 8;
    spec.models = 1 + static_cast<int>(seed % 3);
    spec.queues = 12;
    spec.jobs = 400;
    spec.seed = seed;
    Result<bench::SyntheticWorld> s = bench::MakeSyntheticWorld(spec);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    RandomWorld w = FromSynthetic(*s);
    Rng rng(seed);
    Driver d;
    d.preemption = seed % 2 == 0;
    d.profile = Policies()[seed % Policies().size()];
    SCOPED_TRACE(
        fmt::format("synthetic seed {} (policy {}, preemption {})", seed, d.profile, d.preemption));
    uint64_t next_id = s->pending.size() + 1;
    RunCycles(w, s->pending, rng, d, 4, &next_id, &cov);
    if (HasFailure()) return;
  }
  std::printf("%s\n", Describe(cov).c_str());
}

}  // namespace
}  // namespace arbiter::core
