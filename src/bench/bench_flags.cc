#include "bench/bench_flags.h"

#include <CLI/CLI.hpp>

#include "bench/bench_command.h"
#include "bench/e2e_bench.h"
#include "bench/gateway_bench.h"
#include "bench/submit_bench.h"

namespace arbiter::bench {

void RegisterBenchCommand(CLI::App& app, int* exit_code) {
  static arbiter::bench::BenchOptions bench;
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
  static arbiter::bench::SubmitBenchOptions submit;
  auto* bs = b->add_subcommand(
      "submit",
      "Durable submissions per second against a running server\n"
      "Example: arbiter bench submit --server http://127.0.0.1:8080 --token T --queue Q "
      "--jobs 20000 --concurrency 8 --json");
  bs->add_option("--server", submit.server, "Server URL");
  bs->add_option("--token", submit.token, "Bearer token")->required();
  bs->add_option("--queue", submit.queue, "Queue to submit to")->required();
  bs->add_option("--jobs", submit.jobs, "Jobs to submit")->check(CLI::Range(1, 100000000));
  bs->add_option("--concurrency", submit.concurrency, "Concurrent connections")
      ->check(CLI::Range(1, 1024));
  bs->add_option("--batch", submit.batch,
                 "Jobs per request (> 1: POST /api/v1/jobs/batch, one durable batch each)")
      ->check(CLI::Range(1, 1000));
  bs->add_flag("--json", submit.json, "Print one JSON object");
  bs->callback([=] { *exit_code = arbiter::bench::RunSubmitBench(submit); });
  static arbiter::bench::E2eBenchOptions e2e;
  auto* be = b->add_subcommand(
      "e2e",
      "End-to-end packing of real jobs: a real server and real agents with fake GPUs on "
      "loopback run a mix of 1-, 2-, 4- and 8-GPU sleep jobs released at once\n"
      "Example: arbiter bench e2e --agents 16 --gpus-per-agent 8 --jobs 1000 --json");
  be->add_option("--agents", e2e.agents, "Node agents to start")->check(CLI::Range(1, 256));
  be->add_option("--gpus-per-agent", e2e.gpus_per_agent, "Fake GPUs per agent")
      ->check(CLI::Range(1, 64));
  be->add_option("--jobs", e2e.jobs, "Jobs in the mix")->check(CLI::Range(1, 1000000));
  be->add_option("--job-seconds", e2e.job_seconds, "How long each job sleeps")
      ->check(CLI::Range(0.0, 3600.0));
  be->add_option("--walltime", e2e.walltime_seconds, "Each job's walltime in seconds")
      ->check(CLI::Range(1, 86400));
  be->add_option("--heartbeat-ms", e2e.heartbeat_ms, "The agents' heartbeat interval")
      ->check(CLI::Range(50, 60000));
  be->add_option("--cycle-interval-ms", e2e.cycle_interval_ms,
                 "The server's time between periodic scheduling cycles")
      ->check(CLI::Range(1, 60000));
  be->add_option("--timeout", e2e.timeout_seconds, "Give up after this many seconds")
      ->check(CLI::Range(1, 86400));
  be->add_flag("--keep", e2e.keep, "Keep the temporary folder (logs, the store)");
  be->add_flag("--json", e2e.json, "Print one JSON object");
  be->callback([=] { *exit_code = arbiter::bench::RunE2eBench(e2e); });
  static arbiter::bench::GatewayBenchOptions gateway;
  auto* bg = b->add_subcommand(
      "gateway",
      "The gateway of online services next to nginx: both in front of the same "
      "arbiter-echo-server replicas on loopback, with the same closed-loop load, and the "
      "replicas straight\n"
      "Example: arbiter bench gateway --replicas 4 --concurrency 64,1000 --requests 50000 --json");
  bg->add_option("--replicas", gateway.replicas, "arbiter-echo-server replicas to start")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  bg->add_option("--concurrency", gateway.concurrency,
                 "Concurrent keep-alive connections, one row each (comma-separated)")
      ->delimiter(',')
      ->check(CLI::Range(1, 20000));
  bg->add_option("--requests", gateway.requests, "Requests per row")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}))
      ->capture_default_str();
  bg->add_option("--delay-ms", gateway.delay_ms, "Time each replica waits before it answers")
      ->check(CLI::Range(0, 60000))
      ->capture_default_str();
  bg->add_option("--threads", gateway.threads,
                 "The gateway's io threads and nginx's workers (0: one per hardware thread)")
      ->check(CLI::Range(0, 1024));
  bg->add_option("--rounds", gateway.rounds,
                 "Runs of each row, interleaved between the three; the fastest is reported")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  bg->add_option("--nginx", gateway.nginx, "The nginx executable");
  bg->add_flag("--keep", gateway.keep, "Keep the temporary folder (logs, configurations)");
  bg->add_flag("--json", gateway.json, "Print one JSON object");
  bg->callback([=] { *exit_code = arbiter::bench::RunGatewayBench(gateway); });
  b->callback([=] {
    if (!b->got_subcommand(bs) && !b->got_subcommand(be) && !b->got_subcommand(bg)) {
      *exit_code = arbiter::bench::RunBench(bench);
    }
  });
}

}  // namespace arbiter::bench
