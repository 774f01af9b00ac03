// The #SBATCH reader and the job it makes: time and memory formats, directive syntax, the
// node/task/GPU arithmetic, unsupported directives, the wrapper command.
#include "cli/sbatch.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace arbiter::cli {
namespace {

TEST(SlurmTime, EveryFormat) {
  struct Case {
    const char* text;
    int64_t seconds;
  };
  for (const Case& c :
       {Case{"90", 90 * 60}, Case{"45", 45 * 60}, Case{"5:30", 5 * 60 + 30}, Case{"2:30:00", 9000},
        Case{"1-12", 36 * 3600}, Case{"0-0:45", 45 * 60}, Case{"1-2:03", 86400 + 2 * 3600 + 3 * 60},
        Case{"2-00:00:30", 2 * 86400 + 30}, Case{"0", 0}, Case{"UNLIMITED", 0}, Case{"infinite", 0},
        Case{" 10 ", 600}}) {
    auto r = ParseSlurmTime(c.text);
    ASSERT_TRUE(r.ok()) << c.text << ": " << r.status().ToString();
    EXPECT_EQ(*r, c.seconds) << c.text;
  }
}

TEST(SlurmTime, RefusesWhatSlurmRefuses) {
  for (const char* bad : {"", "1:2:3:4", "1h", "-5", "a-1", "1-", "1-2:3:4:5", "1.5", "367-0"}) {
    auto r = ParseSlurmTime(bad);
    EXPECT_FALSE(r.ok()) << bad;
  }
  EXPECT_NE(ParseSlurmTime("1h").status().message().find("D-H:M:S"), std::string::npos);
}

TEST(Durations, UnitsAndSlurmForms) {
  EXPECT_EQ(*ParseDuration("2h"), 7200);
  EXPECT_EQ(*ParseDuration("1h30m"), 5400);
  EXPECT_EQ(*ParseDuration("90s"), 90);
  EXPECT_EQ(*ParseDuration("1d12h"), 36 * 3600);
  EXPECT_EQ(*ParseDuration("2:30:00"), 9000);
  EXPECT_EQ(*ParseDuration("90"), 5400);  // Slurm minutes
  EXPECT_FALSE(ParseDuration("2x").ok());
  EXPECT_FALSE(ParseDuration("h").ok());
}

TEST(SlurmDependency, SlurmsFormsAndWhatIsNotSupported) {
  using T = DependencyType;
  auto d = ParseSlurmDependency("afterok:12:13,afterany:14,singleton,AFTERNOTOK:15,after:16");
  ASSERT_TRUE(d.ok()) << d.status().ToString();
  EXPECT_EQ(*d, (std::vector<Dependency>{{T::kAfterOk, 12},
                                         {T::kAfterOk, 13},
                                         {T::kAfterAny, 14},
                                         {T::kSingleton, 0},
                                         {T::kAfterNotOk, 15},
                                         {T::kAfter, 16}}));
  auto any = ParseSlurmDependency("afterok:1?afterok:2");
  ASSERT_FALSE(any.ok());
  EXPECT_NE(any.status().message().find("'?' (any one of) is not supported"), std::string::npos);
  EXPECT_NE(ParseSlurmDependency("after:12+30").status().message().find("delay"),
            std::string::npos);
  EXPECT_NE(ParseSlurmDependency("aftercorr:12").status().message().find("unknown type"),
            std::string::npos);
  EXPECT_NE(ParseSlurmDependency("afterok").status().message().find("needs job ids"),
            std::string::npos);
  EXPECT_NE(ParseSlurmDependency("afterok:12_3").status().message().find("'12_3' is not a job id"),
            std::string::npos);
  EXPECT_EQ(ParseSlurmDependency("afterok:12").status().field(), "");
  EXPECT_EQ(ParseSlurmDependency("afterok:x").status().field(), "dependency");
  // In a script, with the line named.
  auto script = ParseBatchScript("#!/bin/sh\n#SBATCH -d afterok:7 -p q\ntrue\n");
  ASSERT_TRUE(script.ok()) << script.status().ToString();
  EXPECT_EQ(script->slurm.dependency, (std::vector<Dependency>{{T::kAfterOk, 7}}));
  auto bad = ParseBatchScript("#!/bin/sh\n#SBATCH --dependency=afterok:x\ntrue\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
}

TEST(SlurmMemory, Units) {
  EXPECT_EQ(*ParseSlurmMemory("64G"), 65536);
  EXPECT_EQ(*ParseSlurmMemory("64GB"), 65536);
  EXPECT_EQ(*ParseSlurmMemory("500"), 500);
  EXPECT_EQ(*ParseSlurmMemory("500M"), 500);
  EXPECT_EQ(*ParseSlurmMemory("1T"), 1048576);
  EXPECT_EQ(*ParseSlurmMemory("2048K"), 2);
  EXPECT_EQ(*ParseSlurmMemory("1k"), 1);  // rounded up
  EXPECT_FALSE(ParseSlurmMemory("1.5G").ok());
  EXPECT_FALSE(ParseSlurmMemory("lots").ok());
  EXPECT_FALSE(ParseSlurmMemory("5P").ok());
}

TEST(Words, QuotingAndComments) {
  auto w = SplitWords(R"( --job-name="my job" -p 'gpu q' a\ b  # a comment "unclosed)");
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(*w, (std::vector<std::string>{"--job-name=my job", "-p", "gpu q", "a b"}));
  auto image = SplitWords(" --container-image=nvcr.io#nvidia/pytorch:24.01-py3 #x");
  EXPECT_EQ(*image,
            (std::vector<std::string>{"--container-image=nvcr.io#nvidia/pytorch:24.01-py3"}));
  EXPECT_FALSE(SplitWords("--job-name=\"open").ok());
  EXPECT_FALSE(SplitWords("-J 'open").ok());
}

TEST(Script, DirectiveSyntaxes) {
  auto s = ParseBatchScript(
      "#!/bin/bash -l\n"
      "#SBATCH -J first\n"
      "#SBATCH --job-name=train   # the later one wins\n"
      "#SBATCH -N2 -n 16\n"
      "#SBATCH --ntasks-per-node 8\n"
      "#SBATCH -p gpu\n"
      "#SBATCH --gres=gpu:a100:8\n"
      "#SBATCH -t 1-12\n"
      "#SBATCH -c4\n"
      "#SBATCH --mem=64G\n"
      "\n"
      "# SBATCH --nodes=99   (a disabled directive: a plain comment)\n"
      "#ARBITER --type fine-tuning --retries 2\n"
      "set -e\n"
      "#SBATCH --nodes=5\n"
      "srun python train.py\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->interpreter, "/bin/bash -l");
  const SlurmDirectives& d = s->slurm;
  EXPECT_EQ(d.job_name, "train");
  EXPECT_EQ(d.nodes, 2);
  EXPECT_EQ(d.ntasks, 16);
  EXPECT_EQ(d.ntasks_per_node, 8);
  EXPECT_EQ(d.partition, "gpu");
  EXPECT_EQ(d.gres_gpu, (GpuRequest{"a100", 8}));
  EXPECT_EQ(d.time_seconds, 36 * 3600);
  EXPECT_EQ(d.cpus_per_task, 4);
  EXPECT_EQ(d.mem_mib, 65536);
  EXPECT_EQ(s->arbiter_args, (std::vector<std::string>{"--type", "fine-tuning", "--retries", "2"}));
  ASSERT_EQ(s->notes.size(), 1u);  // the #SBATCH after `set -e` (srun runs as in Slurm)
  EXPECT_NE(s->notes[0].find("line 15"), std::string::npos) << s->notes[0];
  EXPECT_TRUE(s->unsupported.empty());
}

TEST(Script, UnsupportedDirectivesAreNamedWithTheirLines) {
  auto s = ParseBatchScript(
      "#!/bin/sh\n"
      "#SBATCH --mail-type=END --hold\n"
      "#SBATCH --mail-user alice@example.com --exclusive --licenses=matlab:2\n"
      "#SBATCH -w gpu-[07-08] --gres=gpu:2,nvme:1\n"
      "#SBATCH --dependency=afterok:10\n"
      "echo hi\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  EXPECT_EQ(s->unsupported,
            (std::vector<std::string>{"--hold (line 2)", "--licenses=matlab:2 (line 3)",
                                      "--gres=nvme:1 (line 4)"}));
  // Supported: mail settings, whole nodes, node lists.
  EXPECT_EQ(s->slurm.mail_type, "END");
  EXPECT_EQ(s->slurm.mail_user, "alice@example.com");
  EXPECT_EQ(s->slurm.exclusive, true);
  EXPECT_EQ(s->slurm.nodelist, (std::vector<std::string>{"gpu-07", "gpu-08"}));
  EXPECT_EQ(s->slurm.gres_gpu, (GpuRequest{"", 2}));
  EXPECT_EQ(s->slurm.dependency,  // supported
            (std::vector<Dependency>{{DependencyType::kAfterOk, 10}}));
}

TEST(Script, ErrorsNameTheLineAndTheDirective) {
  auto s = ParseBatchScript("#!/bin/sh\n#SBATCH --nodes=two\n");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("line 2"), std::string::npos) << s.status().message();
  EXPECT_NE(s.status().message().find("--nodes=two"), std::string::npos);
  auto t = ParseBatchScript("#SBATCH -t 1h\n");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("line 1"), std::string::npos);
  auto v = ParseBatchScript("#SBATCH -J\n");
  ASSERT_FALSE(v.ok());
  EXPECT_NE(v.status().message().find("needs a value"), std::string::npos);
  auto g = ParseBatchScript("#SBATCH --gpus=a100:2,h100:2\n");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("one GPU type"), std::string::npos);
}

