#include "gateway/headers.h"

#include <gtest/gtest.h>

namespace arbiter::gateway {
namespace {

TEST(HeadersTest, SplitsServiceTargets) {
  struct Case {
    const char* target;
    const char* name;
    const char* forwarded;
  };
  const Case cases[] = {
      {"/s/chat/v1/complete?x=1", "chat", "/v1/complete?x=1"},
      {"/s/chat/", "chat", "/"},
      {"/s/chat", "chat", "/"},
      {"/s/chat?x=1", "chat", "/?x=1"},
      {"/s/chat/a//b", "chat", "/a//b"},
  };
  for (const Case& c : cases) {
    std::string_view name;
    std::string forwarded;
    ASSERT_TRUE(SplitServiceTarget(c.target, &name, &forwarded)) << c.target;
    EXPECT_EQ(name, c.name) << c.target;
    EXPECT_EQ(forwarded, c.forwarded) << c.target;
  }
  for (const char* bad : {"/", "/s/", "/s//x", "/metrics", "/sx/chat", "s/chat"}) {
    std::string_view name;
    std::string forwarded;
    EXPECT_FALSE(SplitServiceTarget(bad, &name, &forwarded)) << bad;
  }
}

TEST(HeadersTest, RemovesHopByHopFieldsAndThoseConnectionNames) {
  http::fields f;
  f.set(http::field::connection, "keep-alive, X-Hop");
  f.set("X-Hop", "1");
  f.set(http::field::keep_alive, "timeout=5");
  f.set(http::field::transfer_encoding, "chunked");
  f.set(http::field::te, "trailers");
  f.set(http::field::upgrade, "h2c");
  f.set(http::field::proxy_connection, "keep-alive");
  f.set(http::field::trailer, "X-T");
  f.set("X-End-To-End", "kept");
  f.set(http::field::content_type, "text/plain");
  RemoveHopByHop(f);
  for (const char* gone : {"Connection", "X-Hop", "Keep-Alive", "Transfer-Encoding", "TE",
                           "Upgrade", "Proxy-Connection", "Trailer"}) {
    EXPECT_EQ(f.find(gone), f.end()) << gone;
  }
  EXPECT_EQ(f["X-End-To-End"], "kept");
  EXPECT_EQ(f[http::field::content_type], "text/plain");
}

TEST(HeadersTest, PreparesTheUpstreamRequest) {
  http::request<http::string_body> req{http::verb::post, "/s/chat/v1?x=1", 10};
  req.set(http::field::host, "gw.example.com:8000");
  req.set(http::field::connection, "close");
  req.set(http::field::expect, "100-continue");
  req.insert("X-Forwarded-For", "10.0.0.1");
  req.insert("X-Forwarded-For", "10.0.0.2");
  req.set(http::field::transfer_encoding, "chunked");
  req.body() = "hello";
  PrepareUpstreamRequest(req, "/v1?x=1", "192.168.1.9");
  EXPECT_EQ(req.target(), "/v1?x=1");
  EXPECT_EQ(req.version(), 11u);
  EXPECT_TRUE(req.keep_alive());
  EXPECT_EQ(req.find(http::field::connection), req.end());
  EXPECT_EQ(req.find(http::field::expect), req.end());
  EXPECT_EQ(req.find(http::field::transfer_encoding), req.end());
  EXPECT_EQ(req[http::field::content_length], "5");
  EXPECT_EQ(req["X-Forwarded-For"], "10.0.0.1, 10.0.0.2, 192.168.1.9");
  EXPECT_EQ(req.count("X-Forwarded-For"), 1u);
  EXPECT_EQ(req["X-Forwarded-Host"], "gw.example.com:8000");
  EXPECT_EQ(req["X-Forwarded-Proto"], "http");
  EXPECT_EQ(req[http::field::host], "gw.example.com:8000") << "the client's Host is kept";
}

TEST(HeadersTest, AGetWithoutBodyHasNoContentLength) {
  http::request<http::string_body> req{http::verb::get, "/s/chat/", 11};
  PrepareUpstreamRequest(req, "/", "127.0.0.1");
  EXPECT_EQ(req.find(http::field::content_length), req.end());
  EXPECT_EQ(req["X-Forwarded-For"], "127.0.0.1");
  EXPECT_EQ(req.find("X-Forwarded-Host"), req.end());
}

TEST(HeadersTest, PreparesTheClientsAnswerHeader) {
  http::response<http::string_body> res{http::status::ok, 11};
  res.set(http::field::connection, "close");
  res.set(http::field::keep_alive, "timeout=5");
  res.set(http::field::content_type, "application/json");
  PrepareClientResponseHeader(res.base(), 10, "3", "123");
  EXPECT_EQ(res.version(), 10u);
  EXPECT_EQ(res["X-Arbiter-Revision"], "3");
  EXPECT_EQ(res["X-Arbiter-Replica"], "123");
  EXPECT_EQ(res.find(http::field::connection), res.end());
  EXPECT_EQ(res.find(http::field::keep_alive), res.end());
  EXPECT_EQ(res[http::field::content_type], "application/json");
}

}  // namespace
}  // namespace arbiter::gateway
