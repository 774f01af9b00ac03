#include "plan/plan_flags.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "plan/start_calibration.h"
#include "sim/replay_command.h"
#include "sim/text.h"

namespace arbiter::plan {

namespace {

struct CalibrateFlags {
  sim::ReplayCommandOptions replay;
  std::string policy = "default";
  int32_t samples = 20;
  size_t max_pending = 200;
  int64_t horizon_hours = 14 * 24;
  int32_t every = 1;
  int32_t max_jobs = 200;
  size_t min_samples = 5;
  bool no_cycle_state = false;
  bool known_run_times = false;
  int64_t arrival_window_seconds = 3600;
  int64_t max_work = 0;
  std::string json_path;
};

nlohmann::json ReportJson(const CalibrationReport& r, const CalibrateFlags& f, double wall) {
  nlohmann::json sources = nlohmann::json::object();
  for (size_t s = 0; s < kRunTimeSources; ++s) {
    sources[std::string(RunTimeSourceName(static_cast<RunTimeSource>(s)))] = r.sources[s];
  }
  return {{"policy", f.policy},
          {"seed", f.replay.seed},
          {"samples", f.samples},
          {"max_pending", f.max_pending},
          {"cycle_state", !f.no_cycle_state},
          {"known_run_times", f.known_run_times},
          {"arrival_window_seconds", f.arrival_window_seconds},
          {"horizon_hours", f.horizon_hours},
          {"max_work", f.max_work},
          {"jobs", r.jobs},
          {"started_at_once", r.started_at_once},
          {"estimated", r.estimated},
          {"scored", r.scored},
          {"unfinished", r.unfinished},
          {"before_p50", r.before_p50},
          {"before_p90", r.before_p90},
          {"p50_hit_pct", r.p50_hit_pct},
          {"p90_hit_pct", r.p90_hit_pct},
          {"bounded", r.bounded},
          {"work_cut", r.work_cut},
          {"work_median", r.work_median},
          {"work_p90", r.work_p90},
          {"work_max", r.work_max},
          {"actual_wait_median_s", r.actual_wait_median_s},
          {"p50_error_median_s", r.p50_error_median_s},
          {"sources", sources},
          {"wall_seconds", wall}};
}

int Run(const CalibrateFlags& f) {
  auto fail = [](const Status& st) {
    std::fprintf(stderr, "arbiter simulate calibrate: %s\n", st.ToString().c_str());
    return 2;
  };
  sim::ReplayCommandOptions ro = f.replay;
  ro.policies = {f.policy};
  auto loaded = sim::LoadReplay(ro);
  if (!loaded.ok()) return fail(loaded.status());
  CalibrationOptions o;
  o.replay.seed = f.replay.seed;
  o.replay.cycle_interval = SecondsToMs(f.replay.cycle_interval_seconds);
  o.replay.time_limit = SecondsToMs(f.replay.time_limit_seconds);
  o.replay.preemption = !f.replay.no_preemption;
  o.estimate.samples = f.samples;
  o.estimate.max_pending = f.max_pending;
  o.estimate.horizon = SecondsToMs(f.horizon_hours * 3600);
  o.estimate.cycle_interval = o.replay.cycle_interval;
  o.estimate.seed = f.replay.seed;
  o.estimate.max_work = f.max_work;
  o.every = f.every;
  o.max_jobs = f.max_jobs;
  o.min_samples = f.min_samples;
  o.carry_cycle_state = !f.no_cycle_state;
  o.known_run_times = f.known_run_times;
  o.arrival_window = SecondsToMs(f.arrival_window_seconds);
  std::fprintf(stderr, "calibrate: %zu nodes, %zu jobs; estimating at most %d waiting jobs\n",
               loaded->cluster->num_nodes(), loaded->workload.jobs.size(), f.max_jobs);
  const auto t0 = std::chrono::steady_clock::now();
  const CalibrationReport r = Calibrate(loaded->workload, loaded->profiles.front(), o);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const nlohmann::json j = ReportJson(r, f, wall);
  if (!f.json_path.empty()) {
    if (f.json_path == "-") {
      std::printf("%s\n", j.dump(1).c_str());
      return 0;
    }
    const Status st = sim::WriteTextFile(f.json_path, j.dump(1) + "\n", "report");
    if (!st.ok()) return fail(st);
  }
  std::string sources;
  for (size_t s = 0; s < kRunTimeSources; ++s) {
    sources += fmt::format("{}{} {}", s == 0 ? "" : ", ",
                           RunTimeSourceName(static_cast<RunTimeSource>(s)), r.sources[s]);
  }
  std::printf(
      "expected start calibration (policy %s, seed %llu, %d samples per estimate)\n"
      "jobs %lld: started in their arrival's cycle %lld, estimated %lld (scored %lld, never "
      "started %lld)\n"
      "started by their P50: %.1f%% (%lld of %lld; ideal about 50%%)\n"
      "started by their P90: %.1f%% (%lld of %lld; ideal about 90%%)\n"
      "median wait %.0f s; median P50 - actual start %+.0f s\n"
      "estimates bounded (queue depth, horizon, arrivals or work): %lld; main run-time source: "
      "%s\n"
      "work per estimate (per cycle, pending jobs plus nodes): median %lld, P90 %lld, max %lld; "
      "cut off by --max-work: %lld\n"
      "wall time %.1f s\n",
      f.policy.c_str(), static_cast<unsigned long long>(f.replay.seed), f.samples,
      static_cast<long long>(r.jobs), static_cast<long long>(r.started_at_once),
      static_cast<long long>(r.estimated), static_cast<long long>(r.scored),
      static_cast<long long>(r.unfinished), r.p50_hit_pct, static_cast<long long>(r.before_p50),
      static_cast<long long>(r.scored), r.p90_hit_pct, static_cast<long long>(r.before_p90),
      static_cast<long long>(r.scored), r.actual_wait_median_s, r.p50_error_median_s,
      static_cast<long long>(r.bounded), sources.c_str(), static_cast<long long>(r.work_median),
      static_cast<long long>(r.work_p90), static_cast<long long>(r.work_max),
      static_cast<long long>(r.work_cut), wall);
  return 0;
}

}  // namespace

void RegisterCalibrateCommand(CLI::App& app, int* exit_code) {
  CLI::App* simulate = app.get_subcommand("simulate");
  static CalibrateFlags f;
  auto* cal = simulate->add_subcommand(
      "calibrate",
      "Measure how often jobs start before their expected start's P50 and P90: replay a trace,\n"
      "estimate waiting jobs from the replay's state with run times drawn from the history so\n"
      "far, and compare with when they really started (docs/simulator.md)\n"
      "Example: arbiter simulate calibrate --nodes openb_node_list_gpu_node.csv --pods "
      "openb_pod_list_default.csv --time-scale 0.0001");
  cal->add_option("--nodes", f.replay.nodes_path,
                  "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
  cal->add_option("--config", f.replay.config_path,
                  "Arbiter configuration (YAML): priority classes, tenants and queues, nodes");
  cal->add_option("--trace", f.replay.trace_path, "Trace in Arbiter's format (docs/simulator.md)");
  cal->add_option("--pods", f.replay.pods_path, "openb pod list, converted on the fly");
  cal->add_option("--tenants", f.replay.convert.tenants, "With --pods: tenants to spread pods over")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cal->add_option("--time-scale", f.replay.convert.time_scale,
                  "With --pods: multiply submit times by this factor")
      ->check(CLI::Range(1e-9, 1e6))
      ->capture_default_str();
  cal->add_option("--policy", f.policy, "Placement profile")->capture_default_str();
  cal->add_option("--seed", f.replay.seed, "Seed of the replay, the sampling and the draws")
      ->capture_default_str();
  cal->add_option("--cycle-interval", f.replay.cycle_interval_seconds,
                  "Virtual seconds between scheduling cycles while jobs wait")
      ->check(CLI::Range(int64_t{1}, int64_t{366} * 86400))
      ->capture_default_str();
  cal->add_option("--time-limit", f.replay.time_limit_seconds,
                  "Stop the replay at this virtual time, in seconds (0: none)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  cal->add_flag("--no-preemption", f.replay.no_preemption, "Never preempt");
  cal->add_option("--samples", f.samples, "Draws per estimate")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cal->add_option("--max-pending", f.max_pending, "Pending jobs replayed per estimate")
      ->check(CLI::Range(size_t{1}, size_t{1} << 30))
      ->capture_default_str();
  cal->add_option("--horizon-hours", f.horizon_hours, "Virtual hours each draw may run")
      ->check(CLI::Range(int64_t{1}, int64_t{366} * 24))
      ->capture_default_str();
  cal->add_option("--every", f.every, "Estimate one waiting job in N (by a hash of its id)")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cal->add_option("--max-jobs", f.max_jobs, "Estimates at most")
      ->check(CLI::Range(1, 10000000))
      ->capture_default_str();
  cal->add_option("--min-samples", f.min_samples,
                  "Completed runs a user or queue needs before its own history is used")
      ->check(CLI::Range(size_t{1}, size_t{100000}))
      ->capture_default_str();
  cal->add_option("--arrival-window", f.arrival_window_seconds,
                  "Seconds of recent arrivals future arrivals are drawn from (0: none arrive)")
      ->check(CLI::Range(int64_t{0}, int64_t{30} * 86400))
      ->capture_default_str();
  cal->add_option("--max-work", f.max_work,
                  "Bound each estimate's work: per cycle of its draws, the pending jobs plus the "
                  "nodes, summed (0: none; the server's bound is 2000000)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 50))
      ->capture_default_str();
  cal->add_flag("--known-run-times", f.known_run_times,
                "Diagnostic: the run-time history holds every job's run time from the start (the "
                "distribution known in advance, not each job's)");
  cal->add_flag("--no-cycle-state", f.no_cycle_state,
                "Estimate from the running and pending jobs alone, without the cycle's "
                "nominations, decayed usage and typical tasks (for comparison)");
  cal->add_option("--json", f.json_path, "Write the figures as JSON to this file ('-': stdout)");
  cal->callback([exit_code] { *exit_code = Run(f); });
}

}  // namespace arbiter::plan
