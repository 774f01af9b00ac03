// Real-world Slurm GPU batch scripts (test/fixtures/slurm-scripts, each in the shape of a public
// one: see its README.md) run unchanged under the real `arbiter submit`, on the built-in node and,
// for the multi-node ones, an agent. The programs they launch (python, torchrun, accelerate,
// deepspeed, module, conda, nvidia-smi) are recorders first on the submitter's PATH, which the job
// inherits as sbatch's do: each run appends one line with its arguments and environment, so the
// test checks what really ran, where and as which rank. srun is Arbiter's own.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "agent_process.h"
#include "local_node_cli.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Record = std::map<std::string, std::string>;  // one run of a recorded program

// Records one line per run: the program, where it ran and the environment a launcher reads.
constexpr const char* kRecorder = R"sh(#!/bin/sh
printf 'prog=%s\thost=%s\tprocid=%s\tlocalid=%s\tnodeid=%s\trank=%s\tlocal_rank=%s\tworld=%s\tcuda=%s\tname=%s\tpartition=%s\tarray=%s\targs=%s\n' \
  "$(basename "$0")" "$ARBITER_NODE_NAME" "$SLURM_PROCID" "$SLURM_LOCALID" "$SLURM_NODEID" \
  "$RANK" "$LOCAL_RANK" "$WORLD_SIZE" "$CUDA_VISIBLE_DEVICES" "$SLURM_JOB_NAME" \
  "$SLURM_JOB_PARTITION" "$SLURM_ARRAY_TASK_ID" "$*" >>"$RECORD_FILE"
)sh";
constexpr const char* kRecorded[] = {"python",    "python3", "torchrun", "accelerate",
                                     "deepspeed", "module",  "conda",    "nvidia-smi"};

// What one script must have run: `processes` runs of `program` over `nodes` nodes, in Slurm's
// block order when several (rank r on node r / per-node), each seeing `gpus_each` GPUs.
struct ScriptCase {
  std::string file;
  std::string program;
  int processes = 1;
  int nodes = 1;
  int gpus_each = 1;
  bool distinct_gpus = false;      // no two processes of a node share a GPU
  std::string name;                // SLURM_JOB_NAME
  std::string partition;           // SLURM_JOB_PARTITION
  std::vector<std::string> files;  // created in the work folder ({id}: the job's id)
  // In every run's arguments ({node}: its SLURM_NODEID; {head}: the job's first node).
  std::vector<std::string> args;
  std::vector<std::string> setup;  // programs the script ran once before, in order
  std::string output;              // in the first of `files` ({head}: the job's first node)
};

std::string Fill(std::string text, const std::string& key, const std::string& value) {
  for (size_t at; (at = text.find(key)) != std::string::npos;) text.replace(at, key.size(), value);
  return text;
}

class SlurmScriptsTest : public LocalNodeCliTest {
 protected:
  void SetUp() override {
    LocalNodeCliTest::SetUp();
    ASSERT_EQ(::chmod(bin_.path().c_str(), 0755), 0);
    WriteFile(bin_.path() + "/record", kRecorder);
    ASSERT_EQ(::chmod((bin_.path() + "/record").c_str(), 0755), 0);
    for (const char* name : kRecorded) {
      std::filesystem::create_symlink(bin_.path() + "/record", bin_.path() + "/" + name);
    }
    // sbatch, as Slurm users type it, for the pipeline that submits its own jobs.
    std::filesystem::create_symlink(ARBITER_BINARY, bin_.path() + "/sbatch");
    env_["PATH"] = bin_.path() + ":" + std::getenv("PATH");
    env_["RECORD_FILE"] = work_.path() + "/calls.log";
  }

  // Copies the fixture into the work folder unchanged.
  void Copy(const std::string& file) {
    const std::string from =
        std::string(ARBITER_SOURCE_DIR) + "/test/fixtures/slurm-scripts/" + file;
    std::filesystem::copy_file(from, work_.path() + "/" + file);
  }

