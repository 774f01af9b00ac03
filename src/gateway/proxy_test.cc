// The gateway in this process in front of real arbiter-echo-server processes on loopback.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "gateway/gateway.h"
#include "gateway/routes.h"

namespace arbiter::gateway {
namespace {

using nlohmann::json;

// arbiter-echo-server as a child on a free port; killed when destroyed.
class Echo {
 public:
  explicit Echo(const std::string& id, std::vector<std::string> extra = {}) {
    int out[2];
    if (pipe(out) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<std::string> args = {ARBITER_ECHO_SERVER, "--port", "0", "--id", id};
      for (auto& e : extra) args.push_back(e);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    std::string buf;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline && buf.find('\n') == std::string::npos) {
      pollfd p{out[0], POLLIN, 0};
      if (poll(&p, 1, 100) <= 0) continue;
      char c[256];
      const ssize_t n = read(out[0], c, sizeof(c));
      if (n <= 0) break;
      buf.append(c, static_cast<size_t>(n));
    }
    close(out[0]);
    const size_t colon = buf.rfind(':');
    if (colon != std::string::npos) port_ = std::atoi(buf.c_str() + colon + 1);
  }
  ~Echo() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ > 0) {
      kill(pid_, sig);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

ServiceRoute Service(const std::string& name, std::vector<RevisionRoute> revisions) {
  ServiceRoute s;
  s.name = name;
  s.revisions = std::move(revisions);
  return s;
}

RevisionRoute Revision(int64_t rev, double percent, const std::vector<const Echo*>& replicas) {
  RevisionRoute r;
  r.revision = rev;
  r.percent = percent;
  for (const Echo* e : replicas) r.replicas.push_back({std::to_string(e->port()), e->address()});
  return r;
}

class ProxyTest : public ::testing::Test {
 protected:
  // The gateway with `table` in its routes file (no server).
  void StartGateway(const RouteTable& table, int threads = 2) {
    routes_path_ = ::testing::TempDir() + "/routes-" + std::to_string(getpid()) + ".json";
    FILE* f = fopen(routes_path_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(RouteTableJson(table).c_str(), f);
    fclose(f);
    GatewayOptions o;
    o.threads = threads;
    o.routes_file = routes_path_;
    gateway_ = std::make_unique<Gateway>(o);
    Status st = gateway_->Start();
    ASSERT_TRUE(st.ok()) << st.ToString();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", gateway_->port());
    client_->set_read_timeout(10, 0);
  }

  void TearDown() override {
    if (gateway_) gateway_->Stop();
    if (!routes_path_.empty()) unlink(routes_path_.c_str());
  }

  std::unique_ptr<Gateway> gateway_;
  std::unique_ptr<httplib::Client> client_;
  std::string routes_path_;
};

TEST_F(ProxyTest, ForwardsPathQueryBodyAndHeaders) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  t.services.push_back(Service("chat", {Revision(3, 100, {&a})}));
  StartGateway(t);
  httplib::Headers h = {
      {"X-Forwarded-For", "10.1.1.1"}, {"Connection", "keep-alive, X-Hop"}, {"X-Hop", "secret"}};
  auto r = client_->Post("/s/chat/v1/complete?x=1&y=2", h, std::string(1 << 20, 'x'),
                         "application/octet-stream");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  ASSERT_EQ(r->status, 200) << r->body;
  const json body = json::parse(r->body);
  EXPECT_EQ(body["id"], "a");
  EXPECT_EQ(body["method"], "POST");
  EXPECT_EQ(body["path"], "/v1/complete");
  EXPECT_EQ(body["query"], "x=1&y=2");
  EXPECT_EQ(body["body_bytes"], 1 << 20);
  EXPECT_EQ(body["headers"]["x-forwarded-for"], "10.1.1.1, 127.0.0.1");
  EXPECT_EQ(body["headers"]["x-forwarded-proto"], "http");
  EXPECT_EQ(body["headers"]["x-forwarded-host"], "127.0.0.1:" + std::to_string(gateway_->port()));
  EXPECT_FALSE(body["headers"].contains("x-hop"));
  EXPECT_EQ(r->get_header_value("X-Arbiter-Revision"), "3");
  EXPECT_EQ(r->get_header_value("X-Arbiter-Replica"), std::to_string(a.port()));

  auto root = client_->Get("/s/chat?q=1");
  ASSERT_TRUE(root);
  EXPECT_EQ(json::parse(root->body)["path"], "/");
  EXPECT_EQ(json::parse(root->body)["query"], "q=1");
}

TEST_F(ProxyTest, UnknownServiceIs404AndHostRoutesWork) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  ServiceRoute s = Service("chat", {Revision(1, 100, {&a})});
  s.hosts = {"chat.example.com"};
  t.services.push_back(s);
  StartGateway(t);
  auto r = client_->Get("/s/nope/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "not_found");
  auto other = client_->Get("/elsewhere");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 404);
  auto host = client_->Get("/v1/x?z=1", {{"Host", "Chat.Example.com:8000"}});
  ASSERT_TRUE(host);
  ASSERT_EQ(host->status, 200);
  EXPECT_EQ(json::parse(host->body)["path"], "/v1/x");
  EXPECT_EQ(host->get_header_value("X-Arbiter-Revision"), "1");
}

TEST_F(ProxyTest, RelaysChunkedAnswersAndHead) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  t.services.push_back(Service("chat", {Revision(1, 100, {&a})}));
  StartGateway(t);
  auto r = client_->Get("/s/chat/stream?chunks=5");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Transfer-Encoding"), "chunked");
  EXPECT_NE(r->body.find("{\"chunk\":0}\n{\"chunk\":1}"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("{\"chunk\":4}\n{\"id\":\"a\""), std::string::npos) << r->body;
  EXPECT_EQ(r->get_header_value("X-Arbiter-Replica"), std::to_string(a.port()));
  // The same connection carries the next request.
  auto again = client_->Get("/s/chat/after");
  ASSERT_TRUE(again);
  EXPECT_EQ(json::parse(again->body)["path"], "/after");
  auto head = client_->Head("/s/chat/h");
  ASSERT_TRUE(head);
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  auto status = client_->Get("/s/chat/x?status=418");
  ASSERT_TRUE(status);
  EXPECT_EQ(status->status, 418);
}

TEST_F(ProxyTest, AFullQueueAnswers503WithAJsonBody) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  ServiceRoute s = Service("slow", {Revision(1, 100, {&a})});
  s.max_concurrency = 1;
  s.queue_max = 1;
  s.queue_timeout_ms = 10000;
  t.services.push_back(s);
  StartGateway(t);
  std::atomic<int> ok{0};
  std::atomic<int> rejected{0};
  std::string rejection;
  std::mutex mu;
  std::vector<std::thread> clients;
  for (int i = 0; i < 3; ++i) {
    clients.emplace_back([&, i] {
      std::this_thread::sleep_for(std::chrono::milliseconds(50 * i));  // arrive in order
      httplib::Client c("127.0.0.1", gateway_->port());
      c.set_read_timeout(10, 0);
      auto r = c.Get("/s/slow/x?delay_ms=600");
      if (r && r->status == 200) ++ok;
      if (r && r->status == 503) {
        ++rejected;
        std::lock_guard<std::mutex> lock(mu);
        rejection = r->body;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 2) << "one at the replica, one waiting";
  EXPECT_EQ(rejected.load(), 1);
  const json body = json::parse(rejection);
  EXPECT_EQ(body["error"]["code"], "unavailable");
  EXPECT_NE(body["error"]["message"].get<std::string>().find("request_queue.max"),
            std::string::npos);
  const std::string metrics = gateway_->metrics_text();
  EXPECT_NE(metrics.find("arbiter_gateway_rejected_total{service=\"slow\",revision=\"1\"} 1"),
            std::string::npos)
      << metrics;
}

TEST_F(ProxyTest, AQueuedRequestTimesOut) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  ServiceRoute s = Service("slow", {Revision(1, 100, {&a})});
  s.max_concurrency = 1;
  s.queue_max = 10;
  s.queue_timeout_ms = 200;
  t.services.push_back(s);
  StartGateway(t);
  std::thread first([&] {
    httplib::Client c("127.0.0.1", gateway_->port());
    c.set_read_timeout(10, 0);
    auto r = c.Get("/s/slow/x?delay_ms=1500");
    EXPECT_TRUE(r && r->status == 200);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  const auto t0 = std::chrono::steady_clock::now();
  auto r = client_->Get("/s/slow/y");
  const auto waited = std::chrono::steady_clock::now() - t0;
  first.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("request_queue.timeout_ms"), std::string::npos) << r->body;
  EXPECT_GE(waited, std::chrono::milliseconds(150));
  EXPECT_LT(waited, std::chrono::milliseconds(1400));
}

TEST_F(ProxyTest, AQueuedRequestRunsWhenASlotFrees) {
  Echo a("a");
  RouteTable t;
  t.version = 1;
  ServiceRoute s = Service("one", {Revision(1, 100, {&a})});
  s.max_concurrency = 1;
  s.queue_max = 100;
  t.services.push_back(s);
  StartGateway(t, 4);
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int i = 0; i < 8; ++i) {
    clients.emplace_back([&] {
      httplib::Client c("127.0.0.1", gateway_->port());
      c.set_read_timeout(10, 0);
      for (int k = 0; k < 5; ++k) {
        auto r = c.Get("/s/one/x?delay_ms=5");
        if (r && r->status == 200) ++ok;
      }
    });
  }
  for (auto& c : clients) c.join();
  EXPECT_EQ(ok.load(), 40);
}

TEST_F(ProxyTest, ADeadReplicaIsRetriedElsewhereAndEjected) {
  Echo a("a");
  Echo dead("dead");
  const std::string dead_address = dead.address();
  dead.Kill(SIGKILL);
  RouteTable t;
  t.version = 1;
  RevisionRoute rev;
  rev.revision = 1;
  rev.percent = 100;
  rev.replicas = {{"dead", dead_address}, {"a", a.address()}};
  t.services.push_back(Service("chat", {rev}));
  StartGateway(t);
  for (int i = 0; i < 50; ++i) {
    auto r = client_->Get("/s/chat/x");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
    EXPECT_EQ(r->get_header_value("X-Arbiter-Replica"), "a");
  }
  // Ejected after its first failed connect: a retry or two in 50 requests (another after each
  // second the ejection ends), not one per request.
  const std::string metrics = gateway_->metrics_text();
  const std::string key = "arbiter_gateway_retries_total{service=\"chat\",revision=\"1\"} ";
  const size_t at = metrics.find(key);
  ASSERT_NE(at, std::string::npos) << metrics;
  const int retries = std::atoi(metrics.c_str() + at + key.size());
  EXPECT_GE(retries, 1);
  EXPECT_LE(retries, 5);
}

TEST_F(ProxyTest, OnlyADeadReplicaIs502) {
  Echo dead("dead");
  const std::string dead_address = dead.address();
  dead.Kill(SIGKILL);
  RouteTable t;
  t.version = 1;
  RevisionRoute rev;
  rev.revision = 1;
  rev.percent = 100;
  rev.replicas = {{"dead", dead_address}};
  t.services.push_back(Service("chat", {rev}));
  StartGateway(t);
  auto r = client_->Get("/s/chat/x");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 502);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "bad_gateway");
}

TEST_F(ProxyTest, ANewTableRoutesToNewReplicasAndWakesWaiters) {
  Echo a("a");
  Echo b("b");
  RouteTable t;
  t.version = 1;
  ServiceRoute s = Service("chat", {Revision(1, 100, {})});
  s.queue_max = 10;
  s.queue_timeout_ms = 5000;
  t.services.push_back(s);
  StartGateway(t);
  std::thread waiting([&] {
    httplib::Client c("127.0.0.1", gateway_->port());
    c.set_read_timeout(10, 0);
    auto r = c.Get("/s/chat/cold");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << "waited for a replica to appear";
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  t.version = 2;
  t.services[0].revisions = {Revision(1, 50, {&a}), Revision(2, 50, {&b})};
  ASSERT_TRUE(gateway_->SetRoutes(RouteTableJson(t)).ok());
  waiting.join();
  std::map<std::string, int> by_revision;
  for (int i = 0; i < 200; ++i) {
    auto r = client_->Get("/s/chat/x");
    ASSERT_TRUE(r && r->status == 200);
    ++by_revision[r->get_header_value("X-Arbiter-Revision")];
  }
  EXPECT_GT(by_revision["1"], 60);
  EXPECT_GT(by_revision["2"], 60);
  EXPECT_EQ(gateway_->routes_version(), 2);
}

TEST_F(ProxyTest, MetricsAreServed) {
  Echo a("a");
  RouteTable t;
  t.version = 5;
  t.services.push_back(Service("chat", {Revision(1, 100, {&a})}));
  StartGateway(t);
  ASSERT_TRUE(client_->Get("/s/chat/x"));
  // A request is counted once its answer has been written, which the client may see first:
  // bounded, until the count is there.
  auto m = client_->Get("/metrics");
  for (int i = 0; i < 200 && m && m->body.find("code=\"2xx\"} 1") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    m = client_->Get("/metrics");
  }
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  for (const char* want :
       {"arbiter_gateway_requests_total{service=\"chat\",revision=\"1\",code=\"2xx\"} 1",
        "arbiter_gateway_routes_version 5", "arbiter_gateway_queue_length{service=\"chat\"} 0",
        "arbiter_gateway_replicas{service=\"chat\",revision=\"1\"} 1"}) {
    EXPECT_NE(m->body.find(want), std::string::npos) << want << "\n" << m->body;
  }
}

}  // namespace
}  // namespace arbiter::gateway
