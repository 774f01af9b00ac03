// Several servers on one store (docs/operations.md, "Several servers"): one leads, the others
// follow; kill -9 of the leader, a leader cut off from the world, and SIGTERM hand the lease to a
// follower, with agents' tasks running through it and clients following the leader.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "agent_process.h"
#include "server_cluster.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
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

bool Alive(pid_t pid) {
  const std::string stat = ReadFile(fmt::format("/proc/{}/stat", pid));
  const size_t paren = stat.rfind(')');
  return paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] != 'Z' &&
         stat[paren + 2] != 'X';
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

std::unique_ptr<httplib::Client> ClientFor(const std::string& url, const std::string& token) {
  auto c = std::make_unique<httplib::Client>(url);
  c->set_connection_timeout(1);
  c->set_read_timeout(10);
  c->set_tcp_nodelay(true);
  c->set_bearer_token_auth(token);
  return c;
}

// Submits one job after another, each with its own idempotency key, to whichever server answers
// (a key is retried until it is acknowledged, on the next server after a failure), and remembers
// what was acknowledged: key -> job id, and when.
class Submitter {
 public:
  Submitter(std::vector<std::string> urls, std::string token)
      : urls_(std::move(urls)), token_(std::move(token)) {}
  ~Submitter() { Stop(); }

  void Start() {
    thread_ = std::thread([this] { Loop(); });
  }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  std::map<std::string, uint64_t> acked() const {
    std::lock_guard<std::mutex> lock(mu_);
    return acked_;
  }
  // Acknowledgements received after `t`.
  size_t AckedAfter(Clock::time_point t) const {
    std::lock_guard<std::mutex> lock(mu_);
    size_t n = 0;
    for (const auto& at : acked_at_) n += at > t ? 1 : 0;
    return n;
  }

 private:
  void Loop() {
    size_t server = 0;
    for (int n = 0; !stop_; ++n) {
      const std::string key = fmt::format("submission-{}", n);
      const json body = {{"queue", "lab-q"}, {"command", {"true"}}, {"resources", {{"gpus", 0}}}};
      while (!stop_) {
        auto c = ClientFor(urls_[server], token_);
        auto r =
            c->Post("/api/v1/jobs", {{"Idempotency-Key", key}}, body.dump(), "application/json");
        if (r && (r->status == 201 || r->status == 200)) {
          std::lock_guard<std::mutex> lock(mu_);
          acked_[key] = Parse(r)["id"].get<uint64_t>();
          acked_at_.push_back(Clock::now());
          break;
        }
        if (!r) server = (server + 1) % urls_.size();
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }

  const std::vector<std::string> urls_;
  const std::string token_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<std::string, uint64_t> acked_;    // guarded by mu_
  std::vector<Clock::time_point> acked_at_;  // guarded by mu_
};

class FailoverTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/cluster.yaml") << kConfig;
    markers_ = dir_.path() + "/markers";
    std::filesystem::create_directories(markers_);
    ::chmod(markers_.c_str(), 0777);  // tasks may run as their own user
  }

  void TearDown() override {
    for (auto& agent : agents_) {
      agent->Stop();
      if (HasFailure()) std::fprintf(stderr, "--- agent log:\n%s", agent->Log().c_str());
      KillLeftoverTasks(agent->work_dir());
    }
    if (HasFailure() && cluster_) {
      for (size_t i = 0; i < 2; ++i) {
        std::fprintf(stderr, "--- server %zu output:\n%s", i, cluster_->server(i).output().c_str());
      }
    }
  }

  // Two servers on one store: server 0 leads, server 1 follows.
  void StartCluster(std::vector<std::string> flags) {
    flags.insert(flags.end(), {"--config", dir_.path() + "/cluster.yaml"});
    cluster_ = std::make_unique<ServerCluster>(dir_.path(), flags);
    ASSERT_TRUE(cluster_->Start(0)) << cluster_->server(0).output();
    ASSERT_TRUE(cluster_->WaitForRole(0, "leader", 20000).is_object());
    ASSERT_TRUE(cluster_->Start(1)) << cluster_->server(1).output();
    ASSERT_TRUE(cluster_->WaitForRole(1, "follower", 20000).is_object());
    token_ = cluster_->AdminToken(0);
    ASSERT_FALSE(token_.empty());
  }

