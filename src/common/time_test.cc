#include "common/time.h"

#include <gtest/gtest.h>

namespace arbiter {
namespace {

TEST(ParseRfc3339Ms, TimesDatesFractionsAndOffsets) {
  constexpr int64_t kDay = 1'762'732'800'000;  // 2025-11-10T00:00:00Z
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10"), kDay);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10T08:00:00Z"), kDay + 8 * 3'600'000);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10 08:00:00z"), kDay + 8 * 3'600'000);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10T08:00:00.123Z"), kDay + 8 * 3'600'000 + 123);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10T08:00:00.5Z"), kDay + 8 * 3'600'000 + 500);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10T09:30:00+01:30"), kDay + 8 * 3'600'000);
  EXPECT_EQ(ParseRfc3339Ms("2025-11-10T06:00:00-02:00"), kDay + 8 * 3'600'000);
  for (const char* bad : {"", "2025-11-10T08:00:00", "2025-13-10", "2025-11-10T25:00:00Z",
                          "2025-11-10T08:00:00+1", "yesterday", "2025-11-10T08:00:00Zx"}) {
    EXPECT_FALSE(ParseRfc3339Ms(bad).has_value()) << bad;
  }
}

}  // namespace
}  // namespace arbiter
