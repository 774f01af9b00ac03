// Scenario tests of preemption, reclaim, backfill and budgets: one rule a test, decisions written
// out.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "core/budget/budget.h"
#include "core/cycle/cycle.h"
#include "core/preemption/preemption.h"

namespace arbiter::core {
namespace {

constexpr TimeMs kMinute = 60 * 1000;

// A small world: `nodes` nodes of 8 GPUs of one model, and leaf queues under one tenant each.
struct World {
  Cluster cluster;
  QuotaTree tree;
  std::map<std::string, QueueId> q;
  std::vector<RunningJob> running;
  std::vector<PendingJob> pending;
  std::vector<Nomination> nominations;
  std::vector<TenantBudget> budgets;
  uint64_t next_id = 1;
  TimeMs now = 60 * kMinute;
  Profile profile = std::move(Profile::Build(*Profile::Named("binpack"))).value();

  // queues: name -> (guaranteed GPUs, max GPUs or 0 for none).
  World(int nodes, const std::vector<std::tuple<std::string, int64_t, int64_t>>& queues,
        int64_t default_walltime_s = 0) {
    std::vector<GpuModel> models = {{"A100", 81920, 2500}};
    std::vector<Node> ns;
    for (int i = 0; i < nodes; ++i) {
      Node n;
      n.name = fmt::format("n{}", i);
      n.cpu_milli = 256000;
      n.memory_mib = 1 << 21;
      for (int g = 0; g < 8; ++g) n.gpus.push_back({g, "A100", 81920, true, 0});
      ns.push_back(n);
    }
    cluster = *Cluster::Build(models, ns);
    std::vector<QueueSpec> specs;
    for (const auto& [name, g, m] : queues) {
      QueueSpec t;
      t.name = fmt::format("t-{}", name);
      t.is_tenant = true;
      specs.push_back(t);
      QueueSpec s;
      s.name = name;
      s.parent = t.name;
      s.quota["gpu"] = QuotaLimits{
          g * 1000, m > 0 ? std::optional<int64_t>(m * 1000) : std::nullopt, std::nullopt};
      s.default_walltime_seconds = default_walltime_s;
      specs.push_back(s);
    }
    tree = *QuotaTree::Build(specs, models);
    for (const auto& [name, g, m] : queues) {
      QueueId id;
      EXPECT_TRUE(tree.Find(name, &id));
      q[name] = id;
    }
  }

  PendingJob& Submit(const std::string& queue, int gpus, int32_t priority = 100, int tasks = 1,
                     DurationMs walltime = 0) {
    PendingJob j;
    j.id = JobId(next_id++);
    j.queue = q.at(queue);
    j.priority = priority;
    j.tasks = tasks;
    j.resources.gpus = gpus;
    j.resources.cpu_milli = 1000;
    j.resources.memory_mib = 1024;
    j.walltime = walltime;
    j.submit_time = static_cast<TimeMs>(j.id.value());
    pending.push_back(j);
    return pending.back();
  }

  CycleResult Cycle() {
    CycleInput in;
    in.cluster = &cluster;
    in.tree = &tree;
    in.running = &running;
    in.pending = &pending;
    in.nominations = &nominations;
    in.budgets = budgets.empty() ? nullptr : &budgets;
    in.now = now;
    CycleResult r = RunCycle(in, profile);
    ApplyAdmissions(in, r, now, &running);
    for (const Admission& a : r.admissions) {
      std::erase_if(pending, [&](const PendingJob& p) { return p.id == a.job; });
      std::erase_if(nominations, [&](const Nomination& n) { return n.preemptor == a.job; });
    }
    ApplyPreemptions(r, &running);
    for (const PreemptionDecision& d : r.preemptions) {
      nominations.push_back({d.preemptor, d.victims, d.tasks, d.model});
    }
    return r;
  }

  // Victims stop: terminating jobs go back to pending (keeping their submit time).
  int StopTerminating() {
    int n = 0;
    for (const RunningJob& r : running) {
      if (!r.terminating) continue;
      PendingJob p;
      p.id = r.id;
      p.queue = r.queue;
      p.priority = r.priority;
      p.resources = r.resources;
      p.tasks = static_cast<int32_t>(r.tasks.size());
      p.submit_time = static_cast<TimeMs>(r.id.value());
      p.walltime = r.walltime;
      pending.push_back(p);
      ++n;
    }
    std::erase_if(running, [](const RunningJob& r) { return r.terminating; });
    return n;
  }

