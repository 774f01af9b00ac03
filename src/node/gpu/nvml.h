// NvmlGpus: the node's NVIDIA GPUs through NVML, loaded at run time with dlopen (no CUDA headers
// or libraries at build time; a node without the driver simply has no NVML).
//
// Discover: count, name, memory, UUID, health and NVLink islands (GPUs that reach each other
// over NVLink, from nvmlDeviceGetP2PStatus, or else from nvmlDeviceGetNvLinkState: every GPU with
// an active link in one island). Health: uncorrected volatile ECC errors, pages waiting for
// retirement, or a GPU fallen off the bus make a GPU unhealthy. Sample: utilisation and memory
// in use.
//
// Thread safety: one thread at a time.
#pragma once

#include <memory>
#include <string>

#include "common/result.h"
#include "node/gpu/gpu_discovery.h"

namespace arbiter::node {

inline constexpr const char* kNvmlLibrary = "libnvidia-ml.so.1";

class NvmlGpus : public GpuDiscovery {
 public:
  // Loads `library` and initialises NVML. Unavailable, saying why, when the library is missing,
  // lacks the functions, or NVML does not start (no driver, no devices).
  static Result<std::unique_ptr<NvmlGpus>> Load(const std::string& library = kNvmlLibrary);
  ~NvmlGpus() override;
  NvmlGpus(const NvmlGpus&) = delete;
  NvmlGpus& operator=(const NvmlGpus&) = delete;

  std::vector<DiscoveredGpu> Discover() override;
  std::vector<GpuTelemetry> Sample(const std::set<int32_t>& busy) override;
  std::string Describe() const override;

  struct Api;  // the function pointers

 private:
  NvmlGpus(void* handle, std::unique_ptr<Api> api);
  // Health of `device`; false with the reason when unhealthy.
  bool Healthy(void* device, std::string* reason) const;

  void* handle_;  // dlopen's
  std::unique_ptr<Api> api_;
  std::string driver_;
  size_t count_ = 0;
};

}  // namespace arbiter::node
