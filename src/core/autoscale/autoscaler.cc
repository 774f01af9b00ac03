#include "core/autoscale/autoscaler.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace arbiter::core {

namespace {

int32_t Clamp(int64_t v, int64_t lo, int64_t hi) {
  return static_cast<int32_t>(std::max(lo, std::min(hi, v)));
}

std::string Seconds(DurationMs ms) {
  return ms % 1000 == 0 ? fmt::format("{}", ms / 1000) : fmt::format("{:.1f}", ms / 1000.0);
}

}  // namespace

double Autoscaler::Metric(const AutoscaleSample& s) const {
  return spec_.metric == AutoscaleMetric::kRps ? s.rps : s.concurrency;
}

void Autoscaler::Record(const AutoscaleSample& s) {
  if (!samples_.empty() && samples_.back().at_ms / 1000 == s.at_ms / 1000) {
    samples_.back() = s;
  } else if (samples_.empty() || s.at_ms > samples_.back().at_ms) {
    samples_.push_back(s);
  }
  if (Metric(s) > 0) last_demand_ms_ = s.at_ms;
  while (!samples_.empty() && samples_.front().at_ms <= s.at_ms - spec_.stable_window_ms) {
    samples_.pop_front();
  }
}

// The mean over the window, or over the time since the first sample when that is shorter (a new
// service is not under-counted by the seconds before it existed).
double Autoscaler::Demand(TimeMs now, DurationMs window) const {
  if (samples_.empty()) return 0;
  double sum = 0;
  for (auto it = samples_.rbegin(); it != samples_.rend() && it->at_ms > now - window; ++it) {
    sum += Metric(*it);
  }
  const DurationMs observed = now - samples_.front().at_ms + 1000;
  const double seconds =
      static_cast<double>(std::max<DurationMs>(1000, std::min(window, observed)));
  return sum / (seconds / 1000.0);
}

AutoscaleDecision Autoscaler::Decide(TimeMs now, int32_t ready, int32_t current, bool waiting) {
  AutoscaleDecision d;
  if (last_demand_ms_ < 0) last_demand_ms_ = now;  // the grace counts from the first decision
  if (waiting) last_demand_ms_ = now;
  const double target = spec_.EffectiveTarget();
  d.per_replica = std::max(1e-9, target * spec_.target_utilization / 100.0);
  d.stable_demand = Demand(now, spec_.stable_window_ms);
  d.panic_demand = Demand(now, spec_.panic_window_ms);

  // Rate limits around the ready count (at least 1, so that a service at zero can start).
  const double ready1 = std::max(1, ready);
  const int64_t up_limit = static_cast<int64_t>(std::ceil(spec_.max_scale_up_rate * ready1));
  const int64_t down_limit = static_cast<int64_t>(std::floor(ready1 / spec_.max_scale_down_rate));
  const double stable_want = d.stable_demand / d.per_replica;
  const double panic_want = d.panic_demand / d.per_replica;
  const int32_t stable = Clamp(static_cast<int64_t>(std::ceil(stable_want - 1e-9)), down_limit,
                               std::max(down_limit, up_limit));
  const int32_t panic = Clamp(static_cast<int64_t>(std::ceil(panic_want - 1e-9)), down_limit,
                              std::max(down_limit, up_limit));

  // Panic: the short window's demand at least panic_threshold of what the ready replicas carry.
  const bool over = panic_want / ready1 >= spec_.panic_threshold / 100.0 && panic_want > 0;
  if (over) {
    if (panic_since_ms_ == 0) {
      panic_since_ms_ = now;
      panic_max_ = ready;
    }
    panic_last_ms_ = now;
  } else if (panic_since_ms_ > 0 && now - panic_last_ms_ >= spec_.stable_window_ms) {
    panic_since_ms_ = 0;
    panic_max_ = 0;
  }
  d.panicking = panic_since_ms_ > 0;
  const std::string unit =
      spec_.metric == AutoscaleMetric::kRps ? "requests/s" : "requests in flight";
  int32_t desired = stable;
  if (d.panicking) {
    panic_max_ = std::max(panic_max_, panic);
    desired = panic_max_;  // no scale-down while panicking
    d.reason = fmt::format(
        "panic: {:.1f} {} over {} s, {:.1f}x what {} ready replicas carry at "
        "target {:g}",
        d.panic_demand, unit, Seconds(spec_.panic_window_ms), panic_want / ready1,
        std::max(1, ready), d.per_replica);
  } else {
    d.reason = fmt::format("{:.1f} {} over {} s, target {:g} per replica", d.stable_demand, unit,
                           Seconds(spec_.stable_window_ms), d.per_replica);
  }

  // Scale-down delay: the highest decision of the delay window holds.
  if (spec_.scale_down_delay_ms > 0) {
    while (!recent_.empty() && recent_.front().first <= now - spec_.scale_down_delay_ms) {
      recent_.pop_front();
    }
    recent_.emplace_back(now, desired);
    int32_t held = desired;
    for (const auto& [at, n] : recent_) held = std::max(held, n);
    if (held > desired) {
      d.reason += fmt::format(" (held at {} for the scale-down delay of {} s)", held,
                              Seconds(spec_.scale_down_delay_ms));
    }
    desired = held;
  }

  // Zero only after the grace without demand; a waiting request starts one at once.
  if (desired == 0) {
    if (waiting) {
      desired = 1;
      d.reason = "a request waits and no replica runs";
    } else if (current > 0 && now - last_demand_ms_ < spec_.scale_to_zero_grace_ms) {
      desired = std::min<int32_t>(current, 1);
    } else if (current > 0) {
      d.reason = fmt::format("no requests for {} s: scale to zero", Seconds(now - last_demand_ms_));
    }
  }
  d.desired = Clamp(desired, min_, max_);
  if (d.desired != desired) {
    d.reason += fmt::format(" (within replicas {}..{})", min_, max_);
  }
  return d;
}

}  // namespace arbiter::core
