// Integration tests of the `arbiter` client commands: the real binary against a real server on
// loopback, HOME in a temporary folder, bounded polls. Every command, every output format, the
// error messages, the completion scripts, and Slurm batch scripts from dry run to a run on the
// built-in node.
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
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
  - {name: high, value: 1000, preemptible: false}
tenants:
  - name: vision
    queues:
      - {name: vision-train, guaranteed: {gpu: 8}, max: {gpu: 8}}
      - {name: vision-dev, guaranteed: {gpu: 0}}
  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 0}}
users:
  - {name: alice, tenant: vision, role: member, run_as: {uid: 4242}}
  - {name: vic, tenant: vision, role: viewer}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 131072, gpus: {count: 8, model: A100-80G}}
)";

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream f(path);
  f << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

json ParseOrNull(const std::string& s) { return json::parse(s, nullptr, false); }

bool Contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

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
                                             {"uncordon"}}) {
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
            "#!/bin/bash\n#SBATCH -p vision-dev\n#SBATCH --mail-type=END --mail-user=a@b.c\n"
            "#SBATCH --exclusive\n#SBATCH --dependency=afterok:9\necho\n");
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
            "--mail-type=END (line 3), --mail-user=a@b.c (line 3), --exclusive (line 4), "
            "--dependency=afterok:9 (line 5)");
  // A bad directive is an error naming it and its line.
  WriteFile(work_.path() + "/bad.sh", "#!/bin/sh\n#SBATCH -p q\n#SBATCH -t 1h\necho\n");
  const CliResult bad = Run({"submit", "--dry-run", "bad.sh"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "bad.sh: line 3:")) << bad.err;
  EXPECT_TRUE(Contains(bad.err, "D-H:M:S")) << bad.err;
  // No queue anywhere.
  WriteFile(work_.path() + "/noq.sh", "#!/bin/sh\n#SBATCH --gres=gpu:1\necho\n");
  const CliResult noq = Run({"submit", "--dry-run", "noq.sh"});
  EXPECT_EQ(noq.code, 2);
  EXPECT_TRUE(Contains(noq.err, "#SBATCH -p QUEUE")) << noq.err;
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