  AgentProcess& StartAgent(const std::string& name) {
    auto admin = ClientFor(cluster_->url(0), token_);
    const std::string token = NodeToken(*admin, name);
    EXPECT_FALSE(token.empty());
    agents_.push_back(std::make_unique<AgentProcess>());
    AgentProcess& agent = *agents_.back();
    EXPECT_TRUE(agent.Start(cluster_->urls(), token, name, dir_.path() + "/agent-" + name, {}))
        << agent.Log();
    return agent;
  }

  // A job whose task writes its pid to markers/JOB once, then sleeps: a second start of it
  // would write a second line.
  uint64_t SubmitLongJob(httplib::Client& c) {
    const json body = {
        {"queue", "lab-q"},
        {"command",
         {"sh", "-c", fmt::format("echo started >> {}/$ARBITER_JOB_ID; exec sleep 300", markers_)}},
        {"resources", {{"gpus", 1}}}};
    auto r = c.Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? Parse(r)["id"].get<uint64_t>() : 0;
  }

  json WaitForState(httplib::Client& c, uint64_t id, const std::string& state, int ms) {
    json j;
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) {
      j = Parse(c.Get(fmt::format("/api/v1/jobs/{}", id)));
      if (j.value("state", "") == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump();
    return j;
  }

  std::vector<std::string> EventStates(httplib::Client& c, uint64_t id) {
    std::vector<std::string> to;
    const json body = Parse(c.Get(fmt::format("/api/v1/jobs/{}/events", id)));
    for (const json& e : body.value("items", json::array())) to.push_back(e.value("to", ""));
    return to;
  }

  // The lines the job's task wrote: one per start.
  size_t Starts(uint64_t id) {
    std::istringstream in(ReadFile(fmt::format("{}/{}", markers_, id)));
    size_t n = 0;
    for (std::string line; std::getline(in, line);) ++n;
    return n;
  }

  // The pid of the process that runs the job's task (its shim), from the agent's work dir.
  pid_t TaskPid(httplib::Client& c, uint64_t id) {
    const json j = Parse(c.Get(fmt::format("/api/v1/jobs/{}", id)));
    if (!j.contains("placement") || j["placement"].empty()) return 0;
    const std::string node = j["placement"][0].value("node", "");
    std::ifstream in(fmt::format("{}/agent-{}/jobs/{}/task-0.pid", dir_.path(), node, id));
    pid_t pid = 0;
    in >> pid;
    return pid;
  }

  arbiter::testing::TempDir dir_;
  std::string markers_;
  std::unique_ptr<ServerCluster> cluster_;
  std::string token_;
  std::vector<std::unique_ptr<AgentProcess>> agents_;
};

// kill -9 of the leader, with agents running jobs and a client submitting continuously: the
// follower leads within 15 s (the default lease, 10 s, and a renewal interval), every
// acknowledged submission is there, the running jobs ran once and run on, submissions resume.
TEST_F(FailoverTest, KillNineOfTheLeaderFailsOverWithinFifteenSeconds) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--node-timeout-ms", "3000"}));
  StartAgent("node-a");
  StartAgent("node-b");
  auto leader = ClientFor(cluster_->url(0), token_);
  std::vector<uint64_t> long_jobs;
  for (int i = 0; i < 4; ++i) long_jobs.push_back(SubmitLongJob(*leader));
  for (uint64_t id : long_jobs) WaitForState(*leader, id, "running", 20000);
  // Each task wrote its marker (it started); its process is noted.
  std::map<uint64_t, pid_t> pids;
  for (uint64_t id : long_jobs) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while ((Starts(id) == 0 || TaskPid(*leader, id) <= 1) && Clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_EQ(Starts(id), 1u) << id;
    pids[id] = TaskPid(*leader, id);
    ASSERT_GT(pids[id], 1) << id;
  }

