// The service controller's decisions on a real control plane with a fake clock and fake probe
// results: replicas started through the scheduler on distinct nodes, routes with their nodes'
// addresses, replacement after a failure with backoff, liveness restarts, node loss, restarts
// of the server.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "api/service_codec.h"
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
      - {name: train-only, allowed_types: [training]}
users:
  - {name: alice, tenant: lab, role: member}
  - {name: vic, tenant: lab, role: viewer}
)";

class ServiceControllerTest : public ControlPlaneTest {
 protected:
  void SetUp() override {
    StartWith(kConfig, "cp-services");
    Register("gpu-01", "i1");
    Register("gpu-02", "i2");
  }

  json Create(json body, const Principal* as = nullptr) {
    if (!body.contains("queue")) body["queue"] = "lab-q";
    if (!body.contains("template")) body["template"] = {{"command", {"serve"}}};
    auto spec = api::ParseServiceJson(body.dump());
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    auto r = cp_->CreateService(as ? *as : admin_, std::move(spec).value());
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : json();
  }

  // Reconciles with the probe results in `probes_`; the targets it wants probed.
  std::vector<ProbeTarget> Reconcile() {
    std::vector<ProbeTarget> targets;
    Status st = cp_->ReconcileServices(probes_, &targets);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return targets;
  }

  // A scheduling cycle, then each node's agent starts what it was given (reporting it started).
  void ScheduleAndStart() {
    ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
    for (const auto& [node, instance] : {std::pair{"gpu-01", "i1"}, {"gpu-02", "i2"}}) {
      const json out = Beat(node, instance);
      std::vector<TaskReport> reports;
      for (const json& a : out["assignments"]) {
        if (!a["run"].get<bool>() || a["started"].get<bool>()) continue;
        reports.push_back({++seq_, a["job"].get<uint64_t>(), a["task"].get<int32_t>(),
                           a["attempt"].get<uint64_t>(), TaskEvent::kStarted, 0, false});
      }
      if (!reports.empty()) Beat(node, instance, reports);
    }
  }

  json Routes() { return json::parse(*cp_->GatewayRoutes(admin_, 0, 0)); }
  json Service(const std::string& name) { return *cp_->GetService(admin_, name); }

  // Every replica the controller probes is ready.
  void AllReady() {
    for (const ProbeTarget& t : Reconcile()) probes_[t.job].ready = true;
    Reconcile();
  }

  std::map<uint64_t, ProbeStatus> probes_;
  uint64_t seq_ = 0;
};

TEST_F(ServiceControllerTest, ReplicasSpreadOverNodesAndReadyOnesAreRouted) {
  Create({{"name", "chat"},
          {"replicas", 2},
          {"template", {{"command", {"serve"}}, {"resources", {{"gpus", 1}}}}}});
  Reconcile();  // starts two replica jobs
  json s = Service("chat");
  ASSERT_EQ(s["status"]["replicas"].size(), 2u);
  EXPECT_EQ(s["status"]["replicas"][0]["state"], "pending");
  ScheduleAndStart();
  const std::vector<ProbeTarget> targets = Reconcile();
  ASSERT_EQ(targets.size(), 2u);
  std::set<int32_t> ports;
  for (const ProbeTarget& t : targets) {
    EXPECT_EQ(t.host, "10.0.0.9");  // the agents' address
    ports.insert(t.port);
  }
  EXPECT_EQ(ports, (std::set<int32_t>{10000, 10001}));
  // Not ready yet: listed as starting, not routed.
  s = Service("chat");
  EXPECT_EQ(s["status"]["replicas"][0]["state"], "starting");
  EXPECT_TRUE(Routes()["services"][0]["revisions"][0]["replicas"].empty());
  AllReady();
  s = Service("chat");
  EXPECT_EQ(s["status"]["ready"], 2);
  std::set<std::string> nodes;
  for (const json& r : s["status"]["replicas"]) nodes.insert(r["node"]);
  EXPECT_EQ(nodes.size(), 2u) << s.dump();  // the spread: one replica per node
  const json routes = Routes();
  ASSERT_EQ(routes["services"].size(), 1u);
  const json rev = routes["services"][0]["revisions"][0];
  EXPECT_EQ(rev["revision"], 1);
  EXPECT_DOUBLE_EQ(rev["percent"].get<double>(), 100);
  ASSERT_EQ(rev["replicas"].size(), 2u);
  EXPECT_EQ(rev["replicas"][0]["address"].get<std::string>().rfind("10.0.0.9:1000", 0), 0u);
  // The replica is a job of type service with the link, named NAME-rREV, in the same queue.
  const uint64_t job = std::stoull(rev["replicas"][0]["id"].get<std::string>());
  const json j = *cp_->GetJob(admin_, job);
  EXPECT_EQ(j["type"], "service");
  EXPECT_EQ(j["name"], "chat-r1");
  EXPECT_EQ(j["queue"], "lab-q");
  EXPECT_EQ(j["service"]["name"], "chat");
  EXPECT_EQ(j["preemptible"], false);  // no priority class: never preempted
}

