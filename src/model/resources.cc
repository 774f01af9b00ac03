#include "model/resources.h"

#include <fmt/format.h>

namespace arbiter {

namespace {
constexpr int32_t kMaxGpusPerTask = 1024;
constexpr int64_t kMaxMib = int64_t{1} << 40;  // 1 EiB of MiB: far above any machine
constexpr int64_t kMaxCpuMilli = int64_t{1} << 40;
}  // namespace

Status ValidateTaskResources(const TaskResources& r, const std::string& field) {
  const std::string p = field.empty() ? "" : field + ".";
  if (r.gpus < 0 || r.gpus > kMaxGpusPerTask) {
    return InvalidArgument(
        p + "gpus", fmt::format("must be between 0 and {}, got {}", kMaxGpusPerTask, r.gpus));
  }
  if (r.gpu_milli < 1 || r.gpu_milli > kMilliPerGpu) {
    return InvalidArgument(p + "gpu_milli",
                           fmt::format("must be between 1 and 1000, got {}", r.gpu_milli));
  }
  if (r.gpu_milli < kMilliPerGpu && r.gpus != 1) {
    return InvalidArgument(
        p + "gpu_milli",
        fmt::format("a fraction of a GPU ({}) needs gpus = 1, got gpus = {}", r.gpu_milli, r.gpus));
  }
  if (r.gpu_memory_mib < 0 || r.gpu_memory_mib > kMaxMib) {
    return InvalidArgument(p + "gpu_memory_mib", fmt::format("must be between 0 and {}, got {}",
                                                             kMaxMib, r.gpu_memory_mib));
  }
  if (r.gpu_memory_mib > 0 && r.gpus == 0) {
    return InvalidArgument(p + "gpu_memory_mib", "GPU memory needs gpus >= 1");
  }
  if (r.cpu_milli < 0 || r.cpu_milli > kMaxCpuMilli) {
    return InvalidArgument(p + "cpu_milli", fmt::format("must be between 0 and {}, got {}",
                                                        kMaxCpuMilli, r.cpu_milli));
  }
  if (r.memory_mib < 0 || r.memory_mib > kMaxMib) {
    return InvalidArgument(p + "memory_mib",
                           fmt::format("must be between 0 and {}, got {}", kMaxMib, r.memory_mib));
  }
  return Status::Ok();
}

std::string FormatMilli(int64_t milli) {
  const int64_t whole = milli / 1000;
  int64_t frac = milli % 1000;
  if (frac < 0) frac = -frac;
  if (frac == 0) return fmt::format("{}", whole);
  std::string f = fmt::format("{:03d}", frac);
  while (!f.empty() && f.back() == '0') f.pop_back();
  return fmt::format("{}{}.{}", (milli < 0 && whole == 0) ? "-" : "", whole, f);
}

std::string DescribeTaskResources(const TaskResources& r) {
  std::string out;
  if (r.gpus > 0) {
    if (r.fractional()) {
      out = fmt::format("{} GPU", FormatMilli(r.gpu_milli));
    } else {
      out = fmt::format("{} GPU", r.gpus);
    }
    if (r.gpu_memory_mib > 0) out += fmt::format(" ({} MiB GPU memory each)", r.gpu_memory_mib);
  } else {
    out = "0 GPU";
  }
  out += fmt::format(", {} CPU, {} MiB RAM", FormatMilli(r.cpu_milli), r.memory_mib);
  return out;
}

}  // namespace arbiter
