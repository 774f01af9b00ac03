// srun inside batch scripts: the real `arbiter submit` of Slurm scripts that call srun, run on the
// built-in node and on an agent, as Slurm would run them (docs/cli.md, "srun inside a batch
// script"): one node with --ntasks-per-node tasks and a GPU each, and two nodes where the script
// runs on the first and its steps on both.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <regex>
#include <set>
#include <thread>

#include "agent_process.h"
#include "local_node_cli.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class SrunTest : public LocalNodeCliTest {
 protected:
  // Submits `script` and waits for the job to end; returns its id ("" on failure).
  std::string Run(const std::string& name, const std::string& script, int timeout_s = 60) {
    WriteFile(work_.path() + "/" + name, script);
    const CliResult sub = Cli({"submit", "--parsable", name});
    EXPECT_EQ(sub.code, 0) << sub.err;
    if (sub.code != 0) return "";
    const std::string id = sub.out.substr(0, sub.out.find('\n'));
    const CliResult wait = Cli({"wait", id, "--timeout", std::to_string(timeout_s)});
    EXPECT_EQ(wait.code, 0) << wait.out << wait.err << ReadFile(work_.path() + "/" + id + ".out");
    return id;
  }
};

TEST_F(SrunTest, OneNodeRunsATaskPerGpuWithSlurmsRanks) {
  const std::string id = Run("train.sh",
                             "#!/bin/sh\n"
                             "#SBATCH -p lab-q\n"
                             "#SBATCH --gres=gpu:4\n"
                             "#SBATCH --ntasks-per-node=4\n"
                             "#SBATCH -o %j.out\n"
                             "srun -l --gpus-per-task=1 sh -c 'echo \"rank=$SLURM_PROCID "
                             "local=$SLURM_LOCALID node=$SLURM_NODEID world=$WORLD_SIZE "
                             "lr=$LOCAL_RANK cuda=$CUDA_VISIBLE_DEVICES\"'\n"
                             "srun -n 2 sh -c 'exit $((SLURM_PROCID + 4))'\n"
                             "echo \"worst=$?\"\n"
                             "srun --frobnicate true\n"
                             "echo \"usage=$?\"\n");
  ASSERT_FALSE(id.empty());
  const std::string out = ReadFile(work_.path() + "/" + id + ".out");
  std::set<std::string> gpus;
  for (int rank = 0; rank < 4; ++rank) {
    std::smatch m;
    const std::regex line(
        fmt::format("(^|\n){0}: rank={0} local={0} node=0 world=4 lr={0} "
                    "cuda=([0-3])\n",
                    rank));
    ASSERT_TRUE(std::regex_search(out, m, line)) << rank << "\n" << out;
    gpus.insert(m[2].str());
  }
  EXPECT_EQ(gpus.size(), 4u) << out;  // one GPU each, all different
  EXPECT_TRUE(Contains(out, "worst=5\n")) << out;
  EXPECT_TRUE(Contains(out, "srun: error: unknown option --frobnicate")) << out;
  EXPECT_TRUE(Contains(out, "usage=2\n")) << out;
}

// A job that sets its own PATH still finds srun first, as a Slurm node's tools are.
TEST_F(SrunTest, AJobsOwnPathKeepsSrun) {
  const std::string id = Run("path.sh",
                             "#!/bin/sh\n"
                             "#SBATCH -p lab-q -o %j.out\n"
                             "#ARBITER --env PATH=/usr/bin:/bin\n"
                             "echo \"path=$PATH\"\n"
                             "srun sh -c 'echo step=$SLURM_STEP_ID ntasks=$SLURM_NTASKS'\n");
  ASSERT_FALSE(id.empty());
  const std::string out = ReadFile(work_.path() + "/" + id + ".out");
  EXPECT_TRUE(std::regex_search(out, std::regex("path=/[^:\n]*/bin:/usr/bin:/bin\n"))) << out;
  EXPECT_TRUE(Contains(out, "step=0 ntasks=1\n")) << out;
}

TEST_F(SrunTest, TwoNodesRunTheScriptOnceAndItsStepsOnBoth) {
  auto admin = server_.Client(server_.admin_token());
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start(url_, NodeToken(*admin, "node-a"), "node-a", data_.path() + "/agent-node-a"))
      << agent.Log();
  const std::string id =
      Run("multi.sh",
          "#!/bin/sh\n"
          "#SBATCH -J multi -p lab-q -N 2 --ntasks-per-node=2 --gpus-per-node=2\n"
          "#SBATCH -o %j.out\n"
          "echo \"script procid=$SLURM_PROCID nnodes=$SLURM_NNODES\"\n"
          "srun sh -c 'echo \"rank=$SLURM_PROCID node=$SLURM_NODEID local=$SLURM_LOCALID "
          "world=$WORLD_SIZE on=$ARBITER_NODE_NAME key=${ARBITER_STEP_KEY:-none}\"'\n"
          "srun -N 2 -n 2 sh -c 'echo \"second rank=$SLURM_PROCID\"; exit $SLURM_NODEID'\n"
          "echo \"second=$?\"\n",
          90);
  ASSERT_FALSE(id.empty());
  const std::string out = ReadFile(work_.path() + "/" + id + ".out");
  // The script ran once, on the first node.
  EXPECT_EQ(std::regex_search(out, std::regex("script procid=0 nnodes=2\n")), true) << out;
  EXPECT_EQ(out.find("script procid"), out.rfind("script procid")) << out;
  // Four ranks in blocks of two per node, each node under its own name; the step key stays with
  // srun.
  std::map<int, std::string> node_of;
  for (int rank = 0; rank < 4; ++rank) {
    std::smatch m;
    const std::regex line(fmt::format("rank={} node={} local={} world=4 on=([a-z-]+) key=none\n",
                                      rank, rank / 2, rank % 2));
    ASSERT_TRUE(std::regex_search(out, m, line)) << rank << "\n" << out;
    node_of[rank / 2] = m[1].str();
  }
  EXPECT_NE(node_of[0], node_of[1]) << out;
  EXPECT_EQ((std::set<std::string>{node_of[0], node_of[1]}),
            (std::set<std::string>{"box", "node-a"}));
  EXPECT_TRUE(Contains(out, "second rank=0\n")) << out;
  EXPECT_TRUE(Contains(out, "second rank=1\n")) << out;
  EXPECT_TRUE(Contains(out, "second=1\n")) << out;  // the worst of 0 and 1
  // Both tasks ended when the script did.
  const json j = json::parse(Cli({"show", id, "-o", "json"}).out);
  EXPECT_EQ(j["state"], "succeeded") << j.dump();
}

}  // namespace
}  // namespace arbiter::testing
