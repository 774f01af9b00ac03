// TenantServer: the real server (ServerProcess) configured with two tenants, their users, and a
// token for each, for the access, limits and events tests.
//
// Tokens by key: "admin", each user by name, "node" (a node token of the admin user for node
// agent-01) and "node@vision" (a node token of alice, a vision member, for node agent-02: a node
// token that carries a tenant).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {

// Vision: tina (tenant-admin), alice and bob (members), vic (viewer). Speech: sam (member).
// One node of 8 GPUs: jobs asking for 64 stay pending.
inline constexpr const char* kTenantConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    queues:
      - {name: vision-train, guaranteed: {gpu: 8}}
  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 8}}
users:
  - {name: tina, tenant: vision, role: tenant-admin}
  - {name: alice, tenant: vision, role: member}
  - {name: bob, tenant: vision, role: member}
  - {name: vic, tenant: vision, role: viewer}
  - {name: sam, tenant: speech, role: member}
nodes:
  - {name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, gpus: {count: 8, model: A100-80G}}
)";

inline nlohmann::json BodyJson(const httplib::Result& r) {
  if (!r) return nlohmann::json();
  return nlohmann::json::parse(r->body, nullptr, /*allow_exceptions=*/false);
}

// A job body for `queue`; 64 GPUs never fit on the one node, so the job stays pending.
inline std::string JobBody(const std::string& queue, int gpus = 64) {
  return nlohmann::json{{"queue", queue},
                        {"command", {"sleep", "1"}},
                        {"resources", {{"gpus", gpus}, {"cpu_milli", 1000}, {"memory_mib", 1024}}}}
      .dump();
}

class TenantServer {
 public:
  // Starts the server with `flags`, applies kTenantConfig and creates the tokens of `keys` (all
  // when empty).
  ::testing::AssertionResult Start(std::vector<std::string> flags = {},
                                   std::vector<std::string> keys = {}) {
    if (!server_.Start(dir_.path(), std::move(flags))) {
      return ::testing::AssertionFailure() << "the server did not start: " << server_.output();
    }
    tokens_["admin"] = server_.admin_token();
    auto admin = server_.Client(server_.admin_token());
    auto r = admin->Put("/api/v1/config", kTenantConfig, "application/yaml");
    if (!r || r->status != 200) {
      return ::testing::AssertionFailure() << "PUT /api/v1/config: " << (r ? r->body : "no reply");
    }
    if (keys.empty()) keys = {"tina", "alice", "bob", "vic", "sam", "node", "node@vision"};
    for (const std::string& key : keys) {
      nlohmann::json body = {{"user", key}};
      if (key == "node") body = {{"user", "admin"}, {"role", "node"}, {"node", "agent-01"}};
      if (key == "node@vision") {
        body = {{"user", "alice"}, {"role", "node"}, {"node", "agent-02"}};
      }
      auto t = admin->Post("/api/v1/tokens", body.dump(), "application/json");
      if (!t || t->status != 201) {
        return ::testing::AssertionFailure()
               << "POST /api/v1/tokens " << body.dump() << ": " << (t ? t->body : "no reply");
      }
      tokens_[key] = BodyJson(t)["token"].get<std::string>();
    }
    return ::testing::AssertionSuccess();
  }

  // A client with the token of `key` ("" for none).
  std::unique_ptr<httplib::Client> As(const std::string& key) const {
    return server_.Client(key.empty() ? "" : tokens_.at(key));
  }
  const std::string& token(const std::string& key) const { return tokens_.at(key); }

  // Submits JobBody(queue) as `key`; returns the id (0 on failure, with a test failure).
  uint64_t Submit(const std::string& key, const std::string& queue = "vision-train") const {
    auto r = As(key)->Post("/api/v1/jobs", JobBody(queue), "application/json");
    EXPECT_TRUE(r && r->status == 201) << key << " submit: " << (r ? r->body : "no reply");
    if (!r || r->status != 201) return 0;
    return BodyJson(r)["id"].get<uint64_t>();
  }

  ServerProcess& process() { return server_; }
  const std::string& data_dir() const { return dir_.path(); }
  int port() const { return server_.port(); }

 private:
  TempDir dir_;  // declared first: removed after the server is gone
  ServerProcess server_;
  std::map<std::string, std::string> tokens_;
};

}  // namespace arbiter::testing
