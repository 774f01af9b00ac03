// Server restarts kill nothing on the built-in node: its tasks outlive the server (SIGTERM or
// kill -9) and the next start adopts them; SIGTERM stops dispatching first, however deep the
// admitted backlog; and a built-in node started before any GPU model was configured gets its GPUs
// once one is.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

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

class RestartTest : public ::testing::Test {
 protected:
  void SetUp() override { std::ofstream(dir_.path() + "/cluster.yaml") << kConfig; }

  bool Start(ServerProcess* s, std::vector<std::string> extra = {}) {
    std::vector<std::string> flags = {"--local-node", "box", "--fake-gpus", "8"};
    flags.insert(flags.end(), extra.begin(), extra.end());
    if (!s->Start(dir_.path(), flags)) return false;
    admin_ = s->Client(s->admin_token());
    return true;
  }

  json Get(uint64_t id) { return Parse(admin_->Get(fmt::format("/api/v1/jobs/{}", id))); }

  json WaitFor(uint64_t id, const std::string& state, int max_ms = 20000) {
    json j;
    const auto deadline = Clock::now() + std::chrono::milliseconds(max_ms);
    while (Clock::now() < deadline) {
      j = Get(id);
      if (j["state"] == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump();
    return j;
  }

  std::vector<std::string> EventStates(uint64_t id) {
    std::vector<std::string> to;
    const json body = Parse(admin_->Get(fmt::format("/api/v1/jobs/{}/events", id)));
    for (const json& e : body["items"]) to.push_back(e["to"]);
    return to;
  }

  uint64_t Submit(const json& body) {
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? Parse(r)["id"].get<uint64_t>() : 0;
  }

  TempDir dir_;
  std::unique_ptr<httplib::Client> admin_;
};

// Ctrl-C (SIGTERM) and kill -9 of the server leave the built-in node's tasks running; the next
// start adopts them, and each job ends once, with its own exit code, never lost.
TEST_F(RestartTest, BuiltInNodeTasksSurviveServerRestarts) {
  ServerProcess first;
  ASSERT_TRUE(Start(&first, {"--config", dir_.path() + "/cluster.yaml"})) << first.output();
  const uint64_t a = Submit({{"queue", "lab-q"},
                             {"command", {"sh", "-c", "echo a-start; sleep 3; echo a-end; exit 7"}},
                             {"resources", {{"gpus", 2}}}});
  const uint64_t b = Submit({{"queue", "lab-q"},
                             {"command", {"sh", "-c", "echo b-start; sleep 5; echo b-end"}},
                             {"resources", {{"gpus", 2}}}});
  WaitFor(a, "running");
  WaitFor(b, "running");
  first.Kill(SIGTERM);  // as Ctrl-C on `make run`
  ServerProcess second;
  ASSERT_TRUE(Start(&second)) << second.output();
  EXPECT_EQ(Get(a)["state"], "running");
  second.Kill(SIGKILL);
  ServerProcess third;
  ASSERT_TRUE(Start(&third)) << third.output();
  const json ja = WaitFor(a, "failed");
  EXPECT_EQ(ja["exit_code"], 7);
  EXPECT_EQ(ja["restarts"], 0);
  const json jb = WaitFor(b, "succeeded");
  EXPECT_EQ(jb["restarts"], 0);
  for (uint64_t id : {a, b}) {
    const auto states = EventStates(id);
    EXPECT_EQ(std::count(states.begin(), states.end(), "lost"), 0) << id;
    EXPECT_EQ(std::count(states.begin(), states.end(), "running"), 1) << id;
  }
  EXPECT_EQ(ReadFile(fmt::format("{}/jobs/{}/task-0.out", third.node_dir(), a)),
            "a-start\na-end\n");
  EXPECT_EQ(ReadFile(fmt::format("{}/jobs/{}/task-0.out", third.node_dir(), b)),
            "b-start\nb-end\n");
}

// SIGTERM with a deep admitted backlog: the server stops dispatching first and exits at once; it
// neither starts the backlog nor kills what runs (the next start picks both up).
TEST_F(RestartTest, SigtermStopsDispatchingFirst) {
  ServerProcess server;
  ASSERT_TRUE(Start(&server, {"--config", dir_.path() + "/cluster.yaml"})) << server.output();
  json jobs = json::array();
  for (int i = 0; i < 1000; ++i) {
    jobs.push_back(
        {{"queue", "lab-q"}, {"command", {"sleep", "600"}}, {"resources", {{"gpus", 0}}}});
  }
  auto r = admin_->Post("/api/v1/jobs/batch", json{{"jobs", jobs}}.dump(), "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
  const uint64_t first = Parse(r)["items"][0]["id"];
  WaitFor(first, "running");
  const auto signalled = Clock::now();
  const int status = server.Kill(SIGTERM);
  const auto took =
      std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - signalled).count();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_LT(took, 5000) << "shutdown took " << took << " ms";
  // Nothing it started was killed: every task it started still runs.
  size_t started = 0;
  size_t alive = 0;
  std::error_code ec;
  for (const auto& job : std::filesystem::directory_iterator(server.node_dir() + "/jobs", ec)) {
    for (const auto& f : std::filesystem::directory_iterator(job.path(), ec)) {
      if (f.path().extension() != ".pid") continue;
      ++started;
      std::ifstream in(f.path());
      pid_t pid = 0;
      if (in >> pid && pid > 1 && ::kill(pid, 0) == 0) ++alive;
    }
  }
  EXPECT_GT(started, 0u);
  EXPECT_EQ(alive, started);
  server.KillTasks();
}

// A built-in node registered before any GPU model was configured counts its GPUs once one is,
// also when that first start is behind it (the node in the store with no GPUs).
TEST_F(RestartTest, BuiltInNodeGetsItsGpusOnceAModelIsConfigured) {
  {
    ServerProcess bare;
    ASSERT_TRUE(Start(&bare)) << bare.output();
    EXPECT_EQ(Parse(admin_->Get("/api/v1/nodes/box"))["gpus"].size(), 0u);
  }
  ServerProcess server;
  ASSERT_TRUE(Start(&server)) << server.output();
  auto put = admin_->Put("/api/v1/config", kConfig, "application/yaml");
  ASSERT_TRUE(put && put->status == 200) << (put ? put->body : "no answer");
  json n;
  for (int i = 0; i < 100; ++i) {  // the node is registered again within its 2 s telemetry beat
    n = Parse(admin_->Get("/api/v1/nodes/box"));
    if (n["gpus"].size() == 8) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(n["gpus"].size(), 8u) << n.dump();
  EXPECT_EQ(n["gpus"][0]["model"], "A100-80G");
  const uint64_t id = Submit({{"queue", "lab-q"},
                              {"command", {"sh", "-c", "echo $CUDA_VISIBLE_DEVICES"}},
                              {"resources", {{"gpus", 1}}}});
  WaitFor(id, "succeeded");
}

}  // namespace
}  // namespace arbiter::testing
