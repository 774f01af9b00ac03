#include "server/builtin_node.h"

#include <fmt/format.h>
#include <pwd.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>

#include "exec/task_cgroups.h"
#include "node/gpu/fake_gpus.h"
#include "node/gpu/nvml.h"

namespace arbiter::server {

namespace {

const Principal kSystem{"admin", "", Role::kAdmin, ""};

std::string ListenHost(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  return colon == std::string::npos ? listen : listen.substr(0, colon);
}

}  // namespace

std::string BuiltinWorkDir(const std::string& data_dir, const std::string& configured) {
  if (!configured.empty()) return configured;
  std::string d = data_dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d + "-node";
}

BuiltinNode::BuiltinNode(ControlPlane* cp, const ServerOptions& options,
                         node::LocalExecutor::NowFn now)
    : cp_(cp),
      o_(options),
      now_(std::move(now)),
      work_dir_(BuiltinWorkDir(options.data_dir, options.local_work_dir)) {
  address_ = o_.local_address;
  if (address_.empty()) {
    const std::string host = ListenHost(o_.listen);
    if (!host.empty() && host != "0.0.0.0" && host != "::" && host != "[::]") {
      address_ = host;
    } else {
      char name[256] = {0};
      address_ = gethostname(name, sizeof(name) - 1) == 0 ? name : "";
    }
  }
}

BuiltinNode::~BuiltinNode() { Stop(false); }

size_t BuiltinNode::running() const { return executor_ ? executor_->running() : 0; }

Status BuiltinNode::Register() {
  auto nodes = cp_->ListNodes(kSystem);
  if (!nodes.ok()) return nodes.status();
  configured_ = false;
  for (const auto& n : (*nodes)["items"]) {
    if (n["name"] == o_.local_node && n.value("source", "") == "config") configured_ = true;
  }
  Node n;
  n.name = o_.local_node;
  n.cpu_milli = static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN)) * 1000;
  n.memory_mib = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) *
                 static_cast<int64_t>(sysconf(_SC_PAGESIZE)) / (1024 * 1024);
  // A configured node keeps the configuration's GPUs: only its address is noted.
  if (configured_) return cp_->RegisterNode(n, address_);
  const std::string model = cp_->FirstGpuModel();
  for (const node::DiscoveredGpu& g : gpus_->Discover()) {
    if (model.empty()) break;  // counted once the configuration names a GPU model
    // A model the configuration does not know is counted as its first one, with a warning.
    std::string m = g.model;
    if (m.empty() || !cp_->HasGpuModel(m)) {
      if (!m.empty()) {
        spdlog::warn("built-in node {}: GPU {} is a {}, not in the configuration; counted as {}",
                     o_.local_node, g.index, m, model);
      }
      m = model;
    }
    n.gpus.push_back({g.index, m, g.memory_mib, g.healthy, std::max(0, g.nvlink_domain)});
  }
  ARBITER_RETURN_IF_ERROR(cp_->RegisterNode(n, address_));
  registered_model_ = model;
  if (model.empty()) {
    spdlog::warn(
        "built-in node {}: no GPU model is configured yet; its GPUs ({}) count once one "
        "is",
        o_.local_node, gpus_->Describe());
  } else {
    spdlog::info("built-in node {}: {} CPUs, {} MiB, GPUs: {}", n.name, n.cpu_milli / 1000,
                 n.memory_mib, gpus_->Describe());
  }
  return Status::Ok();
}