  // Submits the fixture `file` as it is and waits for it; returns its id ("" on failure).
  std::string Submit(const std::string& file, int expect_exit = 0) {
    Copy(file);
    const CliResult sub = Cli({"submit", "--parsable", file}, env_);
    EXPECT_EQ(sub.code, 0) << sub.err;
    if (sub.code != 0) return "";
    const std::string id = sub.out.substr(0, sub.out.find('\n'));
    const CliResult wait = Cli({"wait", id, "--timeout", "60"}, env_);
    EXPECT_EQ(wait.code, expect_exit) << file << ": " << wait.out << wait.err
                                      << Cli({"why", id}, env_).out << Cli({"logs", id}, env_).out;
    return id;
  }

  // The runs recorded since the last call.
  std::vector<Record> TakeRecords() {
    const std::string path = work_.path() + "/calls.log";
    std::vector<Record> out;
    std::istringstream in(ReadFile(path));
    for (std::string line; std::getline(in, line);) {
      Record r;
      std::istringstream fields(line);
      for (std::string f; std::getline(fields, f, '\t');) {
        const size_t eq = f.find('=');
        r[f.substr(0, eq)] = eq == std::string::npos ? "" : f.substr(eq + 1);
      }
      out.push_back(r);
    }
    std::filesystem::remove(path);
    return out;
  }

  void Check(const ScriptCase& c, const std::string& id, const std::vector<Record>& all);

  TempDir bin_;
  std::map<std::string, std::string> env_;
};

void SlurmScriptsTest::Check(const ScriptCase& c, const std::string& id,
                             const std::vector<Record>& all) {
  std::vector<Record> runs;
  std::vector<std::string> setup;
  for (const Record& r : all) {
    if (r.at("prog") == c.program) {
      runs.push_back(r);
    } else {
      setup.push_back(r.at("prog"));
    }
  }
  EXPECT_EQ(setup, c.setup);
  ASSERT_EQ(runs.size(), static_cast<size_t>(c.processes)) << c.program;
  std::sort(runs.begin(), runs.end(),
            [](const Record& a, const Record& b) { return a.at("procid") < b.at("procid"); });
  const int per_node = c.processes / c.nodes;
  std::map<std::string, std::set<std::string>> gpus_of_node;
  std::set<std::string> hosts;
  for (int i = 0; i < c.processes; ++i) {
    const Record& r = runs[i];
    SCOPED_TRACE(fmt::format("{} run {}: {}", c.program, i, r.at("args")));
    EXPECT_EQ(r.at("procid"), std::to_string(i));
    EXPECT_EQ(r.at("rank"), std::to_string(i));
    EXPECT_EQ(r.at("world"), std::to_string(c.processes));
    EXPECT_EQ(r.at("nodeid"), std::to_string(i / per_node));
    EXPECT_EQ(r.at("localid"), std::to_string(i % per_node));
    EXPECT_EQ(r.at("local_rank"), std::to_string(i % per_node));
    EXPECT_EQ(r.at("name"), c.name);
    EXPECT_EQ(r.at("partition"), c.partition);
    const std::string& cuda = r.at("cuda");
    EXPECT_EQ(static_cast<int>(std::count(cuda.begin(), cuda.end(), ',')) + 1, c.gpus_each) << cuda;
    if (c.distinct_gpus) {
      EXPECT_TRUE(gpus_of_node[r.at("host")].insert(cuda).second) << "shared GPUs " << cuda;
    }
    for (const std::string& a : c.args) {
      const std::string want =
          Fill(Fill(a, "{node}", r.at("nodeid")), "{head}", runs[0].at("host"));
      EXPECT_TRUE(Contains(r.at("args"), want)) << want;
    }
    hosts.insert(r.at("host"));
  }
  EXPECT_EQ(hosts.size(), static_cast<size_t>(c.nodes));
  if (!c.output.empty()) {
    const std::string text = ReadFile(work_.path() + "/" + Fill(c.files.at(0), "{id}", id));
    EXPECT_TRUE(Contains(text, Fill(c.output, "{head}", runs[0].at("host")))) << text;
  }
  // The files are there, and no command of the script was missing or refused.
  for (const std::string& f : c.files) {
    const std::string path = work_.path() + "/" + Fill(f, "{id}", id);
    EXPECT_TRUE(std::filesystem::exists(path)) << f;
    const std::string text = ReadFile(path);
    EXPECT_FALSE(Contains(text, "not found")) << f << ":\n" << text;
    EXPECT_FALSE(Contains(text, "srun: error")) << f << ":\n" << text;
  }
}

