// Integration tests of the `arbiter` client commands against a real server on loopback (the
// commands that need none are in cli_local_test.cc): HOME in a temporary folder, bounded polls.
// Every command, every output format, the server's error messages, and Slurm batch scripts run
// on the built-in node.
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
  // They have all ended: `jobs` lists none of them, `jobs --all` every one.
  EXPECT_EQ(As("alice", {"jobs"}).out, "");
  const CliResult table = As("alice", {"jobs", "--all"});
  ASSERT_EQ(table.code, 0) << table.err;
  std::vector<std::string> lines;
  std::stringstream s(table.out);
  for (std::string l; std::getline(s, l);) lines.push_back(l);
  ASSERT_EQ(lines.size(), 5u) << table.out;
  EXPECT_EQ(lines[0].rfind("ID  NAME   QUEUE       USER   STATE      TIME  LIMIT      NODES  GPUS  "
                           "NODELIST(REASON)",
                           0),
            0u)
      << table.out;
  const size_t state_col = lines[0].find("STATE");
  EXPECT_EQ(lines[1].substr(state_col, 9), "succeeded");
  EXPECT_EQ(lines[4].substr(state_col, 9), "succeeded");
  EXPECT_FALSE(Contains(table.out, "\033[")) << "no colours off a terminal";
  const CliResult wide = As("alice", {"jobs", "--all", "-o", "wide"});
  EXPECT_TRUE(Contains(wide.out, "TENANT  TYPE      PRIORITY  RESTARTS  EXIT  AGE  REASON"))
      << wide.out;
  EXPECT_TRUE(Contains(wide.out, "all tasks exited 0")) << wide.out;
  const json list = ParseOrNull(As("alice", {"jobs", "--all", "-o", "json"}).out);
  ASSERT_EQ(list["items"].size(), 4u);
  EXPECT_EQ(list["items"][0]["name"], "hello");
  EXPECT_TRUE(Contains(As("alice", {"jobs", "--all", "-o", "yaml"}).out, "items:\n  - "));
  EXPECT_EQ(ParseOrNull(
                As("alice", {"jobs", "--all", "-o", "json", "--limit", "1"}).out)["items"][0]["id"],
            second);
  EXPECT_EQ(ParseOrNull(As("alice", {"jobs", "-o", "json"}).out)["items"].size(), 0u);
  EXPECT_EQ(ParseOrNull(As("admin", {"jobs", "--all", "-o", "json", "--mine"}).out)["items"].size(),
            0u);
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

