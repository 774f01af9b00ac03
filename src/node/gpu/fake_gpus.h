// FakeGpus: GPUs that exist only in the agent (--fake-gpus N), for tests, demos and clusters
// without NVIDIA drivers. Their telemetry is plausible: a GPU a task runs on shows 80-99%
// utilisation and 50-90% of its memory in use, an idle one 0% and no memory; the numbers vary
// from sample to sample by a fixed sequence (no clock, no randomness).
//
// Fault drills: SetHealthy marks a GPU unhealthy; with a faults file, every sample reads it and
// each line "INDEX [reason]" marks that GPU unhealthy (a GPU not listed is healthy again).
//
// Thread safety: one thread at a time.
#pragma once

#include <map>
#include <string>

#include "node/gpu/gpu_discovery.h"

namespace arbiter::node {

class FakeGpus : public GpuDiscovery {
 public:
  // `model` may be empty: the server then uses its first configured model (memory 0: the
  // model's).
  FakeGpus(int count, std::string model, int64_t memory_mib, std::string faults_file = "");

  // Gives fake GPU i the character device MAJOR:i (none by default), so that device isolation
  // can be drilled without NVIDIA hardware: a node made with `mknod DIR/gpuI c MAJOR I`.
  void SetDeviceMajor(int32_t major) { device_major_ = major; }

  std::vector<DiscoveredGpu> Discover() override;
  std::vector<GpuTelemetry> Sample(const std::set<int32_t>& busy) override;
  std::string Describe() const override;

  void SetHealthy(int32_t index, bool healthy, std::string reason = "");

 private:
  void ReadFaults();

  int count_;
  std::string model_;
  int64_t memory_mib_;
  std::string faults_file_;
  std::map<int32_t, std::string> faults_;  // unhealthy GPUs and why
  uint64_t samples_ = 0;
  int32_t device_major_ = -1;
};

}  // namespace arbiter::node
