// Durations as the API and the CLI write them: "90s", "30m", "12h", "7d", "2w".
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace arbiter {

// A whole number of at most 100,000 (no sign, at most 11 digits) followed by one unit (s, m, h, d
// or w), in milliseconds; nullopt for anything else. Callers say whether 0 is allowed.
inline std::optional<int64_t> ParseDurationUnitsMs(std::string_view text) {
  if (text.size() < 2 || text.size() > 12) return std::nullopt;
  int64_t n = 0;
  for (size_t i = 0; i + 1 < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return std::nullopt;
    n = n * 10 + (text[i] - '0');
  }
  if (n > 100'000) return std::nullopt;
  switch (text.back()) {
    case 's':
      return n * 1000;
    case 'm':
      return n * 60'000;
    case 'h':
      return n * 3'600'000;
    case 'd':
      return n * 86'400'000;
    case 'w':
      return n * 7 * 86'400'000LL;
    default:
      return std::nullopt;
  }
}

}  // namespace arbiter