struct Made {
  JobSpec job;
  std::vector<std::string> notes;
};

Made Make(const std::string& text) {
  auto s = ParseBatchScript(text);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  ScriptContext ctx{text, "job.sh", {"--lr", "0.1"}, "/home/alice/exp", "login-1", {}};
  Made m;
  m.notes = s->notes;
  auto j = JobFromBatchScript(*s, ctx, &m.notes);
  EXPECT_TRUE(j.ok()) << j.status().ToString();
  if (j.ok()) m.job = *j;
  return m;
}

Status MakeError(const std::string& text) {
  auto s = ParseBatchScript(text);
  if (!s.ok()) return s.status();
  ScriptContext ctx{text, "job.sh", {}, "/tmp", "", {}};
  std::vector<std::string> notes;
  auto j = JobFromBatchScript(*s, ctx, &notes);
  return j.ok() ? Status::Ok() : j.status();
}

TEST(Job, SingleGpu) {
  const Made m = Make("#!/bin/bash\n#SBATCH -p vision-dev\n#SBATCH --gres=gpu:1\n#SBATCH -t 30\n");
  EXPECT_EQ(m.job.queue, "vision-dev");
  EXPECT_EQ(m.job.name, "job.sh");
  EXPECT_EQ(m.job.tasks, 1);
  EXPECT_FALSE(m.job.distinct_nodes);
  EXPECT_EQ(m.job.resources.gpus, 1);
  EXPECT_TRUE(m.job.gpu_models.empty());
  EXPECT_EQ(m.job.walltime_seconds, 1800);
  EXPECT_EQ(m.job.workdir, "/home/alice/exp");
  EXPECT_EQ(m.job.env.at("SLURM_SUBMIT_DIR"), "/home/alice/exp");
  EXPECT_EQ(m.job.env.at("SLURM_JOB_NAME"), "job.sh");
  EXPECT_EQ(m.job.env.at("SLURM_JOB_PARTITION"), "vision-dev");
  EXPECT_EQ(m.job.env.count("SLURM_NTASKS"), 0u);  // the wrapper sets it from WORLD_SIZE
}

