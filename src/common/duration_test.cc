#include "common/duration.h"

#include <gtest/gtest.h>

namespace arbiter {
namespace {

TEST(DurationUnits, EachUnitAndTheBounds) {
  EXPECT_EQ(ParseDurationUnitsMs("90s"), 90'000);
  EXPECT_EQ(ParseDurationUnitsMs("30m"), 1'800'000);
  EXPECT_EQ(ParseDurationUnitsMs("12h"), 43'200'000);
  EXPECT_EQ(ParseDurationUnitsMs("7d"), 604'800'000);
  EXPECT_EQ(ParseDurationUnitsMs("2w"), 1'209'600'000);
  EXPECT_EQ(ParseDurationUnitsMs("0s"), 0);  // callers decide whether 0 is allowed
  EXPECT_EQ(ParseDurationUnitsMs("100000d"), 100'000 * 86'400'000LL);
  for (const char* bad : {"", "s", "5", "100001d", "-5m", "5 m", "5y", "1.5h", "99999999999d"}) {
    EXPECT_EQ(ParseDurationUnitsMs(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace arbiter
