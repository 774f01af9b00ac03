// Limits of the API: body size, input validation naming the field, the per-token rate limit, and
// idempotency keys scoped to their user.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>

#include <chrono>
#include <optional>
#include <thread>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr size_t kMaxBody = size_t{1} << 20;

class LimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }
  TenantServer server_;
};

// A body of exactly `size` bytes: a job whose name pads it out.
std::string PaddedJob(size_t size) {
  json j = json::parse(JobBody("vision-train"));
  j["name"] = "";
  const size_t base = j.dump().size();
  j["name"] = std::string(size > base ? size - base : 0, 'a');
  return j.dump();
}

TEST_F(LimitsTest, BodiesOverOneMebibyteAre413) {
  auto alice = server_.As("alice");
  const std::string over = PaddedJob(kMaxBody + 1);
  ASSERT_EQ(over.size(), kMaxBody + 1);
  auto r = alice->Post("/api/v1/jobs", over, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  const json e = BodyJson(r)["error"];
  EXPECT_NE(e.value("message", "").find("larger than 1048576 bytes"), std::string::npos) << r->body;
  EXPECT_FALSE(e.value("code", "").empty());

  // The configuration's cap is 8 MiB (http_limits_test.cc).
  r = server_.As("admin")->Put("/api/v1/config", std::string(8 * kMaxBody + 100, '#'),
                               "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(BodyJson(r)["error"].value("message", "").find("larger than"), std::string::npos);

  // At the limit the body is read: the name is too long (253), a 400 naming it.
  r = alice->Post("/api/v1/jobs", PaddedJob(kMaxBody), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body.substr(0, 300);
  EXPECT_EQ(BodyJson(r)["error"].value("field", ""), "name");

  // The connection and the server are fine afterwards; nothing was created.
  r = alice->Get("/api/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(BodyJson(r)["items"].size(), 0u);
}

// Chunked bodies carry no length to check first: they are read up to the limit, and refused past
// it.
TEST_F(LimitsTest, ChunkedBodiesAreCappedToo) {
  // The server may answer and close the connection while the client still writes: the write then
  // fails (EPIPE) rather than killing the test.
  struct IgnoreSigpipe {
    IgnoreSigpipe() : old(signal(SIGPIPE, SIG_IGN)) {}
    ~IgnoreSigpipe() { signal(SIGPIPE, old); }
    sighandler_t old;
  } ignore_sigpipe;
  auto chunked = [](const std::string& body, size_t piece) {
    return [body, piece](size_t offset, httplib::DataSink& sink) {
      if (offset < body.size())
        return sink.write(body.data() + offset, std::min(piece, body.size() - offset));
      sink.done();
      return true;
    };
  };
  auto r = server_.As("alice")->Post("/api/v1/jobs", chunked(JobBody("vision-train"), 16),
                                     "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;

  // Over the limit: never read whole. The answer is 413 (when the client, still sending, gets it).
  r = server_.As("alice")->Post("/api/v1/jobs", chunked(PaddedJob(4 * kMaxBody), 64 * 1024),
                                "application/json");
  if (r) {
    EXPECT_EQ(r->status, 413) << r->body.substr(0, 300);
    EXPECT_NE(BodyJson(r)["error"].value("message", "").find("larger than 1048576 bytes"),
              std::string::npos)
        << r->body.substr(0, 300);
  }
  r = server_.As("alice")->Get("/api/v1/jobs");
  ASSERT_TRUE(r);
  EXPECT_EQ(BodyJson(r)["items"].size(), 1u);
}

// A POST without Content-Length (curl -X POST) has an empty body: answered at once.
TEST_F(LimitsTest, PostWithoutContentLengthHasAnEmptyBody) {
  const uint64_t id = server_.Submit("alice");
  // httplib's client sends a Content-Length with every POST; a raw socket need not.
  const std::string wire = fmt::format(
      "POST /api/v1/jobs/{}/cancel HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {}\r\n"
      "Connection: close\r\n\r\n",
      id, server_.token("alice"));
  const auto t0 = std::chrono::steady_clock::now();
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(server_.port()));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ASSERT_EQ(write(fd, wire.data(), wire.size()), static_cast<ssize_t>(wire.size()));
  std::string reply;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) reply.append(buf, static_cast<size_t>(n));
  close(fd);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(reply.rfind("HTTP/1.1 200", 0), 0u) << reply;
  EXPECT_NE(reply.find("\"state\":\"cancelled\""), std::string::npos) << reply;
  EXPECT_LT(seconds, 2.0);
}

TEST_F(LimitsTest, BadInputIs400NamingTheField) {
  struct Case {
    std::string who, method, path, body;
    std::string field;  // "" for errors about the whole body
  };
  const std::string q = R"("queue": "vision-train", "command": ["x"])";
  const std::vector<Case> cases = {
      // Unknown fields, at the top and nested.
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "gpus": 4}})", q), "gpus"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "resources": {{"gpu": 4}}}})", q),
       "resources.gpu"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "retry": {{"max_retry": 3}}}})", q),
       "retry.max_retry"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "user": "bob"}})", q), "user"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "id": 7}})", q), "id"},
      // Wrong types.
      {"alice", "POST", "/api/v1/jobs", R"({"queue": "vision-train", "command": "sleep 1"})",
       "command"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "tasks": "2"}})", q), "tasks"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "tasks": 2.5}})", q), "tasks"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "env": {{"A": 1}}}})", q), "env.A"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "preemptible": "yes"}})", q),
       "preemptible"},
      {"alice", "POST", "/api/v1/jobs", "[1, 2]", ""},
      // Out of range.
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "tasks": 0}})", q), "tasks"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "walltime_seconds": -1}})", q),
       "walltime_seconds"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "walltime_seconds": 1e30}})", q),
       "walltime_seconds"},
      {"alice", "POST", "/api/v1/jobs",
       fmt::format(R"({{{}, "retry": {{"max_retries": 1001}}}})", q), "retry.max_retries"},
      {"alice", "POST", "/api/v1/jobs", fmt::format(R"({{{}, "resources": {{"gpus": 2000}}}})", q),
       "resources.gpus"},
      {"alice", "POST", "/api/v1/jobs",
       fmt::format(R"({{{}, "resources": {{"gpu_milli": 1500}}}})", q), "resources.gpu_milli"},
      {"alice", "POST", "/api/v1/jobs", R"({"queue": "vision-train", "command": []})", "command"},
      {"alice", "POST", "/api/v1/jobs", R"({"command": ["x"]})", "queue"},
      // Users, tokens.
      {"tina", "POST", "/api/v1/users", R"({"name": "u1", "tenant": "vision", "email": "x"})",
       "email"},
      {"tina", "POST", "/api/v1/users", R"({"name": 5})", "name"},
      {"tina", "POST", "/api/v1/users", R"({"name": "Bad Name", "tenant": "vision"})", "name"},
      {"tina", "POST", "/api/v1/users", R"({"name": "u2", "tenant": "vision", "role": "node"})",
       "role"},
      {"tina", "POST", "/api/v1/users", "[]", ""},
      {"tina", "POST", "/api/v1/users", "null", ""},
      {"tina", "POST", "/api/v1/users", "\"alice\"", ""},
      {"tina", "POST", "/api/v1/tokens", R"({"user": "alice", "scope": "all"})", "scope"},
      {"tina", "POST", "/api/v1/tokens", R"({"user": 5})", "user"},
      {"tina", "POST", "/api/v1/tokens", R"({"user": "alice", "role": "superuser"})", "role"},
      {"tina", "POST", "/api/v1/tokens", "[]", ""},
      // Query parameters.
      {"alice", "GET", "/api/v1/jobs?limit=0", "", "limit"},
      {"alice", "GET", "/api/v1/jobs?limit=1001", "", "limit"},
      {"alice", "GET", "/api/v1/jobs?cursor=abc", "", "cursor"},
      {"alice", "GET", "/api/v1/jobs?state=bogus", "", "state"},
      {"alice", "GET", "/api/v1/events?since=abc", "", "since"},
      {"admin", "GET", "/api/v1/audit?limit=0", "", "limit"},
      {"admin", "GET", "/api/v1/audit?limit=5000", "", "limit"},
      {"admin", "GET", "/api/v1/audit?after=-1", "", "after"},
      // Configuration: the path of the member, unknown, mistyped or out of range.
      {"admin", "PUT", "/api/v1/config?dry_run=true", "gpu_modelz: []\n", "gpu_modelz"},
      {"admin", "PUT", "/api/v1/config?dry_run=true",
       "gpu_models:\n  - {name: A100-80G, memory_mib: -5}\n", "gpu_models[0].memory_mib"},
      {"admin", "PUT", "/api/v1/config?dry_run=true",
       "tenants:\n  - name: t\n    queues:\n      - {name: q, guaranteed: {gpu: lots}}\n",
       "tenants[0].queues[0].guaranteed.gpu"},
  };
  for (const Case& c : cases) {
    auto client = server_.As(c.who);
    httplib::Result r = c.method == "GET"    ? client->Get(c.path)
                        : c.method == "POST" ? client->Post(c.path, c.body, "application/json")
                                             : client->Put(c.path, c.body, "application/yaml");
    ASSERT_TRUE(r) << c.path;
    EXPECT_EQ(r->status, 400) << c.method << " " << c.path << " " << c.body << " -> " << r->body;
    const json e = BodyJson(r)["error"];
    EXPECT_EQ(e.value("code", ""), "invalid_argument") << r->body;
    EXPECT_EQ(e.value("field", ""), c.field) << c.method << " " << c.path << " " << c.body;
    EXPECT_FALSE(e.value("message", "").empty()) << r->body;
  }
  // Nothing was created, and the configuration is unchanged.
  EXPECT_EQ(BodyJson(server_.As("admin")->Get("/api/v1/jobs"))["items"].size(), 0u);
  EXPECT_EQ(BodyJson(server_.As("admin")->Get("/api/v1/users"))["items"].size(), 5u);
}