TEST_F(ServiceControllerTest, AFailedReplicaIsReplacedAfterABackoff) {
  Create({{"name", "chat"}, {"replicas", 1}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  json s = Service("chat");
  const uint64_t first = std::stoull(s["status"]["replicas"][0]["job"].get<std::string>());
  const json beat = Beat(s["status"]["replicas"][0]["node"] == "gpu-01" ? "gpu-01" : "gpu-02",
                         s["status"]["replicas"][0]["node"] == "gpu-01" ? "i1" : "i2",
                         {{++seq_, first, 0, 1, TaskEvent::kExited, 137, false}});
  (void)beat;
  EXPECT_EQ(State(first), "failed");
  Reconcile();
  s = Service("chat");
  ASSERT_EQ(s["status"]["replicas"].size(), 1u);  // the failed one only: backing off
  EXPECT_EQ(s["status"]["replicas"][0]["state"], "failed");
  EXPECT_THAT(s["status"]["events"].back()["message"].get<std::string>(),
              ::testing::HasSubstr("replaced in 1 s"));
  EXPECT_TRUE(Routes()["services"][0]["revisions"][0]["replicas"].empty());
  now_ += 1000;
  Reconcile();
  s = Service("chat");
  ASSERT_EQ(s["status"]["replicas"].size(), 2u);
  EXPECT_EQ(s["status"]["replicas"][1]["state"], "pending");
  EXPECT_EQ(s["status"]["restarts"], 1);
}

TEST_F(ServiceControllerTest, ALivenessFailureRestartsTheReplica) {
  Create({{"name", "chat"}, {"replicas", 1}, {"liveness", {{"path", "/live"}}}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  const std::vector<ProbeTarget> targets = Reconcile();
  ASSERT_EQ(targets.size(), 1u);
  ASSERT_TRUE(targets[0].liveness);
  probes_[targets[0].job].live_failed = true;
  Reconcile();
  EXPECT_EQ(State(targets[0].job), "cancelled");
  const json s = Service("chat");
  EXPECT_THAT(s["status"]["events"].back()["message"].get<std::string>(),
              ::testing::HasSubstr("liveness probe failed"));
  EXPECT_TRUE(Routes()["services"][0]["revisions"][0]["replicas"].empty());
}

TEST_F(ServiceControllerTest, AReplicaOnALostNodeIsReplacedElsewhere) {
  Create({{"name", "chat"}, {"replicas", 1}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  EXPECT_TRUE(cp_->DetectDownNodes(6000, "").empty());  // down detection starts counting
  json s = Service("chat");
  const std::string node = s["status"]["replicas"][0]["node"];
  const uint64_t job = std::stoull(s["status"]["replicas"][0]["job"].get<std::string>());
  now_ += 60000;  // only the other node keeps beating
  Beat(node == "gpu-01" ? "gpu-02" : "gpu-01", node == "gpu-01" ? "i2" : "i1");
  EXPECT_THAT(cp_->DetectDownNodes(6000, ""), ::testing::ElementsAre(node));
  EXPECT_EQ(State(job), "failed");
  Reconcile();
  now_ += 1000;
  Reconcile();
  ASSERT_TRUE(cp_->RunSchedulingCycle().ok());
  s = Service("chat");
  ASSERT_EQ(s["status"]["replicas"].size(), 2u);
  const json& next = s["status"]["replicas"][1];
  EXPECT_NE(next["node"], node);
  EXPECT_NE(next["node"], "");
}

TEST_F(ServiceControllerTest, AFixedPortPutsReplicasOnDistinctNodes) {
  Create({{"name", "chat"}, {"replicas", 3}, {"port", 8080}});
  Reconcile();
  ScheduleAndStart();
  const json s = Service("chat");
  std::set<std::string> nodes;
  int placed = 0;
  for (const json& r : s["status"]["replicas"]) {
    EXPECT_EQ(r["port"], 8080);
    if (r["node"] != "") {
      ++placed;
      nodes.insert(r["node"]);
    }
  }
  EXPECT_EQ(placed, 2);  // two nodes: the third waits
  EXPECT_EQ(nodes.size(), 2u);
}

TEST_F(ServiceControllerTest, BadInputChangesNothing) {
  Create({{"name", "chat"}});
  struct Case {
    json body;
    const char* field;
  };
  const Case cases[] = {
      {{{"name", "other"}, {"queue", "train-only"}, {"template", {{"command", {"x"}}}}}, "queue"},
      {{{"name", "other"}, {"queue", "nope"}, {"template", {{"command", {"x"}}}}}, "queue"},
      {{{"name", "other"},
        {"queue", "lab-q"},
        {"template", {{"command", {"x"}}, {"gpu_models", {"H100"}}, {"resources", {{"gpus", 1}}}}}},
       "template.gpu_models[0]"},
      {{{"name", "other"},
        {"queue", "lab-q"},
        {"template", {{"command", {"x"}}}},
        {"traffic", {{{"revision", 2}, {"percent", 100}}}}},
       "traffic"},
      {{{"name", "other"},
        {"queue", "lab-q"},
        {"tenant", "nope"},
        {"template", {{"command", {"x"}}}}},
       "tenant"},
  };
  for (const Case& c : cases) {
    auto spec = api::ParseServiceJson(c.body.dump());
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    auto r = cp_->CreateService(admin_, *spec);
    ASSERT_FALSE(r.ok()) << c.body.dump();
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_EQ(r.status().field(), c.field) << r.status().ToString();
  }
  // A name in use: 409.
  auto again = cp_->CreateService(admin_, *api::ParseServiceJson(
                                              R"({"name": "chat", "queue": "lab-q",
                                                  "template": {"command": ["x"]}})"));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  // Traffic naming an unknown revision, rollback without an earlier revision.
  EXPECT_EQ(cp_->SetServiceTraffic(admin_, "chat", {{7, 100}}).status().field(), "traffic");
  EXPECT_EQ(cp_->RollbackService(admin_, "chat").status().field(), "revision");
  EXPECT_EQ((*cp_->ListServices(admin_, ""))["items"].size(), 1u);
  const json s = Service("chat");
  EXPECT_EQ(s["revision"], 1);
  EXPECT_EQ(s["traffic"], json::parse(R"([{"revision": 1, "percent": 100}])"));
}

TEST_F(ServiceControllerTest, TenantScopedAccess) {
  const Principal alice{"alice", "lab", Role::kMember, "t1"};
  const Principal vic{"vic", "lab", Role::kViewer, "t2"};
  const Principal sam{"sam", "speech", Role::kMember, "t3"};
  Create({{"name", "chat"}}, &alice);
  EXPECT_TRUE(cp_->GetService(vic, "chat").ok());
  EXPECT_EQ(cp_->ScaleService(vic, "chat", ServiceScale{2}).status().code(),
            StatusCode::kPermissionDenied);
  EXPECT_EQ(cp_->GetService(sam, "chat").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(cp_->ScaleService(sam, "chat", ServiceScale{2}).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*cp_->ListServices(sam, ""))["items"].empty());
  EXPECT_EQ(cp_->GatewayRoutes(alice, 0, 0).status().code(), StatusCode::kPermissionDenied);
  EXPECT_TRUE(cp_->GatewayRoutes(node_, 0, 0).ok());
  auto gw = cp_->Authenticate(cp_->InProcessGatewayToken());
  ASSERT_TRUE(gw.ok());
  EXPECT_TRUE(cp_->GatewayRoutes(*gw, 0, 0).ok());
  EXPECT_TRUE(cp_->ScaleService(alice, "chat", ServiceScale{2}).ok());
}

TEST_F(ServiceControllerTest, ServicesAndTheirReplicasSurviveARestart) {
  Create({{"name", "chat"},
          {"replicas", 2},
          {"template", {{"command", {"serve"}}, {"secret_env", {{"TOKEN", "s"}}}}}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  const json before = Service("chat");
  Start();  // a new control plane over the same store
  Register("gpu-01", "i1");
  Register("gpu-02", "i2");
  json s = Service("chat");
  EXPECT_EQ(s["revisions"], before["revisions"]);
  ASSERT_EQ(s["status"]["replicas"].size(), 2u);
  EXPECT_EQ(s["status"]["replicas"][0]["job"], before["status"]["replicas"][0]["job"]);
  // Ready again once probed; no new replica was started.
  probes_.clear();
  AllReady();
  s = Service("chat");
  EXPECT_EQ(s["status"]["ready"], 2);
  EXPECT_EQ(s["status"]["replicas"].size(), 2u);
}

TEST_F(ServiceControllerTest, DeleteStopsTheReplicasAndEmptiesTheRoutes) {
  Create({{"name", "chat"}, {"replicas", 2}});
  Reconcile();
  ScheduleAndStart();
  AllReady();
  const json s = Service("chat");
  ASSERT_TRUE(cp_->DeleteService(admin_, "chat").ok());
  for (const json& r : s["status"]["replicas"]) {
    EXPECT_EQ(State(std::stoull(r["job"].get<std::string>())), "cancelled");
  }
  EXPECT_TRUE(Routes()["services"].empty());
  EXPECT_EQ(cp_->GetService(admin_, "chat").status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace arbiter::server
