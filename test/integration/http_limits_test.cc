// The HTTP layer's defences (docs/security.md, "HTTP limits"): strict query parameters, bodies
// read only once the caller may send them, per-route body caps, header deadlines and limits, a
// per-address connection limit, log followers that leave, and idempotency keys bound to their
// request.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "tenant_server.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

class HttpLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(server_.Start()); }
  TenantServer server_;
};

// Whether the server's configuration (GET /api/v1/config, YAML) has the speech tenant.
bool HasSpeech(const TenantServer& server) {
  auto r = server.As("admin")->Get("/api/v1/config");
  return r && r->status == 200 && r->body.find("speech-train") != std::string::npos;
}

// A configuration without the speech tenant: applying it for real would remove speech-train.
std::string WithoutSpeech() {
  std::string c = kTenantConfig;
  const size_t from = c.find("  - name: speech");
  const size_t to = c.find("users:");
  c.erase(from, to - from);
  c.erase(c.find("  - {name: sam"), c.find("nodes:") - c.find("  - {name: sam"));
  return c;
}

// A raw TCP connection to the server on loopback, for requests a client library would not send.
class RawConnection {
 public:
  explicit RawConnection(int port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  }
  ~RawConnection() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool connected() const { return connected_; }
  bool Send(const std::string& s) {
    return ::send(fd_, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
  }
  // What arrives until the peer closes, `end` is seen, or `timeout` passes.
  std::string Receive(std::chrono::milliseconds timeout, const std::string& end = "") {
    std::string got;
    const auto deadline = Clock::now() + timeout;
    while (Clock::now() < deadline && (end.empty() || got.find(end) == std::string::npos)) {
      pollfd p{fd_, POLLIN, 0};
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(1, left.count()))) <= 0) continue;
      char buf[4096];
      const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    return got;
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
};

// A billion laughs in a few hundred bytes: aliases doubling 40 times.
std::string AliasBomb() {
  std::string bomb = "a0: &a0 [lol, lol]\n";
  for (int i = 1; i <= 40; ++i) bomb += fmt::format("a{0}: &a{0} [*a{1}, *a{1}]\n", i, i - 1);
  return bomb;
}

