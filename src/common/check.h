// ARBITER_CHECK: crash on a broken invariant (a bug), never on bad input.
#pragma once

#include <string_view>

namespace arbiter::internal {
[[noreturn]] void CheckFailed(const char* file, int line, const char* expr, std::string_view msg);
}  // namespace arbiter::internal

#define ARBITER_CHECK(cond, msg)                                          \
  do {                                                                    \
    if (!(cond)) [[unlikely]] {                                           \
      ::arbiter::internal::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
    }                                                                     \
  } while (false)