// Tests against a running server with the built-in node `box` (8 fake GPUs).
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    WriteFile(data_.path() + "/cluster.yaml", kConfig);
    ASSERT_TRUE(server_.Start(data_.path(),
                              {"--config", data_.path() + "/cluster.yaml", "--local-node", "box"}))
        << server_.output();
    url_ = fmt::format("http://127.0.0.1:{}", server_.port());
    auto admin = server_.Client(server_.admin_token());
    for (const char* user : {"alice", "vic"}) {
      auto t = admin->Post("/api/v1/tokens", json{{"user", user}}.dump(), "application/json");
      ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
      tokens_[user] = json::parse(t->body)["token"].get<std::string>();
    }
  }

  // `arbiter ARGS` as `user` ("admin" or a configured user), from the work folder.
  CliResult As(const std::string& user, const std::vector<std::string>& args, bool tty = false,
               std::map<std::string, std::string> env = {}) {
    CliOptions o;
    o.env = std::move(env);
    o.env["HOME"] = home_.path();
    o.env["ARBITER_SERVER"] = url_;
    o.env["ARBITER_TOKEN"] = user == "admin" ? server_.admin_token() : tokens_.at(user);
    o.cwd = work_.path();
    o.tty = tty;
    if (tty) o.env["TERM"] = "xterm";
    return RunCli(args, o);
  }

  uint64_t Submit(const std::string& user, std::vector<std::string> args) {
    args.insert(args.begin(), {"submit", "--parsable"});
    const CliResult r = As(user, args);
    EXPECT_EQ(r.code, 0) << r.err;
    return r.code == 0 ? std::stoull(r.out) : 0;
  }

  json Job(uint64_t id) {
    return ParseOrNull(As("admin", {"show", std::to_string(id), "-o", "json"}).out);
  }

  // Bounded poll (50 ms apart) until the job is in `state`.
  bool WaitState(uint64_t id, const std::string& state, int polls = 200) {
    for (int i = 0; i < polls; ++i) {
      if (Job(id).value("state", "") == state) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  TempDir data_;
  TempDir home_;
  TempDir work_;
  ServerProcess server_;
  std::string url_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(CliTest, LoginSavesTheSettingsForLaterCommands) {
  CliOptions o;
  o.env["HOME"] = home_.path();
  const CliResult login = RunCli({"login", "--server", url_ + "/", "--token", tokens_["alice"]}, o);
  ASSERT_EQ(login.code, 0) << login.err;
  const std::string path = home_.path() + "/.config/arbiter/config.yaml";
  EXPECT_TRUE(
      Contains(login.out, "logged in to " + url_ + " as alice (tenant vision, role member)"))
      << login.out;
  struct stat st {};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  EXPECT_TRUE(Contains(ReadFile(path), tokens_["alice"]));
  // Later commands need no flags.
  const CliResult who = RunCli({"whoami", "-o", "json"}, o);
  ASSERT_EQ(who.code, 0) << who.err;
  EXPECT_EQ(ParseOrNull(who.out)["user"], "alice");
  EXPECT_EQ(ParseOrNull(who.out)["server"], url_);
  const CliResult table = RunCli({"whoami"}, o);
  EXPECT_TRUE(Contains(table.out, "USER   TENANT  ROLE    SERVER\nalice  vision  member  "))
      << table.out;
  // Flags and the environment override the file.
  o.env["ARBITER_TOKEN"] = tokens_["vic"];
  EXPECT_EQ(ParseOrNull(RunCli({"whoami", "-o", "json"}, o).out)["user"], "vic");
  EXPECT_EQ(
      ParseOrNull(RunCli({"whoami", "-o", "json", "--token", tokens_["alice"]}, o).out)["user"],
      "alice");
  o.env.erase("ARBITER_TOKEN");
  // The token piped in; a refused token is not saved.
  o.stdin_text = "not-a-token\n";
  const CliResult bad = RunCli({"login", "--server", url_}, o);
  EXPECT_EQ(bad.code, 4);
  EXPECT_TRUE(Contains(bad.err, "refused the token")) << bad.err;
  EXPECT_TRUE(Contains(ReadFile(path), tokens_["alice"]));
  o.stdin_text.clear();
  // The saved token is never sent to another server.
  const CliResult elsewhere = RunCli({"jobs", "--server", "http://127.0.0.1:1"}, o);
  EXPECT_EQ(elsewhere.code, 4);
  EXPECT_TRUE(Contains(elsewhere.err, "no token")) << elsewhere.err;
  // Logout removes the token.
  EXPECT_EQ(RunCli({"logout"}, o).code, 0);
  EXPECT_EQ(RunCli({"whoami"}, o).code, 4);
}

TEST_F(CliTest, SubmitRunWaitAndInspect) {
  const CliResult sub = As("alice", {"submit", "--queue", "vision-dev", "--gpus", "1", "--name",
                                     "hello", "--", "sh", "-c", "echo hello from $ARBITER_JOB_ID"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(sub.out, m,
                                std::regex("^job ([0-9]+) submitted to vision-dev "
                                           "\\(pending\\)\n$")))
      << sub.out;
  const std::string id = m[1];
  // -o json and -o yaml of submit: the created job, with its id.
  const json created =
      ParseOrNull(As("alice", {"submit", "-o", "json", "--queue", "vision-dev", "--", "true"}).out);
  EXPECT_EQ(created["id"], std::stoull(id) + 1) << created;
  EXPECT_EQ(created["state"], "pending");
  const CliResult created_yaml =
      As("alice", {"submit", "-o", "yaml", "--queue", "vision-dev", "--", "true"});
  EXPECT_TRUE(Contains(created_yaml.out, fmt::format("\nid: {}\n", std::stoull(id) + 2)))
      << created_yaml.out;
  EXPECT_EQ(As("alice", {"wait", std::to_string(std::stoull(id) + 1),
                         std::to_string(std::stoull(id) + 2), "--timeout", "30"})
                .code,
            0);
  const CliResult wait = As("alice", {"wait", id, "--timeout", "30"});
  EXPECT_EQ(wait.code, 0) << wait.out << wait.err;
  EXPECT_EQ(wait.out, fmt::format("job {} succeeded (exit code 0)\n", id));

  // show: readable, JSON, YAML.
  const CliResult show = As("alice", {"show", id});
  EXPECT_TRUE(Contains(show.out, fmt::format("Job {}  hello\n", id))) << show.out;
  EXPECT_TRUE(Contains(show.out, "  State:       succeeded (all tasks exited 0)")) << show.out;
  EXPECT_TRUE(Contains(show.out, "  Command:     sh -c 'echo hello from $ARBITER_JOB_ID'"))
      << show.out;
  const json j = ParseOrNull(As("alice", {"show", id, "-o", "json"}).out);
  EXPECT_EQ(j["id"], std::stoull(id));
  EXPECT_EQ(j["state"], "succeeded");
  const CliResult yaml = As("alice", {"show", id, "-o", "yaml"});
  EXPECT_TRUE(Contains(yaml.out, "state: succeeded\n")) << yaml.out;
  EXPECT_TRUE(Contains(yaml.out, fmt::format("id: {}\n", id))) << yaml.out;

  // jobs: aligned table, wide, JSON, YAML, filters.
  const uint64_t second = Submit("alice", {"--queue", "vision-dev", "--", "true"});
  ASSERT_NE(second, 0u);
  ASSERT_TRUE(WaitState(second, "succeeded"));
  const CliResult table = As("alice", {"jobs"});
  ASSERT_EQ(table.code, 0) << table.err;
  std::vector<std::string> lines;
  std::stringstream s(table.out);
  for (std::string l; std::getline(s, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << table.out;
  EXPECT_EQ(lines[0].rfind("ID  NAME   QUEUE       USER   STATE      GPUS  AGE", 0), 0u)
      << table.out;
  const size_t state_col = lines[0].find("STATE");
  EXPECT_EQ(lines[1].substr(state_col, 9), "succeeded");
  EXPECT_EQ(lines[4].substr(state_col, 9), "succeeded");
  EXPECT_FALSE(Contains(table.out, "\033[")) << "no colours off a terminal";
  const CliResult wide = As("alice", {"jobs", "-o", "wide"});
  EXPECT_TRUE(Contains(wide.out, "TENANT  TYPE      PRIORITY  NODES  RESTARTS  EXIT  REASON"))
      << wide.out;
  EXPECT_TRUE(Contains(wide.out, "all tasks exited 0")) << wide.out;
  const json list = ParseOrNull(As("alice", {"jobs", "-o", "json"}).out);
  ASSERT_EQ(list["items"].size(), 4u);
  EXPECT_EQ(list["items"][0]["name"], "hello");
  EXPECT_TRUE(Contains(As("alice", {"jobs", "-o", "yaml"}).out, "items:\n  - "));
  EXPECT_EQ(ParseOrNull(As("alice", {"jobs", "-o", "json", "--limit", "1"}).out)["items"][0]["id"],
            second);
  EXPECT_EQ(ParseOrNull(As("alice", {"jobs", "-o", "json", "--active"}).out)["items"].size(), 0u);
  EXPECT_EQ(ParseOrNull(As("admin", {"jobs", "-o", "json", "--mine"}).out)["items"].size(), 0u);
  EXPECT_EQ(As("alice", {"jobs", "--state", "running"}).err, "no jobs match\n");

  // why: a finished job says so.
  const CliResult why = As("alice", {"why", id});
  EXPECT_EQ(why.out, fmt::format("job {} is succeeded: all tasks exited 0\n", id));
  EXPECT_EQ(ParseOrNull(As("alice", {"why", id, "-o", "json"}).out)["state"], "succeeded");
  EXPECT_TRUE(Contains(As("alice", {"why", id, "-o", "yaml"}).out, "state: succeeded\n"));

  // events: the job's history, in each format.
  const CliResult history = As("alice", {"events", id});
  EXPECT_TRUE(Contains(history.out, "TIME")) << history.out;
  EXPECT_TRUE(Contains(history.out, "submitted")) << history.out;
  EXPECT_TRUE(Contains(history.out, "succeeded")) << history.out;
  const json hj = ParseOrNull(As("alice", {"events", id, "-o", "json"}).out);
  EXPECT_EQ(hj["items"].back()["to"], "succeeded");
  EXPECT_TRUE(Contains(As("alice", {"events", id, "-o", "yaml"}).out, "to: succeeded"));

  // logs: the task's output once the server serves logs; until then a clear message.
  const CliResult logs = As("alice", {"logs", id});
  if (logs.code == 0) {
    EXPECT_EQ(logs.out, fmt::format("hello from {}\n", id));
    const CliResult no_task = As("alice", {"logs", id, "--task", "3"});
    EXPECT_EQ(no_task.code, 1);
    EXPECT_EQ(no_task.err.rfind("error: task: ", 0), 0u) << no_task.err;
    EXPECT_EQ(As("alice", {"logs", id, "-f"}).out, logs.out);  // ended: -f ends too
  } else {
    EXPECT_EQ(logs.code, 6) << logs.err;
    EXPECT_TRUE(Contains(logs.err, "does not serve logs yet")) << logs.err;
  }
}

// token create --expires-in, token list and token revoke against the real server.
TEST_F(CliTest, TokensAreListedAndRevoked) {
  const CliResult made =
      As("admin", {"token", "create", "--user", "vic", "--expires-in", "2h", "-o", "json"});
  ASSERT_EQ(made.code, 0) << made.err;
  const json token = ParseOrNull(made.out);
  ASSERT_TRUE(token["expires_at"].is_string()) << made.out;
  const std::string id = token["id"].get<std::string>();
  EXPECT_EQ(As("admin", {"token", "create", "--user", "vic", "--expires-in", "soon"}).code, 2);
  const json mine = ParseOrNull(As("alice", {"token", "list", "-o", "json"}).out);
  ASSERT_FALSE(mine["items"].empty()) << mine;
  for (const json& t : mine["items"]) EXPECT_EQ(t["user"], "alice") << t;
  const CliResult table = As("admin", {"token", "list"});
  EXPECT_TRUE(Contains(table.out, "ID")) << table.out;
  EXPECT_TRUE(Contains(table.out, id)) << table.out;
  EXPECT_EQ(As("alice", {"token", "revoke", id}).code, 1);  // not hers: not found
  const CliResult revoked = As("admin", {"token", "revoke", id});
  EXPECT_EQ(revoked.code, 0) << revoked.err;
  EXPECT_EQ(revoked.out, fmt::format("token {} revoked\n", id));
  EXPECT_TRUE(Contains(As("admin", {"token", "list"}).out, "revoked"));
}

// logs: the task's stdout on stdout and its stderr on stderr; --stream picks one (on stdout).
TEST_F(CliTest, LogsShowStdoutAndStderr) {
  const CliResult sub = As("alice", {"submit", "--queue", "vision-dev", "-o", "json", "--", "sh",
                                     "-c", "echo to-out; echo to-err >&2"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const std::string id = std::to_string(ParseOrNull(sub.out)["id"].get<uint64_t>());
  ASSERT_EQ(As("alice", {"wait", id, "--timeout", "30"}).code, 0);
  const CliResult both = As("alice", {"logs", id});
  ASSERT_EQ(both.code, 0) << both.err;
  EXPECT_EQ(both.out, "to-out\n");
  EXPECT_EQ(both.err, "to-err\n");
  const CliResult followed = As("alice", {"logs", id, "-f"});
  EXPECT_EQ(followed.out, "to-out\n");
  EXPECT_EQ(followed.err, "to-err\n");
  const CliResult err = As("alice", {"logs", id, "--stream", "stderr"});
  EXPECT_EQ(err.out, "to-err\n");
  EXPECT_EQ(err.err, "");
  EXPECT_EQ(As("alice", {"logs", id, "--stream", "stdout"}).out, "to-out\n");
  EXPECT_EQ(As("alice", {"logs", id, "--stream", "stdin"}).code, 2);
}

// A job array: one job per index in one batch, ARBITER_ARRAY_INDEX (and SLURM_ARRAY_* for batch
// scripts) set for each; a %N limit is refused before anything is sent.
TEST_F(CliTest, JobArraysSubmitOneJobPerIndex) {
  const CliResult sub =
      As("alice", {"submit", "--array", "0-4:2,7", "--queue", "vision-dev", "--name", "sweep", "-o",
                   "json", "--", "sh", "-c", "echo index=$ARBITER_ARRAY_INDEX"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const json items = ParseOrNull(sub.out)["items"];
  ASSERT_EQ(items.size(), 4u) << sub.out;
  const std::vector<std::string> names = {"sweep-0", "sweep-2", "sweep-4", "sweep-7"};
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i]["name"], names[i]);
    EXPECT_EQ(items[i]["env"]["ARBITER_ARRAY_INDEX"], names[i].substr(6));
  }
  const std::string last = std::to_string(items[3]["id"].get<uint64_t>());
  ASSERT_EQ(As("alice", {"wait", last, "--timeout", "30"}).code, 0);
  EXPECT_EQ(As("alice", {"logs", last}).out, "index=7\n");
  WriteFile(work_.path() + "/array.sh",
            "#!/bin/sh\n#SBATCH -p vision-dev\n#SBATCH --array=1-2\n"
            "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT\n");
  const json dry = ParseOrNull(As("alice", {"submit", "--dry-run", "-o", "json", "array.sh"}).out);
  ASSERT_EQ(dry["jobs"].size(), 2u) << dry;
  EXPECT_EQ(dry["jobs"][1]["env"]["SLURM_ARRAY_TASK_ID"], "2");
  EXPECT_EQ(dry["jobs"][1]["env"]["SLURM_ARRAY_TASK_COUNT"], "2");
  const CliResult limited =
      As("alice", {"submit", "--array", "1-3%2", "--queue", "vision-dev", "--", "true"});
  EXPECT_EQ(limited.code, 2);
  EXPECT_TRUE(Contains(limited.err, "--array=1-3%2: a limit on how many run at once"))
      << limited.err;
}

TEST_F(CliTest, FailingJobMakesWaitFail) {
  const uint64_t id = Submit("alice", {"--queue", "vision-dev", "--", "sh", "-c", "exit 7"});
  const CliResult wait = As("alice", {"wait", std::to_string(id), "--timeout", "30"});
  EXPECT_EQ(wait.code, 1) << wait.err;
  EXPECT_EQ(wait.out, fmt::format("job {} failed (exit code 7): a task exited with code 7\n", id));
  const json j = ParseOrNull(As("alice", {"wait", std::to_string(id), "-o", "json"}).out);
  EXPECT_EQ(j["exit_code"], 7);
  // A timeout that runs out exits 5.
  const uint64_t slow = Submit("alice", {"--queue", "vision-dev", "--", "sleep", "30"});
  const CliResult timeout = As("alice", {"wait", std::to_string(slow), "--timeout", "0.3"});
  EXPECT_EQ(timeout.code, 5);
  EXPECT_TRUE(Contains(timeout.err, fmt::format("job {} is still", slow))) << timeout.err;
  EXPECT_EQ(As("alice", {"cancel", std::to_string(slow)}).code, 0);
}

TEST_F(CliTest, CancelSuspendResumeRetry) {
  const uint64_t id =
      Submit("alice", {"--queue", "vision-train", "--gpus", "2", "--", "sleep", "60"});
  ASSERT_TRUE(WaitState(id, "running"));
  const std::string sid = std::to_string(id);
  const CliResult running = As("alice", {"show", sid});
  EXPECT_TRUE(std::regex_search(running.out,
                                std::regex("  Placement:   task 0 on box, GPUs [0-7],[0-7]\n")))
      << running.out;
  const CliResult suspend = As("alice", {"suspend", sid});
  EXPECT_EQ(suspend.code, 0) << suspend.err;
  EXPECT_EQ(suspend.out, fmt::format("job {} suspended (suspended)\n", id));
  const CliResult resume = As("alice", {"resume", sid, "-o", "json"});
  EXPECT_EQ(resume.code, 0) << resume.err;
  EXPECT_EQ(ParseOrNull(resume.out)["state"], "pending");
  const CliResult again = As("alice", {"resume", sid});
  EXPECT_EQ(again.code, 1);
  EXPECT_TRUE(Contains(again.err, "not suspended")) << again.err;
  const CliResult cancel = As("alice", {"cancel", sid, "999"});
  EXPECT_EQ(cancel.code, 1);
  EXPECT_TRUE(Contains(cancel.out, fmt::format("job {} cancelled (cancelled)", id))) << cancel.out;
  EXPECT_EQ(cancel.err, "error: job 999 not found\n");
  ASSERT_TRUE(WaitState(id, "cancelled"));
  const CliResult retry = As("alice", {"retry", sid, "-o", "yaml"});
  EXPECT_EQ(retry.code, 0) << retry.err;
  EXPECT_TRUE(Contains(retry.out, "state: retry-wait")) << retry.out;
  const CliResult both = As("alice", {"cancel", sid, "-o", "json"});
  EXPECT_EQ(ParseOrNull(both.out)["state"], "cancelled") << both.out;
  // A viewer may not act; the server says so and the exit code is 4.
  const CliResult viewer = As("vic", {"cancel", sid});
  EXPECT_EQ(viewer.code, 4) << viewer.err;
}

TEST_F(CliTest, ServerErrorsAreShownAsTheServerSaysThem) {
  const CliResult r = As("alice", {"submit", "--queue", "vision-trian", "--", "true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_EQ(r.err,
            "error: queue vision-trian not found; queues you can use: vision-train, "
            "vision-dev\n");
  const CliResult viewer = As("vic", {"submit", "--queue", "vision-dev", "--", "true"});
  EXPECT_EQ(viewer.code, 4);
  EXPECT_EQ(viewer.err, "error: viewers may not submit jobs\n");
  const CliResult missing = As("alice", {"show", "4242"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_EQ(missing.err, "error: job 4242 not found\n");
  const CliResult model = As("alice", {"submit", "--queue", "vision-dev", "--gpus", "1",
                                       "--gpu-model", "H100", "--", "true"});
  EXPECT_EQ(model.code, 1);
  EXPECT_EQ(model.err, "error: gpu_models[0]: unknown GPU model 'H100'\n");
  const CliResult bad_token = As("alice", {"jobs", "--token", "nope"});
  EXPECT_EQ(bad_token.code, 4);
  EXPECT_TRUE(
      Contains(bad_token.err, "refused the token; log in with `arbiter login --server " + url_))
      << bad_token.err;
  // No queue at all: the message lists the usable ones.
  const CliResult noq = As("alice", {"submit", "--", "true"});
  EXPECT_EQ(noq.code, 2);
  EXPECT_TRUE(Contains(noq.err, "queues you can use: vision-train, vision-dev")) << noq.err;
  // The default queue from the environment.
  const CliResult envq = As("alice", {"submit", "--dry-run", "-o", "json", "--", "true"}, false,
                            {{"ARBITER_QUEUE", "vision-dev"}});
  EXPECT_EQ(ParseOrNull(envq.out)["queue"], "vision-dev");
}

TEST_F(CliTest, BatchScriptsRunOnTheBuiltInNode) {
  // The job runs in the folder it was submitted from and writes its output there, as alice's
  // uid (her run_as): the folder is hers, as a user's own folder is.
  ASSERT_EQ(chown(work_.path().c_str(), 4242, 4242), 0);
  WriteFile(work_.path() + "/train.sh",
            "#!/bin/sh\n"
            "#SBATCH --job-name=train-smoke\n"
            "#SBATCH -p vision-train\n"
            "#SBATCH --gres=gpu:a100:2   # typed GPUs, resolved to the cluster's model\n"
            "#SBATCH -t 5\n"
            "#SBATCH -o slurm-%j.out\n"
            "#SBATCH -A vision\n"
            "echo \"id=$SLURM_JOB_ID ntasks=$SLURM_NTASKS procid=$SLURM_PROCID "
            "nodeid=$SLURM_NODEID gpus=$SLURM_GPUS_ON_NODE cuda=$CUDA_VISIBLE_DEVICES "
            "name=$SLURM_JOB_NAME arg=$1 pwd=$(pwd)\"\n");
  const CliResult sub = As("alice", {"submit", "--parsable", "train.sh", "first"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  EXPECT_TRUE(Contains(sub.err, "GPU model a100 is A100-80G on this cluster")) << sub.err;
  const std::string id = sub.out.substr(0, sub.out.find('\n'));
  const CliResult wait = As("alice", {"wait", id, "--timeout", "30"});
  ASSERT_EQ(wait.code, 0) << wait.out << wait.err;
  const std::string out = ReadFile(work_.path() + "/slurm-" + id + ".out");
  const std::string dir = std::filesystem::canonical(work_.path()).string();
  EXPECT_TRUE(std::regex_match(
      out, std::regex(fmt::format("id={} ntasks=1 procid=0 nodeid=0 gpus=2 cuda=[0-7],[0-7] "
                                  "name=train-smoke arg=first pwd={}\n",
                                  id, dir))))
      << out;
  const json j = Job(std::stoull(id));
  EXPECT_EQ(j["gpu_models"], json({"A100-80G"}));
  EXPECT_EQ(j["walltime_seconds"], 300);
  const CliResult show = As("alice", {"show", id});
  EXPECT_TRUE(Contains(show.out, "  Command:     batch script train.sh first")) << show.out;

  // A failing script makes wait fail; -A of another tenant is refused before submitting.
  WriteFile(work_.path() + "/fail.sh", "#!/bin/sh\n#SBATCH -p vision-dev\necho failing; exit 3\n");
  const uint64_t failing = Submit("alice", {"fail.sh"});
  const CliResult fw = As("alice", {"wait", std::to_string(failing), "--timeout", "30"});
  EXPECT_EQ(fw.code, 1) << fw.out << fw.err;
  EXPECT_TRUE(Contains(fw.out, "failed (exit code 3)")) << fw.out;
  WriteFile(work_.path() + "/other.sh", "#!/bin/sh\n#SBATCH -p vision-dev -A speech\ntrue\n");
  const CliResult other = As("alice", {"submit", "other.sh"});
  EXPECT_EQ(other.code, 1);
  EXPECT_TRUE(Contains(other.err, "--account=speech: your token is for tenant vision"))
      << other.err;
}

TEST_F(CliTest, ClusterViewsAndAdministration) {
  const uint64_t id =
      Submit("alice", {"--queue", "vision-train", "--gpus", "8", "--", "sleep", "30"});
  ASSERT_TRUE(WaitState(id, "running"));
  Submit("alice", {"--queue", "vision-train", "--gpus", "1", "--", "true"});  // waits: queue full

  const CliResult queues = As("alice", {"queues"});
  ASSERT_EQ(queues.code, 0) << queues.err;
  EXPECT_TRUE(Contains(queues.out,
                       "NAME          TENANT  GPU USED  GUARANTEED  MAX  BORROWED  "
                       "PENDING  RUNNING\n"))
      << queues.out;
  EXPECT_TRUE(std::regex_search(queues.out, std::regex("vision-train +vision +8 +8 +8 +0 +1 +1\n")))
      << queues.out;
  EXPECT_TRUE(Contains(As("alice", {"queues", "-o", "wide"}).out, "DEFAULT WALLTIME"));
  const json qj = ParseOrNull(As("alice", {"queues", "-o", "json"}).out);
  EXPECT_EQ(qj["items"].size(), 2u);  // alice's tenant only
  EXPECT_TRUE(Contains(As("alice", {"queues", "-o", "yaml"}).out, "name: vision-train"));

  const CliResult nodes = As("alice", {"nodes"});
  EXPECT_TRUE(std::regex_search(nodes.out, std::regex("box +ready +A100-80G +8/8 +32 +128Gi +-\n")))
      << nodes.out;
  EXPECT_TRUE(Contains(As("alice", {"nodes", "-o", "wide"}).out, "SOURCE"));
  EXPECT_EQ(ParseOrNull(As("alice", {"nodes", "-o", "json"}).out)["items"][0]["name"], "box");
  EXPECT_TRUE(Contains(As("alice", {"nodes", "-o", "yaml"}).out, "name: box"));

  const CliResult top = As("alice", {"top", "--once"});
  ASSERT_EQ(top.code, 0) << top.err;
  EXPECT_TRUE(
      Contains(top.out, "GPUs 8/8 in use (100%)   nodes 1 (1 ready)   jobs 1 running, 1 pending"))
      << top.out;
  EXPECT_TRUE(std::regex_search(top.out, std::regex("box +ready +A100-80G +\\[#{16}\\] +8/8")))
      << top.out;
  const json tj = ParseOrNull(As("alice", {"top", "-o", "json"}).out);
  EXPECT_EQ(tj["nodes"][0]["gpus_used"], 8);
  EXPECT_EQ(tj["queues"][0]["name"], "vision-train");
  EXPECT_TRUE(Contains(As("alice", {"top", "-o", "yaml"}).out, "gpus_used: 8\n"));

  EXPECT_TRUE(Contains(As("alice", {"tenants"}).out, "vision  vision-train,vision-dev  -"));
  EXPECT_EQ(ParseOrNull(As("admin", {"tenants", "-o", "json"}).out)["items"].size(), 2u);
  EXPECT_TRUE(Contains(As("admin", {"users"}).out, "alice  vision  member"));
  EXPECT_TRUE(Contains(As("admin", {"users", "-o", "yaml"}).out, "name: vic"));
  const CliResult created = As("admin", {"users", "create", "bob", "--tenant", "speech"});
  EXPECT_EQ(created.code, 0) << created.err;
  EXPECT_TRUE(Contains(created.out, "user bob created (tenant speech, role member)"));
  EXPECT_TRUE(Contains(As("admin", {"priority-classes"}).out, "high    1000   no"));

  const CliResult token = As("admin", {"token", "create", "--user", "bob"});
  ASSERT_EQ(token.code, 0) << token.err;
  const std::string bob = token.out.substr(0, token.out.find('\n'));
  EXPECT_EQ(token.out, bob + "\n");
  EXPECT_TRUE(Contains(token.err, "shown only now")) << token.err;
  CliOptions o;
  o.env = {{"HOME", home_.path()}, {"ARBITER_SERVER", url_}, {"ARBITER_TOKEN", bob}};
  EXPECT_EQ(ParseOrNull(RunCli({"whoami", "-o", "json"}, o).out)["user"], "bob");
  const json tok = ParseOrNull(As("admin", {"token", "create", "--user", "bob", "-o", "json"}).out);
  EXPECT_TRUE(tok["token"].is_string());
  EXPECT_EQ(As("alice", {"token", "create", "--user", "bob"}).code, 1);  // another tenant's

  // apply: a dry run shows the change, then it is made.
  const std::string more =
      std::string(kConfig) + "      - {name: speech-dev, guaranteed: {gpu: 0}}\n";
  std::string config = kConfig;
  config.replace(config.find("      - {name: speech-train, guaranteed: {gpu: 0}}\n"), 0,
                 "      - {name: speech-dev, guaranteed: {gpu: 0}}\n");
  WriteFile(work_.path() + "/cluster.yaml", config);
  const CliResult dry = As("admin", {"apply", "-f", "cluster.yaml", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_TRUE(std::regex_search(dry.out, std::regex("create +queue +speech-dev"))) << dry.out;
  EXPECT_TRUE(Contains(dry.out, "would be applied")) << dry.out;
  EXPECT_FALSE(Contains(As("admin", {"queues"}).out, "speech-dev"));
  const CliResult applied = As("admin", {"apply", "-f", "cluster.yaml"});
  EXPECT_EQ(applied.code, 0) << applied.err;
  EXPECT_TRUE(Contains(As("admin", {"queues"}).out, "speech-dev"));
  EXPECT_TRUE(Contains(As("admin", {"apply", "-f", "cluster.yaml"}).out, "no changes"));
  EXPECT_EQ(
      ParseOrNull(As("admin", {"apply", "-f", "cluster.yaml", "-o", "json"}).out)["changes"].size(),
      0u);
  WriteFile(work_.path() + "/broken.yaml", "tenants:\n  - name: x\n    guaranteed: {gpu: eight}\n");
  const CliResult broken = As("admin", {"apply", "-f", "broken.yaml"});
  EXPECT_EQ(broken.code, 1);
  EXPECT_TRUE(Contains(broken.err, "broken.yaml: ")) << broken.err;
  EXPECT_TRUE(Contains(broken.err, "tenants[0].guaranteed.gpu")) << broken.err;
  EXPECT_EQ(As("alice", {"apply", "-f", "cluster.yaml"}).code, 4);  // members may not

  // cordon / uncordon.
  EXPECT_TRUE(Contains(As("admin", {"cordon", "box"}).out, "node box is cordoned"));
  EXPECT_TRUE(Contains(As("admin", {"uncordon", "box"}).out, "node box is ready"));
  (void)more;
}

TEST_F(CliTest, ConfigGetRoundTripsThroughApply) {
  const CliResult yaml = As("admin", {"config", "get"});
  ASSERT_EQ(yaml.code, 0) << yaml.err;
  EXPECT_TRUE(Contains(yaml.out, "vision-dev")) << yaml.out;
  WriteFile(work_.path() + "/exported.yaml", yaml.out);
  const CliResult again = As("admin", {"apply", "-f", "exported.yaml"});
  EXPECT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(Contains(again.out, "no changes")) << again.out;
  const json j = ParseOrNull(As("admin", {"config", "get", "-o", "json"}).out);
  ASSERT_TRUE(j.is_object());
  ASSERT_TRUE(j["tenants"].is_array());
  EXPECT_EQ(j["tenants"][0]["name"], "vision");
  EXPECT_EQ(As("alice", {"config", "get"}).code, 4);  // admins only
}

TEST_F(CliTest, ApplyRefusesToOrphanLiveJobsAndPruneCancelsThem) {
  const uint64_t id = Submit("alice", {"--queue", "vision-dev", "--", "sleep", "600"});
  ASSERT_NE(id, 0u);
  std::string config = kConfig;
  const std::string line = "      - {name: vision-dev, guaranteed: {gpu: 0}}\n";
  config.erase(config.find(line), line.size());
  WriteFile(work_.path() + "/partial.yaml", config);
  // The dry run names the job the file would leave behind.
  const CliResult dry = As("admin", {"apply", "-f", "partial.yaml", "--dry-run"});
  ASSERT_EQ(dry.code, 0) << dry.err;
  EXPECT_TRUE(std::regex_search(dry.out, std::regex("delete +queue +vision-dev"))) << dry.out;
  EXPECT_TRUE(std::regex_search(dry.out, std::regex(std::to_string(id) + " +vision +vision-dev")))
      << dry.out;
  EXPECT_TRUE(Contains(dry.out, "--prune")) << dry.out;
  const json dj =
      ParseOrNull(As("admin", {"apply", "-f", "partial.yaml", "--dry-run", "-o", "json"}).out);
  EXPECT_EQ(dj["affected_total"], 1);
  EXPECT_EQ(dj["needs_prune"], true);
  EXPECT_EQ(dj["affected_jobs"][0]["id"], id);
  // Applied without --prune: refused, nothing changes, the job lives on.
  const CliResult refused = As("admin", {"apply", "-f", "partial.yaml"});
  EXPECT_NE(refused.code, 0);
  EXPECT_TRUE(Contains(refused.err, "--prune")) << refused.err;
  EXPECT_TRUE(Contains(refused.err, std::to_string(id))) << refused.err;
  EXPECT_TRUE(Contains(As("admin", {"queues"}).out, "vision-dev"));
  const std::string state = Job(id)["state"];
  EXPECT_TRUE(state == "pending" || state == "running") << state;
  // With --prune: applied, and the job is cancelled saying why.
  const CliResult pruned = As("admin", {"apply", "-f", "partial.yaml", "--prune"});
  ASSERT_EQ(pruned.code, 0) << pruned.err;
  EXPECT_TRUE(Contains(pruned.out, "1 job cancelled")) << pruned.out;
  EXPECT_FALSE(Contains(As("admin", {"queues"}).out, "vision-dev"));
  const json after = Job(id);
  EXPECT_EQ(after["state"], "cancelled");
  EXPECT_TRUE(Contains(after.value("reason", ""), "queue 'vision-dev' is deleted")) << after;
  // Finished jobs never hold a deletion back.
  WriteFile(work_.path() + "/full.yaml", kConfig);
  ASSERT_EQ(As("admin", {"apply", "-f", "full.yaml"}).code, 0);
  EXPECT_EQ(As("admin", {"apply", "-f", "partial.yaml"}).code, 0);
}

TEST_F(CliTest, EventsFollowShowsChangesAsTheyHappen) {
  CliOptions o;
  o.env = {{"HOME", home_.path()}, {"ARBITER_SERVER", url_}, {"ARBITER_TOKEN", tokens_["alice"]}};
  // Follow from the last event there is now, so nothing depends on when the stream connects.
  const CliResult before = As("alice", {"events", "-o", "json"});
  ASSERT_EQ(before.code, 0) << before.err;
  uint64_t last = 0;
  std::stringstream lines(before.out);
  for (std::string line; std::getline(lines, line);) {
    last = std::max(last, ParseOrNull(line).value("seq", uint64_t{0}));
  }
  CliProcess follow;
  ASSERT_TRUE(follow.Start({"events", "-f", "-o", "json", "--since", std::to_string(last)}, o));
  const uint64_t id = Submit("alice", {"--queue", "vision-dev", "--", "true"});
  const bool seen = follow.ReadUntil(
      [&](const std::string& out) {
        std::stringstream s(out);
        for (std::string line; std::getline(s, line);) {
          const json e = ParseOrNull(line);
          if (e.is_object() && e["kind"] == "job" && e["data"]["id"] == id &&
              e["data"]["to"] == "succeeded") {
            return true;
          }
        }
        return false;
      },
      30);
  EXPECT_TRUE(seen) << follow.output();
  // Without -f: what the server holds, then it ends; one job's changes with an id and -f.
  const CliResult all = As("alice", {"events"});
  EXPECT_EQ(all.code, 0) << all.err;
  EXPECT_TRUE(Contains(all.out, "SEQ      KIND    OBJECT")) << all.out;
  EXPECT_TRUE(Contains(all.out, fmt::format("job/{}", id))) << all.out;
  EXPECT_TRUE(Contains(all.out, "running -> succeeded")) << all.out;
  const CliResult yaml = As("alice", {"events", "-o", "yaml"});
  EXPECT_TRUE(Contains(yaml.out, "---\ndata:\n")) << yaml.out;
  EXPECT_TRUE(Contains(yaml.out, "\nkind: job\nseq: ")) << yaml.out;
}

TEST_F(CliTest, ColoursOnlyOnATerminal) {
  const uint64_t id = Submit("alice", {"--queue", "vision-dev", "--", "true"});
  ASSERT_TRUE(WaitState(id, "succeeded"));
  const CliResult tty = As("alice", {"jobs"}, /*tty=*/true);
  EXPECT_EQ(tty.code, 0);
  EXPECT_TRUE(Contains(tty.out, "\033[32msucceeded\033[0m")) << tty.out;
  const CliResult no_color = As("alice", {"jobs"}, true, {{"NO_COLOR", "1"}});
  EXPECT_FALSE(Contains(no_color.out, "\033[")) << no_color.out;
  EXPECT_FALSE(Contains(As("alice", {"jobs"}).out, "\033["));
}

}  // namespace
}  // namespace arbiter::testing
