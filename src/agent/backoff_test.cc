#include "agent/backoff.h"

#include <gtest/gtest.h>

namespace arbiter::agent {
namespace {

TEST(Backoff, DoublesUpToTheCap) {
  // Without spread (jitter 0.5): base x 2^(n-1), capped.
  EXPECT_EQ(RetryDelayMs(1, 250, 10000, 0.5), 250);
  EXPECT_EQ(RetryDelayMs(2, 250, 10000, 0.5), 500);
  EXPECT_EQ(RetryDelayMs(3, 250, 10000, 0.5), 1000);
  EXPECT_EQ(RetryDelayMs(6, 250, 10000, 0.5), 8000);
  EXPECT_EQ(RetryDelayMs(7, 250, 10000, 0.5), 10000);
  EXPECT_EQ(RetryDelayMs(1000, 250, 10000, 0.5), 10000);
}

TEST(Backoff, JitterSpreadsByTwentyPercent) {
  EXPECT_EQ(RetryDelayMs(7, 250, 10000, 0.0), 8000);
  EXPECT_EQ(RetryDelayMs(7, 250, 10000, 0.999999), 11999);
  EXPECT_GE(RetryDelayMs(0, 1, 1, 0.0), 1);
}

}  // namespace
}  // namespace arbiter::agent
