#include "bench/submit_bench.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <vector>

#include "bench/http_load.h"

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
  LoadTarget target;
  std::string error;
  if (!ParseHttpUrl(o.server, &target, &error)) {
    std::fprintf(stderr, "arbiter bench submit: %s\n", error.c_str());
    return 2;
  }
  const int64_t requests = (o.jobs + batch - 1) / batch;
  auto jobs_in = [&](int64_t i) {
    return static_cast<int>(std::min<int64_t>(batch, o.jobs - i * batch));
  };
  const std::vector<std::string> headers = {"Authorization: Bearer " + o.token,
                                            "Content-Type: application/json"};
  const std::string path = batch > 1 ? "/api/v1/jobs/batch" : "/api/v1/jobs";
  const std::string full =
      HttpRequestBytes(target, "POST", path, headers, batch > 1 ? batch_body(batch) : body);
  const std::string last =
      batch > 1 && o.jobs % batch != 0
          ? HttpRequestBytes(target, "POST", path, headers, batch_body(o.jobs % batch))
          : full;
  LoadOptions lo;
  lo.connections = o.concurrency;
  lo.requests = requests;
  lo.expect_status = 201;
  LoadResult r = RunHttpLoad(target, lo, [&](int64_t i) -> const std::string& {
    return jobs_in(i) == batch ? full : last;
  });
  int64_t ok = 0;
  for (int64_t i : r.ok_indices) ok += jobs_in(i);
  const int64_t failed = o.jobs - ok;
  const double seconds = r.seconds;
  std::vector<double>& latencies_ms = r.latencies_ms;
  const std::string& first_error = r.first_error;
  std::sort(latencies_ms.begin(), latencies_ms.end());
  auto pct = [&](double p) {
    if (latencies_ms.empty()) return 0.0;
    const size_t i = std::min(latencies_ms.size() - 1,
                              static_cast<size_t>(p * static_cast<double>(latencies_ms.size())));
    return latencies_ms[i];
  };
  const double rate = seconds > 0 ? static_cast<double>(ok) / seconds : 0;
  if (o.json) {
    nlohmann::json j = {
        {"jobs", o.jobs},       {"concurrency", o.concurrency},
        {"batch", batch},       {"acknowledged", ok},
        {"failed", failed},     {"seconds", seconds},
        {"jobs_per_sec", rate}, {"p50_ms", pct(0.50)},
        {"p99_ms", pct(0.99)},  {"max_ms", latencies_ms.empty() ? 0.0 : latencies_ms.back()}};
    if (!first_error.empty()) j["first_error"] = first_error;
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf(
        "%lld acknowledged (%lld failed) in %.2f s: %.0f jobs/s, p50 %.2f ms, p99 %.2f ms\n",
        static_cast<long long>(ok), static_cast<long long>(failed), seconds, rate, pct(0.5),
        pct(0.99));
    if (!first_error.empty()) std::printf("first error: %s\n", first_error.c_str());
  }
  return failed > 0 ? 1 : 0;
}

}  // namespace arbiter::bench