TEST(Job, MultiNodeGpusPerNode) {
  const Made m = Make(
      "#!/bin/bash\n#SBATCH -N 2 --gpus-per-node 8\n#SBATCH --ntasks-per-node=8\n"
      "#SBATCH --cpus-per-gpu=12 --mem-per-gpu=80G\n");
  EXPECT_EQ(m.job.tasks, 2);
  EXPECT_TRUE(m.job.distinct_nodes);
  EXPECT_EQ(m.job.resources.gpus, 8);
  EXPECT_EQ(m.job.resources.cpu_milli, 96000);
  EXPECT_EQ(m.job.resources.memory_mib, 8 * 80 * 1024);
  EXPECT_EQ(m.job.env.at("SLURM_NTASKS"), "16");
  EXPECT_EQ(m.job.env.at("SLURM_NTASKS_PER_NODE"), "8");
}

TEST(Job, GpusPerNodeFromEveryDirective) {
  // The same 2 x 4 GPUs, said four ways.
  for (const char* d :
       {"--gpus-per-node=4", "--gres=gpu:4", "--gpus=8", "--ntasks-per-node=2 --gpus-per-task=2"}) {
    const Made m = Make(std::string("#SBATCH -N 2 ") + d + "\n");
    EXPECT_EQ(m.job.tasks, 2) << d;
    EXPECT_EQ(m.job.resources.gpus, 4) << d;
  }
  // Without --nodes, tasks are one node's.
  const Made one = Make("#SBATCH -n 4 --gpus-per-task 1 -c 2\n");
  EXPECT_EQ(one.job.tasks, 1);
  EXPECT_EQ(one.job.resources.gpus, 4);
  EXPECT_EQ(one.job.resources.cpu_milli, 8000);
  EXPECT_EQ(one.job.env.at("SLURM_NTASKS"), "4");
  // --ntasks with --ntasks-per-node gives the nodes.
  const Made derived = Make("#SBATCH -n 16 --ntasks-per-node 8 --gpus-per-task 1\n");
  EXPECT_EQ(derived.job.tasks, 2);
  EXPECT_EQ(derived.job.resources.gpus, 8);
}

