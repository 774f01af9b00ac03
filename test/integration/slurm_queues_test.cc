// Scripts as Slurm users write them, as far as queues go: no partition at all (the tenant's
// default_queue), and partition names in Slurm's spelling (gpu_A100), a configured alias.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>

#include "local_node_cli.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class SlurmQueuesTest : public LocalNodeCliTest {
 protected:
  // Submits `script` as `name` with `flags`, waits for it; the job's id ("" on failure).
  std::string Run(const std::string& name, const std::string& script,
                  std::vector<std::string> flags = {}) {
    WriteFile(work_.path() + "/" + name, script);
    std::vector<std::string> args = {"submit", "--parsable"};
    args.insert(args.end(), flags.begin(), flags.end());
    args.push_back(name);
    const CliResult sub = Cli(args);
    EXPECT_EQ(sub.code, 0) << sub.err;
    if (sub.code != 0) return "";
    const std::string id = sub.out.substr(0, sub.out.find('\n'));
    const CliResult wait = Cli({"wait", id, "--timeout", "60"});
    EXPECT_EQ(wait.code, 0) << wait.out << wait.err;
    return id;
  }

  json Job(const std::string& id) {
    const CliResult r = Cli({"show", id, "-o", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return ParseOrNull(r.out);
  }
};

TEST_F(SlurmQueuesTest, AScriptWithoutAPartitionRunsInTheTenantsDefaultQueue) {
  const std::string id = Run("nopart.sh",
                             "#!/bin/sh\n"
                             "#SBATCH -J nopart -o %j.out\n"
                             "#SBATCH --gres=gpu:1\n"
                             "echo \"partition=$SLURM_JOB_PARTITION\"\n");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Job(id)["queue"], "lab-q");
  EXPECT_EQ(ReadFile(work_.path() + "/" + id + ".out"), "partition=lab-q\n");
}

TEST_F(SlurmQueuesTest, SlurmPartitionNamesFindTheirQueue) {
  const std::string id = Run("alias.sh",
                             "#!/bin/sh\n"
                             "#SBATCH --partition=gpu_A100 -o %j.out\n"
                             "echo \"partition=$SLURM_JOB_PARTITION\"\n");
  ASSERT_FALSE(id.empty());
  EXPECT_EQ(Job(id)["queue"], "lab-q");
  // The script sees the partition it asked for, as under Slurm.
  EXPECT_EQ(ReadFile(work_.path() + "/" + id + ".out"), "partition=gpu_A100\n");
  // Another case, and the queue flag: the same queue.
  const std::string other = Run("upper.sh", "#!/bin/sh\ntrue\n", {"--queue", "GPU_a100"});
  ASSERT_FALSE(other.empty());
  EXPECT_EQ(Job(other)["queue"], "lab-q");
  // An unknown partition is an error naming the queues the user may use.
  WriteFile(work_.path() + "/bad.sh", "#!/bin/sh\n#SBATCH -p gpu_h100\ntrue\n");
  const CliResult bad = Cli({"submit", "bad.sh"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_TRUE(Contains(bad.err, "queue gpu_h100 not found; queues you can use: lab-q")) << bad.err;
}

TEST_F(SlurmQueuesTest, ADryRunWithoutAPartitionWorksOfflineAndSaysWhatItWouldUse) {
  WriteFile(work_.path() + "/nopart.sh", "#!/bin/sh\n#SBATCH --gres=gpu:1\ntrue\n");
  CliOptions o;
  o.env["HOME"] = home_.path();
  o.env["ARBITER_SERVER"] = "http://127.0.0.1:1";  // nothing listens there
  o.cwd = work_.path();
  const CliResult r = RunCli({"submit", "--dry-run", "-o", "json", "nopart.sh"}, o);
  ASSERT_EQ(r.code, 0) << r.err;
  const json body = ParseOrNull(r.out);
  ASSERT_TRUE(body.is_object()) << r.out;
  EXPECT_FALSE(body.contains("queue")) << r.out;
  EXPECT_TRUE(Contains(r.err, "no queue given: the server would use your tenant's default_queue"))
      << r.err;
}

// scancel -p takes a queue's Slurm name as submissions do; an unknown one is an error, not a quiet
// "nothing cancelled".
TEST_F(SlurmQueuesTest, ScancelByPartitionTakesTheSlurmName) {
  const CliResult sub = Cli({"submit", "--parsable", "--queue", "gpu_A100", "--", "sleep", "60"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  const CliResult cancel = Cli({"scancel", "-p", "GPU_A100"});
  EXPECT_EQ(cancel.code, 0) << cancel.err;
  const CliResult wait = Cli({"wait", id, "--timeout", "60"});
  EXPECT_NE(wait.code, 0);
  EXPECT_EQ(Job(id)["state"], "cancelled");
  const CliResult bad = Cli({"scancel", "-p", "gpu_h100"});
  EXPECT_EQ(bad.code, 1) << bad.err;
  EXPECT_TRUE(Contains(bad.err, "gpu_h100 not found")) << bad.err;
}

}  // namespace
}  // namespace arbiter::testing
