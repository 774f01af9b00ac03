// Integration tests of the `arbiter` client commands that need no server: usage errors, help,
// version, completion scripts, and Slurm batch scripts and job files in dry runs. The real binary,
// HOME in a temporary folder.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include "cli_process.h"
#include "cli_text.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

// Tests without a server: usage, local checks, help, completion, dry runs.
class CliLocalTest : public ::testing::Test {
 protected:
  CliResult Run(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    CliOptions o;
    o.env = std::move(env);
    o.env["HOME"] = home_.path();
    o.cwd = work_.path();
    return RunCli(args, o);
  }
  TempDir home_;
  TempDir work_;
};

TEST_F(CliLocalTest, ConnectionRefusedSaysWhatToDo) {
  // A port nothing listens on: one the kernel picked, closed again.
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  close(fd);
  const std::string url = fmt::format("http://127.0.0.1:{}", port);
  const CliResult r = Run({"jobs", "--server", url, "--token", "t"});
  EXPECT_EQ(r.code, 3) << r.err;
  EXPECT_EQ(r.err, fmt::format("error: cannot reach the server at {}: is it running? (arbiter "
                               "server, or set --server/ARBITER_SERVER)\n",
                               url));
  // The same from the environment.
  const CliResult e = Run({"queues"}, {{"ARBITER_SERVER", url}, {"ARBITER_TOKEN", "t"}});
  EXPECT_EQ(e.code, 3);
  EXPECT_TRUE(Contains(e.err, url)) << e.err;
}

TEST_F(CliLocalTest, MissingTokenSaysHowToLogIn) {
  const CliResult r = Run({"jobs", "--server", "http://127.0.0.1:1"});
  EXPECT_EQ(r.code, 4);
  EXPECT_TRUE(Contains(r.err, "no token for http://127.0.0.1:1: log in with `arbiter login"))
      << r.err;
  EXPECT_TRUE(Contains(r.err, "ARBITER_TOKEN")) << r.err;
}

TEST_F(CliLocalTest, UsageErrorsExitTwo) {
  EXPECT_EQ(Run({"jobs", "-o", "xml"}).code, 2);
  EXPECT_EQ(Run({"nosuchcommand"}).code, 2);
  EXPECT_EQ(Run({"show"}).code, 2);  // the id is required
  const CliResult nothing = Run({"submit", "--queue", "q"});
  EXPECT_EQ(nothing.code, 2);
  EXPECT_TRUE(Contains(nothing.err, "nothing to run")) << nothing.err;
  const CliResult missing = Run({"submit", "train.sh"});
  EXPECT_EQ(missing.code, 2);
  EXPECT_TRUE(Contains(missing.err, "train.sh: no such file")) << missing.err;
  const CliResult badgpus =
      Run({"submit", "--queue", "q", "--dry-run", "--gpus", "2000", "--", "true"});
  EXPECT_EQ(badgpus.code, 2) << badgpus.err;
}

TEST_F(CliLocalTest, UnknownCommandsAndFlagsNameTheNearest) {
  const CliResult command = Run({"sumbit", "--queue", "q", "--", "true"});
  EXPECT_EQ(command.code, 2);
  EXPECT_EQ(command.err, "error: unknown command \"sumbit\"; did you mean \"submit\"?\n");
  const CliResult far = Run({"frobnicate"});
  EXPECT_EQ(far.code, 2);
  EXPECT_EQ(far.err, "error: unknown command \"frobnicate\"; see arbiter --help\n");
  const CliResult flag = Run({"jobs", "--queu", "vision-train"});
  EXPECT_EQ(flag.code, 2);
  EXPECT_EQ(flag.err,
            "error: unknown flag \"--queu\" for \"arbiter jobs\"; did you mean \"--queue\"?\n");
  const CliResult nested = Run({"token", "craete"});
  EXPECT_EQ(nested.code, 2);
  EXPECT_EQ(nested.err,
            "error: unknown command \"craete\" for \"arbiter token\"; did you mean \"create\"?\n");
  EXPECT_EQ(Run({"sacct", "--startime", "today"}).err,
            "error: unknown flag \"--startime\" for \"arbiter sacct\"; did you mean "
            "\"--starttime\"?\n");
  // Bad Slurm values are usage errors too, found before anything is sent.
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"squeue", "-t", "RUNING"},
                                             {"squeue", "-o", "%i %y"},
                                             {"squeue", "-S", "y"},
                                             {"squeue", "-w", "box[1-"},
                                             {"sinfo", "-t", "idel"},
                                             {"sinfo", "-o", "%P %y"},
                                             {"sacct", "-o", "JobID,Stat"},
                                             {"sacct", "-S", "last tuesday"},
                                             {"sacct", "-s", "DONE"}}) {
    const CliResult r = Run(args);
    EXPECT_EQ(r.code, 2) << args[0] << " " << args[1] << ": " << r.err;
    EXPECT_TRUE(Contains(r.err, "error: ")) << r.err;
  }
}

