// A service end to end: `arbiter server --gateway-listen` with its built-in node and an agent,
// three replicas of the real stand-in model server (arbiter-echo-server), and a client sending
// requests through the built-in gateway the whole time, none of which may fail while a replica is
// killed with SIGKILL, a rolling update runs, a 90/10 canary runs (its split measured over 2,000
// requests), a rollback runs, and a replica fails its readiness probe (it then gets no traffic).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <thread>

#include "agent_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

std::string EchoBinary() {
  return (std::filesystem::path(ARBITER_BINARY).parent_path() / "arbiter-echo-server").string();
}

// Sends requests through the gateway from a thread until stopped, counting the answers that are
// not 200 (a refused or broken connection counts too).
class Load {
 public:
  explicit Load(int port) : port_(port) {
    thread_ = std::thread([this] {
      httplib::Client c("127.0.0.1", port_);
      c.set_connection_timeout(5);
      c.set_read_timeout(20);
      while (!stop_) {
        auto r = c.Get("/s/chat/work?delay_ms=5");
        ++sent_;
        if (!r || r->status != 200) {
          ++failed_;
          last_error_ =
              r ? std::to_string(r->status) + " " + r->body : httplib::to_string(r.error());
        }
      }
    });
  }
  ~Load() { Stop(); }
  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int64_t sent() const { return sent_; }
  int64_t failed() const { return failed_; }
  std::string last_error() const { return last_error_; }

 private:
  int port_;
  std::atomic<bool> stop_{false};
  std::atomic<int64_t> sent_{0}, failed_{0};
  std::string last_error_;
  std::thread thread_;
};

class ServicesGatewayTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << "gpu_models:\n  - {name: A100-80G, memory_mib: 81920}\n"
           "tenants:\n  - name: lab\n    default_queue: serving\n"
           "    queues:\n      - {name: serving, guaranteed: {gpu: 0}}\n";
    }
    // Replicas' ports of this process's own (other tests' servers run at once), below the
    // kernel's ephemeral ports.
    const int ports_lo = 10000 + static_cast<int>(getpid() % 500) * 20;
    ASSERT_TRUE(server_.Start(
        dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box",
                      "--fake-gpus", "2", "--gateway-listen", "127.0.0.1:0", "--service-ports",
                      fmt::format("{}-{}", ports_lo, ports_lo + 19), "--node-timeout-ms", "4000"}))
        << server_.output();
    const std::string line = "gateway for services listening on http://127.0.0.1:";
    ASSERT_TRUE(server_.WaitForOutput(line, 20)) << server_.output();
    const std::string& out = server_.output();
    gateway_port_ = std::stoi(out.substr(out.find(line) + line.size()));
    admin_ = server_.Client(server_.admin_token());
    ASSERT_TRUE(agent_.Start("http://127.0.0.1:" + std::to_string(server_.port()),
                             NodeToken(*admin_, "node-a"), "node-a", dir_.path() + "/agent-a",
                             {"--fake-gpus", "2", "--heartbeat-ms", "500"}))
        << agent_.Log();
  }

  // Ready replicas on `node`.
  int ReadyOn(const std::string& node) {
    int n = 0;
    const json s = Service();
    for (const json& rep : s.value("status", json::object()).value("replicas", json::array())) {
      n += rep.value("state", "") == "ready" && rep.value("node", "") == node;
    }
    return n;
  }

  json Service() {
    auto r = admin_->Get("/api/v1/services/chat");
    if (!r || r->status != 200) return json::object();
    return json::parse(r->body, nullptr, false);
  }

  // The ready replicas' jobs by revision.
  std::map<int64_t, std::set<std::string>> Ready() {
    std::map<int64_t, std::set<std::string>> out;
    const json s = Service();
    for (const json& rep : s.value("status", json::object()).value("replicas", json::array())) {
      if (rep.value("state", "") == "ready") {
        out[rep.value("revision", int64_t{0})].insert(rep.value("job", ""));
      }
    }
    return out;
  }

  // Waits (at most `seconds`) until `ok` holds of the ready replicas.
  template <typename F>
  bool WaitReady(F ok, int seconds) {
    const auto deadline = Clock::now() + std::chrono::seconds(seconds);
    while (Clock::now() < deadline) {
      if (ok(Ready())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  // Asks until revision `rev` answers (the gateway takes the server's new table by its long
  // poll, a moment after the server's status shows it); false when it did not within 10 s.
  bool UntilRevision(httplib::Client& c, int64_t rev) {
    const auto deadline = Clock::now() + std::chrono::seconds(10);
    while (Clock::now() < deadline) {
      if (Ask(c).first == rev) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // One request through the gateway: the answering replica's revision header, or -1.
  std::pair<int64_t, json> Ask(httplib::Client& c) {
    auto r = c.Get("/s/chat/hello");
    if (!r || r->status != 200) return {-1, json()};
    const std::string rev = r->get_header_value("X-Arbiter-Revision");
    return {rev.empty() ? 0 : std::stoll(rev), json::parse(r->body, nullptr, false)};
  }

  TempDir dir_;
  ServerProcess server_;
  AgentProcess agent_;
  std::unique_ptr<httplib::Client> admin_;
  int gateway_port_ = 0;
};

json Spec(const std::string& version) {
  return json{{"name", "chat"},
              {"queue", "serving"},
              {"template",
               {{"command", {EchoBinary()}},
                {"env", {{"MODEL_VERSION", version}}},
                {"resources", {{"gpus", 1}}}}},
              {"replicas", 3},
              {"readiness",
               {{"path", "/readyz"},
                {"period_seconds", 0.2},
                {"timeout_seconds", 0.2},
                {"failure_threshold", 1}}},
              {"rollout", {{"max_surge", 1}, {"max_unavailable", 0}}},
              {"drain_seconds", 2},
              {"slo", {{"latency_ms", 200}, {"percentile", 99}}}};
}

size_t Count(const std::map<int64_t, std::set<std::string>>& ready, int64_t rev) {
  auto it = ready.find(rev);
  return it == ready.end() ? 0 : it->second.size();
}

TEST_F(ServicesGatewayTest, NoRequestFailsThroughKillsUpdatesCanaryAndRollback) {
  auto created = admin_->Post("/api/v1/services", Spec("1").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitReady([](const auto& r) { return Count(r, 1) == 3; }, 60)) << Service().dump();

  // The ready replicas are spread over both nodes (a replacement being placed has no node yet).
  std::set<std::string> nodes;
  const json first = Service();
  for (const json& rep : first["status"]["replicas"]) {
    if (rep.value("state", "") == "ready") nodes.insert(rep.value("node", ""));
  }
  EXPECT_EQ(nodes.size(), 2u) << Service().dump();

  httplib::Client client("127.0.0.1", gateway_port_);
  client.set_read_timeout(20);
  Load load(gateway_port_);

  // (a) A replica killed with SIGKILL: replaced, no request fails.
  {
    auto [rev, body] = Ask(client);
    ASSERT_EQ(rev, 1) << body.dump();
    const std::string victim = body.value("id", "");
    ASSERT_EQ(::kill(static_cast<pid_t>(body.value("pid", 0)), SIGKILL), 0);
    EXPECT_TRUE(WaitReady(
        [&](const auto& r) { return Count(r, 1) == 3 && r.at(1).count(victim) == 0; }, 60))
        << Service().dump();
  }

  // (c) A rolling update to revision 2.
  auto put = admin_->Put("/api/v1/services/chat", Spec("2").dump(), "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  EXPECT_EQ(json::parse(put->body).value("revision", 0), 2);
  EXPECT_TRUE(WaitReady([](const auto& r) { return Count(r, 2) == 3 && Count(r, 1) == 0; }, 90))
      << Service().dump();
  ASSERT_TRUE(UntilRevision(client, 2));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Ask(client).first, 2);

  // (d) A 90/10 canary of revision 3, measured over 2,000 requests.
  json canary = Spec("3");
  canary["traffic"] = {{{"revision", 2}, {"percent", 90}}, {{"revision", 3}, {"percent", 10}}};
  put = admin_->Put("/api/v1/services/chat", canary.dump(), "application/json");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  ASSERT_TRUE(WaitReady([](const auto& r) { return Count(r, 2) == 3 && Count(r, 3) >= 1; }, 90))
      << Service().dump();
  std::map<int64_t, int> by_rev;
  for (int i = 0; i < 2000; ++i) ++by_rev[Ask(client).first];
  EXPECT_EQ(by_rev[-1], 0);
  EXPECT_NEAR(by_rev[3] / 2000.0, 0.10, 0.03) << by_rev[2] << "/" << by_rev[3];

  // Promote it, then roll back to revision 2.
  auto promote =
      admin_->Post("/api/v1/services/chat/traffic",
                   R"({"traffic": [{"revision": 3, "percent": 100}]})", "application/json");
  ASSERT_TRUE(promote);
  ASSERT_EQ(promote->status, 200) << promote->body;
  ASSERT_TRUE(WaitReady([](const auto& r) { return Count(r, 3) == 3 && Count(r, 2) == 0; }, 90))
      << Service().dump();
  auto back = admin_->Post("/api/v1/services/chat/rollback", "{}", "application/json");
  ASSERT_TRUE(back);
  ASSERT_EQ(back->status, 200) << back->body;
  ASSERT_TRUE(WaitReady([](const auto& r) { return Count(r, 2) == 3 && Count(r, 3) == 0; }, 90))
      << Service().dump();
  ASSERT_TRUE(UntilRevision(client, 2));
  for (int i = 0; i < 20; ++i) EXPECT_EQ(Ask(client).first, 2);

  // A replica failing readiness gets no traffic.
  {
    const json s = Service();
    std::string address, job;
    for (const json& rep : s["status"]["replicas"]) {
      if (rep.value("state", "") == "ready") {
        address = rep.value("address", "");
        job = rep.value("job", "");
        break;
      }
    }
    ASSERT_FALSE(address.empty()) << s.dump();
    httplib::Client direct("http://" + address);
    auto f = direct.Post("/fail-ready", "", "text/plain");
    ASSERT_TRUE(f);
    ASSERT_TRUE(WaitReady([&](const auto& r) { return Count(r, 2) == 2; }, 30)) << Service().dump();
    std::this_thread::sleep_for(std::chrono::milliseconds(500));  // the gateway's long poll
    for (int i = 0; i < 200; ++i) {
      auto [rev, body] = Ask(client);
      EXPECT_NE(body.value("id", ""), job);
    }
    direct.Post("/recover", "", "text/plain");
  }

  load.Stop();
  EXPECT_GT(load.sent(), 100);
  EXPECT_EQ(load.failed(), 0) << load.last_error();
}

// (b) A node dies under load: its agent is killed with SIGKILL and its replicas with it, as when
// the machine goes away. The gateway answers every request from the other node's replicas (a
// failed connect tries others), the server takes the dead ones out of the routes and, once the
// agent is back, the service has its three replicas again.
TEST_F(ServicesGatewayTest, NoRequestFailsWhenANodeDies) {
  auto created = admin_->Post("/api/v1/services", Spec("1").dump(), "application/json");
  ASSERT_TRUE(created);
  ASSERT_EQ(created->status, 201) << created->body;
  ASSERT_TRUE(WaitReady([](const auto& r) { return Count(r, 1) == 3; }, 60)) << Service().dump();
  ASSERT_GE(ReadyOn("node-a"), 1) << Service().dump();
  ASSERT_GE(ReadyOn("box"), 1) << Service().dump();

  Load load(gateway_port_);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  agent_.Kill9();
  KillLeftoverTasks(dir_.path() + "/agent-a");

  // Out of the routes (probes fail at once; the node is down 4 s later), the built-in node's two
  // replicas serving everything.
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (Clock::now() < deadline && !(ReadyOn("node-a") == 0 && ReadyOn("box") == 2)) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_EQ(ReadyOn("node-a"), 0) << Service().dump();
  EXPECT_EQ(ReadyOn("box"), 2) << Service().dump();
  const int64_t sent_while_down = load.sent();

  // The agent comes back: the missing replica starts there.
  ASSERT_TRUE(agent_.Start("http://127.0.0.1:" + std::to_string(server_.port()),
                           NodeToken(*admin_, "node-a"), "node-a", dir_.path() + "/agent-a",
                           {"--fake-gpus", "2", "--heartbeat-ms", "500"}))
      << agent_.Log();
  EXPECT_TRUE(WaitReady([](const auto& r) { return Count(r, 1) == 3; }, 60)) << Service().dump();

  load.Stop();
  EXPECT_GT(sent_while_down, 20);
  EXPECT_EQ(load.failed(), 0) << load.last_error();
}

}  // namespace
}  // namespace arbiter::testing
