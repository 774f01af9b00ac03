// `arbiter bench e2e` end to end at a small scale: it starts its own server and agents, runs the
// mix to completion, reports the figures, and leaves nothing behind.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

TEST(BenchE2eTest, RunsTheMixOnRealAgentsAndReportsPacking) {
  const std::string tmp =
      (std::filesystem::temp_directory_path() / "bench-e2e-test-XXXXXX").string();
  std::string dir = tmp;
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::filesystem::permissions(dir, std::filesystem::perms(0711));  // tasks pass through
  CliOptions o;
  o.env = {{"TMPDIR", dir}};
  o.timeout_s = 120;
  const CliResult r = RunCli({"bench", "e2e", "--agents", "2", "--gpus-per-agent", "8", "--jobs",
                              "24", "--job-seconds", "0.2", "--heartbeat-ms", "500", "--json"},
                             o);
  ASSERT_EQ(r.code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["jobs"], 24);
  EXPECT_EQ(out["succeeded"], 24);
  // The same mix as the Slurm comparison: its first 24 sizes add up to 85 GPUs of 0.2 s on 16.
  EXPECT_NEAR(out["ideal_s"].get<double>(), 85 * 0.2 / 16, 1e-9);
  EXPECT_GE(out["makespan_s"].get<double>(), out["ideal_s"].get<double>());
  EXPECT_GT(out["packing_efficiency"].get<double>(), 0);
  EXPECT_LE(out["packing_efficiency"].get<double>(), 1);
  for (const char* size : {"1", "2", "4", "8"}) {
    ASSERT_TRUE(out["wait_s_by_gpus"].contains(size)) << out.dump();
    EXPECT_GE(out["wait_s_by_gpus"][size]["p50"].get<double>(), 0);
  }
  // Its temporary folder (store, logs, agents' work folders) is gone.
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  // Too few GPUs per agent for the mix's 8-GPU jobs: refused before anything starts.
  const CliResult small = RunCli({"bench", "e2e", "--agents", "2", "--gpus-per-agent", "4"}, o);
  EXPECT_EQ(small.code, 2);
  EXPECT_NE(small.err.find("--gpus-per-agent must be at least 8"), std::string::npos) << small.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace arbiter::testing