TEST_F(CliLocalTest, VersionReportAndHelp) {
  const CliResult v = Run({"version"});
  EXPECT_EQ(v.code, 0);
  EXPECT_TRUE(std::regex_match(v.out, std::regex("arbiter [0-9]+\\.[0-9]+\\.[0-9]+\n"))) << v.out;
  const json vj = ParseOrNull(Run({"version", "-o", "json"}).out);
  EXPECT_TRUE(vj.contains("version")) << vj;
  // A report needs its name; an unknown one is a usage error that lists them.
  EXPECT_EQ(Run({"report"}).code, 2);
  const CliResult report = Run({"report", "usag"});
  EXPECT_EQ(report.code, 2);
  EXPECT_TRUE(Contains(report.err, "idle-while-queued")) << report.err;
  // Every client command has help with examples.
  for (const std::vector<std::string>& cmd :
       std::vector<std::vector<std::string>>{{"submit"},
                                             {"jobs"},
                                             {"show"},
                                             {"why"},
                                             {"logs"},
                                             {"cancel"},
                                             {"suspend"},
                                             {"resume"},
                                             {"retry"},
                                             {"wait"},
                                             {"events"},
                                             {"queues"},
                                             {"nodes"},
                                             {"top"},
                                             {"apply"},
                                             {"config", "get"},
                                             {"tenants"},
                                             {"users"},
                                             {"users", "create"},
                                             {"token"},
                                             {"token", "create"},
                                             {"version"},
                                             {"report"},
                                             {"login"},
                                             {"logout"},
                                             {"whoami"},
                                             {"completion"},
                                             {"priority-classes"},
                                             {"cordon"},
                                             {"drain"},
                                             {"uncordon"},
                                             {"squeue"},
                                             {"sinfo"},
                                             {"sacct"}}) {
    std::vector<std::string> args = cmd;
    args.push_back("--help");
    const CliResult h = Run(args);
    EXPECT_EQ(h.code, 0) << cmd[0];
    EXPECT_TRUE(Contains(h.out, "Examples:")) << cmd[0] << ": " << h.out;
  }
}

