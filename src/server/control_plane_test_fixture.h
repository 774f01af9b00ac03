// For the control plane's unit tests: a ControlPlane on a real SQLite store in a temporary folder
// with a fake clock, a configuration applied, and the calls an agent's node makes.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "api/config_codec.h"
#include "api/job_codec.h"
#include "server/control_plane.h"
#include "store/sqlite/sqlite_store.h"

namespace arbiter::server {

class ControlPlaneTest : public ::testing::Test {
 protected:
  // Call from SetUp: the store, a control plane over it, then `config` (YAML) applied.
  void StartWith(const char* config, const char* folder_prefix) {
    std::string tmpl =
        (std::filesystem::temp_directory_path() / (std::string(folder_prefix) + "-XXXXXX"))
            .string();
    dir_ = mkdtemp(tmpl.data());
    auto store = store::OpenSqliteStore(dir_ + "/arbiter.db");
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    store_ = std::move(store).value();
    Start();
    auto parsed = api::ParseConfigYaml(config);
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    ASSERT_TRUE(cp_->ApplyConfig(admin_, *parsed, false).ok());
  }
  void TearDown() override {
    cp_.reset();
    if (store_) store_->Close();
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  // A fresh control plane over the same store: what a server restart sees.
  void Start() {
    cp_ = std::make_unique<ControlPlane>(store_.get(), [this] { return now_; });
    ASSERT_TRUE(cp_->Load().ok());
  }

  // An agent registers node `name` with `gpus` healthy GPUs.
  void Register(const std::string& name, const std::string& instance, int gpus = 4) {
    AgentRegistration r;
    r.node.name = name;
    r.node.cpu_milli = 32000;
    r.node.memory_mib = 65536;
    for (int g = 0; g < gpus; ++g) r.node.gpus.push_back({g, "", 0, true, 0});
    r.instance = instance;
    r.log_port = 4000;
    r.log_token = "t";
    auto out = cp_->RegisterAgent(NodeToken(name), r, "10.0.0.9");
    ASSERT_TRUE(out.ok()) << out.status().ToString();
  }

  // Submits `body` as the admin (queue lab-q and command ["true"] unless it has them).
  uint64_t Submit(nlohmann::json body) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    if (!body.contains("command")) body["command"] = {"true"};
    auto spec = api::ParseJobSubmission(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    if (!spec.ok()) return 0;
    bool created = false;
    auto r = cp_->SubmitJob(admin_, std::move(spec).value(), "", &created);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? r->id : 0;
  }

  // A heartbeat of node `name`'s agent; its answer.
  nlohmann::json Beat(const std::string& name, const std::string& instance,
                      std::vector<TaskReport> reports = {}, std::vector<GpuTelemetry> gpus = {}) {
    AgentHeartbeat hb{name, instance, std::move(gpus), std::move(reports)};
    auto r = cp_->Heartbeat(NodeToken(name), hb);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : nlohmann::json();
  }

  // The principal of a node token made for node `name`.
  Principal NodeToken(const std::string& name) const {
    Principal p = node_;
    p.node = name;
    return p;
  }

  std::string State(uint64_t id) { return (*cp_->GetJob(admin_, id))["state"]; }

  std::string dir_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<ControlPlane> cp_;
  TimeMs now_ = 1'700'000'000'000;
  Principal admin_{"admin", "", Role::kAdmin, "a"};
  Principal node_{"admin", "", Role::kNode, "n", "gpu-01"};  // a node token for gpu-01
};

}  // namespace arbiter::server
