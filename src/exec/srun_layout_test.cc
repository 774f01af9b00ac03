#include "exec/srun_layout.h"

#include <gtest/gtest.h>

namespace arbiter::exec {
namespace {

SrunRequest Parse(const std::vector<std::string>& args) {
  SrunRequest r;
  const std::string e = ParseSrunArgs(args, &r);
  EXPECT_EQ(e, "") << args.front();
  return r;
}

TEST(SrunArgs, OptionsEndAtTheCommand) {
  SrunRequest r = Parse({"--ntasks-per-node=4", "-l", "--gpus-per-task", "1", "--mpi=pmix",
                         "python", "train.py", "-n", "3"});
  EXPECT_EQ(r.ntasks_per_node, 4);
  EXPECT_TRUE(r.label);
  EXPECT_EQ(r.gpus_per_task, 1);
  EXPECT_EQ(r.argv, (std::vector<std::string>{"python", "train.py", "-n", "3"}));
  EXPECT_EQ(r.ignored, (std::vector<std::string>{"--mpi=pmix"}));
  r = Parse({"-n4", "-N", "2", "-D", "/data", "--", "-weird-program"});
  EXPECT_EQ(r.ntasks, 4);
  EXPECT_EQ(r.nodes, 2);
  EXPECT_EQ(r.chdir, "/data");
  EXPECT_EQ(r.argv, (std::vector<std::string>{"-weird-program"}));
  r = Parse({"-lN1", "--gpu-bind=verbose,closest", "--kill-on-bad-exit", "hostname"});
  EXPECT_EQ(r.nodes, 1);
  EXPECT_EQ(r.gpu_bind, "closest");
  EXPECT_EQ(r.argv, (std::vector<std::string>{"hostname"}));
}

TEST(SrunArgs, MistakesNameTheFlag) {
  SrunRequest r;
  EXPECT_NE(ParseSrunArgs({"--ntasks=zero", "x"}, &r).find("--ntasks=zero"), std::string::npos);
  EXPECT_NE(ParseSrunArgs({"--frobnicate", "x"}, &r).find("unknown option --frobnicate"),
            std::string::npos);
  EXPECT_NE(ParseSrunArgs({"-n", "2"}, &r).find("no command"), std::string::npos);
  EXPECT_NE(ParseSrunArgs({"--multi-prog", "x"}, &r).find("not supported"), std::string::npos);
  EXPECT_NE(ParseSrunArgs({"--gpu-bind=sideways", "x"}, &r).find("--gpu-bind=sideways"),
            std::string::npos);
}

// A batch script's --gpus-per-task (SLURM_GPUS_PER_TASK) is its steps' default, as Slurm's.
TEST(SrunArgs, JobGpusPerTaskIsTheStepsDefault) {
  SrunRequest r = Parse({"python", "train.py"});
  EXPECT_EQ(ApplyJobGpusPerTask("1", &r), "");
  EXPECT_EQ(r.gpus_per_task, 1);
  r = Parse({"python"});
  EXPECT_EQ(ApplyJobGpusPerTask("a100:2", &r), "");
  EXPECT_EQ(r.gpus_per_task, 2);
  r = Parse({"python"});
  EXPECT_EQ(ApplyJobGpusPerTask("", &r), "");
  EXPECT_EQ(r.gpus_per_task, 0);
  // The step's own flags win.
  r = Parse({"--gpus-per-task=2", "python"});
  EXPECT_EQ(ApplyJobGpusPerTask("1", &r), "");
  EXPECT_EQ(r.gpus_per_task, 2);
  r = Parse({"--gpu-bind=none", "python"});
  EXPECT_EQ(ApplyJobGpusPerTask("1", &r), "");
  EXPECT_EQ(r.gpus_per_task, 0);
  r = Parse({"python"});
  EXPECT_NE(ApplyJobGpusPerTask("many", &r).find("SLURM_GPUS_PER_TASK=many"), std::string::npos);
}

// The other nodes' tasks get what the script exported, and keep what is their node's.
TEST(SrunEnv, OtherNodesGetTheScriptsEnvironment) {
  const std::map<std::string, std::string> caller = {{"LAUNCHER", "accelerate launch"},
                                                     {"MASTER_ADDR", "gpu-01"},
                                                     {"PATH", "/env/bin:/usr/bin"},
                                                     {"CUDA_VISIBLE_DEVICES", "0,1"},
                                                     {"SLURM_NODEID", "0"},
                                                     {"ARBITER_NODE_NAME", "gpu-01"},
                                                     {"HOME", "/w/1"}};
  const std::map<std::string, std::string> node = {{"MASTER_ADDR", "old"},
                                                   {"PATH", "/usr/bin"},
                                                   {"CUDA_VISIBLE_DEVICES", "2,3"},
                                                   {"SLURM_NODEID", "1"},
                                                   {"ARBITER_NODE_NAME", "gpu-02"},
                                                   {"ARBITER_STEP_KEY", "k"},
                                                   {"HOME", "/w/2"}};
  const std::map<std::string, std::string> want = {
      {"LAUNCHER", "accelerate launch"}, {"MASTER_ADDR", "gpu-01"}, {"PATH", "/env/bin:/usr/bin"},
      {"CUDA_VISIBLE_DEVICES", "2,3"},   {"SLURM_NODEID", "1"},     {"ARBITER_NODE_NAME", "gpu-02"},
      {"ARBITER_STEP_KEY", "k"},         {"HOME", "/w/2"}};
  EXPECT_EQ(StepEnv(caller, node), want);
  EXPECT_TRUE(IsNodeEnv("ARBITER_TASK_INDEX"));
  EXPECT_FALSE(IsNodeEnv("NCCL_DEBUG"));
}

TEST(Scontrol, ShowHostnamesExpandsSlurmsLists) {
  std::vector<std::string> names;
  EXPECT_EQ(ExpandHostnames("gpu-[01-03,10],cpu1,r[1-2]-n[8-9]", &names), "");
  EXPECT_EQ(names, (std::vector<std::string>{"gpu-01", "gpu-02", "gpu-03", "gpu-10", "cpu1",
                                             "r1-n8", "r1-n9", "r2-n8", "r2-n9"}));
  for (const char* bad : {"gpu-[3-1]", "gpu-[01", "gpu-]", "n[x]", "n[]"}) {
    EXPECT_NE(ExpandHostnames(bad, &names), "") << bad;
  }
  std::string out, err;
  EXPECT_EQ(Scontrol({"show", "hostnames"}, "box,node-a", &out, &err), 0);
  EXPECT_EQ(out, "box\nnode-a\n");
  out.clear();
  EXPECT_EQ(Scontrol({"show", "hostname", "n[1-2]"}, "", &out, &err), 0);
  EXPECT_EQ(out, "n1\nn2\n");
  EXPECT_EQ(Scontrol({"show", "hostnames"}, "", &out, &err), 1);
  EXPECT_NE(err.find("SLURM_JOB_NODELIST"), std::string::npos);
  EXPECT_EQ(Scontrol({"requeue", "12"}, "box", &out, &err), 1);
  EXPECT_NE(err.find("scontrol show hostnames"), std::string::npos);
}

TEST(SrunLayout, AsSlurmDistributesInBlocks) {
  StepLayout l;
  // The batch script's --ntasks-per-node, on 2 nodes.
  ASSERT_EQ(Layout(Parse({"x"}), 2, 4, 8, &l), "");
  EXPECT_EQ(l.nodes, 2);
  EXPECT_EQ(l.per_node, 4);
  EXPECT_EQ(l.ntasks, 8);
  EXPECT_EQ(l.RanksOn(1), (std::vector<int>{4, 5, 6, 7}));
  // -n 6 over 2 nodes: 3 each; -n 5: 3 and 2.
  ASSERT_EQ(Layout(Parse({"-n", "5", "x"}), 2, 0, 0, &l), "");
  EXPECT_EQ(l.per_node, 3);
  EXPECT_EQ(l.RanksOn(0), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(l.RanksOn(1), (std::vector<int>{3, 4}));
  // -n 2 alone in a 4-node job: as few nodes as needed.
  ASSERT_EQ(Layout(Parse({"-n", "2", "x"}), 4, 0, 0, &l), "");
  EXPECT_EQ(l.nodes, 2);
  // Nothing said: one per node.
  ASSERT_EQ(Layout(Parse({"x"}), 3, 0, 0, &l), "");
  EXPECT_EQ(l.ntasks, 3);
  EXPECT_EQ(l.per_node, 1);
  // More than the allocation.
  EXPECT_NE(Layout(Parse({"-N", "3", "x"}), 2, 0, 0, &l).find("the job has 2 nodes"),
            std::string::npos);
  EXPECT_NE(Layout(Parse({"-n", "9", "--ntasks-per-node", "4", "x"}), 2, 0, 0, &l).find("needs 3"),
            std::string::npos);
}

TEST(SrunGpus, SplitAsSlurmBindsThem) {
  const std::vector<std::string> gpus = {"0", "1", "2", "3"};
  std::vector<std::string> mine;
  ASSERT_EQ(TaskGpus(Parse({"x"}), gpus, 1, 4, &mine), "");
  EXPECT_EQ(mine, gpus);  // srun's default: every task sees the node's GPUs
  ASSERT_EQ(TaskGpus(Parse({"--gpus-per-task=2", "x"}), gpus, 1, 2, &mine), "");
  EXPECT_EQ(mine, (std::vector<std::string>{"2", "3"}));
  ASSERT_EQ(TaskGpus(Parse({"--gpu-bind=closest", "x"}), gpus, 3, 4, &mine), "");
  EXPECT_EQ(mine, (std::vector<std::string>{"3"}));
  ASSERT_EQ(TaskGpus(Parse({"--gpu-bind=map_gpu:3,2", "x"}), gpus, 1, 2, &mine), "");
  EXPECT_EQ(mine, (std::vector<std::string>{"2"}));
  ASSERT_EQ(TaskGpus(Parse({"--gpu-bind=single:1", "x"}), gpus, 2, 4, &mine), "");
  EXPECT_EQ(mine, (std::vector<std::string>{"2"}));
  EXPECT_NE(TaskGpus(Parse({"--gpus-per-task=2", "x"}), gpus, 2, 3, &mine).find("needs 6 GPUs"),
            std::string::npos);
}

TEST(SrunEnv, RanksCountsAndGpus) {
  StepLayout l;
  l.nodes = 2;
  l.per_node = 4;
  l.ntasks = 8;
  auto env = TaskEnv(l, 1, 6, 2, {"2"}, 3);
  EXPECT_EQ(env["SLURM_PROCID"], "6");
  EXPECT_EQ(env["RANK"], "6");
  EXPECT_EQ(env["SLURM_LOCALID"], "2");
  EXPECT_EQ(env["LOCAL_RANK"], "2");
  EXPECT_EQ(env["SLURM_NODEID"], "1");
  EXPECT_EQ(env["WORLD_SIZE"], "8");
  EXPECT_EQ(env["SLURM_NTASKS"], "8");
  EXPECT_EQ(env["LOCAL_WORLD_SIZE"], "4");
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "2");
  EXPECT_EQ(env["SLURM_STEP_ID"], "3");
}

}  // namespace
}  // namespace arbiter::exec