TEST_F(LimitsTest, IdempotencyKeysBelongToTheirUser) {
  const httplib::Headers key = {{"Idempotency-Key", "nightly-run-7"}};
  auto post = [&](const std::string& who, const std::string& queue) {
    return server_.As(who)->Post("/api/v1/jobs", key, JobBody(queue), "application/json");
  };
  auto a1 = post("alice", "vision-train");
  ASSERT_EQ(a1->status, 201) << a1->body;
  auto b1 = post("bob", "vision-train");
  ASSERT_EQ(b1->status, 201) << b1->body;
  auto s1 = post("sam", "speech-train");
  ASSERT_EQ(s1->status, 201) << s1->body;
  const uint64_t alice_job = BodyJson(a1)["id"].get<uint64_t>();
  EXPECT_NE(BodyJson(b1)["id"], alice_job);
  EXPECT_NE(BodyJson(s1)["id"], alice_job);
  EXPECT_EQ(BodyJson(b1)["user"], "bob");

  auto a2 = post("alice", "vision-train");
  ASSERT_TRUE(a2);
  EXPECT_EQ(a2->status, 200);
  EXPECT_EQ(BodyJson(a2)["id"], alice_job);
  EXPECT_EQ(BodyJson(a2)["user"], "alice");
  EXPECT_EQ(BodyJson(server_.As("admin")->Get("/api/v1/jobs"))["items"].size(), 3u);

  // The keys survive a restart.
  ASSERT_EQ(WEXITSTATUS(server_.process().Kill(SIGTERM)), 0);
  ServerProcess again;
  ASSERT_TRUE(again.Start(server_.data_dir())) << again.output();
  auto a3 = again.Client(server_.token("alice"))
                ->Post("/api/v1/jobs", key, JobBody("vision-train"), "application/json");
  ASSERT_TRUE(a3);
  EXPECT_EQ(a3->status, 200);
  EXPECT_EQ(BodyJson(a3)["id"], alice_job);
}

