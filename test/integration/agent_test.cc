// Integration tests of node agents: the real server and real `arbiter agent` processes with fake
// GPUs on loopback, the agents reaching the server through a TCP proxy the test can cut.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "agent_process.h"
#include "checkpoint_job.h"
#include "cli_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr int kNodeTimeoutMs = 3000;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
  - name: other
    queues:
      - {name: other-q, guaranteed: {gpu: 0}}
users:
  - {name: eve, tenant: other, role: member}
)";

json Parse(const httplib::Result& r) {
  if (!r) return json();
  try {
    return json::parse(r->body);
  } catch (...) {
    return json();
  }
}

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// The value of VAR in `env | sort` output.
std::string EnvValue(const std::string& env, const std::string& var) {
  const std::string key = "\n" + var + "=";
  const std::string text = "\n" + env;
  const size_t at = text.find(key);
  if (at == std::string::npos) return "<unset>";
  const size_t begin = at + key.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

// Whether `pid` runs (a zombie waiting for its reaper does not).
bool Alive(pid_t pid) {
  const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
         stat[paren + 2] != 'X';
}

class AgentTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(StartServer(&server_)) << server_.output();
    admin_ = server_.Client(server_.admin_token());
    node_token_ = NodeToken(*admin_, "node-a");
    ASSERT_FALSE(node_token_.empty());
    ASSERT_TRUE(proxy_.Start(server_.port()));
  }

  void TearDown() override {
    for (auto& [name, agent] : agents_) {
      agent->Stop();
      if (HasFailure())
        std::fprintf(stderr, "--- log of agent %s:\n%s", name.c_str(), agent->Log().c_str());
      KillLeftoverTasks(agent->work_dir());
    }
  }

  bool StartServer(ServerProcess* s) {
    return s->Start(dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--node-timeout-ms",
                                  std::to_string(kNodeTimeoutMs)});
  }

  AgentProcess& StartAgent(const std::string& name, std::vector<std::string> extra = {}) {
    auto& agent = agents_[name];
    agent = std::make_unique<AgentProcess>();
    const std::string url = fmt::format("http://127.0.0.1:{}", proxy_.port());
    const std::string token = name == "node-a" ? node_token_ : NodeToken(*admin_, name);
    EXPECT_TRUE(agent->Start(url, token, name, WorkDir(name), extra)) << agent->Log();
    return *agent;
  }

  std::string WorkDir(const std::string& name) const { return dir_.path() + "/agent-" + name; }

  uint64_t Submit(json body, const std::string& queue = "lab-q") {
    body["queue"] = queue;
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r ? Parse(r)["id"].get<uint64_t>() : 0;
  }

  json Get(uint64_t id) { return Parse(admin_->Get(fmt::format("/api/v1/jobs/{}", id))); }

  std::vector<std::string> EventStates(uint64_t id) {
    std::vector<std::string> to;
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}/events", id));
    const json body = Parse(r);  // kept: a range over a temporary's member would dangle
    for (const json& e : body["items"]) to.push_back(e["to"]);
    if (to.empty())
      ADD_FAILURE() << "no events of job " << id << ": " << (r ? r->body : "no answer");
    return to;
  }

  static int Count(const std::vector<std::string>& v, const std::string& s) {
    return static_cast<int>(std::count(v.begin(), v.end(), s));
  }

  // Polls (bounded, 50 ms apart) until `pred` holds for the job; returns the job.
  template <typename Pred>
  json WaitUntil(uint64_t id, Pred pred, const std::string& what, int max_ms = 20000) {
    json j;
    const auto deadline = Clock::now() + std::chrono::milliseconds(max_ms);
    while (Clock::now() < deadline) {
      j = Get(id);
      if (pred(j)) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never " << what << ": " << j.dump();
    return j;
  }

  json WaitFor(uint64_t id, const std::string& state, int max_ms = 20000) {
    return WaitUntil(
        id, [&](const json& j) { return j["state"] == state; }, "became " + state, max_ms);
  }

  // Polls until the node is in `state`.
  void WaitNode(const std::string& name, const std::string& state, int max_ms = 20000) {
    json n;
    const auto deadline = Clock::now() + std::chrono::milliseconds(max_ms);
    while (Clock::now() < deadline) {
      n = Parse(admin_->Get("/api/v1/nodes/" + name));
      if (n["state"] == state) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "node " << name << " never became " << state << ": " << n.dump();
  }

  // The `why` of a pending job once a cycle has seen it (its expected_start an object), bounded.
  json WhyWithExpectedStart(uint64_t id) {
    const std::string path = fmt::format("/api/v1/jobs/{}/why", id);
    json why;
    for (int i = 0; i < 200; ++i) {
      why = Parse(admin_->Get(path));
      if (why.value("expected_start", json()).is_object()) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return why;
  }

  // The CLI as the admin against this server, with its home in `home`.
  CliOptions AdminCli(const TempDir& home) const {
    CliOptions cli;
    cli.env = {{"HOME", home.path()},
               {"ARBITER_SERVER", fmt::format("http://127.0.0.1:{}", server_.port())},
               {"ARBITER_TOKEN", server_.admin_token()}};
    return cli;
  }

  std::string Output(const std::string& node, uint64_t id, int task, const char* ext = "out") {
    return ReadFile(fmt::format("{}/jobs/{}/task-{}.{}", WorkDir(node), id, task, ext));
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
  std::string node_token_;
  TcpProxy proxy_;
  std::map<std::string, std::unique_ptr<AgentProcess>> agents_;
};

// A 2-task gang, 4 GPUs a task, on two agents of 4 fake GPUs each: each task sees its node's
// four GPUs, both the same master address and port, WORLD_SIZE 2 and ranks 0 and 1.
TEST_F(AgentTest, GangRunsAcrossTwoAgents) {
  StartAgent("node-a", {"--labels", "rack=r1,zone=a"});
  StartAgent("node-b", {"--labels", "rack=r2", "--gpu-memory-mib", "81920"});
  const json a = Parse(admin_->Get("/api/v1/nodes/node-a"));
  EXPECT_EQ(a["state"], "ready");
  EXPECT_EQ(a["source"], "agent");
  EXPECT_EQ(a["rack"], "r1");
  EXPECT_EQ(a["labels"]["zone"], "a");
  EXPECT_EQ(a["gpus"].size(), 4u);
  EXPECT_EQ(a["gpus"][0]["model"], "A100-80G");
  EXPECT_EQ(a["status"]["gpu_discovery"], "fake: 4 x (the server's first model)");
  const std::string cgroups = a["status"]["cgroups"];
  EXPECT_TRUE(cgroups.rfind("unavailable: ", 0) == 0 || cgroups.rfind("v2 ", 0) == 0 ||
              cgroups.rfind("v1 ", 0) == 0)
      << cgroups;

  const uint64_t id = Submit({{"command", {"sh", "-c", "env | sort"}},
                              {"tasks", 2},
                              {"distinct_nodes", true},
                              {"resources", {{"gpus", 4}}}});
  const json j = WaitFor(id, "succeeded");
  ASSERT_EQ(j["state"], "succeeded");
  std::map<int, std::string> env;  // by rank
  std::set<std::string> nodes;
  for (const char* node : {"node-a", "node-b"}) {
    for (int t = 0; t < 2; ++t) {
      const std::string out = Output(node, id, t);
      if (out.empty()) continue;
      env[t] = out;
      nodes.insert(node);
      EXPECT_EQ(EnvValue(out, "ARBITER_NODE_NAME"), node);
    }
  }
  ASSERT_EQ(env.size(), 2u);
  EXPECT_EQ(nodes.size(), 2u);
  for (const auto& [rank, out] : env) {
    EXPECT_EQ(EnvValue(out, "RANK"), std::to_string(rank));
    EXPECT_EQ(EnvValue(out, "WORLD_SIZE"), "2");
    std::set<std::string> gpus;
    std::stringstream list(EnvValue(out, "CUDA_VISIBLE_DEVICES"));
    for (std::string g; std::getline(list, g, ',');) gpus.insert(g);
    EXPECT_EQ(gpus, (std::set<std::string>{"0", "1", "2", "3"})) << out;
  }
  EXPECT_EQ(EnvValue(env[0], "MASTER_ADDR"), EnvValue(env[1], "MASTER_ADDR"));
  EXPECT_EQ(EnvValue(env[0], "MASTER_ADDR"), "127.0.0.1");
  EXPECT_EQ(EnvValue(env[0], "MASTER_PORT"), EnvValue(env[1], "MASTER_PORT"));
  EXPECT_NE(EnvValue(env[0], "MASTER_PORT"), "<unset>");
  // Telemetry arrives with the heartbeats.
  const json status = Parse(admin_->Get("/api/v1/nodes/node-b"))["status"];
  ASSERT_EQ(status["gpus"].size(), 4u);
  EXPECT_EQ(status["gpus"][0]["memory_total_mib"], 81920);
  EXPECT_EQ(status["gpus"][0]["utilization_pct"], 0);  // idle now
}

// kill -9 of the agent running a job: its node goes down within the heartbeat timeout, the task
// is lost, and the job is retried on the other agent; the old process dies with its agent.
TEST_F(AgentTest, JobRetriesOnTheOtherAgentWhenItsAgentIsKilled) {
  StartAgent("node-a");
  StartAgent("node-b");
  const uint64_t id = Submit({{"command", {"sleep", "30"}},
                              {"resources", {{"gpus", 4}}},
                              {"retry", {{"max_retries", 2}, {"backoff_seconds", 0}}}});
  json j = WaitFor(id, "running");
  const std::string first = j["placement"][0]["node"];
  const std::string other = first == "node-a" ? "node-b" : "node-a";
  std::ifstream pidfile(fmt::format("{}/jobs/{}/task-0.pid", WorkDir(first), id));
  pid_t pid = 0;
  pidfile >> pid;
  ASSERT_GT(pid, 1);
  const auto killed = Clock::now();
  agents_[first]->Kill9();
  j = WaitUntil(
      id,
      [&](const json& x) {
        return x["state"] == "running" && !x["placement"].empty() &&
               x["placement"][0]["node"] == other;
      },
      "ran on " + other, kNodeTimeoutMs + 10000);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - killed).count();
  // The heartbeat timeout plus a cycle and a heartbeat (and a loaded machine's slack).
  EXPECT_LT(took, kNodeTimeoutMs + 2000) << "retried after " << took << " ms";
  EXPECT_GE(took, kNodeTimeoutMs - 500);
  EXPECT_EQ(j["restarts"], 1);
  const auto states = EventStates(id);
  EXPECT_EQ(Count(states, "lost"), 1);
  EXPECT_EQ(Count(states, "running"), 2);
  WaitNode(first, "down", 1000);
  // The old task's process died with its agent.
  for (int i = 0; i < 100 && Alive(pid); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Alive(pid)) << "pid " << pid << " of the killed agent's task still runs";
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  WaitFor(id, "cancelled");
}

// kill -9 of the server while jobs run: the agents keep them running, retry, register again with
// the restarted server and report; every job finishes, recorded exactly once.
TEST_F(AgentTest, JobsSurviveAServerKill9AndAreRecordedOnce) {
  StartAgent("node-a");
  StartAgent("node-b");
  std::vector<uint64_t> ids;
  for (int i = 0; i < 2; ++i) {
    ids.push_back(Submit({{"command", {"sh", "-c", "echo start; sleep 2; echo done"}},
                          {"resources", {{"gpus", 4}}}}));
  }
  for (uint64_t id : ids) WaitFor(id, "running");
  server_.Kill(SIGKILL);
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));  // the jobs run on meanwhile
  ServerProcess again;
  ASSERT_TRUE(StartServer(&again)) << again.output();
  proxy_.SetTarget(again.port());
  admin_ = again.Client(again.admin_token());
  for (uint64_t id : ids) {
    const json j = WaitFor(id, "succeeded");
    EXPECT_EQ(j["restarts"], 0);
    const auto states = EventStates(id);
    EXPECT_EQ(Count(states, "running"), 1) << j.dump();
    EXPECT_EQ(Count(states, "succeeded"), 1);
    EXPECT_EQ(Count(states, "lost"), 0);
    const std::string out = Output("node-a", id, 0) + Output("node-b", id, 0);
    EXPECT_EQ(out, "start\ndone\n");  // ran once, to its end
  }
  for (const char* n : {"node-a", "node-b"}) {
    EXPECT_NE(agents_[n]->Log().find("registering again"), std::string::npos) << agents_[n]->Log();
  }
}

