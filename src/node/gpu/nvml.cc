#include "node/gpu/nvml.h"

#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>

namespace arbiter::node {

namespace {

// The few NVML types used, as nvml.h declares them (the ABI is stable across drivers).
using nvmlReturn_t = int;
using nvmlDevice_t = struct nvmlDevice_st*;
constexpr nvmlReturn_t kSuccess = 0;
constexpr nvmlReturn_t kErrorGpuIsLost = 15;
constexpr int kMemoryErrorUncorrected = 1;  // NVML_MEMORY_ERROR_TYPE_UNCORRECTED
constexpr int kVolatileEcc = 0;             // NVML_VOLATILE_ECC
constexpr int kEnabled = 1;                 // NVML_FEATURE_ENABLED
constexpr int kP2pCapsNvlink = 2;           // NVML_P2P_CAPS_INDEX_NVLINK
constexpr int kP2pStatusOk = 0;             // NVML_P2P_STATUS_OK
constexpr unsigned kMaxNvlinks = 18;        // NVML_NVLINK_MAX_LINKS
constexpr unsigned kNameBytes = 96;         // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned kUuidBytes = 96;         // NVML_DEVICE_UUID_V2_BUFFER_SIZE
constexpr int32_t kNvidiaMajor = 195;       // the character major of /dev/nvidia<minor>

struct NvmlMemory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

constexpr unsigned long long kMiB = 1024ull * 1024ull;

}  // namespace

struct NvmlGpus::Api {
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  const char* (*error_string)(nvmlReturn_t) = nullptr;
  nvmlReturn_t (*count)(unsigned int*) = nullptr;
  nvmlReturn_t (*handle_by_index)(unsigned int, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*name)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*memory)(nvmlDevice_t, NvmlMemory*) = nullptr;
  // Optional: older drivers or GPUs lack some.
  nvmlReturn_t (*uuid)(nvmlDevice_t, char*, unsigned int) = nullptr;
  nvmlReturn_t (*utilization)(nvmlDevice_t, NvmlUtilization*) = nullptr;
  nvmlReturn_t (*ecc_errors)(nvmlDevice_t, int, int, unsigned long long*) = nullptr;
  nvmlReturn_t (*retired_pending)(nvmlDevice_t, int*) = nullptr;
  nvmlReturn_t (*p2p_status)(nvmlDevice_t, nvmlDevice_t, int, int*) = nullptr;
  nvmlReturn_t (*nvlink_state)(nvmlDevice_t, unsigned int, int*) = nullptr;
  nvmlReturn_t (*minor_number)(nvmlDevice_t, unsigned int*) = nullptr;
  nvmlReturn_t (*driver_version)(char*, unsigned int) = nullptr;
};

namespace {

template <typename F>
bool Bind(void* handle, const char* symbol, F* out) {
  void* p = dlsym(handle, symbol);
  *out = reinterpret_cast<F>(p);
  return p != nullptr;
}

}  // namespace

Result<std::unique_ptr<NvmlGpus>> NvmlGpus::Load(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    return Status(StatusCode::kUnavailable,
                  fmt::format("NVML not found ({}): {}; no NVIDIA driver on this node", library,
                              why != nullptr ? why : "dlopen failed"));
  }
  auto api = std::make_unique<Api>();
  std::string missing;
  auto need = [&](const char* symbol, auto* fn) {
    if (!Bind(handle, symbol, fn)) missing += (missing.empty() ? "" : ", ") + std::string(symbol);
  };
  need("nvmlInit_v2", &api->init);
  need("nvmlShutdown", &api->shutdown);
  need("nvmlErrorString", &api->error_string);
  need("nvmlDeviceGetCount_v2", &api->count);
  need("nvmlDeviceGetHandleByIndex_v2", &api->handle_by_index);
  need("nvmlDeviceGetName", &api->name);
  need("nvmlDeviceGetMemoryInfo", &api->memory);
  if (!missing.empty()) {
    dlclose(handle);
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} is not a usable NVML: it lacks {}", library, missing));
  }
  Bind(handle, "nvmlDeviceGetUUID", &api->uuid);
  Bind(handle, "nvmlDeviceGetUtilizationRates", &api->utilization);
  Bind(handle, "nvmlDeviceGetTotalEccErrors", &api->ecc_errors);
  Bind(handle, "nvmlDeviceGetRetiredPagesPendingStatus", &api->retired_pending);
  Bind(handle, "nvmlDeviceGetP2PStatus", &api->p2p_status);
  Bind(handle, "nvmlDeviceGetNvLinkState", &api->nvlink_state);
  Bind(handle, "nvmlDeviceGetMinorNumber", &api->minor_number);
  Bind(handle, "nvmlSystemGetDriverVersion", &api->driver_version);
  const nvmlReturn_t rc = api->init();
  if (rc != kSuccess) {
    const std::string why = api->error_string(rc);
    dlclose(handle);
    return Status(StatusCode::kUnavailable, fmt::format("NVML did not start: {}", why));
  }
  return std::unique_ptr<NvmlGpus>(new NvmlGpus(handle, std::move(api)));
}

NvmlGpus::NvmlGpus(void* handle, std::unique_ptr<Api> api) : handle_(handle), api_(std::move(api)) {
  char version[96] = {0};
  if (api_->driver_version != nullptr && api_->driver_version(version, sizeof(version)) == kSuccess)
    driver_ = version;
  unsigned int n = 0;
  if (api_->count(&n) == kSuccess) count_ = n;
}

NvmlGpus::~NvmlGpus() {
  api_->shutdown();
  dlclose(handle_);
}

std::string NvmlGpus::Describe() const {
  return fmt::format("nvml: {} GPU{}{}", count_, count_ == 1 ? "" : "s",
                     driver_.empty() ? "" : fmt::format(", driver {}", driver_));
}