  void FinishEndedJobs() {
    std::erase_if(running, [&](const RunningJob& r) {
      return r.walltime > 0 && r.start_time + r.walltime <= now;
    });
  }

  // Starts a job right away as if admitted `ago` ms before now.
  RunningJob& Run(const std::string& queue, int gpus, int32_t priority, TimeMs ago) {
    Submit(queue, gpus, priority);
    const TimeMs saved = now;
    now -= ago;
    CycleResult r = Cycle();
    now = saved;
    EXPECT_EQ(r.admissions.size(), 1u) << "setup job did not start";
    return running.back();
  }

  const Verdict* VerdictOf(const CycleResult& r, JobId id) const {
    for (const Verdict& v : r.verdicts) {
      if (v.job == id) return &v;
    }
    return nullptr;
  }
};

TEST(PreemptionScenario, HigherPriorityPreemptsLowerInItsQueue) {
  World w(1, {{"train", 8, 0}});
  const JobId low = w.Run("train", 8, 0, 10 * kMinute).id;
  const JobId high = w.Submit("train", 8, 1000).id;
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, high);
  EXPECT_EQ(r.preemptions[0].victims, std::vector<JobId>{low});
  EXPECT_EQ(r.preemptions[0].reason, PreemptionReason::kPriority);
  EXPECT_EQ(r.preemptions[0].grace_period, 30 * 1000);
  const Verdict* v = w.VerdictOf(r, high);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(v->code, VerdictCode::kWaitingForReservation);
  EXPECT_EQ(v->estimated_start, w.now + 30 * 1000);
}

TEST(PreemptionScenario, NeverPreemptsNonPreemptibleOrYoungJobs) {
  World w(1, {{"train", 8, 0}});
  RunningJob& a = w.Run("train", 4, 0, 10 * kMinute);
  a.preemptible = false;
  w.Run("train", 4, 0, 1 * kMinute);  // younger than the 5-minute minimum runtime
  w.Submit("train", 4, 1000);
  CycleResult r = w.Cycle();
  EXPECT_TRUE(r.preemptions.empty());
  ASSERT_EQ(r.verdicts.size(), 1u);
  EXPECT_EQ(r.verdicts[0].code, VerdictCode::kNoFeasibleNode);
}

TEST(PreemptionScenario, ReclaimTakesBackBorrowedCapacityMostRecentFirst) {
  World w(1, {{"vision", 4, 0}, {"speech", 4, 0}});
  std::vector<JobId> speech;
  for (int i = 0; i < 8; ++i) {
    speech.push_back(w.Run("speech", 1, 100, (20 - i) * kMinute).id);  // later i: started later
  }
  const JobId vision = w.Submit("vision", 4, 0).id;  // lower priority than the borrowers
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].preemptor, vision);
  EXPECT_EQ(r.preemptions[0].reason, PreemptionReason::kReclaim);
  std::vector<JobId> want(speech.begin() + 4, speech.end());
  EXPECT_EQ(r.preemptions[0].victims, want);
}

TEST(PreemptionScenario, NoReclaimBeyondTheGuarantee) {
  World w(1, {{"vision", 4, 0}, {"speech", 4, 0}});
  for (int i = 0; i < 4; ++i) w.Run("vision", 1, 100, 30 * kMinute);
  for (int i = 0; i < 4; ++i) w.Run("speech", 1, 100, 30 * kMinute);
  w.Submit("vision", 1, 100);  // vision is at its guarantee: nothing to reclaim
  CycleResult r = w.Cycle();
  EXPECT_TRUE(r.preemptions.empty());
}

TEST(PreemptionScenario, PreemptsAnywhereClassTakesBestEffortFromAnyQueue) {
  World w(1, {{"serving", 0, 0}, {"research", 8, 0}});
  const JobId be = w.Run("research", 8, 0, 10 * kMinute).id;
  PendingJob& prod = w.Submit("serving", 2, 1000);
  prod.preempts_anywhere = true;
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].reason, PreemptionReason::kAnywhere);
  EXPECT_EQ(r.preemptions[0].victims, std::vector<JobId>{be});
}

