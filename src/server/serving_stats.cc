#include "server/serving_stats.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/service.h"

namespace arbiter::server {

using nlohmann::json;

void ServingFigures::Add(const ServingFigures& o) {
  requests += o.requests;
  status_2xx += o.status_2xx;
  status_3xx += o.status_3xx;
  status_4xx += o.status_4xx;
  status_5xx += o.status_5xx;
  gateway_503 += o.gateway_503;
  for (size_t i = 0; i < latency.size(); ++i) latency[i] += o.latency[i];
  latency_sum_ms += o.latency_sum_ms;
  queue_wait_sum_ms += o.queue_wait_sum_ms;
  if (o.ready_samples > 0) {
    ready_min = ready_samples == 0 ? o.ready_min : std::min(ready_min, o.ready_min);
    ready_max = ready_samples == 0 ? o.ready_max : std::max(ready_max, o.ready_max);
    ready_samples += o.ready_samples;
    ready_sum += o.ready_sum;
  }
}

json ServingFiguresToJson(const ServingFigures& f) {
  return {{"requests", f.requests},
          {"status",
           {{"2xx", f.status_2xx},
            {"3xx", f.status_3xx},
            {"4xx", f.status_4xx},
            {"5xx", f.status_5xx}}},
          {"gateway_503", f.gateway_503},
          {"latency_buckets", f.latency},
          {"latency_sum_ms", f.latency_sum_ms},
          {"queue_wait_sum_ms", f.queue_wait_sum_ms},
          {"ready_samples", f.ready_samples},
          {"ready_sum", f.ready_sum},
          {"ready_min", f.ready_min},
          {"ready_max", f.ready_max}};
}

ServingFigures ServingFiguresFromJson(std::string_view text) {
  ServingFigures f;
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return f;
  auto num = [](const json& o, const char* k) -> int64_t {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? it->get<int64_t>() : 0;
  };
  auto real = [](const json& o, const char* k) -> double {
    auto it = o.find(k);
    return it != o.end() && it->is_number() ? it->get<double>() : 0;
  };
  f.requests = num(j, "requests");
  if (auto s = j.find("status"); s != j.end() && s->is_object()) {
    f.status_2xx = num(*s, "2xx");
    f.status_3xx = num(*s, "3xx");
    f.status_4xx = num(*s, "4xx");
    f.status_5xx = num(*s, "5xx");
  }
  f.gateway_503 = num(j, "gateway_503");
  if (auto b = j.find("latency_buckets"); b != j.end() && b->is_array()) {
    for (size_t i = 0; i < f.latency.size() && i < b->size(); ++i) {
      if ((*b)[i].is_number()) f.latency[i] = (*b)[i].get<int64_t>();
    }
  }
  f.latency_sum_ms = real(j, "latency_sum_ms");
  f.queue_wait_sum_ms = real(j, "queue_wait_sum_ms");
  f.ready_samples = num(j, "ready_samples");
  f.ready_sum = num(j, "ready_sum");
  f.ready_min = num(j, "ready_min");
  f.ready_max = num(j, "ready_max");
  return f;
}

double LatencyQuantileMs(const std::array<int64_t, kServiceLatencyBuckets>& b, double q) {
  int64_t total = 0;
  for (int64_t c : b) total += c;
  if (total == 0) return 0;
  // The rank of the quantile, then the bucket that holds it; linear inside the bucket.
  const double rank = std::clamp(q, 0.0, 1.0) * static_cast<double>(total);
  double below = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    const double lo = i == 0 ? 0.0 : static_cast<double>(kServiceLatencyBucketsMs[i - 1]);
    if (i + 1 == b.size()) return lo;  // the unbounded bucket: its lower bound
    const double hi = static_cast<double>(kServiceLatencyBucketsMs[i]);
    const double c = static_cast<double>(b[i]);
    if (c > 0 && below + c >= rank) return lo + (hi - lo) * (rank - below) / c;
    below += c;
  }
  return static_cast<double>(kServiceLatencyBucketsMs.back());
}

