// The `arbiter` command: one binary for every part (bench now; server, agent, CLI and simulator
// join it as they land).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "bench/bench_command.h"

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

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return exit_code;
}