TEST(Job, TypedGpusAndConstraints) {
  const Made typed = Make("#SBATCH --gres=gpu:a100:4\n");
  EXPECT_EQ(typed.job.gpu_models, (std::vector<std::string>{"a100"}));
  EXPECT_EQ(typed.job.resources.gpus, 4);
  const Made either = Make("#SBATCH --gpus-per-node=2 --constraint=a100|h100\n");
  EXPECT_EQ(either.job.gpu_models, (std::vector<std::string>{"a100", "h100"}));
  const Made labels = Make("#SBATCH --gpus=1 --constraint=\"a100&zone=a&ib=true\"\n");
  EXPECT_EQ(labels.job.gpu_models, (std::vector<std::string>{"a100"}));
  EXPECT_EQ(labels.job.node_selector,
            (std::map<std::string, std::string>{{"ib", "true"}, {"zone", "a"}}));
}

TEST(Job, ConflictsAreRefused) {
  EXPECT_NE(MakeError("#SBATCH -N 2 --gpus=3\n").message().find("multiple of 2"),
            std::string::npos);
  EXPECT_NE(MakeError("#SBATCH --gpus-per-node=4 --gres=gpu:2\n").message().find("give one"),
            std::string::npos);
  EXPECT_NE(MakeError("#SBATCH --gres=gpu:a100:1 --gpus=h100:1\n").message().find("GPU type"),
            std::string::npos);
  EXPECT_FALSE(MakeError("#SBATCH --mem=1G --mem-per-gpu=1G --gres=gpu:1\n").ok());
  EXPECT_FALSE(MakeError("#SBATCH -c 2 --cpus-per-gpu 2 --gres=gpu:1\n").ok());
  EXPECT_FALSE(MakeError("#SBATCH --constraint=a100&h100 --gres=gpu:1\n").ok());
  EXPECT_FALSE(MakeError("#SBATCH --constraint=a100\n").ok());  // a model without GPUs
  EXPECT_FALSE(MakeError("#SBATCH -N 3 -n 4\n").ok());
}

