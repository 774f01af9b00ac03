// `arbiter simulate replay`: the online replay (sim/replay.h) of a trace on a cluster under one or
// more placement profiles, side by side.
//
//   arbiter simulate replay (--nodes NODES.csv | --config FILE.yaml | both)
//       (--trace TRACE.csv | --pods PODS.csv [--tenants N] [--time-scale F])
//       --policy NAME [--policy NAME2 ...] [--seed S | --seeds 42-46] [--cycle-interval S]
//       [--time-limit S] [--runtime-estimates history|none|oracle]
//       [--no-preemption] [--json OUT] [--html OUT.html]
//       [--services FILE ... [--requests FILE ...] [--requests-offset S] [--requests-compress X]
//        [--prefill-ms-per-token MS] [--decode-ms-per-token MS] [--replica-startup S]
//        [--static-replicas N]]
//
// The cluster is an openb node list (--nodes) or the nodes of an Arbiter configuration (--config,
// docs/config.md), not both. The configuration's priority classes and tenants with their queues,
// when it has them, replace the defaults of sim/replay.h. A pod list is converted on the fly
// (sim/convert.h, with the replay's seed). A table goes to stdout, one column per policy;
// `--json OUT` writes one object per policy ({"results": [...]} for several; "-": stdout instead
// of the table). `--html OUT.html` also writes a self-contained page with charts
// (sim/replay_html.h). Progress goes to stderr.
//
// Services (sim/replay_services.h): each --services file holds one or more of the API's service
// objects; one --requests trace drives every service, or one per service in the same order.
// Services whose queue the tree lacks get one (AddServiceQueues) when the tree is generated; with
// a configuration's tree their queues must be in it. --static-replicas N adds, per policy, a second
// run with every service held at N replicas (column "POLICY static N").
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/convert.h"
#include "sim/replay.h"

namespace arbiter::sim {

struct ReplayCommandOptions {
  std::string nodes_path;
  std::string pods_path;  // one of pods_path and trace_path
  std::string trace_path;
  std::string config_path;  // optional
  std::vector<std::string> policies;
  ConvertOptions convert;  // for pods_path: tenants, seed, time scale
  uint64_t seed = 42;
  // Several seeds ("42-46", "1,2,3"): every policy runs once per seed (the seed drives the
  // policies' draws and synthetic arrivals) and the table gives each figure's mean and 95%
  // t-interval over the seeds, and each policy's difference from the first, paired by seed.
  // Empty: `seed` alone.
  std::string seeds;
  // Each job's submit time is delayed by a uniform draw in [0, this) seconds from the run's seed
  // (JitterArrivals): with --seeds, the spread of a trace with times over nearby arrival orders.
  // 0: the trace's times as they are.
  double arrival_jitter_seconds = 0;
  // How running jobs without a walltime are expected to end, for backfill reservations: "none"
  // (no reservation waits on them, as the server), "history" (their queue's completed run times),
  // or "oracle" (the trace's durations; a bound, not a policy).
  std::string runtime_estimates = "none";
  int64_t cycle_interval_seconds = 60;
  int64_t time_limit_seconds = 0;  // 0: none
  bool no_preemption = false;
  std::string json_path;  // empty: table only; "-": JSON on stdout
  std::string html_path;  // empty: no HTML report
  std::vector<std::string> services_paths;
  std::vector<std::string> requests_paths;
  RequestModel requests;
  double replica_startup_seconds = 60;
  int32_t static_replicas = -1;  // -1: no static arm
};

// The command line these options stand for (shown in the HTML report).
std::string ReplayCommandLine(const ReplayCommandOptions& options);

// The side-by-side table of several policies' reports.
std::string FormatReplayTable(const std::vector<ReplayReport>& reports);

// The spread over seeds of the main figures, per policy ("policy" as in the reports' labels), and
// each policy's paired difference from the first: {"policies": [{"policy", "seeds", FIGURE:
// {n, mean, sd, ci95_lo, ci95_hi}, ...}], "differences": [{"policy", "from", FIGURE: {...}}]}.
// `runs` holds one report per policy and seed.
nlohmann::json ReplaySeedSpread(const std::vector<ReplayReport>& runs,
                                const std::vector<uint64_t>& seeds);
// Its table.
std::string FormatReplaySpread(const nlohmann::json& spread);

// Runs the command; returns the process exit code (0, or 2 on bad input).
int RunReplayCommand(const ReplayCommandOptions& options);

// A trace loaded and compiled as `simulate replay` does, without services: the cluster and the
// queue tree (the workload points into them) and the profiles of options.policies.
struct LoadedReplay {
  std::unique_ptr<core::Cluster> cluster;
  std::unique_ptr<core::QuotaTree> tree;
  ReplayWorkload workload;
  std::vector<core::Profile> profiles;
};
Result<LoadedReplay> LoadReplay(const ReplayCommandOptions& options);

}  // namespace arbiter::sim
