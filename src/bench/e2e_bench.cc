#include "bench/e2e_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/bench_api.h"
#include "bench/child_process.h"
#include "common/time.h"

namespace arbiter::bench {

using nlohmann::json;
namespace fs = std::filesystem;

std::vector<int> MixedJobSizes(int jobs) {
  constexpr int kSizes[] = {1, 2, 4, 8};
  std::vector<int> out;
  out.reserve(static_cast<size_t>(std::max(0, jobs)));
  uint64_t x = 12345;
  for (int i = 0; i < jobs; ++i) {
    x = (x * 1103515245 + 12345) % (uint64_t{1} << 31);
    out.push_back(kSizes[(x >> 16) % 4]);
  }
  return out;
}

namespace {

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// A job's time field in milliseconds since the epoch; 0 when null or unreadable.
int64_t ParseIsoMs(const json& v) {
  return v.is_string() ? ParseRfc3339Ms(v.get<std::string>()).value_or(0) : 0;
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Run {
  double release_ms = 0;
  json jobs = json::array();
};

void Progress(const std::string& m) { std::fprintf(stderr, "bench e2e: %s\n", m.c_str()); }

// 1. The server, with one tenant and one queue that may use the whole cluster; its port.
int StartServer(const std::string& binary, const std::string& dir, const E2eBenchOptions& o,
                ChildProcess* server_ptr) {
  ChildProcess& server = *server_ptr;
  const int total_gpus = o.agents * o.gpus_per_agent;
  std::ofstream(dir + "/config.yaml") << fmt::format(
      "gpu_models:\n  - {{name: A100-80G, memory_mib: 81920}}\n"
      "priority_classes:\n  - {{name: normal, value: 100, preemptible: true}}\n"
      "tenants:\n  - name: benchmark\n    queues:\n"
      "      - {{name: bench, guaranteed: {{gpu: {}}}, max: {{gpu: {}}}}}\n",
      total_gpus, total_gpus);
  if (!server.Start({binary, "server", "--data-dir", dir + "/server", "--listen", "127.0.0.1:0",
                     "--config", dir + "/config.yaml", "--cycle-interval-ms",
                     std::to_string(o.cycle_interval_ms), "--rate-limit", "0"},
                    dir + "/server.log")) {
    throw std::runtime_error("cannot start the server");
  }
  int port = 0;
  for (int i = 0; i < 400 && port == 0; ++i) {  // up to 20 s
    const std::string out = ReadFile(dir + "/server.log");
    const std::string marker = "listening on http://127.0.0.1:";
    const size_t at = out.find(marker);
    if (at != std::string::npos && out.find('\n', at) != std::string::npos) {
      port = std::atoi(out.c_str() + at + marker.size());
    }
    if (port == 0) {
      if (server.Exited()) throw std::runtime_error("the server exited: see " + dir);
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
  if (port == 0) throw std::runtime_error("the server did not start within 20 s");
  return port;
}

std::string AdminToken(const std::string& dir) {
  std::string admin_token = ReadFile(dir + "/server/admin.token");
  while (!admin_token.empty() && std::isspace(static_cast<unsigned char>(admin_token.back())))
    admin_token.pop_back();
  return admin_token;
}

// 2. The agents, each with its fake GPUs and its own node token, registered and cordoned.
std::vector<std::string> StartAgents(BenchApi& api, const std::string& binary,
                                     const std::string& url, const std::string& dir,
                                     const E2eBenchOptions& o,
                                     std::vector<ChildProcess>* agents_ptr) {
  std::vector<ChildProcess>& agents = *agents_ptr;
  std::vector<std::string> names;
  for (int i = 0; i < o.agents; ++i) {
    names.push_back(fmt::format("node-{:02d}", i + 1));
    const json token =
        api.Call("POST", "/api/v1/tokens",
                 json{{"user", "admin"}, {"role", "node"}, {"node", names.back()}}, 201);
    const std::string work = fmt::format("{}/agent-{:02d}", dir, i + 1);
    fs::create_directories(work);
    if (!agents[static_cast<size_t>(i)].Start(
            {binary, "agent", "--server", url, "--token", token.at("token").get<std::string>(),
             "--name", names.back(), "--work-dir", work, "--fake-gpus",
             std::to_string(o.gpus_per_agent), "--gpu-model", "A100-80G", "--heartbeat-ms",
             std::to_string(o.heartbeat_ms)},
            work + "/agent.log")) {
      throw std::runtime_error("cannot start an agent");
    }
  }
  size_t ready = 0;
  for (int i = 0; i < 600 && ready < names.size(); ++i) {  // up to 30 s
    ready = 0;
    const json nodes = api.Call("GET", "/api/v1/nodes", nullptr, 200);
    for (const json& n : nodes["items"]) {
      ready += n.value("state", "") == "ready" ? 1 : 0;
    }
    if (ready < names.size()) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  if (ready < names.size()) {
    throw std::runtime_error(
        fmt::format("only {} of {} agents registered within 30 s", ready, names.size()));
  }
  Progress(fmt::format("{} agents with {} fake GPUs each are up; cordoning them", o.agents,
                       o.gpus_per_agent));
  for (const std::string& n : names) {
    api.Call("POST", fmt::format("/api/v1/nodes/{}/cordon", n), nullptr, 200);
  }

  return names;
}

// 3. The jobs, submitted while no node is schedulable.
void SubmitMix(int port, const std::string& admin_token, const std::vector<int>& sizes,
               const E2eBenchOptions& o) {
  std::atomic<int> next{0};
  std::mutex mu;
  std::string error;
  std::vector<std::thread> submitters;
  const std::string sleep_arg = fmt::format("{}", o.job_seconds);
  for (int c = 0; c < o.submit_concurrency; ++c) {
    submitters.emplace_back([&] {
      BenchApi mine(port, admin_token);
      for (int i = next++; i < o.jobs; i = next++) {
        const int g = sizes[static_cast<size_t>(i)];
        const json body = {{"name", fmt::format("mix-{}-{}gpu", i, g)},
                           {"queue", "bench"},
                           {"type", "batch-inference"},
                           {"priority_class", "normal"},
                           {"command", {"sleep", sleep_arg}},
                           {"resources", {{"gpus", g}, {"cpu_milli", 10}, {"memory_mib", 16}}},
                           {"walltime_seconds", o.walltime_seconds}};
        try {
          mine.Call("POST", "/api/v1/jobs", body, 201);
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(mu);
          if (error.empty()) error = e.what();
        }
      }
    });
  }
  for (std::thread& t : submitters) t.join();
  if (!error.empty()) throw std::runtime_error(error);
  Progress(fmt::format("{} jobs queued; releasing the nodes", o.jobs));
}

// 4. Release every node at once, wait for the queue to drain, and collect the jobs' records.
void ReleaseAndDrain(BenchApi& api, const std::vector<std::string>& names, const E2eBenchOptions& o,
                     Run* run_ptr) {
  Run& run = *run_ptr;
  run.release_ms = static_cast<double>(WallMs());
  for (const std::string& n : names) {
    api.Call("POST", fmt::format("/api/v1/nodes/{}/uncordon", n), nullptr, 200);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(o.timeout_seconds);
  int last_pending = -1;
  for (;;) {
    const json q = api.Call("GET", "/api/v1/queues/bench", nullptr, 200);
    const int pending = q.value("pending", 0);
    const int running = q.value("running", 0);
    if (pending == 0 && running == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      throw std::runtime_error(fmt::format("{} jobs pending and {} running after {} s", pending,
                                           running, o.timeout_seconds));
    }
    if (pending / 100 != last_pending / 100) {
      Progress(fmt::format("{} pending, {} running", pending, running));
      last_pending = pending;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::string cursor;
  for (;;) {
    const json page = api.Call("GET",
                               fmt::format("/api/v1/jobs?queue=bench&limit=1000{}",
                                           cursor.empty() ? "" : "&cursor=" + cursor),
                               nullptr, 200);
    for (const json& j : page["items"]) run.jobs.push_back(j);
    if (page["next_cursor"].is_null()) break;
    cursor = page["next_cursor"].get<std::string>();
  }
}

// 5. The figures, from the jobs' own records (the server's clock is this machine's); the exit
// code (1 when some job did not succeed).
int ReportFigures(const Run& run, const std::vector<int>& sizes, const E2eBenchOptions& o,
                  const std::string& dir) {
  int exit_code = 0;
  const int total_gpus = o.agents * o.gpus_per_agent;
  double gpu_seconds_ideal = 0;
  for (int g : sizes) gpu_seconds_ideal += g * o.job_seconds;
  double end_ms = run.release_ms;
  double busy_gpu_ms = 0;
  int succeeded = 0;
  std::map<int, std::vector<double>> waits;  // by GPUs
  for (const json& j : run.jobs) {
    const int64_t started = ParseIsoMs(j["started_at"]);
    const int64_t finished = ParseIsoMs(j["finished_at"]);
    const int g = j["resources"].value("gpus", 0);
    succeeded += j.value("state", "") == "succeeded" ? 1 : 0;
    if (started > 0) waits[g].push_back((static_cast<double>(started) - run.release_ms) / 1000);
    if (finished > 0) end_ms = std::max(end_ms, static_cast<double>(finished));
    if (started > 0 && finished > started) {
      busy_gpu_ms += static_cast<double>(g) * static_cast<double>(finished - started);
    }
  }
  const double makespan = (end_ms - run.release_ms) / 1000;
  const double ideal = gpu_seconds_ideal / total_gpus;
  json out = {
      {"agents", o.agents},
      {"gpus_per_agent", o.gpus_per_agent},
      {"jobs", o.jobs},
      {"succeeded", succeeded},
      {"job_seconds", o.job_seconds},
      {"makespan_s", makespan},
      {"ideal_s", ideal},
      {"packing_efficiency", makespan > 0 ? ideal / makespan : 0},
      {"gpu_busy_pct", makespan > 0 ? 100 * busy_gpu_ms / 1000 / total_gpus / makespan : 0}};
  json by_size = json::object();
  for (const auto& [g, w] : waits) {
    double sum = 0;
    for (double x : w) sum += x;
    by_size[std::to_string(g)] = {{"jobs", w.size()},
                                  {"mean", sum / static_cast<double>(w.size())},
                                  {"p50", Percentile(w, 50)},
                                  {"p95", Percentile(w, 95)},
                                  {"max", Percentile(w, 100)}};
  }
  out["wait_s_by_gpus"] = by_size;
  if (succeeded != o.jobs) {
    std::fprintf(stderr, "arbiter bench e2e: %d of %d jobs succeeded (logs in %s)\n", succeeded,
                 o.jobs, dir.c_str());
    exit_code = 1;
  }
  if (o.json) {
    std::printf("%s\n", out.dump(2).c_str());
  } else {
    std::printf("jobs %d (%d succeeded) on %d agents x %d GPUs\n", o.jobs, succeeded, o.agents,
                o.gpus_per_agent);
    std::printf("makespan %.2f s, ideal %.2f s, packing efficiency %.3f, GPUs busy %.1f%%\n",
                makespan, ideal, out["packing_efficiency"].get<double>(),
                out["gpu_busy_pct"].get<double>());
    for (const auto& [g, w] : by_size.items()) {
      std::printf("  %s-GPU jobs: %d, wait mean %.2f s, p50 %.2f s, p95 %.2f s, max %.2f s\n",
                  g.c_str(), w["jobs"].get<int>(), w["mean"].get<double>(), w["p50"].get<double>(),
                  w["p95"].get<double>(), w["max"].get<double>());
    }
  }
  return exit_code;
}

}  // namespace

int RunE2eBench(const E2eBenchOptions& o) {
  if (o.agents < 1 || o.gpus_per_agent < 1 || o.jobs < 1) {
    std::fprintf(stderr, "arbiter bench e2e: --agents, --gpus-per-agent and --jobs must be >= 1\n");
    return 2;
  }
  if (o.gpus_per_agent < 8) {
    std::fprintf(stderr,
                 "arbiter bench e2e: --gpus-per-agent must be at least 8: the mix has 8-GPU jobs, "
                 "each on one node\n");
    return 2;
  }
  const std::string binary = o.binary.empty() ? SelfExe() : o.binary;
  std::string tmpl = (fs::temp_directory_path() / "arbiter-e2e-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "arbiter bench e2e: cannot create a temporary folder\n");
    return 1;
  }
  const std::string dir = tmpl;
  // The agents' tasks run as their own users: they pass through to their folders under it.
  ::chmod(dir.c_str(), 0711);
  int exit_code = 0;
  const std::vector<int> sizes = MixedJobSizes(o.jobs);
  Run run;
  {
    ChildProcess server(5000);
    std::vector<ChildProcess> agents(static_cast<size_t>(o.agents));
    try {
      const int port = StartServer(binary, dir, o, &server);
      const std::string admin_token = AdminToken(dir);
      BenchApi api(port, admin_token);
      const std::string url = fmt::format("http://127.0.0.1:{}", port);
      const std::vector<std::string> names = StartAgents(api, binary, url, dir, o, &agents);
      SubmitMix(port, admin_token, sizes, o);
      ReleaseAndDrain(api, names, o, &run);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "arbiter bench e2e: %s (logs in %s)\n", e.what(), dir.c_str());
      exit_code = 1;
    }
    for (ChildProcess& a : agents) a.Stop(10000);
    server.Stop(10000);
  }

  if (exit_code == 0) exit_code = ReportFigures(run, sizes, o, dir);
  if (o.keep || exit_code != 0) {
    std::fprintf(stderr, "bench e2e: logs and the store are in %s\n", dir.c_str());
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return exit_code;
}

}  // namespace arbiter::bench
