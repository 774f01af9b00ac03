// Integration tests of `arbiter server`: the real binary, a real SQLite file, real HTTP on
// loopback.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <thread>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
priority_classes:
  - {name: critical, value: 1000, preemptible: false}
  - {name: normal, value: 100, preemptible: true}
  - {name: best-effort, value: 0, preemptible: true, min_runtime_seconds: 0}
tenants:
  - name: vision
    queues:
      - name: vision-train
        guaranteed: {gpu: 8}
        max: {gpu: 16}
        allowed_types: [training, fine-tuning, experiment]
      - name: vision-dev
        guaranteed: {gpu: 0}
  - name: speech
    queues:
      - name: speech-train
        guaranteed: {gpu: 8}
users:
  - {name: alice, tenant: vision, role: member}
  - {name: bob, tenant: vision, role: member}
  - {name: vic, tenant: vision, role: viewer}
  - {name: tina, tenant: vision, role: tenant-admin}
  - {name: sam, tenant: speech, role: member}
nodes:
  - {name: gpu-01, cpu_milli: 128000, memory_mib: 1048576, rack: r1, gpus: {count: 8, model: A100-80G}}
  - {name: gpu-02, cpu_milli: 128000, memory_mib: 1048576, rack: r1, gpus: {count: 8, model: A100-80G}}
)";

