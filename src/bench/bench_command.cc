#include "bench/bench_command.h"

#include <fmt/format.h>
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "core/cycle/cycle.h"

namespace arbiter::bench {

namespace {

double PeakRssMib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) / 1024.0;  // ru_maxrss is in KiB on Linux
}

double CurrentRssMib() {
  FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  long pages = 0;
  long resident = 0;
  if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
  std::fclose(f);
  return static_cast<double>(resident) * 4096.0 / (1024.0 * 1024.0);
}

double Seconds(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

}  // namespace

namespace {

// The jobs of `pending` that `r` did not admit.
std::vector<core::PendingJob> NotAdmitted(const std::vector<core::PendingJob>& pending,
                                          const core::CycleResult& r) {
  std::vector<core::PendingJob> rest;
  std::vector<bool> admitted(pending.size() + 2, false);
  for (const core::Admission& a : r.admissions) admitted[a.job.value()] = true;
  for (const core::PendingJob& j : pending) {
    if (!admitted[j.id.value()]) rest.push_back(j);
  }
  return rest;
}

// The figures: one JSON line (--json), else a few lines for people.
void Print(const BenchOptions& o, const nlohmann::json& j) {
  if (o.json) {
    std::printf("%s\n", j.dump().c_str());
    return;
  }
  std::printf(
      "%s",
      fmt::format(
          "policy {}: {} nodes x {} GPUs, {} queues, {} jobs\n"
          "  first cycle       {:.3f} s, {} jobs admitted ({} tasks), GPU allocation {:.2f}%\n"
          "  full-cluster cycle {:.3f} s over {} pending jobs\n"
          "  preemption cycle  {:.3f} s: {} high-priority jobs, {} preemptions of {} jobs\n"
          "  peak RSS          {:.1f} MiB ({:.2f} KiB per pending job)\n",
          o.policy, o.spec.nodes, o.spec.gpus_per_node, o.spec.queues, o.spec.jobs,
          j["cycle_seconds"].get<double>(), j["jobs_admitted"].get<size_t>(),
          j["placements"].get<int64_t>(), j["gpu_alloc_pct"].get<double>(),
          j["full_cluster_cycle_seconds"].get<double>(), j["full_cluster_pending"].get<size_t>(),
          j["preemption_cycle_seconds"].get<double>(), j["preemption_pending"].get<size_t>(),
          j["preemptions"].get<size_t>(), j["preemption_victims"].get<size_t>(),
          j["peak_rss_mib"].get<double>(), j["kib_per_pending_job"].get<double>())
          .c_str());
}

// The tasks and milli-GPUs a cycle placed.
void CountPlaced(const core::CycleResult& r, int64_t* tasks, int64_t* gpu_milli) {
  for (const core::Admission& a : r.admissions) {
    for (const core::TaskPlacement& t : a.tasks) {
      ++*tasks;
      for (const core::GpuShare& g : t.gpus) *gpu_milli += g.milli;
    }
  }
}

// A tenth of the backlog again, at a priority that must preempt to start.
std::vector<core::PendingJob> UrgentJobs(const SyntheticSpec& spec, const core::QuotaTree& tree) {
  SyntheticSpec churn_spec = spec;
  churn_spec.jobs = std::max(1, spec.jobs / 10);
  churn_spec.seed = spec.seed + 1;
  std::vector<core::PendingJob> urgent =
      MakeSyntheticJobs(churn_spec, tree, static_cast<uint64_t>(spec.jobs) + 1);
  for (core::PendingJob& j : urgent) j.priority = 10000;
  return urgent;
}

}  // namespace

