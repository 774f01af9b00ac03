// sbatch's options as a Slurm user gives them, in scripts and on `arbiter sbatch`'s command line:
// --exclusive, --nodelist/--exclude, --mail-*, --export, --open-mode, -W, and a command given
// without "--" caught before anything is sent.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>
#include <thread>

#include "local_node_cli.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

class SlurmSubmitTest : public LocalNodeCliTest {
 protected:
  json Job(const std::string& id) {
    const CliResult r = Cli({"show", id, "-o", "json"});
    EXPECT_EQ(r.code, 0) << r.err;
    return ParseOrNull(r.out);
  }
  // Polls job `id` until `pred` holds (at most 30 s).
  bool WaitFor(const std::string& id, const std::function<bool(const json&)>& pred) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred(Job(id))) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }
  std::string Sbatch(const std::vector<std::string>& args,
                     const std::map<std::string, std::string>& env = {}) {
    std::vector<std::string> all = {"sbatch"};
    all.insert(all.end(), args.begin(), args.end());
    const CliResult r = Cli(all, env);
    EXPECT_EQ(r.code, 0) << r.err;
    std::smatch m;
    if (!std::regex_search(r.out, m, std::regex("^Submitted batch job ([0-9]+)\n$"))) {
      ADD_FAILURE() << r.out;
      return "";
    }
    return m[1].str();
  }
  std::string Wait(const std::string& id, int expect_code = 0) {
    const CliResult w = Cli({"wait", id, "--timeout", "60"});
    EXPECT_EQ(w.code, expect_code) << w.out << w.err;
    return w.out;
  }
};

TEST_F(SlurmSubmitTest, SbatchOptionsOverrideTheScriptAndItPrintsAsSbatch) {
  WriteFile(work_.path() + "/opts.sh",
            "#!/bin/sh\n"
            "#SBATCH -J from-script -o wrong.out\n"
            "echo \"name=$SLURM_JOB_NAME partition=$SLURM_JOB_PARTITION args=$*\"\n");
  const std::string id =
      Sbatch({"-J", "from-cli", "--partition=gpu_A100", "-o", "%x-%j.out", "opts.sh", "a", "b"});
  ASSERT_FALSE(id.empty());
  Wait(id);
  EXPECT_EQ(ReadFile(work_.path() + "/from-cli-" + id + ".out"),
            "name=from-cli partition=gpu_A100 args=a b\n");
  // --parsable prints the id alone; --test-only submits nothing.
  const CliResult p = Cli({"sbatch", "--parsable", "opts.sh"});
  ASSERT_EQ(p.code, 0) << p.err;
  EXPECT_TRUE(std::regex_match(p.out, std::regex("[0-9]+\n"))) << p.out;
  const CliResult t = Cli({"sbatch", "--test-only", "-J", "dry", "opts.sh"});
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_TRUE(Contains(t.out, "name: dry")) << t.out;
  EXPECT_TRUE(Contains(t.err, "nothing was submitted")) << t.err;
  // -W waits and exits with the script's exit code.
  WriteFile(work_.path() + "/three.sh", "#!/bin/sh\nexit 3\n");
  const CliResult w = Cli({"sbatch", "-W", "three.sh"});
  EXPECT_EQ(w.code, 3) << w.out << w.err;
  EXPECT_TRUE(Contains(w.out, "Submitted batch job ")) << w.out;
  // With an array, -W waits for every element and exits with the highest code.
  WriteFile(work_.path() + "/elements.sh",
            "#!/bin/sh\n#SBATCH --array=0-2\nsleep 0.$SLURM_ARRAY_TASK_ID\n"
            "exit $SLURM_ARRAY_TASK_ID\n");
  const CliResult aw = Cli({"sbatch", "-W", "elements.sh"});
  EXPECT_EQ(aw.code, 2) << aw.out << aw.err;
  EXPECT_TRUE(std::regex_match(aw.out, std::regex("Submitted batch job [0-9]+\n"))) << aw.out;
  const json elements = ParseOrNull(Cli({"jobs", "--all", "-o", "json"}).out);
  int ended = 0;
  for (const json& j : elements["items"]) {
    ended += j.contains("array") && (j["state"] == "succeeded" || j["state"] == "failed");
  }
  EXPECT_EQ(ended, 3) << elements.dump();
  // No script is a usage error.
  const CliResult none = Cli({"sbatch", "-p", "lab-q"});
  EXPECT_EQ(none.code, 2);
  EXPECT_TRUE(Contains(none.err, "no batch script")) << none.err;
}