bool NvmlGpus::Healthy(void* device, std::string* reason) const {
  auto d = static_cast<nvmlDevice_t>(device);
  NvmlMemory mem{};
  if (api_->memory(d, &mem) == kErrorGpuIsLost) {
    *reason = "the GPU has fallen off the bus";
    return false;
  }
  unsigned long long ecc = 0;
  if (api_->ecc_errors != nullptr &&
      api_->ecc_errors(d, kMemoryErrorUncorrected, kVolatileEcc, &ecc) == kSuccess && ecc > 0) {
    *reason = fmt::format("{} uncorrected ECC errors since the last reset", ecc);
    return false;
  }
  int pending = 0;
  if (api_->retired_pending != nullptr && api_->retired_pending(d, &pending) == kSuccess &&
      pending == kEnabled) {
    *reason = "memory pages wait for retirement (reset the GPU)";
    return false;
  }
  return true;
}

std::vector<DiscoveredGpu> NvmlGpus::Discover() {
  unsigned int n = 0;
  if (api_->count(&n) != kSuccess) return {};
  count_ = n;
  std::vector<nvmlDevice_t> devices(n, nullptr);
  std::vector<DiscoveredGpu> out;
  for (unsigned int i = 0; i < n; ++i) {
    DiscoveredGpu g;
    g.index = static_cast<int32_t>(i);
    if (api_->handle_by_index(i, &devices[i]) != kSuccess) {
      g.healthy = false;
      g.health_reason = "NVML cannot open the device";
      out.push_back(std::move(g));
      continue;
    }
    char name[kNameBytes] = {0};
    if (api_->name(devices[i], name, kNameBytes) == kSuccess) g.model = name;
    NvmlMemory mem{};
    if (api_->memory(devices[i], &mem) == kSuccess)
      g.memory_mib = static_cast<int64_t>(mem.total / kMiB);
    char uuid[kUuidBytes] = {0};
    if (api_->uuid != nullptr && api_->uuid(devices[i], uuid, kUuidBytes) == kSuccess)
      g.uuid = uuid;
    g.healthy = Healthy(devices[i], &g.health_reason);
    unsigned int minor = 0;
    if (api_->minor_number != nullptr && api_->minor_number(devices[i], &minor) == kSuccess) {
      g.device_major = kNvidiaMajor;  // /dev/nvidia<minor>
      g.device_minor = static_cast<int32_t>(minor);
    }
    out.push_back(std::move(g));
  }
  // NVLink islands: union-find over pairs that reach each other over NVLink.
  std::vector<int32_t> parent(n);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int32_t x) {
    while (parent[x] != x) x = parent[x] = parent[parent[x]];
    return x;
  };
  bool known = false;
  for (unsigned int a = 0; a < n; ++a) {
    for (unsigned int b = a + 1; b < n && devices[a] != nullptr; ++b) {
      int status = -1;
      if (devices[b] == nullptr || api_->p2p_status == nullptr) continue;
      if (api_->p2p_status(devices[a], devices[b], kP2pCapsNvlink, &status) != kSuccess) continue;
      known = true;
      if (status == kP2pStatusOk)
        parent[find(static_cast<int32_t>(b))] = find(static_cast<int32_t>(a));
    }
  }
  if (!known && api_->nvlink_state != nullptr) {
    // No pairwise answer: GPUs with an active link form one island (an NVSwitch board).
    int32_t island = -1;
    for (unsigned int i = 0; i < n; ++i) {
      for (unsigned int l = 0; l < kMaxNvlinks && devices[i] != nullptr; ++l) {
        int active = 0;
        if (api_->nvlink_state(devices[i], l, &active) != kSuccess) break;
        if (active != kEnabled) continue;
        known = true;
        if (island < 0) island = static_cast<int32_t>(i);
        parent[find(static_cast<int32_t>(i))] = find(island);
        break;
      }
    }
  }
  // Domains numbered 0, 1, ... by their lowest GPU; -1 when NVML could not tell.
  std::vector<int32_t> number(n, -1);
  int32_t next = 0;
  for (unsigned int i = 0; i < n; ++i) {
    const int32_t root = find(static_cast<int32_t>(i));
    if (number[root] < 0) number[root] = next++;
    out[i].nvlink_domain = known ? number[root] : -1;
  }
  return out;
}

std::vector<GpuTelemetry> NvmlGpus::Sample(const std::set<int32_t>&) {
  unsigned int n = 0;
  if (api_->count(&n) != kSuccess) return {};
  std::vector<GpuTelemetry> out;
  for (unsigned int i = 0; i < n; ++i) {
    GpuTelemetry t;
    t.index = static_cast<int32_t>(i);
    nvmlDevice_t d = nullptr;
    if (api_->handle_by_index(i, &d) != kSuccess) {
      t.healthy = false;
      t.health_reason = "NVML cannot open the device";
      out.push_back(std::move(t));
      continue;
    }
    char uuid[kUuidBytes] = {0};
    if (api_->uuid != nullptr && api_->uuid(d, uuid, kUuidBytes) == kSuccess) t.uuid = uuid;
    NvmlMemory mem{};
    if (api_->memory(d, &mem) == kSuccess) {
      t.memory_total_mib = static_cast<int64_t>(mem.total / kMiB);
      t.memory_used_mib = static_cast<int64_t>(mem.used / kMiB);
    }
    NvmlUtilization u{};
    if (api_->utilization != nullptr && api_->utilization(d, &u) == kSuccess) {
      t.utilization_pct = static_cast<int32_t>(std::min(100u, u.gpu));
    }
    t.healthy = Healthy(d, &t.health_reason);
    out.push_back(std::move(t));
  }
  return out;
}

}  // namespace arbiter::node
