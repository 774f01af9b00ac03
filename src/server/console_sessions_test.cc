#include "server/console_sessions.h"

#include <gtest/gtest.h>

namespace arbiter::server {
namespace {

TEST(ConsoleSessions, CreateUseEnd) {
  ConsoleSessions s;
  const auto c = s.Create("arb_x_y", 1000);
  EXPECT_EQ(c.id.size(), 64u);
  EXPECT_EQ(c.csrf.size(), 64u);
  EXPECT_NE(c.id, c.csrf);
  auto got = s.Use(c.id, 2000);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->token, "arb_x_y");
  EXPECT_EQ(got->csrf, c.csrf);
  EXPECT_FALSE(s.Use("nope", 2000).has_value());
  EXPECT_FALSE(s.Use("", 2000).has_value());
  EXPECT_TRUE(s.End(c.id));
  EXPECT_FALSE(s.End(c.id));
  EXPECT_FALSE(s.Use(c.id, 3000).has_value());
}

TEST(ConsoleSessions, IdleAndMaxAge) {
  ConsoleSessions s;
  const auto idle = s.Create("t", 0);
  EXPECT_FALSE(s.Use(idle.id, ConsoleSessions::kIdleMs + 1).has_value());
  // Used within the idle time, a session lives until its maximum age.
  const auto busy = s.Create("t", 0);
  int64_t now = 0;
  while (now + ConsoleSessions::kIdleMs / 2 <= ConsoleSessions::kMaxAgeMs) {
    now += ConsoleSessions::kIdleMs / 2;
    ASSERT_TRUE(s.Use(busy.id, now).has_value()) << now;
  }
  EXPECT_FALSE(s.Use(busy.id, ConsoleSessions::kMaxAgeMs + 1).has_value());
  EXPECT_EQ(s.size(), 0u);
}

TEST(ConsoleSessions, CookieValue) {
  EXPECT_EQ(CookieValue("a=1; arbiter_session=abc; b=2", "arbiter_session"), "abc");
  EXPECT_EQ(CookieValue("arbiter_session=abc", "arbiter_session"), "abc");
  EXPECT_EQ(CookieValue("xarbiter_session=abc", "arbiter_session"), "");
  EXPECT_EQ(CookieValue("", "arbiter_session"), "");
  EXPECT_EQ(CookieValue("a=1;b=2", "b"), "2");
}

}  // namespace
}  // namespace arbiter::server