TEST_F(SlurmSubmitTest, ExclusiveTakesTheWholeNodeAndWaitsForIt) {
  // Long enough that a loaded machine still sees each job wait while the other runs.
  WriteFile(work_.path() + "/busy.sh", "#!/bin/sh\n#SBATCH --gres=gpu:1\nsleep 5\n");
  WriteFile(work_.path() + "/whole.sh",
            "#!/bin/sh\n#SBATCH --exclusive --gres=gpu:1 -o %j.out\n"
            "echo \"gpus=$CUDA_VISIBLE_DEVICES\"\nsleep 3\n");
  const std::string busy = Sbatch({"busy.sh"});
  ASSERT_TRUE(WaitFor(busy, [](const json& j) { return j["state"] == "running"; }));
  const std::string whole = Sbatch({"whole.sh"});
  // It waits for a node nothing else uses, and says so.
  ASSERT_TRUE(WaitFor(whole, [](const json& j) {
    return j.contains("pending") &&
           Contains(j["pending"].value("message", ""), "the job wants whole nodes");
  })) << Job(whole).dump();
  Wait(busy);
  // Then it runs on all four GPUs, and a one-GPU job waits until it ends.
  ASSERT_TRUE(WaitFor(whole, [](const json& j) { return j["state"] == "running"; }));
  const std::string after = Sbatch({"busy.sh"});
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_EQ(Job(after)["state"], "pending") << Job(after).dump();
  Wait(whole);
  EXPECT_EQ(ReadFile(work_.path() + "/" + whole + ".out"), "gpus=0,1,2,3\n");
  EXPECT_EQ(Job(whole)["exclusive"], true);
  Wait(after);
}

TEST_F(SlurmSubmitTest, NodeListsAndExcludedNodes) {
  WriteFile(work_.path() + "/on.sh", "#!/bin/sh\n#SBATCH -w box\necho here\n");
  const std::string on = Sbatch({"on.sh"});
  Wait(on);
  EXPECT_EQ(Job(on)["nodes"], json::array({"box"}));
  // A host list of nodes the cluster does not have waits, saying why; so does an excluded node.
  const std::string elsewhere = Sbatch({"--nodelist=gpu-[01-02]", "on.sh"});
  EXPECT_EQ(Job(elsewhere)["nodes"], json::array({"gpu-01", "gpu-02"}));
  ASSERT_TRUE(WaitFor(elsewhere, [](const json& j) {
    return j.contains("pending") &&
           Contains(j["pending"].value("message", ""), "not in the job's node list");
  })) << Job(elsewhere).dump();
  WriteFile(work_.path() + "/any.sh", "#!/bin/sh\necho here\n");
  const std::string excluded = Sbatch({"-x", "box", "any.sh"});
  ASSERT_TRUE(WaitFor(excluded, [](const json& j) {
    return j.contains("pending") &&
           Contains(j["pending"].value("message", ""), "excluded by the job");
  })) << Job(excluded).dump();
  EXPECT_EQ(Cli({"cancel", elsewhere, excluded}).code, 0);
  // A bad host list names the option.
  const CliResult bad = Cli({"sbatch", "-w", "gpu-[3-1]", "on.sh"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "--nodelist=gpu-[3-1]")) << bad.err;
}