TEST_F(CliLocalTest, CompletionScripts) {
  const CliResult bash = Run({"completion", "bash"});
  ASSERT_EQ(bash.code, 0) << bash.err;
  const std::string script = work_.path() + "/arbiter.bash";
  WriteFile(script, bash.out);
  EXPECT_EQ(std::system(fmt::format("bash -n '{}'", script).c_str()), 0);
  // Complete a few lines the way bash would.
  auto complete = [&](const std::string& words) {
    const std::string probe = work_.path() + "/probe.sh";
    WriteFile(probe, fmt::format("source '{}'\nCOMP_WORDS=({})\nCOMP_CWORD=$(( ${{#COMP_WORDS[@]}} "
                                 "- 1 ))\n_arbiter\necho \"${{COMPREPLY[*]}}\"\n",
                                 script, words));
    CliResult r;
    FILE* p = popen(fmt::format("bash '{}'", probe).c_str(), "r");
    char buf[4096];
    while (p != nullptr && std::fgets(buf, sizeof(buf), p) != nullptr) r.out += buf;
    if (p != nullptr) pclose(p);
    return r.out;
  };
  EXPECT_TRUE(Contains(complete("arbiter sub"), "submit"));
  EXPECT_TRUE(Contains(complete("arbiter submit --que"), "--queue"));
  EXPECT_EQ(complete("arbiter jobs -o ''"), "table wide json yaml\n");
  EXPECT_EQ(complete("arbiter submit --type fine"), "fine-tuning\n");
  EXPECT_TRUE(Contains(complete("arbiter simulate in"), "inflate"));
  EXPECT_TRUE(Contains(complete("arbiter token create --u"), "--user"));
  const CliResult zsh = Run({"completion", "zsh"});
  ASSERT_EQ(zsh.code, 0) << zsh.err;
  EXPECT_EQ(zsh.out.rfind("#compdef arbiter\n", 0), 0u);
  EXPECT_TRUE(Contains(zsh.out, "'submit:Submit a job")) << zsh.out.substr(0, 2000);
  if (std::system("command -v zsh >/dev/null 2>&1") == 0) {
    WriteFile(work_.path() + "/_arbiter", zsh.out);
    EXPECT_EQ(std::system(fmt::format("zsh -n '{}/_arbiter'", work_.path()).c_str()), 0);
  }
  EXPECT_EQ(Run({"completion", "fish"}).code, 2);
}

// A batch script and the job its dry run must print.
struct ScriptCase {
  const char* name;
  const char* script;
  const char* queue;
  int tasks;
  int gpus;
  std::vector<std::string> gpu_models;
  int64_t walltime_seconds;
  std::string job_name;  // "" : the file's name
  int64_t cpu_milli = 0;
  int64_t memory_mib = 0;
  std::map<std::string, std::string> node_selector = {};
};