json Parse(const httplib::Result& r) {
  if (!r) return json();
  try {
    return json::parse(r->body);
  } catch (...) {
    return json();
  }
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start(dir_.path())) << server_.output();
    ASSERT_FALSE(server_.admin_token().empty());
    admin_ = server_.Client(server_.admin_token());
    auto r = admin_->Put("/api/v1/config", kConfig, "application/yaml");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    for (const char* user : {"alice", "bob", "vic", "tina", "sam"}) {
      auto t = admin_->Post("/api/v1/tokens", json{{"user", user}}.dump(), "application/json");
      ASSERT_TRUE(t);
      ASSERT_EQ(t->status, 201) << t->body;
      tokens_[user] = Parse(t)["token"].get<std::string>();
    }
  }

  std::unique_ptr<httplib::Client> As(const std::string& user) {
    return server_.Client(tokens_.at(user));
  }

  // An OpenAPI path with its parameters filled in ({id}: 1, {name}: gpu-01).
  static std::string Concrete(std::string path) {
    for (const auto& [param, value] :
         std::vector<std::pair<std::string, std::string>>{{"{id}", "1"}, {"{name}", "gpu-01"}}) {
      const size_t at = path.find(param);
      if (at != std::string::npos) path.replace(at, param.size(), value);
    }
    return path;
  }
  // The request for an OpenAPI method ("get", "post", ...), as the admin, with "{}" for a body.
  httplib::Result Call(const std::string& method, const std::string& path) {
    return method == "get"    ? admin_->Get(path)
           : method == "post" ? admin_->Post(path, "{}", "application/json")
           : method == "put"  ? admin_->Put(path, "{}", "application/json")
                              : admin_->Delete(path);
  }

  static std::string Job(const std::string& queue, int gpus = 1) {
    return json{{"queue", queue},
                {"command", {"sleep", "1"}},
                {"resources", {{"gpus", gpus}, {"cpu_milli", 1000}, {"memory_mib", 1024}}}}
        .dump();
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(ServerTest, AdminTokenIsWrittenOnceWithMode0600) {
  struct stat st {};
  ASSERT_EQ(stat((server_.data_dir() + "/admin.token").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // The whole data dir is the server's alone: the folder 0700, the store and its journal 0600.
  ASSERT_EQ(stat(server_.data_dir().c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  size_t files = 0;
  for (const auto& f : std::filesystem::directory_iterator(server_.data_dir())) {
    ASSERT_EQ(stat(f.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, S_ISDIR(st.st_mode) ? 0700u : 0600u) << f.path();
    ++files;
  }
  // admin.token, arbiter.db (and its WAL); on PostgreSQL the store is not in the folder.
  EXPECT_GE(files, OnPostgres() ? 1u : 2u);
  EXPECT_NE(server_.output().find("admin token"), std::string::npos);
  auto r = server_.Client("")->Get("/readyz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

TEST_F(ServerTest, MissingOrBadTokenIs401) {
  auto r = server_.Client("")->Get("/api/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  EXPECT_EQ(Parse(r)["error"]["code"], "unauthenticated");
  r = server_.Client("arb_0000_bogus")->Get("/api/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
}

TEST_F(ServerTest, SubmitGetAndIdempotency) {
  auto alice = As("alice");
  httplib::Headers h = {{"Idempotency-Key", "k-1"}};
  auto r1 = alice->Post("/api/v1/jobs", h, Job("vision-train"), "application/json");
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 201) << r1->body;
  const json j = Parse(r1);
  EXPECT_EQ(j["tenant"], "vision");
  EXPECT_EQ(j["user"], "alice");
  EXPECT_EQ(j["state"], "pending");
  auto r2 = alice->Post("/api/v1/jobs", h, Job("vision-train"), "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200);
  EXPECT_EQ(Parse(r2)["id"], j["id"]);
  auto g = alice->Get(fmt::format("/api/v1/jobs/{}", j["id"].get<uint64_t>()));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 200);
}

// A batch is one durable transaction, all or nothing; errors name the job; a repeated batch with
// the same Idempotency-Key creates nothing again.
TEST_F(ServerTest, BatchSubmissionIsAllOrNothing) {
  auto alice = As("alice");
  auto count = [&] { return Parse(alice->Get("/api/v1/jobs?limit=1000"))["items"].size(); };
  const size_t before = count();
  const json good = json::parse(Job("vision-train", 2));
  json bad = good;
  bad["resources"]["gpus"] = -1;
  json foreign = good;
  foreign["queue"] = "speech-train";  // another tenant's queue
  for (const auto& [jobs, field] : std::vector<std::pair<json, std::string>>{
           {json::array({good, bad, good}), "jobs[1].resources.gpus"},
           {json::array({good, foreign}), "jobs[1].queue"},
           {json::array(), "jobs"}}) {
    auto r = alice->Post("/api/v1/jobs/batch", json{{"jobs", jobs}}.dump(), "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(Parse(r)["error"]["field"], field) << r->body;
  }
  EXPECT_EQ(count(), before);  // nothing of a refused batch was created
  httplib::Headers h = {{"Idempotency-Key", "batch-1"}};
  const std::string body = json{{"jobs", json::array({good, good, good})}}.dump();
  auto r1 = alice->Post("/api/v1/jobs/batch", h, body, "application/json");
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 201) << r1->body;
  const json items = Parse(r1)["items"];
  ASSERT_EQ(items.size(), 3u);
  for (const json& j : items) {
    EXPECT_EQ(j["tenant"], "vision");
    EXPECT_EQ(j["user"], "alice");
    EXPECT_EQ(j["resources"]["gpus"], 2);
  }
  EXPECT_LT(items[0]["id"].get<uint64_t>(), items[2]["id"].get<uint64_t>());
  auto r2 = alice->Post("/api/v1/jobs/batch", h, body, "application/json");
  ASSERT_TRUE(r2);
  EXPECT_EQ(r2->status, 200);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(Parse(r2)["items"][i]["id"], items[i]["id"]);
  EXPECT_EQ(count(), before + 3);
}

TEST_F(ServerTest, BadInputNamesTheField) {
  auto alice = As("alice");
  struct Case {
    std::string body;
    int status;
    std::string field;
  };
  const std::vector<Case> cases = {
      {"{not json", 400, ""},
      {R"({"queue": "vision-train", "command": ["x"], "resources": {"gpus": -2}})", 400,
       "resources.gpus"},
      {R"({"queue": "vision-train", "command": ["x"], "resources": {"gpus": "4"}})", 400,
       "resources.gpus"},
      {R"({"queue": "vision-train", "command": ["x"], "tenant": "speech"})", 400, "tenant"},
      {R"({"queue": "nope", "command": ["x"]})", 400, "queue"},
      {R"({"queue": "speech-train", "command": ["x"]})", 400, "queue"},
      {R"({"queue": "vision-train", "command": ["x"], "priority_class": "ultra"})", 400,
       "priority_class"},
  };
  for (const Case& c : cases) {
    auto r = alice->Post("/api/v1/jobs", c.body, "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, c.status) << c.body << " -> " << r->body;
    const json e = Parse(r)["error"];
    EXPECT_EQ(e.value("field", ""), c.field) << c.body << " -> " << r->body;
    EXPECT_FALSE(e.value("message", "").empty());
  }
  auto r =
      alice->Post("/api/v1/jobs", R"({"queue": "nope", "command": ["x"]})", "application/json");
  EXPECT_NE(
      Parse(r)["error"]["message"].get<std::string>().find("queues you can use: vision-train"),
      std::string::npos);
}

TEST_F(ServerTest, TenantsAreIsolated) {
  auto r = As("alice")->Post("/api/v1/jobs", Job("vision-train"), "application/json");
  ASSERT_EQ(r->status, 201);
  const uint64_t id = Parse(r)["id"].get<uint64_t>();
  const std::string path = fmt::format("/api/v1/jobs/{}", id);
  EXPECT_EQ(As("sam")->Get(path)->status, 404);  // foreign tenant
  EXPECT_EQ(As("sam")->Post(path + "/cancel", "", "application/json")->status, 404);
  EXPECT_EQ(Parse(As("sam")->Get("/api/v1/jobs"))["items"].size(), 0u);
  EXPECT_EQ(As("bob")->Get(path)->status, 200);  // same tenant reads
  EXPECT_EQ(As("bob")->Post(path + "/cancel", "", "application/json")->status, 403);  // not his
  EXPECT_EQ(As("vic")->Post("/api/v1/jobs", Job("vision-train"), "application/json")->status, 403);
  EXPECT_EQ(As("tina")->Post(path + "/suspend", "", "application/json")->status, 200);
  EXPECT_EQ(As("alice")->Put("/api/v1/config", kConfig, "application/yaml")->status, 403);
  EXPECT_EQ(As("sam")->Get("/api/v1/queues/vision-train")->status, 404);
  const json queues = Parse(As("sam")->Get("/api/v1/queues"));
  ASSERT_EQ(queues["items"].size(), 1u);
  EXPECT_EQ(queues["items"][0]["name"], "speech-train");
}

TEST_F(ServerTest, LifecycleTransitionsAreChecked) {
  auto alice = As("alice");
  // Larger than every node (accepted: a node may join), so it stays pending.
  auto r = alice->Post("/api/v1/jobs", Job("vision-dev", 64), "application/json");
  ASSERT_EQ(r->status, 201);
  const std::string path = fmt::format("/api/v1/jobs/{}", Parse(r)["id"].get<uint64_t>());
  auto bad = alice->Post(path + "/resume", "", "application/json");
  EXPECT_EQ(bad->status, 409);
  EXPECT_EQ(Parse(bad)["error"]["code"], "conflict");
  EXPECT_EQ(Parse(alice->Post(path + "/suspend", "", "application/json"))["state"], "suspended");
  EXPECT_EQ(Parse(alice->Post(path + "/resume", "", "application/json"))["state"], "pending");
  EXPECT_EQ(Parse(alice->Post(path + "/cancel", "", "application/json"))["state"], "cancelled");
  EXPECT_EQ(alice->Post(path + "/cancel", "", "application/json")->status, 409);
  EXPECT_EQ(Parse(alice->Post(path + "/retry", "", "application/json"))["state"], "retry-wait");
  const json events = Parse(alice->Get(path + "/events"));
  std::vector<std::string> to;
  for (const json& e : events["items"]) to.push_back(e["to"]);
  // The scheduler may already have taken the job out of retry-wait (no backoff): back to pending.
  if (to.size() == 6 && to.back() == "pending") to.pop_back();
  EXPECT_EQ(
      to, (std::vector<std::string>{"pending", "suspended", "pending", "cancelled", "retry-wait"}));
}

TEST_F(ServerTest, SchedulerAdmitsAndExplains) {
  auto alice = As("alice");
  auto r = alice->Post("/api/v1/jobs", Job("vision-train", 4), "application/json");
  ASSERT_EQ(r->status, 201);
  const std::string path = fmt::format("/api/v1/jobs/{}", Parse(r)["id"].get<uint64_t>());
  auto huge = alice->Post("/api/v1/jobs", Job("vision-dev", 12), "application/json");
  json two_by_eight = json::parse(Job("vision-train", 8));  // 16 GPUs in all: the queue's max
  two_by_eight["tasks"] = 2;
  auto over = alice->Post("/api/v1/jobs", two_by_eight.dump(), "application/json");
  // Beyond vision-train's max of 16: it could never start, and is refused naming the limit.
  auto never = alice->Post("/api/v1/jobs", Job("vision-train", 17), "application/json");
  ASSERT_TRUE(never);
  EXPECT_EQ(never->status, 400) << never->body;
  EXPECT_EQ(Parse(never)["error"]["code"], "invalid_argument") << never->body;
  EXPECT_EQ(Parse(never)["error"]["field"], "resources.gpus") << never->body;
  EXPECT_NE(Parse(never)["error"]["message"].get<std::string>().find(
                "queue vision-train allows at most 16 GPUs (its max.gpu)"),
            std::string::npos)
      << never->body;
  const std::string over_path = fmt::format("/api/v1/jobs/{}", Parse(over)["id"].get<uint64_t>());
  const std::string huge_path = fmt::format("/api/v1/jobs/{}", Parse(huge)["id"].get<uint64_t>());
  json j;
  json why;
  json over_why;
  // Bounded in tries and in time: the scheduler runs every 50 ms, and each `why` answers within
  // its client's timeout (its expected start is bounded in work).
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  for (int i = 0; i < 100 && std::chrono::steady_clock::now() < deadline; ++i) {
    j = Parse(alice->Get(path));
    why = Parse(alice->Get(huge_path + "/why"));
    over_why = Parse(alice->Get(over_path + "/why"));
    // The three jobs may reach the scheduler in different cycles: wait for every verdict, and
    // for one given after the first job left the pending list (until then `over` is second).
    if (j["state"] == "admitted" && why.contains("code") && over_why.contains("code") &&
        over_why["position"] == 1) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(j["state"], "admitted");
  ASSERT_EQ(j["placement"].size(), 1u);
  EXPECT_EQ(j["placement"][0]["gpus"].size(), 4u);
  // No node there is has 12 GPUs: it can never start on them (it was accepted: one may join).
  EXPECT_EQ(why["code"], "Inadmissible");
  EXPECT_NE(why["message"].get<std::string>().find(
                "no node has 12 GPUs of model A100-80G (the most on one node is 8)"),
            std::string::npos)
      << why.dump();
  EXPECT_EQ(over_why["code"], "QuotaExceeded");
  EXPECT_EQ(over_why["message"],
            "queue vision-train uses 4 of max 16 GPUs; this job needs 16 more");
  EXPECT_EQ(over_why["position"], 1);  // the only pending job of vision-train
  const json q = Parse(alice->Get("/api/v1/queues/vision-train"));
  EXPECT_EQ(q["usage"]["gpu"], 4.0);
  EXPECT_EQ(q["guaranteed"]["gpu"], 8.0);
  EXPECT_EQ(q["max"]["gpu"], 16.0);
  EXPECT_EQ(q["pending"], 1);
  EXPECT_EQ(q["running"], 1);
}

TEST_F(ServerTest, OpenApiListsEveryRouteAndEveryRouteExists) {
  const json doc = Parse(admin_->Get("/api/v1/openapi.json"));
  ASSERT_EQ(doc["openapi"], "3.0.3");
  size_t checked = 0;
  for (auto& [path, ops] : doc["paths"].items()) {
    for (auto& [method, op] : ops.items()) {
      const std::string concrete = Concrete(path);
      if (concrete == "/api/v1/events") continue;  // a stream: checked elsewhere
      httplib::Result r = Call(method, concrete);
      ASSERT_TRUE(r) << method << " " << concrete;
      const json body = Parse(r);
      const std::string msg =
          body.is_object() && body.contains("error") ? body["error"].value("message", "") : "";
      EXPECT_EQ(msg.find("no route for"), std::string::npos) << method << " " << concrete;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20u);
  auto none = admin_->Get("/api/v1/nothing-here");
  EXPECT_EQ(none->status, 404);
  EXPECT_NE(Parse(none)["error"]["message"].get<std::string>().find("no route"), std::string::npos);
}

// Every route refuses query parameters it does not take, naming the parameter and listing the
// ones it does; the OpenAPI document lists exactly those. A misspelt filter (?stat=pending) is an
// error, not a list of every job.
TEST_F(ServerTest, UnknownQueryParametersAreRefusedAndTheKnownOnesDocumented) {
  const json doc = Parse(admin_->Get("/api/v1/openapi.json"));
  size_t checked = 0;
  for (auto& [path, ops] : doc["paths"].items()) {
    if (path == "/healthz" || path == "/readyz" || path == "/api/v1/openapi.json" ||
        path == "/metrics") {
      continue;  // served without a token and without parameters
    }
    if (path == "/") continue;  // the console's page: its query belongs to the page's script
    for (auto& [method, op] : ops.items()) {
      const std::string concrete = Concrete(path) + "?bogus_param=1";
      httplib::Result r = Call(method, concrete);
      ASSERT_TRUE(r) << method << " " << concrete;
      EXPECT_EQ(r->status, 400) << method << " " << concrete << ": " << r->body;
      EXPECT_EQ(Parse(r)["error"]["field"], "bogus_param") << method << " " << concrete;
      ++checked;
    }
  }
  EXPECT_GE(checked, 20u);

  std::vector<std::string> documented;
  for (const json& p : doc["paths"]["/api/v1/jobs"]["get"]["parameters"]) {
    if (p["in"] == "query") documented.push_back(p["name"].get<std::string>());
  }
  EXPECT_EQ(documented,
            (std::vector<std::string>{"tenant", "queue", "state", "user", "type", "q", "array",
                                      "index", "active", "since", "until", "cursor", "limit"}));
  auto typo = admin_->Get("/api/v1/jobs?stat=pending");
  ASSERT_TRUE(typo);
  EXPECT_EQ(typo->status, 400);
  const json err = Parse(typo)["error"];
  EXPECT_EQ(err["field"], "stat");
  EXPECT_NE(err["message"].get<std::string>().find("tenant, queue, state"), std::string::npos)
      << err;
  // Every documented parameter is taken.
  auto all = admin_->Get(
      "/api/v1/jobs?tenant=vision&queue=vision-train&state=pending,running&user=admin&"
      "type=training&array=1&index=0&active=true&since=2024-05-01T00:00:00Z&"
      "until=2099-01-01T00:00:00Z&limit=5");
  ASSERT_TRUE(all);
  EXPECT_EQ(all->status, 200) << all->body;
}

// Nobody can create a user that would pass for the bootstrap admin, and the audit names the token
// behind each call, so two callers are told apart even when their user names look alike.
TEST_F(ServerTest, BootstrapNamesAreReservedAndTheAuditNamesTheToken) {
  for (const char* name : {"admin", "anonymous"}) {
    auto r = As("tina")->Post("/api/v1/users",
                              json{{"name", name}, {"tenant", "vision"}, {"role", "member"}}.dump(),
                              "application/json");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << r->body;
    EXPECT_EQ(Parse(r)["error"]["field"], "name") << r->body;
  }
  std::string shadowing = kConfig;
  shadowing.replace(shadowing.find("users:\n"), 7,
                    "users:\n  - {name: admin, tenant: vision, role: member}\n");
  auto bad = admin_->Put("/api/v1/config", shadowing, "application/yaml");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400) << bad->body;
  EXPECT_EQ(Parse(bad)["error"]["field"], "users[0].name") << bad->body;
  auto sub = As("alice")->Post("/api/v1/jobs", Job("vision-dev"), "application/json");
  ASSERT_TRUE(sub);
  ASSERT_EQ(sub->status, 201) << sub->body;
  // A token is arb_<id>_<secret>: the audit keeps the id, never the secret.
  const std::string alice = tokens_.at("alice");
  const std::string alice_id = alice.substr(4, alice.find('_', 4) - 4);
  const json audit = Parse(admin_->Get("/api/v1/audit?limit=1000"));
  bool found = false;
  for (const json& rec : audit["items"]) {
    if (rec["action"] != "job.submit") continue;
    found = true;
    EXPECT_EQ(rec["actor"], "alice");
    EXPECT_EQ(rec["token_id"], alice_id) << rec;
  }
  EXPECT_TRUE(found) << audit;
}

// A token speaks for its user as the user is now: deleted, its tokens stop at once; demoted or
// moved to another tenant, they follow; and so after a restart.
TEST_F(ServerTest, TokensFollowTheirUser) {
  auto whoami = [&](const std::string& user) { return As(user)->Get("/api/v1/whoami"); };
  ASSERT_EQ(Parse(whoami("tina"))["role"], "tenant-admin");
  std::string changed = kConfig;
  auto replace = [&](const std::string& from, const std::string& to) {
    const size_t at = changed.find(from);
    ASSERT_NE(at, std::string::npos) << from;
    changed.replace(at, from.size(), to);
  };
  replace("  - {name: alice, tenant: vision, role: member}\n", "");
  replace("{name: bob, tenant: vision, role: member}", "{name: bob, tenant: speech, role: member}");
  replace("{name: tina, tenant: vision, role: tenant-admin}",
          "{name: tina, tenant: vision, role: viewer}");
  auto put = admin_->Put("/api/v1/config", changed, "application/yaml");
  ASSERT_TRUE(put);
  ASSERT_EQ(put->status, 200) << put->body;
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(round == 0 ? "at once" : "after a restart");
    auto alice = whoami("alice");
    ASSERT_TRUE(alice);
    EXPECT_EQ(alice->status, 401) << alice->body;
    EXPECT_NE(alice->body.find("no longer exists"), std::string::npos) << alice->body;
    const json bob = Parse(whoami("bob"));
    EXPECT_EQ(bob["tenant"], "speech") << bob;
    EXPECT_EQ(Parse(whoami("tina"))["role"], "viewer");
    auto create = As("tina")->Post(
        "/api/v1/users", json{{"name", "eve"}, {"tenant", "vision"}, {"role", "member"}}.dump(),
        "application/json");
    ASSERT_TRUE(create);
    EXPECT_EQ(create->status, 403) << create->body;
    auto bobs_jobs = As("bob")->Post("/api/v1/jobs", Job("vision-dev"), "application/json");
    ASSERT_TRUE(bobs_jobs);
    EXPECT_NE(bobs_jobs->status, 201) << "bob is no longer in vision: " << bobs_jobs->body;
    if (round == 0) {
      ASSERT_EQ(WEXITSTATUS(server_.Kill(SIGTERM)), 0);
      ASSERT_TRUE(server_.Start(dir_.path())) << server_.output();
    }
  }
}

// Tokens can be listed (never their secrets) and revoked by whoever may see them, and can expire.
TEST_F(ServerTest, TokensAreListedRevokedAndExpire) {
  auto mine = As("alice")->Post("/api/v1/tokens", json{{"expires_in_seconds", 3600}}.dump(),
                                "application/json");
  ASSERT_TRUE(mine);
  ASSERT_EQ(mine->status, 201) << mine->body;
  EXPECT_TRUE(Parse(mine)["expires_at"].is_string()) << mine->body;
  auto too_short = As("alice")->Post("/api/v1/tokens", json{{"expires_in_seconds", 5}}.dump(),
                                     "application/json");
  ASSERT_TRUE(too_short);
  EXPECT_EQ(too_short->status, 400);
  EXPECT_EQ(Parse(too_short)["error"]["field"], "expires_in_seconds");

  auto users_of = [&](const std::string& who) {
    std::multiset<std::string> users;
    auto r = As(who)->Get("/api/v1/tokens");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "");
    const json list = Parse(r);
    EXPECT_TRUE(list["items"].is_array()) << (r ? r->body : "");
    for (const json& t : list["items"]) {
      EXPECT_FALSE(t.contains("hash_hex") || t.contains("token")) << t;
      users.insert(t["user"].get<std::string>());
    }
    return users;
  };
  EXPECT_EQ(users_of("alice"), (std::multiset<std::string>{"alice", "alice"}));
  const auto vision = users_of("tina");
  EXPECT_EQ(vision.count("sam"), 0u);
  EXPECT_EQ(vision.count("bob"), 1u);
  auto all = admin_->Get("/api/v1/tokens");
  ASSERT_TRUE(all);
  EXPECT_NE(all->body.find("\"user\":\"sam\""), std::string::npos) << all->body;

  const std::string bob = tokens_.at("bob");
  const std::string bob_id = bob.substr(4, bob.find('_', 4) - 4);
  auto by_alice = As("alice")->Delete("/api/v1/tokens/" + bob_id);
  ASSERT_TRUE(by_alice);
  EXPECT_EQ(by_alice->status, 404) << by_alice->body;
  EXPECT_EQ(As("bob")->Get("/api/v1/whoami")->status, 200);
  auto by_tina = As("tina")->Delete("/api/v1/tokens/" + bob_id);
  ASSERT_TRUE(by_tina);
  EXPECT_EQ(by_tina->status, 200) << by_tina->body;
  EXPECT_EQ(Parse(by_tina)["state"], "revoked");
  EXPECT_EQ(As("bob")->Get("/api/v1/whoami")->status, 401);
}

TEST_F(ServerTest, SigtermShutsDownCleanly) {
  const int status = server_.Kill(SIGTERM);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

// More open keep-alive connections than the HTTP threads it starts with (and than a fixed pool
// of 64 would have had): every one is served at once, none waits for another to close.
TEST_F(ServerTest, ManyOpenConnectionsAreAllServed) {
  std::vector<std::unique_ptr<httplib::Client>> clients;
  for (int i = 0; i < 100; ++i) {
    clients.push_back(server_.Client(server_.admin_token()));
    clients.back()->set_keep_alive(true);
    clients.back()->set_read_timeout(3);
    auto r = clients.back()->Get("/api/v1/whoami");
    ASSERT_TRUE(r) << "connection " << i << ": " << httplib::to_string(r.error());
    ASSERT_EQ(r->status, 200);
  }
  for (size_t i = 0; i < clients.size(); ++i) {
    auto r = clients[i]->Get("/api/v1/whoami");
    ASSERT_TRUE(r) << "connection " << i << ": " << httplib::to_string(r.error());
    EXPECT_EQ(r->status, 200);
  }
}

// A second server asked for a port in use exits with a clear error instead of starting beside the
// first (with SO_REUSEPORT the kernel would share connections between the two, and clients would
// see tokens of one refused by the other).
TEST_F(ServerTest, ASecondServerOnTheSamePortIsRefused) {
  TempDir other;
  std::string out;
  const int code = Shell(fmt::format("timeout 20 {} server --data-dir {} --listen 127.0.0.1:{}",
                                     ARBITER_BINARY, other.path(), server_.port()),
                         &out);
  ASSERT_GE(code, 0) << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(code, 124) << "the second server kept running: " << out;
  EXPECT_NE(out.find(fmt::format("cannot listen on 127.0.0.1:{}", server_.port())),
            std::string::npos)
      << out;
  // The first one still answers.
  auto r = admin_->Get("/api/v1/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// 8 concurrent clients submit 5,000 jobs; the server is killed with -9 in the middle and
// restarted: every job acknowledged with 201 is there, unchanged, and none exists twice.
TEST_F(ServerTest, AcknowledgedSubmissionsSurviveKill9) {
  std::mutex mu;
  std::map<uint64_t, std::string> acked;  // id -> name
  std::atomic<int> sent{0};
  std::atomic<bool> killed{false};
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) {
    clients.emplace_back([&, c] {
      auto client = As("alice");
      for (int i = 0; i < 625 && !killed; ++i) {
        const std::string name = fmt::format("c{}-{}", c, i);
        json body = json::parse(Job("vision-train"));
        body["name"] = name;
        auto r = client->Post("/api/v1/jobs", body.dump(), "application/json");
        ++sent;
        if (r && r->status == 201) {
          std::lock_guard<std::mutex> lock(mu);
          acked[Parse(r)["id"].get<uint64_t>()] = name;
        }
      }
    });
  }
  while (sent < 2500) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  server_.Kill(SIGKILL);
  killed = true;
  for (auto& t : clients) t.join();
  ASSERT_GT(acked.size(), 1000u);

  ServerProcess again;
  ASSERT_TRUE(again.Start(dir_.path())) << again.output();
  auto client = again.Client(tokens_.at("alice"));
  std::map<uint64_t, std::string> found;
  std::set<std::string> names;
  std::string cursor;
  for (int page = 0; page < 1000; ++page) {
    const json list =
        Parse(client->Get("/api/v1/jobs?limit=1000" + (cursor.empty() ? "" : "&cursor=" + cursor)));
    for (const json& j : list["items"]) {
      found[j["id"].get<uint64_t>()] = j["name"];
      EXPECT_TRUE(names.insert(j["name"].get<std::string>()).second) << "twice: " << j["name"];
    }
    if (list["next_cursor"].is_null()) break;
    cursor = list["next_cursor"].get<std::string>();
  }
  for (const auto& [id, name] : acked) {
    auto it = found.find(id);
    ASSERT_NE(it, found.end()) << "acknowledged job " << id << " lost";
    EXPECT_EQ(it->second, name);
  }
}

}  // namespace
}  // namespace arbiter::testing

namespace arbiter::testing {
namespace {

// The placement profile is configuration: validated when loaded, and it changes placements.
TEST_F(ServerTest, SchedulerProfileIsConfiguredAndValidated) {
  const std::string bad = std::string(kConfig) + "scheduler: {scores: [{plugin: nope}]}\n";
  auto r = admin_->Put("/api/v1/config", bad, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(Parse(r)["error"]["field"], "scheduler.scores[0].plugin") << r->body;
  const std::string unknown = std::string(kConfig) + "scheduler: {policy: fastest}\n";
  r = admin_->Put("/api/v1/config", unknown, "application/yaml");
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(Parse(r)["error"]["field"], "scheduler.policy");

  const std::string spread = std::string(kConfig) + "scheduler: {policy: spread}\n";
  r = admin_->Put("/api/v1/config?dry_run=true", spread, "application/yaml");
  ASSERT_EQ(r->status, 200);
  const json diff = Parse(r)["changes"];
  ASSERT_EQ(diff.size(), 1u) << diff.dump();
  EXPECT_EQ(diff[0]["kind"], "scheduler");
  ASSERT_EQ(admin_->Put("/api/v1/config", spread, "application/yaml")->status, 200);
  auto alice = As("alice");
  std::vector<std::string> paths;
  for (int i = 0; i < 2; ++i) {
    auto s = alice->Post("/api/v1/jobs", Job("vision-train", 1), "application/json");
    paths.push_back(fmt::format("/api/v1/jobs/{}", Parse(s)["id"].get<uint64_t>()));
  }
  std::set<std::string> nodes;
  for (int i = 0; i < 100 && nodes.size() < 2; ++i) {
    nodes.clear();
    for (const std::string& p : paths) {
      const json j = Parse(alice->Get(p));
      if (j["state"] == "admitted") nodes.insert(j["placement"][0]["node"].get<std::string>());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(nodes.size(), 2u) << "spread put both jobs on one node";
}

// `--initial-config` (what `make run` uses for its demo configuration) is applied to an empty data
// dir only: a restart with the same flag keeps what an admin changed since.
TEST(InitialConfig, IsAppliedToAnEmptyDataDirOnly) {
  TempDir dir;
  const std::string file = dir.path() + "/initial.yaml";
  {
    std::ofstream out(file);
    out << "tenants:\n  - name: first\n    queues:\n      - {name: first-q}\n";
  }
  std::string admin_token;
  {
    ServerProcess server;
    ASSERT_TRUE(server.Start(dir.path(), {"--initial-config", file})) << server.output();
    auto admin = server.Client(server.admin_token());
    auto got = admin->Get("/api/v1/config");
    ASSERT_TRUE(got);
    ASSERT_NE(got->body.find("first-q"), std::string::npos) << got->body;
    // An admin replaces the configuration: the initial tenant is gone, another is there.
    auto put = admin->Put("/api/v1/config",
                          "tenants:\n  - name: second\n    queues:\n      - {name: second-q}\n",
                          "application/yaml");
    ASSERT_TRUE(put);
    ASSERT_EQ(put->status, 200) << put->body;
    ASSERT_EQ(WEXITSTATUS(server.Kill(SIGTERM)), 0);
  }
  ServerProcess again;
  ASSERT_TRUE(again.Start(dir.path(), {"--initial-config", file})) << again.output();
  auto got = again.Client(again.admin_token())->Get("/api/v1/config");
  ASSERT_TRUE(got);
  EXPECT_NE(got->body.find("second-q"), std::string::npos) << got->body;
  EXPECT_EQ(got->body.find("first-q"), std::string::npos) << got->body;
}

// `--config` and `--initial-config` say different things: one of them.
TEST(InitialConfig, ExcludesConfig) {
  TempDir dir;
  std::string out;
  const int code = Shell(fmt::format("timeout 20 {} server --data-dir {}/d --listen 127.0.0.1:0 "
                                     "--config a.yaml --initial-config b.yaml",
                                     ARBITER_BINARY, dir.path()),
                         &out);
  ASSERT_GE(code, 0) << out;
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("excludes"), std::string::npos) << out;
}

}  // namespace
}  // namespace arbiter::testing
