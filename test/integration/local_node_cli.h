// LocalNodeCliTest: the real server with a built-in node of 4 fake GPUs, one tenant (lab, queue
// lab-q, its default, also called gpu_A100) and its member ann (uid 4243), and the real client as
// ann, run from a folder ann owns: for the tests of what a Slurm user's scripts do (srun,
// dependencies).
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "cli_process.h"
#include "cli_text.h"
#include "server_process.h"

namespace arbiter::testing {

inline constexpr const char* kLocalNodeConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: lab
    default_queue: lab-q
    queues:
      - {name: lab-q, guaranteed: {gpu: 0}, aliases: [gpu_A100]}
users:
  - {name: ann, tenant: lab, role: member, run_as: {uid: 4243}}
)";

class LocalNodeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(data_.path() + "/cluster.yaml", kLocalNodeConfig);
    ASSERT_TRUE(server_.Start(data_.path(), {"--config", data_.path() + "/cluster.yaml",
                                             "--local-node", "box", "--fake-gpus", "4"}))
        << server_.output();
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto admin = server_.Client(server_.admin_token());
    auto t =
        admin->Post("/api/v1/tokens", nlohmann::json{{"user", "ann"}}.dump(), "application/json");
    ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
    token_ = nlohmann::json::parse(t->body)["token"].get<std::string>();
    // The scripts run in the folder they were submitted from, as ann's uid.
    ASSERT_EQ(chown(work_.path().c_str(), 4243, 4243), 0);
  }

  // The client as ann, in the work folder (with `env` added to its environment).
  CliResult Cli(const std::vector<std::string>& args,
                const std::map<std::string, std::string>& env = {}) {
    CliOptions o;
    o.env = env;
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = token_;
    o.cwd = work_.path();
    return RunCli(args, o);
  }

  TempDir data_;
  TempDir home_;
  TempDir work_;
  ServerProcess server_;
  std::string url_;
  std::string token_;
};

}  // namespace arbiter::testing
