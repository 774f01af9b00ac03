#include "bench/serving_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/bench_api.h"
#include "bench/child_process.h"
#include "bench/open_loop.h"
#include "bench/serving_model.h"

namespace arbiter::bench {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void Progress(const std::string& m) { std::fprintf(stderr, "bench serving: %s\n", m.c_str()); }

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The cluster's configuration: `serving` guaranteed the peak's replicas, `training` nothing (it
// borrows); serving replicas are never preempted, training jobs at once (min_runtime 0) with a
// grace period within the service's reclaim deadline.
std::string ClusterConfig(int serving_gpus, int grace_s) {
  return fmt::format(
      "gpu_models:\n  - {{name: A100-80G, memory_mib: 81920}}\n"
      "priority_classes:\n"
      "  - {{name: serving, value: 1000, preemptible: false}}\n"
      "  - {{name: training, value: 10, preemptible: true, min_runtime_seconds: 0, "
      "grace_period_seconds: {}}}\n"
      "tenants:\n  - name: lab\n    queues:\n"
      "      - {{name: serving, guaranteed: {{gpu: {}}}}}\n"
      "      - {{name: training, guaranteed: {{gpu: 0}}}}\n",
      grace_s, serving_gpus);
}

// A training job: `train_work_s` steps of one second, a checkpoint every `checkpoint_s` steps
// (written to a temp file, renamed), resumed from at start; each run recorded in $1 (start,
// checkpoints, SIGTERM or the end, with the time in ms and the step). SIGTERM stops it at once:
// the steps since its last checkpoint are lost.
std::string TrainingScript(int work_s, int checkpoint_s) {
  return fmt::format(
      R"(runs="$1"; d="$ARBITER_CHECKPOINT_DIR"; mkdir -p "$d"
step=0; [ -f "$d/progress" ] && step=$(cat "$d/progress")
echo "start $(date +%s%3N) $step" >> "$runs"
trap 'echo "term $(date +%s%3N) $step" >> "$runs"; exit 143' TERM
while [ "$step" -lt {work} ]; do
  sleep 1 & wait $!
  step=$((step + 1))
  if [ $((step % {every})) -eq 0 ] && [ "$step" -lt {work} ]; then
    echo "$step" > "$d/progress.tmp" && mv "$d/progress.tmp" "$d/progress"
    echo "ckpt $(date +%s%3N) $step" >> "$runs"
  fi
done
echo "$step" > "$d/progress.tmp" && mv "$d/progress.tmp" "$d/progress"
echo "end $(date +%s%3N) $step" >> "$runs"
)",
      fmt::arg("work", work_s), fmt::arg("every", checkpoint_s));
}

struct Setup {
  std::string binary;
  std::string echo;
  std::string dir;
  int replicas = 0;  // the peak's count: the static arm's, the arbiter arm's max
  std::vector<Arrival> arrivals;
  int ports_lo = 0;
};

json ServiceSpec(const ServingBenchOptions& o, const Setup& s, bool autoscale) {
  json spec = {{"name", "chat"},
               {"queue", "serving"},
               {"priority_class", "serving"},
               {"template",
                {{"command", {s.echo}},
                 {"resources", {{"gpus", 1}, {"cpu_milli", 10}, {"memory_mib", 16}}}}},
               {"readiness",
                {{"path", "/readyz"},
                 {"period_seconds", 0.2},
                 {"timeout_seconds", 0.2},
                 {"failure_threshold", 3}}},
               {"max_concurrency", o.max_concurrency},
               {"request_queue", {{"max", 100000}, {"timeout_ms", 30000}}},
               {"slo", {{"latency_ms", std::lround(o.slo_ms)}, {"percentile", 99}}},
               {"drain_seconds", 2},
               {"reclaim_deadline_seconds", o.reclaim_deadline_s}};
  if (autoscale) {
    spec["replicas"] = {{"min", o.min_replicas}, {"max", s.replicas}};
    spec["autoscaling"] = {{"metric", "concurrency"},
                           {"target", o.max_concurrency},
                           {"target_utilization", std::lround(o.utilization * 100)},
                           {"stable_window_seconds", 12},
                           {"panic_window_seconds", 2},
                           {"scale_down_delay_seconds", 6}};
  } else {
    spec["replicas"] = s.replicas;
  }
  return spec;
}

// What the sampler saw, once a second during the load.
struct Samples {
  std::atomic<bool> stop{false};
  double allocated_sum = 0;  // GPUs allocated on the nodes
  double ready_sum = 0;      // ready replicas
  int count = 0;
  int max_ready = 0;
};

void Sample(int port, const std::string& token, Samples* s) {
  BenchApi api(port, token);
  auto next = Clock::now();
  while (!s->stop) {
    try {
      double allocated = 0;
      const json list = api.Call("GET", "/api/v1/nodes", nullptr, 200);
      for (const json& n : list["items"]) {
        allocated += n.value("allocated", json::object()).value("gpus", 0.0);
      }
      const json svc = api.Call("GET", "/api/v1/services/chat", nullptr, 200);
      const int ready = svc["status"].value("ready", 0);
      s->allocated_sum += allocated;
      s->ready_sum += ready;
      s->max_ready = std::max(s->max_ready, ready);
      ++s->count;
    } catch (const std::exception&) {
      // a missed sample
    }
    next += std::chrono::seconds(1);
    while (!s->stop && Clock::now() < next) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }
}

template <typename F>
bool WaitUntil(F ok, int seconds) {
  const auto deadline = Clock::now() + std::chrono::seconds(seconds);
  while (Clock::now() < deadline) {
    if (ok()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  return false;
}

json Timing(const json& autoscaling, const std::string& key) {
  const json t = autoscaling.value(key, json::object());
  json out = {{"count", t.value("count", 0)}, {"p50_s", nullptr}, {"p99_s", nullptr}};
  if (t.contains("p50_seconds")) out["p50_s"] = t["p50_seconds"];
  if (t.contains("p99_seconds")) out["p99_s"] = t["p99_seconds"];
  return out;
}

double Round(double x, int digits) {
  const double f = std::pow(10.0, digits);
  return std::round(x * f) / f;
}

// One arm: a fresh server, the service, the training backlog, the load; its figures.
json RunArm(const std::string& arm, const ServingBenchOptions& o, const Setup& s) {
  const bool autoscale = arm == "arbiter";
  const std::string dir = s.dir + "/" + arm;
  fs::create_directories(dir + "/runs");
  ::chmod(dir.c_str(), 0755);
  ::chmod((dir + "/runs").c_str(), 0777);  // the training jobs run as the tenant's user
  std::ofstream(dir + "/cluster.yaml") << ClusterConfig(s.replicas, o.grace_s);

  ChildProcess server(10000);
  std::vector<std::unique_ptr<ChildProcess>> agents;
  std::vector<std::string> args = {s.binary,
                                   "server",
                                   "--data-dir",
                                   dir + "/server",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--config",
                                   dir + "/cluster.yaml",
                                   "--gateway-listen",
                                   "127.0.0.1:0",
                                   "--rate-limit",
                                   "0",
                                   "--kill-tasks-on-exit",
                                   "--service-ports",
                                   fmt::format("{}-{}", s.ports_lo, s.ports_lo + 39)};
  if (o.agents == 0) {
    args.insert(args.end(), {"--local-node", "box", "--fake-gpus", std::to_string(o.gpus)});
  }
  if (!server.Start(args, dir + "/server.log")) throw std::runtime_error("cannot start the server");
  const auto api_line = server.WaitFor("listening on http://127.0.0.1:", 30000);
  if (!api_line) throw std::runtime_error("the server did not start: see " + dir + "/server.log");
  const int port = std::stoi(*api_line);
  const auto gw_line = server.WaitFor("gateway for services listening on http://", 30000);
  if (!gw_line) throw std::runtime_error("the gateway did not start: see " + dir + "/server.log");
  LoadTarget gateway;
  {
    const std::string hostport = gw_line->substr(0, gw_line->find('/'));
    gateway.host = hostport.substr(0, hostport.rfind(':'));
    gateway.port = std::stoi(hostport.substr(hostport.rfind(':') + 1));
  }
  std::string token = ReadFile(dir + "/server/admin.token");
  while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back()))) token.pop_back();
  BenchApi api(port, token);