// Scripts of one node: per-GPU srun, launchers started once, the default queue, whole nodes.
TEST_F(SlurmScriptsTest, OneNodeScriptsRunAsWritten) {
  const std::vector<ScriptCase> cases = {
      {.file = "ddp-srun-per-gpu.sh",
       .program = "python",
       .processes = 4,
       .distinct_gpus = true,
       .name = "ddp-per-gpu",
       .partition = "gpu_A100",
       .files = {"ddp-per-gpu-{id}.out"},
       .args = {"mnist_classify_ddp.py --epochs=2"},
       .setup = {"module", "module", "conda"},
       .output = "WORLD_SIZE=4 MASTER_ADDR=box MASTER_PORT="},
      {.file = "eval-default-queue.sh",
       .program = "python",
       .name = "eval",
       .partition = "lab-q",
       .files = {"eval-{id}.out", "eval-{id}.err"},
       .args = {"./evaluate.py --checkpoint checkpoints/last.ckpt"},
       .setup = {"nvidia-smi"},
       .output = {}},
      {.file = "torchrun-exclusive.sh",
       .program = "torchrun",
       .gpus_each = 4,
       .name = "single",
       .partition = "lab-q",
       .files = {"single-{id}.out"},
       .args = {"--standalone --nnodes=1 --nproc_per_node=4 train.py"},
       .setup = {"module", "module"},
       .output = {}},
      {.file = "deepspeed-launcher.sh",
       .program = "deepspeed",
       .gpus_each = 2,
       .name = "pretrain",
       .partition = "lab-q",
       .files = {"pretrain.out"},
       .args = {"--num_gpus=2 --master_port 29501 pretrain.py"},
       .setup = {"module", "module", "conda"},
       .output = {}},
  };
  for (const ScriptCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string id = Submit(c.file);
    ASSERT_FALSE(id.empty());
    Check(c, id, TakeRecords());
  }
}

// A sweep: one job per index, each with its own hyper-parameter and %A_%a output files.
TEST_F(SlurmScriptsTest, ArraySweepRunsOneJobPerIndex) {
  const std::string id = Submit("sweep-array.sh");
  ASSERT_FALSE(id.empty());
  const std::vector<Record> runs = TakeRecords();
  ASSERT_EQ(runs.size(), 4u);
  const char* lrs[] = {"0.001", "0.0001", "0.00001", "0.000001"};
  std::set<std::string> seen;
  for (const Record& r : runs) {
    const std::string& index = r.at("array");
    ASSERT_TRUE(seen.insert(index).second) << index;
    const int i = std::stoi(index);
    ASSERT_TRUE(i >= 0 && i < 4) << index;
    EXPECT_EQ(r.at("args"),
              fmt::format("./train.py grid --num-tasks 4 --task-id {} --lr {}", i, lrs[i]));
    EXPECT_EQ(r.at("name"), "sweep");
    EXPECT_EQ(r.at("partition"), "lab-q");
    EXPECT_EQ(r.at("cuda").size(), 1u) << r.at("cuda");
    EXPECT_EQ(ReadFile(fmt::format("{}/sweep_{}_{}.out", work_.path(), id, i)),
              fmt::format("task {} of 4 in array {}: lr={}\n", i, id, lrs[i]));
    EXPECT_TRUE(std::filesystem::exists(fmt::format("{}/sweep_{}_{}.err", work_.path(), id, i)));
  }
}

