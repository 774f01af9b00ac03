// Job dependencies through the real client and server (docs/cli.md, "Dependencies"): a batch
// script with #SBATCH --dependency waits with a verdict naming the job, runs once that job has
// succeeded, and a job whose dependency failed ends with that reason, as Slurm's
// kill_invalid_depend.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "cli_process.h"
#include "cli_text.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 0}}
users:
  - {name: ann, tenant: lab, role: member, run_as: {uid: 4243}}
)";

class DependencyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(data_.path() + "/cluster.yaml", kConfig);
    ASSERT_TRUE(server_.Start(data_.path(), {"--config", data_.path() + "/cluster.yaml",
                                             "--local-node", "box", "--fake-gpus", "4"}))
        << server_.output();
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto admin = server_.Client(server_.admin_token());
    auto t = admin->Post("/api/v1/tokens", json{{"user", "ann"}}.dump(), "application/json");
    ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
    token_ = json::parse(t->body)["token"].get<std::string>();
    ASSERT_EQ(chown(work_.path().c_str(), 4243, 4243), 0);
  }

  CliResult Cli(const std::vector<std::string>& args) {
    CliOptions o;
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = token_;
    o.cwd = work_.path();
    return RunCli(args, o);
  }

  std::string Submit(const std::vector<std::string>& args) {
    std::vector<std::string> all = {"submit", "--parsable"};
    all.insert(all.end(), args.begin(), args.end());
    const CliResult r = Cli(all);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.out.substr(0, r.out.find('\n'));
  }

  json Job(const std::string& id) {
    const CliResult r = Cli({"show", id, "-o", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return ParseOrNull(r.out);
  }

  TempDir data_;
  TempDir home_;
  TempDir work_;
  ServerProcess server_;
  std::string url_;
  std::string token_;
};

TEST_F(DependencyTest, AScriptWaitsForItsDependencyThenRuns) {
  // The first job holds until its file appears, so that the second is seen waiting.
  const std::string gate = work_.path() + "/go";
  const std::string first = Submit(
      {"--queue", "lab-q", "--name", "prep", "--", "sh", "-c",
       fmt::format("for i in $(seq 600); do [ -e {} ] && exit 0; sleep 0.05; done; exit 9", gate)});
  ASSERT_FALSE(first.empty());
  WriteFile(work_.path() + "/train.sh", fmt::format("#!/bin/sh\n"
                                                    "#SBATCH -p lab-q -o %j.out\n"
                                                    "#SBATCH --dependency=afterok:{}\n"
                                                    "echo trained\n",
                                                    first));
  const std::string second = Submit({"train.sh"});
  ASSERT_FALSE(second.empty());
  // Waiting, and saying for which job: in the API and in `arbiter show`.
  json j;
  for (int i = 0; i < 200; ++i) {
    j = Job(second);
    if (j.contains("pending") && j["pending"].is_object() &&
        Contains(j["pending"].value("message", ""), "(running)")) {
      break;
    }
    usleep(50 * 1000);
  }
  ASSERT_TRUE(j.contains("pending")) << j.dump();
  EXPECT_EQ(j["pending"]["code"], "Dependency") << j.dump();
  EXPECT_EQ(j["pending"]["message"],
            fmt::format("waiting for job {} (running) to succeed (afterok:{})", first, first))
      << j.dump();
  const CliResult show = Cli({"show", second});
  EXPECT_TRUE(Contains(show.out, fmt::format("Depends on:  afterok:{}\n", first))) << show.out;
  EXPECT_TRUE(Contains(show.out, "Waiting:     Dependency: waiting for job")) << show.out;
  WriteFile(gate, "");
  const CliResult wait = Cli({"wait", second, "--timeout", "60"});
  EXPECT_EQ(wait.code, 0) << wait.out << wait.err;
  EXPECT_EQ(ReadFile(work_.path() + "/" + second + ".out"), "trained\n");
}

TEST_F(DependencyTest, AFailedDependencyEndsTheDependentJob) {
  const std::string failing = Submit({"--queue", "lab-q", "--", "sh", "-c", "exit 3"});
  const std::string after_ok =
      Submit({"--queue", "lab-q", "--dependency", "afterok:" + failing, "--", "true"});
  const std::string after_not_ok =
      Submit({"--queue", "lab-q", "--dependency", "afternotok:" + failing, "--", "true"});
  const CliResult wait = Cli({"wait", after_ok, after_not_ok, "--timeout", "60"});
  const json ok = Job(after_ok);
  EXPECT_EQ(ok["state"], "cancelled") << ok.dump();
  EXPECT_EQ(ok["reason"],
            fmt::format("dependency never satisfied: job {} failed (afterok:{})", failing, failing))
      << ok.dump();
  EXPECT_EQ(Job(after_not_ok)["state"], "succeeded");
  // A job that does not exist is refused at once (the API names the field depends_on[0].job).
  const CliResult missing =
      Cli({"submit", "--queue", "lab-q", "--dependency", "afterok:9999", "--", "true"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "error: job 9999 not found\n");
  // And a mistake in the flag before anything is sent.
  const CliResult bad =
      Cli({"submit", "--queue", "lab-q", "--dependency", "afterok:1?afterok:2", "--", "true"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "'?' (any one of) is not supported")) << bad.err;
}

}  // namespace
}  // namespace arbiter::testing