  Submitter submitter({cluster_->url(0), cluster_->url(1)}, token_);
  submitter.Start();
  const auto warm = Clock::now() + std::chrono::seconds(2);
  while (Clock::now() < warm) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  ASSERT_GT(submitter.acked().size(), 0u);

  const auto killed = Clock::now();
  cluster_->server(0).Kill(SIGKILL);
  const json h = cluster_->WaitForRole(1, "leader", 20000);
  const double failover = SecondsSince(killed);
  ASSERT_TRUE(h.is_object()) << "no new leader within 20 s";
  std::printf("failover took %.1f s (lease 10 s, renewal every 2 s, on %s)\n", failover,
              cluster_->store().postgres() ? "PostgreSQL" : "SQLite");
  EXPECT_LT(failover, 15.0);
  EXPECT_EQ(h.value("term", 0), 2);

  // Submissions resume.
  const auto deadline = Clock::now() + std::chrono::seconds(15);
  while (submitter.AckedAfter(
             killed + std::chrono::milliseconds(static_cast<int64_t>(failover * 1000))) < 5 &&
         Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  std::printf("writes resumed %.1f s after the kill\n", SecondsSince(killed));
  submitter.Stop();
  const auto acked = submitter.acked();
  auto next = ClientFor(cluster_->url(1), token_);
  // Every acknowledged submission is there, each key with its own job, and each ends once.
  std::set<uint64_t> ids;
  for (const auto& [key, id] : acked) {
    EXPECT_TRUE(ids.insert(id).second) << key << " shares job " << id;
    auto r = next->Get(fmt::format("/api/v1/jobs/{}", id));
    EXPECT_TRUE(r && r->status == 200) << key << " -> " << id << " is missing";
  }
  for (uint64_t id : ids) WaitForState(*next, id, "succeeded", 30000);
  std::printf("%zu acknowledged submissions, all present and succeeded\n", acked.size());

  // The running jobs ran on through the failover: the same process, started once, never lost.
  for (uint64_t id : long_jobs) {
    const json j = WaitForState(*next, id, "running", 5000);
    EXPECT_EQ(j.value("restarts", -1), 0) << j.dump();
    EXPECT_EQ(Starts(id), 1u) << "job " << id << " started more than once";
    EXPECT_EQ(TaskPid(*next, id), pids[id]) << "job " << id << " runs in another process";
    EXPECT_TRUE(Alive(pids[id])) << "job " << id << "'s task is gone";
    const auto states = EventStates(*next, id);
    EXPECT_EQ(std::count(states.begin(), states.end(), "running"), 1) << id;
    EXPECT_EQ(std::count(states.begin(), states.end(), "lost"), 0) << id;
  }
  // The agents moved to the new leader: their nodes are ready there.
  const json nodes = Parse(next->Get("/api/v1/nodes"));
  for (const json& n : nodes.value("items", json::array())) {
    EXPECT_EQ(n.value("state", ""), "ready") << n.dump();
  }
}

// A follower answers reads from its own state, forwards writes to the leader and sends agents
// there; SIGTERM of the leader hands the lease over at once.
TEST_F(FailoverTest, FollowerReadsForwardsWritesAndSigtermHandsOver) {
  ASSERT_NO_FATAL_FAILURE(StartCluster(
      {"--lease-ms", "10000", "--lease-renew-ms", "500", "--follower-refresh-ms", "200"}));
  auto follower = ClientFor(cluster_->url(1), token_);
  // A write through the follower: forwarded, answered by the leader.
  const uint64_t id = SubmitLongJob(*follower);
  ASSERT_NE(id, 0u);
  // The follower reads it from its own state once refreshed.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  httplib::Result got{nullptr, httplib::Error::Unknown};
  while (Clock::now() < deadline) {
    got = follower->Get(fmt::format("/api/v1/jobs/{}", id));
    if (got && got->status == 200) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_TRUE(got && got->status == 200) << (got ? got->body : "no answer");
  // Agents are sent to the leader.
  auto agent = follower->Post("/api/v1/agent/heartbeat", "{}", "application/json");
  ASSERT_TRUE(agent);
  EXPECT_EQ(agent->status, 503);
  EXPECT_EQ(agent->get_header_value("X-Arbiter-Leader"), cluster_->url(0));
  EXPECT_EQ(Parse(agent)["error"]["leader"], cluster_->url(0));
  // Health, servers and metrics say who leads.
  const json h = Health(cluster_->url(1));
  EXPECT_EQ(h["role"], "follower");
  EXPECT_EQ(h["leader"], cluster_->url(0));
  EXPECT_EQ(h["term"], 1);
  const json servers = Parse(follower->Get("/api/v1/servers"));
  EXPECT_EQ(servers["leader"]["url"], cluster_->url(0)) << servers.dump();
  EXPECT_EQ(servers["servers"].size(), 2u) << servers.dump();
  auto metrics = follower->Get("/metrics");
  ASSERT_TRUE(metrics && metrics->status == 200);
  EXPECT_NE(metrics->body.find("\narbiter_leader 0\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("\narbiter_leader_term 1\n"), std::string::npos);
  EXPECT_NE(metrics->body.find("arbiter_lease_renew_seconds_bucket"), std::string::npos);
  auto leader_metrics = ClientFor(cluster_->url(0), token_)->Get("/metrics");
  ASSERT_TRUE(leader_metrics);
  EXPECT_NE(leader_metrics->body.find("\narbiter_leader 1\n"), std::string::npos);

  // SIGTERM: the leader releases the lease; the follower leads well before the lease's 10 s.
  const auto stopped = Clock::now();
  const int status = cluster_->server(0).Kill(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  const json now = cluster_->WaitForRole(1, "leader", 10000);
  const double took = SecondsSince(stopped);
  ASSERT_TRUE(now.is_object());
  std::printf("hand-over after SIGTERM took %.1f s\n", took);
  EXPECT_LT(took, 5.0);
  EXPECT_EQ(now["term"], 2);
  // The new leader has the job and takes writes; the CLI finds it from the list.
  EXPECT_EQ(Parse(follower->Get(fmt::format("/api/v1/jobs/{}", id)))["id"], id);
  EXPECT_NE(SubmitLongJob(*follower), 0u);
  std::string out;
  const int rc = Shell(fmt::format("ARBITER_TOKEN={} {} status --server {}", token_, ARBITER_BINARY,
                                   cluster_->urls()),
                       &out);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(fmt::format("leader: {} (term 2)", cluster_->url(1))), std::string::npos)
      << out;
  EXPECT_NE(out.find("stopped"), std::string::npos) << out;
}

// A leader cut off (stopped, so that it can neither renew nor notice): the follower takes over
// once the lease ends; when the old leader runs again, what it was asked to write meanwhile
// does not commit (its term is gone), and it steps down and follows.
TEST_F(FailoverTest, CutOffLeaderStopsWritingAndStepsDown) {
  ASSERT_NO_FATAL_FAILURE(StartCluster({"--lease-ms", "2000", "--lease-renew-ms", "400"}));
  auto old_leader = ClientFor(cluster_->url(0), token_);
  ASSERT_NE(SubmitLongJob(*old_leader), 0u);
  const pid_t pid = cluster_->server(0).pid();
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  const auto cut = Clock::now();
  // A write sent to the stopped leader waits in its socket's backlog.
  std::thread late_write([&] {
    auto c = ClientFor(cluster_->url(0), token_);
    c->set_read_timeout(20);
    const json body = {{"queue", "lab-q"},
                       {"name", "written-by-a-deposed-leader"},
                       {"command", {"true"}},
                       {"resources", {{"gpus", 0}}}};
    auto r = c->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_FALSE(r && r->status == 201) << "a deposed leader acknowledged a write: " << r->body;
  });
  const json h = cluster_->WaitForRole(1, "leader", 10000);
  ASSERT_TRUE(h.is_object());
  std::printf("the cut-off leader was replaced after %.1f s (lease 2 s)\n", SecondsSince(cut));
  EXPECT_EQ(h["term"], 2);
  ASSERT_EQ(::kill(pid, SIGCONT), 0);
  late_write.join();
  // It steps down (starting again, as a follower of the new leader, on its port).
  const json again = cluster_->WaitForRole(0, "follower", 20000);
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["leader"], cluster_->url(1));
  // Nothing of what it was asked after its term ended is in the store.
  auto leader = ClientFor(cluster_->url(1), token_);
  const json jobs = Parse(leader->Get("/api/v1/jobs?q=written-by-a-deposed-leader"));
  EXPECT_EQ(jobs.value("items", json::array()).size(), 0u) << jobs.dump();
  EXPECT_NE(SubmitLongJob(*leader), 0u);
}

// The leader loses its connection to PostgreSQL only (a proxy between it and the database is
// cut): its renewal fails, so it stops writing and steps down at once; what it was asked to write
// does not commit; the other server takes over when the lease ends; once the leader reaches the
// database again it follows.
TEST_F(FailoverTest, LeaderCutOffFromPostgresStepsDown) {
  cluster_ = std::make_unique<ServerCluster>(
      dir_.path(), std::vector<std::string>{"--lease-ms", "3000", "--lease-renew-ms", "500",
                                            "--config", dir_.path() + "/cluster.yaml"});
  if (!cluster_->store().postgres()) GTEST_SKIP() << "PostgreSQL is not installed";
  TcpProxy proxy;
  ASSERT_TRUE(proxy.Start(cluster_->store().port()));
  ASSERT_TRUE(cluster_->Start(0, cluster_->store().UrlVia(proxy.port())))
      << cluster_->server(0).output();
  ASSERT_TRUE(cluster_->WaitForRole(0, "leader", 20000).is_object());
  ASSERT_TRUE(cluster_->Start(1)) << cluster_->server(1).output();
  ASSERT_TRUE(cluster_->WaitForRole(1, "follower", 20000).is_object());
  token_ = cluster_->AdminToken(0);
  ASSERT_FALSE(token_.empty());
  auto old_leader = ClientFor(cluster_->url(0), token_);
  ASSERT_NE(SubmitLongJob(*old_leader), 0u);

  const int proxy_port = proxy.port();
  const auto cut = Clock::now();
  proxy.Stop();  // the leader's connections to PostgreSQL end; new ones are refused
  // A write sent to it now is not acknowledged, and never commits.
  const json body = {{"queue", "lab-q"},
                     {"name", "written-by-a-cut-off-leader"},
                     {"command", {"true"}},
                     {"resources", {{"gpus", 0}}}};
  auto late = old_leader->Post("/api/v1/jobs", body.dump(), "application/json");
  EXPECT_FALSE(late && late->status == 201) << "a cut-off leader acknowledged a write";
  // It steps down: no longer the leader within a renewal interval and the lease.
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  bool stepped_down = false;
  while (!stepped_down && Clock::now() < deadline) {
    const json h = Health(cluster_->url(0));
    stepped_down = !h.is_object() || h.value("role", "") != "leader";
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(stepped_down) << "the cut-off leader still says it leads";
  std::printf("the cut-off leader stepped down after %.1f s\n", SecondsSince(cut));
  const json h = cluster_->WaitForRole(1, "leader", 15000);
  ASSERT_TRUE(h.is_object());
  std::printf("the other server leads %.1f s after the cut (lease 3 s)\n", SecondsSince(cut));
  EXPECT_EQ(h["term"], 2);
  // The database again: the old leader follows the new one.
  ASSERT_TRUE(proxy.Start(cluster_->store().port(), proxy_port));
  const json again = cluster_->WaitForRole(0, "follower", 20000);
  ASSERT_TRUE(again.is_object());
  EXPECT_EQ(again["leader"], cluster_->url(1));
  auto leader = ClientFor(cluster_->url(1), token_);
  const json jobs = Parse(leader->Get("/api/v1/jobs?q=written-by-a-cut-off-leader"));
  EXPECT_EQ(jobs.value("items", json::array()).size(), 0u) << jobs.dump();
  EXPECT_NE(SubmitLongJob(*leader), 0u);
}

}  // namespace
}  // namespace arbiter::testing
