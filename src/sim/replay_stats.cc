// The replay's defaults for traces without a configuration, and its statistics.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <queue>
#include <unordered_map>

#include "core/cycle/cycle.h"
#include "core/fairshare/fair_share.h"
#include "core/preemption/preemption.h"
#include "sim/replay.h"
#include "sim/replay_math.h"

namespace arbiter::sim {

using replay_math::GpuDemand;
using replay_math::Int128;
using replay_math::Jain;
using replay_math::JoinNames;
using replay_math::kMsPerHour;
using replay_math::kNever;
using replay_math::Percent;
using replay_math::Seconds;

std::vector<PriorityClass> DefaultPriorityClasses() {
  std::vector<PriorityClass> classes(4);
  classes[0].name = "critical";
  classes[0].value = 1000;
  classes[0].preemptible = false;
  classes[1].name = "high";
  classes[1].value = 500;
  classes[2].name = "normal";
  classes[2].value = 100;
  classes[3].name = "best-effort";
  classes[3].value = 0;
  classes[3].min_runtime_seconds = 0;
  return classes;
}

std::vector<QueueSpec> DefaultQueueTree(const Trace& trace, const core::Cluster& cluster) {
  std::vector<std::string> tenants;
  std::map<std::string, std::vector<std::string>> queues;  // tenant -> its queues, in order
  std::unordered_map<std::string, Int128> demand;
  Int128 total = 0;
  for (const TraceJob& j : trace.jobs) {
    auto& qs = queues[j.tenant];
    if (qs.empty()) tenants.push_back(j.tenant);
    if (std::find(qs.begin(), qs.end(), j.queue) == qs.end()) qs.push_back(j.queue);
    const Int128 d = GpuDemand(j);
    demand[j.queue] += d;
    total += d;
  }
  const int64_t capacity = cluster.capacity()[core::kDimGpu];
  std::vector<QueueSpec> specs;
  for (const std::string& t : tenants) {
    QueueSpec tenant;
    tenant.name = t;
    tenant.is_tenant = true;
    specs.push_back(tenant);
    for (const std::string& q : queues[t]) {
      QueueSpec s;
      s.name = q;
      s.parent = t;
      if (total > 0) {
        // G(q) = floor(capacity x demand(q) / total demand): the guarantees never sum above the
        // cluster.
        const auto g = static_cast<int64_t>(Int128{capacity} * demand[q] / total);
        s.quota["gpu"] = QuotaLimits{g, std::nullopt, std::nullopt};
      }
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

Stats Stats::Of(std::vector<double> v) {
  Stats s;
  s.count = static_cast<int64_t>(v.size());
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  auto rank = [&](double p) {
    // Nearest rank: the smallest value with at least p% of the values at or below it.
    const auto r = static_cast<size_t>(std::ceil(p / 100.0 * static_cast<double>(v.size())));
    return v[std::clamp<size_t>(r, 1, v.size()) - 1];
  };
  s.p50 = rank(50);
  s.p95 = rank(95);
  s.p99 = rank(99);
  s.max = v.back();
  s.mean = std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
  return s;
}

AllocSeriesBuilder::AllocSeriesBuilder(TimeMs start, int64_t capacity_milli, size_t max_points,
                                       TimeMs until)
    : start_(start),
      capacity_(capacity_milli),
      max_points_(std::max<size_t>(2, max_points)),
      until_(until) {}

void AllocSeriesBuilder::Fit(TimeMs to) {
  auto steps = [&] { return static_cast<size_t>((to - start_ + step_ - 1) / step_); };
  while (steps() > max_points_) {
    // Step i of the doubled series is steps 2i and 2i + 1 of the old one.
    for (size_t i = 0; i < integral_.size(); ++i) {
      integral_[i / 2] = (i % 2 == 0 ? 0 : integral_[i / 2]) + integral_[i];
    }
    integral_.resize((integral_.size() + 1) / 2);
    step_ *= 2;
  }
  if (integral_.size() < steps()) integral_.resize(steps(), 0);
}

void AllocSeriesBuilder::Add(TimeMs from, TimeMs to, int64_t alloc_milli) {
  to = std::min(to, until_);
  if (to <= from) return;
  ARBITER_CHECK(from >= start_, "AllocSeriesBuilder: an interval before the start");
  Fit(to);
  if (alloc_milli == 0) return;
  for (auto b = static_cast<size_t>((from - start_) / step_);
       b < integral_.size() && start_ + static_cast<TimeMs>(b) * step_ < to; ++b) {
    const TimeMs lo = start_ + static_cast<TimeMs>(b) * step_;
    const TimeMs overlap = std::min(to, lo + step_) - std::max(from, lo);
    integral_[b] += Integral{alloc_milli} * overlap;
  }
}

AllocSeries AllocSeriesBuilder::Finish(TimeMs end) const {
  end = std::min(end, until_);
  AllocSeries s;
  s.step_seconds = static_cast<double>(step_) / 1000.0;
  if (end <= start_ || capacity_ <= 0) return s;
  s.span_seconds = static_cast<double>(end - start_) / 1000.0;
  const auto n =
      std::min(integral_.size(), static_cast<size_t>((end - start_ + step_ - 1) / step_));
  for (size_t b = 0; b < n; ++b) {
    const TimeMs lo = start_ + static_cast<TimeMs>(b) * step_;
    const TimeMs width = std::min(end, lo + step_) - lo;
    // alloc % = integral of the allocated milli dt / (capacity x width)
    s.alloc_pct.push_back(Percent(integral_[b], Int128{capacity_} * width));
  }
  return s;
}

std::vector<std::pair<double, int64_t>> SurvivalCurve(std::vector<double> v, size_t max_points) {
  std::vector<std::pair<double, int64_t>> all;
  if (v.empty()) return all;
  std::sort(v.begin(), v.end());
  const auto n = static_cast<int64_t>(v.size());
  if (v.front() > 0) all.emplace_back(0, n);
  for (size_t i = 0; i < v.size(); ++i) {
    // The last of a run of equal values: the values after it are the greater ones.
    if (i + 1 == v.size() || v[i + 1] != v[i]) {
      all.emplace_back(v[i], n - 1 - static_cast<int64_t>(i));
    }
  }
  max_points = std::max<size_t>(2, max_points);
  if (all.size() <= max_points) return all;
  std::vector<std::pair<double, int64_t>> out;
  for (size_t k = 0; k < max_points; ++k) {
    out.push_back(all[k * (all.size() - 1) / (max_points - 1)]);
  }
  return out;
}

}  // namespace arbiter::sim