double ShareWithinMs(const std::array<int64_t, kServiceLatencyBuckets>& b, double limit_ms) {
  int64_t total = 0;
  for (int64_t c : b) total += c;
  if (total == 0) return 1;
  double within = 0;
  for (size_t i = 0; i + 1 < b.size(); ++i) {
    const double lo = i == 0 ? 0.0 : static_cast<double>(kServiceLatencyBucketsMs[i - 1]);
    const double hi = static_cast<double>(kServiceLatencyBucketsMs[i]);
    if (limit_ms >= hi) {
      within += static_cast<double>(b[i]);
    } else {
      if (limit_ms > lo) within += static_cast<double>(b[i]) * (limit_ms - lo) / (hi - lo);
      break;
    }
  }
  return within / static_cast<double>(total);
}

namespace {

struct FieldError {
  std::string field, message;
};

int64_t Count(const json& o, const std::string& path, const char* key, bool required = false) {
  auto it = o.find(key);
  const std::string field = path.empty() ? key : path + "." + key;
  if (it == o.end() || it->is_null()) {
    if (required) throw FieldError{field, "is required"};
    return 0;
  }
  if (!it->is_number_integer() || it->get<int64_t>() < 0) {
    throw FieldError{field, fmt::format("must be a whole number >= 0, got {}", it->dump())};
  }
  return it->get<int64_t>();
}

double Real(const json& o, const std::string& path, const char* key) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return 0;
  if (!it->is_number() || it->get<double>() < 0 || !std::isfinite(it->get<double>())) {
    throw FieldError{path + "." + key, fmt::format("must be a number >= 0, got {}", it->dump())};
  }
  return it->get<double>();
}

void CheckKeys(const json& o, const std::string& path, std::initializer_list<const char*> keys) {
  if (!o.is_object()) throw FieldError{path, "must be an object"};
  for (const auto& [k, v] : o.items()) {
    if (std::none_of(keys.begin(), keys.end(), [&](const char* a) { return k == a; })) {
      throw FieldError{path.empty() ? k : path + "." + k, "unknown field"};
    }
  }
}

}  // namespace

Result<GatewayStats> ParseGatewayStats(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("", "the body is not valid JSON");
  GatewayStats out;
  try {
    CheckKeys(j, "", {"gateway", "window_start_ms", "window_end_ms", "services"});
    if (auto g = j.find("gateway"); g != j.end() && !g->is_null()) {
      if (!g->is_string() || g->get<std::string>().size() > 253) {
        throw FieldError{"gateway", "must be a string of at most 253 characters"};
      }
      out.gateway = g->get<std::string>();
    }
    out.window_start_ms = Count(j, "", "window_start_ms", true);
    out.window_end_ms = Count(j, "", "window_end_ms", true);
    if (out.window_end_ms < out.window_start_ms) {
      throw FieldError{"window_end_ms", "must not be before window_start_ms"};
    }
    const auto s = j.find("services");
    if (s != j.end() && !s->is_null()) {
      if (!s->is_array() || s->size() > 10000) {
        throw FieldError{"services", "must be a list of at most 10000 entries"};
      }
      for (size_t i = 0; i < s->size(); ++i) {
        const std::string p = fmt::format("services[{}]", i);
        const json& e = (*s)[i];
        CheckKeys(e, p,
                  {"name", "revision", "requests", "status", "gateway_503", "latency_buckets",
                   "latency_sum_ms", "queue_wait_sum_ms"});
        GatewayStats::Entry entry;
        auto name = e.find("name");
        if (name == e.end() || !name->is_string() ||
            !IsValidServiceName(name->get<std::string>())) {
          throw FieldError{p + ".name", "must be a service name"};
        }
        entry.service = name->get<std::string>();
        entry.revision = Count(e, p, "revision", true);
        ServingFigures& f = entry.figures;
        f.requests = Count(e, p, "requests");
        if (auto st = e.find("status"); st != e.end() && !st->is_null()) {
          CheckKeys(*st, p + ".status", {"2xx", "3xx", "4xx", "5xx"});
          f.status_2xx = Count(*st, p + ".status", "2xx");
          f.status_3xx = Count(*st, p + ".status", "3xx");
          f.status_4xx = Count(*st, p + ".status", "4xx");
          f.status_5xx = Count(*st, p + ".status", "5xx");
        }
        f.gateway_503 = Count(e, p, "gateway_503");
        if (auto b = e.find("latency_buckets"); b != e.end() && !b->is_null()) {
          if (!b->is_array() || b->size() > kServiceLatencyBuckets) {
            throw FieldError{
                p + ".latency_buckets",
                fmt::format("must be a list of at most {} counts", kServiceLatencyBuckets)};
          }
          for (size_t k = 0; k < b->size(); ++k) {
            if (!(*b)[k].is_number_integer() || (*b)[k].get<int64_t>() < 0) {
              throw FieldError{fmt::format("{}.latency_buckets[{}]", p, k),
                               "must be a whole number >= 0"};
            }
            f.latency[k] = (*b)[k].get<int64_t>();
          }
        }
        f.latency_sum_ms = Real(e, p, "latency_sum_ms");
        f.queue_wait_sum_ms = Real(e, p, "queue_wait_sum_ms");
        out.services.push_back(std::move(entry));
      }
    }
  } catch (const FieldError& e) {
    return InvalidArgument(e.field, e.message);
  }
  return out;
}

