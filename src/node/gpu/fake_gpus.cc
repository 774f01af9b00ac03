#include "node/gpu/fake_gpus.h"

#include <fmt/format.h>

#include <fstream>
#include <sstream>

namespace arbiter::node {

namespace {

// A fixed mix of two counters (splitmix64's finaliser): the variation of the fake numbers.
uint64_t Mix(uint64_t a, uint64_t b) {
  uint64_t z = a * 0x9E3779B97F4A7C15ull + b + 0x632BE59BD9B4E019ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

}  // namespace

FakeGpus::FakeGpus(int count, std::string model, int64_t memory_mib, std::string faults_file)
    : count_(count),
      model_(std::move(model)),
      memory_mib_(memory_mib),
      faults_file_(std::move(faults_file)) {}

std::vector<DiscoveredGpu> FakeGpus::Discover() {
  ReadFaults();
  std::vector<DiscoveredGpu> out;
  for (int i = 0; i < count_; ++i) {
    DiscoveredGpu g;
    g.index = i;
    g.model = model_;
    g.memory_mib = memory_mib_;
    g.uuid = fmt::format("GPU-fa4e0000-0000-0000-0000-{:012d}", i);
    // Like an 8-GPU board with two NVLink islands of four.
    g.nvlink_domain = i / 4;
    if (device_major_ >= 0) {
      g.device_major = device_major_;
      g.device_minor = i;
    }
    auto f = faults_.find(i);
    g.healthy = f == faults_.end();
    if (!g.healthy) g.health_reason = f->second;
    out.push_back(std::move(g));
  }
  return out;
}

std::vector<GpuTelemetry> FakeGpus::Sample(const std::set<int32_t>& busy) {
  ReadFaults();
  ++samples_;
  std::vector<GpuTelemetry> out;
  for (int i = 0; i < count_; ++i) {
    GpuTelemetry t;
    t.index = i;
    t.uuid = fmt::format("GPU-fa4e0000-0000-0000-0000-{:012d}", i);
    t.memory_total_mib = memory_mib_;
    const uint64_t r = Mix(samples_, static_cast<uint64_t>(i));
    if (busy.count(i)) {
      t.utilization_pct = 80 + static_cast<int32_t>(r % 20);                        // 80..99
      t.memory_used_mib = memory_mib_ * (50 + static_cast<int64_t>(r % 41)) / 100;  // 50..90%
    }
    auto f = faults_.find(i);
    t.healthy = f == faults_.end();
    if (!t.healthy) t.health_reason = f->second;
    out.push_back(std::move(t));
  }
  return out;
}

std::string FakeGpus::Describe() const {
  return fmt::format("fake: {} x {}{}", count_,
                     model_.empty() ? "(the server's first model)" : model_,
                     faults_.empty() ? "" : fmt::format(", {} unhealthy", faults_.size()));
}

void FakeGpus::SetHealthy(int32_t index, bool healthy, std::string reason) {
  if (healthy) {
    faults_.erase(index);
  } else {
    faults_[index] = reason.empty() ? "fault injected" : std::move(reason);
  }
}

void FakeGpus::ReadFaults() {
  if (faults_file_.empty()) return;
  std::ifstream f(faults_file_);
  faults_.clear();
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    int32_t index = -1;
    if (!(in >> index) || index < 0) continue;
    std::string reason;
    std::getline(in >> std::ws, reason);
    faults_[index] = reason.empty() ? "fault injected (faults file)" : reason;
  }
}

}  // namespace arbiter::node