int RunBench(const BenchOptions& o) {
  auto spec = core::Profile::Named(o.policy);
  if (!spec.ok()) {
    std::fprintf(stderr, "arbiter bench: %s\n", spec.status().ToString().c_str());
    return 2;
  }
  auto profile = core::Profile::Build(*spec);
  if (!profile.ok()) {
    std::fprintf(stderr, "arbiter bench: %s\n", profile.status().ToString().c_str());
    return 2;
  }
  const double rss_start = CurrentRssMib();
  auto t0 = std::chrono::steady_clock::now();
  auto world = MakeSyntheticWorld(o.spec);
  if (!world.ok()) {
    std::fprintf(stderr, "arbiter bench: --%s\n", world.status().ToString().c_str());
    return 2;
  }
  auto t1 = std::chrono::steady_clock::now();
  const double rss_world = CurrentRssMib();

  // The first full cycle: the whole backlog into an empty cluster.
  core::CycleInput in;
  in.cluster = &world->cluster;
  in.tree = &world->tree;
  in.pending = &world->pending;
  in.now = 0;
  in.seed = o.spec.seed;
  auto t2 = std::chrono::steady_clock::now();
  core::CycleResult first = core::RunCycle(in, *profile);
  auto t3 = std::chrono::steady_clock::now();

  int64_t tasks_placed = 0;
  int64_t gpu_milli = 0;
  CountPlaced(first, &tasks_placed, &gpu_milli);
  const int64_t capacity = world->cluster.capacity()[core::kDimGpu];
  const double alloc_pct =
      capacity > 0 ? 100.0 * static_cast<double>(gpu_milli) / static_cast<double>(capacity) : 0.0;

  // A steady-state cycle: the same cluster now full, the rest of the backlog still pending.
  std::vector<core::RunningJob> running;
  core::ApplyAdmissions(in, first, 0, &running);
  std::vector<core::PendingJob> rest = NotAdmitted(world->pending, first);
  core::CycleInput in2 = in;
  in2.running = &running;
  in2.pending = &rest;
  auto t4 = std::chrono::steady_clock::now();
  core::CycleResult second = core::RunCycle(in2, *profile);
  auto t5 = std::chrono::steady_clock::now();

  // Preemption churn: the cluster full of jobs that have run for an hour, and a backlog of
  // high-priority jobs (a tenth of --jobs) that must preempt to start.
  for (core::RunningJob& r : running) r.start_time = -SecondsToMs(3600);
  std::vector<core::PendingJob> urgent = UrgentJobs(o.spec, world->tree);
  core::CycleInput in3 = in;
  in3.running = &running;
  in3.pending = &urgent;
  auto t6 = std::chrono::steady_clock::now();
  core::CycleResult third = core::RunCycle(in3, *profile);
  auto t7 = std::chrono::steady_clock::now();
  size_t victims = 0;
  for (const core::PreemptionDecision& d : third.preemptions) victims += d.victims.size();

  const double peak = PeakRssMib();
  const double kib_per_job =
      o.spec.jobs > 0 ? (peak - rss_start) * 1024.0 / static_cast<double>(o.spec.jobs) : 0.0;
  nlohmann::json j = {
      {"policy", o.policy},
      {"nodes", o.spec.nodes},
      {"gpus_per_node", o.spec.gpus_per_node},
      {"models", o.spec.models},
      {"queues", o.spec.queues},
      {"jobs", o.spec.jobs},
      {"seed", o.spec.seed},
      {"setup_seconds", Seconds(t0, t1)},
      {"cycle_seconds", Seconds(t2, t3)},
      {"placements", tasks_placed},
      {"jobs_admitted", first.admissions.size()},
      {"jobs_per_second",
       Seconds(t2, t3) > 0 ? static_cast<double>(first.admissions.size()) / Seconds(t2, t3) : 0.0},
      {"gpu_alloc_pct", alloc_pct},
      {"placement_attempts", first.stats.placement_attempts},
      {"failure_cache_hits", first.stats.failure_cache_hits},
      {"full_cluster_cycle_seconds", Seconds(t4, t5)},
      {"full_cluster_pending", rest.size()},
      {"full_cluster_admitted", second.admissions.size()},
      {"preemption_cycle_seconds", Seconds(t6, t7)},
      {"preemption_pending", urgent.size()},
      {"preemptions", third.preemptions.size()},
      {"preemption_victims", victims},
      {"preemption_attempts", third.stats.preemption_attempts},
      {"peak_rss_mib", peak},
      {"world_rss_mib", rss_world - rss_start},
      {"kib_per_pending_job", kib_per_job},
  };
  Print(o, j);
  return 0;
}

}  // namespace arbiter::bench
