#include "bench/submit_bench.h"

#include <fmt/format.h>
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

namespace arbiter::bench {

int RunSubmitBench(const SubmitBenchOptions& o) {
  if (o.token.empty() || o.queue.empty()) {
    std::fprintf(stderr, "arbiter bench submit: --token and --queue are required\n");
    return 2;
  }
  const nlohmann::json job = {{"queue", o.queue},
                              {"command", {"true"}},
                              {"type", "experiment"},
                              {"resources", {{"gpus", 1}, {"cpu_milli", 1000}}}};
  const std::string body = job.dump();
  // --batch N: N jobs per request through POST /api/v1/jobs/batch (the last request may hold
  // fewer); each 201 acknowledges all of its jobs durably.
  const int batch = std::max(1, o.batch);
  auto batch_body = [&](int n) {
    return nlohmann::json{{"jobs", nlohmann::json::array_t(static_cast<size_t>(n), job)}}.dump();
  };
  const std::string full_batch = batch > 1 ? batch_body(batch) : "";
  std::atomic<int> next{0};
  std::atomic<int> ok{0};
  std::atomic<int> failed{0};
  std::mutex mu;
  std::vector<double> latencies_ms;
  latencies_ms.reserve(static_cast<size_t>(o.jobs));
  std::string first_error;
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::thread> threads;
  for (int c = 0; c < o.concurrency; ++c) {
    threads.emplace_back([&] {
      httplib::Client client(o.server);
      client.set_keep_alive(true);
      client.set_tcp_nodelay(true);
      client.set_bearer_token_auth(o.token);
      client.set_read_timeout(30);
      std::vector<double> mine;
      for (int first = next.fetch_add(batch); first < o.jobs; first = next.fetch_add(batch)) {
        const int n = std::min(batch, o.jobs - first);
        const auto s = std::chrono::steady_clock::now();
        auto r = batch > 1
                     ? client.Post("/api/v1/jobs/batch", n == batch ? full_batch : batch_body(n),
                                   "application/json")
                     : client.Post("/api/v1/jobs", body, "application/json");
        const double ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - s).count();
        if (r && r->status == 201) {
          ok += n;
          mine.push_back(ms);
        } else {
          failed += n;
          std::lock_guard<std::mutex> lock(mu);
          if (first_error.empty()) {
            first_error = r ? fmt::format("HTTP {}: {}", r->status, r->body)
                            : fmt::format("request failed: {}", httplib::to_string(r.error()));
          }
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      latencies_ms.insert(latencies_ms.end(), mine.begin(), mine.end());
    });
  }
  for (auto& t : threads) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    if (latencies_ms.empty()) return 0.0;
    const size_t i = std::min(latencies_ms.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(latencies_ms.size())));
    return latencies_ms[i];
  };
  const double rate = seconds > 0 ? ok / seconds : 0;
  if (o.json) {
    nlohmann::json j = {
        {"jobs", o.jobs},          {"concurrency", o.concurrency},
        {"batch", batch},          {"acknowledged", ok.load()},
        {"failed", failed.load()}, {"seconds", seconds},
        {"jobs_per_sec", rate},    {"p50_ms", pct(0.50)},
        {"p99_ms", pct(0.99)},     {"max_ms", latencies_ms.empty() ? 0.0 : latencies_ms.back()}};
    if (!first_error.empty()) j["first_error"] = first_error;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%d acknowledged (%d failed) in %.2f s: %.0f jobs/s, p50 %.2f ms, p99 %.2f ms\n",
                ok.load(), failed.load(), seconds, rate, pct(0.5), pct(0.99));
    if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace arbiter::bench
