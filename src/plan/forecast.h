// Demand forecasts for capacity planning: a daily series (GPU-hours demanded per day) with a weekly
// season, forecast `horizon` days ahead by two models, each with a prediction band, and a rolling
// backtest that says how far to trust them (docs/reports.md, "forecast").
//
//  - Seasonal naive: tomorrow is the same weekday of last week. The baseline every other model
//    must beat; its band widens with each full season ahead.
//  - Seasonal trend: additive Holt-Winters with a damped trend (level, trend and weekly season
//    smoothed by alpha, beta, gamma, the trend damped by phi), the parameters chosen by the least
//    one-step squared error over the history. Its band follows the model's h-step variance.
//
// Bands are central prediction intervals at `level` (0.8: an 80% band) under normal errors,
// clipped at zero (demand is never negative). The backtest refits each model at every origin of
// the last `origins` days that leave a whole horizon of actuals after them, and scores the
// forecasts against what happened: sMAPE (percent, 0 = perfect, 200 = worst) and the share of
// actuals inside the band (an honest 80% band covers about 0.8).
//
// Thread safety: pure functions of their arguments.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace arbiter::plan {

enum class ForecastModel { kSeasonalNaive, kSeasonalTrend };
std::string_view ForecastModelName(ForecastModel m);  // "seasonal_naive", "seasonal_trend"

struct ForecastOptions {
  int season = 7;      // days in a season (a week)
  int horizon = 14;    // days ahead, 1..366
  double level = 0.8;  // the band's coverage, in (0, 1)
};

struct ForecastPoint {
  double mean = 0, lo = 0, hi = 0;
};

struct Forecast {
  ForecastModel model = ForecastModel::kSeasonalNaive;
  std::vector<ForecastPoint> points;  // horizon points, the day after the series ends first
  double sigma = 0;                   // the one-step error's standard deviation
  // Seasonal trend only: the chosen smoothing parameters.
  double alpha = 0, beta = 0, gamma = 0, phi = 1;
};

// The fewest days of history each model needs: a season for seasonal naive, two for the trend.
int MinHistory(ForecastModel m, int season);

// InvalidArgument naming the field ("season", "horizon", "level", "history") when the options are
// out of range or the series is shorter than MinHistory; values must be finite.
Result<Forecast> Fit(ForecastModel m, std::span<const double> series,
                     const ForecastOptions& opts = {});

struct Backtest {
  double smape = 0;     // mean symmetric absolute percentage error, percent
  double coverage = 0;  // share of actuals within the band, 0..1
  int64_t points = 0;   // forecast points scored (0: history too short to backtest)
  int64_t origins = 0;  // forecast origins used
};

// Rolling-origin backtest over the last `origins` origins (each refits on the days before it).
Backtest RunBacktest(ForecastModel m, std::span<const double> series, const ForecastOptions& opts,
                     int origins = 28);

}  // namespace arbiter::plan
