// GPU models ("flavors"): the kinds of GPU a cluster has.
#pragma once

#include <cstdint>
#include <string>

namespace arbiter {

struct GpuModel {
  std::string name;        // "A100-80G"
  int64_t memory_mib = 0;  // memory of one GPU
  // Price of one GPU-hour in milli-units of the currency (2.5 per hour -> 2500). Fixed point.
  int64_t price_milli_per_hour = 0;
};

}  // namespace arbiter