// A server restart kills nothing, even when its agents are slow to come back: nodes known from
// before get a reconnect window (here they cannot reach the restarted server for twice the node
// timeout), and an agent retries at once when the server answers again (its backoff has grown to
// seconds meanwhile).
TEST_F(AgentTest, ServerRestartGivesKnownNodesTimeToReconnect) {
  StartAgent("node-a", {"--backoff-max-ms", "20000"});
  const uint64_t id =
      Submit({{"command", {"sh", "-c", "sleep 9; echo done"}}, {"resources", {{"gpus", 1}}}});
  WaitFor(id, "running");
  const int port = proxy_.port();
  proxy_.Stop();
  server_.Kill(SIGTERM);
  ServerProcess again;
  ASSERT_TRUE(StartServer(&again)) << again.output();
  admin_ = again.Client(again.admin_token());
  // The agent cannot reach it for longer than the node timeout.
  std::this_thread::sleep_for(std::chrono::milliseconds(2 * kNodeTimeoutMs));
  EXPECT_EQ(Parse(admin_->Get("/api/v1/nodes/node-a"))["state"], "ready");
  EXPECT_EQ(Get(id)["state"], "running");
  const auto back = Clock::now();
  ASSERT_TRUE(proxy_.Start(again.port(), port));
  WaitUntil(
      id,
      [&](const json&) {
        return agents_["node-a"]->Log().find("answers again") != std::string::npos;
      },
      "saw its agent reconnect", 10000);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - back).count();
  EXPECT_LT(took, 3000) << "the agent came back after " << took << " ms";
  const json j = WaitFor(id, "succeeded", 20000);
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_EQ(Count(EventStates(id), "lost"), 0);
  EXPECT_EQ(Output("node-a", id, 0), "done\n");
}

