// Integration tests of execution on the built-in node: real processes, real signals.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "checkpoint_job.h"
#include "model/job.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: best-effort, value: 0, preemptible: true, min_runtime_seconds: 0, grace_period_seconds: 5}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G, nvlink_domains: 2}}
)";

class ExecTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(server_.Start(dir_.path(),
                              {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box"}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  uint64_t Submit(json body) {
    body["queue"] = "lab-q";
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json Get(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
    return r ? json::parse(r->body) : json();
  }

  // Polls (bounded, 50 ms apart) until the job is in `state`; returns the job.
  json WaitFor(uint64_t id, const std::string& state, int max_polls = 200) {
    json j;
    for (int i = 0; i < max_polls; ++i) {
      j = Get(id);
      if (j["state"] == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump();
    return j;
  }

  std::string Output(uint64_t id, int task = 0) {
    std::ifstream f(fmt::format("{}/jobs/{}/task-{}.out", server_.node_dir(), id, task));
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(ExecTest, TaskSeesItsGpusAndIdentity) {
  const uint64_t id =
      Submit({{"command", {"sh", "-c", "env | sort"}}, {"resources", {{"gpus", 4}}}});
  WaitFor(id, "succeeded");
  const std::string out = Output(id);
  EXPECT_NE(out.find("CUDA_VISIBLE_DEVICES=0,1,2,3\n"), std::string::npos) << out;
  EXPECT_NE(out.find("NVIDIA_VISIBLE_DEVICES=0,1,2,3\n"), std::string::npos);
  EXPECT_NE(out.find(fmt::format("ARBITER_JOB_ID={}\n", id)), std::string::npos);
  EXPECT_NE(out.find("ARBITER_TASK_INDEX=0\n"), std::string::npos);
  EXPECT_NE(out.find("ARBITER_NODE_NAME=box\n"), std::string::npos);
  EXPECT_NE(out.find("ARBITER_RESTART_COUNT=0\n"), std::string::npos);
  EXPECT_NE(out.find("WORLD_SIZE=1\n"), std::string::npos);
  EXPECT_NE(out.find("ARBITER_CHECKPOINT_DIR="), std::string::npos);
  EXPECT_EQ(Get(id)["exit_code"], 0);
}

// The executor sets only reserved names (which a job may not set) besides PATH: the one list
// (kReservedEnvNames) is what both the submission check and the executor go by.
TEST_F(ExecTest, TaskEnvironmentIsTheJobsOwnPlusReservedNames) {
  const uint64_t id = Submit({{"command", {"env"}},
                              {"env", {{"HF_HOME", "/data/hf"}, {"PATH", "/usr/bin:/bin"}}},
                              {"resources", {{"gpus", 1}}}});
  WaitFor(id, "succeeded");
  std::istringstream lines(Output(id));
  std::string line;
  int seen = 0;
  while (std::getline(lines, line)) {
    const std::string name = line.substr(0, line.find('='));
    if (name == "HF_HOME" || name == "PATH") {
      ++seen;
      continue;
    }
    EXPECT_TRUE(IsReservedEnvName(name)) << name << " is set by the executor but not reserved";
  }
  EXPECT_EQ(seen, 2);
  // The job's own PATH, after the node's tools folder (srun).
  EXPECT_NE(Output(id).find("/bin:/usr/bin:/bin\n"), std::string::npos) << Output(id);
}

// A secret variable reaches the task, and no answer of the API, no event and no audit record
// carries its value: the job shows its name only. It is kept across a restart.
TEST_F(ExecTest, SecretEnvReachesTheTaskAndNoAnswer) {
  const std::string secret = "hf_s3cr3t_0123456789";
  auto r = admin_->Post("/api/v1/jobs",
                        json{{"queue", "lab-q"},
                             {"command", {"sh", "-c", "echo token=$HF_TOKEN"}},
                             {"env", {{"HF_HOME", "/data/hf"}}},
                             {"secret_env", {{"HF_TOKEN", secret}}},
                             {"resources", {{"gpus", 1}}}}
                            .dump(),
                        "application/json");
  ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
  EXPECT_EQ(r->body.find(secret), std::string::npos) << r->body;
  const uint64_t id = json::parse(r->body)["id"].get<uint64_t>();
  const json j = WaitFor(id, "succeeded");
  EXPECT_EQ(j["secret_env"], json::array({"HF_TOKEN"}));
  EXPECT_EQ(j["env"], (json{{"HF_HOME", "/data/hf"}}));
  EXPECT_EQ(Output(id), "token=" + secret + "\n");
  for (const std::string& path :
       {fmt::format("/api/v1/jobs/{}", id), std::string("/api/v1/jobs"),
        fmt::format("/api/v1/jobs/{}/events", id), std::string("/api/v1/audit"),
        fmt::format("/api/v1/jobs/{}/why", id)}) {
    auto g = admin_->Get(path);
    ASSERT_TRUE(g) << path;
    EXPECT_EQ(g->body.find(secret), std::string::npos) << path << ": " << g->body;
  }
  // A secret may not shadow a reserved name, nor be given twice.
  for (const auto& [env, secret_env, field] :
       {std::tuple{json::object(), json{{"RANK", "3"}}, "secret_env.RANK"},
        std::tuple{json{{"A", "1"}}, json{{"A", "2"}}, "secret_env.A"}}) {
    auto bad = admin_->Post(
        "/api/v1/jobs",
        json{{"queue", "lab-q"}, {"command", {"true"}}, {"env", env}, {"secret_env", secret_env}}
            .dump(),
        "application/json");
    ASSERT_TRUE(bad);
    EXPECT_EQ(bad->status, 400) << bad->body;
    EXPECT_EQ(json::parse(bad->body)["error"]["field"], field) << bad->body;
  }
  // After a restart the job still names its secret, and still shows no value.
  ASSERT_EQ(WEXITSTATUS(server_.Kill(SIGTERM)), 0);
  ServerProcess again;
  ASSERT_TRUE(
      again.Start(dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box"}))
      << again.output();
  auto g = again.Client(again.admin_token())->Get(fmt::format("/api/v1/jobs/{}", id));
  ASSERT_TRUE(g);
  EXPECT_EQ(json::parse(g->body)["secret_env"], json::array({"HF_TOKEN"})) << g->body;
  EXPECT_EQ(g->body.find(secret), std::string::npos);
}

TEST_F(ExecTest, FailureRetriesWithBackoffThenFails) {
  const uint64_t id =
      Submit({{"command", {"sh", "-c", "echo try $ARBITER_RESTART_COUNT; exit 7"}},
              {"resources", {{"gpus", 1}}},
              {"retry", {{"max_retries", 2}, {"backoff_seconds", 0}, {"backoff_cap_seconds", 0}}}});
  json j;
  for (int i = 0; i < 200; ++i) {
    j = Get(id);
    if (j["state"] == "failed" && j["restarts"] == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(j["state"], "failed");
  EXPECT_EQ(j["restarts"], 2);
  EXPECT_EQ(j["exit_code"], 7);
  EXPECT_EQ(Output(id), "try 0\ntry 1\ntry 2\n");
}

TEST_F(ExecTest, CancelStopsTheProcessGroupAndFreesTheGpus) {
  const uint64_t id = Submit(
      {{"command", {"sh", "-c", "sleep 60 & sleep 60; wait"}}, {"resources", {{"gpus", 8}}}});
  WaitFor(id, "running");
  auto r = admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  ASSERT_EQ(r->status, 200);
  // The GPUs are free again once the processes are gone: a new 8-GPU job runs.
  const uint64_t next = Submit({{"command", {"true"}}, {"resources", {{"gpus", 8}}}});
  WaitFor(next, "succeeded");
  EXPECT_EQ(Get(id)["state"], "cancelled");
}

TEST_F(ExecTest, WalltimeEndsAJobAsTimedOut) {
  const uint64_t id = Submit({{"command", {"sleep", "60"}},
                              {"walltime_seconds", 1},
                              {"resources", {{"gpus", 1}}},
                              {"grace_period_seconds", 1}});
  const json j = WaitFor(id, "timed-out", 200);
  EXPECT_NE(j["reason"].get<std::string>().find("walltime"), std::string::npos);
}

// A preemptible job holding all GPUs gets SIGTERM when a higher-priority job arrives, saves a
// checkpoint, the new job runs, then the first resumes from its checkpoint with
// ARBITER_RESTART_COUNT=1 and succeeds.
// The built-in node reports GPU telemetry as an agent would (here its fake GPUs, no NVML on this
// machine): the GPUs a task holds show as busy in the node's status.
TEST_F(ExecTest, BuiltInNodeReportsTelemetryOfTheGpusInUse) {
  const uint64_t id = Submit({{"command", {"sh", "-c", "sleep 5"}}, {"resources", {{"gpus", 2}}}});
  const json j = WaitFor(id, "running");
  std::set<int> held;
  for (const json& g : j["placement"][0]["gpus"]) held.insert(g.get<int>());
  json gpus;
  int busy = 0;
  for (int i = 0; i < 100 && busy < 2; ++i) {  // bounded: telemetry every 2 s
    auto r = admin_->Get("/api/v1/nodes/box");
    const json n = r ? json::parse(r->body) : json();
    gpus = n["status"].value("gpus", json::array());
    busy = 0;
    for (const json& g : gpus) busy += g.value("utilization_pct", 0) > 0 ? 1 : 0;
    if (busy < 2) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_EQ(gpus.size(), 8u);
  for (const json& g : gpus) {
    EXPECT_EQ(g["utilization_pct"].get<int>() > 0, held.count(g["index"].get<int>()) == 1)
        << gpus.dump();
  }
  EXPECT_EQ(admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json")->status,
            200);
  WaitFor(id, "cancelled");
}

TEST_F(ExecTest, PreemptedJobCheckpointsAndResumes) {
  const uint64_t low = Submit({{"command", {"sh", "-c", kCheckpointJobScript}},
                               {"priority_class", "best-effort"},
                               {"resources", {{"gpus", 8}}}});
  WaitFor(low, "running");
  // Preempted only once it has set its trap (it says "started" then): a process that takes long
  // to start on a busy machine would otherwise die of the SIGTERM before it could checkpoint.
  for (int i = 0; i < 200 && Output(low).empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const uint64_t high = Submit({{"command", {"sh", "-c", "sleep 0.5"}},
                                {"priority_class", "critical"},
                                {"resources", {{"gpus", 8}}}});
  WaitFor(high, "succeeded");
  const json j = WaitFor(low, "succeeded");
  EXPECT_EQ(j["preemptions"], 1);
  EXPECT_EQ(Output(low), kCheckpointJobOutput);
  auto events = json::parse(admin_->Get(fmt::format("/api/v1/jobs/{}/events", low))->body);
  std::vector<std::string> to;
  for (const json& e : events["items"]) to.push_back(e["to"]);
  EXPECT_NE(std::find(to.begin(), to.end(), "preempting"), to.end());
  EXPECT_NE(std::find(to.begin(), to.end(), "preempted"), to.end());
}

}  // namespace
}  // namespace arbiter::testing