// A retry must send what the first request sent: the same key with another job is 422 (also
// after a restart, and per job of a batch); the same job written differently is the same.
TEST_F(LimitsTest, AKeyReusedWithAnotherBodyIs422) {
  const httplib::Headers key = {{"Idempotency-Key", "nightly-run-8"}};
  auto alice = server_.As("alice");
  auto first = alice->Post("/api/v1/jobs", key, JobBody("vision-train", 64), "application/json");
  ASSERT_EQ(first->status, 201) << first->body;
  const uint64_t id = BodyJson(first)["id"].get<uint64_t>();
  // The same job with other spacing and key order replays.
  const std::string same =
      R"({ "resources": {"memory_mib": 1024, "gpus": 64, "cpu_milli": 1000},
           "command": ["sleep", "1"], "queue": "vision-train" })";
  auto replay = alice->Post("/api/v1/jobs", key, same, "application/json");
  ASSERT_EQ(replay->status, 200) << replay->body;
  EXPECT_EQ(BodyJson(replay)["id"], id);
  auto other = alice->Post("/api/v1/jobs", key, JobBody("vision-train", 32), "application/json");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 422) << other->body;
  const json e = BodyJson(other)["error"];
  EXPECT_EQ(e.value("code", ""), "unprocessable");
  EXPECT_EQ(e.value("field", ""), "Idempotency-Key");
  EXPECT_NE(e.value("message", "").find(std::to_string(id)), std::string::npos) << e;
  // Another secret value is another submission too.
  json with_secret = json::parse(JobBody("vision-train"));
  with_secret["secret_env"] = {{"TOKEN", "a"}};
  const httplib::Headers key2 = {{"Idempotency-Key", "with-secret"}};
  ASSERT_EQ(alice->Post("/api/v1/jobs", key2, with_secret.dump(), "application/json")->status, 201);
  with_secret["secret_env"] = {{"TOKEN", "b"}};
  EXPECT_EQ(alice->Post("/api/v1/jobs", key2, with_secret.dump(), "application/json")->status, 422);
  // A batch: job 1 changed under the same key is refused, and nothing new is made.
  const httplib::Headers bkey = {{"Idempotency-Key", "batch-8"}};
  const std::string batch =
      json{{"jobs", {json::parse(JobBody("vision-train")), json::parse(JobBody("vision-train"))}}}
          .dump();
  ASSERT_EQ(alice->Post("/api/v1/jobs/batch", bkey, batch, "application/json")->status, 201);
  const std::string changed =
      json{{"jobs",
            {json::parse(JobBody("vision-train")), json::parse(JobBody("vision-train", 16))}}}
          .dump();
  auto b2 = alice->Post("/api/v1/jobs/batch", bkey, changed, "application/json");
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->status, 422) << b2->body;
  EXPECT_NE(b2->body.find("job 1 of the batch"), std::string::npos) << b2->body;
  const size_t jobs = BodyJson(server_.As("admin")->Get("/api/v1/jobs"))["items"].size();
  EXPECT_EQ(jobs, 4u);

  ASSERT_EQ(WEXITSTATUS(server_.process().Kill(SIGTERM)), 0);
  ServerProcess again;
  ASSERT_TRUE(again.Start(server_.data_dir())) << again.output();
  auto c = again.Client(server_.token("alice"));
  auto after = c->Post("/api/v1/jobs", key, JobBody("vision-train", 32), "application/json");
  ASSERT_TRUE(after);
  EXPECT_EQ(after->status, 422) << after->body;
  auto replay2 = c->Post("/api/v1/jobs", key, same, "application/json");
  ASSERT_TRUE(replay2);
  EXPECT_EQ(replay2->status, 200) << replay2->body;
  EXPECT_EQ(BodyJson(replay2)["id"], id);
}