// A pipeline submitted with sbatch: fine-tuning waits for preprocessing (--dependency=afterok).
TEST_F(SlurmScriptsTest, PipelineChainsJobsWithDependencies) {
  for (const char* f : {"pipeline.sh", "preprocess.sh", "finetune.sh"}) Copy(f);
  CliOptions o;
  o.env = env_;
  o.env["HOME"] = home_.path();
  o.env["ARBITER_SERVER"] = url_;
  o.env["ARBITER_TOKEN"] = token_;
  o.cwd = work_.path();
  o.binary = "/bin/bash";
  const CliResult driver = RunCli({"pipeline.sh"}, o);
  ASSERT_EQ(driver.code, 0) << driver.out << driver.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(driver.out, m,
                                std::regex("Submitted preprocessing job: ([0-9]+)\n"
                                           "Submitted fine-tuning job: ([0-9]+) \\(waits for "
                                           "([0-9]+)\\)\n")))
      << driver.out;
  EXPECT_EQ(m[1].str(), m[3].str());
  const std::string train = m[2].str();
  const CliResult wait = Cli({"wait", train, "--timeout", "60"}, env_);
  EXPECT_EQ(wait.code, 0) << wait.out << wait.err;
  const std::vector<Record> runs = TakeRecords();
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0].at("args"), "preprocess.py --out data/tokenized");
  EXPECT_EQ(runs[0].at("name"), "preprocess");
  EXPECT_EQ(runs[0].at("cuda"), "");
  EXPECT_EQ(runs[1].at("args"), "finetune.py --data data/tokenized");
  EXPECT_EQ(runs[1].at("partition"), "gpu_A100");
  EXPECT_TRUE(std::filesystem::exists(work_.path() + "/logs_preprocess_" + m[1].str() + ".txt"));
  EXPECT_EQ(ReadFile(work_.path() + "/logs_finetune_" + train + ".txt"), "");
}

// Multi-node launchers: srun starts them on both nodes, with Slurm's ranks.
TEST_F(SlurmScriptsTest, MultiNodeScriptsRunOnBothNodes) {
  auto admin = server_.Client(server_.admin_token());
  AgentProcess agent;
  ASSERT_TRUE(
      agent.Start(url_, NodeToken(*admin, "node-a"), "node-a", data_.path() + "/agent-node-a"))
      << agent.Log();
  const std::vector<ScriptCase> cases = {
      {.file = "ddp-torchrun-multinode.sh",
       .program = "torchrun",
       .processes = 2,
       .nodes = 2,
       .name = "multinode-example",
       .partition = "gpu_A100",
       .files = {"multinode-example-{id}.out"},
       .args = {"--nnodes 2 --nproc_per_node 1 --rdzv_id", "--rdzv_endpoint 127.0.0.1:29500"},
       .setup = {},
       .output = "Node IP: 127.0.0.1\n"},
      {.file = "accelerate-multinode.sh",
       .program = "accelerate",
       .processes = 2,
       .nodes = 2,
       .gpus_each = 2,
       .name = "multinode",
       .partition = "lab-q",
       .files = {"O-multinode.{id}", "E-multinode.{id}"},
       .args = {"launch --num_processes 4 --num_machines 2 --rdzv_backend c10d "
                "--main_process_ip {head} ",
                "--main_process_port 29500 --machine_rank {node} complete_nlp_example.py "
                "--mixed_precision fp16"},
       .setup = {"module", "conda"},
       .output = {}},
      {.file = "deepspeed-srun-multinode.sh",
       .program = "python3",
       .processes = 4,
       .nodes = 2,
       .gpus_each = 2,
       .name = "deepspeed-srun-multinode.sh",
       .partition = "lab-q",
       .files = {},
       .args = {"mnist_deepspeed.py --epochs=100 --deepspeed --deepspeed_config ds_config.json"},
       .setup = {"module", "module"},
       .output = {}},
      {.file = "lightning-multinode.sh",
       .program = "python",
       .processes = 4,
       .nodes = 2,
       .gpus_each = 2,
       .name = "pytorch_lightning",
       .partition = "gpu_A100",
       .files = {"pytorch_lightning_{id}.out", "pytorch_lightning_{id}.err"},
       .args = {"train.py --num_nodes 2 --devices 2 --strategy ddp"},
       .setup = {"module", "conda"},
       .output = {}},
  };
  for (const ScriptCase& c : cases) {
    SCOPED_TRACE(c.file);
    const std::string id = Submit(c.file);
    ASSERT_FALSE(id.empty());
    Check(c, id, TakeRecords());
  }
}

}  // namespace
}  // namespace arbiter::testing
