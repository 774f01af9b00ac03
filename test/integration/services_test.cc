// Online services end to end (docs/services.md): the real server with its built-in node and fake
// GPUs runs a service's replicas (a small HTTP server on $PORT), probes them and publishes the
// gateways' routes; a killed replica is replaced, a template change rolls out within the rollout
// limits, traffic splits and rollbacks show in the routes, a replica failing readiness is left
// out, bad input changes nothing, and deleting the service stops its replicas.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
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
      - {name: train-only, allowed_types: [training]}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
)";

// The replica: answers GET /healthz (500 when FAIL_READY is set) and anything else with what it
// is: {"pid", "job", "revision", "port"}.
constexpr const char* kReplica = R"(import http.server, json, os
class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        if self.path == '/healthz':
            code = 500 if os.environ.get('FAIL_READY') else 200
            self.send_response(code); self.end_headers(); return
        body = json.dumps({'pid': os.getpid(), 'job': os.environ['ARBITER_JOB_ID'],
                           'revision': os.environ['ARBITER_SERVICE_REVISION'],
                           'service': os.environ['ARBITER_SERVICE'],
                           'port': os.environ['PORT'], 'version': os.environ.get('V', '')})
        self.send_response(200); self.end_headers(); self.wfile.write(body.encode())
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(('127.0.0.1', int(os.environ['PORT'])), H).serve_forever()
)";

class ServicesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    // A port range of this process's own, so that tests running at once do not collide, below
    // the kernel's ephemeral ports (32768 and up), which outgoing connections take.
    ports_lo_ = 10000 + static_cast<int>(getpid() % 500) * 20;
    ASSERT_TRUE(server_.Start(dir_.path(),
                              {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box",
                               "--service-ports", fmt::format("{}-{}", ports_lo_, ports_lo_ + 19)}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  void TearDown() override {
    // Nothing left running: every service's replicas are stopped.
    for (const char* name : {"chat", "broken"}) {
      admin_->Delete(fmt::format("/api/v1/services/{}", name));
    }
  }

  json Spec(const std::string& name, int replicas, json env = json::object()) {
    return {
        {"name", name},
        {"queue", "lab-q"},
        {"replicas", replicas},
        {"template",
         {{"command", {"python3", "-c", kReplica}}, {"env", env}, {"resources", {{"gpus", 1}}}}},
        {"readiness", {{"path", "/healthz"}, {"period_seconds", 0.2}}},
        {"rollout", {{"max_surge", 1}, {"max_unavailable", 0}}},
        {"drain_seconds", 1}};
  }

  httplib::Result Post(const std::string& path, const json& body) {
    return admin_->Post(path, body.dump(), "application/json");
  }

  json Routes() {
    auto r = admin_->Get("/api/v1/gateway/routes");
    return r && r->status == 200 ? json::parse(r->body) : json();
  }

  // The service's entry of the routes (null when absent).
  json RoutesOf(const std::string& name) {
    for (const json& s : Routes().value("services", json::array())) {
      if (s["name"] == name) return s;
    }
    return json();
  }

  // Ready replicas in the routes, by revision.
  std::map<int64_t, json> ReadyByRevision(const std::string& name) {
    std::map<int64_t, json> out;
    const json s = RoutesOf(name);
    if (!s.is_object()) return out;
    for (const json& r : s["revisions"]) {
      if (!r["replicas"].empty()) out[r["revision"].get<int64_t>()] = r;
    }
    return out;
  }

  int ReadyCount(const std::string& name) {
    int n = 0;
    for (const auto& [rev, r] : ReadyByRevision(name)) n += static_cast<int>(r["replicas"].size());
    return n;
  }

  // Polls `done` every 50 ms for at most `seconds`.
  bool WaitUntil(const std::function<bool()>& done, int seconds = 30) {
    for (int i = 0; i < seconds * 20; ++i) {
      if (done()) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return done();
  }

  // What a replica at "host:port" says of itself.
  json Ask(const std::string& address) {
    const size_t colon = address.rfind(':');
    httplib::Client c(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
    c.set_connection_timeout(2);
    c.set_read_timeout(2);
    auto r = c.Get("/whoami");
    return r && r->status == 200 ? json::parse(r->body) : json();
  }

  json Service(const std::string& name) {
    auto r = admin_->Get(fmt::format("/api/v1/services/{}", name));
    return r && r->status == 200 ? json::parse(r->body) : json();
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
  int ports_lo_ = 0;
};

TEST_F(ServicesTest, ReplicasServeAreReplacedRollAndSplitTraffic) {
  // 1. Three replicas: routed once ready, each at its own port of the range, answering there.
  auto created = Post("/api/v1/services", Spec("chat", 3, {{"V", "1"}}));
  ASSERT_TRUE(created && created->status == 201) << (created ? created->body : "no reply");
  ASSERT_TRUE(WaitUntil([&] { return ReadyCount("chat") == 3; })) << Routes().dump() << "\n"
                                                                  << Service("chat").dump();
  json rev1 = ReadyByRevision("chat").at(1);
  EXPECT_DOUBLE_EQ(rev1["percent"].get<double>(), 100);
  std::set<std::string> addresses;
  for (const json& r : rev1["replicas"]) {
    const std::string address = r["address"];
    addresses.insert(address);
    const int port = std::stoi(address.substr(address.rfind(':') + 1));
    EXPECT_EQ(address.substr(0, address.rfind(':')), "127.0.0.1");
    EXPECT_GE(port, ports_lo_);
    EXPECT_LT(port, ports_lo_ + 20);
    const json me = Ask(address);
    ASSERT_TRUE(me.is_object()) << address;
    EXPECT_EQ(me["job"], r["id"]);
    EXPECT_EQ(me["revision"], "1");
    EXPECT_EQ(me["service"], "chat");
    EXPECT_EQ(me["port"], std::to_string(port));
  }
  EXPECT_EQ(addresses.size(), 3u);
  // The replica is a job like any: type service, named chat-r1, `why` answers for it.
  const std::string first_id = rev1["replicas"][0]["id"];
  const json job = json::parse(admin_->Get("/api/v1/jobs/" + first_id)->body);
  EXPECT_EQ(job["type"], "service");
  EXPECT_EQ(job["name"], "chat-r1");
  EXPECT_EQ(job["service"]["name"], "chat");
  EXPECT_EQ(admin_->Get("/api/v1/jobs/" + first_id + "/why")->status, 200);

  // 2. A replica killed with SIGKILL is replaced by a new job.
  const json victim = Ask(rev1["replicas"][0]["address"]);
  ASSERT_TRUE(victim.is_object());
  ASSERT_EQ(::kill(victim["pid"].get<int>(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] {
    const auto ready = ReadyByRevision("chat");
    if (!ready.count(1) || ready.at(1)["replicas"].size() != 3) return false;
    for (const json& r : ready.at(1)["replicas"]) {
      if (r["id"] == victim["job"]) return false;
    }
    return true;
  })) << Service("chat").dump();
  const json after_kill = Service("chat");
  bool said = false;
  for (const json& e : after_kill["status"]["events"]) {
    said |= e["message"].get<std::string>().find("replaced") != std::string::npos;
  }
  EXPECT_TRUE(said) << after_kill["status"].dump();

  // 3. A template change: revision 2, rolled with max_unavailable 0: never fewer than 3 ready.
  auto put = admin_->Put("/api/v1/services/chat", Spec("chat", 3, {{"V", "2"}}).dump(),
                         "application/json");
  ASSERT_TRUE(put && put->status == 200) << (put ? put->body : "no reply");
  EXPECT_EQ(json::parse(put->body)["revision"], 2);
  int least = 3;
  ASSERT_TRUE(WaitUntil([&] {
    least = std::min(least, ReadyCount("chat"));
    const auto ready = ReadyByRevision("chat");
    return ready.size() == 1 && ready.count(2) && ready.at(2)["replicas"].size() == 3;
  })) << Service("chat").dump();
  EXPECT_GE(least, 3);
  const json rolled = ReadyByRevision("chat").at(2)["replicas"];  // a copy: not a temporary's
  for (const json& r : rolled) EXPECT_EQ(Ask(r["address"])["version"], "2");

  // 4. A 90/10 split between the revisions shows in the routes.
  auto split =
      Post("/api/v1/services/chat/traffic",
           {{"traffic", {{{"revision", 2}, {"percent", 90}}, {{"revision", 1}, {"percent", 10}}}}});
  ASSERT_TRUE(split && split->status == 200) << (split ? split->body : "no reply");
  ASSERT_TRUE(WaitUntil([&] {
    const auto ready = ReadyByRevision("chat");
    return ready.count(1) && ready.count(2) && ready.at(1)["percent"].get<double>() == 10 &&
           ready.at(2)["percent"].get<double>() == 90 && ready.at(2)["replicas"].size() == 3;
  })) << Routes().dump();

  // 5. Rollback: all traffic to revision 1, rolled as an update.
  auto back = Post("/api/v1/services/chat/rollback", json::object());
  ASSERT_TRUE(back && back->status == 200) << (back ? back->body : "no reply");
  EXPECT_EQ(json::parse(back->body)["traffic"],
            json::parse(R"([{"revision": 1, "percent": 100}])"));
  EXPECT_EQ(json::parse(back->body)["revision"], 2);  // the latest stays
  ASSERT_TRUE(WaitUntil([&] {
    const auto ready = ReadyByRevision("chat");
    return ready.size() == 1 && ready.count(1) && ready.at(1)["replicas"].size() == 3;
  })) << Service("chat").dump();

  // 6. Delete: the replicas stop and the service leaves the routes.
  const json before_delete = ReadyByRevision("chat").at(1);
  ASSERT_EQ(admin_->Delete("/api/v1/services/chat")->status, 200);
  EXPECT_FALSE(RoutesOf("chat").is_object());
  EXPECT_EQ(admin_->Get("/api/v1/services/chat")->status, 404);
  for (const json& r : before_delete["replicas"]) {
    const std::string id = r["id"];
    EXPECT_TRUE(WaitUntil([&] {
      const json j = json::parse(admin_->Get("/api/v1/jobs/" + id)->body);
      return j["state"] == "cancelled" && !j.contains("stopping");
    })) << id;
    EXPECT_FALSE(Ask(r["address"]).is_object()) << r["address"];
  }
}

TEST_F(ServicesTest, AReplicaFailingReadinessIsNotRouted) {
  auto created = Post("/api/v1/services", Spec("broken", 1, {{"FAIL_READY", "1"}}));
  ASSERT_TRUE(created && created->status == 201) << (created ? created->body : "no reply");
  json s;
  json replica;  // the live replica (one that failed to start is replaced, and listed as failed)
  ASSERT_TRUE(WaitUntil([&] {
    s = Service("broken");
    for (const json& r : s["status"]["replicas"]) {
      if (r["state"] == "starting" &&
          r["reason"].get<std::string>().find("HTTP 500") != std::string::npos) {
        replica = r;
        return true;
      }
    }
    return false;
  })) << s.dump();
  // Running, answering, but never ready: in no route.
  EXPECT_TRUE(Ask(replica["address"]).is_object());
  EXPECT_EQ(ReadyCount("broken"), 0);
  ASSERT_TRUE(RoutesOf("broken").is_object());
  EXPECT_EQ(s["status"]["ready"], 0);
}

TEST_F(ServicesTest, BadInputIsRefusedNamingTheFieldAndChangesNothing) {
  auto created = Post("/api/v1/services", Spec("chat", 1));
  ASSERT_TRUE(created && created->status == 201) << (created ? created->body : "no reply");
  const json before = json::parse(created->body);
  struct Case {
    std::string method, path;
    json body;
    std::string field;
  };
  auto with = [&](const json& patch) {
    json j = Spec("chat", 1);
    j.update(patch);
    return j;
  };
  const Case cases[] = {
      {"PUT", "/api/v1/services/chat", with({{"colour", "blue"}}), "colour"},
      {"PUT", "/api/v1/services/chat", with({{"port", 70000}}), "port"},
      {"PUT", "/api/v1/services/chat", with({{"readiness", {{"period_seconds", 0.01}}}}),
       "readiness.period_seconds"},
      {"PUT", "/api/v1/services/chat", with({{"traffic", {{{"revision", 1}, {"percent", 60}}}}}),
       "traffic"},
      {"PUT", "/api/v1/services/chat", with({{"traffic", {{{"revision", 9}, {"percent", 100}}}}}),
       "traffic"},
      {"PUT", "/api/v1/services/chat", with({{"queue", "train-only"}}), "queue"},
      {"PUT", "/api/v1/services/chat",
       with({{"template", {{"command", {"x"}}, {"resources", {{"gpus", -1}}}}}}),
       "template.resources.gpus"},
      {"POST",
       "/api/v1/services/chat/traffic",
       {{"traffic", {{{"revision", 1}, {"percent", 50}}}}},
       "traffic"},
      {"POST",
       "/api/v1/services/chat/traffic",
       {{"traffic", {{{"revision", 3}, {"percent", 100}}}}},
       "traffic"},
      {"POST", "/api/v1/services/chat/scale", {{"replicas", 5000}}, "replicas"},
      {"POST", "/api/v1/services/chat/rollback", json::object(), "revision"},
      {"POST", "/api/v1/services", with({{"name", "other"}, {"queue", "train-only"}}), "queue"},
      {"POST", "/api/v1/services", with({{"name", "Other"}}), "name"},
      // A plain job may not pose as a replica.
      {"POST",
       "/api/v1/jobs",
       {{"queue", "lab-q"},
        {"command", {"true"}},
        {"service", {{"name", "chat"}, {"revision", 1}, {"port", 20000}}}},
       "service"},
  };
  for (const Case& c : cases) {
    auto r = c.method == "PUT" ? admin_->Put(c.path, c.body.dump(), "application/json")
                               : Post(c.path, c.body);
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.method << " " << c.path << " " << c.body.dump() << ": "
                              << r->body;
    const json e = json::parse(r->body, nullptr, false);
    EXPECT_EQ(e["error"].value("field", ""), c.field) << r->body;
  }
  // A name in use is a conflict.
  auto again = Post("/api/v1/services", Spec("chat", 1));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 409);
  EXPECT_EQ(json::parse(again->body)["error"]["code"], "already_exists");
  const json after = Service("chat");
  for (const char* key : {"revision", "revisions", "traffic", "replicas", "port", "readiness",
                          "queue", "updated_ms"}) {
    EXPECT_EQ(after[key], before[key]) << key;
  }
  EXPECT_EQ(admin_->Get("/api/v1/services/other")->status, 404);
}

// A service and its replicas survive kill -9 of the server: the same replicas, adopted by the
// built-in node, are routed again once their probes pass; nothing is started twice.
TEST_F(ServicesTest, AServiceSurvivesAKilledServer) {
  auto created = Post("/api/v1/services", Spec("chat", 2));
  ASSERT_TRUE(created && created->status == 201) << (created ? created->body : "no reply");
  ASSERT_TRUE(WaitUntil([&] { return ReadyCount("chat") == 2; })) << Service("chat").dump();
  std::set<std::string> before;
  const json replicas = ReadyByRevision("chat").at(1)["replicas"];  // a copy: not a temporary's
  for (const json& r : replicas) before.insert(r["id"]);
  server_.Kill(SIGKILL);
  ServerProcess again;
  ASSERT_TRUE(again.Start(dir_.path(),
                          {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box",
                           "--service-ports", fmt::format("{}-{}", ports_lo_, ports_lo_ + 19)}))
      << again.output();
  admin_ = again.Client(again.admin_token());
  std::set<std::string> after;
  ASSERT_TRUE(WaitUntil([&] {
    after.clear();
    const auto ready = ReadyByRevision("chat");
    if (!ready.count(1)) return false;
    for (const json& r : ready.at(1)["replicas"]) after.insert(r["id"]);
    return after.size() == 2;
  })) << Service("chat").dump();
  EXPECT_EQ(after, before);
  EXPECT_EQ(Service("chat")["status"]["replicas"].size(), 2u);
  ASSERT_EQ(admin_->Delete("/api/v1/services/chat")->status, 200);
}

// The serving report follows the reports' shape; gateway stats land in their minute.
TEST_F(ServicesTest, GatewayStatsFeedTheServingReport) {
  auto created = Post("/api/v1/services", Spec("chat", 1));
  ASSERT_TRUE(created && created->status == 201);
  const int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  json latency = json::array();
  for (int i = 0; i < 16; ++i) latency.push_back(i == 4 ? 98 : i == 9 ? 2 : 0);
  const json stats = {{"gateway", "g1:8000"},
                      {"window_start_ms", now - 10000},
                      {"window_end_ms", now},
                      {"services",
                       {{{"name", "chat"},
                         {"revision", 1},
                         {"requests", 100},
                         {"status", {{"2xx", 99}, {"5xx", 1}}},
                         {"gateway_503", 0},
                         {"latency_buckets", latency},
                         {"latency_sum_ms", 2000.5},
                         {"queue_wait_sum_ms", 0}}}}};
  for (int i = 0; i < 2; ++i) {  // two gateways' reports of one minute add up
    auto r = Post("/api/v1/gateway/stats", stats);
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
  }
  auto bad = Post("/api/v1/gateway/stats", json{{"window_start_ms", 1}});
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(json::parse(bad->body)["error"]["field"], "window_end_ms");
  auto r = admin_->Get("/api/v1/reports/serving?since=1h&service=chat");
  ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no reply");
  const json report = json::parse(r->body);
  ASSERT_TRUE(report.contains("columns"));
  const json& rows = report["rows"];
  ASSERT_GE(rows.size(), 2u) << report.dump();
  bool found = false;
  for (const json& row : rows) {
    if (row["service"] != "chat" || row["revision"] != 1) continue;
    found = true;
    EXPECT_EQ(row["requests"], 200);
    EXPECT_EQ(row["errors"], 2);
    EXPECT_NEAR(row["p50_ms"].get<double>(), 15.1, 0.2);
    EXPECT_GT(row["p99_ms"].get<double>(), 500);
  }
  EXPECT_TRUE(found) << report.dump();
  auto csv = admin_->Get("/api/v1/reports/serving?since=1h&format=csv");
  ASSERT_TRUE(csv && csv->status == 200);
  EXPECT_EQ(csv->body.rfind("service,revision,requests", 0), 0u) << csv->body;
}

}  // namespace
}  // namespace arbiter::testing
