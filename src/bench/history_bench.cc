#include "bench/history_bench.h"

#include <fmt/format.h>
#include <httplib.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "bench/child_process.h"
#include "store/open_store.h"

namespace arbiter::bench {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
constexpr int kTenants = 50;
constexpr int kQueuesPerTenant = 10;  // 500 queues
constexpr int kUsersPerTenant = 10;   // 500 users
constexpr int64_t kDayMs = 86'400'000;

void Progress(const std::string& m) { std::fprintf(stderr, "bench history: %s\n", m.c_str()); }

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string Tenant(int t) { return fmt::format("t{:02d}", t); }
std::string Queue(int t, int q) { return fmt::format("t{:02d}-q{}", t, q); }
std::string User(int t, int u) { return fmt::format("u{:02d}{}", t, u); }

// 50 tenants of 10 queues and 10 members each, one GPU model and no nodes (the live jobs wait).
std::string Config() {
  std::string out =
      "gpu_models:\n  - {name: A100-80G, memory_mib: 81920}\n"
      "priority_classes:\n  - {name: normal, value: 100, preemptible: true}\ntenants:\n";
  std::string users = "users:\n";
  for (int t = 0; t < kTenants; ++t) {
    out += fmt::format("  - name: {}\n    queues:\n", Tenant(t));
    for (int q = 0; q < kQueuesPerTenant; ++q) {
      out += fmt::format("      - {{name: {}, guaranteed: {{gpu: 8}}}}\n", Queue(t, q));
    }
    for (int u = 0; u < kUsersPerTenant; ++u) {
      users += fmt::format("  - {{name: {}, tenant: {}, role: member}}\n", User(t, u), Tenant(t));
    }
  }
  return out + users;
}

// The generator x = (x * 1103515245 + 12345) mod 2^31 (bench e2e's).
struct Lcg {
  uint64_t x = 12345;
  uint64_t Next() {
    x = (x * 1103515245 + 12345) % (uint64_t{1} << 31);
    return x >> 8;
  }
};

struct Shape {
  int tenant, queue, user, gpus;
  const char* type;
};

Shape NextShape(Lcg& rng) {
  static constexpr int kGpus[] = {1, 2, 4, 8};
  static constexpr const char* kTypes[] = {"training", "fine-tuning", "evaluation",
                                           "batch-inference", "experiment"};
  Shape s;
  s.tenant = static_cast<int>(rng.Next() % kTenants);
  s.queue = static_cast<int>(rng.Next() % kQueuesPerTenant);
  s.user = static_cast<int>(rng.Next() % kUsersPerTenant);
  s.gpus = kGpus[rng.Next() % 4];
  s.type = kTypes[rng.Next() % 5];
  return s;
}

// The stored spec, as the server writes it (api::JobSpecJsonText's members, in its order).
std::string SpecJson(const Shape& s, uint64_t id) {
  return fmt::format(
      R"({{"command":["python","train.py","--run","{}"],"distinct_nodes":false,"env":{{}},)"
      R"("gpu_models":[],"name":"run-{}","node_selector":{{}},"queue":"{}",)"
      R"("resources":{{"cpu_milli":{},"gpu_memory_mib":0,"gpu_milli":1000,"gpus":{},)"
      R"("memory_mib":{}}},"retry":{{"backoff_cap_seconds":300,"backoff_seconds":10,)"
      R"("max_retries":0,"on_exit_codes":[]}},"tasks":1,"tolerations":[],"type":"{}",)"
      R"("walltime_seconds":0}})",
      id, id, Queue(s.tenant, s.queue), 8000 * s.gpus, s.gpus, 65536 * s.gpus, s.type);
}

// One finished job of the year, its three events and its usage record, into `b`.
void AddFinishedJob(store::WriteBatch& b, Lcg& rng, uint64_t id, int64_t submitted,
                    int64_t now_ms) {
  const Shape s = NextShape(rng);
  const int64_t started =
      std::min(now_ms - 2, submitted + static_cast<int64_t>(rng.Next() % 7'200'000));
  const int64_t ended =
      std::min(now_ms - 1, started + 60'000 + static_cast<int64_t>(rng.Next() % 36'000'000));
  const uint64_t roll = rng.Next() % 100;
  const char* state = roll < 85 ? "succeeded" : roll < 95 ? "failed" : "cancelled";
  const int exit_code = roll < 85 ? 0 : roll < 95 ? 1 : -1;
  store::JobRecord j;
  j.id = id;
  j.tenant = Tenant(s.tenant);
  j.queue = Queue(s.tenant, s.queue);
  j.user = User(s.tenant, s.user);
  j.name = fmt::format("run-{}", id);
  j.type = s.type;
  j.state = state;
  j.spec_json = SpecJson(s, id);
  const std::string reason = roll < 85 ? "exited 0" : roll < 95 ? "exited 1" : "cancel by admin";
  j.status_json = fmt::format(
      R"({{"state":"{}","reason":"{}","updated_at":{},"started_at":{},"finished_at":{},{})"
      R"("gpu_model":"A100-80G","task_state":[2],"task_exit":[{}],"attempt":1,)"
      R"("held_since":{},"task_nodes":["gpu-{:03d}"]}})",
      state, reason, ended, started, ended,
      exit_code >= 0 ? fmt::format(R"("exit_code":{},)", exit_code) : std::string(),
      std::max(exit_code, 0), started, id % 128);
  j.submitted_at_ms = submitted;
  j.updated_at_ms = ended;
  b.PutJob(std::move(j));
  b.AppendJobEvent({0, id, submitted, "", "pending", "submitted", "{}"});
  b.AppendJobEvent({0, id, started, "pending", "running", "admitted", "{}"});
  b.AppendJobEvent({0, id, ended, "running", state, reason, "{}"});
  // The report facts the server writes with those events (reports.h, FactsOfEvent): the wait, and
  // the run's outcome (a cancelled run has none).
  auto fact = [&](int64_t at, const char* kind, int64_t since, std::string why) {
    b.AppendJobFact({0, id, at, kind, Tenant(s.tenant), Queue(s.tenant, s.queue),
                     User(s.tenant, s.user), s.type, "A100-80G", since, 0, std::move(why),
                     int64_t{1000} * s.gpus});
  };
  fact(started, "admitted", submitted, "");
  if (roll < 85) {
    fact(ended, "succeeded", ended, "");
  } else if (roll < 95) {
    fact(ended, "failed", ended, "exit code 1");
  }
  store::UsageRecord u;
  u.job_id = id;
  u.tenant = Tenant(s.tenant);
  u.queue = Queue(s.tenant, s.queue);
  u.user = User(s.tenant, s.user);
  u.job_type = s.type;
  u.gpu_model = "A100-80G";
  u.gpu_milli = 1000 * s.gpus;
  u.gpu_memory_mib = 81920 * s.gpus;
  u.start_ms = started;
  u.end_ms = ended;
  u.cost_micro = (ended - started) * s.gpus * 2'000'000 / 3'600'000;  // 2.00 per GPU-hour
  b.AppendUsage(std::move(u));
}

void AddLiveJob(store::WriteBatch& b, Lcg& rng, uint64_t id, int64_t submitted) {
  const Shape s = NextShape(rng);
  store::JobRecord j;
  j.id = id;
  j.tenant = Tenant(s.tenant);
  j.queue = Queue(s.tenant, s.queue);
  j.user = User(s.tenant, s.user);
  j.name = fmt::format("run-{}", id);
  j.type = s.type;
  j.state = "pending";
  j.spec_json = SpecJson(s, id);
  j.status_json =
      fmt::format(R"({{"state":"pending","reason":"submitted","updated_at":{}}})", submitted);
  j.submitted_at_ms = submitted;
  j.updated_at_ms = submitted;
  b.PutJob(std::move(j));
  b.AppendJobEvent({0, id, submitted, "", "pending", "submitted", "{}"});
}

// 1. The year of history, written straight into the store in big batches (two in flight).
double Generate(const HistoryBenchOptions& o, const store::StoreUrl& url) {
  auto opened = store::OpenStore(url);
  if (!opened.ok())
    throw std::runtime_error("cannot open the store: " + opened.status().ToString());
  std::unique_ptr<store::Store> st = std::move(opened).value();
  auto loaded = st->Load(store::LoadOptions{.finished_max = 0, .finished_since_ms = 0});
  if (!loaded.ok()) throw std::runtime_error(loaded.status().ToString());
  if (loaded->max_job_id != 0) throw std::runtime_error("the store already holds jobs");
  const auto t0 = Clock::now();
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const int64_t year_start = now_ms - 365 * kDayMs;
  const int64_t total = o.jobs + o.live;
  Lcg rng;
  std::shared_future<Status> in_flight;
  store::WriteBatch b;
  for (int64_t i = 0; i < total; ++i) {
    const auto id = static_cast<uint64_t>(i + 1);
    if (i < o.jobs) {
      // Submissions spread evenly over the year, the last a day before now.
      const int64_t submitted = year_start + (364 * kDayMs) * i / std::max<int64_t>(1, o.jobs);
      AddFinishedJob(b, rng, id, submitted, now_ms);
    } else {
      AddLiveJob(b, rng, id, now_ms - (total - i) * 1000);
    }
    if (static_cast<int64_t>(b.size()) >= o.batch * 5 || i + 1 == total) {
      if (in_flight.valid()) {
        if (Status s = in_flight.get(); !s.ok()) throw std::runtime_error(s.ToString());
      }
      in_flight = st->WriteAsync(std::move(b));
      b = store::WriteBatch();
      if ((i + 1) % 1'000'000 < o.batch || i + 1 == total) {
        Progress(fmt::format("{} of {} jobs written ({:.0f} s)", i + 1, total, Seconds(t0)));
      }
    }
  }
  if (in_flight.valid()) {
    if (Status s = in_flight.get(); !s.ok()) throw std::runtime_error(s.ToString());
  }
  st->Close();
  return Seconds(t0);
}

// GETs `path` and returns the seconds it took (throws unless 200).
double TimedGet(httplib::Client& c, const std::string& path) {
  const auto t0 = Clock::now();
  auto r = c.Get(path);
  const double s = Seconds(t0);
  if (!r) throw std::runtime_error(fmt::format("GET {}: {}", path, httplib::to_string(r.error())));
  if (r->status != 200) {
    throw std::runtime_error(
        fmt::format("GET {}: HTTP {}: {}", path, r->status, r->body.substr(0, 300)));
  }
  return s;
}

int64_t RssKib(pid_t pid) {
  const std::string status = ReadFile(fmt::format("/proc/{}/status", pid));
  const size_t at = status.find("VmRSS:");
  return at == std::string::npos ? -1 : std::atoll(status.c_str() + at + 6);
}

}  // namespace

int RunHistoryBench(const HistoryBenchOptions& o) {
  std::string dir = o.dir;
  const bool temporary = dir.empty();
  if (temporary) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / "arbiter-bench-history-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) {
      std::fprintf(stderr, "bench history: cannot make a temporary folder\n");
      return 1;
    }
    dir = tmpl;
  }
  std::filesystem::create_directories(dir + "/server");
  int code = 0;
  try {
    auto url = store::ParseStoreUrl(o.store.empty() ? "sqlite:" + dir + "/server" : o.store);
    if (!url.ok()) throw std::runtime_error(url.status().ToString());
    std::ofstream(dir + "/config.yaml") << Config();
    Progress(fmt::format("writing {} finished and {} live jobs into {}", o.jobs, o.live,
                         store::RedactStoreUrl(o.store.empty() ? dir : o.store)));
    const double generate_s = Generate(o, *url);
    int64_t store_bytes = 0;
    if (o.store.empty()) {
      for (const auto& f : std::filesystem::directory_iterator(dir + "/server")) {
        if (f.is_regular_file()) store_bytes += static_cast<int64_t>(f.file_size());
      }
    }

    // 2. The server on it, timed from its start until /readyz answers.
    std::vector<std::string> args = {
        SelfExe(),     "server",   "--data-dir",         dir + "/server", "--listen",
        "127.0.0.1:0", "--config", dir + "/config.yaml", "--rate-limit",  "0"};
    if (!o.store.empty()) {
      args.insert(args.end(), {"--store", o.store, "--leader-election", "off"});
    }
    ChildProcess server(10000);
    const auto started = Clock::now();
    if (!server.Start(args, dir + "/server.log"))
      throw std::runtime_error("cannot start the server");
    int port = 0;
    const std::string marker = "listening on http://127.0.0.1:";
    for (int i = 0; i < 12000 && port == 0; ++i) {  // up to 10 minutes
      const std::string out = ReadFile(dir + "/server.log");
      const size_t at = out.find(marker);
      if (at != std::string::npos && out.find('\n', at) != std::string::npos) {
        port = std::atoi(out.c_str() + at + marker.size());
      }
      if (port == 0) {
        if (server.Exited())
          throw std::runtime_error("the server exited: see " + dir + "/server.log");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (port == 0) throw std::runtime_error("the server did not listen within 10 minutes");
    httplib::Client c("127.0.0.1", port);
    c.set_keep_alive(true);
    c.set_read_timeout(600);
    bool ready = false;
    for (int i = 0; i < 120000 && !ready; ++i) {  // up to 10 minutes
      auto r = c.Get("/readyz");
      ready = r && r->status == 200;
      if (!ready) {
        if (server.Exited())
          throw std::runtime_error("the server exited: see " + dir + "/server.log");
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
    }
    if (!ready) throw std::runtime_error("the server was not ready within 10 minutes");
    const double start_s = Seconds(started);
    const int64_t rss_kib = RssKib(server.pid());

    // 3. Reads over the history, as an admin.
    std::string token = ReadFile(dir + "/server/admin.token");
    while (!token.empty() && std::isspace(static_cast<unsigned char>(token.back())))
      token.pop_back();
    c.set_bearer_token_auth(token);
    const double list_ms = 1000 * TimedGet(c, "/api/v1/jobs?user=" + User(7, 3));
    const double usage_s =
        o.reports ? TimedGet(c, "/api/v1/reports/usage?since=365d&group_by=queue") : -1;
    const double wait_s =
        o.reports ? TimedGet(c, "/api/v1/reports/wait?since=90d&group_by=queue") : -1;
    const int64_t rss_after_kib = RssKib(server.pid());
    server.Stop(10000);

    nlohmann::json out = {{"jobs", o.jobs},
                          {"live", o.live},
                          {"generate_s", generate_s},
                          {"rss_mib", static_cast<double>(rss_kib) / 1024.0},
                          {"rss_after_reads_mib", static_cast<double>(rss_after_kib) / 1024.0},
                          {"start_s", start_s},
                          {"job_list_first_page_ms", list_ms},
                          {"report_usage_365d_s", o.reports ? json(usage_s) : json(nullptr)},
                          {"report_wait_90d_s", o.reports ? json(wait_s) : json(nullptr)}};
    if (o.store.empty()) out["store_mib"] = static_cast<double>(store_bytes) / (1024.0 * 1024.0);
    if (o.json) {
      std::printf("%s\n", out.dump().c_str());
    } else {
      std::printf(
          "history: %lld finished + %lld live jobs, written in %.1f s\n"
          "server: ready in %.2f s, RSS %.0f MiB\n"
          "job list (one user, first page): %.1f ms\n"
          "usage report, 365 days by queue: %.2f s\nwait report, 90 days by queue: %.2f s\n",
          static_cast<long long>(o.jobs), static_cast<long long>(o.live), generate_s, start_s,
          static_cast<double>(rss_kib) / 1024.0, list_ms, usage_s, wait_s);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench history: %s\n", e.what());
    code = 1;
  }
  if (temporary && !o.keep) {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  } else {
    Progress("kept " + dir);
  }
  return code;
}

}  // namespace arbiter::bench
