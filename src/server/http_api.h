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
class ContentReader;
class Server;
struct Request;
struct Response;
}  // namespace httplib

namespace arbiter::net {
class GuardedHttpServer;
}  // namespace arbiter::net

namespace arbiter::store {
class Store;
}  // namespace arbiter::store

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

class LeaseKeeper;

// The control plane the API serves, which a follower replaces with a fresher one every refresh
// (docs/operations.md, "Several servers"). A request pins the one current when it arrived
// (Pin/Unpin on its thread), so that a replaced one lives until the requests using it end;
// outside a request, get() is the current one.
class ControlPlaneRef {
 public:
  explicit ControlPlaneRef(std::shared_ptr<ControlPlane> cp);
  ControlPlane* get() const;
  ControlPlane* operator->() const { return get(); }
  operator ControlPlane*() const { return get(); }  // NOLINT: a drop-in for a raw pointer
  std::shared_ptr<ControlPlane> shared() const;
  // Replaces the current one; the last few replaced ones are kept a while longer for streams
  // that outlive their request.
  void Set(std::shared_ptr<ControlPlane> cp);
  void Pin() const;
  void Unpin() const;

 private:
  mutable std::mutex mu_;
  std::shared_ptr<ControlPlane> current_;               // guarded by mu_
  std::vector<std::shared_ptr<ControlPlane>> retired_;  // guarded by mu_
};

class HttpApi {
 public:
  HttpApi(ControlPlane* cp, HttpOptions options);
  HttpApi(std::shared_ptr<ControlPlane> cp, HttpOptions options);
  ~HttpApi();

  // Several servers on one store (RunServer with leader election): this server's role. A
  // follower answers reads from its own control plane, forwards every other request to the
  // leader (`keeper` knows it) and answers the agents' routes with 503 naming the leader; a
  // server that was just elected answers them with 503 until it has loaded the state and leads.
  enum class ServingRole { kFollower, kStarting, kLeader };
  void SetLeadership(LeaseKeeper* keeper, store::Store* store, std::string self_url);
  void SetRole(ServingRole role) { role_ = role; }
  // A follower's fresher control plane (see ControlPlaneRef).
  void SetControlPlane(std::shared_ptr<ControlPlane> cp) { cp_.Set(std::move(cp)); }

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
  // What-if replays of the recorded history (http_plan_api.cc).
  void RegisterPlanRoutes(const RouteFn& route);
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
  // A follower's part of a request (see SetLeadership): true when it answered it (forwarded it to
  // the leader, or refused it); false when this server serves it.
  bool ServeAsFollower(std::string_view method, const std::string& path,
                       const httplib::Request& req, httplib::Response& res,
                       const httplib::ContentReader* read, size_t max_body);
  // role, term and leader for /healthz and /readyz.
  void AddLeadership(nlohmann::json* body) const;
  // GET /api/v1/servers: the servers sharing the store, and the leader.
  Result<nlohmann::json> ServersJson() const;
  // The query of GET /api/v1/jobs; ListJobs checks its values against the caller's view.
  static Result<JobFilter> ParseJobFilter(const httplib::Request& req);
  void ServeMetrics(const httplib::Request& req, httplib::Response& res);
  // The HTTP server's own gauges and counters, in the text exposition format.
  std::string HttpMetricsText() const;

  ControlPlaneRef cp_;
  HttpOptions options_;
  LeaseKeeper* keeper_ = nullptr;  // null: a server alone on its store (always the leader)
  store::Store* store_ = nullptr;  // for GET /api/v1/servers
  std::string self_url_;           // this server's advertised URL
  std::atomic<ServingRole> role_{ServingRole::kLeader};
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