TEST_F(SlurmSubmitTest, MailSettingsAreKeptWithTheJob) {
  WriteFile(work_.path() + "/mail.sh",
            "#!/bin/sh\n#SBATCH --mail-type=END,fail\n#SBATCH --mail-user=ann@example.com\ntrue\n");
  const CliResult sub = Cli({"submit", "--parsable", "mail.sh"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  EXPECT_TRUE(Contains(sub.err, "--mail-user/--mail-type: kept with the job")) << sub.err;
  EXPECT_FALSE(Contains(sub.err, "does not support")) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  EXPECT_EQ(Job(id)["mail"],
            json::parse(R"({"user": "ann@example.com", "types": ["END", "FAIL"]})"));
  const CliResult show = Cli({"show", id});
  EXPECT_TRUE(Contains(show.out, "Mail:        END,FAIL to ann@example.com")) << show.out;
}

TEST_F(SlurmSubmitTest, ExportGivesTheSubmittersEnvironmentAsSbatchDoes) {
  WriteFile(work_.path() + "/env.sh",
            "#!/bin/sh\n#SBATCH -o %j.out\n"
            "echo \"foo=$FOO bar=$BAR token=${ARBITER_TOKEN:-none}\"\n");
  const std::map<std::string, std::string> env = {{"FOO", "from-here"}, {"BAR", "too"}};
  const std::string all = Sbatch({"env.sh"}, env);
  Wait(all);
  EXPECT_EQ(ReadFile(work_.path() + "/" + all + ".out"), "foo=from-here bar=too token=none\n");
  const std::string none = Sbatch({"--export=NONE", "env.sh"}, env);
  Wait(none);
  EXPECT_EQ(ReadFile(work_.path() + "/" + none + ".out"), "foo= bar= token=none\n");
  const std::string some = Sbatch({"--export=FOO,BAR=set", "env.sh"}, env);
  Wait(some);
  EXPECT_EQ(ReadFile(work_.path() + "/" + some + ".out"), "foo=from-here bar=set token=none\n");
  // A command gets nothing unless asked.
  const CliResult cmd = Cli({"submit", "--dry-run", "-o", "json", "--", "true"}, env);
  EXPECT_FALSE(ParseOrNull(cmd.out)["env"].contains("FOO")) << cmd.out;
  const CliResult asked =
      Cli({"submit", "--dry-run", "-o", "json", "--export", "FOO", "--", "true"}, env);
  EXPECT_EQ(ParseOrNull(asked.out)["env"]["FOO"], "from-here") << asked.out;
}

TEST_F(SlurmSubmitTest, OpenModeAppendKeepsEarlierOutput) {
  WriteFile(work_.path() + "/log.sh",
            "#!/bin/sh\n#SBATCH -o shared.log --open-mode=append\necho \"run $1\"\n");
  Wait(Sbatch({"log.sh", "one"}));
  Wait(Sbatch({"log.sh", "two"}));
  EXPECT_EQ(ReadFile(work_.path() + "/shared.log"), "run one\nrun two\n");
  Wait(Sbatch({"--open-mode=truncate", "log.sh", "three"}));
  EXPECT_EQ(ReadFile(work_.path() + "/shared.log"), "run three\n");
}

TEST_F(SlurmSubmitTest, ACommandWithoutTheSeparatorIsCaughtBeforeSubmitting) {
  const CliResult r = Cli({"submit", "--gpus", "1", "python3", "train.py", "--lr", "0.1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_TRUE(Contains(r.err,
                       "python3: no such file; to run a command on the node, put it after "
                       "--: arbiter submit [FLAGS] -- python3 train.py --lr 0.1"))
      << r.err;
  // A mistyped flag of submit's own, with the command after --, is named with the nearest one.
  const CliResult typo = Cli({"submit", "--gpu", "1", "--", "python3", "train.py"});
  EXPECT_EQ(typo.code, 2);
  EXPECT_TRUE(Contains(typo.err,
                       "error: unknown flag \"--gpu\" for \"arbiter submit\"; did you "
                       "mean \"--gpus\"?"))
      << typo.err;
  const CliResult jobs = Cli({"jobs", "-o", "json"});
  EXPECT_TRUE(ParseOrNull(jobs.out)["items"].empty()) << jobs.out;
}

TEST_F(SlurmSubmitTest, RequeueStopsAJobAndQueuesItAgainAndSuspendSaysWhatItIs) {
  WriteFile(work_.path() + "/long.sh",
            "#!/bin/sh\n#SBATCH --gres=gpu:1 -o %j.out --open-mode=append\n"
            "echo \"run restarts=$SLURM_RESTART_COUNT\"\nsleep 30\n");
  const std::string id = Sbatch({"long.sh"});
  ASSERT_TRUE(WaitFor(id, [&](const json&) {
    return Contains(ReadFile(work_.path() + "/" + id + ".out"), "run ");
  }));
  const CliResult r = Cli({"requeue", id});
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(Contains(r.out, "requeued")) << r.out;
  // It is back in its queue once its processes are gone, and runs again.
  ASSERT_TRUE(WaitFor(id, [&](const json& j) {
    const std::string out = ReadFile(work_.path() + "/" + id + ".out");
    return j["state"] == "running" && out.find("run ") != out.rfind("run ");
  })) << ReadFile(work_.path() + "/" + id + ".out");
  const CliResult events = Cli({"events", id});
  EXPECT_TRUE(Contains(events.out, "requeued: its processes are gone")) << events.out;
  EXPECT_EQ(Cli({"cancel", id}).code, 0);
  // suspend --help says plainly what it does.
  const CliResult help = Cli({"suspend", "--help"});
  EXPECT_TRUE(Contains(help.out, "Not Slurm's SIGSTOP")) << help.out;
}

}  // namespace
}  // namespace arbiter::testing
