// The control plane's side of node agents, on a real SQLite store and a fake clock: reports are
// idempotent and bound to their attempt, silent nodes go down and their jobs retry, unhealthy
// GPUs leave scheduling.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <chrono>
#include <thread>

#include "server/control_plane_test_fixture.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
)";

class AgentsTest : public ControlPlaneTest {
 protected:
  void SetUp() override { StartWith(kConfig, "cp-agents"); }

  int Count(uint64_t id, const std::string& to) {
    int n = 0;
    const json events = *cp_->JobEvents(admin_, id);  // kept: ranging over a temporary dangles
    for (const json& e : events["items"]) n += e["to"] == to ? 1 : 0;
    return n;
  }
};

TEST_F(AgentsTest, RegistrationFillsTheModelAndNeedsANodeToken) {
  Register("gpu-01", "i1");
  const json n = *cp_->GetNode(admin_, "gpu-01");
  EXPECT_EQ(n["gpus"].size(), 4u);
  EXPECT_EQ(n["gpus"][0]["model"], "A100-80G");
  EXPECT_EQ(n["gpus"][0]["memory_mib"], 81920);
  EXPECT_EQ(n["status"]["agent"]["log_url"], "http://10.0.0.9:4000");
  AgentRegistration r;
  r.node.name = "gpu-02";
  r.node.gpus = {{0, "H100", 0, true, 0}};
  r.instance = "x";
  auto bad = cp_->RegisterAgent(NodeToken("gpu-02"), r, "10.0.0.1");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().field(), "gpus[0].model");
  auto denied = cp_->RegisterAgent(admin_, r, "10.0.0.1");
  EXPECT_EQ(denied.status().code(), StatusCode::kPermissionDenied);
}

