#include "sim/spread.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sim/replay.h"

namespace arbiter::sim {
namespace {

TEST(Spread, MeanAndStudentInterval) {
  // Mean 3, sample sd sqrt(2.5), n 5: half width 2.776 x sqrt(2.5) / sqrt(5).
  const Spread s = Spread::Of({1, 2, 3, 4, 5});
  EXPECT_EQ(s.n, 5);
  EXPECT_DOUBLE_EQ(s.mean, 3.0);
  EXPECT_NEAR(s.sd, std::sqrt(2.5), 1e-12);
  const double half = 2.776 * std::sqrt(2.5) / std::sqrt(5.0);
  EXPECT_NEAR(s.lo, 3.0 - half, 1e-9);
  EXPECT_NEAR(s.hi, 3.0 + half, 1e-9);
}

TEST(Spread, OneValueOrNoneHasNoWidth) {
  const Spread one = Spread::Of({7.5});
  EXPECT_EQ(one.n, 1);
  EXPECT_DOUBLE_EQ(one.lo, 7.5);
  EXPECT_DOUBLE_EQ(one.hi, 7.5);
  EXPECT_DOUBLE_EQ(one.sd, 0.0);
  EXPECT_EQ(Spread::Of({}).n, 0);
  const Spread same = Spread::Of({2, 2, 2});
  EXPECT_DOUBLE_EQ(same.lo, 2.0);
  EXPECT_DOUBLE_EQ(same.hi, 2.0);
}

TEST(Spread, StudentQuantiles) {
  EXPECT_DOUBLE_EQ(StudentT975(1), 12.706);
  EXPECT_DOUBLE_EQ(StudentT975(4), 2.776);
  EXPECT_DOUBLE_EQ(StudentT975(9), 2.262);
  EXPECT_DOUBLE_EQ(StudentT975(30), 2.042);
  EXPECT_NEAR(StudentT975(60), 2.000, 0.005);
  EXPECT_NEAR(StudentT975(1000000), 1.960, 0.001);
}

TEST(RuntimeHistory, MedianOfTheLongerRunTimes) {
  RuntimeHistory h;
  // Too little history: as long again as it has run (at least a second).
  EXPECT_EQ(h.ExpectedEnd(0, 10'000), 20'000);
  EXPECT_EQ(h.ExpectedEnd(10'000, 10'000), 11'000);
  for (DurationMs d : {5'000, 60'000, 100'000, 200'000, 1'000'000}) h.Add(d);
  EXPECT_EQ(h.size(), 5u);
  // Just started: the median of all five (100 s).
  EXPECT_EQ(h.ExpectedEnd(0, 0), 100'000);
  // Ran 70 s: of the run times above 70 s (100, 200, 1000) the median, 200 s.
  EXPECT_EQ(h.ExpectedEnd(0, 70'000), 200'000);
  // Ran 150 s: only two longer, too few: as long again.
  EXPECT_EQ(h.ExpectedEnd(1'000, 151'000), 301'000);
  // Never before now.
  EXPECT_GE(h.ExpectedEnd(0, 99'000), 99'000);
}

}  // namespace
}  // namespace arbiter::sim