  // The agents, when the GPUs are theirs.
  for (int i = 0; i < o.agents; ++i) {
    const std::string name = fmt::format("node-{:02d}", i + 1);
    const json t = api.Call("POST", "/api/v1/tokens",
                            json{{"user", "admin"}, {"role", "node"}, {"node", name}}, 201);
    const std::string work = fmt::format("{}/agent-{:02d}", dir, i + 1);
    fs::create_directories(work);
    agents.push_back(std::make_unique<ChildProcess>(10000));
    if (!agents.back()->Start(
            {s.binary, "agent", "--server", fmt::format("http://127.0.0.1:{}", port), "--token",
             t.at("token").get<std::string>(), "--name", name, "--work-dir", work, "--fake-gpus",
             std::to_string(o.gpus / o.agents), "--gpu-model", "A100-80G", "--heartbeat-ms", "500",
             "--kill-tasks-on-exit"},
            work + "/agent.log")) {
      throw std::runtime_error("cannot start an agent");
    }
  }
  const size_t nodes = o.agents == 0 ? 1 : static_cast<size_t>(o.agents);
  if (!WaitUntil(
          [&] {
            size_t ready = 0;
            const json list = api.Call("GET", "/api/v1/nodes", nullptr, 200);
            for (const json& n : list["items"]) {
              ready += n.value("state", "") == "ready" ? 1 : 0;
            }
            return ready >= nodes;
          },
          30)) {
    throw std::runtime_error("the nodes did not register within 30 s");
  }

