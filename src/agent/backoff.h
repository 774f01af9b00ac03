// Retry delays of the node agent when the server does not answer.
#pragma once

#include <algorithm>
#include <cstdint>

#include "model/time.h"

namespace arbiter::agent {

// Delay before retry number `failures` (1-based): min(cap, base x 2^(failures-1)), then spread
// by `jitter` in [0, 1) over +-20% so that a thousand agents do not retry in step.
inline DurationMs RetryDelayMs(int failures, DurationMs base, DurationMs cap, double jitter) {
  const int shift = std::clamp(failures - 1, 0, 30);
  const DurationMs delay = std::min(cap, base << shift);
  const auto spread = static_cast<DurationMs>(static_cast<double>(delay) * 0.4 * (jitter - 0.5));
  return std::max<DurationMs>(1, delay + spread);
}

}  // namespace arbiter::agent