TEST(Job, TimeSignalRequeueNamesAndPlaces) {
  const Made m = Make(
      "#!/bin/bash\n"
      "#SBATCH --job-name=llama\n"
      "#SBATCH --time=2:00:00 --signal=B:USR1@300\n"
      "#SBATCH --qos=high --requeue -A vision\n"
      "#SBATCH -D run1 --container-image=nvcr.io#nvidia/pytorch:24.01-py3\n");
  EXPECT_EQ(m.job.name, "llama");
  EXPECT_EQ(m.job.walltime_seconds, 7200 - 300);
  EXPECT_EQ(m.job.grace_period_seconds, 300);
  EXPECT_EQ(m.job.priority_class, "high");
  EXPECT_EQ(m.job.retry.max_retries, 3);
  EXPECT_EQ(m.job.workdir, "/home/alice/exp/run1");
  EXPECT_EQ(m.job.container_image, "nvcr.io/nvidia/pytorch:24.01-py3");
  EXPECT_EQ(m.job.env.at("SLURM_JOB_ACCOUNT"), "vision");
  EXPECT_EQ(m.job.env.at("SLURM_JOB_QOS"), "high");
  bool signal_note = false;
  for (const std::string& n : m.notes) signal_note |= n.find("SIGUSR1") != std::string::npos;
  EXPECT_TRUE(signal_note);
  const Made absolute = Make("#SBATCH --chdir=/scratch/x --no-requeue\n");
  EXPECT_EQ(absolute.job.workdir, "/scratch/x");
  EXPECT_EQ(absolute.job.retry.max_retries, 0);
}

// The server refuses reserved variables in a job's env (CheckSubmittedEnv): no translated script
// may produce one, whatever its directives.
TEST(Job, TranslatedEnvironmentHasNoReservedVariable) {
  for (const char* text :
       {"#!/bin/bash\n#SBATCH -p q --gres=gpu:1\n",
        "#!/bin/bash\n#SBATCH -N 2 --gpus-per-node 8\n#SBATCH --ntasks-per-node=8\n"
        "#SBATCH --cpus-per-task=4 --mem=64G\n",
        "#!/bin/bash\n#SBATCH --job-name=x --qos=high -A vision --ntasks=4\n"}) {
    const Made m = Make(text);
    EXPECT_TRUE(CheckSubmittedEnv(m.job).ok())
        << text << ": " << CheckSubmittedEnv(m.job).ToString();
    EXPECT_FALSE(m.job.env.empty());
  }
}

// Runs the wrapper for real with /bin/sh, as a node would.
struct Ran {
  int status = -1;
  std::string out;
};

Ran RunWrapper(const std::vector<std::string>& command, const std::string& dir,
               const std::string& env) {
  std::string line = fmt::format("cd {} && env {}", dir, env);
  for (const std::string& w : command) {
    std::string q = "'";
    for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
    line += fmt::format(" {}'", q);
  }
  line += " > out.txt 2> err.txt";
  Ran r;
  r.status = std::system(line.c_str());
  std::ifstream f(dir + "/out.txt");
  std::stringstream s;
  s << f.rdbuf();
  r.out = s.str();
  return r;
}