  // The service, ready.
  api.Call("POST", "/api/v1/services", ServiceSpec(o, s, autoscale), 201);
  const int initial = autoscale ? o.min_replicas : s.replicas;
  auto ready = [&] {
    return api.Call("GET", "/api/v1/services/chat", nullptr, 200)["status"].value("ready", 0);
  };
  if (!WaitUntil([&] { return ready() >= initial; }, 60)) {
    throw std::runtime_error(fmt::format("{} replicas not ready within 60 s", initial));
  }
  Progress(fmt::format("{}: {} replicas ready; submitting the training backlog", arm, initial));

  // The training backlog: enough to keep every GPU busy for the whole run.
  const int jobs =
      static_cast<int>(std::ceil(o.gpus * (o.duration_s + 60) / std::max(1, o.train_work_s))) +
      o.gpus;
  const std::string script = TrainingScript(o.train_work_s, o.checkpoint_s);
  for (int i = 0; i < jobs; ++i) {
    const std::string name = fmt::format("train-{:03d}", i);
    api.Call("POST", "/api/v1/jobs",
             json{{"name", name},
                  {"queue", "training"},
                  {"type", "training"},
                  {"priority_class", "training"},
                  {"command", {"bash", "-c", script, "train", dir + "/runs/" + name + ".runs"}},
                  {"resources", {{"gpus", 1}, {"cpu_milli", 10}, {"memory_mib", 16}}},
                  {"walltime_seconds", 3600}},
             201);
  }
  // Every GPU in use before the load starts (training on what the service leaves).
  WaitUntil(
      [&] {
        double allocated = 0;
        const json list = api.Call("GET", "/api/v1/nodes", nullptr, 200);
        for (const json& n : list["items"]) {
          allocated += n.value("allocated", json::object()).value("gpus", 0.0);
        }
        return allocated >= o.gpus;
      },
      30);

  // The load, with a sampler beside it.
  Progress(fmt::format("{}: {} requests over {:.0f} s", arm, s.arrivals.size(), o.duration_s));
  std::vector<double> at;
  at.reserve(s.arrivals.size());
  for (const Arrival& a : s.arrivals) at.push_back(a.at_s);
  const std::string head_path = "/s/chat/v1/completions?delay_ms=";
  auto bytes = [&](int64_t i) {
    return HttpRequestBytes(gateway, "GET",
                            head_path + std::to_string(s.arrivals[static_cast<size_t>(i)].delay_ms),
                            {}, "");
  };
  Samples samples;
  const auto start = Clock::now() + std::chrono::milliseconds(200);
  const int64_t t0_ms = WallMs() + 200;
  std::thread sampler([&] { Sample(port, token, &samples); });
  OpenLoopOptions lo;
  lo.timeout_ms = 60000;
  const OpenLoopResult load = RunOpenLoop(gateway, at, bytes, lo, start);
  const int64_t t1_ms = std::max(WallMs(), t0_ms + static_cast<int64_t>(o.duration_s * 1000));
  samples.stop = true;
  sampler.join();

