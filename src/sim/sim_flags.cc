#include "sim/sim_flags.h"

#include <CLI/CLI.hpp>

#include "sim/inflate_command.h"
#include "sim/replay_command.h"

namespace arbiter::sim {

void RegisterSimulateCommand(CLI::App& app, int* exit_code) {
  auto* simulate = app.add_subcommand("simulate", "Run the scheduling core on a cluster trace");
  simulate->require_subcommand(1);
  static arbiter::sim::InflateOptions inflate;
  auto* inf = simulate->add_subcommand(
      "inflate",
      "The FGD paper's workload-inflation experiment: shuffle the trace, add random copies up to\n"
      "--target x the cluster's GPUs, place one task at a time with no departures, and report the\n"
      "GPU allocation and fragmentation against the arrived demand, averaged over the seeds\n"
      "Example: arbiter simulate inflate --nodes openb_node_list_gpu_node.csv --pods "
      "openb_pod_list_default.csv --policy fgd --policy bestfit --seeds 42-51 --target 1.3");
  inf->add_option("--nodes", inflate.nodes_path,
                  "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)")
      ->required();
  inf->add_option("--pods", inflate.pods_path, "Pod list CSV (openb, either header form)")
      ->required();
  inf->add_option("--policy", inflate.policies,
                  "Placement profile, repeatable: fgd, bestfit, dotprod, gpupacking, "
                  "gpuclustering, random, binpack, spread, topology, default")
      ->required();
  inf->add_option("--seeds", inflate.seeds, "Seeds: 42-51, 42 or 1,2,3")->capture_default_str();
  inf->add_option("--target", inflate.target, "Total GPU request as a share of the cluster's GPUs")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  inf->add_option("--node-order", inflate.node_order,
                  "Which node wins equal scores: shuffled (a random node order per seed, as in "
                  "the published experiment) or file (the node list's order)")
      ->check(CLI::IsMember({"shuffled", "file"}))
      ->capture_default_str();
  inf->add_option("--json", inflate.json_path,
                  "Write the report as JSON to this file ('-': stdout)");
  inf->add_option("--html", inflate.html_path,
                  "Write a self-contained HTML report with charts to this file");
  inf->callback([=] { *exit_code = arbiter::sim::RunInflateCommand(inflate); });

  static arbiter::sim::ReplayCommandOptions replay;
  auto* rep = simulate->add_subcommand(
      "replay",
      "Replay a trace online in virtual time through the production scheduling cycle: arrivals,\n"
      "departures, walltimes, preemptions; wait, JCT, GPU allocation, fairness per policy\n"
      "Example: arbiter simulate replay --nodes openb_node_list_gpu_node.csv --pods "
      "openb_pod_list_default.csv --policy default --policy fgd --json replay.json --html "
      "replay.html");
  rep->add_option("--nodes", replay.nodes_path,
                  "Node list CSV (sn,cpu_milli,memory_mib,gpu,model)");
  rep->add_option("--config", replay.config_path,
                  "Arbiter configuration (YAML): priority classes, tenants and queues, nodes");
  rep->add_option("--trace", replay.trace_path, "Trace in Arbiter's format (docs/simulator.md)");
  rep->add_option("--pods", replay.pods_path, "openb pod list, converted on the fly");
  rep->add_option("--policy", replay.policies,
                  "Placement profile, repeatable: default, fgd, bestfit, binpack, spread, ...")
      ->required();
  rep->add_option("--tenants", replay.convert.tenants, "With --pods: tenants to spread pods over")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  rep->add_option("--time-scale", replay.convert.time_scale,
                  "With --pods: multiply submit times by this factor")
      ->check(CLI::Range(1e-9, 1e6))
      ->capture_default_str();
  rep->add_option("--interarrival", replay.convert.interarrival,
                  "With --pods without times: mean seconds between synthetic arrivals")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  rep->add_option("--mean-duration", replay.convert.mean_duration,
                  "With --pods without times: mean synthetic run time in seconds")
      ->check(CLI::Range(1e-3, 1e9))
      ->capture_default_str();
  rep->add_option("--seed", replay.seed, "Seed of the policies' draws and of synthetic arrivals")
      ->capture_default_str();
  rep->add_option("--seeds", replay.seeds,
                  "Run every policy once per seed (42-46, 1,2,3) and print each figure's mean and "
                  "95% t-interval over the seeds");
  rep->add_option("--arrival-jitter", replay.arrival_jitter_seconds,
                  "Delay each job's submit time by a uniform draw in [0, SECONDS) from the seed: "
                  "with --seeds, the spread of a trace with times over nearby arrival orders")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  rep->add_option("--runtime-estimates", replay.runtime_estimates,
                  "How running jobs without a walltime are expected to end, for backfill "
                  "reservations: history (their queue's completed run times), none, oracle (the "
                  "trace's durations: a bound, not a policy)")
      ->check(CLI::IsMember({"history", "none", "oracle"}))
      ->capture_default_str();
  rep->add_option("--cycle-interval", replay.cycle_interval_seconds,
                  "Virtual seconds between scheduling cycles while jobs wait")
      ->check(CLI::Range(int64_t{1}, int64_t{366} * 86400))
      ->capture_default_str();
  rep->add_option("--time-limit", replay.time_limit_seconds,
                  "Stop at this virtual time, in seconds (0: when every job has ended)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  rep->add_flag("--no-preemption", replay.no_preemption, "Never preempt");
  rep->add_option("--json", replay.json_path,
                  "Write the report as JSON to this file ('-': stdout)");
  rep->add_option("--html", replay.html_path,
                  "Write a self-contained HTML report to this file: GPU allocation over time, wait "
                  "distributions, queue shares against their guarantees, a summary per policy");
  rep->add_option("--services", replay.services_paths,
                  "Online services to replay beside the trace, repeatable: YAML or JSON files of "
                  "the API's service objects (kind: Service)");
  rep->add_option("--requests", replay.requests_paths,
                  "Request trace of the services (Azure LLM trace CSV: TIMESTAMP,ContextTokens,"
                  "GeneratedTokens): one for every service, or one per service in order");
  rep->add_option("--requests-offset", replay.requests.offset_seconds,
                  "Seconds after the trace's first submit at which the first request arrives")
      ->check(CLI::Range(0.0, 1e10))
      ->capture_default_str();
  rep->add_option("--requests-compress", replay.requests.compress,
                  "Divide the gaps between requests by this factor (60: an hour of requests in a "
                  "minute; 0.5: stretched to twice as long)")
      ->check(CLI::Range(1e-6, 1e6))
      ->capture_default_str();
  rep->add_option("--prefill-ms-per-token", replay.requests.prefill_ms_per_token,
                  "Service time per context (prompt) token, ms")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  rep->add_option("--decode-ms-per-token", replay.requests.decode_ms_per_token,
                  "Service time per generated token, ms")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  rep->add_option("--replica-startup", replay.replica_startup_seconds,
                  "Seconds from a replica's placement to its readiness")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  rep->add_option("--static-replicas", replay.static_replicas,
                  "Also run every policy with each service held at this many replicas, no "
                  "autoscaling (the static arm; 0: without the services)")
      ->check(CLI::Range(0, 1000));
  rep->callback([=] { *exit_code = arbiter::sim::RunReplayCommand(replay); });

  static arbiter::sim::ConvertCommandOptions convert;
  auto* conv = simulate->add_subcommand(
      "convert",
      "Convert an openb pod list into Arbiter's trace format (docs/simulator.md)\n"
      "Example: arbiter simulate convert --pods openb_pod_list_default.csv --out trace.csv "
      "--tenants 4");
  conv->add_option("--pods", convert.pods_path, "openb pod list CSV")->required();
  conv->add_option("--out", convert.out_path, "Trace CSV to write ('-': stdout)")->required();
  conv->add_option("--tenants", convert.convert.tenants, "Tenants to spread the pods over")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  conv->add_option("--seed", convert.convert.seed,
                   "Seed of synthetic arrivals (files without times)")
      ->capture_default_str();
  conv->add_option("--time-scale", convert.convert.time_scale,
                   "Multiply submit times by this factor")
      ->check(CLI::Range(1e-9, 1e6))
      ->capture_default_str();
  conv->add_option("--interarrival", convert.convert.interarrival,
                   "Files without times: mean seconds between arrivals (exponential)")
      ->check(CLI::Range(0.0, 1e9))
      ->capture_default_str();
  conv->add_option("--mean-duration", convert.convert.mean_duration,
                   "Files without times: mean duration in seconds (exponential)")
      ->check(CLI::Range(1.0, 1e9))
      ->capture_default_str();
  conv->callback([=] { *exit_code = arbiter::sim::RunConvertCommand(convert); });
}

}  // namespace arbiter::sim