// logs: stdout and stderr in the order the task wrote them, on stdout; --stdout and --stderr
// (or --stream) pick one.
TEST_F(CliTest, LogsShowStdoutAndStderrAsWritten) {
  const CliResult sub =
      As("alice", {"submit", "--queue", "vision-dev", "-o", "json", "--", "sh", "-c",
                   "echo out1; sleep 0.2; echo err1 >&2; sleep 0.2; echo out2; printf tail >&2"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const std::string id = std::to_string(ParseOrNull(sub.out)["id"].get<uint64_t>());
  ASSERT_EQ(As("alice", {"wait", id, "--timeout", "30"}).code, 0);
  const CliResult both = As("alice", {"logs", id});
  ASSERT_EQ(both.code, 0) << both.err;
  EXPECT_EQ(both.out, "out1\nerr1\nout2\ntail");
  EXPECT_EQ(both.err, "");
  EXPECT_EQ(As("alice", {"logs", id, "-f"}).out, both.out);  // ended: -f prints it and ends
  EXPECT_EQ(As("alice", {"logs", id, "--stream", "both"}).out, both.out);
  const CliResult err = As("alice", {"logs", id, "--stderr"});
  EXPECT_EQ(err.out, "err1\ntail");
  EXPECT_EQ(err.err, "");
  EXPECT_EQ(As("alice", {"logs", id, "--stdout"}).out, "out1\nout2\n");
  EXPECT_EQ(As("alice", {"logs", id, "--stream", "stderr"}).out, "err1\ntail");
  EXPECT_EQ(As("alice", {"logs", id, "--stream", "stdin"}).code, 2);
  EXPECT_EQ(As("alice", {"logs", id, "--stdout", "--stderr"}).code, 2);
  EXPECT_EQ(As("alice", {"logs", id, "--run", "1"}).out, both.out);
  const CliResult no_run = As("alice", {"logs", id, "--run", "2"});
  EXPECT_EQ(no_run.code, 1);
  EXPECT_TRUE(Contains(no_run.err, "has no log of run 2")) << no_run.err;
}

// Every run of a task is kept; `logs` shows them in order, each after a line that says why the
// run before it ended; --run shows one.
TEST_F(CliTest, LogsSeparateTheRunsOfARetriedJob) {
  WriteFile(work_.path() + "/flaky.yaml", R"(queue: vision-dev
command: [sh, -c, 'if [ -f "$ARBITER_CHECKPOINT_DIR/ran" ]; then echo second; else touch "$ARBITER_CHECKPOINT_DIR/ran"; echo first; echo failing >&2; exit 3; fi']
retry: {max_retries: 1, backoff_seconds: 0}
)");
  const uint64_t id = Submit("alice", {"flaky.yaml"});
  ASSERT_EQ(As("alice", {"wait", std::to_string(id), "--timeout", "30"}).code, 0);
  const CliResult logs = As("alice", {"logs", std::to_string(id)});
  ASSERT_EQ(logs.code, 0) << logs.err;
  EXPECT_EQ(logs.out, "first\nfailing\n--- run 2, after a retry (exit 3) ---\nsecond\n");
  EXPECT_EQ(As("alice", {"logs", std::to_string(id), "--stdout"}).out,
            "first\n--- run 2, after a retry (exit 3) ---\nsecond\n");
  EXPECT_EQ(As("alice", {"logs", std::to_string(id), "--run", "1"}).out, "first\nfailing\n");
  EXPECT_EQ(As("alice", {"logs", std::to_string(id), "--run", "2"}).out, "second\n");
}

// logs -f on a job held pending (a dependency) says why it waits, then prints the job's output
// once it runs and exits 0 when it ends.
TEST_F(CliTest, LogsFollowAPendingJobUntilItEnds) {
  const uint64_t first = Submit("alice", {"--queue", "vision-dev", "--", "sleep", "2"});
  const uint64_t id = Submit(
      "alice", {"--queue", "vision-dev", "--dependency", fmt::format("afterok:{}", first), "--",
                "sh", "-c", "echo b-out; sleep 0.2; echo b-err >&2; sleep 0.2; echo b-done"});
  bool waits = false;
  for (int i = 0; i < 200 && !waits; ++i) {
    waits =
        ParseOrNull(As("alice", {"why", std::to_string(id), "-o", "json"}).out).value("code", "") ==
        "Dependency";
    if (!waits) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(waits);
  const CliResult followed = As("alice", {"logs", std::to_string(id), "-f"});
  EXPECT_EQ(followed.code, 0) << followed.err;
  EXPECT_EQ(followed.out, "b-out\nb-err\nb-done\n");
  EXPECT_TRUE(Contains(followed.err, fmt::format("note: job {} is pending (Dependency: ", id)))
      << followed.err;
  EXPECT_TRUE(Contains(followed.err, "waiting for it to run")) << followed.err;
  EXPECT_EQ(Job(id).value("state", ""), "succeeded");
}

// --all-tasks: every task's lines after its index, as srun -l writes them.
TEST_F(CliTest, LogsOfEveryTask) {
  const uint64_t id = Submit("alice", {"--queue", "vision-dev", "--tasks", "2", "--", "sh", "-c",
                                       "echo task $ARBITER_TASK_INDEX; printf half"});
  ASSERT_EQ(As("alice", {"wait", std::to_string(id), "--timeout", "30"}).code, 0);
  const CliResult all = As("alice", {"logs", std::to_string(id), "--all-tasks"});
  ASSERT_EQ(all.code, 0) << all.err;
  EXPECT_EQ(all.out, "0: task 0\n0: half\n1: task 1\n1: half\n");
  EXPECT_EQ(As("alice", {"logs", std::to_string(id), "--task", "1"}).out, "task 1\nhalf");
  // Followed, the tasks' lines come as they do: whole, in any order between tasks.
  auto lines = [](const std::string& text) {
    std::vector<std::string> v;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) v.push_back(line);
    std::sort(v.begin(), v.end());
    return v;
  };
  EXPECT_EQ(lines(As("alice", {"logs", std::to_string(id), "--all-tasks", "-f"}).out),
            lines(all.out));
  EXPECT_EQ(As("alice", {"logs", std::to_string(id), "--all-tasks", "--task", "1"}).code, 2);
}

// A job array: one submission, one job per index with the array's name and ARBITER_ARRAY_* in its
// environment; -o json lists the elements, --parsable prints the array's id, --dry-run the body.
TEST_F(CliTest, JobArraysSubmitOneJobPerIndex) {
  const CliResult sub =
      As("alice", {"submit", "--array", "0-4:2,7", "--queue", "vision-dev", "--name", "sweep", "-o",
                   "json", "--", "sh", "-c", "echo index=$ARBITER_ARRAY_INDEX"});
  ASSERT_EQ(sub.code, 0) << sub.err;
  const json items = ParseOrNull(sub.out)["items"];
  ASSERT_EQ(items.size(), 4u) << sub.out;
  const uint64_t array = items[0]["id"].get<uint64_t>();
  const std::vector<int64_t> indices = {0, 2, 4, 7};
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ(items[i]["name"], "sweep");  // the array's name, as in Slurm
    EXPECT_EQ(items[i]["array"],
              (json{{"id", array}, {"index", indices[i]}, {"size", 4}, {"max_running", 0}}));
    EXPECT_FALSE(items[i]["env"].contains("ARBITER_ARRAY_INDEX"));  // the node sets it
  }
  const std::string last = std::to_string(items[3]["id"].get<uint64_t>());
  ASSERT_EQ(As("alice", {"wait", last, "--timeout", "30"}).code, 0);
  EXPECT_EQ(As("alice", {"logs", last}).out, "index=7\n");
  EXPECT_EQ(As("alice", {"logs", fmt::format("{}_4", array)}).out, "index=4\n");
  // The whole array, waited for as one.
  const CliResult wait = As("alice", {"wait", std::to_string(array), "--timeout", "30"});
  EXPECT_EQ(wait.code, 0) << wait.err;
  EXPECT_EQ(wait.out, fmt::format("array {} ended: 4 succeeded\n", array));
  WriteFile(work_.path() + "/array.sh",
            "#!/bin/sh\n#SBATCH -p vision-dev\n#SBATCH --array=1-2%1\n"
            "echo task $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT\n");
  const CliResult dry = As("alice", {"submit", "--dry-run", "-o", "json", "array.sh"});
  EXPECT_EQ(ParseOrNull(dry.out)["array"], (json{{"indices", "1-2"}, {"max_running", 1}}))
      << dry.out;
  EXPECT_EQ(dry.err, "dry run: nothing was submitted (a job array of 2 jobs)\n");
  const CliResult parsable = As("alice", {"submit", "--parsable", "array.sh"});
  ASSERT_EQ(parsable.code, 0) << parsable.err;
  const uint64_t script_array = std::stoull(parsable.out);
  EXPECT_EQ(parsable.out, fmt::format("{}\n", script_array));
  const CliResult text =
      As("alice", {"submit", "--array", "1-3%2", "--queue", "vision-dev", "--", "true"});
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_EQ(text.out, fmt::format("array {0} submitted to vision-dev: 3 jobs (ids {0} to {1}, "
                                  "indices 1-3), at most 2 at once\n",
                                  script_array + 2, script_array + 4));
  const CliResult bad =
      As("alice", {"submit", "--array", "1-3%0", "--queue", "vision-dev", "--", "true"});
  EXPECT_EQ(bad.code, 2);
  EXPECT_TRUE(Contains(bad.err, "--array=1-3%0: '%0'")) << bad.err;
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
  // Pending at once, or once its processes are gone when they are still stopping.
  const json resumed = ParseOrNull(resume.out);
  EXPECT_TRUE(resumed["state"] == "pending" || resumed["state"] == "suspended") << resume.out;
  ASSERT_TRUE(WaitState(id, "running"));  // back in its queue, and scheduled again
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
  EXPECT_EQ(model.err,
            "error: gpu_models[0]: unknown GPU model 'H100'; the cluster's models: A100-80G\n");
  const CliResult bad_token = As("alice", {"jobs", "--token", "nope"});
  EXPECT_EQ(bad_token.code, 4);
  EXPECT_TRUE(
      Contains(bad_token.err, "refused the token; log in with `arbiter login --server " + url_))
      << bad_token.err;
  // No queue at all, and no default_queue for the tenant: the server's message lists the usable
  // ones, and the client says how to give one.
  const CliResult noq = As("alice", {"submit", "--", "true"});
  EXPECT_EQ(noq.code, 1);
  EXPECT_TRUE(Contains(noq.err,
                       "tenant vision has no default_queue; queues you can use: "
                       "vision-train, vision-dev; pass --queue QUEUE"))
      << noq.err;
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
  const CliResult tty = As("alice", {"jobs", "--all"}, /*tty=*/true);
  EXPECT_EQ(tty.code, 0);
  EXPECT_TRUE(Contains(tty.out, "\033[32msucceeded\033[0m")) << tty.out;
  const CliResult no_color = As("alice", {"jobs", "--all"}, true, {{"NO_COLOR", "1"}});
  EXPECT_FALSE(Contains(no_color.out, "\033[")) << no_color.out;
  EXPECT_FALSE(Contains(As("alice", {"jobs", "--all"}).out, "\033["));
}

}  // namespace
}  // namespace arbiter::testing