Status BuiltinNode::Start() {
  // 1. What the configuration says of the node, then its GPUs: real ones when NVML finds them
  // (unless --fake-gpus says how many fake ones), fake otherwise.
  auto nodes = cp_->ListNodes(kSystem);
  if (!nodes.ok()) return nodes.status();
  size_t configured_gpus = 0;
  bool configured = false;
  for (const auto& n : (*nodes)["items"]) {
    if (n["name"] != o_.local_node || n.value("source", "") != "config") continue;
    configured = true;
    configured_gpus = n["gpus"].size();
  }
  if (o_.fake_gpus < 0) {
    auto nvml = node::NvmlGpus::Load();
    std::vector<node::DiscoveredGpu> found;
    if (nvml.ok()) found = (*nvml)->Discover();
    if (!found.empty() && (!configured || found.size() == configured_gpus)) {
      gpus_ = std::move(nvml).value();
    } else if (!nvml.ok()) {
      spdlog::info("built-in node {}: no NVML ({}); fake GPUs", o_.local_node,
                   nvml.status().message());
    }
  }
  if (!gpus_) {
    const int count =
        configured ? static_cast<int>(configured_gpus) : (o_.fake_gpus < 0 ? 8 : o_.fake_gpus);
    auto fake = std::make_unique<node::FakeGpus>(count, cp_->FirstGpuModel(), 0);
    if (o_.fake_gpu_device_major >= 0) fake->SetDeviceMajor(o_.fake_gpu_device_major);
    gpus_ = std::move(fake);
  }
  ARBITER_RETURN_IF_ERROR(Register());
  // 2. Confinement, as on an agent.
  node::ExecutorOptions eo;
  eo.shim_path = o_.shim;
  eo.max_task_processes = o_.max_task_processes;
  eo.output_retention_ms = int64_t{o_.retention_days} * 86'400'000;  // as the history's
  eo.orphan_timeout_ms = o_.local_orphan_timeout_ms;
  if (const passwd* pw = getpwnam(o_.run_as_default.c_str())) {
    eo.default_uid = pw->pw_uid;
    eo.default_gid = pw->pw_gid;
  }
  for (const node::DiscoveredGpu& g : gpus_->Discover()) {
    if (g.device_major >= 0 && g.device_minor >= 0) {
      eo.gpu_devices[g.index] = {static_cast<uint32_t>(g.device_major),
                                 static_cast<uint32_t>(g.device_minor)};
    }
  }
  cgroup_status_ = "disabled (--no-cgroups)";
  if (o_.local_cgroups) {
    exec::CgroupOptions co;
    std::error_code ec;
    const std::string abs = std::filesystem::absolute(work_dir_, ec).lexically_normal().string();
    co.scope = fmt::format("{}-{:08x}", o_.local_node,
                           static_cast<uint32_t>(std::hash<std::string>{}(abs)));
    co.leaf = "server";
    cgroups_ = exec::TaskCgroups::Setup(co, &cgroup_status_);
  }
  eo.limits = cgroups_.get();
  eo.containers = o_.local_containers;
  eo.container.insecure_registries = o_.insecure_registries;
  spdlog::info("built-in node {}: cgroups: {}", o_.local_node, cgroup_status_);
  executor_ = std::make_unique<node::LocalExecutor>(cp_, o_.local_node, work_dir_, now_, eo);
  if (!executor_->switches_users()) {
    for (int i = 0; i < 3; ++i) spdlog::warn("{}", std::string(72, '!'));
    spdlog::warn("built-in node {}: {}", o_.local_node, executor_->Describe());
    spdlog::warn(
        "start the server as root so that tasks run as their own users "
        "(docs/security.md)");
    for (int i = 0; i < 3; ++i) spdlog::warn("{}", std::string(72, '!'));
  }
  cp_->SetNodeStatus(o_.local_node, "cgroups", cgroup_status_);
  cp_->SetNodeStatus(o_.local_node, "confinement", executor_->Describe());
  spdlog::info("built-in node {}: tasks' folders in {}", o_.local_node, work_dir_);
  // 3. The tasks of the server's earlier run, then the threads.
  executor_->Recover();
  executor_->Start();
  telemetry_ = std::thread([this] { TelemetryLoop(); });
  return Status::Ok();
}

void BuiltinNode::TelemetryLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    lock.unlock();
    // GPUs registered before any model was configured count once one is.
    if (!configured_ && registered_model_.empty() && !cp_->FirstGpuModel().empty()) {
      if (Status st = Register(); !st.ok()) {
        spdlog::warn("built-in node {}: {}", o_.local_node, st.ToString());
      }
    }
    cp_->SetNodeTelemetry(o_.local_node, gpus_->Describe(), gpus_->Sample(executor_->BusyGpus()));
    lock.lock();
    cv_.wait_for(lock, std::chrono::seconds(2), [&] { return stop_; });
  }
}

void BuiltinNode::Stop(bool kill_tasks) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (telemetry_.joinable()) telemetry_.join();
  if (executor_) executor_->Stop(kill_tasks);
}

}  // namespace arbiter::server
