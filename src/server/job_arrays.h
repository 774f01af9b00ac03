// The throttle of job arrays (Slurm's --array=0-99%8, and scontrol's ArrayTaskThrottle): at most
// max_running of an array's elements hold resources at once (admitted, starting, running, or
// stopping). The scheduling driver asks, for each pending element in ascending id order (which is
// the order of their indices, so lower indices go first), whether it may be offered to the core
// this cycle; an element that may not keeps the verdict ArrayThrottled with the message below.
// Pure: the driver says how many of an array's elements hold resources
// (control_plane_scheduling.cc), under the control plane's lock.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

namespace arbiter::server {

// "array 123 runs 8 of at most 8 elements at once (%8)"; with elements offered this cycle that do
// not hold resources yet: "array 123 runs 6 of at most 8 elements at once, and its next 2 are
// ahead of this one (%8)".
std::string ArrayThrottledMessage(uint64_t array, int32_t running, int32_t offered,
                                  int32_t max_running);

// One cycle's places of the throttled arrays.
class ArrayThrottle {
 public:
  // `holding(array)`: how many of the array's elements hold resources now; asked once per array.
  explicit ArrayThrottle(std::function<int32_t(uint64_t)> holding) : holding_(std::move(holding)) {}

  // Whether a pending element of array `array`, whose limit is `max_running` (> 0), may be offered
  // to the core this cycle. When it may, it takes one of the array's places for this cycle (it may
  // be admitted); when not, `*why` says why (ArrayThrottledMessage).
  bool Offer(uint64_t array, int32_t max_running, std::string* why);

 private:
  std::function<int32_t(uint64_t)> holding_;
  struct Places {
    int32_t holding = 0;  // elements holding resources now
    int32_t offered = 0;  // elements offered to the core this cycle
  };
  std::unordered_map<uint64_t, Places> taken_;
};

}  // namespace arbiter::server
