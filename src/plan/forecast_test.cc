#include "plan/forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace arbiter::plan {
namespace {

// GPU-hours a day: a weekly season (quiet weekends), a trend, and normal noise of sd `noise`.
std::vector<double> Weekly(int days, double trend, double noise, uint32_t seed = 7) {
  static constexpr double kWeek[] = {400, 420, 430, 410, 380, 120, 100};
  std::mt19937 rng(seed);
  std::normal_distribution<double> e(0, noise);
  std::vector<double> y;
  for (int d = 0; d < days; ++d) y.push_back(kWeek[d % 7] + trend * d + (noise > 0 ? e(rng) : 0));
  return y;
}

TEST(ForecastTest, SeasonalNaiveRepeatsLastWeekExactlyOnAPureSeason) {
  const std::vector<double> y = Weekly(35, 0, 0);
  Result<Forecast> f = Fit(ForecastModel::kSeasonalNaive, y, {.season = 7, .horizon = 14});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ(f->points.size(), 14u);
  for (int h = 0; h < 14; ++h) {
    EXPECT_DOUBLE_EQ(f->points[h].mean, y[28 + h % 7]) << h;
    EXPECT_DOUBLE_EQ(f->points[h].lo, f->points[h].mean);  // no error seen: no band
  }
}

TEST(ForecastTest, SeasonalTrendFindsTheSeasonAndTheTrend) {
  // 16 weeks with a trend of 2 GPU-hours a day and little noise: the next two weeks are the
  // season plus the trend carried on.
  const std::vector<double> y = Weekly(112, 2, 1);
  Result<Forecast> f = Fit(ForecastModel::kSeasonalTrend, y, {.season = 7, .horizon = 14});
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  const std::vector<double> truth = Weekly(126, 2, 0);
  for (int h = 0; h < 14; ++h) {
    EXPECT_NEAR(f->points[h].mean, truth[112 + h], 15) << h;
    EXPECT_LE(f->points[h].lo, f->points[h].mean);
    EXPECT_GE(f->points[h].hi, f->points[h].mean);
  }
  // The band widens with the horizon.
  EXPECT_GT(f->points[13].hi - f->points[13].lo, f->points[0].hi - f->points[0].lo);
}

TEST(ForecastTest, TheTrendModelBeatsTheBaselineOnATrendedSeries) {
  const std::vector<double> y = Weekly(140, 3, 10);
  const ForecastOptions o{.season = 7, .horizon = 14};
  const Backtest naive = RunBacktest(ForecastModel::kSeasonalNaive, y, o);
  const Backtest trend = RunBacktest(ForecastModel::kSeasonalTrend, y, o);
  EXPECT_EQ(naive.origins, 28);
  EXPECT_EQ(naive.points, 28 * 14);
  EXPECT_LT(trend.smape, naive.smape);
}

TEST(ForecastTest, An80PercentBandCoversAboutEightyPercentOfWhatHappens) {
  // Stationary season with normal noise: the band's coverage on the backtest is near its level.
  const std::vector<double> y = Weekly(364, 0, 20, 11);
  const ForecastOptions o{.season = 7, .horizon = 7};
  for (ForecastModel m : {ForecastModel::kSeasonalNaive, ForecastModel::kSeasonalTrend}) {
    const Backtest b = RunBacktest(m, y, o, 120);
    EXPECT_GT(b.coverage, 0.68) << ForecastModelName(m);
    EXPECT_LT(b.coverage, 0.95) << ForecastModelName(m);
  }
}

TEST(ForecastTest, NeverForecastsNegativeDemand) {
  std::vector<double> y;
  for (int d = 0; d < 60; ++d) y.push_back(std::max(0.0, 100 - 2.0 * d));  // falling to zero
  for (ForecastModel m : {ForecastModel::kSeasonalNaive, ForecastModel::kSeasonalTrend}) {
    Result<Forecast> f = Fit(m, y, {.season = 7, .horizon = 30});
    ASSERT_TRUE(f.ok());
    for (const ForecastPoint& p : f->points) {
      EXPECT_GE(p.mean, 0);
      EXPECT_GE(p.lo, 0);
    }
  }
}

TEST(ForecastTest, BadOptionsAndShortHistoriesNameTheField) {
  const std::vector<double> y = Weekly(10, 0, 0);
  EXPECT_EQ(Fit(ForecastModel::kSeasonalTrend, y).status().field(), "history");
  EXPECT_EQ(Fit(ForecastModel::kSeasonalNaive, y, {.horizon = 0}).status().field(), "horizon");
  EXPECT_EQ(Fit(ForecastModel::kSeasonalNaive, y, {.season = 0}).status().field(), "season");
  EXPECT_EQ(Fit(ForecastModel::kSeasonalNaive, y, {.level = 1}).status().field(), "level");
  std::vector<double> bad = Weekly(21, 0, 0);
  bad[3] = std::nan("");
  EXPECT_EQ(Fit(ForecastModel::kSeasonalNaive, bad).status().field(), "history");
  const Backtest b = RunBacktest(ForecastModel::kSeasonalTrend, y, {});
  EXPECT_EQ(b.points, 0);
}

// The backtest figures docs/simulator.md shows: a year of daily demand with a weekly season, for
// several trends and noise levels, 56 origins, 14 days ahead (printed; bounds checked loosely).
TEST(ForecastTest, BacktestFigures) {
  std::printf("%-6s %-6s %-15s %8s %9s\n", "trend", "noise", "model", "sMAPE %", "cover %");
  for (double trend : {0.0, 1.0, 3.0}) {
    for (double noise : {10.0, 40.0}) {
      const std::vector<double> y = Weekly(364, trend, noise, 3);
      for (ForecastModel m : {ForecastModel::kSeasonalNaive, ForecastModel::kSeasonalTrend}) {
        const Backtest b = RunBacktest(m, y, {.season = 7, .horizon = 14}, 56);
        std::printf("%-6.0f %-6.0f %-15s %8.2f %9.1f\n", trend, noise,
                    std::string(ForecastModelName(m)).c_str(), b.smape, 100 * b.coverage);
        EXPECT_EQ(b.points, 56 * 14);
        EXPECT_GT(b.coverage, 0.6);
      }
    }
  }
}

}  // namespace
}  // namespace arbiter::plan