TEST(PreemptionScenario, SmallestVictimSetPreferringLeastLostWork) {
  World w(1, {{"train", 8, 0}});
  // Four 2-GPU jobs; the job needs 4 GPUs: two victims suffice, the two with the least lost work.
  std::vector<JobId> ids;
  for (int i = 0; i < 4; ++i) ids.push_back(w.Run("train", 2, 0, (40 - 10 * i) * kMinute).id);
  w.running[0].last_checkpoint = w.now - kMinute;  // oldest job, but checkpointed a minute ago
  w.Submit("train", 4, 1000);
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].victims, (std::vector<JobId>{ids[0], ids[3]}));
}

TEST(PreemptionScenario, GangVictimGoesWhole) {
  World w(2, {{"train", 16, 0}});
  const JobId gang = w.Run("train", 8, 0, 10 * kMinute).id;
  w.running.back().tasks.push_back(w.running.back().tasks[0]);  // make it a 2-task gang on n0...
  w.running.back().tasks[1].node = NodeId(1);                   // ...and n1
  w.Submit("train", 4, 1000);
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.preemptions.size(), 1u);
  EXPECT_EQ(r.preemptions[0].victims, std::vector<JobId>{gang});
}

// The snapshot is restored exactly when an attempt fails.
TEST(PreemptionScenario, FailedAttemptLeavesSnapshotUnchanged) {
  World w(1, {{"train", 8, 0}});
  w.Run("train", 4, 0, 10 * kMinute);
  RunningJob& keep = w.Run("train", 4, 0, 10 * kMinute);
  keep.preemptible = false;
  Snapshot snap(w.cluster, w.tree);
  for (const RunningJob& r : w.running) {
    for (const TaskPlacement& t : r.tasks) snap.Allocate(t);
    snap.ChargeQuota(r.queue, JobQuotaRequest(r.resources, 1, r.model));
  }
  auto state = [&] {
    std::vector<int64_t> s;
    for (uint32_t g = 0; g < w.cluster.gpus().size(); ++g) {
      s.push_back(snap.gpu_free_milli(g));
      s.push_back(snap.gpu_free_memory(g));
    }
    s.push_back(snap.free_cpu(NodeId(0)));
    s.push_back(snap.free_memory(NodeId(0)));
    for (uint32_t q = 0; q < w.tree.size(); ++q) {
      for (int d = 0; d < w.tree.num_dims(); ++d) s.push_back(snap.quota().usage(QueueId(q))[d]);
    }
    for (int k = 0; k <= 8; ++k)
      s.push_back(static_cast<int64_t>(snap.nodes_with_free(GpuModelId(0), k).size()));
    return s;
  };
  const auto before = state();
  PendingJob j = w.Submit("train", 8, 1000);
  PreemptionOptions opts;
  Preemptor p(w.running, w.tree, opts, w.now, nullptr);
  PreemptionPlan plan;
  std::vector<bool> taken(w.running.size(), false);
  PreemptionRequest req{&j, GpuModelId(0), JobQuotaRequest(j.resources, 1, GpuModelId(0)), nullptr};
  EXPECT_FALSE(p.TryPreempt(snap, w.profile, nullptr, req, taken, &plan));
  EXPECT_EQ(state(), before);
}

// Capacity freed by preemption is held for the preemptor until the victims are gone.
TEST(PreemptionScenario, FreedCapacityIsHeldForThePreemptor) {
  World w(1, {{"train", 8, 0}, {"other", 0, 0}});
  w.Run("train", 8, 0, 10 * kMinute);
  const JobId high = w.Submit("train", 8, 1000).id;
  ASSERT_EQ(w.Cycle().preemptions.size(), 1u);
  // The victim is still stopping; another queue's job must not take its GPUs.
  const JobId other = w.Submit("other", 1, 100).id;
  CycleResult r2 = w.Cycle();
  EXPECT_TRUE(r2.admissions.empty());
  EXPECT_TRUE(r2.preemptions.empty());
  ASSERT_NE(w.VerdictOf(r2, high), nullptr);
  EXPECT_EQ(w.VerdictOf(r2, high)->code, VerdictCode::kWaitingForReservation);
  // The victim stops; the preemptor starts, ahead of the other queue's job.
  EXPECT_EQ(w.StopTerminating(), 1);
  CycleResult r3 = w.Cycle();
  ASSERT_EQ(r3.admissions.size(), 1u);
  EXPECT_EQ(r3.admissions[0].job, high);
  EXPECT_NE(w.VerdictOf(r3, other), nullptr);
}

