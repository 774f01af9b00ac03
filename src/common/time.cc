#include "common/time.h"

#include <cstdio>
#include <ctime>
#include <string>

namespace arbiter {

std::optional<int64_t> ParseRfc3339Ms(std::string_view text) {
  const std::string s(text);
  std::tm tm{};
  int consumed = 0;
  if (s.size() == 10) {
    if (std::sscanf(s.c_str(), "%4d-%2d-%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &consumed) !=
            3 ||
        consumed != 10) {
      return std::nullopt;
    }
  } else if (std::sscanf(s.c_str(), "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon,
                         &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
             consumed != 19) {
    return std::nullopt;
  }
  if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
      tm.tm_min > 59 || tm.tm_sec > 60) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  int64_t ms = static_cast<int64_t>(timegm(&tm)) * 1000;
  size_t i = static_cast<size_t>(consumed);
  if (s.size() == 10) return ms;
  if (i < s.size() && s[i] == '.') {
    int64_t scale = 100;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i) {
      ms += (s[i] - '0') * scale;
      scale /= 10;
    }
  }
  if (i + 1 == s.size() && (s[i] == 'Z' || s[i] == 'z')) return ms;
  int oh = 0, om = 0;
  if (i + 6 == s.size() && (s[i] == '+' || s[i] == '-') &&
      std::sscanf(s.c_str() + i + 1, "%2d:%2d", &oh, &om) == 2 && oh <= 23 && om <= 59) {
    const int64_t offset = (oh * 60 + om) * 60'000LL;
    return s[i] == '+' ? ms - offset : ms + offset;
  }
  return std::nullopt;
}

}  // namespace arbiter