TEST_F(CliLocalTest, SbatchScriptsDryRun) {
  const std::vector<ScriptCase> cases = {
      {"single-gpu.sh",
       "#!/bin/bash\n#SBATCH --job-name=resnet\n#SBATCH --partition=vision-dev\n"
       "#SBATCH --gres=gpu:1\n#SBATCH --time=30\n\npython train.py\n",
       "vision-dev",
       1,
       1,
       {},
       1800,
       "resnet"},
      {"typed.sh",
       "#!/bin/bash\n#SBATCH -p vision-train\n#SBATCH --gres=gpu:a100:4   # four A100s\n"
       "#SBATCH -t 2:30:00\n#SBATCH --mem=64G\n#SBATCH -c 16\npython train.py\n",
       "vision-train",
       1,
       4,
       {"a100"},
       9000,
       "",
       16000,
       65536},
      {"multinode.sh",
       "#!/bin/bash\n#SBATCH -J llama-70b\n#SBATCH -p vision-train\n#SBATCH -N 2 --gpus-per-node "
       "8\n"
       "#SBATCH --ntasks-per-node=8 --cpus-per-gpu=4\n#SBATCH -t 1-12\n"
       "srun torchrun --nnodes $SLURM_NNODES train.py\n",
       "vision-train",
       2,
       8,
       {},
       36 * 3600,
       "llama-70b",
       32000},
      {"minutes.sh",
       "#!/bin/sh\n#SBATCH -p vision-dev -t 90 --gpus=2\necho hi\n",
       "vision-dev",
       1,
       2,
       {},
       5400,
       ""},
      {"days-minutes.sh",
       "#!/bin/sh\n#SBATCH --partition vision-dev\n#SBATCH --time=0-0:45\n"
       "#SBATCH --gpus-per-task=1 --ntasks=2\n#SBATCH --mem-per-gpu=20G\necho hi\n",
       "vision-dev",
       1,
       2,
       {},
       2700,
       "",
       0,
       40960},
      {"constraint.sh",
       "#!/bin/bash\n#SBATCH -p vision-train  # queue\n#SBATCH --gpus-per-node=2\n"
       "#SBATCH --constraint=\"A100-80G&zone=a\"\n#SBATCH --time=1-2:03:04\necho\n",
       "vision-train",
       1,
       2,
       {"A100-80G"},
       86400 + 2 * 3600 + 3 * 60 + 4,
       "",
       0,
       0,
       {{"zone", "a"}}},
      {"cpu-only.sh",
       "#!/bin/bash\n#SBATCH -p vision-dev\n#SBATCH -c 4 --mem-per-cpu=2G\n#SBATCH -t 10:00\n"
       "echo\n",
       "vision-dev",
       1,
       0,
       {},
       600,
       "",
       4000,
       8192},
  };
  for (const ScriptCase& c : cases) {
    WriteFile(work_.path() + "/" + c.name, c.script);
    const CliResult r = Run({"submit", "--dry-run", "-o", "json", c.name});
    ASSERT_EQ(r.code, 0) << c.name << ": " << r.err;
    const json j = ParseOrNull(r.out);
    ASSERT_TRUE(j.is_object()) << c.name << ": " << r.out;
    EXPECT_EQ(j["queue"], c.queue) << c.name;
    EXPECT_EQ(j["tasks"], c.tasks) << c.name;
    EXPECT_EQ(j["distinct_nodes"], c.tasks > 1) << c.name;
    EXPECT_EQ(j["resources"]["gpus"], c.gpus) << c.name;
    EXPECT_EQ(j["gpu_models"], json(c.gpu_models)) << c.name;
    EXPECT_EQ(j["walltime_seconds"], c.walltime_seconds) << c.name;
    EXPECT_EQ(j["name"], c.job_name.empty() ? c.name : c.job_name) << c.name;
    EXPECT_EQ(j["resources"]["cpu_milli"], c.cpu_milli) << c.name;
    EXPECT_EQ(j["resources"]["memory_mib"], c.memory_mib) << c.name;
    EXPECT_EQ(j["node_selector"], json(c.node_selector)) << c.name;
    EXPECT_EQ(j["workdir"], std::filesystem::canonical(work_.path()).string()) << c.name;
    EXPECT_EQ(j["command"][0], "/bin/sh") << c.name;
    EXPECT_EQ(j["command"][4], c.script) << c.name;  // the script itself
    EXPECT_EQ(j["env"]["SLURM_JOB_NAME"], j["name"]) << c.name;
    EXPECT_TRUE(Contains(r.err, "dry run: nothing was submitted")) << r.err;
    EXPECT_FALSE(Contains(r.err, "warning:")) << c.name << ": " << r.err;
  }
  // The default output of a dry run is YAML of the same body.
  const CliResult y = Run({"submit", "--dry-run", "typed.sh"});
  EXPECT_EQ(y.code, 0);
  EXPECT_TRUE(Contains(y.out, "queue: vision-train\n")) << y.out;
  EXPECT_TRUE(Contains(y.out, "walltime_seconds: 9000\n")) << y.out;
  // Flags override the script; #ARBITER lines take the same flags.
  WriteFile(work_.path() + "/arb.sh",
            "#!/bin/sh\n#SBATCH -p vision-dev --gres=gpu:1\n#ARBITER --type evaluation "
            "--retries 2 --env MODE=eval\necho\n");
  const json o = ParseOrNull(Run({"submit", "--dry-run", "-o", "json", "--queue", "vision-train",
                                  "--gpus", "3", "arb.sh", "--", "--lr", "0.1"})
                                 .out);
  EXPECT_EQ(o["queue"], "vision-train");
  EXPECT_EQ(o["resources"]["gpus"], 3);
  EXPECT_EQ(o["type"], "evaluation");
  EXPECT_EQ(o["retry"]["max_retries"], 2);
  EXPECT_EQ(o["env"]["MODE"], "eval");
  EXPECT_EQ(o["env"]["SLURM_JOB_PARTITION"], "vision-train");
  EXPECT_EQ(o["command"].size(), 7u);  // wrapper, name, script, --lr, 0.1
  EXPECT_EQ(o["command"][6], "0.1");
}