// A job's env values are for its owner, its tenant's admins and admins; other members and
// viewers see the names (null values), in the job, the list and the submission's answer.
TEST_F(LimitsTest, OnlyTheOwnerAndAdminsSeeEnvValues) {
  json body = json::parse(JobBody("vision-train"));
  body["env"] = {{"WANDB_API_KEY", "wb-123"}, {"LR", "0.1"}};
  auto r = server_.As("alice")->Post("/api/v1/jobs", body.dump(), "application/json");
  ASSERT_EQ(r->status, 201) << r->body;
  EXPECT_EQ(BodyJson(r)["env"]["WANDB_API_KEY"], "wb-123");
  const uint64_t id = BodyJson(r)["id"].get<uint64_t>();
  const std::string path = fmt::format("/api/v1/jobs/{}", id);
  for (const auto& [who, sees] : std::vector<std::pair<std::string, bool>>{
           {"alice", true}, {"tina", true}, {"admin", true}, {"bob", false}, {"vic", false}}) {
    const json j = BodyJson(server_.As(who)->Get(path));
    ASSERT_TRUE(j.contains("env")) << who << ": " << j;
    EXPECT_EQ(j["env"].size(), 2u) << who;
    if (sees) {
      EXPECT_EQ(j["env"]["WANDB_API_KEY"], "wb-123") << who;
    } else {
      EXPECT_TRUE(j["env"]["WANDB_API_KEY"].is_null()) << who << ": " << j["env"];
      EXPECT_TRUE(j["env"]["LR"].is_null()) << who;
    }
    auto list = server_.As(who)->Get("/api/v1/jobs");
    ASSERT_TRUE(list);
    EXPECT_EQ(list->body.find("wb-123") != std::string::npos, sees) << who;
  }
}

class RateLimitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // 5 requests a second per token, bursts of 10: the setup makes 4 requests as admin.
    ASSERT_TRUE(server_.Start({"--rate-limit", "5"}, {"alice", "bob", "sam"}));
  }
  TenantServer server_;
};

TEST_F(RateLimitTest, OneTokenIsThrottledOthersAreNot) {
  auto alice = server_.As("alice");
  int ok = 0;
  std::optional<httplib::Response> limited;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 40 && !limited; ++i) {
    auto r = alice->Get("/api/v1/whoami");
    ASSERT_TRUE(r);
    if (r->status == 200) {
      ++ok;
    } else {
      ASSERT_EQ(r->status, 429) << r->body;
      limited = *r;
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(limited.has_value()) << "40 requests and none limited";
  EXPECT_GE(ok, 10);                                                 // the burst
  EXPECT_LE(ok, 10 + static_cast<int>(seconds * 5) + 1) << seconds;  // plus the refill
  EXPECT_EQ(limited->get_header_value("Retry-After"), "1");
  const json e = json::parse(limited->body, nullptr, false)["error"];
  EXPECT_EQ(e.value("code", ""), "resource_exhausted") << limited->body;
  EXPECT_NE(e.value("message", "").find("rate limit"), std::string::npos) << limited->body;

  // Other tokens are unaffected, even alice's colleague and a mutating call.
  auto r = server_.As("bob")->Get("/api/v1/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  r = server_.As("sam")->Post("/api/v1/jobs", JobBody("speech-train"), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 201) << r->body;

  // After Retry-After, alice may call again.
  std::this_thread::sleep_for(std::chrono::seconds(1));
  r = alice->Get("/api/v1/whoami");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace arbiter::testing
