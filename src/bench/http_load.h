// A closed-loop HTTP/1.1 load generator for the benchmarks: `connections` keep-alive connections
// driven from one thread with epoll, each with one request in flight, like wrk. A load generator
// that spends little CPU leaves the machine to the server it measures (the benchmarks run client
// and server on the same cores).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace arbiter::bench {

struct LoadTarget {
  std::string host = "127.0.0.1";  // an IPv4 address or a name getaddrinfo resolves
  int port = 8080;
};

// "http://HOST:PORT" (the path, if any, is ignored). false for anything else (https included).
bool ParseHttpUrl(const std::string& url, LoadTarget* out, std::string* error);

// One request's complete bytes: request line, headers (with Content-Length) and body.
std::string HttpRequestBytes(const LoadTarget& target, const std::string& method,
                             const std::string& path, const std::vector<std::string>& headers,
                             const std::string& body);

// A complete response at the start of `in`: its status, whether the server closes the connection,
// and the bytes it spans. 0 bytes: not complete yet; -1: not a response these clients read (no
// HTTP/1.x status line, or chunked).
struct HttpResponseHead {
  int status = 0;
  bool close = false;
  int64_t bytes = 0;
};
HttpResponseHead ParseHttpResponse(const std::string& in);

struct LoadResult {
  int64_t requests_ok = 0;           // answered with the expected status
  int64_t requests_failed = 0;       // another status, a broken connection or no answer in time
  std::vector<double> latencies_ms;  // of the requests that succeeded, in completion order
  std::vector<int64_t> ok_indices;   // which requests (by index) succeeded
  double seconds = 0;
  std::string first_error;
};

struct LoadOptions {
  int connections = 8;
  int64_t requests = 0;
  int expect_status = 201;
  int timeout_ms = 30000;  // per request
  // Requests sent first on the same connections and left out of the result (counts, latencies,
  // seconds): connections open and caches warm before the measured `requests` start.
  int64_t warmup = 0;
};

// Sends requests 0 .. requests-1 (the bytes of request i from `request_bytes(i)`), each as soon
// as a connection is free; a connection the server closes is opened again. Returns when every
// request has succeeded or failed.
LoadResult RunHttpLoad(const LoadTarget& target, const LoadOptions& options,
                       const std::function<const std::string&(int64_t)>& request_bytes);

// The same over several targets: connection i goes to targets[i % targets.size()] (round robin
// by connection, as a client spreading its connections over replicas does).
LoadResult RunHttpLoad(const std::vector<LoadTarget>& targets, const LoadOptions& options,
                       const std::function<const std::string&(int64_t)>& request_bytes);

}  // namespace arbiter::bench
