#include "bench/bench_flags.h"

#include <CLI/CLI.hpp>

#include "bench/bench_command.h"
#include "bench/e2e_bench.h"
#include "bench/fidelity_bench.h"
#include "bench/gateway_bench.h"
#include "bench/history_bench.h"
#include "bench/serving_bench.h"
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
  static arbiter::bench::FidelityBenchOptions fidelity;
  auto* bf = b->add_subcommand(
      "plan-fidelity",
      "The what-if replay against what happened: a real server and agents with fake GPUs run a "
      "seeded stream of sleep jobs in three queues (gangs, priorities, preemption), then the "
      "unchanged replay of that history is compared per queue (docs/simulator.md)\n"
      "Example: arbiter bench plan-fidelity --agents 4 --jobs 300 --load 1.3");
  bf->add_option("--agents", fidelity.agents, "Node agents to start")->check(CLI::Range(4, 256));
  bf->add_option("--gpus-per-agent", fidelity.gpus_per_agent, "Fake GPUs per agent")
      ->check(CLI::Range(8, 64));
  bf->add_option("--jobs", fidelity.jobs, "Jobs in the stream")->check(CLI::Range(1, 100000));
  bf->add_option("--load", fidelity.load, "Offered GPU-seconds per second over the GPUs")
      ->check(CLI::Range(0.01, 100.0));
  bf->add_option("--job-seconds", fidelity.mean_job_seconds, "Mean sleep of a job")
      ->check(CLI::Range(0.1, 3600.0));
  bf->add_option("--seed", fidelity.seed, "Seed of the stream");
  bf->add_option("--heartbeat-ms", fidelity.heartbeat_ms, "The agents' heartbeat interval")
      ->check(CLI::Range(50, 60000));
  bf->add_option("--cycle-interval-ms", fidelity.cycle_interval_ms,
                 "The server's periodic cycle (also the replay's)")
      ->check(CLI::Range(10, 60000));
  bf->add_option("--timeout", fidelity.timeout_seconds, "Give up after this many seconds")
      ->check(CLI::Range(1, 86400));
  bf->add_flag("--keep", fidelity.keep, "Keep the temporary folder (logs, the store)");
  bf->add_flag("--json", fidelity.json, "Print one JSON object");
  bf->callback([=] { *exit_code = arbiter::bench::RunFidelityBench(fidelity); });
  static arbiter::bench::HistoryBenchOptions history;
  auto* bh = b->add_subcommand(
      "history",
      "A year of job history written into a store, then the real server started on it: its RSS, "
      "start time, reports and job list over the history (docs/benchmarks.md)\n"
      "Example: arbiter bench history --jobs 5000000 --live 50000 --json");
  bh->add_option("--jobs", history.jobs, "Finished jobs over the last 365 days")
      ->check(CLI::Range(int64_t{1}, int64_t{100000000}));
  bh->add_option("--live", history.live, "Live (pending) jobs")
      ->check(CLI::Range(int64_t{0}, int64_t{10000000}));
  bh->add_option("--batch", history.batch, "Jobs per write batch")
      ->check(CLI::Range(int64_t{1}, int64_t{1000000}));
  bh->add_option("--store", history.store,
                 "A PostgreSQL store URL (an empty database) instead of SQLite in the folder");
  bh->add_option("--dir", history.dir, "The bench's folder (default: a temporary one)");
  bh->add_flag(
      "--no-reports", [](int64_t) { history.reports = false; },
      "Skip the two reports (today they read every stored event)");
  bh->add_flag("--keep", history.keep, "Keep the temporary folder (the store, the server's log)");
  bh->add_flag("--json", history.json, "Print one JSON object");
  bh->callback([=] { *exit_code = arbiter::bench::RunHistoryBench(history); });
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
  static arbiter::bench::ServingBenchOptions serving;
  auto* bv = b->add_subcommand(
      "serving",
      "Autoscaling and lending idle serving GPUs to training, against a fixed replica count: "
      "a real server, its gateway and arbiter-echo-server replicas on fake GPUs, open-loop load "
      "from an LLM inference trace under a day/night pattern, and preemptible training jobs "
      "that checkpoint; two arms, static then arbiter\n"
      "Example: arbiter bench serving --duration 120 --speedup 30 --gpus 8 --json");
  bv->add_option("--trace", serving.trace,
                 "An Azure LLM inference trace (TIMESTAMP,ContextTokens,GeneratedTokens)")
      ->capture_default_str();
  bv->add_option("--duration", serving.duration_s, "Seconds of load per arm")
      ->check(CLI::Range(5.0, 86400.0))
      ->capture_default_str();
  bv->add_option("--speedup", serving.speedup, "Trace seconds per second at the day's peak")
      ->check(CLI::Range(0.01, 100000.0))
      ->capture_default_str();
  bv->add_option("--period", serving.period_s,
                 "Seconds of one day/night cycle (0: --duration: night, day, night)")
      ->check(CLI::Range(0.0, 86400.0));
  bv->add_option("--trough", serving.trough, "The rate multiplier at night (1 at the peak)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  bv->add_option("--gpus", serving.gpus, "Fake GPUs in the cluster")
      ->check(CLI::Range(2, 512))
      ->capture_default_str();
  bv->add_option("--agents", serving.agents,
                 "Node agents to split the GPUs over (0: the server's built-in node)")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  bv->add_option("--slo-ms", serving.slo_ms, "Latency target of each request")
      ->check(CLI::Range(1.0, 600000.0))
      ->capture_default_str();
  bv->add_option("--max-concurrency", serving.max_concurrency, "Requests a replica serves at once")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  bv->add_option("--utilization", serving.utilization,
                 "Share of a replica's slots the peak's count and autoscaling aim at")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str();
  bv->add_option("--static-replicas", serving.static_replicas,
                 "The static arm's replicas and the arbiter arm's maximum (0: the peak's need)")
      ->check(CLI::Range(0, 512));
  bv->add_option("--min-replicas", serving.min_replicas, "The arbiter arm's minimum replicas")
      ->check(CLI::Range(0, 512))
      ->capture_default_str();
  bv->add_option("--prefill-ms-per-token", serving.prefill_ms_per_token,
                 "Service time per prompt token")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  bv->add_option("--decode-ms-per-token", serving.decode_ms_per_token,
                 "Service time per generated token")
      ->check(CLI::Range(0.0, 1000.0))
      ->capture_default_str();
  bv->add_option("--train-work", serving.train_work_s, "Seconds of work of each training job")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  bv->add_option("--checkpoint", serving.checkpoint_s,
                 "Seconds between a training job's checkpoints")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  bv->add_option("--grace", serving.grace_s, "The training class's grace period in seconds")
      ->check(CLI::Range(0, 3600))
      ->capture_default_str();
  bv->add_option("--reclaim-deadline", serving.reclaim_deadline_s,
                 "The service's reclaim_deadline_seconds")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  bv->add_option("--arms", serving.arms, "Which arms to run, in order: static, arbiter")
      ->capture_default_str();
  bv->add_flag("--keep", serving.keep,
               "Keep the temporary folder (logs, stores, the training jobs' records)");
  bv->add_flag("--json", serving.json, "Print one JSON object");
  bv->callback([=] { *exit_code = arbiter::bench::RunServingBench(serving); });
  b->callback([=] {
    if (!b->got_subcommand(bs) && !b->got_subcommand(be) && !b->got_subcommand(bg) &&
        !b->got_subcommand(bv) && !b->got_subcommand(bh) && !b->got_subcommand(bf)) {
      *exit_code = arbiter::bench::RunBench(bench);
    }
  });
}

}  // namespace arbiter::bench