TEST_F(HttpLimitsTest, BooleanParametersAreExactlyTrueOrFalse) {
  auto admin = server_.As("admin");
  ASSERT_TRUE(HasSpeech(server_));
  for (const char* value : {"1", "yes", "True", "TRUE", "", "0", "no", "on"}) {
    auto r = admin->Put(fmt::format("/api/v1/config?dry_run={}", value), WithoutSpeech(),
                        "application/yaml");
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << value << ": " << r->body;
    const json e = BodyJson(r)["error"];
    EXPECT_EQ(e.value("field", ""), "dry_run") << r->body;
    EXPECT_EQ(e.value("code", ""), "invalid_argument") << r->body;
    EXPECT_NE(e.value("message", "").find("must be true or false"), std::string::npos) << r->body;
    EXPECT_TRUE(HasSpeech(server_)) << "dry_run=" << value << " changed the configuration";
  }
  auto twice =
      admin->Put("/api/v1/config?dry_run=true&dry_run=false", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(twice);
  EXPECT_EQ(twice->status, 400) << twice->body;
  EXPECT_EQ(BodyJson(twice)["error"].value("field", ""), "dry_run");
  EXPECT_TRUE(HasSpeech(server_));

  // true answers the diff and changes nothing; false applies.
  auto dry = admin->Put("/api/v1/config?dry_run=true", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(dry);
  EXPECT_EQ(dry->status, 200) << dry->body;
  EXPECT_TRUE(BodyJson(dry)["dry_run"].get<bool>());
  EXPECT_TRUE(HasSpeech(server_));
  auto apply = admin->Put("/api/v1/config?dry_run=false", WithoutSpeech(), "application/yaml");
  ASSERT_TRUE(apply);
  EXPECT_EQ(apply->status, 200) << apply->body;
  EXPECT_FALSE(HasSpeech(server_));
}

// Every boolean parameter of every route in the OpenAPI document refuses a value other than true
// or false, naming itself.
TEST_F(HttpLimitsTest, EveryRoutesBooleansAreChecked) {
  auto admin = server_.As("admin");
  auto doc = admin->Get("/api/v1/openapi.json");
  ASSERT_TRUE(doc);
  const uint64_t job = server_.Submit("alice");
  ASSERT_NE(job, 0u);
  const json paths = BodyJson(doc)["paths"];
  int checked = 0;
  for (const auto& [path, ops] : paths.items()) {
    for (const auto& [method, op] : ops.items()) {
      for (const json& p : op.value("parameters", json::array())) {
        if (p["schema"].value("type", "") != "boolean") continue;
        std::string url = path;
        if (const size_t at = url.find("{id}"); at != std::string::npos) {
          url.replace(at, 4, std::to_string(job));
        }
        url += fmt::format("?{}=1", p.value("name", ""));
        httplib::Result r = method == "get"   ? admin->Get(url)
                            : method == "put" ? admin->Put(url, "{}", "application/json")
                                              : admin->Post(url, "{}", "application/json");
        ASSERT_TRUE(r) << method << " " << url;
        EXPECT_EQ(r->status, 400) << method << " " << url << ": " << r->body;
        EXPECT_EQ(BodyJson(r)["error"].value("field", ""), p.value("name", "")) << r->body;
        ++checked;
      }
    }
  }
  EXPECT_GE(checked, 2);  // dry_run and follow at least
}

// A configuration may be 8 MiB; every other body 1 MiB.
TEST_F(HttpLimitsTest, TheConfigurationMayBeEightMebibytes) {
  constexpr size_t kMiB = size_t{1} << 20;
  auto admin = server_.As("admin");
  // 3 MiB: the configuration and a long comment.
  std::string config = std::string(kTenantConfig) + "# " + std::string(3 * kMiB, 'x') + "\n";
  auto r = admin->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body.substr(0, 300);

  config = std::string(kTenantConfig) + "# " + std::string(8 * kMiB, 'x') + "\n";
  r = admin->Put("/api/v1/config", config, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body.substr(0, 300);
  const json e = BodyJson(r)["error"];
  EXPECT_EQ(e.value("code", ""), "invalid_argument") << r->body;
  EXPECT_NE(e.value("message", "").find("larger than 8388608 bytes"), std::string::npos) << r->body;

  // Elsewhere the cap stays 1 MiB.
  r = server_.As("alice")->Post("/api/v1/jobs", std::string(2 * kMiB, ' '), "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  EXPECT_NE(BodyJson(r)["error"].value("message", "").find("larger than 1048576 bytes"),
            std::string::npos)
      << r->body;
  r = admin->Get("/healthz");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// Who may send a configuration is decided before its body is read: a viewer is refused at once,
// even when the body it announces never comes.
TEST_F(HttpLimitsTest, TheConfigurationRouteAuthorisesBeforeReadingTheBody) {
  RawConnection c(server_.port());
  ASSERT_TRUE(c.connected());
  const auto t0 = Clock::now();
  ASSERT_TRUE(
      c.Send(fmt::format("PUT /api/v1/config HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer "
                         "{}\r\nContent-Type: application/yaml\r\nContent-Length: "
                         "8000000\r\n\r\n{}",
                         server_.token("vic"), AliasBomb())));
  const std::string reply = c.Receive(std::chrono::seconds(4), "}}");
  EXPECT_EQ(reply.rfind("HTTP/1.1 403", 0), 0u) << reply;
  EXPECT_NE(reply.find("only admins may change the configuration"), std::string::npos) << reply;
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(2));  // not after waiting for the body

  // The whole bomb from a viewer: 403. From an admin: 400 naming the alias expansion, fast.
  auto r = server_.As("vic")->Put("/api/v1/config", AliasBomb(), "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 403) << r->body;
  const auto t1 = Clock::now();
  r = server_.As("admin")->Put("/api/v1/config", AliasBomb(), "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(BodyJson(r)["error"].value("message", "").find("aliases expand to more than"),
            std::string::npos)
      << r->body;
  EXPECT_LT(Clock::now() - t1, std::chrono::seconds(1));
  // The server is unharmed: a normal request still works.
  r = server_.As("admin")->Put("/api/v1/config?dry_run=true", kTenantConfig, "application/yaml");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

// Slow clients cannot freeze the server: headers trickling in are cut off at the header
// deadline with 408, one address may hold only so many connections (429 beyond), and a header
// bomb is refused with 431, while other requests keep being served.
TEST(SlowClients, CannotFreezeTheServer) {
  TenantServer server;
  ASSERT_TRUE(
      server.Start({"--http-threads", "16", "--http-header-timeout-ms", "1500"}, {"alice"}));
  // Five slow connections from one address, where 16 / 4 = 4 may be open: one is refused (which
  // one depends on the order their threads start), the other four are held until the deadline.
  // On a loaded machine the server may not yet have seen the start-up check's connection close,
  // so it may hold a slot at first and refuse one more of the five.
  std::vector<std::unique_ptr<RawConnection>> slow;
  for (int i = 0; i < 5; ++i) {
    slow.push_back(std::make_unique<RawConnection>(server.port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send("GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n"));
  }
  // Each sends a header every 200 ms: never idle long enough for a read timeout.
  const auto t0 = Clock::now();
  for (int round = 0; round < 40; ++round) {
    bool any = false;
    for (auto& c : slow) any = c->Send("X-Slow: 1\r\n") || any;
    if (!any) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  int refused = 0;
  int timed_out = 0;
  for (auto& c : slow) {
    const std::string answer = c->Receive(std::chrono::seconds(5), "}}");
    if (answer.rfind("HTTP/1.1 429", 0) == 0) {
      ++refused;
      EXPECT_NE(answer.find("too many open connections from this address"), std::string::npos);
    } else {
      EXPECT_EQ(answer.rfind("HTTP/1.1 408", 0), 0u) << answer;
      timed_out += answer.rfind("HTTP/1.1 408", 0) == 0 ? 1 : 0;
    }
  }
  EXPECT_GE(refused, 1);
  EXPECT_LE(refused, 2);
  EXPECT_EQ(refused + timed_out, 5);
  EXPECT_LT(Clock::now() - t0, std::chrono::seconds(6));
  slow.clear();

  // Their slots are free again: a normal client is served; 5,000 headers are refused.
  std::unique_ptr<httplib::Client> alice;
  int status = 0;
  for (int i = 0; i < 100 && status != 200; ++i) {
    alice = server.As("alice");
    auto r = alice->Get("/api/v1/jobs");
    status = r ? r->status : 0;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(status, 200);
  RawConnection bomb(server.port());
  std::string req = "GET /api/v1/jobs HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 5000; ++i) req += "X-A: b\r\n";
  bomb.Send(req + "\r\n");
  const std::string too_many = bomb.Receive(std::chrono::seconds(5), "}}");
  EXPECT_EQ(too_many.rfind("HTTP/1.1 431", 0), 0u) << too_many.substr(0, 300);

  // The refusals are counted in the metrics.
  auto m = server.As("admin")->Get("/metrics");
  ASSERT_TRUE(m && m->status == 200);
  EXPECT_NE(m->body.find(fmt::format("arbiter_http_refused_total{{reason=\"header_timeout\"}} {}",
                                     timed_out)),
            std::string::npos);
  EXPECT_NE(m->body.find("arbiter_http_refused_total{reason=\"headers_too_large\"} 1"),
            std::string::npos);
  EXPECT_NE(m->body.find(fmt::format(
                "arbiter_http_refused_total{{reason=\"connections_per_address\"}} {}", refused)),
            std::string::npos);
  EXPECT_NE(m->body.find("arbiter_http_threads "), std::string::npos);
}

}  // namespace
}  // namespace arbiter::testing