TEST(Wrapper, RunsTheScriptWithSlurmVariablesAndArguments) {
  const std::string dir = ::testing::TempDir() + "/wrapper-test";
  std::filesystem::create_directories(dir);
  const std::string script =
      "#!/bin/sh\n"
      "echo \"job=$SLURM_JOB_ID proc=$SLURM_PROCID node=$SLURM_NODEID ntasks=$SLURM_NTASKS "
      "nnodes=$SLURM_NNODES gpus=$SLURM_GPUS_ON_NODE args=$*\"\n"
      "exit 3\n";
  const auto cmd = BatchCommand(script, "t.sh", {"a", "b c"}, "", "", false);
  const Ran r = RunWrapper(cmd, dir,
                           "ARBITER_JOB_ID=42 ARBITER_TASK_INDEX=1 WORLD_SIZE=2 "
                           "CUDA_VISIBLE_DEVICES=0,1,2 ARBITER_NODE_NAME=box");
  EXPECT_EQ(WEXITSTATUS(r.status), 3);
  EXPECT_EQ(r.out, "job=42 proc=1 node=1 ntasks=2 nnodes=2 gpus=3 args=a b c\n");
  // The temporary copy of the script is gone.
  for (const auto& e :
       std::filesystem::directory_iterator(std::filesystem::temp_directory_path())) {
    EXPECT_EQ(e.path().filename().string().rfind("arbiter-job-42.", 0), std::string::npos);
  }
}

// A job of several nodes without -o/-e: its output stays in the job's logs, and the wrapper is
// still a valid shell script.
TEST(Wrapper, SeveralNodesWithoutOutputFiles) {
  const std::string dir = ::testing::TempDir() + "/wrapper-multi";
  std::filesystem::create_directories(dir);
  const auto cmd = BatchCommand("#!/bin/sh\necho \"node=$SLURM_NODEID\"\n", "t.sh", {}, "", "",
                                /*tasks_share_files=*/true);
  const Ran r = RunWrapper(cmd, dir, "ARBITER_JOB_ID=8 ARBITER_TASK_INDEX=0 WORLD_SIZE=2");
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
  EXPECT_EQ(r.out, "node=0\n");
}

TEST(Wrapper, OutputPatternsAreExpandedOnTheNode) {
  const std::string dir = ::testing::TempDir() + "/wrapper-out";
  std::filesystem::create_directories(dir);
  const auto cmd = BatchCommand("echo to-out; echo to-err >&2\n", "t.sh", {}, "log-%x-%j.%t.out",
                                "log-%j.err", false);
  const Ran r = RunWrapper(cmd, dir,
                           "ARBITER_JOB_ID=7 ARBITER_TASK_INDEX=0 WORLD_SIZE=1 "
                           "SLURM_JOB_NAME=exp");
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
  std::ifstream out(dir + "/log-exp-7.0.out");
  std::ifstream err(dir + "/log-7.err");
  std::string a, b;
  std::getline(out, a);
  std::getline(err, b);
  EXPECT_EQ(a, "to-out");
  EXPECT_EQ(b, "to-err");
}

// Every combination of -o, -e, files shared by tasks and --open-mode makes a wrapper sh accepts.
TEST(Wrapper, EveryOutputCombinationIsValidShell) {
  const std::string dir = ::testing::TempDir() + "/wrapper-syntax";
  std::filesystem::create_directories(dir);
  for (const char* output : {"", "%j.out"}) {
    for (const char* error : {"", "%j.err"}) {
      for (bool share : {false, true}) {
        for (bool append : {false, true}) {
          const auto cmd = BatchCommand("true\n", "t.sh", {}, output, error, share, append);
          ASSERT_GE(cmd.size(), 3u);
          const std::string file = dir + "/wrapper.sh";
          std::ofstream(file) << cmd[2];
          EXPECT_EQ(std::system(fmt::format("sh -n '{}'", file).c_str()), 0)
              << "-o '" << output << "' -e '" << error << "' share " << share << " append "
              << append << ":\n"
              << cmd[2];
        }
      }
    }
  }
}

TEST(HostList, SlurmsSyntax) {
  auto h = ExpandHostList("gpu-[01-03,07],cpu1,rack[1-2]-n[8-9]");
  ASSERT_TRUE(h.ok()) << h.status().ToString();
  EXPECT_EQ(*h, (std::vector<std::string>{"gpu-01", "gpu-02", "gpu-03", "gpu-07", "cpu1",
                                          "rack1-n8", "rack1-n9", "rack2-n8", "rack2-n9"}));
  EXPECT_EQ(*ExpandHostList("n[8-10]"), (std::vector<std::string>{"n8", "n9", "n10"}));
  EXPECT_EQ(*ExpandHostList("a,a"), std::vector<std::string>{"a"});
  for (const char* bad : {"gpu-[3-1]", "gpu-[01", "gpu-]", "a,,b", "n[x]", "n[1-99999]"}) {
    EXPECT_FALSE(ExpandHostList(bad).ok()) << bad;
  }
}