// The network to the server drops for less than the node timeout: the job runs on, ends during
// the outage, and its exit is reported when the agent reaches the server again.
TEST_F(AgentTest, NetworkDropKeepsJobsRunning) {
  AgentProcess& agent = StartAgent("node-a");
  const uint64_t id = Submit(
      {{"command", {"sh", "-c", "echo start; sleep 0.8; echo end"}}, {"resources", {{"gpus", 1}}}});
  WaitFor(id, "running");
  const int port = proxy_.port();
  proxy_.Stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  EXPECT_EQ(Get(id)["state"], "running");              // the server has not heard yet
  EXPECT_EQ(Output("node-a", id, 0), "start\nend\n");  // it ended during the outage
  ASSERT_TRUE(proxy_.Start(server_.port(), port));
  const json j = WaitFor(id, "succeeded", 10000);
  EXPECT_EQ(j["exit_code"], 0);
  const auto states = EventStates(id);
  EXPECT_EQ(Count(states, "running"), 1);
  EXPECT_EQ(Count(states, "lost"), 0);
  EXPECT_EQ(Parse(admin_->Get("/api/v1/nodes/node-a"))["state"], "ready");
  EXPECT_NE(agent.Log().find("heartbeat failed"), std::string::npos) << agent.Log();
  EXPECT_NE(agent.Log().find("answers again"), std::string::npos) << agent.Log();
}

