#include "plan/forecast.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace arbiter::plan {
namespace {

// The standard normal quantile, by bisection on the CDF (accurate to ~1e-12, called once a fit).
double NormalQuantile(double p) {
  double lo = -40, hi = 40;
  for (int i = 0; i < 200 && hi - lo > 1e-13; ++i) {
    const double mid = (lo + hi) / 2;
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < p ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

Status Check(ForecastModel m, std::span<const double> y, const ForecastOptions& o) {
  if (o.season < 1 || o.season > 366) {
    return InvalidArgument("season", fmt::format("season must be 1..366 days, not {}", o.season));
  }
  if (o.horizon < 1 || o.horizon > 366) {
    return InvalidArgument("horizon",
                           fmt::format("horizon must be 1..366 days, not {}", o.horizon));
  }
  if (!(o.level > 0 && o.level < 1)) {
    return InvalidArgument("level", fmt::format("level must be in (0, 1), not {}", o.level));
  }
  const int need = MinHistory(m, o.season);
  if (static_cast<int64_t>(y.size()) < need) {
    return InvalidArgument("history",
                           fmt::format("{} needs at least {} days of history, the series has {}",
                                       ForecastModelName(m), need, y.size()));
  }
  for (size_t i = 0; i < y.size(); ++i) {
    if (!std::isfinite(y[i])) {
      return InvalidArgument("history", fmt::format("day {} of the series is not finite", i));
    }
  }
  return Status::Ok();
}

Forecast SeasonalNaive(std::span<const double> y, const ForecastOptions& o, double z) {
  const int m = o.season;
  const size_t n = y.size();
  double sum2 = 0;
  size_t count = 0;
  for (size_t t = static_cast<size_t>(m); t < n; ++t) {
    const double e = y[t] - y[t - static_cast<size_t>(m)];
    sum2 += e * e;
    ++count;
  }
  Forecast f;
  f.model = ForecastModel::kSeasonalNaive;
  f.sigma = count > 0 ? std::sqrt(sum2 / static_cast<double>(count)) : 0;
  for (int h = 1; h <= o.horizon; ++h) {
    const double mean = y[n - static_cast<size_t>(m) + static_cast<size_t>((h - 1) % m)];
    // Each whole season ahead adds one season's error.
    const double sd = f.sigma * std::sqrt(static_cast<double>((h - 1) / m + 1));
    f.points.push_back({std::max(0.0, mean), std::max(0.0, mean - z * sd), mean + z * sd});
  }
  return f;
}

struct HoltWinters {
  double alpha, beta, gamma, phi;
  // After Run: the final state and the one-step squared error sum.
  double level = 0, trend = 0, sse = 0;
  std::vector<double> season{};  // the last m seasonal terms, season[t % m]
  size_t steps = 0;

  void Run(std::span<const double> y, int m) {
    const size_t n = y.size(), ms = static_cast<size_t>(m);
    // Start: the first season's mean is the level, the change to the second season's mean the
    // trend, the first season's deviations the seasonal terms.
    double first = 0, second = 0;
    for (size_t i = 0; i < ms; ++i) {
      first += y[i];
      second += y[ms + i];
    }
    first /= m;
    second /= m;
    level = first;
    trend = (second - first) / m;
    season.assign(ms, 0);
    for (size_t i = 0; i < ms; ++i) season[i] = y[i] - first;
    sse = 0;
    steps = 0;
    for (size_t t = ms; t < n; ++t) {
      const double s = season[t % ms];
      const double predicted = level + phi * trend + s;
      const double e = y[t] - predicted;
      sse += e * e;
      ++steps;
      const double previous = level;
      level = alpha * (y[t] - s) + (1 - alpha) * (previous + phi * trend);
      trend = beta * (level - previous) + (1 - beta) * phi * trend;
      season[t % ms] = gamma * (y[t] - level) + (1 - gamma) * s;
    }
  }
};

Forecast SeasonalTrend(std::span<const double> y, const ForecastOptions& o, double z) {
  static constexpr double kAlphas[] = {0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9};
  static constexpr double kBetas[] = {0, 0.01, 0.05, 0.1, 0.2};
  static constexpr double kGammas[] = {0, 0.05, 0.1, 0.2, 0.3, 0.5};
  static constexpr double kPhis[] = {0.8, 0.9, 0.98};
  const int m = o.season;
  HoltWinters best{0.3, 0.05, 0.1, 0.9};
  double best_sse = std::numeric_limits<double>::infinity();
  for (double a : kAlphas) {
    for (double b : kBetas) {
      for (double g : kGammas) {
        if (g > 1 - a) continue;  // the usual admissible region: gamma <= 1 - alpha
        for (double p : kPhis) {
          HoltWinters hw{a, b, g, p};
          hw.Run(y, m);
          if (hw.sse < best_sse) {
            best_sse = hw.sse;
            best = std::move(hw);
          }
        }
      }
    }
  }
  Forecast f;
  f.model = ForecastModel::kSeasonalTrend;
  f.alpha = best.alpha;
  f.beta = best.beta;
  f.gamma = best.gamma;
  f.phi = best.phi;
  f.sigma = best.steps > 0 ? std::sqrt(best.sse / static_cast<double>(best.steps)) : 0;
  const size_t n = y.size(), ms = static_cast<size_t>(m);
  double damped = 0;    // phi + phi^2 + ... + phi^h
  double variance = 0;  // sum over j < h of c_j^2 (ETS(A,Ad,A), class 1)
  double phi_j = 0;     // phi + ... + phi^j
  double phi_pow = 1;
  for (int h = 1; h <= o.horizon; ++h) {
    phi_pow *= best.phi;
    damped += phi_pow;
    const double mean = best.level + damped * best.trend + best.season[(n + (h - 1)) % ms];
    if (h > 1) {
      const int j = h - 1;
      phi_j += std::pow(best.phi, j);
      const double c = best.alpha * (1 + best.beta * phi_j) + (j % m == 0 ? best.gamma : 0);
      variance += c * c;
    }
    const double sd = f.sigma * std::sqrt(1 + variance);
    f.points.push_back({std::max(0.0, mean), std::max(0.0, mean - z * sd), mean + z * sd});
  }
  return f;
}

}  // namespace

std::string_view ForecastModelName(ForecastModel m) {
  return m == ForecastModel::kSeasonalNaive ? "seasonal_naive" : "seasonal_trend";
}

int MinHistory(ForecastModel m, int season) {
  return m == ForecastModel::kSeasonalNaive ? season : 2 * season + 1;
}

Result<Forecast> Fit(ForecastModel m, std::span<const double> series, const ForecastOptions& opts) {
  if (Status st = Check(m, series, opts); !st.ok()) return st;
  const double z = NormalQuantile((1 + opts.level) / 2);
  return m == ForecastModel::kSeasonalNaive ? SeasonalNaive(series, opts, z)
                                            : SeasonalTrend(series, opts, z);
}

Backtest RunBacktest(ForecastModel m, std::span<const double> series, const ForecastOptions& opts,
                     int origins) {
  Backtest out;
  const int64_t n = static_cast<int64_t>(series.size());
  const int64_t first =
      std::max<int64_t>(MinHistory(m, opts.season), n - opts.horizon - origins + 1);
  double smape_sum = 0;
  int64_t covered = 0;
  for (int64_t origin = first; origin + opts.horizon <= n; ++origin) {
    Result<Forecast> f = Fit(m, series.first(static_cast<size_t>(origin)), opts);
    if (!f.ok()) continue;
    ++out.origins;
    for (int h = 0; h < opts.horizon; ++h) {
      const double actual = series[static_cast<size_t>(origin + h)];
      const ForecastPoint& p = f->points[static_cast<size_t>(h)];
      const double denominator = std::abs(actual) + std::abs(p.mean);
      smape_sum += denominator > 0 ? 200 * std::abs(actual - p.mean) / denominator : 0;
      covered += actual >= p.lo && actual <= p.hi;
      ++out.points;
    }
  }
  if (out.points > 0) {
    out.smape = smape_sum / static_cast<double>(out.points);
    out.coverage = static_cast<double>(covered) / static_cast<double>(out.points);
  }
  return out;
}

}  // namespace arbiter::plan