// Two preemptors wait for their victims. Each keeps the placement its preemption planned: the
// one placed first (the higher priority) does not take the free GPUs the other was promised
// beside its victim, which would leave that one short when its victim stops and make it preempt
// again.
TEST(PreemptionScenario, EachPreemptorKeepsThePlacementItsPreemptionPlanned) {
  auto scenario = [](bool planned) {
    World w(2, {{"train", 16, 0}});
    // A running job of `gpus` GPUs on `node` from GPU `first`, started an hour ago.
    auto place = [&](int node, int first, int gpus, int32_t priority, bool preemptible) {
      RunningJob r;
      r.id = JobId(w.next_id++);
      r.queue = w.q.at("train");
      r.priority = priority;
      r.preemptible = preemptible;
      r.model = GpuModelId(0);
      r.resources.gpus = gpus;
      r.resources.cpu_milli = 1000;
      r.resources.memory_mib = 1024;
      TaskPlacement t;
      t.node = NodeId(static_cast<uint32_t>(node));
      for (int g = first; g < first + gpus; ++g) {
        t.gpus.push_back({static_cast<uint16_t>(g), 1000, 0});  // the node's GPU g
      }
      t.cpu_milli = 1000;
      t.memory_mib = 1024;
      r.tasks = {t};
      r.start_time = w.now - 60 * kMinute;
      w.running.push_back(r);
      return r;
    };
    // n0: 2 GPUs a job that stays, 2 GPUs victim vb, 4 free. n1: 2 GPUs a job that stays, 4
    // GPUs victim va, 2 free.
    place(0, 0, 2, 2000, false);
    RunningJob vb = place(0, 2, 2, 0, true);
    place(1, 0, 2, 2000, false);
    RunningJob va = place(1, 2, 4, 0, true);
    for (RunningJob& r : w.running) r.terminating = r.id == va.id || r.id == vb.id;
    // a (priority 1000) needs 4 GPUs: planned on va's. b (priority 500) needs 6: planned on
    // vb's 2 and the 4 free beside them.
    const JobId a = w.Submit("train", 4, 1000).id;
    const JobId b = w.Submit("train", 6, 500).id;
    TaskPlacement pa = va.tasks[0];
    TaskPlacement pb = vb.tasks[0];
    for (uint16_t g = 4; g < 8; ++g) pb.gpus.push_back({g, 1000, 0});
    w.nominations.push_back({a,
                             {va.id},
                             planned ? std::vector{pa} : std::vector<TaskPlacement>{},
                             planned ? GpuModelId(0) : kNoModel});
    w.nominations.push_back({b,
                             {vb.id},
                             planned ? std::vector{pb} : std::vector<TaskPlacement>{},
                             planned ? GpuModelId(0) : kNoModel});
    return std::make_tuple(std::move(w), a, b, pa, pb);
  };

  auto [w, a, b, pa, pb] = scenario(true);
  CycleResult r = w.Cycle();
  EXPECT_TRUE(r.admissions.empty());
  EXPECT_TRUE(r.preemptions.empty());
  EXPECT_TRUE(r.finished_nominations.empty());
  for (JobId id : {a, b}) {
    ASSERT_NE(w.VerdictOf(r, id), nullptr);
    EXPECT_EQ(w.VerdictOf(r, id)->code, VerdictCode::kWaitingForReservation);
  }
  // The victims stop: both start, each where it was promised.
  EXPECT_EQ(w.StopTerminating(), 2);
  r = w.Cycle();
  int started = 0;
  for (const Admission& adm : r.admissions) {
    if (adm.job != a && adm.job != b) continue;  // a victim, queued again, may fit too
    ++started;
    EXPECT_EQ(adm.tasks, std::vector<TaskPlacement>{adm.job == a ? pa : pb});
  }
  EXPECT_EQ(started, 2);
  EXPECT_TRUE(r.preemptions.empty());

  // Placed wherever they fit instead (a driver that does not keep the plan), the first takes the
  // free GPUs beside the second's victim (binpack prefers the fuller node), and the second's
  // hold is lost.
  auto [u, ua, ub, upa, upb] = scenario(false);
  CycleResult ur = u.Cycle();
  EXPECT_EQ(ur.finished_nominations, std::vector<JobId>{ub});
}