// A restarted agent adopts the tasks of its earlier run: they keep running, nothing is lost or
// retried; a task that ended while the agent was away is reported with its exit code.
TEST_F(AgentTest, RestartedAgentAdoptsItsTasks) {
  StartAgent("node-a");
  const uint64_t id = Submit({{"command", {"sleep", "30"}},
                              {"resources", {{"gpus", 1}}},
                              {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  const uint64_t brief =
      Submit({{"command", {"sh", "-c", "sleep 1; exit 4"}}, {"resources", {{"gpus", 1}}}});
  WaitFor(id, "running");
  WaitFor(brief, "running");
  auto shim_of = [&](uint64_t job) {
    std::ifstream f(fmt::format("{}/jobs/{}/task-0.pid", WorkDir("node-a"), job));
    pid_t pid = 0;
    f >> pid;
    return pid;
  };
  const pid_t shim = shim_of(id);
  const pid_t brief_shim = shim_of(brief);
  ASSERT_GT(shim, 1);
  ASSERT_GT(brief_shim, 1);
  agents_["node-a"]->Kill9();
  // The brief task ends while its agent is away.
  for (int i = 0; i < 200 && Alive(brief_shim); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ASSERT_FALSE(Alive(brief_shim));
  StartAgent("node-a");
  const json b = WaitFor(brief, "failed");
  EXPECT_EQ(b["exit_code"], 4) << b.dump();
  EXPECT_EQ(Count(EventStates(brief), "lost"), 0);
  EXPECT_TRUE(Alive(shim)) << "the adopted task's shim died";
  const json j = Get(id);
  EXPECT_EQ(j["state"], "running");
  EXPECT_EQ(j["restarts"], 0);
  EXPECT_EQ(Count(EventStates(id), "lost"), 0);
  EXPECT_NE(agents_["node-a"]->Log().find("adopted its running shim"), std::string::npos);
  // An adopted task is stopped as any other.
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  WaitFor(id, "cancelled");
  for (int i = 0; i < 200 && Alive(shim); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_FALSE(Alive(shim));
}

// An unhealthy GPU (a fault drill on a fake GPU) is reported, leaves scheduling, and the task
// on it is lost and retried on a healthy GPU.
TEST_F(AgentTest, UnhealthyGpuLosesItsTask) {
  StartAgent("node-a");
  const uint64_t id = Submit({{"command", {"sleep", "30"}},
                              {"resources", {{"gpus", 1}}},
                              {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  json j = WaitFor(id, "running");
  const int gpu = j["placement"][0]["gpus"][0];
  {
    std::ofstream f(WorkDir("node-a") + "/fake-gpu-faults");
    f << gpu << " XID 79: fallen off the bus\n";
  }
  j = WaitUntil(
      id, [](const json& x) { return x["state"] == "running" && x["restarts"] == 1; }, "ran again");
  EXPECT_NE(j["placement"][0]["gpus"][0], gpu);
  const json n = Parse(admin_->Get("/api/v1/nodes/node-a"));
  EXPECT_FALSE(n["gpus"][gpu]["healthy"].get<bool>());
  EXPECT_EQ(n["status"]["gpus"][gpu]["health_reason"], "XID 79: fallen off the bus");
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  WaitFor(id, "cancelled");
}

// Logs through the API, proxied from the agent: whole, followed while the job runs, stderr;
// access as for reading the job.
// Preemption delivered by an agent: SIGTERM to the low-priority job's process group, which saves
// a checkpoint; the preemptor runs on the same GPUs; the first job resumes from its checkpoint
// with ARBITER_RESTART_COUNT=1 and succeeds.
TEST_F(AgentTest, PreemptedJobCheckpointsOnItsAgentAndResumes) {
  const std::string config = std::string(kConfig) + R"(priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: best-effort, value: 0, preemptible: true, min_runtime_seconds: 0}
)";
  auto applied = admin_->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(applied && applied->status == 200) << (applied ? applied->body : "no answer");
  StartAgent("node-a");
  const uint64_t low = Submit({{"command", {"sh", "-c", kCheckpointJobScript}},
                               {"priority_class", "best-effort"},
                               {"resources", {{"gpus", 4}}}});
  WaitFor(low, "running");
  // Preempted only once it has set its trap (it says "started" then): a process that takes long
  // to start on a busy machine would otherwise die of the SIGTERM before it could checkpoint.
  for (int i = 0; i < 200 && Output("node-a", low, 0).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const uint64_t high = Submit({{"command", {"sh", "-c", "sleep 0.3"}},
                                {"priority_class", "critical"},
                                {"resources", {{"gpus", 4}}}});
  WaitFor(high, "succeeded");
  const json l = WaitFor(low, "succeeded");
  EXPECT_EQ(l["preemptions"], 1);
  auto log = admin_->Get(fmt::format("/api/v1/jobs/{}/logs", low));
  ASSERT_TRUE(log);
  EXPECT_EQ(log->body, kCheckpointJobLog);
  EXPECT_EQ(Output("node-a", low, 0), kCheckpointJobOutput);  // the stdout file holds every run
  const std::vector<std::string> to = EventStates(low);
  EXPECT_EQ(Count(to, "preempting"), 1);
  EXPECT_EQ(Count(to, "preempted"), 1);
  EXPECT_EQ(Count(to, "succeeded"), 1);
}

TEST_F(AgentTest, LogsThroughTheApi) {
  StartAgent("node-a");
  const uint64_t id =
      Submit({{"command",
               {"sh", "-c", "for i in 1 2 3 4 5; do echo line $i; sleep 0.2; done; echo oops >&2"}},
              {"resources", {{"gpus", 1}}}});
  WaitFor(id, "running");
  std::string followed;
  auto follower = server_.Client(server_.admin_token());
  follower->set_read_timeout(30);
  auto r = follower->Get(fmt::format("/api/v1/jobs/{}/logs?task=0&follow=true", id),
                         [&](const char* data, size_t n) {
                           followed.append(data, n);
                           return true;
                         });
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(followed, "line 1\nline 2\nline 3\nline 4\nline 5\n");
  WaitFor(id, "succeeded");
  auto whole = admin_->Get(fmt::format("/api/v1/jobs/{}/logs", id));
  ASSERT_TRUE(whole);
  EXPECT_EQ(whole->body, followed);
  auto err = admin_->Get(fmt::format("/api/v1/jobs/{}/logs?stream=stderr", id));
  EXPECT_EQ(err->body, "oops\n");
  // Errors: bad parameters, another tenant's job, node tokens.
  EXPECT_EQ(admin_->Get(fmt::format("/api/v1/jobs/{}/logs?stream=both", id))->status, 400);
  EXPECT_EQ(admin_->Get(fmt::format("/api/v1/jobs/{}/logs?task=3", id))->status, 400);
  auto t = admin_->Post("/api/v1/tokens", json{{"user", "eve"}}.dump(), "application/json");
  auto eve = server_.Client(Parse(t)["token"]);
  EXPECT_EQ(eve->Get(fmt::format("/api/v1/jobs/{}/logs", id))->status, 404);
  auto node = server_.Client(node_token_);
  EXPECT_EQ(node->Get(fmt::format("/api/v1/jobs/{}/logs", id))->status, 403);
  // And node tokens are the only ones for the agent routes.
  EXPECT_EQ(admin_->Post("/api/v1/agent/heartbeat", "{}", "application/json")->status, 403);
}

// `arbiter logs` through an agent's log port: stdout and stderr in the order written, every run
// after its separator, and -f on a job still pending until it ends.
TEST_F(AgentTest, CliLogsThroughTheAgent) {
  StartAgent("node-a");
  TempDir home;
  const CliOptions cli = AdminCli(home);
  const uint64_t flaky =
      Submit({{"command",
               {"sh", "-c",
                "if [ -f \"$ARBITER_CHECKPOINT_DIR/ran\" ]; then echo second; exit 0; fi; "
                "touch \"$ARBITER_CHECKPOINT_DIR/ran\"; echo out1; sleep 0.2; echo err1 >&2; "
                "sleep 0.2; echo out2; exit 3"}},
              {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  WaitFor(flaky, "succeeded");
  const CliResult logs = RunCli({"logs", std::to_string(flaky)}, cli);
  ASSERT_EQ(logs.code, 0) << logs.err;
  EXPECT_EQ(logs.out, "out1\nerr1\nout2\n--- run 2, after a retry (exit 3) ---\nsecond\n");
  EXPECT_EQ(RunCli({"logs", std::to_string(flaky), "--stderr"}, cli).out,
            "err1\n--- run 2, after a retry (exit 3) ---\n");
  EXPECT_EQ(RunCli({"logs", std::to_string(flaky), "--run", "2"}, cli).out, "second\n");
  // Followed from before it starts: a dependency holds it.
  const uint64_t first = Submit({{"command", {"sleep", "2"}}});
  const uint64_t later =
      Submit({{"command", {"sh", "-c", "echo b1; sleep 0.2; echo b2 >&2"}},
              {"depends_on", json::array({{{"type", "afterok"}, {"job", first}}})}});
  const CliResult followed = RunCli({"logs", std::to_string(later), "-f"}, cli);
  EXPECT_EQ(followed.code, 0) << followed.err;
  EXPECT_EQ(followed.out, "b1\nb2\n");
  EXPECT_NE(followed.err.find(fmt::format("note: job {} is pending", later)), std::string::npos)
      << followed.err;
  EXPECT_EQ(Get(later)["state"], "succeeded");
}

// The expected start of a job waiting behind a running one: with no run-time history yet, the
// running job's walltime (600 s) says when it ends, so every replay starts the waiting job then,
// as the backfill reservation does; `arbiter why` prints it; another tenant cannot see it (404).
TEST_F(AgentTest, WhyShowsTheExpectedStartBehindARunningJob) {
  StartAgent("node-a");  // 4 fake GPUs
  const uint64_t running = Submit(
      {{"command", {"sleep", "120"}}, {"walltime_seconds", 600}, {"resources", {{"gpus", 4}}}});
  WaitFor(running, "running");
  const uint64_t waiting = Submit({{"command", {"true"}}, {"resources", {{"gpus", 4}}}});
  const std::string path = fmt::format("/api/v1/jobs/{}/why", waiting);
  const json why = WhyWithExpectedStart(waiting);
  ASSERT_TRUE(why.value("expected_start", json()).is_object()) << why.dump();
  const json& es = why["expected_start"];
  EXPECT_EQ(why["code"], "NoFeasibleNode") << why.dump();
  EXPECT_EQ(es["run_time_source"], "walltime") << es.dump();
  EXPECT_EQ(es["samples"], 32);
  EXPECT_EQ(es["started_in_samples"], 32);
  EXPECT_EQ(es["bounded"], false);
  // The two submissions of the last hour are the templates of the arrivals drawn after now;
  // they queue behind the waiting job (the same priority, later), so they do not move it.
  EXPECT_EQ(es["arrivals_modelled"], true) << es.dump();
  ASSERT_TRUE(es["p50_s"].is_number()) << es.dump();
  EXPECT_GT(es["p50_s"].get<int64_t>(), 500) << es.dump();
  EXPECT_LE(es["p50_s"].get<int64_t>(), 600) << es.dump();
  EXPECT_EQ(es["p50"], es["p90"]);
  EXPECT_TRUE(es["reservation_start"].is_string()) << es.dump();
  // The same figures in a line of `arbiter why`.
  TempDir home;
  const CliOptions cli = AdminCli(home);
  const CliResult text = RunCli({"why", std::to_string(waiting)}, cli);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("expected start: p50 in "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("32 samples, run times from walltimes"), std::string::npos) << text.out;
  // Another tenant sees neither the job nor its estimate.
  auto t = admin_->Post("/api/v1/tokens", json{{"user", "eve"}}.dump(), "application/json");
  auto eve = server_.Client(Parse(t)["token"]);
  auto r = eve->Get(path);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404) << r->body;
  EXPECT_EQ(r->body.find("expected_start"), std::string::npos);
  for (uint64_t id : {waiting, running}) {
    admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  }
  WaitFor(running, "cancelled");
}

// On a fresh server nothing is known of a running job without a walltime: it runs past the
// horizon in every replay, and the jobs submitted in the last hour keep arriving behind the
// waiting one, hundreds of them in two weeks. The estimate's work bound cuts the replays off
// (a `why` answers within its client's timeout instead of replaying two weeks of a growing
// queue 32 times) and says how far they got: the job starts later than that.
TEST_F(AgentTest, WhyOfAJobThatCannotStartIsBoundedInWork) {
  StartAgent("node-a");  // 4 fake GPUs
  const uint64_t running = Submit({{"command", {"sleep", "120"}}, {"resources", {{"gpus", 4}}}});
  WaitFor(running, "running");
  const uint64_t waiting = Submit({{"command", {"true"}}, {"resources", {{"gpus", 4}}}});
  const json why = WhyWithExpectedStart(waiting);
  ASSERT_TRUE(why.value("expected_start", json()).is_object()) << why.dump();
  const json& es = why["expected_start"];
  EXPECT_EQ(es["run_time_source"], "none") << es.dump();
  EXPECT_EQ(es["bounded"], true) << es.dump();
  EXPECT_EQ(es["bounds"], json::array({"work"})) << es.dump();
  EXPECT_TRUE(es["p50"].is_null()) << es.dump();
  EXPECT_EQ(es["started_in_samples"], 0) << es.dump();
  ASSERT_TRUE(es["simulated_s"].is_number()) << es.dump();
  EXPECT_GT(es["simulated_s"].get<int64_t>(), 3600) << es.dump();
  EXPECT_LT(es["simulated_s"].get<int64_t>(), 14 * 86400) << es.dump();
  TempDir home;
  const CliOptions cli = AdminCli(home);
  const CliResult text = RunCli({"why", std::to_string(waiting)}, cli);
  EXPECT_EQ(text.code, 0) << text.err;
  EXPECT_NE(text.out.find("expected start: p50 later than "), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("(bounded: work)"), std::string::npos) << text.out;
  for (uint64_t id : {waiting, running}) {
    admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  }
  WaitFor(running, "cancelled");
}

// A node token names its node: made without one it is refused (the field named), and it
// registers no other node.
TEST_F(AgentTest, NodeTokensRegisterOnlyTheirOwnNode) {
  auto t = admin_->Post("/api/v1/tokens", json{{"user", "admin"}, {"role", "node"}}.dump(),
                        "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_EQ(Parse(t)["error"]["field"], "node") << t->body;
  t = admin_->Post("/api/v1/tokens", json{{"user", "admin"}, {"node", "node-a"}}.dump(),
                   "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_EQ(Parse(t)["error"]["field"], "node") << t->body;
  const json reg = {{"name", "node-b"},
                    {"instance", "x"},
                    {"cpu_milli", 8000},
                    {"memory_mib", 16384},
                    {"gpus", json::array()}};
  auto node_a = server_.Client(node_token_);
  auto r = node_a->Post("/api/v1/agent/register", reg.dump(), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  EXPECT_NE(r->body.find("node-a"), std::string::npos) << r->body;
  EXPECT_EQ(admin_->Get("/api/v1/nodes/node-b")->status, 404);
}

// The built-in node's logs are read from its work folder directly.
TEST(BuiltInNodeLogs, ServedFromTheDataFolder) {
  TempDir dir;
  {
    std::ofstream f(dir.path() + "/cluster.yaml");
    f << kConfig;
  }
  ServerProcess server;
  ASSERT_TRUE(server.Start(dir.path(), {"--config", dir.path() + "/cluster.yaml", "--local-node",
                                        "box", "--fake-gpus", "2"}))
      << server.output();
  auto admin = server.Client(server.admin_token());
  auto r = admin->Post("/api/v1/jobs",
                       json{{"queue", "lab-q"},
                            {"command", {"sh", "-c", "echo one; sleep 0.5; echo two"}},
                            {"resources", {{"gpus", 1}}}}
                           .dump(),
                       "application/json");
  ASSERT_EQ(r->status, 201) << r->body;
  const uint64_t id = Parse(r)["id"];
  // Until the job is placed the answer is 404 (no logs yet); then it streams until the task ends.
  std::string followed;
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    auto got = admin->Get(
        fmt::format("/api/v1/jobs/{}/logs?follow=true", id),
        [&](const httplib::Response& head) {
          status = head.status;
          return true;
        },
        [&](const char* data, size_t n) {
          if (status == 200) followed.append(data, n);
          return true;
        });
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
  EXPECT_EQ(followed, "one\ntwo\n");
  EXPECT_EQ(admin->Get(fmt::format("/api/v1/jobs/{}/logs", id))->body, "one\ntwo\n");
}

// The value of the gauge `name` in the server's metrics (-1 when absent).
int64_t Gauge(httplib::Client& admin, const std::string& name) {
  auto r = admin.Get("/metrics");
  if (!r || r->status != 200) return -1;
  std::istringstream in(r->body);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name + " ", 0) == 0) return std::stoll(line.substr(name.size() + 1));
  }
  return -1;
}

// Starts following a log on a raw connection and returns it once the answer's head arrived.
int FollowRaw(int port, const std::string& token, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  const std::string req =
      fmt::format("GET {} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {}\r\n\r\n", path, token);
  EXPECT_EQ(::send(fd, req.data(), req.size(), MSG_NOSIGNAL), static_cast<ssize_t>(req.size()));
  std::string head;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (head.find("\r\n\r\n") == std::string::npos && Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 200) <= 0) continue;
    char buf[1024];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) break;
    head.append(buf, static_cast<size_t>(n));
  }
  EXPECT_EQ(head.rfind("HTTP/1.1 200", 0), 0u) << head;
  return fd;
}

// Followers of a silent task's log, on the built-in node and proxied from an agent, leave when
// their clients hang up: nothing is written to notice it by, yet their threads and sockets go.
TEST(LogFollowers, LeaveWhenTheirClientHangsUpOnASilentTask) {
  TempDir dir;
  std::ofstream(dir.path() + "/cluster.yaml") << kConfig;
  ServerProcess server;
  ASSERT_TRUE(server.Start(dir.path(), {"--config", dir.path() + "/cluster.yaml", "--local-node",
                                        "box", "--fake-gpus", "4"}))
      << server.output();
  auto admin = server.Client(server.admin_token());
  const std::string token = NodeToken(*admin, "node-a");
  AgentProcess agent;
  ASSERT_TRUE(agent.Start(fmt::format("http://127.0.0.1:{}", server.port()), token, "node-a",
                          dir.path() + "/agent-node-a"))
      << agent.Log();
  auto r = admin->Post("/api/v1/jobs",
                       json{{"queue", "lab-q"},
                            {"command", {"sh", "-c", "echo started; sleep 120"}},
                            {"tasks", 2},
                            {"distinct_nodes", true},
                            {"resources", {{"gpus", 4}}}}
                           .dump(),
                       "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "");
  const uint64_t id = Parse(r)["id"];
  for (int i = 0; i < 400; ++i) {
    if (Parse(admin->Get(fmt::format("/api/v1/jobs/{}", id)))["state"] == "running") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Gauge(*admin, "arbiter_log_followers"), 0);
  std::vector<int> followers;
  for (int task : {0, 1}) {
    followers.push_back(
        FollowRaw(server.port(), server.admin_token(),
                  fmt::format("/api/v1/jobs/{}/logs?task={}&follow=true", id, task)));
  }
  // Counted once their streams run (just after the answer's head is sent).
  int64_t streaming = 0;
  for (int i = 0; i < 200 && streaming != 2; ++i) {
    streaming = Gauge(*admin, "arbiter_log_followers");
    if (streaming != 2) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_EQ(streaming, 2);
  const auto t0 = Clock::now();
  for (int fd : followers) ::close(fd);
  int64_t left = 2;
  while (left != 0 && Clock::now() - t0 < std::chrono::seconds(20)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    left = Gauge(*admin, "arbiter_log_followers");
  }
  EXPECT_EQ(left, 0);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(5));  // the task runs for two minutes more
  admin->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
}

// A gang across the built-in node and an agent: every rank gets the same MASTER_ADDR, one that
// every rank can reach (the address of the first task's node), never a name like "box" or a
// loopback address on one side only.
TEST(MixedGang, EveryRankHasTheSameMasterAddress) {
  TempDir dir;
  std::ofstream(dir.path() + "/cluster.yaml") << kConfig;
  ServerProcess server;
  ASSERT_TRUE(server.Start(dir.path(), {"--config", dir.path() + "/cluster.yaml", "--local-node",
                                        "box", "--fake-gpus", "4"}))
      << server.output();
  auto admin = server.Client(server.admin_token());
  const std::string token = NodeToken(*admin, "node-a");
  ASSERT_FALSE(token.empty());
  AgentProcess agent;
  const std::string work = dir.path() + "/agent-node-a";
  ASSERT_TRUE(agent.Start(fmt::format("http://127.0.0.1:{}", server.port()), token, "node-a", work))
      << agent.Log();
  auto r = admin->Post("/api/v1/jobs",
                       json{{"queue", "lab-q"},
                            {"command", {"sh", "-c", "echo $MASTER_ADDR:$MASTER_PORT"}},
                            {"tasks", 2},
                            {"distinct_nodes", true},
                            {"resources", {{"gpus", 4}}}}
                           .dump(),
                       "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "");
  const uint64_t id = Parse(r)["id"];
  json j;
  for (int i = 0; i < 200; ++i) {
    j = Parse(admin->Get(fmt::format("/api/v1/jobs/{}", id)));
    if (j["state"] == "succeeded" || j["state"] == "failed") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(j["state"], "succeeded") << j.dump();
  std::set<std::string> seen;
  for (int task = 0; task < 2; ++task) {
    const std::string out =
        ReadFile(fmt::format("{}/jobs/{}/task-{}.out", server.node_dir(), id, task)) +
        ReadFile(fmt::format("{}/jobs/{}/task-{}.out", work, id, task));
    EXPECT_FALSE(out.empty()) << "task " << task;
    seen.insert(out);
  }
  ASSERT_EQ(seen.size(), 1u) << "the ranks disagree on MASTER_ADDR";
  const std::string addr = seen.begin()->substr(0, seen.begin()->find(':'));
  EXPECT_EQ(addr, "127.0.0.1") << *seen.begin();  // both sides of loopback here
  agent.Stop();
  KillLeftoverTasks(work);
}

}  // namespace
}  // namespace arbiter::testing
