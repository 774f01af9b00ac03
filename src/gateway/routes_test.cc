#include "gateway/routes.h"

#include <gtest/gtest.h>

namespace arbiter::gateway {
namespace {

constexpr const char* kTable = R"({"version": 7,
 "services": [
  {"name": "chat", "tenant": "t", "hosts": ["Chat.Example.com"],
   "max_concurrency": 8, "queue_max": 1000, "queue_timeout_ms": 30000, "future_field": 1,
   "revisions": [
     {"revision": 3, "percent": 90,
      "replicas": [{"id": "123", "address": "127.0.0.1:20001"}]},
     {"revision": 4, "percent": 10, "replicas": []}]}]})";

TEST(RouteTableTest, ParsesTheContractsExample) {
  Result<RouteTable> t = ParseRouteTable(kTable);
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->version, 7);
  ASSERT_EQ(t->services.size(), 1u);
  const ServiceRoute& s = t->services[0];
  EXPECT_EQ(s.name, "chat");
  EXPECT_EQ(s.tenant, "t");
  ASSERT_EQ(s.hosts.size(), 1u);
  EXPECT_EQ(s.hosts[0], "chat.example.com");
  EXPECT_EQ(s.max_concurrency, 8);
  EXPECT_EQ(s.queue_max, 1000);
  EXPECT_EQ(s.queue_timeout_ms, 30000);
  ASSERT_EQ(s.revisions.size(), 2u);
  EXPECT_EQ(s.revisions[0].revision, 3);
  EXPECT_DOUBLE_EQ(s.revisions[0].percent, 90);
  ASSERT_EQ(s.revisions[0].replicas.size(), 1u);
  EXPECT_EQ(s.revisions[0].replicas[0].id, "123");
  EXPECT_EQ(s.revisions[0].replicas[0].address, "127.0.0.1:20001");
  EXPECT_TRUE(s.revisions[1].replicas.empty());
}

TEST(RouteTableTest, RoundTripsThroughItsJson) {
  Result<RouteTable> t = ParseRouteTable(kTable);
  ASSERT_TRUE(t.ok());
  Result<RouteTable> again = ParseRouteTable(RouteTableJson(*t));
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(RouteTableJson(*again), RouteTableJson(*t));
}

TEST(RouteTableTest, AnEmptyTableIsValid) {
  Result<RouteTable> t = ParseRouteTable(R"({"version": 0, "services": []})");
  ASSERT_TRUE(t.ok());
  EXPECT_TRUE(t->services.empty());
}

TEST(RouteTableTest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {R"([1])", ""},
      {R"({"version": "x"})", "version"},
      {R"({"services": {}})", "services"},
      {R"({"services": [{"tenant": "t"}]})", "services[0].name"},
      {R"({"services": [{"name": "a", "max_concurrency": -1}]})", "services[0].max_concurrency"},
      {R"({"services": [{"name": "a", "hosts": [""]}]})", "services[0].hosts[0]"},
      {R"({"services": [{"name": "a", "revisions": [{"revision": 1, "percent": 101}]}]})",
       "services[0].revisions[0].percent"},
      {R"({"services": [{"name": "a", "revisions": [{"replicas": [{"id": "1",
           "address": "nohost"}]}]}]})",
       "services[0].revisions[0].replicas[0].address"},
      {R"({"services": [{"name": "a", "revisions": [{"replicas": [{"address": "h:1"}]}]}]})",
       "services[0].revisions[0].replicas[0].id"},
      {R"({"services": [{"name": "a"}, {"name": "a"}]})", "services[1].name"},
      {R"({"services": [{"name": "a", "hosts": ["x.io"]}, {"name": "b", "hosts": ["X.io"]}]})",
       "services[1].hosts[0]"},
  };
  for (const Case& c : cases) {
    Result<RouteTable> t = ParseRouteTable(c.json);
    ASSERT_FALSE(t.ok()) << c.json;
    EXPECT_EQ(t.status().field(), c.field) << c.json << ": " << t.status().ToString();
  }
  EXPECT_FALSE(ParseRouteTable("not json").ok());
}

TEST(RouteTableTest, SplitsHostAndPort) {
  std::string host;
  int port = 0;
  ASSERT_TRUE(SplitHostPort("127.0.0.1:20001", &host, &port));
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_EQ(port, 20001);
  ASSERT_TRUE(SplitHostPort("[::1]:80", &host, &port));
  EXPECT_EQ(host, "::1");
  EXPECT_EQ(port, 80);
  ASSERT_TRUE(SplitHostPort("node-7.rack:8000", &host, &port));
  EXPECT_EQ(host, "node-7.rack");
  for (const char* bad :
       {"", "host", "host:", ":80", "host:0", "host:65536", "host:8x", "::1:80", "[::1]80"}) {
    EXPECT_FALSE(SplitHostPort(bad, &host, &port)) << bad;
  }
}

TEST(RouteTableTest, NormalizesHosts) {
  EXPECT_EQ(NormalizeHost("Chat.Example.COM:8080"), "chat.example.com");
  EXPECT_EQ(NormalizeHost("chat.example.com."), "chat.example.com");
  EXPECT_EQ(NormalizeHost("[::1]:80"), "[::1]");
  EXPECT_EQ(NormalizeHost("localhost"), "localhost");
}

}  // namespace
}  // namespace arbiter::gateway