TEST_F(CliLocalTest, UnsupportedDirectivesInOneWarning) {
  WriteFile(work_.path() + "/odd.sh",
            "#!/bin/bash\n#SBATCH -p vision-dev\n#SBATCH --hold --licenses=matlab:2\n"
            "#SBATCH --reservation=maint\n#SBATCH --dependency=afterok:9\necho\n");
  const CliResult r = Run({"submit", "--dry-run", "-o", "json", "odd.sh"});
  EXPECT_EQ(r.code, 0) << r.err;
  std::vector<std::string> warnings;
  std::stringstream s(r.err);
  for (std::string line; std::getline(s, line);) {
    if (line.rfind("warning:", 0) == 0) warnings.push_back(line);
  }
  ASSERT_EQ(warnings.size(), 1u) << r.err;
  EXPECT_EQ(warnings[0],
            "warning: odd.sh: #SBATCH directives Arbiter does not support, ignored: "
            "--hold (line 3), --licenses=matlab:2 (line 3), --reservation=maint (line 4)");
  // --dependency is supported: it becomes depends_on.
  EXPECT_EQ(ParseOrNull(r.out)["depends_on"], json::parse(R"([{"job": 9, "type": "afterok"}])"))
      << r.out;
  // A bad directive is an error naming it and its line.
  WriteFile(work_.path() + "/bad.sh", "#!/bin/sh\n#SBATCH -p q\n#SBATCH -t 1h\necho\n");
  const CliResult bad = Run({"submit", "--dry-run", "bad.sh"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "bad.sh: line 3:")) << bad.err;
  EXPECT_TRUE(Contains(bad.err, "D-H:M:S")) << bad.err;
  // No queue anywhere: the server would use the tenant's default_queue.
  WriteFile(work_.path() + "/noq.sh", "#!/bin/sh\n#SBATCH --gres=gpu:1\necho\n");
  const CliResult noq = Run({"submit", "--dry-run", "noq.sh"});
  EXPECT_EQ(noq.code, 0) << noq.err;
  EXPECT_TRUE(Contains(noq.err, "the server would use your tenant's default_queue")) << noq.err;
}

TEST_F(CliLocalTest, JobFilesDryRunPrintExactlyTheBody) {
  WriteFile(work_.path() + "/job.yaml",
            "name: eval-7b\nqueue: vision-dev\ntype: evaluation\ncommand: [python, eval.py]\n"
            "env: {SEED: \"7\"}\nresources: {gpus: 1, memory_mib: 1024}\nwalltime_seconds: 600\n");
  const CliResult y = Run({"submit", "--dry-run", "-o", "json", "job.yaml"});
  ASSERT_EQ(y.code, 0) << y.err;
  const json j = ParseOrNull(y.out);
  EXPECT_EQ(j["name"], "eval-7b");
  EXPECT_EQ(j["type"], "evaluation");
  EXPECT_EQ(j["command"], json({"python", "eval.py"}));
  EXPECT_EQ(j["env"]["SEED"], "7");
  EXPECT_EQ(j["resources"]["memory_mib"], 1024);
  EXPECT_FALSE(j.contains("id"));
  // The JSON form of the same job gives the same body.
  WriteFile(work_.path() + "/job.json", j.dump());
  EXPECT_EQ(ParseOrNull(Run({"submit", "--dry-run", "-o", "json", "job.json"}).out), j);
  // A bad field is named, with the file.
  WriteFile(work_.path() + "/bad.yaml", "queue: vision-dev\ncommand: [x]\nresources: {gpus: -2}\n");
  const CliResult bad = Run({"submit", "--dry-run", "bad.yaml"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "bad.yaml: resources.gpus:")) << bad.err;
  // A command after --, with flags.
  const json c = ParseOrNull(Run({"submit", "--dry-run", "-o", "json", "--queue", "vision-dev",
                                  "--gpu-share", "0.5", "--walltime", "1h30m", "--env", "A=1",
                                  "--memory", "1.5Gi", "--", "python", "-u", "x.py"})
                                 .out);
  EXPECT_EQ(c["command"], json({"python", "-u", "x.py"}));
  EXPECT_EQ(c["resources"]["gpus"], 1);
  EXPECT_EQ(c["resources"]["gpu_milli"], 500);
  EXPECT_EQ(c["resources"]["memory_mib"], 1536);
  EXPECT_EQ(c["walltime_seconds"], 5400);
  EXPECT_EQ(c["env"]["A"], "1");
}

}  // namespace
}  // namespace arbiter::testing
