// HttpApi: the REST API (/api/v1, JSON) over cpp-httplib, routed to the ControlPlane.
//
// One route table drives both the server and the OpenAPI document (/api/v1/openapi.json), so the
// document always lists exactly the routes that exist. Every error is an HTTP 4xx/5xx with a body
// {"error": {"code", "message", "field"}}.
//
// Threads: cpp-httplib's pool serves requests; handlers only call ControlPlane (thread-safe).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/result.h"
#include "server/console_sessions.h"
#include "server/control_plane.h"
#include "server/login_limiter.h"

namespace httplib {
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace arbiter::net {
class GuardedHttpServer;
}  // namespace arbiter::net

namespace arbiter::server {

struct HttpOptions {
  // The most HTTP threads. Each open connection (a keep-alive client, an agent's long-poll watch)
  // holds one while open; they start as connections arrive (net::ElasticThreadPool).
  size_t threads = 2048;
  // Slow and greedy clients (net::GuardedHttpServer): a request's line and headers must arrive
  // within header_timeout_ms, its body within body_timeout_ms after them; at most max_headers
  // headers of max_header_bytes in all; at most connections_per_address open connections per client
  // address (0: no limit). Threads beyond the first few exit after idle_thread_ms idle.
  int64_t header_timeout_ms = 10000;
  int64_t body_timeout_ms = 120000;
  size_t max_headers = 100;
  size_t max_header_bytes = 64 * 1024;
  size_t connections_per_address = 512;
  int64_t idle_thread_ms = 60000;
  // Per-token requests per second (token bucket, burst = 2 s worth); 0: unlimited.
  double rate_limit_per_second = 2000;
  // The built-in node (--local-node) and its work folder, whose task logs the API reads directly.
  std::string local_node;
  std::string local_work_dir;
  // GET /metrics: readable without a token (metrics_public), else with an admin token or, when
  // not empty, this dedicated scrape secret (which opens nothing else).
  bool metrics_public = false;
  std::string metrics_token;
};

// The console session's cookie and the header that carries its CSRF token.
inline constexpr const char* kSessionCookie = "arbiter_session";
inline constexpr const char* kCsrfHeader = "X-CSRF-Token";

class HttpApi {
 public:
  HttpApi(ControlPlane* cp, HttpOptions options);
  ~HttpApi();

  // Binds host:port (0: any free port) and returns the port.
  Result<int> Bind(const std::string& host, int port);
  // Serves until Stop(); call after Bind.
  void Serve();
  void Stop();

  // The OpenAPI 3 document of every route.
  nlohmann::json OpenApi() const;

  // A query parameter a route takes (QueryParamsOf): in the OpenAPI document, and any other is
  // refused with 400 naming it, so that a misspelt filter never silently returns everything.
  struct QueryParam {
    std::string name;
    std::string type;  // OpenAPI schema type: string, integer, boolean
    std::string description;
  };
  struct RouteInfo {
    std::string method;
    std::string path;  // OpenAPI form: /api/v1/jobs/{id}
    std::string summary;
    std::vector<QueryParam> params = {};
    bool open = false;  // needs no token (the OpenAPI document lists no security for it)
  };
  static std::vector<QueryParam> QueryParamsOf(std::string_view method, std::string_view path);
  const std::vector<RouteInfo>& routes() const { return route_info_; }

 private:
  using RouteHandler =
      std::function<void(const Principal&, const httplib::Request&, httplib::Response&)>;
  using RouteFn = std::function<void(const char* method, std::string path, std::string regex,
                                     std::string summary, RouteHandler handler)>;
  void Register();
  // One authenticated route: the token, the rate limit, the query parameters and any role the
  // body needs are checked before the body is read, then `handler` runs.
  void AddRoute(const char* method, std::string path, std::string regex, std::string summary,
                RouteHandler handler);
  // Route tables by resource, each in its own file.
  void RegisterJobRoutes(const RouteFn& route);      // http_jobs_api.cc: jobs, the event stream
  void RegisterAccessRoutes(const RouteFn& route);   // http_access_api.cc: users, tokens, audit
  void RegisterClusterRoutes(const RouteFn& route);  // http_cluster_api.cc: nodes, configuration
  // The node agents' routes (http_agent_api.cc).
  void RegisterAgentRoutes(const RouteFn& route);
  // A job's task logs: read from the built-in node, proxied from agents (http_logs_api.cc).
  void RegisterLogRoutes(const RouteFn& route);
  // The reports' routes (http_reports_api.cc).
  void RegisterReportRoutes(const RouteFn& route);
  // Services and the gateways' routes and stats (http_services_api.cc).
  void RegisterServiceRoutes(const RouteFn& route);
  // Webhooks and their delivery logs (http_webhooks_api.cc).
  void RegisterWebhookRoutes(const RouteFn& route);

  // The web console (http_console_api.cc): its pages and assets, and signing in and out.
  void RegisterConsoleRoutes(const RouteFn& route);
  // POST /api/v1/session: an API token in, a session cookie and a CSRF token out.
  void SignIn(const httplib::Request& req, httplib::Response& res);
  // POST /api/v1/login/ldap (http_login_api.cc): a directory user's name and password in, an
  // API token out.
  void RegisterLoginRoutes();
  void LoginLdap(const httplib::Request& req, httplib::Response& res);

  // Who calls: the bearer token of the Authorization header, else the console session of the
  // cookie, whose CSRF token must come in X-CSRF-Token on anything but a GET.
  Result<Principal> Caller(const httplib::Request& req, std::string_view method);

  bool AllowRate(const std::string& token_id);
  // Shared by the route files: the error body and status of `st`; a JSON body or a 400.
  static void SendError(httplib::Response& res, const Status& st);
  static Result<nlohmann::json> ParseJsonBody(const httplib::Request& req);
  static void SendJson(httplib::Response& res, int status, const nlohmann::json& body);
  // A body that is JSON text already (the job routes write theirs without a tree).
  static void SendJsonText(httplib::Response& res, int status, std::string body);
  // The answer of a control-plane call: its JSON with ok_status, or its error.
  static void Reply(httplib::Response& res, const Result<nlohmann::json>& r, int ok_status = 200);
  static Result<uint64_t> ParseId(const std::string& s, const char* field);
  // The query of GET /api/v1/jobs; ListJobs checks its values against the caller's view.
  static Result<JobFilter> ParseJobFilter(const httplib::Request& req);
  void ServeMetrics(const httplib::Request& req, httplib::Response& res);
  // The HTTP server's own gauges and counters, in the text exposition format.
  std::string HttpMetricsText() const;

  ControlPlane* cp_;
  HttpOptions options_;
  std::unique_ptr<net::GuardedHttpServer> http_;
  std::atomic<int64_t> log_followers_{0};  // log requests streaming now
  std::vector<RouteInfo> route_info_;
  int listen_fd_ = -1;  // the listening socket, once created
  std::atomic<bool> stopping_{false};
  struct Bucket {
    double tokens = 0;
    int64_t last_ns = 0;
  };
  ConsoleSessions sessions_;
  LoginLimiter login_limiter_;  // directory sign-ins: against guessing passwords
  std::mutex rate_mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace arbiter::server
