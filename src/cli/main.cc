// The `arbiter` command: one binary for every part (bench now; server, agent, CLI and simulator
// join it as they land).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "agent/agent_command.h"
#include "bench/bench_command.h"
#include "bench/e2e_bench.h"
#include "bench/submit_bench.h"
#include "cli/commands.h"
#include "server/server_command.h"
#include "sim/inflate_command.h"
#include "sim/replay_command.h"

#ifndef ARBITER_VERSION
#define ARBITER_VERSION "dev"
#endif

int main(int argc, char** argv) {
  CLI::App app{"Arbiter: AI compute scheduling for shared GPU clusters"};
  app.require_subcommand(1);

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
  arbiter::bench::SubmitBenchOptions submit;
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
  bs->callback([&] { exit_code = arbiter::bench::RunSubmitBench(submit); });
  arbiter::bench::E2eBenchOptions e2e;
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
  be->callback([&] { exit_code = arbiter::bench::RunE2eBench(e2e); });
  b->callback([&] {
    if (!b->got_subcommand(bs) && !b->got_subcommand(be)) {
      exit_code = arbiter::bench::RunBench(bench);
    }
  });

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
  inf->add_option("--html", inflate.html_path,
                  "Write a self-contained HTML report with charts to this file");
  inf->callback([&] { exit_code = arbiter::sim::RunInflateCommand(inflate); });

  arbiter::sim::ReplayCommandOptions replay;
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
  rep->add_option("--seed", replay.seed, "Seed of the policies' draws and of synthetic arrivals")
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
  rep->callback([&] { exit_code = arbiter::sim::RunReplayCommand(replay); });

  arbiter::sim::ConvertCommandOptions convert;
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
  conv->callback([&] { exit_code = arbiter::sim::RunConvertCommand(convert); });

  arbiter::server::ServerOptions server;
  auto* srv = app.add_subcommand("server",
                                 "Run the control plane: REST API, scheduler and store\n"
                                 "Example: arbiter server --data-dir /var/lib/arbiter --listen "
                                 "0.0.0.0:8080 --config cluster.yaml");
  srv->add_option("--data-dir", server.data_dir, "Folder of the store and admin.token");
  srv->add_option("--listen", server.listen, "HOST:PORT to serve the API on (port 0: any free)");
  srv->add_option("--config", server.config_file,
                  "YAML configuration applied at every start (deletions of objects with live "
                  "jobs are refused)");
  srv->add_option("--initial-config", server.initial_config_file,
                  "YAML configuration applied only when the data dir holds none yet (a first "
                  "start); later starts keep what admins changed")
      ->excludes("--config");
  srv->add_option("--log-format", server.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  srv->add_option("--cycle-interval-ms", server.cycle_interval_ms, "Time between scheduling cycles")
      ->check(CLI::Range(1, 600000));
  srv->add_option("--rate-limit", server.rate_limit, "Requests per second per token (0: unlimited)")
      ->check(CLI::Range(0.0, 1e9));
  srv->add_option("--http-threads", server.http_threads,
                  "The most HTTP threads: one per open connection (clients, agents' watches), "
                  "started as connections arrive")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  srv->add_option("--http-header-timeout-ms", server.http_header_timeout_ms,
                  "A request's line and headers must arrive within this long (else 408)")
      ->check(CLI::Range(int64_t{100}, int64_t{3600000}))
      ->capture_default_str();
  srv->add_option("--http-body-timeout-ms", server.http_body_timeout_ms,
                  "A request's body must arrive within this long after its headers (else 408)")
      ->check(CLI::Range(int64_t{100}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--http-max-headers", server.http_max_headers,
                  "The most headers a request may have (else 431)")
      ->check(CLI::Range(8, 10000))
      ->capture_default_str();
  srv->add_option("--http-max-header-bytes", server.http_max_header_bytes,
                  "The most bytes of request line and headers (else 431)")
      ->check(CLI::Range(1024, 16 * 1024 * 1024))
      ->capture_default_str();
  srv->add_option("--http-connections-per-address", server.http_connections_per_address,
                  "The most open connections from one client address, beyond which a connection "
                  "is answered 429 (default: a quarter of --http-threads; 0: no limit; behind a "
                  "proxy every client has the proxy's address)")
      ->check(CLI::Range(0, 1 << 20));
  srv->add_option("--http-idle-thread-ms", server.http_idle_thread_ms,
                  "HTTP threads beyond the first 8 exit after idling this long (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{86400000}))
      ->capture_default_str();
  srv->add_option("--task-min-cpu-milli", server.task_min_cpu_milli,
                  "Every task counts at least this much CPU (milli-cores) against quotas and "
                  "node capacity, whatever its job asks")
      ->check(CLI::Range(int64_t{0}, int64_t{1024000}))
      ->capture_default_str();
  srv->add_option("--task-min-memory-mib", server.task_min_memory_mib,
                  "Every task counts at least this much memory (MiB), whatever its job asks")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  srv->add_option("--tenant-max-tasks", server.tenant_max_tasks,
                  "Live tasks a tenant may have where its configuration sets no max.tasks (0: no "
                  "ceiling)")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000000}))
      ->capture_default_str();
  srv->add_option("--local-node", server.local_node,
                  "Run the tasks placed on this node as local processes (the built-in node)");
  srv->add_option("--fake-gpus", server.fake_gpus,
                  "Fake GPUs of the built-in node when it is not in the configuration (default: "
                  "the GPUs NVML finds, else 8 fake ones)")
      ->check(CLI::Range(0, 64));
  srv->add_option("--local-work-dir", server.local_work_dir,
                  "The built-in node's task folders (default: DATA_DIR-node, beside the data dir)");
  srv->add_option("--local-address", server.local_address,
                  "The built-in node's address for gangs (MASTER_ADDR; default: the --listen host, "
                  "or this machine's name)");
  srv->add_flag("!--no-cgroups", server.local_cgroups,
                "Do not put the built-in node's tasks in cgroups");
  srv->add_option("--max-task-processes", server.max_task_processes,
                  "Processes and threads one task of the built-in node may have at once")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 22))
      ->capture_default_str();
  srv->add_option("--orphan-timeout-ms", server.local_orphan_timeout_ms,
                  "The built-in node's tasks stop when the server is away this long (0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
      ->capture_default_str();
  srv->add_option("--run-as-default", server.run_as_default,
                  "User of the built-in node's tasks whose assignment names none (as root)")
      ->capture_default_str();
  srv->add_option("--shim", server.shim, "The arbiter-shim binary (default: beside this one)");
  srv->add_option("--fake-gpu-device-major", server.fake_gpu_device_major,
                  "Fake GPU i of the built-in node is the character device MAJOR:i (drills)")
      ->check(CLI::Range(0, 4095));
  srv->add_flag("--kill-tasks-on-exit", server.kill_tasks_on_exit,
                "At SIGTERM, kill the built-in node's tasks (default: they keep running and the "
                "next start adopts them)");
  srv->add_option("--tenant-uid-base", server.tenant_uid_base,
                  "Tenants whose configuration names no run_as get their own uid from this + 1 on")
      ->check(CLI::Range(int64_t{1000}, int64_t{4000000000}))
      ->capture_default_str();
  srv->add_option("--node-timeout-ms", server.node_timeout_ms,
                  "A node whose agent sends no heartbeat for this long is down; its tasks are lost")
      ->check(CLI::Range(100, 86400000))
      ->capture_default_str();
  srv->add_option("--reconnect-window-ms", server.reconnect_window_ms,
                  "After a start, known nodes have this long to reconnect before they can be "
                  "declared down (default: 5 node timeouts, at least 30 s)")
      ->check(CLI::Range(0, 86400000));
  srv->add_flag("--metrics-public", server.metrics_public,
                "Serve GET /metrics without a token (else: an admin token or the metrics token)");
  srv->add_option(
      "--metrics-token-file", server.metrics_token_file,
      "File whose first line is a secret that may read GET /metrics (and nothing else)");
  srv->add_option("--sample-interval-ms", server.sample_interval_ms,
                  "Time between metering samples of the cluster and its GPUs (docs/reports.md)")
      ->check(CLI::Range(1000, 3600000))
      ->capture_default_str();
  srv->callback([&] { exit_code = arbiter::server::RunServer(server); });

  arbiter::agent::AgentOptions agent;
  auto* agt = app.add_subcommand(
      "agent",
      "Run the node agent: register this node, heartbeat, run the tasks placed on it\n"
      "Example: arbiter agent --server http://head:8080 --token-file node.token --name gpu-07 "
      "--gpu-model H100-80G --labels rack=r1");
  agt->add_option("--server", agent.server, "URL of the server (http://HOST:PORT)")->required();
  agt->add_option("--token", agent.token, "A node token (admins: POST /api/v1/tokens role node)");
  agt->add_option("--token-file", agent.token_file, "A file whose first line is the node token");
  agt->add_option("--name", agent.name, "The node's name")->required();
  agt->add_option("--work-dir", agent.work_dir, "Folder of task logs, pid files and checkpoints")
      ->capture_default_str();
  agt->add_option("--listen", agent.listen,
                  "HOST:PORT of the log port the server reads task logs from (port 0: any)")
      ->capture_default_str();
  agt->add_option("--address", agent.address,
                  "Address of this node for gangs (MASTER_ADDR); default: as the server sees it");
  agt->add_option("--labels", agent.labels, "Node labels KEY=VALUE,...; rack= and block= too");
  agt->add_option("--fake-gpus", agent.fake_gpus, "Fake GPUs instead of NVML (tests, demos)")
      ->check(CLI::Range(0, 1024));
  agt->add_option("--gpu-model", agent.gpu_model,
                  "The configured GPU model of this node's GPUs (default: NVML's name; fake: the "
                  "server's first model)");
  agt->add_option("--gpu-memory-mib", agent.gpu_memory_mib,
                  "Memory of each fake GPU (0: the model's)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30));
  agt->add_option("--heartbeat-ms", agent.heartbeat_ms, "Time between heartbeats")
      ->check(CLI::Range(50, 600000))
      ->capture_default_str();
  agt->add_option("--backoff-max-ms", agent.backoff_max_ms,
                  "Longest wait between retries while the server does not answer")
      ->check(CLI::Range(100, 600000))
      ->capture_default_str();
  agt->add_option("--log-format", agent.log_format, "text or json")
      ->check(CLI::IsMember({"text", "json"}));
  agt->add_option("--nvml-library", agent.nvml_library, "The NVML library to load")
      ->capture_default_str();
  agt->add_flag("!--no-cgroups", agent.cgroups,
                "Do not put tasks in cgroups (no CPU, memory, process or device limits)");
  agt->add_option("--max-task-processes", agent.max_task_processes,
                  "Processes and threads one task may have at once")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 22))
      ->capture_default_str();
  agt->add_option("--orphan-timeout-ms", agent.orphan_timeout_ms,
                  "Tasks stop when the agent is away this long (default: the server's node "
                  "timeout; 0: never)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  agt->add_option("--run-as-default", agent.run_as_default,
                  "User of tasks whose assignment names none (when the agent runs as root)")
      ->capture_default_str();
  agt->add_option("--shim", agent.shim, "The arbiter-shim binary (default: beside this one)");
  agt->add_option("--fake-gpu-device-major", agent.fake_gpu_device_major,
                  "Fake GPU i is the character device MAJOR:i (device isolation drills)")
      ->check(CLI::Range(0, 4095));
  agt->add_flag("--kill-tasks-on-exit", agent.kill_tasks_on_exit,
                "At SIGTERM, kill the tasks (default: leave them for the next agent to adopt)");
  agt->callback([&] { exit_code = arbiter::agent::RunAgent(agent); });

  // The client commands: submit, jobs, show, why, logs, ..., top, apply, completion, version.
  arbiter::cli::RegisterUserCommands(app, argc, argv, &exit_code, ARBITER_VERSION);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Help is success; a usage error exits 2 (docs/cli.md).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
