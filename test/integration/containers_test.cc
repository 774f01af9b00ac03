// Integration tests of jobs in OCI containers on the built-in node: real podman, a real registry
// (Debian's docker-registry on loopback) and an image built here from the static busybox.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "checkpoint_job.h"
#include "registry_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: best-effort, value: 0, preemptible: true, min_runtime_seconds: 0, grace_period_seconds: 10}
tenants:
  - name: lab
    volumes: [{name: ckpt}]
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
  - name: rival
    volumes: [{name: ckpt}]
    queues:
      - {name: rival-q, guaranteed: {gpu: 0}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G, nvlink_domains: 2}}
)";

// One registry and one pushed image for the whole suite (each test has its own server, whose
// node starts without the image).
struct Registry {
  TempDir dir;
  RegistryProcess registry;
  std::unique_ptr<TestPodman> podman;
  std::string image;   // host:port/lab/busybox:1
  std::string digest;  // as pushed
  std::string skip;    // why containers cannot run on this machine ("": they can)
  std::string error;   // why the registry or the image could not be made
};
Registry* g_registry = nullptr;

class ContainersTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    g_registry = new Registry();
    Registry& r = *g_registry;
    r.podman = std::make_unique<TestPodman>(r.dir.path() + "/podman");
    std::string why;
    if (!r.podman->BuildBusybox("localhost/arbiter-test/busybox:1", &why)) {
      r.error = why;
      return;
    }
    // Only a machine where podman cannot run containers at all skips these tests.
    std::string out;
    if (r.podman->Run("run --rm --network host localhost/arbiter-test/busybox:1 true", &out) != 0) {
      r.skip = "podman cannot run containers on this machine: " + out;
      return;
    }
    if (!r.registry.Start(r.dir.path() + "/registry", &why)) {
      r.error = why;
      return;
    }
    r.image = r.registry.host() + "/lab/busybox:1";
    if (!r.podman->Push("localhost/arbiter-test/busybox:1", r.image, &r.digest, &why)) {
      r.error = why;
    }
  }

  static void TearDownTestSuite() {
    delete g_registry;
    g_registry = nullptr;
  }

  void SetUp() override {
    if (!g_registry->skip.empty()) GTEST_SKIP() << g_registry->skip;
    ASSERT_TRUE(g_registry->error.empty()) << g_registry->error;
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(
        server_.Start(dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--local-node",
                                    "box", "--insecure-registry", g_registry->registry.host()}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  void TearDown() override {
    const std::string c = server_.node_dir() + "/containers";
    if (!std::filesystem::exists(c)) return;
    server_.Kill(SIGKILL);
    server_.KillTasks();
    // What the node's podman keeps (containers of killed tasks, its storage's mounts).
    RunShell(
        fmt::format("CONTAINERS_CONF={0}/containers.conf podman --root {0}/root --runroot "
                    "{0}/run system reset --force",
                    c));
  }

  uint64_t Submit(json body) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json Get(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
    return r ? json::parse(r->body) : json();
  }

  // Polls (bounded, 100 ms apart) until the job is in `state`; returns the job.
  json WaitFor(uint64_t id, const std::string& state, int max_polls = 600) {
    json j;
    for (int i = 0; i < max_polls; ++i) {
      j = Get(id);
      if (j["state"] == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump() << "\n"
                  << Events(id).dump();
    return j;
  }

  json Events(uint64_t id) {
    auto r = admin_->Get(fmt::format("/api/v1/jobs/{}/events", id));
    return r ? json::parse(r->body) : json();
  }

  // The reasons of the job's events that change no state (pulls, the image run).
  std::vector<std::string> Notes(uint64_t id) {
    std::vector<std::string> out;
    const json events = Events(id);
    for (const json& e : events["items"]) {
      if (e.value("from", "") == e.value("to", "")) out.push_back(e.value("reason", ""));
    }
    return out;
  }

  std::string Output(uint64_t id, int task = 0) {
    std::ifstream f(fmt::format("{}/jobs/{}/task-{}.out", server_.node_dir(), id, task));
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  // `podman ARGS` with the node's own storage; its exit code, its output in *out.
  int NodePodman(const std::string& args, std::string* out) {
    const std::string c = server_.node_dir() + "/containers";
    return RunShell(fmt::format("CONTAINERS_CONF={0}/containers.conf podman --root {0}/root "
                                "--runroot {0}/run {1}",
                                c, args),
                    out);
  }

  // The images the node reports (GET /api/v1/nodes/box), by name.
  std::vector<std::string> NodeImages() {
    std::vector<std::string> out;
    auto r = admin_->Get("/api/v1/nodes/box");
    if (!r) return out;
    const json node = json::parse(r->body);
    for (const json& img : node["status"].value("images", json::array())) {
      out.push_back(img.value("name", ""));
    }
    return out;
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

bool AnyStartsWith(const std::vector<std::string>& v, const std::string& prefix) {
  for (const std::string& s : v) {
    if (s.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

// The image is pulled (with progress as job events), the job runs in it as an unprivileged user
// and sees only its GPUs, its logs come back, its digest is recorded; a second job of the same
// image on the same node starts without a pull.
TEST_F(ContainersTest, JobRunsInItsImageAndASecondJobNeedsNoPull) {
  const std::string& image = g_registry->image;
  const uint64_t id =
      Submit({{"command",
               {"sh", "-c",
                "echo in-container; cat /etc/os-release 2>/dev/null || echo no-host-os; id -u; "
                "echo GPUS=$CUDA_VISIBLE_DEVICES/$NVIDIA_VISIBLE_DEVICES; echo HOME=$HOME; "
                "touch $HOME/made-here && echo home-writable; echo to-stderr >&2; exit 3"}},
              {"container_image", image},
              {"retry", {{"max_retries", 0}}},
              {"resources", {{"gpus", 2}}}});
  const json j = WaitFor(id, "failed");
  EXPECT_EQ(j["exit_code"], 3) << j.dump();  // the container's exit code is the task's
  const std::string out = Output(id);
  EXPECT_NE(out.find("in-container\n"), std::string::npos) << out;
  EXPECT_NE(out.find("no-host-os\n"), std::string::npos) << out;  // the image's files, not ours
  EXPECT_EQ(out.find("\n0\n"), std::string::npos) << "ran as root: " << out;
  // Two GPUs, the same in both variables: its own.
  const size_t g = out.find("GPUS=");
  ASSERT_NE(g, std::string::npos) << out;
  const std::string gpus = out.substr(g + 5, out.find('\n', g) - g - 5);
  const std::string cuda = gpus.substr(0, gpus.find('/'));
  EXPECT_EQ(gpus, cuda + "/" + cuda) << out;
  EXPECT_EQ(std::count(cuda.begin(), cuda.end(), ','), 1) << out;
  EXPECT_NE(out.find(fmt::format("HOME={}/work/{}\n", server_.node_dir(), id)), std::string::npos)
      << out;
  EXPECT_NE(out.find("home-writable\n"), std::string::npos) << out;
  EXPECT_EQ(j.value("image_digest", ""), g_registry->digest) << j.dump();
  const std::vector<std::string> notes = Notes(id);
  EXPECT_TRUE(AnyStartsWith(notes, "pulling " + image + ": ")) << json(notes).dump();
  EXPECT_TRUE(AnyStartsWith(notes, "pulling " + image + ": 100%")) << json(notes).dump();
  // Its logs, through the API as for a host process.
  auto log = admin_->Get(fmt::format("/api/v1/jobs/{}/logs?stream=combined", id));
  ASSERT_TRUE(log);
  EXPECT_NE(log->body.find("in-container"), std::string::npos) << log->body;
  EXPECT_NE(log->body.find("to-stderr"), std::string::npos) << log->body;
  // The node holds the image now, and says so.
  auto node = json::parse(admin_->Get("/api/v1/nodes/box")->body);
  bool listed = false;
  for (int i = 0; i < 50 && !listed; ++i) {
    for (const json& img : node["status"].value("images", json::array())) {
      if (img.value("name", "") == image) listed = img.value("digest", "") == g_registry->digest;
    }
    if (!listed) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      node = json::parse(admin_->Get("/api/v1/nodes/box")->body);
    }
  }
  EXPECT_TRUE(listed) << node.dump();

  const uint64_t second = Submit({{"command", {"sh", "-c", "echo again"}},
                                  {"container_image", image},
                                  {"resources", {{"gpus", 1}}}});
  const json k = WaitFor(second, "succeeded");
  EXPECT_EQ(Output(second), "again\n");
  EXPECT_EQ(k.value("image_digest", ""), g_registry->digest);
  for (const std::string& n : Notes(second)) {
    EXPECT_EQ(n.rfind("pulling", 0), std::string::npos) << "pulled again: " << n;
  }
  // Each container is removed once it ends.
  std::string ps;
  const std::string c = server_.node_dir() + "/containers";
  RunShell(fmt::format("CONTAINERS_CONF={0}/containers.conf podman --root {0}/root --runroot "
                       "{0}/run ps --all --format '{{{{.Names}}}}'",
                       c),
           &ps);
  EXPECT_EQ(ps, "") << ps;
}

// A missing image ends the attempt with the registry's reason; the job's retry policy decides.
TEST_F(ContainersTest, MissingImageFailsWithTheRegistrysReason) {
  const std::string image = g_registry->registry.host() + "/lab/missing:1";
  const uint64_t id = Submit({{"command", {"true"}},
                              {"container_image", image},
                              {"retry", {{"max_retries", 0}}},
                              {"resources", {{"gpus", 1}}}});
  const json j = WaitFor(id, "failed");
  const std::string reason = j.value("reason", "");
  EXPECT_EQ(reason.rfind("ImagePullFailed: ", 0), 0u) << j.dump();
  EXPECT_NE(reason.find("manifest unknown"), std::string::npos) << reason;
}

// A preemption stops the container with SIGTERM (the job checkpoints inside it) and the next run
// resumes from the checkpoint, in the container again.
TEST_F(ContainersTest, PreemptedContainerCheckpointsAndResumes) {
  const std::string& image = g_registry->image;
  const uint64_t low = Submit({{"command", {"sh", "-c", kCheckpointJobScript}},
                               {"container_image", image},
                               {"priority_class", "best-effort"},
                               {"resources", {{"gpus", 8}}}});
  WaitFor(low, "running");
  for (int i = 0; i < 600 && Output(low).empty(); ++i) {  // its trap is set once it says so
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(Output(low), "started\n");
  const uint64_t high = Submit({{"command", {"sh", "-c", "sleep 0.5"}},
                                {"container_image", image},
                                {"priority_class", "critical"},
                                {"resources", {{"gpus", 8}}}});
  WaitFor(high, "succeeded");
  const json j = WaitFor(low, "succeeded");
  EXPECT_EQ(j["preemptions"], 1);
  EXPECT_EQ(Output(low), kCheckpointJobOutput);
}

// A queue head that waits for capacity gets a reservation on the node, which pulls its image
// then, while the job is still pending: when the capacity frees, it starts with no pull.
TEST_F(ContainersTest, ReservedQueueHeadsImageIsPulledBeforeItStarts) {
  const std::string& image = g_registry->image;
  // A host process holds every GPU, with a walltime: the capacity frees at a known time, so the
  // next job gets a reservation.
  const uint64_t holder = Submit(
      {{"command", {"sleep", "600"}}, {"walltime_seconds", 600}, {"resources", {{"gpus", 8}}}});
  WaitFor(holder, "running");
  const uint64_t head = Submit({{"command", {"sh", "-c", "echo started"}},
                                {"container_image", image},
                                {"resources", {{"gpus", 8}}}});
  // The node holds the image while the head still waits.
  bool pulled = false;
  for (int i = 0; i < 600 && !pulled; ++i) {
    const std::vector<std::string> images = NodeImages();
    pulled = std::find(images.begin(), images.end(), image) != images.end();
    if (!pulled) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(pulled) << json(NodeImages()).dump();
  const json waiting = Get(head);
  EXPECT_EQ(waiting["state"], "pending") << waiting.dump();
  auto why = admin_->Get(fmt::format("/api/v1/jobs/{}/why", head));
  ASSERT_TRUE(why);
  EXPECT_NE(why->body.find("reserved"), std::string::npos) << why->body;

  ASSERT_EQ(
      admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", holder), "", "application/json")->status,
      200);
  const json done = WaitFor(head, "succeeded");
  EXPECT_EQ(Output(head), "started\n");
  EXPECT_EQ(done.value("image_digest", ""), g_registry->digest) << done.dump();
  // It started from the node's cache: no pull while it was the node's task.
  for (const std::string& n : Notes(head)) {
    EXPECT_EQ(n.rfind("pulling", 0), std::string::npos) << "pulled at its start: " << n;
  }
}

// A stopped container whose trap exits 0 reports 0: podman does not turn it into 143 (the
// shim's SIGTERM reaches the container itself; podman, not signalled, reports its exit). Seen
// through a gang: task 1 fails with 3 once task 0 has set its trap, which stops task 0; the job's
// exit code is its first task's non-zero code, so 143 from task 0 would show in place of 3.
TEST_F(ContainersTest, StoppedContainerReportsItsOwnExitCode) {
  const std::string& image = g_registry->image;
  const std::string script =
      "if [ \"$ARBITER_TASK_INDEX\" = 0 ]; then "
      "  trap 'echo stopping; exit 0' TERM; echo started; touch \"$HOME/ready\"; "
      "  while true; do sleep 0.1; done; "
      "fi; "
      "i=0; while [ ! -e \"$HOME/ready\" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; "
      "sleep 0.5; exit 3";
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    ids.push_back(Submit({{"command", {"sh", "-c", script}},
                          {"container_image", image},
                          {"tasks", 2},
                          {"retry", {{"max_retries", 0}}},
                          {"resources", {{"gpus", 1}}}}));
  }
  for (uint64_t id : ids) {
    const json j = WaitFor(id, "failed");
    EXPECT_EQ(j["exit_code"], 3) << "job " << id << ": " << j.dump();
    EXPECT_NE(Output(id, 0).find("started\nstopping\n"), std::string::npos) << Output(id, 0);
  }
}

// A tenant's volume is a podman volume of its own on the node: what one of its containers
// writes, the next reads; another tenant's volume of the same name is other storage; a
// read-only mount cannot be written.
TEST_F(ContainersTest, VolumeKeepsItsTenantsDataAcrossContainers) {
  const std::string& image = g_registry->image;
  const json ckpt = {{{"volume", "ckpt"}, {"target", "/ckpt"}}};
  const uint64_t write =
      Submit({{"command", {"sh", "-c", "echo step-9 > /ckpt/state && echo V=$ARBITER_VOLUME_CKPT"}},
              {"container_image", image},
              {"mounts", ckpt},
              {"retry", {{"max_retries", 0}}}});
  WaitFor(write, "succeeded");
  EXPECT_EQ(Output(write), "V=/ckpt\n");
  const uint64_t read = Submit({{"command", {"cat", "/ckpt/state"}},
                                {"container_image", image},
                                {"mounts", ckpt},
                                {"retry", {{"max_retries", 0}}}});
  WaitFor(read, "succeeded");
  EXPECT_EQ(Output(read), "step-9\n");

  const uint64_t other = Submit({{"queue", "rival-q"},
                                 {"command", {"sh", "-c", "ls -A /ckpt; echo listed"}},
                                 {"container_image", image},
                                 {"mounts", ckpt},
                                 {"retry", {{"max_retries", 0}}}});
  WaitFor(other, "succeeded");
  EXPECT_EQ(Output(other), "listed\n");

  const uint64_t ro =
      Submit({{"command", {"sh", "-c", "cat /ckpt/state; echo x > /ckpt/other || echo read-only"}},
              {"container_image", image},
              {"mounts", {{{"volume", "ckpt"}, {"target", "/ckpt"}, {"mode", "ro"}}}},
              {"retry", {{"max_retries", 0}}}});
  WaitFor(ro, "succeeded");
  EXPECT_EQ(Output(ro), "step-9\nread-only\n");

  // The node's podman volumes, one per tenant, labelled with tenant and volume.
  std::string out;
  ASSERT_EQ(NodePodman("volume ls --format '{{.Name}} {{.Labels}}'", &out), 0) << out;
  EXPECT_NE(out.find("arbiter-lab_ckpt "), std::string::npos) << out;
  EXPECT_NE(out.find("arbiter-rival_ckpt "), std::string::npos) << out;
  ASSERT_EQ(NodePodman("volume ls --filter label=arbiter.tenant=lab --format '{{.Name}}'", &out),
            0);
  EXPECT_EQ(out, "arbiter-lab_ckpt\n");
}

}  // namespace
}  // namespace arbiter::testing