  const json svc = api.Call("GET", "/api/v1/services/chat", nullptr, 200);
  std::ofstream(dir + "/service.json") << svc.dump(2);  // its events and decisions, for --keep
  const json autoscaling = svc["status"].value("autoscaling", json::object());
  int64_t server_preemptions = 0;
  {
    std::string cursor;
    for (int page = 0; page < 100; ++page) {
      const json p = api.Call("GET",
                              fmt::format("/api/v1/jobs?queue=training&limit=1000{}",
                                          cursor.empty() ? "" : "&cursor=" + cursor),
                              nullptr, 200);
      for (const json& j : p["items"]) server_preemptions += j.value("preemptions", 0);
      if (p["next_cursor"].is_null()) break;
      cursor = p["next_cursor"].get<std::string>();
    }
  }
  // Stop everything: the training jobs' last runs end after the window and are not counted as
  // preempted.
  for (auto& a : agents) a->Stop(15000);
  server.Stop(15000);

  // The figures.
  std::vector<RequestOutcome> outcomes;
  outcomes.reserve(load.outcomes.size());
  double service_s = 0;
  std::vector<double> waits_ms;  // latency beyond the request's own service time
  for (size_t i = 0; i < load.outcomes.size(); ++i) {
    const bool ok = load.outcomes[i].status == 200;
    outcomes.push_back({load.outcomes[i].latency_ms, ok});
    if (ok) {
      service_s += s.arrivals[i].delay_ms / 1000.0;
      waits_ms.push_back(load.outcomes[i].latency_ms - s.arrivals[i].delay_ms);
    }
  }
  const LatencyFigures lat = ComputeLatencies(outcomes, o.slo_ms);
  std::vector<TrainingRun> runs;
  std::error_code ec;
  for (const auto& f : fs::directory_iterator(dir + "/runs", ec)) {
    for (const TrainingRun& r : ParseTrainingRuns(ReadFile(f.path().string()))) runs.push_back(r);
  }
  const TrainingFigures train = ComputeTraining(runs, t0_ms, t1_ms, 1);
  const double window_s = static_cast<double>(t1_ms - t0_ms) / 1000.0;
  const double mean_ready = samples.count > 0 ? samples.ready_sum / samples.count : 0;
  const double mean_alloc = samples.count > 0 ? samples.allocated_sum / samples.count : 0;
  const json up = Timing(autoscaling, "scale_up");
  const json reclaim = Timing(autoscaling, "reclaim");
  json out = {
      {"requests", lat.requests},
      {"failed_requests", lat.failed},
      {"slo_attainment", Round(lat.slo_attainment, 5)},
      {"p50_ms", Round(lat.p50_ms, 1)},
      {"p99_ms", Round(lat.p99_ms, 1)},
      {"p50_wait_ms", Round(Percentile(waits_ms, 50), 1)},
      {"p99_wait_ms", Round(Percentile(waits_ms, 99), 1)},
      {"training_gpu_hours", Round(train.gpu_hours, 5)},
      {"training_work_lost_gpu_hours", Round(train.lost_gpu_hours, 5)},
      {"training_preemptions", train.preemptions},
      {"training_preemptions_server", server_preemptions},
      {"training_jobs_finished", train.jobs_finished},
      {"scale_ups", up["count"]},
      {"scale_up_p50_s", up["p50_s"]},
      {"scale_up_p99_s", up["p99_s"]},
      {"reclaims", reclaim["count"]},
      {"reclaim_p50_s", reclaim["p50_s"]},
      {"reclaim_p99_s", reclaim["p99_s"]},
      {"mean_replicas_ready", Round(mean_ready, 2)},
      {"max_replicas_ready", samples.max_ready},
      {"mean_gpu_allocation", Round(o.gpus > 0 ? mean_alloc / o.gpus : 0, 4)},
      // Busy: a training run's GPU, and a replica's GPU for the share of its slots serving.
      {"gpu_busy_share",
       Round((train.gpu_hours * 3600 + service_s / std::max(1, o.max_concurrency)) /
                 (o.gpus * window_s),
             4)},
      {"serving_slot_utilization",
       Round(mean_ready > 0 ? service_s / (mean_ready * o.max_concurrency * window_s) : 0, 4)},
      {"window_s", Round(window_s, 1)},
      {"client_connections", load.connections_opened}};
  if (!load.first_error.empty()) out["first_error"] = load.first_error;
  Progress(fmt::format("{}: SLO {:.2f}%, p99 {:.0f} ms, {} failed, training {:.4f} GPU-h", arm,
                       lat.slo_attainment * 100, lat.p99_ms, lat.failed, train.gpu_hours));
  return out;
}