TEST(Export, AllNoneAndLists) {
  const std::map<std::string, std::string> env = {
      {"FOO", "1"},          {"BAR", "2"},        {"ARBITER_TOKEN", "secret"},
      {"SLURM_JOB_ID", "9"}, {"HOME", "/home/a"}, {"BASH_FUNC_x%%", "() { :; }"}};
  auto run = [&](const char* spec) {
    JobSpec job;
    std::vector<std::string> notes;
    EXPECT_TRUE(ExportEnvironment(spec, env, &job, &notes).ok()) << spec;
    return job.env;
  };
  // Never Arbiter's own (its token), the node's (HOME), the submitter's SLURM_*, odd names.
  EXPECT_EQ(run("ALL"), (std::map<std::string, std::string>{{"BAR", "2"}, {"FOO", "1"}}));
  EXPECT_TRUE(run("NONE").empty());
  EXPECT_EQ(run("FOO"), (std::map<std::string, std::string>{{"FOO", "1"}}));
  EXPECT_EQ(run("FOO,BAR=x,MISSING"),
            (std::map<std::string, std::string>{{"BAR", "x"}, {"FOO", "1"}}));
  EXPECT_EQ(run("ALL,FOO=z"), (std::map<std::string, std::string>{{"BAR", "2"}, {"FOO", "z"}}));
  JobSpec job;
  std::vector<std::string> notes;
  const Status st = ExportEnvironment("ARBITER_TOKEN", env, &job, &notes);
  EXPECT_EQ(st.field(), "export");
  EXPECT_NE(st.message().find("ARBITER_TOKEN is not a variable a job may set"), std::string::npos);
}

TEST(SbatchOptions, CommandLineOverridesDirectivesAndStopsAtTheScript) {
  auto s = ParseBatchScript("#!/bin/sh\n#SBATCH -J script -p a --exclusive\ntrue\n");
  ASSERT_TRUE(s.ok());
  auto end = ApplySbatchOptions({"-J", "cli", "--partition=b", "-w", "n[1-2]", "--open-mode",
                                 "append", "train.sh", "-J", "arg"},
                                &*s);
  ASSERT_TRUE(end.ok()) << end.status().ToString();
  EXPECT_EQ(*end, 7u);  // train.sh; what follows is the script's
  EXPECT_EQ(s->slurm.job_name, "cli");
  EXPECT_EQ(s->slurm.partition, "b");
  EXPECT_EQ(s->slurm.exclusive, true);
  EXPECT_EQ(s->slurm.nodelist, (std::vector<std::string>{"n1", "n2"}));
  EXPECT_EQ(s->slurm.open_append, true);
  auto bad = ApplySbatchOptions({"--open-mode=sometimes", "x.sh"}, &*s);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("command line: --open-mode=sometimes"), std::string::npos)
      << bad.status().message();
}

