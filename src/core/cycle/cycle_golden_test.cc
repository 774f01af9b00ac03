// Golden determinism test: a fixed synthetic world and seed, two cycles (the second with running
// jobs, walltimes, reservations and preemption), every decision rendered as text and hashed. The
// hashes are pinned: a change in them is a change in scheduling decisions. When one is intended,
// say why in the commit and update kGolden with the value the failure prints.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench/synthetic.h"
#include "core/cycle/cycle.h"

namespace arbiter::core {
namespace {

uint64_t Fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ULL;
  return h;
}

std::string RenderTasks(const Cluster& cluster, const std::vector<TaskPlacement>& tasks) {
  std::string out;
  for (const TaskPlacement& t : tasks) {
    out += " " + cluster.node(t.node).name + "[";
    for (size_t i = 0; i < t.gpus.size(); ++i) {
      out += fmt::format("{}{}", i == 0 ? "" : ",", t.gpus[i].slot);
      if (t.gpus[i].milli != kMilliPerGpu) out += fmt::format(":{}", t.gpus[i].milli);
    }
    out += "]";
  }
  return out;
}

// One line per decision: admissions (job, queue, model, where), verdicts (code and position),
// preemptions and reservations.
std::string Render(const Cluster& cluster, const QuotaTree& tree, const CycleResult& r) {
  std::string out;
  for (const Admission& a : r.admissions) {
    out += fmt::format("admit {} {} {}:{}\n", a.job.value(), tree.node(a.queue).name,
                       a.model == kNoModel ? "cpu" : cluster.models()[a.model.value()].name,
                       RenderTasks(cluster, a.tasks));
  }
  for (const Verdict& v : r.verdicts) {
    out += fmt::format("verdict {} {} {}\n", v.job.value(), VerdictCodeName(v.code), v.position);
  }
  for (const PreemptionDecision& p : r.preemptions) {
    out += fmt::format("preempt {} {}:", p.preemptor.value(), PreemptionReasonName(p.reason));
    for (JobId v : p.victims) out += fmt::format(" {}", v.value());
    out += "\n";
  }
  for (const Reservation& res : r.reservations) {
    out += fmt::format("reserve {} at {}:{}\n", res.job.value(), res.start,
                       RenderTasks(cluster, res.tasks));
  }
  return out;
}

struct GoldenRun {
  std::string text;
  size_t admissions = 0;
  size_t verdicts = 0;
};

GoldenRun RunGolden(const std::string& policy) {
  bench::SyntheticSpec spec;
  spec.nodes = 48;
  spec.gpus_per_node = 8;
  spec.models = 2;
  spec.queues = 6;
  spec.jobs = 300;
  spec.seed = 7;
  Result<bench::SyntheticWorld> world = bench::MakeSyntheticWorld(spec);
  ARBITER_CHECK(world.ok(), world.status().ToString());
  const Result<Profile> profile = Profile::Build(*Profile::Named(policy));
  ARBITER_CHECK(profile.ok(), profile.status().ToString());
  GoldenRun run;

  // Cycle 1: the whole backlog into an empty cluster.
  std::vector<RunningJob> running;
  std::vector<PendingJob> pending = world->pending;
  CycleInput in;
  in.cluster = &world->cluster;
  in.tree = &world->tree;
  in.running = &running;
  in.pending = &pending;
  in.now = 0;
  in.seed = spec.seed;
  const CycleResult first = RunCycle(in, *profile);
  run.text = "cycle 1\n" + Render(world->cluster, world->tree, first);
  run.admissions += first.admissions.size();
  run.verdicts += first.verdicts.size();

  // Cycle 2, two hours later: what started runs (some past their walltime's end are gone), the
  // rest waits with 100 new jobs of a higher-priority mix.
  ApplyAdmissions(in, first, 0, &running);
  std::vector<RunningJob> still;
  for (const RunningJob& r : running) {
    if (r.walltime > SecondsToMs(7200)) still.push_back(r);
  }
  running = std::move(still);
  std::vector<PendingJob> next;
  for (const PendingJob& j : pending) {
    bool admitted = false;
    for (const Admission& a : first.admissions) admitted = admitted || a.job == j.id;
    if (!admitted) next.push_back(j);
  }
  bench::SyntheticSpec more = spec;
  more.jobs = 100;
  more.seed = 8;
  for (PendingJob j : bench::MakeSyntheticJobs(more, world->tree, 10001)) {
    j.priority += 500;
    j.submit_time += SecondsToMs(7200);
    next.push_back(j);
  }
  pending = std::move(next);
  in.now = SecondsToMs(7200);
  in.seed = spec.seed + 1;
  const CycleResult second = RunCycle(in, *profile);
  run.text += "cycle 2\n" + Render(world->cluster, world->tree, second);
  run.admissions += second.admissions.size();
  run.verdicts += second.verdicts.size();
  return run;
}

struct Golden {
  const char* policy;
  uint64_t hash;
  size_t admissions;
  size_t verdicts;
};

// Pinned from the decisions of the current code (see the file comment).
constexpr Golden kGolden[] = {
    {"default", 0xb869d66001cccc27, 119, 483}, {"binpack", 0xb869d66001cccc27, 119, 483},
    {"spread", 0xccb13f329ab317c6, 145, 440},  {"topology", 0xb869d66001cccc27, 119, 483},
    {"fgd", 0xb869d66001cccc27, 119, 483},
};

TEST(CycleGoldenTest, DecisionsMatchThePinnedHashes) {
  for (const Golden& g : kGolden) {
    SCOPED_TRACE(g.policy);
    const GoldenRun run = RunGolden(g.policy);
    EXPECT_EQ(run.admissions, g.admissions);
    EXPECT_EQ(run.verdicts, g.verdicts);
    EXPECT_EQ(Fnv1a(run.text), g.hash) << fmt::format(
        "decisions changed: got {{\"{}\", 0x{:x}, {}, {}}}; first lines:\n{}", g.policy,
        Fnv1a(run.text), run.admissions, run.verdicts, run.text.substr(0, 600));
  }
}

TEST(CycleGoldenTest, EqualInputsGiveEqualDecisions) {
  for (const std::string& policy : Profile::NamedProfiles()) {
    SCOPED_TRACE(policy);
    const GoldenRun a = RunGolden(policy);
    const GoldenRun b = RunGolden(policy);
    EXPECT_GT(a.admissions, 0u);
    EXPECT_EQ(a.text, b.text);
  }
}

}  // namespace
}  // namespace arbiter::core