std::string Cell(const json& v) {
  if (v.is_null()) return "-";
  if (v.is_number_float()) return fmt::format("{:g}", v.get<double>());
  return v.dump();
}

}  // namespace

int RunServingBench(const ServingBenchOptions& o) {
  if (o.gpus < 2 || o.agents < 0 || (o.agents > 0 && o.gpus % o.agents != 0)) {
    std::fprintf(stderr, "error: --gpus must be at least 2 and a multiple of --agents\n");
    return 2;
  }
  if (o.duration_s <= 0 || o.speedup <= 0 || o.trough <= 0 || o.trough > 1 || o.slo_ms <= 0 ||
      o.max_concurrency < 1 || o.utilization <= 0 || o.utilization > 1 || o.train_work_s < 1 ||
      o.checkpoint_s < 1) {
    std::fprintf(stderr,
                 "error: --duration, --speedup, --slo-ms, --max-concurrency, --train-work and "
                 "--checkpoint must be positive, --trough and --utilization in (0, 1]\n");
    return 2;
  }
  std::vector<std::string> arms;
  {
    std::stringstream ss(o.arms);
    for (std::string a; std::getline(ss, a, ',');) {
      if (a != "static" && a != "arbiter") {
        std::fprintf(stderr, "error: --arms: \"%s\" is neither static nor arbiter\n", a.c_str());
        return 2;
      }
      arms.push_back(a);
    }
  }
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  Setup s;
  s.binary = o.binary.empty() ? SelfExe() : o.binary;
  s.echo = o.echo_server.empty()
               ? (fs::path(s.binary).parent_path() / "arbiter-echo-server").string()
               : o.echo_server;
  if (access(s.echo.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "error: %s is not an executable (build arbiter-echo-server)\n",
                 s.echo.c_str());
    return 1;
  }
  // The trace: as given, else (the default's relative path) from the repository root above the
  // build folder.
  std::string trace_path = o.trace;
  if (!fs::exists(trace_path) && fs::path(trace_path).is_relative()) {
    const fs::path beside = fs::path(s.binary).parent_path().parent_path() / trace_path;
    if (fs::exists(beside)) trace_path = beside.string();
  }
  std::vector<TraceRequest> trace;
  {
    std::ifstream in(trace_path);
    if (!in) {
      std::fprintf(stderr, "error: --trace %s: cannot read it\n", o.trace.c_str());
      return 2;
    }
    std::string error;
    if (!ParseLlmTrace(in, &trace, &error)) {
      std::fprintf(stderr, "error: --trace %s: %s\n", trace_path.c_str(), error.c_str());
      return 2;
    }
  }
  const DayNight day{o.period_s > 0 ? o.period_s : o.duration_s, o.trough};
  const ServiceTimeModel model{o.prefill_ms_per_token, o.decode_ms_per_token};
  s.arrivals = ArrivalSchedule(trace, day, o.speedup, o.duration_s, model);
  s.replicas = o.static_replicas > 0
                   ? o.static_replicas
                   : PeakReplicas(s.arrivals, 5, o.max_concurrency, o.utilization);
  if (s.replicas >= o.gpus) {
    std::fprintf(stderr,
                 "error: the peak needs %d replicas of 1 GPU, which leaves no GPU of --gpus %d to "
                 "training: give more GPUs or a lower --speedup\n",
                 s.replicas, o.gpus);
    return 2;
  }
  s.ports_lo = 10000 + static_cast<int>(getpid() % 200) * 40;
  std::string tmpl = (fs::temp_directory_path() / "arbiter-bench-serving-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::fprintf(stderr, "error: cannot create a temporary folder\n");
    return 1;
  }
  s.dir = tmpl;
  ::chmod(s.dir.c_str(), 0755);
  Progress(fmt::format(
      "{} requests from {} over {:.0f} s per arm ({:.0f}x at the peak, trough {:.2f}); the "
      "peak needs {} replicas of {} GPUs",
      s.arrivals.size(), trace_path, o.duration_s, o.speedup, o.trough, s.replicas, o.gpus));

  json report = {{"arms", json::object()}};
  int rc = 0;
  for (const std::string& arm : arms) {
    try {
      report["arms"][arm] = RunArm(arm, o, s);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: arm %s: %s (logs in %s)\n", arm.c_str(), e.what(),
                   s.dir.c_str());
      rc = 1;
    }
  }
  report["settings"] = {{"trace", trace_path},
                        {"duration_s", o.duration_s},
                        {"speedup", o.speedup},
                        {"period_s", day.period_s},
                        {"trough", o.trough},
                        {"gpus", o.gpus},
                        {"agents", o.agents},
                        {"slo_ms", o.slo_ms},
                        {"max_concurrency", o.max_concurrency},
                        {"peak_replicas", s.replicas},
                        {"min_replicas", o.min_replicas},
                        {"prefill_ms_per_token", o.prefill_ms_per_token},
                        {"decode_ms_per_token", o.decode_ms_per_token},
                        {"train_work_s", o.train_work_s},
                        {"checkpoint_s", o.checkpoint_s},
                        {"grace_s", o.grace_s},
                        {"reclaim_deadline_s", o.reclaim_deadline_s}};
  const json& a = report["arms"];
  if (a.contains("static") && a.contains("arbiter")) {
    const double st = a["static"]["training_gpu_hours"].get<double>();
    report["training_gain"] =
        st > 0 ? Round(a["arbiter"]["training_gpu_hours"].get<double>() / st - 1, 4) : 0.0;
  }
  for (const auto& [name, f] : a.items()) {
    if (f["failed_requests"].get<int64_t>() > 0) rc = 1;
  }
  if (o.json) {
    std::printf("%s\n", report.dump(2).c_str());
  } else {
    std::vector<std::string> ran;
    for (const std::string& arm : arms) {
      if (a.contains(arm)) ran.push_back(arm);
    }
    std::printf("%-30s", "");
    for (const std::string& name : ran) std::printf(" %14s", name.c_str());
    std::printf("\n");
    const char* rows[] = {"requests",
                          "failed_requests",
                          "slo_attainment",
                          "p50_ms",
                          "p99_ms",
                          "p50_wait_ms",
                          "p99_wait_ms",
                          "training_gpu_hours",
                          "training_work_lost_gpu_hours",
                          "training_preemptions",
                          "training_jobs_finished",
                          "scale_ups",
                          "scale_up_p50_s",
                          "scale_up_p99_s",
                          "reclaims",
                          "reclaim_p50_s",
                          "reclaim_p99_s",
                          "mean_replicas_ready",
                          "mean_gpu_allocation",
                          "gpu_busy_share",
                          "serving_slot_utilization"};
    for (const char* r : rows) {
      std::printf("%-30s", r);
      for (const std::string& name : ran) {
        std::printf(" %14s", Cell(a[name].value(r, json())).c_str());
      }
      std::printf("\n");
    }
    if (report.contains("training_gain")) {
      std::printf("training GPU-hours, arbiter against static: %+.1f%%\n",
                  report["training_gain"].get<double>() * 100);
    }
    std::printf(
        "(%zu requests per arm over %.0f s, %.0fx at the peak, trough %.2f; SLO %.0f ms; %d "
        "GPUs, peak %d replicas)\n",
        s.arrivals.size(), o.duration_s, o.speedup, o.trough, o.slo_ms, o.gpus, s.replicas);
  }
  if (o.keep || rc != 0) {
    Progress("logs, stores and the training jobs' records are in " + s.dir);
  } else {
    std::error_code ec;
    fs::remove_all(s.dir, ec);
  }
  return rc;
}

}  // namespace arbiter::bench
