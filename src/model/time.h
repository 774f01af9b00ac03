// Time in the model: milliseconds since the Unix epoch (or since a trace's start in the simulator).
// The scheduling core never reads a clock; drivers pass `now` in.
#pragma once

#include <cstdint>

namespace arbiter {

using TimeMs = int64_t;
using DurationMs = int64_t;

inline constexpr DurationMs kMsPerSecond = 1000;
inline constexpr DurationMs SecondsToMs(int64_t s) { return s * kMsPerSecond; }

}  // namespace arbiter