// A fair-sharing preemption loop converges: two queues that keep submitting, 1,000 cycles, and no
// job is ever preempted twice.
TEST(PreemptionScenario, FairSharingConvergesWithoutRepeatedPreemptions) {
  World w(1, {{"a", 4, 0}, {"b", 4, 0}});
  std::map<uint64_t, int> preempted;
  int total = 0;
  for (int cycle = 0; cycle < 1000; ++cycle) {
    w.now += 10 * 1000;
    while (std::count_if(w.pending.begin(), w.pending.end(),
                         [&](const PendingJob& p) { return p.queue == w.q["a"]; }) < 3) {
      w.Submit("a", 1, 100);
    }
    // Queue b starts submitting once a has filled the cluster and run past its minimum runtime.
    while (cycle >= 50 &&
           std::count_if(w.pending.begin(), w.pending.end(),
                         [&](const PendingJob& p) { return p.queue == w.q["b"]; }) < 3) {
      w.Submit("b", 1, 100);
    }
    CycleResult r = w.Cycle();
    for (const PreemptionDecision& d : r.preemptions) {
      for (JobId v : d.victims) {
        ++preempted[v.value()];
        ++total;
      }
    }
    w.StopTerminating();
  }
  for (const auto& [id, n] : preempted) EXPECT_EQ(n, 1) << "job " << id << " preempted " << n;
  EXPECT_EQ(total, 4);  // b reclaims its guarantee once; nothing moves after that
  int a_running = 0;
  for (const RunningJob& r : w.running) a_running += r.queue == w.q["a"] ? 1 : 0;
  EXPECT_EQ(a_running, 4);
}

// EASY backfill: an 8-GPU job behind a stream of 1-GPU jobs starts by its reservation time.
TEST(BackfillScenario, LargeJobStartsByItsReservationDespiteSmallStream) {
  World w(1, {{"train", 8, 0}});
  for (int i = 0; i < 8; ++i) {
    w.Run("train", 1, 100, 0);
    w.running.back().walltime = (10 + 10 * i) * 1000;  // ends at now+10 s ... now+80 s
  }
  const TimeMs t0 = w.now;
  const JobId big = w.Submit("train", 8, 100, 1, 100 * 1000).id;
  TimeMs started = -1;
  TimeMs reserved = -1;
  for (int step = 0; step < 40 && started < 0; ++step) {
    w.FinishEndedJobs();
    w.Submit("train", 1, 100, 1, 60 * 1000);  // a new 1-GPU job every 5 s, 60 s each
    CycleResult r = w.Cycle();
    for (const Admission& a : r.admissions) {
      if (a.job == big) started = w.now;
    }
    const Verdict* v = w.VerdictOf(r, big);
    if (reserved < 0 && v != nullptr && v->estimated_start) reserved = *v->estimated_start;
    w.now += 5 * 1000;
  }
  ASSERT_GE(reserved, 0) << "no reservation was made";
  EXPECT_EQ(reserved, t0 + 80 * 1000);
  ASSERT_GE(started, 0) << "the 8-GPU job starved";
  EXPECT_LE(started, reserved + 5 * 1000);
}

TEST(BackfillScenario, ShortJobsBackfillLongOnesWait) {
  World w(1, {{"train", 8, 0}});
  w.Run("train", 4, 100, 0);
  w.running.back().walltime = 100 * 1000;
  const JobId big = w.Submit("train", 8, 100, 1, 3600 * 1000).id;
  const JobId shorter = w.Submit("train", 2, 100, 1, 50 * 1000).id;  // over before the big one
  const JobId longer = w.Submit("train", 2, 100, 1, 500 * 1000).id;  // would delay it
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].job, shorter);
  ASSERT_NE(w.VerdictOf(r, big), nullptr);
  EXPECT_EQ(w.VerdictOf(r, big)->estimated_start, w.now + 100 * 1000);
  ASSERT_NE(w.VerdictOf(r, longer), nullptr);
  EXPECT_EQ(w.VerdictOf(r, longer)->code, VerdictCode::kWaitingForReservation);
}

