// A job is untrusted code from a stranger: on the built-in node it runs as its own user, sees only
// its own environment and folders, cannot leave anything running after it, cannot start more
// processes than its limit, and cannot open the GPUs it was not given (docs/security.md).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
  - name: rival
    run_as: {uid: 4321, gid: 4321}
    queues:
      - {name: rival-q, guaranteed: {gpu: 0}}
  - name: ops
    allow_root: true
    run_as: {uid: 0}
    queues:
      - {name: ops-q, guaranteed: {gpu: 0}}
users:
  - {name: carol, tenant: lab, role: member, run_as: {uid: 5555}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G, nvlink_domains: 2}}
)";

// A character major nothing drives: fake GPU i is the device 240:i (gpuI in the test's folder).
constexpr int kFakeMajor = 240;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

class ConfinementTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/cluster.yaml") << kConfig;
    // A secret in the server's own environment, which no task may see.
    setenv("ARBITER_TEST_SERVER_SECRET", "server-secret-value", 1);
    if (geteuid() == 0) {
      std::filesystem::create_directories(dir_.path() + "/dev");
      chmod((dir_.path() + "/dev").c_str(), 0755);
      for (int i = 0; i < 8; ++i) {
        const std::string dev = fmt::format("{}/dev/gpu{}", dir_.path(), i);
        mknod(dev.c_str(), S_IFCHR | 0666, makedev(kFakeMajor, static_cast<unsigned>(i)));
        chmod(dev.c_str(), 0666);  // as /dev/nvidiaN are
      }
    }
    ASSERT_TRUE(server_.Start(
        dir_.path(),
        {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box",
         "--fake-gpu-device-major", std::to_string(kFakeMajor), "--max-task-processes", "48"}))
        << server_.output();
    unsetenv("ARBITER_TEST_SERVER_SECRET");
    admin_ = server_.Client(server_.admin_token());
  }

  uint64_t Submit(json body, httplib::Client* as = nullptr) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    auto r =
        (as != nullptr ? as : admin_.get())->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json Get(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
    return r ? json::parse(r->body) : json();
  }

  json WaitFor(uint64_t id, const std::string& state, int max_polls = 300) {
    json j;
    for (int i = 0; i < max_polls; ++i) {
      j = Get(id);
      if (j["state"] == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump();
    return j;
  }

  std::string Log(uint64_t id, const char* ext = "out") {
    return ReadFile(fmt::format("{}/jobs/{}/task-0.{}", server_.node_dir(), id, ext));
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

// The reports of a hostile tenant: a job printed the admin token, read the store's journal and
// another job's log, and appended to it. Now it runs as an unprivileged user in its own folder,
// with nothing of the server's environment, and every one of those reads and writes is refused.
TEST_F(ConfinementTest, TaskCannotReachTheServersSecretsOrOtherJobs) {
  const uint64_t first = Submit({{"command", {"sh", "-c", "echo first-job-output; sleep 600"}},
                                 {"resources", {{"gpus", 1}}}});
  WaitFor(first, "running");
  const std::string data = server_.data_dir();
  const std::string node = server_.node_dir();
  const std::string probe = fmt::format(
      "id -u; pwd; echo HOME=$HOME; "
      "for f in {d}/admin.token {d}/arbiter.db {d}/arbiter.db-wal {n}/jobs/{f}/task-0.out; do "
      "  cat $f >/dev/null 2>&1 && echo read:$f || echo denied:$f; done; "
      "ls {d} >/dev/null 2>&1 && echo listed:data || echo denied:list-data; "
      "ls {n}/jobs >/dev/null 2>&1 && echo listed:jobs || echo denied:list-jobs; "
      "(echo forged >> {n}/jobs/{f}/task-0.out) 2>/dev/null && echo wrote:log || "
      "echo denied:write-log; "
      "touch {d}/planted 2>/dev/null && echo wrote:data || echo denied:write-data; "
      "echo ok > mine && echo wrote:own",
      fmt::arg("d", data), fmt::arg("n", node), fmt::arg("f", first));
  const uint64_t id = Submit({{"command", {"sh", "-c", probe}}, {"resources", {{"gpus", 1}}}});
  WaitFor(id, "succeeded");
  const std::string out = Log(id);
  std::istringstream lines(out);
  std::string uid, pwd;
  std::getline(lines, uid);
  std::getline(lines, pwd);
  EXPECT_EQ(pwd, fmt::format("{}/work/{}", node, id)) << out;
  EXPECT_NE(out.find(fmt::format("HOME={}/work/{}\n", node, id)), std::string::npos) << out;
  EXPECT_NE(out.find("wrote:own"), std::string::npos) << out;
  if (geteuid() != 0) GTEST_SKIP() << "the server is not root: tasks run as its own user";
  EXPECT_NE(uid, "0") << out;
  EXPECT_EQ(out.find("read:"), std::string::npos) << out;
  EXPECT_EQ(out.find("listed:"), std::string::npos) << out;
  EXPECT_EQ(out.find("wrote:log"), std::string::npos) << out;
  EXPECT_EQ(out.find("wrote:data"), std::string::npos) << out;
  EXPECT_EQ(Log(first), "first-job-output\n");
  EXPECT_FALSE(std::filesystem::exists(data + "/planted"));
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", first), "", "application/json");
}

// The environment is the job's and Arbiter's only: nothing of the server's.
TEST_F(ConfinementTest, EnvironmentIsOnlyTheJobsAndArbiters) {
  const uint64_t id = Submit({{"command", {"/usr/bin/env"}},
                              {"env", {{"HF_HOME", "/data/hf"}}},
                              {"resources", {{"gpus", 2}}}});
  WaitFor(id, "succeeded");
  const std::string out = Log(id);
  EXPECT_EQ(out.find("server-secret-value"), std::string::npos) << out;
  const std::set<std::string> allowed = {"PATH",
                                         "HOME",
                                         "USER",
                                         "LOGNAME",
                                         "TMPDIR",
                                         "HF_HOME",
                                         "CUDA_VISIBLE_DEVICES",
                                         "CUDA_DEVICE_ORDER",
                                         "NVIDIA_VISIBLE_DEVICES",
                                         "ARBITER_JOB_ID",
                                         "ARBITER_TASK_INDEX",
                                         "ARBITER_NODE_NAME",
                                         "ARBITER_QUEUE",
                                         "ARBITER_NODES",
                                         "ARBITER_RESTART_COUNT",
                                         "ARBITER_CHECKPOINT_DIR",
                                         "ARBITER_STEP_KEY",
                                         "WORLD_SIZE",
                                         "RANK",
                                         "NODE_RANK",
                                         "LOCAL_RANK",
                                         "MASTER_ADDR",
                                         "MASTER_PORT"};
  std::istringstream lines(out);
  size_t count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const std::string name = line.substr(0, line.find('='));
    EXPECT_TRUE(allowed.count(name)) << "unexpected variable " << line;
  }
  EXPECT_EQ(count, allowed.size()) << out;
  EXPECT_NE(out.find("HF_HOME=/data/hf\n"), std::string::npos);
  // Arbiter's own tools (srun) come first, then the system's, nothing of the server's PATH.
  EXPECT_NE(out.find("/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("PATH=" + dir_.path() + "/node/bin:"), std::string::npos) << out;
  // The step key is this job's own (derived from the server's secret, never the secret itself).
  EXPECT_EQ(out.find("ARBITER_TEST_SERVER_SECRET"), std::string::npos) << out;
}

// Processes that leave the task's process group and session are stopped with it, and its GPUs go
// to the next job only once they are gone.
TEST_F(ConfinementTest, EscapedProcessesDieBeforeTheGpusAreReused) {
  const uint64_t id =
      Submit({{"command", {"sh", "-c", "setsid sleep 4243.5 & (sleep 4244.5 &); sleep 600"}},
              {"resources", {{"gpus", 8}}}});
  WaitFor(id, "running");
  for (int i = 0; i < 100; ++i) {  // the escaped processes are up
    if (system("pgrep -f '^sleep 4243.5$' >/dev/null && pgrep -f '^sleep 4244.5$' >/dev/null") == 0)
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", id), "", "application/json");
  // The next job gets all 8 GPUs: by then nothing of the first may run.
  const uint64_t next =
      Submit({{"command", {"sh", "-c", "pgrep -f '^sleep 424[34].5$' || echo none-left"}},
              {"resources", {{"gpus", 8}}}});
  WaitFor(next, "succeeded");
  EXPECT_EQ(Log(next), "none-left\n");
  EXPECT_EQ(Get(id)["state"], "cancelled");
  // The walltime ends escaped processes the same way.
  const uint64_t timed = Submit({{"command", {"sh", "-c", "setsid sleep 4245.5 & sleep 600"}},
                                 {"walltime_seconds", 1},
                                 {"grace_period_seconds", 1},
                                 {"resources", {{"gpus", 1}}}});
  WaitFor(timed, "timed-out");
  EXPECT_NE(system("pgrep -f '^sleep 4245.5$' >/dev/null"), 0) << "an escaped process outlived "
                                                                  "its task's walltime";
}

// A task may not start more processes than --max-task-processes (48 here): a shell loop of 100
// background processes cannot fork past it (dash gives up: "Cannot fork"), and what did start is
// gone with the task.
TEST_F(ConfinementTest, TaskCannotStartMoreProcessesThanItsLimit) {
  const uint64_t id = Submit(
      {{"command", {"sh", "-c", "for i in $(seq 100); do sleep 4246.5 & done; echo survived"}},
       {"resources", {{"gpus", 1}}}});
  const json j = WaitFor(id, "failed");
  EXPECT_EQ(Log(id).find("survived"), std::string::npos);
  EXPECT_NE(Log(id, "err").find("Cannot fork"), std::string::npos) << Log(id, "err");
  EXPECT_NE(system("pgrep -f '^sleep 4246.5$' >/dev/null"), 0);
}

// A task can open its own GPUs' devices and not the others' (the device cgroup): an allowed
// device of no driver answers ENXIO, a denied one EPERM before any driver is asked.
TEST_F(ConfinementTest, TaskCanOpenOnlyItsOwnGpuDevices) {
  if (geteuid() != 0) GTEST_SKIP() << "device nodes and cgroups need root";
  auto node = json::parse(admin_->Get("/api/v1/nodes/box")->body);
  const std::string cgroups = node["status"].value("cgroups", "");
  if (cgroups.rfind("unavailable", 0) == 0) GTEST_SKIP() << cgroups;
  const std::string probe = fmt::format(
      "echo $CUDA_VISIBLE_DEVICES; for i in 0 1 2 3 4 5 6 7; do (exec 3<>{}/dev/gpu$i) 2>&1 | "
      "sed -e \"s/.*not permitted.*/$i:denied/\" -e \"s/.*No such device.*/$i:allowed/\"; done",
      dir_.path());
  const uint64_t id = Submit({{"command", {"sh", "-c", probe}}, {"resources", {{"gpus", 2}}}});
  WaitFor(id, "succeeded");
  const std::string out = Log(id);
  const std::string visible = out.substr(0, out.find('\n'));
  std::set<int> mine;
  std::istringstream list(visible);
  for (std::string g; std::getline(list, g, ',');) mine.insert(std::stoi(g));
  ASSERT_EQ(mine.size(), 2u) << out;
  std::string want = visible + "\n";
  for (int i = 0; i < 8; ++i)
    want += fmt::format("{}:{}\n", i, mine.count(i) ? "allowed" : "denied");
  EXPECT_EQ(out, want) << cgroups;
}

// Each tenant's tasks run as its own uid (given by the server, or its configuration's run_as;
// a user's run_as first), so one tenant's job cannot read another's files; root only for a
// tenant that allows it.
TEST_F(ConfinementTest, TenantsRunAsTheirOwnUsers) {
  if (geteuid() != 0) GTEST_SKIP() << "switching users needs root";
  const json tenants = json::parse(admin_->Get("/api/v1/tenants")->body);
  std::map<std::string, json> run_as;
  for (const json& t : tenants["items"]) run_as[t["name"]] = t["run_as"];
  const int64_t lab_uid = run_as["lab"]["uid"];
  EXPECT_GT(lab_uid, 200000);  // the server's own for the tenant (--tenant-uid-base)
  EXPECT_EQ(run_as["rival"]["uid"], 4321);
  EXPECT_EQ(run_as["ops"]["uid"], 0);
  const uint64_t lab = Submit({{"command",
                                {"sh", "-c",
                                 "id -u; echo lab-data > $HOME/data; "
                                 "chmod 644 $HOME/data; sleep 600"}},
                               {"resources", {{"gpus", 1}}}});
  WaitFor(lab, "running");
  for (int i = 0;
       i < 100 && !std::filesystem::exists(fmt::format("{}/work/{}/data", server_.node_dir(), lab));
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const uint64_t rival = Submit(
      {{"queue", "rival-q"},
       {"command",
        {"sh", "-c",
         fmt::format("id -u; cat {}/work/{}/data || echo denied", server_.node_dir(), lab)}}});
  const uint64_t ops = Submit({{"queue", "ops-q"}, {"command", {"id", "-u"}}});
  auto t = admin_->Post("/api/v1/tokens", json{{"user", "carol"}}.dump(), "application/json");
  ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
  auto carol = server_.Client(json::parse(t->body)["token"]);
  const uint64_t mine = Submit({{"command", {"id", "-u"}}}, carol.get());
  WaitFor(rival, "succeeded");
  WaitFor(ops, "succeeded");
  WaitFor(mine, "succeeded");
  EXPECT_EQ(Log(lab).substr(0, Log(lab).find('\n')), std::to_string(lab_uid));
  EXPECT_EQ(Log(rival), "4321\ndenied\n") << Log(rival, "err");
  EXPECT_EQ(Log(ops), "0\n");
  EXPECT_EQ(Log(mine), "5555\n");
  admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", lab), "", "application/json");
}

}  // namespace
}  // namespace arbiter::testing
