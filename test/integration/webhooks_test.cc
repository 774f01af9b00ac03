// Webhooks end to end: the real server and a real agent, and a receiver HTTP server the test runs
// on loopback. Jobs that succeed and fail are announced to their user's hook with a signature the
// secret verifies; a Slack-format hook gets {"text": ...}; another user's hook hears nothing; a
// receiver that is down when the event happens gets it once it listens, after retries, with the
// same delivery id, and the delivery log shows the failed attempts.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "agent_process.h"
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
      - {name: lab-q, guaranteed: {gpu: 4}}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: bea, tenant: lab, role: member}
  - {name: tom, tenant: lab, role: tenant-admin}
)";

json Parse(const httplib::Result& r) {
  if (!r) return json();
  return json::parse(r->body, nullptr, false);
}

std::string HmacSha256Hex(const std::string& key, const std::string& message) {
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(message.data()), message.size(), out, &len);
  std::string hex;
  for (unsigned int i = 0; i < len; ++i) hex += fmt::format("{:02x}", out[i]);
  return hex;
}

// Whether `header` ("t=UNIX,v1=HEX") signs `body` with `secret`, as docs/webhooks.md says to check.
bool SignatureVerifies(const std::string& header, const std::string& secret,
                       const std::string& body) {
  const size_t comma = header.find(",v1=");
  if (header.rfind("t=", 0) != 0 || comma == std::string::npos) return false;
  const std::string t = header.substr(2, comma - 2);
  return header.substr(comma + 4) == HmacSha256Hex(secret, t + "." + body);
}

// The receiver of the deliveries: an HTTP server on 127.0.0.1 that records every POST.
class Receiver {
 public:
  struct Request {
    std::string path, body, event, delivery, signature;
  };

  // Listens on `port` (0: one the kernel picks); false when it cannot.
  bool Start(int port = 0) {
    server_ = std::make_unique<httplib::Server>();
    server_->Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard<std::mutex> lock(mu_);
      got_.push_back({req.path, req.body, req.get_header_value("X-Arbiter-Event"),
                      req.get_header_value("X-Arbiter-Delivery"),
                      req.get_header_value("X-Arbiter-Signature")});
      res.status = 204;
    });
    port_ = port == 0 ? server_->bind_to_any_port("127.0.0.1")
                      : (server_->bind_to_port("127.0.0.1", port) ? port : -1);
    if (port_ <= 0) return false;
    thread_ = std::thread([this] { server_->listen_after_bind(); });
    for (int i = 0; i < 200 && !server_->is_running(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return server_->is_running();
  }
  void Stop() {
    if (server_) server_->stop();
    if (thread_.joinable()) thread_.join();
  }
  ~Receiver() { Stop(); }

  int port() const { return port_; }
  std::string Url(const std::string& path) const {
    return fmt::format("http://127.0.0.1:{}{}", port_, path);
  }
  std::vector<Request> Got(const std::string& path) {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<Request> out;
    for (const Request& r : got_) {
      if (r.path == path) out.push_back(r);
    }
    return out;
  }
  // Polls (50 ms apart, at most `ms`) until `path` got `n` requests; what it got.
  std::vector<Request> WaitFor(const std::string& path, size_t n, int ms = 20000) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (Clock::now() < deadline) {
      auto got = Got(path);
      if (got.size() >= n) return got;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return Got(path);
  }

 private:
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = -1;
  std::mutex mu_;
  std::vector<Request> got_;
};

class WebhooksTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(server_.Start(
        dir_.path(), {"--config", dir_.path() + "/cluster.yaml", "--webhook-retry-base-ms", "300",
                      "--webhook-retry-max-ms", "600", "--webhook-timeout-ms", "2000"}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
    for (const char* user : {"ann", "bea", "tom"}) {
      auto t = admin_->Post("/api/v1/tokens", json{{"user", user}}.dump(), "application/json");
      ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no reply");
      clients_[user] = server_.Client(Parse(t)["token"].get<std::string>());
    }
    const std::string node_token = NodeToken(*admin_, "node-a");
    ASSERT_FALSE(node_token.empty());
    ASSERT_TRUE(agent_.Start(fmt::format("http://127.0.0.1:{}", server_.port()), node_token,
                             "node-a", dir_.path() + "/agent-node-a"))
        << agent_.Log();
  }
  void TearDown() override {
    agent_.Stop();
    if (HasFailure()) std::fprintf(stderr, "--- agent log:\n%s", agent_.Log().c_str());
    KillLeftoverTasks(agent_.work_dir());
  }

  json CreateHook(const std::string& user, json body) {
    auto r = clients_[user]->Post("/api/v1/webhooks", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    return Parse(r);
  }
  uint64_t Submit(const std::string& user, json command) {
    const json body = {{"queue", "lab-q"},
                       {"command", command},
                       {"resources", {{"gpus", 1}, {"cpu_milli", 100}, {"memory_mib", 64}}}};
    auto r = clients_[user]->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no reply");
    return r && r->status == 201 ? Parse(r)["id"].get<uint64_t>() : 0;
  }
  json Deliveries(const std::string& user, const std::string& hook) {
    return Parse(clients_[user]->Get(fmt::format("/api/v1/webhooks/{}/deliveries", hook)));
  }

  TempDir dir_;
  ServerProcess server_;
  AgentProcess agent_;
  std::unique_ptr<httplib::Client> admin_;
  std::map<std::string, std::unique_ptr<httplib::Client>> clients_;
};

TEST_F(WebhooksTest, JobEndsAreDeliveredSignedToTheirUsersHooks) {
  Receiver rx;
  ASSERT_TRUE(rx.Start());
  const json ann = CreateHook("ann", {{"url", rx.Url("/ann")},
                                      {"events", {"job.succeeded", "job.failed"}},
                                      {"description", "ann's jobs"}});
  const std::string secret = ann.value("secret", "");
  ASSERT_EQ(secret.rfind("whsec_", 0), 0u) << ann.dump();
  CreateHook("bea", {{"url", rx.Url("/bea")}, {"events", {"job.succeeded", "job.failed"}}});
  CreateHook("tom", {{"url", rx.Url("/slack")},
                     {"events", {"job.failed"}},
                     {"scope", "tenant"},
                     {"format", "slack"}});
  // The secret is never shown again.
  auto list = clients_["ann"]->Get("/api/v1/webhooks");
  ASSERT_TRUE(list && list->status == 200);
  EXPECT_EQ(list->body.find(secret), std::string::npos);

  const uint64_t ok = Submit("ann", {"true"});
  const uint64_t bad = Submit("ann", {"sh", "-c", "exit 3"});
  const auto got = rx.WaitFor("/ann", 2);
  ASSERT_EQ(got.size(), 2u);
  std::map<std::string, json> by_event;
  for (const auto& r : got) {
    EXPECT_TRUE(SignatureVerifies(r.signature, secret, r.body)) << r.signature << " " << r.body;
    EXPECT_FALSE(SignatureVerifies(r.signature, secret + "x", r.body));
    const json body = json::parse(r.body);
    EXPECT_EQ(body["id"], r.delivery);
    EXPECT_EQ(body["event"], r.event);
    by_event[r.event] = body;
  }
  ASSERT_TRUE(by_event.count("job.succeeded")) << got[0].body;
  ASSERT_TRUE(by_event.count("job.failed")) << got[0].body;
  EXPECT_EQ(by_event["job.succeeded"]["job"]["id"], ok);
  EXPECT_EQ(by_event["job.succeeded"]["job"]["state"], "succeeded");
  EXPECT_EQ(by_event["job.succeeded"]["user"], "ann");
  EXPECT_EQ(by_event["job.succeeded"]["tenant"], "lab");
  EXPECT_EQ(by_event["job.failed"]["job"]["id"], bad);
  EXPECT_EQ(by_event["job.failed"]["job"]["state"], "failed");
  EXPECT_EQ(by_event["job.failed"]["job"]["queue"], "lab-q");

  // The tenant's Slack hook: one line of text for the failure.
  const auto slack = rx.WaitFor("/slack", 1);
  ASSERT_EQ(slack.size(), 1u);
  const json text = json::parse(slack[0].body);
  ASSERT_TRUE(text.contains("text")) << slack[0].body;
  EXPECT_EQ(text.size(), 1u);
  EXPECT_NE(text["text"].get<std::string>().find(fmt::format("Job {}", bad)), std::string::npos)
      << text;
  EXPECT_FALSE(slack[0].signature.empty());
  // bea's hook heard nothing of ann's jobs; and a job of bea's reaches hers only.
  const uint64_t beas = Submit("bea", {"true"});
  const auto bea = rx.WaitFor("/bea", 1);
  ASSERT_EQ(bea.size(), 1u);
  EXPECT_EQ(json::parse(bea[0].body)["job"]["id"], beas);
  EXPECT_EQ(rx.Got("/ann").size(), 2u);

  // The delivery log says each was delivered at the first attempt.
  const json log = Deliveries("ann", ann["id"]);
  ASSERT_EQ(log["items"].size(), 2u) << log.dump();
  for (const json& d : log["items"]) {
    EXPECT_EQ(d["state"], "delivered") << d;
    EXPECT_EQ(d["attempts"], 1) << d;
    EXPECT_EQ(d["status"], 204) << d;
  }
}

TEST_F(WebhooksTest, AReceiverThatWasDownGetsTheEventAfterRetries) {
  // A free port, then nothing listening on it.
  int port = 0;
  {
    Receiver probe;
    ASSERT_TRUE(probe.Start());
    port = probe.port();
  }
  const json hook = CreateHook(
      "ann", {{"url", fmt::format("http://127.0.0.1:{}/late", port)}, {"events", {"job.failed"}}});
  const std::string id = hook.value("id", "");
  const uint64_t job = Submit("ann", {"sh", "-c", "exit 1"});

  // The log shows attempts that failed to connect, and the next one planned.
  json pending;
  const auto deadline = Clock::now() + std::chrono::seconds(20);
  while (Clock::now() < deadline) {
    pending = Deliveries("ann", id);
    if (!pending["items"].empty() && pending["items"][0]["attempts"].get<int>() >= 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_EQ(pending["items"].size(), 1u) << pending.dump();
  const json first = pending["items"][0];
  EXPECT_EQ(first["state"], "pending") << first;
  EXPECT_GE(first["attempts"].get<int>(), 2) << first;
  EXPECT_TRUE(first["status"].is_null()) << first;
  EXPECT_FALSE(first["error"].is_null()) << first;
  EXPECT_FALSE(first["next_attempt_at"].is_null()) << first;

  Receiver rx;
  ASSERT_TRUE(rx.Start(port));
  const auto got = rx.WaitFor("/late", 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].delivery, first["id"]);
  EXPECT_EQ(json::parse(got[0].body)["job"]["id"], job);
  EXPECT_TRUE(SignatureVerifies(got[0].signature, hook["secret"], got[0].body));

  json done;
  const auto until = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < until) {
    done = Deliveries("ann", id);
    if (done["items"].size() == 1 && done["items"][0]["state"] == "delivered") break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  const json d = done["items"][0];
  EXPECT_EQ(d["state"], "delivered") << d;
  EXPECT_EQ(d["id"], first["id"]);
  EXPECT_GE(d["attempts"].get<int>(), 3) << d;
  EXPECT_EQ(d["status"], 204) << d;
  EXPECT_FALSE(d["delivered_at"].is_null()) << d;
  ASSERT_EQ(d["log"].size(), d["attempts"].get<size_t>()) << d;
  EXPECT_FALSE(d["log"][0]["error"].is_null()) << d;
  EXPECT_EQ(d["log"][d["log"].size() - 1]["status"], 204) << d;
}

TEST_F(WebhooksTest, ApiValidationAndATestPing) {
  auto bad = clients_["ann"]->Post("/api/v1/webhooks",
                                   json{{"url", "ftp://x/"}, {"events", {"job.failed"}}}.dump(),
                                   "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(Parse(bad)["error"]["field"], "url");
  auto member_tenant = clients_["ann"]->Post(
      "/api/v1/webhooks",
      json{{"url", "http://127.0.0.1:9/"}, {"events", {"budget.80"}}, {"scope", "tenant"}}.dump(),
      "application/json");
  ASSERT_TRUE(member_tenant);
  EXPECT_EQ(member_tenant->status, 403);

  Receiver rx;
  ASSERT_TRUE(rx.Start());
  const json hook = CreateHook("ann", {{"url", rx.Url("/ping")}, {"events", {"job.failed"}}});
  auto ping =
      clients_["ann"]->Post(fmt::format("/api/v1/webhooks/{}/test", hook["id"].get<std::string>()),
                            "{}", "application/json");
  ASSERT_TRUE(ping);
  EXPECT_EQ(ping->status, 202) << ping->body;
  const auto got = rx.WaitFor("/ping", 1);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].event, "ping");
  EXPECT_EQ(got[0].delivery, Parse(ping)["id"]);
  // Another user's hook looks missing; its owner deletes it.
  auto other =
      clients_["bea"]->Delete(fmt::format("/api/v1/webhooks/{}", hook["id"].get<std::string>()));
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto del =
      clients_["ann"]->Delete(fmt::format("/api/v1/webhooks/{}", hook["id"].get<std::string>()));
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 200) << del->body;
  EXPECT_TRUE(Parse(clients_["ann"]->Get("/api/v1/webhooks"))["items"].empty());
}

}  // namespace
}  // namespace arbiter::testing