// Without walltimes, a driver's estimate of when running jobs end places the reservation; the
// held GPUs stay free of jobs that have no walltime either.
TEST(BackfillScenario, EstimatedEndsPlaceAReservationWithoutWalltimes) {
  World w(1, {{"train", 8, 0}});
  for (int i = 0; i < 4; ++i) w.Run("train", 2, 100, 0);
  const JobId big = w.Submit("train", 8).id;
  CycleResult r = w.Cycle();
  EXPECT_TRUE(r.reservations.empty()) << "no end is known: nothing to reserve";
  for (int i = 0; i < 4; ++i)
    w.running[static_cast<size_t>(i)].expected_end = w.now + (i + 1) * kMinute;
  r = w.Cycle();
  ASSERT_EQ(r.reservations.size(), 1u);
  EXPECT_EQ(r.reservations[0].job, big);
  EXPECT_EQ(r.reservations[0].start, w.now + 4 * kMinute);
  ASSERT_NE(w.VerdictOf(r, big), nullptr);
  EXPECT_EQ(w.VerdictOf(r, big)->estimated_start, w.now + 4 * kMinute);
  // The first job ends early: its two GPUs are held for the big job, not given to a newcomer.
  w.running.erase(w.running.begin());
  const JobId small = w.Submit("train", 2).id;
  r = w.Cycle();
  EXPECT_TRUE(r.admissions.empty());
  ASSERT_NE(w.VerdictOf(r, small), nullptr);
  EXPECT_EQ(w.VerdictOf(r, small)->code, VerdictCode::kWaitingForReservation);
}

// A job that may use several models is reserved on the one where it starts first, not on the
// first it names when no node of that model could ever hold it.
TEST(BackfillScenario, ReservationTakesTheModelThatCanHoldTheJob) {
  std::vector<GpuModel> models = {{"T4", 16384, 300}, {"A100", 81920, 2500}};
  std::vector<Node> ns;
  Node small;
  small.name = "t4-0";
  small.cpu_milli = 64000;
  small.memory_mib = 1 << 18;
  for (int g = 0; g < 2; ++g) small.gpus.push_back({g, "T4", 16384, true, 0});
  ns.push_back(small);
  Node big;
  big.name = "a100-0";
  big.cpu_milli = 256000;
  big.memory_mib = 1 << 21;
  for (int g = 0; g < 8; ++g) big.gpus.push_back({g, "A100", 81920, true, 0});
  ns.push_back(big);
  const Cluster cluster = *Cluster::Build(models, ns);
  QueueSpec t;
  t.name = "t-train";
  t.is_tenant = true;
  QueueSpec q;
  q.name = "train";
  q.parent = t.name;
  const QuotaTree tree = *QuotaTree::Build({t, q}, models);
  QueueId train;
  ASSERT_TRUE(tree.Find("train", &train));
  const Profile profile = std::move(Profile::Build(*Profile::Named("binpack"))).value();
  const TimeMs now = 60 * kMinute;

  PendingJob first;
  first.id = JobId(1);
  first.queue = train;
  first.priority = 100;
  first.resources.gpus = 8;
  first.resources.cpu_milli = 1000;
  first.resources.memory_mib = 1024;
  first.walltime = 100 * 1000;
  first.models = {cluster.FindModel("A100")};
  std::vector<PendingJob> pending = {first};
  std::vector<RunningJob> running;
  CycleInput in;
  in.cluster = &cluster;
  in.tree = &tree;
  in.running = &running;
  in.pending = &pending;
  in.now = now;
  CycleResult r = RunCycle(in, profile);
  ASSERT_EQ(r.admissions.size(), 1u);
  ApplyAdmissions(in, r, now, &running);

  PendingJob next = first;
  next.id = JobId(2);
  next.submit_time = 2;
  next.models = {cluster.FindModel("T4"), cluster.FindModel("A100")};  // T4 first
  pending = {next};
  r = RunCycle(in, profile);
  EXPECT_TRUE(r.admissions.empty());
  ASSERT_EQ(r.reservations.size(), 1u);
  EXPECT_EQ(r.reservations[0].start, now + 100 * 1000);
  ASSERT_EQ(r.reservations[0].tasks.size(), 1u);
  EXPECT_EQ(cluster.node(r.reservations[0].tasks[0].node).name, "a100-0");
}

