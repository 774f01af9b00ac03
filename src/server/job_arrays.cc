#include "server/job_arrays.h"

#include <fmt/format.h>

namespace arbiter::server {

std::string ArrayThrottledMessage(uint64_t array, int32_t running, int32_t offered,
                                  int32_t max_running) {
  if (offered == 0) {
    return fmt::format("array {} runs {} of at most {} elements at once (%{})", array, running,
                       max_running, max_running);
  }
  return fmt::format(
      "array {} runs {} of at most {} elements at once, and its next {} {} ahead of this one "
      "(%{})",
      array, running, max_running, offered, offered == 1 ? "is" : "are", max_running);
}

bool ArrayThrottle::Offer(uint64_t array, int32_t max_running, std::string* why) {
  auto [it, fresh] = taken_.try_emplace(array, Places{});
  Places& p = it->second;
  if (fresh) p.holding = holding_(array);
  if (p.holding + p.offered >= max_running) {
    *why = ArrayThrottledMessage(array, p.holding, p.offered, max_running);
    return false;
  }
  ++p.offered;
  return true;
}

}  // namespace arbiter::server
