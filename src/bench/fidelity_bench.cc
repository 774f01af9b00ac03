#include "bench/fidelity_bench.h"

#include <fmt/format.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "bench/bench_api.h"
#include "bench/child_process.h"

namespace arbiter::bench {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

constexpr const char* kQueues[] = {"train", "eval", "infer"};

void Progress(const std::string& m) {
  std::fprintf(stderr, "bench plan-fidelity: %s\n", m.c_str());
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Job {
  double at = 0;  // seconds after the first submission
  std::string queue, priority_class;
  int tasks = 1, gpus = 1;
  double seconds = 1;
};

// The seeded stream: queues 50/20/30 (train, eval, infer); train has gangs of 2 or 4 tasks of 8
// GPUs (15%); infer is high (50%) or critical (10%) priority, train high 10%; Poisson arrivals at
// `load` x the cluster's GPUs of offered GPU-seconds per second.
std::vector<Job> MakeJobs(const FidelityBenchOptions& o) {
  std::mt19937_64 rng(o.seed);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<Job> jobs;
  double gpu_seconds = 0;
  constexpr int kSizes[] = {1, 2, 4, 8};
  for (int i = 0; i < o.jobs; ++i) {
    Job j;
    const double q = u(rng);
    j.queue = q < 0.5 ? "train" : q < 0.7 ? "eval" : "infer";
    j.priority_class = "normal";
    const double c = u(rng);
    if (j.queue == "infer") j.priority_class = c < 0.1 ? "critical" : c < 0.6 ? "high" : "normal";
    if (j.queue == "train" && c < 0.1) j.priority_class = "high";
    j.gpus = kSizes[static_cast<int>(u(rng) * 4) % 4];
    if (j.queue == "train" && u(rng) < 0.15) {
      j.tasks = u(rng) < 0.5 ? 2 : 4;
      j.gpus = 8;
    }
    j.seconds = std::round(o.mean_job_seconds * (1.0 / 3 + u(rng) * 4.0 / 3) * 10) / 10;
    gpu_seconds += j.tasks * j.gpus * j.seconds;
    jobs.push_back(j);
  }
  const double rate = o.load * o.agents * o.gpus_per_agent * o.jobs / gpu_seconds;  // jobs / s
  std::exponential_distribution<double> gap(rate);
  double t = 0;
  for (Job& j : jobs) {
    j.at = t;
    t += gap(rng);
  }
  return jobs;
}

int StartServer(const std::string& binary, const std::string& dir, const FidelityBenchOptions& o,
                ChildProcess* server) {
  const int gpus = o.agents * o.gpus_per_agent;
  // Guarantees: train half the GPUs, eval an eighth, infer the rest; idle ones are lent.
  std::ofstream(dir + "/config.yaml") << fmt::format(
      "gpu_models:\n  - {{name: A100-80G, memory_mib: 81920}}\n"
      "priority_classes:\n"
      "  - {{name: normal, value: 100, preemptible: true, min_runtime_seconds: 0, "
      "grace_period_seconds: 0}}\n"
      "  - {{name: high, value: 500, preemptible: true, min_runtime_seconds: 0, "
      "grace_period_seconds: 0}}\n"
      "  - {{name: critical, value: 1000, preemptible: false, grace_period_seconds: 0}}\n"
      "tenants:\n"
      "  - name: research\n    queues:\n"
      "      - {{name: train, guaranteed: {{gpu: {}}}}}\n"
      "      - {{name: eval, guaranteed: {{gpu: {}}}}}\n"
      "  - name: prod\n    queues:\n"
      "      - {{name: infer, guaranteed: {{gpu: {}}}}}\n",
      gpus / 2, gpus / 8, gpus - gpus / 2 - gpus / 8);
  if (!server->Start({binary, "server", "--data-dir", dir + "/server", "--listen", "127.0.0.1:0",
                      "--config", dir + "/config.yaml", "--cycle-interval-ms",
                      std::to_string(o.cycle_interval_ms), "--rate-limit", "0"},
                     dir + "/server.log")) {
    throw std::runtime_error("cannot start the server");
  }
  const std::string marker = "listening on http://127.0.0.1:";
  for (int i = 0; i < 400; ++i) {  // up to 20 s
    const std::string out = ReadFile(dir + "/server.log");
    const size_t at = out.find(marker);
    if (at != std::string::npos && out.find('\n', at) != std::string::npos) {
      return std::atoi(out.c_str() + at + marker.size());
    }
    if (server->Exited()) throw std::runtime_error("the server exited: see " + dir);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the server did not start within 20 s");
}

void StartAgents(BenchApi& api, const std::string& binary, int port, const std::string& dir,
                 const FidelityBenchOptions& o, std::vector<ChildProcess>* agents) {
  for (int i = 0; i < o.agents; ++i) {
    const std::string name = fmt::format("node-{:02d}", i + 1);
    const json token = api.Call("POST", "/api/v1/tokens",
                                json{{"user", "admin"}, {"role", "node"}, {"node", name}}, 201);
    const std::string work = fmt::format("{}/agent-{:02d}", dir, i + 1);
    fs::create_directories(work);
    if (!(*agents)[static_cast<size_t>(i)].Start(
            {binary, "agent", "--server", fmt::format("http://127.0.0.1:{}", port), "--token",
             token.at("token").get<std::string>(), "--name", name, "--work-dir", work,
             "--fake-gpus", std::to_string(o.gpus_per_agent), "--gpu-model", "A100-80G",
             "--heartbeat-ms", std::to_string(o.heartbeat_ms)},
            work + "/agent.log")) {
      throw std::runtime_error("cannot start an agent");
    }
  }
  for (int i = 0; i < 600; ++i) {  // up to 30 s
    int ready = 0;
    const json nodes = api.Call("GET", "/api/v1/nodes", nullptr, 200);
    for (const json& n : nodes["items"]) {
      ready += n.value("state", "") == "ready" ? 1 : 0;
    }
    if (ready == o.agents) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  throw std::runtime_error("the agents did not register within 30 s");
}

// Submits each job at its time; returns the seconds from the first submission to the drain.
double SubmitAndDrain(BenchApi& api, const std::vector<Job>& jobs, const FidelityBenchOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const Job& j = jobs[i];
    std::this_thread::sleep_until(start +
                                  std::chrono::microseconds(static_cast<int64_t>(j.at * 1e6)));
    const json body = {{"name", fmt::format("fid-{}", i)},
                       {"queue", j.queue},
                       {"type", j.tasks > 1 ? "training" : "batch-inference"},
                       {"priority_class", j.priority_class},
                       {"tasks", j.tasks},
                       {"command", {"sleep", fmt::format("{}", j.seconds)}},
                       {"resources", {{"gpus", j.gpus}, {"cpu_milli", 10}, {"memory_mib", 16}}}};
    api.Call("POST", "/api/v1/jobs", body, 201);
    if ((i + 1) % 50 == 0) Progress(fmt::format("{} of {} jobs submitted", i + 1, jobs.size()));
  }
  const auto deadline = start + std::chrono::seconds(o.timeout_seconds);
  for (;;) {
    int live = 0;
    for (const char* q : kQueues) {
      const json s = api.Call("GET", fmt::format("/api/v1/queues/{}", q), nullptr, 200);
      live += s.value("pending", 0) + s.value("running", 0);
    }
    if (live == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(
          fmt::format("{} jobs still live after {} s", live, o.timeout_seconds));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double Diff(double replayed, double recorded) {
  return recorded > 0 ? 100.0 * (replayed - recorded) / recorded : 0;
}

int Report(const json& plan, double run_seconds, const FidelityBenchOptions& o) {
  json rows = json::array();
  for (const json& q : plan["queues"]) {
    const json& rec = q["recorded"];
    const json& rep = q["replayed"];
    rows.push_back(
        {{"queue", q["queue"]},
         {"jobs", rec["jobs"]},
         {"recorded_p50_s", rec["wait_p50_s"]},
         {"replayed_p50_s", rep["wait_p50_s"]},
         {"recorded_p90_s", rec["wait_p90_s"]},
         {"replayed_p90_s", rep["wait_p90_s"]},
         {"p90_diff_pct", Diff(rep["wait_p90_s"].get<double>(), rec["wait_p90_s"].get<double>())}});
  }
  const json& rec = plan["runs"][0];
  const json& rep = plan["runs"][1];
  json out = {{"agents", o.agents}, {"gpus_per_agent", o.gpus_per_agent},
              {"jobs", o.jobs},     {"load", o.load},
              {"seed", o.seed},     {"run_seconds", run_seconds},
              {"queues", rows},     {"recorded", rec},
              {"replayed", rep}};
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
    return 0;
  }
  std::printf("%d jobs on %d agents x %d GPUs, load %.2f, seed %llu, %.0f s\n", o.jobs, o.agents,
              o.gpus_per_agent, o.load, static_cast<unsigned long long>(o.seed), run_seconds);
  std::printf("%-8s %5s %12s %12s %12s %12s %9s\n", "queue", "jobs", "rec p50 s", "rep p50 s",
              "rec p90 s", "rep p90 s", "p90 diff");
  for (const json& r : rows) {
    std::printf("%-8s %5d %12.2f %12.2f %12.2f %12.2f %8.1f%%\n",
                r["queue"].get<std::string>().c_str(), r["jobs"].get<int>(),
                r["recorded_p50_s"].get<double>(), r["replayed_p50_s"].get<double>(),
                r["recorded_p90_s"].get<double>(), r["replayed_p90_s"].get<double>(),
                r["p90_diff_pct"].get<double>());
  }
  std::printf("%-8s %5d %12.2f %12.2f %12.2f %12.2f %8.1f%%\n", "all", rec["jobs"].get<int>(),
              rec["wait_p50_s"].get<double>(), rep["wait_p50_s"].get<double>(),
              rec["wait_p90_s"].get<double>(), rep["wait_p90_s"].get<double>(),
              Diff(rep["wait_p90_s"].get<double>(), rec["wait_p90_s"].get<double>()));
  std::printf(
      "preemptions: recorded %d, replayed %d; GPU allocation: recorded %.1f%%, replayed "
      "%.1f%%\n",
      rec["preemptions"].get<int>(), rep["preemptions"].get<int>(),
      rec["gpu_alloc_pct"].get<double>(), rep["gpu_alloc_pct"].get<double>());
  return 0;
}

}  // namespace

int RunFidelityBench(const FidelityBenchOptions& o) {
  if (o.agents < 4 || o.gpus_per_agent < 8 || o.jobs < 1 || !(o.load > 0) ||
      !(o.mean_job_seconds > 0)) {
    std::fprintf(stderr,
                 "arbiter bench plan-fidelity: needs --agents >= 4 and --gpus-per-agent >= 8 (the "
                 "gangs take 4 nodes of 8 GPUs), --jobs >= 1, --load and --job-seconds > 0\n");
    return 2;
  }
  const std::string binary = o.binary.empty() ? SelfExe() : o.binary;
  std::string tmpl = (fs::temp_directory_path() / "arbiter-fidelity-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "arbiter bench plan-fidelity: cannot create a temporary folder\n");
    return 1;
  }
  const std::string dir = tmpl;
  ::chmod(dir.c_str(), 0711);
  int exit_code = 0;
  json plan;
  double run_seconds = 0;
  {
    ChildProcess server(5000);
    std::vector<ChildProcess> agents(static_cast<size_t>(o.agents));
    try {
      const int port = StartServer(binary, dir, o, &server);
      std::string token = ReadFile(dir + "/server/admin.token");
      while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) {
        token.pop_back();
      }
      BenchApi api(port, token);
      StartAgents(api, binary, port, dir, o, &agents);
      Progress(fmt::format("{} agents up; submitting {} jobs", o.agents, o.jobs));
      run_seconds = SubmitAndDrain(api, MakeJobs(o), o);
      Progress(fmt::format("every job ended after {:.0f} s; replaying the history", run_seconds));
      plan = api.Call("POST", "/api/v1/plan",
                      json{{"since", fmt::format("{}s", static_cast<int64_t>(run_seconds) + 60)},
                           {"cycle_interval_ms", o.cycle_interval_ms}},
                      200);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "arbiter bench plan-fidelity: %s (logs in %s)\n", e.what(), dir.c_str());
      exit_code = 1;
    }
    for (ChildProcess& a : agents) a.Stop(10000);
    server.Stop(10000);
  }
  if (exit_code == 0) exit_code = Report(plan, run_seconds, o);
  if (o.keep || exit_code != 0) {
    std::fprintf(stderr, "bench plan-fidelity: logs and the store are in %s\n", dir.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return exit_code;
}

}  // namespace arbiter::bench
