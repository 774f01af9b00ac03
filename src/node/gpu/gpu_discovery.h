// GpuDiscovery: the GPUs of this node and how they are doing. Two implementations: NVML, loaded
// at run time (nvml.h), and fake GPUs for tests and demos (fake_gpus.h).
//
// Thread safety: implementations may be called from one thread at a time (the agent calls
// Discover when it registers and Sample on every heartbeat, from its heartbeat thread).
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "model/execution.h"

namespace arbiter::node {

struct DiscoveredGpu {
  int32_t index = 0;  // as CUDA_VISIBLE_DEVICES names it (PCI bus order)
  std::string model;  // the device's name ("NVIDIA H100 80GB HBM3"), or the configured model
  int64_t memory_mib = 0;
  std::string uuid;
  int32_t nvlink_domain = 0;  // GPUs of one NVLink island share it; -1: unknown
  bool healthy = true;
  std::string health_reason;
  // The device node a process opens to use it (/dev/nvidiaN is 195:N); -1: none known. A task
  // may open only its own GPUs' (the executor's device cgroup denies the others).
  int32_t device_major = -1;
  int32_t device_minor = -1;
};

class GpuDiscovery {
 public:
  virtual ~GpuDiscovery() = default;
  // The GPUs as they are now.
  virtual std::vector<DiscoveredGpu> Discover() = 0;
  // Utilisation, memory and health of every GPU; `busy`: the indices tasks run on now (fake GPUs
  // use it; real ones measure).
  virtual std::vector<GpuTelemetry> Sample(const std::set<int32_t>& busy) = 0;
  // One line for the log and the node's status ("nvml: 8 GPUs, driver 550.54.15").
  virtual std::string Describe() const = 0;
};

}  // namespace arbiter::node