Result<GatewayLoad> ParseGatewayLoad(std::string_view text) {
  const json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return InvalidArgument("", "the body is not valid JSON");
  GatewayLoad out;
  try {
    CheckKeys(j, "", {"gateway", "services"});
    if (auto g = j.find("gateway"); g != j.end() && !g->is_null()) {
      if (!g->is_string() || g->get<std::string>().empty() || g->get<std::string>().size() > 253) {
        throw FieldError{"gateway", "must be a non-empty string of at most 253 characters"};
      }
      out.gateway = g->get<std::string>();
    }
    const auto s = j.find("services");
    if (s != j.end() && !s->is_null()) {
      if (!s->is_array() || s->size() > 10000) {
        throw FieldError{"services", "must be a list of at most 10000 entries"};
      }
      for (size_t i = 0; i < s->size(); ++i) {
        const std::string p = fmt::format("services[{}]", i);
        const json& e = (*s)[i];
        CheckKeys(e, p, {"name", "concurrency", "rps", "waiting", "no_replica"});
        GatewayLoad::Entry entry;
        auto name = e.find("name");
        if (name == e.end() || !name->is_string() ||
            !IsValidServiceName(name->get<std::string>())) {
          throw FieldError{p + ".name", "must be a service name"};
        }
        entry.service = name->get<std::string>();
        entry.concurrency = Real(e, p, "concurrency");
        entry.rps = Real(e, p, "rps");
        entry.waiting = Count(e, p, "waiting");
        if (auto nr = e.find("no_replica"); nr != e.end() && !nr->is_null()) {
          if (!nr->is_boolean()) throw FieldError{p + ".no_replica", "must be true or false"};
          entry.no_replica = nr->get<bool>();
        }
        out.services.push_back(std::move(entry));
      }
    }
  } catch (const FieldError& e) {
    return InvalidArgument(e.field, e.message);
  }
  return out;
}

Status ServingStats::Add(const std::vector<std::pair<Key, ServingFigures>>& rows) {
  if (rows.empty()) return Status::Ok();
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    store::WriteBatch b;
    std::map<Key, ServingFigures> changed;
    for (const auto& [key, figures] : rows) {
      auto it = recent_.find(key);
      if (it == recent_.end()) {
        // Not written by this process (or forgotten): what the store has for that minute.
        ServingFigures stored;
        const auto& [minute, service, revision] = key;
        auto found = store_->ServingStats(minute, minute + 1);
        if (!found.ok()) return found.status();
        for (const store::ServingStatRecord& r : *found) {
          if (r.service == service && r.revision == revision) {
            stored = ServingFiguresFromJson(r.data_json);
          }
        }
        it = recent_.emplace(key, stored).first;
      }
      it->second.Add(figures);
      changed[key] = it->second;
    }
    for (const auto& [key, f] : changed) {
      const auto& [minute, service, revision] = key;
      b.PutServingStat({minute, service, revision, ServingFiguresToJson(f).dump()});
    }
    // Keep the cache to the last few minutes.
    const TimeMs newest = std::get<0>(changed.rbegin()->first);
    for (auto it = recent_.begin(); it != recent_.end();) {
      it = std::get<0>(it->first) < newest - 10 * 60000 ? recent_.erase(it) : std::next(it);
    }
    done = store_->WriteAsync(std::move(b));
  }
  return done.get();
}

}  // namespace arbiter::server
