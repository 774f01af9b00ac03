#include "server/job_arrays.h"

#include <fmt/format.h>

namespace arbiter::server {

std::string ArrayThrottledMessage(uint64_t array, int32_t running, int32_t max_running) {
  return fmt::format("array {} runs {} of at most {} elements at once (%{})", array, running,
                     max_running, max_running);
}

bool ArrayThrottle::Offer(uint64_t array, int32_t max_running, std::string* why) {
  auto [it, fresh] = taken_.try_emplace(array, 0);
  if (fresh) it->second = holding_(array);
  if (it->second >= max_running) {
    *why = ArrayThrottledMessage(array, it->second, max_running);
    return false;
  }
  ++it->second;
  return true;
}

}  // namespace arbiter::server