TEST(BackfillScenario, JobThatFitsQuotaButNoNodeDoesNotBlockItsQueue) {
  World w(2, {{"train", 16, 0}});
  const JobId huge = w.Submit("train", 16).id;  // 16 GPUs on one node: no node has that many
  const JobId small = w.Submit("train", 4).id;
  CycleResult r = w.Cycle();
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].job, small);
  ASSERT_NE(w.VerdictOf(r, huge), nullptr);
  // No node could ever take it: it holds no reservation that would keep the small one waiting.
  EXPECT_EQ(w.VerdictOf(r, huge)->code, VerdictCode::kInadmissible);
  EXPECT_TRUE(r.reservations.empty());
  EXPECT_EQ(w.running.size(), 1u);
}

// Two large gangs competing for the same nodes never deadlock with each holding part.
TEST(BackfillScenario, CompetingGangsNeverDeadlock) {
  World w(4, {{"a", 16, 0}, {"b", 16, 0}});
  const JobId ga = w.Submit("a", 8, 100, 3, 100 * 1000).id;
  const JobId gb = w.Submit("b", 8, 100, 3, 100 * 1000).id;
  std::vector<JobId> started;
  for (int step = 0; step < 100 && started.size() < 2; ++step) {
    w.FinishEndedJobs();
    CycleResult r = w.Cycle();
    for (const Admission& a : r.admissions) {
      EXPECT_EQ(a.tasks.size(), 3u);
      started.push_back(a.job);
    }
    int64_t held = 0;
    for (const RunningJob& j : w.running) held += static_cast<int64_t>(j.tasks.size());
    EXPECT_LE(held, 3) << "both gangs hold part of the cluster";
    w.now += 10 * 1000;
  }
  ASSERT_EQ(started.size(), 2u);
  EXPECT_NE(started[0], started[1]);
  EXPECT_TRUE((started[0] == ga || started[0] == gb) && (started[1] == ga || started[1] == gb));
}

TEST(BudgetScenario, SpentBudgetBlocksOrRunsBestEffort) {
  World w(1, {{"vision", 8, 0}, {"speech", 0, 0}});
  w.budgets.assign(w.tree.size(), TenantBudget{});
  w.budgets[w.tree.node(w.q["vision"]).tenant.value()] = {true, BudgetPolicy::kBlock};
  w.budgets[w.tree.node(w.q["speech"]).tenant.value()] = {true, BudgetPolicy::kBestEffort};
  const JobId blocked = w.Submit("vision", 1).id;
  const JobId be = w.Submit("speech", 1, 1000).id;
  CycleResult r = w.Cycle();
  ASSERT_NE(w.VerdictOf(r, blocked), nullptr);
  EXPECT_EQ(w.VerdictOf(r, blocked)->code, VerdictCode::kBudgetExhausted);
  ASSERT_EQ(r.admissions.size(), 1u);
  EXPECT_EQ(r.admissions[0].job, be);
  EXPECT_TRUE(r.admissions[0].best_effort);
  EXPECT_TRUE(w.running.back().preemptible);
  EXPECT_LT(w.running.back().priority, 0);
}

TEST(BudgetScenario, UsageIsChargedAsItRuns) {
  World w(1, {{"vision", 8, 0}});
  w.Run("vision", 2, 100, 0);
  std::vector<TenantUsage> usage;
  AccrueUsage(w.cluster, w.tree, w.running, 30 * kMinute, &usage);  // 2 GPUs for half an hour
  const TenantUsage& u = usage[w.tree.node(w.q["vision"]).tenant.value()];
  EXPECT_EQ(u.gpu_milli_ms, kGpuMilliMsPerGpuHour);  // one GPU-hour
  EXPECT_EQ(u.cost_micro, 2500000);                  // at 2.5 per GPU-hour
  EXPECT_TRUE(BudgetSpent(u, 1));
  EXPECT_FALSE(BudgetSpent(u, 2));
  EXPECT_FALSE(BudgetSpent(u, 0));
}

}  // namespace
}  // namespace arbiter::core