TEST_F(AgentsTest, RepeatedReportsAreAppliedOnce) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit({{"resources", {{"gpus", 2}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  json out = Beat("gpu-01", "i1");
  ASSERT_EQ(out["assignments"].size(), 1u);
  const uint64_t attempt = out["assignments"][0]["attempt"];
  EXPECT_EQ(attempt, 1u);
  EXPECT_EQ(out["assignments"][0]["master_addr"], "10.0.0.9");
  const std::vector<TaskReport> reports = {{1, id, 0, attempt, TaskEvent::kStarted, 0, false},
                                           {2, id, 0, attempt, TaskEvent::kExited, 0, false}};
  out = Beat("gpu-01", "i1", reports);
  EXPECT_EQ(out["acked_seq"], 2);
  EXPECT_TRUE(out["assignments"].empty());
  EXPECT_EQ(State(id), "succeeded");
  // The answer was lost: the agent sends the same reports again; after a server restart (new
  // session) they come with the same numbers and are checked against the job's state.
  Beat("gpu-01", "i1", reports);
  Register("gpu-01", "i1");
  Beat("gpu-01", "i1", reports);
  EXPECT_EQ(State(id), "succeeded");
  EXPECT_EQ(Count(id, "running"), 1);
  EXPECT_EQ(Count(id, "succeeded"), 1);
}

TEST_F(AgentsTest, AGangSucceedsOnlyOnceEveryTaskHasRunAndExited) {
  Register("gpu-01", "i1");
  Register("gpu-02", "i2");
  const uint64_t id =
      Submit({{"tasks", 2}, {"distinct_nodes", true}, {"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const json placed = (*cp_->GetJob(admin_, id))["placement"];
  ASSERT_EQ(placed.size(), 2u);
  const std::string n0 = placed[0]["node"];
  const std::string n1 = placed[1]["node"];
  const std::string i0 = n0 == "gpu-01" ? "i1" : "i2";
  const std::string i1 = n1 == "gpu-01" ? "i1" : "i2";
  // Task 0 runs and exits 0 before task 1's node has even started it: the gang is not done.
  Beat(n0, i0,
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 0, false}});
  EXPECT_NE(State(id), "succeeded");
  EXPECT_EQ(Count(id, "succeeded"), 0);
  Beat(n1, i1,
       {{1, id, 1, 1, TaskEvent::kStarted, 0, false}, {2, id, 1, 1, TaskEvent::kExited, 0, false}});
  EXPECT_EQ(State(id), "succeeded");
  EXPECT_EQ(Count(id, "succeeded"), 1);
}

// One task of a gang fails: the node that runs another is told to stop it at once, so its GPUs
// are not held by a job that has already failed.
TEST_F(AgentsTest, AFailedTaskStopsItsGangOnTheOtherNode) {
  Register("gpu-01", "i1");
  Register("gpu-02", "i2");
  const uint64_t id =
      Submit({{"tasks", 2}, {"distinct_nodes", true}, {"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const json placed = (*cp_->GetJob(admin_, id))["placement"];
  ASSERT_EQ(placed.size(), 2u);
  const std::string n0 = placed[0]["node"];
  const std::string n1 = placed[1]["node"];
  const std::string i0 = n0 == "gpu-01" ? "i1" : "i2";
  const std::string i1 = n1 == "gpu-01" ? "i1" : "i2";
  Beat(n1, i1, {{1, id, 1, 1, TaskEvent::kStarted, 0, false}});
  Beat(n0, i0,
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 3, false}});
  const auto a = cp_->AssignmentsFor(n1);
  ASSERT_EQ(a.size(), 1u);
  EXPECT_FALSE(a[0].run) << "task 1 still runs after task 0 failed";
  Beat(n1, i1, {{2, id, 1, 1, TaskEvent::kExited, 143, false}});
  EXPECT_EQ(State(id), "failed");
}

// A cancel reaches the node that runs the job only once it is durable: were the server to crash
// before the commit, the store would still have the job running, and so would the node.
TEST_F(AgentsTest, AStopReachesTheNodeOnlyOnceCommitted) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit({{"resources", {{"gpus", 2}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat("gpu-01", "i1", {{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  ASSERT_EQ(State(id), "running");
  auto runs = [&] {
    const auto a = cp_->AssignmentsFor("gpu-01");
    return a.size() == 1 && a[0].run;
  };
  ASSERT_TRUE(runs());
  // Another connection holds the write lock: the store's next commit waits behind it.
  sqlite3* gate = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/arbiter.db").c_str(), &gate), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(gate, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  std::thread cancel([&] { EXPECT_TRUE(cp_->JobAction(admin_, id, "cancel").ok()); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (State(id) != "cancelled" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(State(id), "cancelled");  // in memory, not yet committed
  EXPECT_TRUE(runs()) << "the node was told to stop before the cancel was durable";
  ASSERT_EQ(sqlite3_exec(gate, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(gate);
  cancel.join();
  const auto a = cp_->AssignmentsFor("gpu-01");
  ASSERT_EQ(a.size(), 1u);
  EXPECT_FALSE(a[0].run);  // now the node stops the task
}

TEST_F(AgentsTest, AWatchReturnsWhenTheNodeGetsWork) {
  Register("gpu-01", "i1");
  const uint64_t v0 = Beat("gpu-01", "i1")["assign_version"];
  // Nothing changes: the watch waits its time and answers the same version.
  auto same = cp_->WatchAssignments(node_, "gpu-01", v0, 20);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, v0);
  // A job placed on the node: a watch from the old version returns at once with a new one, and
  // the next heartbeat carries the assignment and that version.
  const uint64_t id = Submit({{"resources", {{"gpus", 2}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  auto changed = cp_->WatchAssignments(node_, "gpu-01", v0, 60000);
  ASSERT_TRUE(changed.ok());
  EXPECT_NE(*changed, v0);
  const json out = Beat("gpu-01", "i1");
  ASSERT_EQ(out["assignments"].size(), 1u);
  EXPECT_EQ(out["assignments"][0]["job"], id);
  EXPECT_EQ(out["assign_version"], *changed);
  // A cancel changes the assignment (run: false) and wakes the watch again.
  ASSERT_TRUE(cp_->JobAction(admin_, id, "cancel").ok());
  auto stopped = cp_->WatchAssignments(node_, "gpu-01", *changed, 60000);
  ASSERT_TRUE(stopped.ok());
  EXPECT_NE(*stopped, *changed);
  // Only node tokens watch, and only nodes that exist.
  EXPECT_EQ(cp_->WatchAssignments(admin_, "gpu-01", 0, 0).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->WatchAssignments(NodeToken("gpu-09"), "gpu-09", 0, 0).status().code(),
            StatusCode::kNotFound);
}

TEST_F(AgentsTest, ReportsOfAnEarlierAttemptChangeNothing) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit(
      {{"resources", {{"gpus", 1}}}, {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat("gpu-01", "i1",
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 3, false}});
  EXPECT_EQ(State(id), "retry-wait");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());  // back to pending
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());  // admitted again: attempt 2
  json out = Beat("gpu-01", "i1");
  ASSERT_EQ(out["assignments"].size(), 1u);
  EXPECT_EQ(out["assignments"][0]["attempt"], 2);
  // A late copy of attempt 1's exit (another session, so not skipped by its number).
  Register("gpu-01", "i2");
  Beat("gpu-01", "i2", {{1, id, 0, 1, TaskEvent::kExited, 3, false}});
  EXPECT_EQ(State(id), "admitted");
}

TEST_F(AgentsTest, ASilentNodeGoesDownAndItsJobRetriesElsewhere) {
  Register("gpu-01", "i1");
  Register("gpu-02", "i2");
  const uint64_t id = Submit(
      {{"resources", {{"gpus", 4}}}, {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const std::string first = (*cp_->GetJob(admin_, id))["placement"][0]["node"];
  const std::string other = first == "gpu-01" ? "gpu-02" : "gpu-01";
  const std::string first_instance = first == "gpu-01" ? "i1" : "i2";
  const std::string other_instance = first == "gpu-01" ? "i2" : "i1";
  Beat(first, first_instance, {{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  EXPECT_EQ(State(id), "running");
  EXPECT_TRUE(cp_->DetectDownNodes(6000, "").empty());
  now_ += 4000;
  Beat(other, other_instance);
  now_ += 3000;  // `first` silent for 7 s, `other` for 3 s
  EXPECT_EQ(cp_->DetectDownNodes(6000, ""), std::vector<std::string>{first});
  EXPECT_EQ((*cp_->GetNode(admin_, first))["state"], "down");
  EXPECT_EQ(State(id), "retry-wait");
  EXPECT_EQ(Count(id, "lost"), 1);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ((*cp_->GetJob(admin_, id))["placement"][0]["node"], other);
  // The agent is back: the node is ready again; the old task is not assigned to it any more.
  json out = Beat(first, first_instance);
  EXPECT_TRUE(out["assignments"].empty());
  EXPECT_EQ((*cp_->GetNode(admin_, first))["state"], "ready");
  // Exempt: the built-in node.
  now_ += 60000;
  EXPECT_EQ(cp_->DetectDownNodes(6000, first), std::vector<std::string>{other});
}

TEST_F(AgentsTest, HeartbeatWithoutSessionAsksToRegister) {
  Register("gpu-01", "i1");
  auto r = cp_->Heartbeat(node_, {"gpu-01", "someone-else", {}, {}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  r = cp_->Heartbeat(NodeToken("gpu-09"), {"gpu-09", "i1", {}, {}});
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  r = cp_->Heartbeat(admin_, {"gpu-01", "i1", {}, {}});
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
}

TEST_F(AgentsTest, AnUnhealthyGpuLosesItsTaskAndLeavesScheduling) {
  Register("gpu-01", "i1", 2);
  const uint64_t id = Submit({{"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const int gpu = (*cp_->GetJob(admin_, id))["placement"][0]["gpus"][0];
  Beat("gpu-01", "i1", {{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  GpuTelemetry bad;
  bad.index = gpu;
  bad.healthy = false;
  bad.health_reason = "XID 79";
  Beat("gpu-01", "i1", {}, {bad});
  EXPECT_EQ(State(id), "failed");  // lost, no retries left
  EXPECT_EQ(Count(id, "lost"), 1);
  const json n = *cp_->GetNode(admin_, "gpu-01");
  EXPECT_FALSE(n["gpus"][gpu]["healthy"].get<bool>());
  EXPECT_EQ(n["status"]["gpus"][0]["health_reason"], "XID 79");
  // Two 1-GPU jobs: only the healthy GPU is used.
  const uint64_t a = Submit({{"resources", {{"gpus", 1}}}});
  const uint64_t b = Submit({{"resources", {{"gpus", 1}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  EXPECT_EQ(State(a), "admitted");
  EXPECT_EQ(State(b), "pending");
  EXPECT_NE((*cp_->GetJob(admin_, a))["placement"][0]["gpus"][0], gpu);
}

TEST_F(AgentsTest, LogSourceFollowsTheTaskToItsNode) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit({{"resources", {{"gpus", 1}}}});
  auto pending = cp_->JobLogSource(admin_, id, 0);
  ASSERT_TRUE(pending.ok());  // no node yet: a follower waits for one
  EXPECT_EQ(pending->node, "");
  EXPECT_EQ(pending->attempt, 0u);
  EXPECT_EQ(pending->state, "pending");
  EXPECT_FALSE(pending->running || pending->ended);
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  auto src = cp_->JobLogSource(admin_, id, 0);
  ASSERT_TRUE(src.ok());
  EXPECT_EQ(src->node, "gpu-01");
  EXPECT_TRUE(src->running);
  EXPECT_EQ(src->agent_url, "http://10.0.0.9:4000");
  Beat("gpu-01", "i1",
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 0, false}});
  src = cp_->JobLogSource(admin_, id, 0);
  ASSERT_TRUE(src.ok());  // still found after the placement is released
  EXPECT_EQ(src->node, "gpu-01");
  EXPECT_FALSE(src->running);
  EXPECT_TRUE(src->ended);
  EXPECT_EQ(cp_->JobLogSource(admin_, id, 1).status().field(), "task");
  EXPECT_EQ(cp_->JobLogSource(node_, id, 0).status().code(), StatusCode::kPermissionDenied);
}

// Every run of a task is told apart for its logs: its node (with that node's log port) and why
// the run before it ended, from the job's history.
TEST_F(AgentsTest, LogRunsTellEachRunsNodeAndWhyTheLastEnded) {
  Register("gpu-01", "i1");
  const uint64_t id = Submit(
      {{"resources", {{"gpus", 1}}}, {"retry", {{"max_retries", 1}, {"backoff_seconds", 0}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  Beat("gpu-01", "i1",
       {{1, id, 0, 1, TaskEvent::kStarted, 0, false}, {2, id, 0, 1, TaskEvent::kExited, 3, false}});
  ASSERT_EQ(State(id), "retry-wait");
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  ASSERT_EQ(State(id), "admitted");
  auto runs = cp_->JobLogRuns(admin_, id, 0);
  ASSERT_TRUE(runs.ok()) << runs.status().message();
  ASSERT_EQ(runs->size(), 2u);
  EXPECT_EQ((*runs)[0].attempt, 1u);
  EXPECT_EQ((*runs)[0].node, "gpu-01");
  EXPECT_EQ((*runs)[0].after, "");
  EXPECT_EQ((*runs)[0].agent_url, "http://10.0.0.9:4000");
  EXPECT_EQ((*runs)[1].attempt, 2u);
  EXPECT_EQ((*runs)[1].after, "a retry (exit 3)");
  EXPECT_EQ(cp_->JobLogRuns(node_, id, 0).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->JobLogRuns(admin_, id, 2).status().field(), "task");
}

// A node token speaks for its own node only: it cannot register, beat or watch as another node
// (nor the built-in one), its reports about another node's tasks or another run change nothing,
// and the log port it announces is reached only on the host the registration came from.
TEST_F(AgentsTest, NodeTokensAreBoundToTheirNode) {
  cp_->SetBuiltinNode("box");
  Register("gpu-01", "i1");
  Register("gpu-02", "i2");
  AgentRegistration r;
  r.node.name = "gpu-01";
  r.node.gpus = {{0, "", 0, true, 0}};
  r.instance = "evil";
  EXPECT_EQ(cp_->RegisterAgent(NodeToken("gpu-02"), r, "10.0.0.2").status().code(),
            StatusCode::kPermissionDenied);
  Principal unbound = node_;
  unbound.node = "";  // a node token made before tokens named their node
  EXPECT_EQ(cp_->RegisterAgent(unbound, r, "10.0.0.2").status().code(),
            StatusCode::kPermissionDenied);
  r.node.name = "box";
  auto builtin = cp_->RegisterAgent(NodeToken("box"), r, "10.0.0.2");
  EXPECT_EQ(builtin.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(builtin.status().message().find("built-in"), std::string::npos);
  EXPECT_EQ(cp_->Heartbeat(NodeToken("gpu-02"), {"gpu-01", "i1", {}, {}}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->WatchAssignments(NodeToken("gpu-02"), "gpu-01", 0, 0).status().code(),
            StatusCode::kPermissionDenied);

  // A job on gpu-01: gpu-02's agent reports it finished, in its own session: nothing changes.
  const uint64_t id = Submit({{"resources", {{"gpus", 4}}}});
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  const std::string on = (*cp_->GetJob(admin_, id))["placement"][0]["node"];
  const std::string other = on == "gpu-01" ? "gpu-02" : "gpu-01";
  const std::string other_instance = other == "gpu-01" ? "i1" : "i2";
  const std::string instance = on == "gpu-01" ? "i1" : "i2";
  Beat(on, instance, {{1, id, 0, 1, TaskEvent::kStarted, 0, false}});
  EXPECT_EQ(State(id), "running");
  json out = Beat(other, other_instance, {{1, id, 0, 1, TaskEvent::kExited, 0, false}});
  EXPECT_TRUE(out["assignments"].empty()) << out.dump();  // it never sees the job either
  EXPECT_EQ(State(id), "running");
  // Nor does a report about another run (attempt) from the right node.
  Beat(on, instance, {{2, id, 0, 7, TaskEvent::kExited, 0, false}});
  EXPECT_EQ(State(id), "running");

  // The log port is proxied on the registration's own address, whatever host the agent names.
  AgentRegistration moved;
  moved.node.name = "gpu-03";
  moved.node.cpu_milli = 1000;
  moved.node.memory_mib = 1024;
  moved.instance = "i3";
  moved.log_host = "169.254.169.254";
  moved.log_port = 80;
  ASSERT_TRUE(cp_->RegisterAgent(NodeToken("gpu-03"), moved, "10.0.0.3").ok());
  EXPECT_EQ((*cp_->GetNode(admin_, "gpu-03"))["status"]["agent"]["log_url"], "http://10.0.0.3:80");
}

}  // namespace
}  // namespace arbiter::server
