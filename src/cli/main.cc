// The `arbiter` command: one binary for every part (bench now; server, agent, CLI and simulator
// join it as they land).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_command.h"
#include "sim/inflate_command.h"

#ifndef ARBITER_VERSION
#define ARBITER_VERSION "dev"
#endif

int main(int argc, char** argv) {
  CLI::App app{"Arbiter: AI compute scheduling for shared GPU clusters"};
  app.require_subcommand(1);

  auto* version = app.add_subcommand("version", "Print the version");
  version->callback([] { std::printf("arbiter %s\n", ARBITER_VERSION); });

  arbiter::bench::BenchOptions bench;
  int exit_code = 0;
  auto* b = app.add_subcommand(
      "bench",
      "Run the scheduling core on a synthetic cluster and backlog and print its figures\n"
      "Example: arbiter bench --nodes 10000 --gpus-per-node 8 --queues 100 --jobs 200000 "
      "--policy binpack --json");
  b->add_option("--nodes", bench.spec.nodes, "Nodes in the cluster")->check(CLI::Range(1, 1000000));
  b->add_option("--gpus-per-node", bench.spec.gpus_per_node, "GPUs per node")
      ->check(CLI::Range(1, 64));
  b->add_option("--models", bench.spec.models, "GPU models, spread over the nodes")
      ->check(CLI::Range(1, 16));
  b->add_option("--queues", bench.spec.queues, "Leaf queues (under one tenant per 10 queues)")
      ->check(CLI::Range(1, 100000));
  b->add_option("--jobs", bench.spec.jobs, "Pending jobs in the backlog")
      ->check(CLI::Range(0, 100000000));
  b->add_option("--policy", bench.policy,
                "Placement profile: default, binpack, spread, topology, fgd");
  b->add_option("--seed", bench.spec.seed, "Seed of the synthetic workload");
  b->add_flag("--json", bench.json, "Print one JSON object");
  b->callback([&] { exit_code = arbiter::bench::RunBench(bench); });

  auto* simulate = app.add_subcommand("simulate", "Run the scheduling core on a cluster trace");
  simulate->require_subcommand(1);
  arbiter::sim::InflateOptions inflate;
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
  inf->add_option("--json", inflate.json_path,
                  "Write the report as JSON to this file ('-': stdout)");
  inf->callback([&] { exit_code = arbiter::sim::RunInflateCommand(inflate); });

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