TEST(Job, NodesMailAndOpenMode) {
  const Made m = Make(
      "#!/bin/sh\n#SBATCH -w gpu-[01-02] -x gpu-03 --exclusive\n"
      "#SBATCH --mail-type=end,FAIL --mail-user=a@b.c -o out.txt --open-mode=append\n");
  EXPECT_EQ(m.job.nodes, (std::vector<std::string>{"gpu-01", "gpu-02"}));
  EXPECT_EQ(m.job.exclude_nodes, std::vector<std::string>{"gpu-03"});
  EXPECT_TRUE(m.job.exclusive);
  ASSERT_TRUE(m.job.mail.has_value());
  EXPECT_EQ(m.job.mail->user, "a@b.c");
  EXPECT_EQ(m.job.mail->types, (std::vector<std::string>{"END", "FAIL"}));
  EXPECT_NE(m.job.command[2].find("exec >>\"out.txt\" 2>&1"), std::string::npos)
      << m.job.command[2];
}

}  // namespace
TEST(ArraySpec, SlurmSyntax) {
  using Indices = std::vector<int64_t>;
  EXPECT_EQ(ParseArraySpec("0-3")->expanded, (Indices{0, 1, 2, 3}));
  EXPECT_EQ(ParseArraySpec("1,3,5")->expanded, (Indices{1, 3, 5}));
  EXPECT_EQ(ParseArraySpec("0-20:10,3")->expanded, (Indices{0, 3, 10, 20}));  // ascending
  EXPECT_EQ(ParseArraySpec("2,2,1-2")->expanded, (Indices{1, 2}));            // each index once
  EXPECT_EQ(ParseArraySpec("0-3")->max_running, 0);
  // %N: at most N at once.
  auto throttled = ParseArraySpec("0-99%8");
  ASSERT_TRUE(throttled.ok()) << throttled.status().ToString();
  EXPECT_EQ(throttled->indices, "0-99");
  EXPECT_EQ(throttled->expanded.size(), 100u);
  EXPECT_EQ(throttled->max_running, 8);
  for (const char* bad : {"", "a", "3-1", "1-", "0-9:0", "0-20000", "1-3%0", "1-3%", "1-3%x"}) {
    auto r = ParseArraySpec(bad);
    EXPECT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().field(), "array") << bad;
    EXPECT_EQ(r.status().message().rfind(fmt::format("--array={}: ", bad), 0), 0u)
        << r.status().message();
  }
  EXPECT_EQ(ParseArraySpec("3-1").status().message(),
            "--array=3-1: '3-1': the range ends before it starts");
  EXPECT_EQ(ParseArraySpec("1-3%0").status().message(),
            "--array=1-3%0: '%0': the most elements to run at once must be a whole number from 1 "
            "to 10000");
}

// A job array's element: the wrapper derives Slurm's array variables from Arbiter's, and %A, %a
// give the array's id and the element's index; a job of no array has none of them.
TEST(Wrapper, ArrayElementsGetSlurmsArrayVariablesAndPatterns) {
  const std::string dir = ::testing::TempDir() + "/wrapper-array";
  std::filesystem::create_directories(dir);
  const std::string script =
      "echo \"$SLURM_JOB_ID $SLURM_ARRAY_JOB_ID $SLURM_ARRAY_TASK_ID $SLURM_ARRAY_TASK_COUNT "
      "$SLURM_ARRAY_TASK_MIN $SLURM_ARRAY_TASK_MAX $SLURM_ARRAY_TASK_STEP\"\n";
  const auto cmd = BatchCommand(script, "t.sh", {}, "%A_%a.out", "", false);
  Ran r = RunWrapper(cmd, dir,
                     "ARBITER_JOB_ID=23 ARBITER_TASK_INDEX=0 WORLD_SIZE=1 "
                     "ARBITER_ARRAY_JOB_ID=20 ARBITER_ARRAY_INDEX=6 ARBITER_ARRAY_COUNT=4 "
                     "ARBITER_ARRAY_MIN=0 ARBITER_ARRAY_MAX=6 ARBITER_ARRAY_STEP=2");
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
  std::ifstream element(dir + "/20_6.out");
  std::string line;
  std::getline(element, line);
  EXPECT_EQ(line, "23 20 6 4 0 6 2");
  const auto padded = BatchCommand(script, "t.sh", {}, "%3A-%4a.out", "", false);
  r = RunWrapper(padded, dir, "ARBITER_JOB_ID=5 ARBITER_TASK_INDEX=0 WORLD_SIZE=1");
  EXPECT_EQ(WEXITSTATUS(r.status), 0);
  std::ifstream single(dir + "/005-0000.out");
  std::getline(single, line);
  EXPECT_EQ(line, "5      ");  // no array: no SLURM_ARRAY_* variables
}

}  // namespace arbiter::cli
