#include "gateway/stats.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

namespace arbiter::gateway {

RouteTotals RouteTotals::Minus(const RouteTotals& e) const {
  RouteTotals d = *this;
  d.requests -= e.requests;
  for (size_t i = 0; i < d.status.size(); ++i) d.status[i] -= e.status[i];
  d.gateway_503 -= e.gateway_503;
  for (size_t i = 0; i < d.latency.size(); ++i) {
    d.latency[i] -= e.latency[i];
    d.queue_wait[i] -= e.queue_wait[i];
  }
  d.latency_sum_ms -= e.latency_sum_ms;
  d.queue_wait_sum_ms -= e.queue_wait_sum_ms;
  d.retries -= e.retries;
  d.upstream_errors -= e.upstream_errors;
  d.ejections -= e.ejections;
  return d;
}

void RouteCounters::Record(int status, bool gateway_503, double latency_ms, double queue_wait_ms) {
  Bump(requests_, 1);
  const int cls = status / 100;
  Bump(status_[static_cast<size_t>(std::clamp(cls, 2, 5) - 2)], 1);
  if (gateway_503) Bump(gateway_503_, 1);
  Bump(latency_[ServiceLatencyBucket(latency_ms)], 1);
  Bump(latency_sum_us_, std::llround(std::max(0.0, latency_ms) * 1000));
  Bump(queue_wait_[ServiceLatencyBucket(queue_wait_ms)], 1);
  Bump(queue_wait_sum_us_, std::llround(std::max(0.0, queue_wait_ms) * 1000));
}

void RouteCounters::AddTo(RouteTotals* out) const {
  constexpr auto r = std::memory_order_relaxed;
  out->requests += requests_.load(r);
  for (size_t i = 0; i < status_.size(); ++i) out->status[i] += status_[i].load(r);
  out->gateway_503 += gateway_503_.load(r);
  for (size_t i = 0; i < latency_.size(); ++i) {
    out->latency[i] += latency_[i].load(r);
    out->queue_wait[i] += queue_wait_[i].load(r);
  }
  out->latency_sum_ms += static_cast<double>(latency_sum_us_.load(r)) / 1000.0;
  out->queue_wait_sum_ms += static_cast<double>(queue_wait_sum_us_.load(r)) / 1000.0;
  out->retries += retries_.load(r);
  out->upstream_errors += upstream_errors_.load(r);
  out->ejections += ejections_.load(r);
  out->in_flight += in_flight_.load(r);
}

Stats::Stats(int shards) {
  for (int i = 0; i < std::max(1, shards); ++i) shards_.push_back(std::make_unique<Shard>());
}

RouteCounters* Stats::Counters(int shard, const std::string& service, int64_t revision) {
  Shard& s = *shards_.at(static_cast<size_t>(shard));
  std::lock_guard<std::mutex> lock(s.mu);
  auto& slot = s.counters[{service, revision}];
  if (!slot) slot = std::make_unique<RouteCounters>();
  return slot.get();
}

std::map<RouteKey, RouteTotals> Stats::Totals() const {
  std::map<RouteKey, RouteTotals> out;
  for (const auto& s : shards_) {
    std::lock_guard<std::mutex> lock(s->mu);
    for (const auto& [key, c] : s->counters) c->AddTo(&out[key]);
  }
  return out;
}

uint64_t Stats::unknown_service() const {
  uint64_t n = 0;
  for (const auto& s : shards_) n += s->unknown_service.load(std::memory_order_relaxed);
  return n;
}

std::string StatsWindowJson(const std::string& gateway, int64_t window_start_ms,
                            int64_t window_end_ms, const std::map<RouteKey, RouteTotals>& window) {
  using nlohmann::json;
  json services = json::array();
  for (const auto& [key, t] : window) {
    if (t.requests == 0) continue;
    services.push_back(
        {{"name", key.first},
         {"revision", key.second},
         {"requests", t.requests},
         {"status",
          {{"2xx", t.status[0]}, {"3xx", t.status[1]}, {"4xx", t.status[2]}, {"5xx", t.status[3]}}},
         {"gateway_503", t.gateway_503},
         {"latency_buckets", t.latency},
         {"latency_sum_ms", std::round(t.latency_sum_ms * 1000) / 1000},
         {"queue_wait_sum_ms", std::round(t.queue_wait_sum_ms * 1000) / 1000}});
  }
  return json{{"gateway", gateway},
              {"window_start_ms", window_start_ms},
              {"window_end_ms", window_end_ms},
              {"services", std::move(services)}}
      .dump();
}

std::string PrometheusLabel(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (const char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

namespace {

// A histogram family in seconds from per-bucket millisecond counts.
void AppendHistogram(std::string* out, const std::string& name, const std::string& labels,
                     const Histogram& h, double sum_ms) {
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.size(); ++i) {
    cumulative += h[i];
    const std::string le = i < kServiceLatencyBucketsMs.size()
                               ? fmt::format("{}", kServiceLatencyBucketsMs[i] / 1000)
                               : std::string("+Inf");
    *out += fmt::format("{}_bucket{{{},le=\"{}\"}} {}\n", name, labels, le, cumulative);
  }
  *out += fmt::format("{}_sum{{{}}} {}\n", name, labels, sum_ms / 1000);
  *out += fmt::format("{}_count{{{}}} {}\n", name, labels, cumulative);
}

}  // namespace

std::string RoutesPrometheusText(const std::map<RouteKey, RouteTotals>& totals) {
  std::string out;
  auto labels = [](const RouteKey& k) {
    return fmt::format("service=\"{}\",revision=\"{}\"", PrometheusLabel(k.first), k.second);
  };
  out +=
      "# HELP arbiter_gateway_requests_total Requests answered through the gateway, by service, "
      "revision and status class.\n# TYPE arbiter_gateway_requests_total counter\n";
  static constexpr const char* kClasses[] = {"2xx", "3xx", "4xx", "5xx"};
  for (const auto& [k, t] : totals) {
    for (size_t i = 0; i < 4; ++i) {
      out += fmt::format("arbiter_gateway_requests_total{{{},code=\"{}\"}} {}\n", labels(k),
                         kClasses[i], t.status[i]);
    }
  }
  out +=
      "# HELP arbiter_gateway_request_duration_seconds Time from a request's arrival at the "
      "gateway to the end of its answer.\n"
      "# TYPE arbiter_gateway_request_duration_seconds histogram\n";
  for (const auto& [k, t] : totals) {
    AppendHistogram(&out, "arbiter_gateway_request_duration_seconds", labels(k), t.latency,
                    t.latency_sum_ms);
  }
  out +=
      "# HELP arbiter_gateway_queue_wait_seconds Time requests waited in their service's queue "
      "for a free replica (0 for those that did not wait).\n"
      "# TYPE arbiter_gateway_queue_wait_seconds histogram\n";
  for (const auto& [k, t] : totals) {
    AppendHistogram(&out, "arbiter_gateway_queue_wait_seconds", labels(k), t.queue_wait,
                    t.queue_wait_sum_ms);
  }
  struct Simple {
    const char* name;
    const char* type;
    const char* help;
    uint64_t RouteTotals::*field;
  };
  static constexpr Simple kSimple[] = {
      {"arbiter_gateway_rejected_total", "counter",
       "Requests the gateway answered 503 itself: the service's queue was full or the request "
       "waited past its deadline.",
       &RouteTotals::gateway_503},
      {"arbiter_gateway_retries_total", "counter",
       "Requests sent again to another replica after a failed connect or a closed connection.",
       &RouteTotals::retries},
      {"arbiter_gateway_upstream_errors_total", "counter",
       "Requests answered 502 or 504: the replica failed, closed the connection or did not "
       "answer in time.",
       &RouteTotals::upstream_errors},
      {"arbiter_gateway_replica_ejections_total", "counter",
       "Times a replica was skipped for a while after a failed connect.", &RouteTotals::ejections},
  };
  for (const Simple& s : kSimple) {
    out += fmt::format("# HELP {} {}\n# TYPE {} {}\n", s.name, s.help, s.name, s.type);
    for (const auto& [k, t] : totals) {
      out += fmt::format("{}{{{}}} {}\n", s.name, labels(k), t.*(s.field));
    }
  }
  out +=
      "# HELP arbiter_gateway_requests_in_flight Requests sent to a replica and not answered "
      "yet.\n# TYPE arbiter_gateway_requests_in_flight gauge\n";
  for (const auto& [k, t] : totals) {
    out += fmt::format("arbiter_gateway_requests_in_flight{{{}}} {}\n", labels(k), t.in_flight);
  }
  return out;
}

}  // namespace arbiter::gateway
