// Job dependencies through the real client and server (docs/cli.md, "Dependencies"): a batch
// script with #SBATCH --dependency waits with a verdict naming the job, runs once that job has
// succeeded, and a job whose dependency failed ends with that reason, as Slurm's
// kill_invalid_depend.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <string>

#include "local_node_cli.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class DependencyTest : public LocalNodeCliTest {
 protected:
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
