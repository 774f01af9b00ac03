#include "server/http_api.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/socket.h>

#include <chrono>
#include <functional>
#include <regex>

#include "api/config_codec.h"
#include "api/errors.h"
#include "api/job_codec.h"
#include "common/net.h"
#include "net/http_params.h"
#include "net/http_server.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

std::string Bearer(const httplib::Request& req) {
  const std::string h = req.get_header_value("Authorization");
  if (h.rfind("Bearer ", 0) == 0) return h.substr(7);
  return "";
}

// The most bytes a route's body may have: a configuration may be 8 MiB (kMaxConfigBytes), every
// other body 1 MiB (kMaxBodyBytes).
size_t MaxBodyBytes(std::string_view path) {
  return path == "/api/v1/config" ? api::kMaxConfigBytes : api::kMaxBodyBytes;
}

// Reads the body into req.body, at most `max` bytes: cpp-httplib checks its limit against the
// Content-Length only, and would read a chunked body whole into memory. An error says why;
// `*too_large` whether the body is over `max` (413) rather than unreadable (400).
Status ReadBody(const httplib::Request& req, const httplib::Response& res,
                const httplib::ContentReader& read, size_t max, bool* too_large) {
  std::string body;
  *too_large = false;
  const bool ok = read([&](const char* data, size_t n) {
    *too_large = body.size() + n > max;
    if (!*too_large) body.append(data, n);
    return !*too_large;
  });
  if (!ok) {
    *too_large = *too_large || res.status == 413;
    return InvalidArgument("", *too_large ? fmt::format("the body is larger than {} bytes", max)
                                          : "the body could not be read");
  }
  const_cast<httplib::Request&>(req).body = std::move(body);  // cpp-httplib's non-const object
  return Status::Ok();
}

}  // namespace

void HttpApi::SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

void HttpApi::SendJsonText(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.body = std::move(body);
  res.set_header("Content-Type", "application/json");
}

Result<uint64_t> HttpApi::ParseId(const std::string& s, const char* field) {
  if (s.empty() || s.size() > 19) return InvalidArgument(field, "must be a job id");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgument(field, "must be a job id");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

void HttpApi::SendError(httplib::Response& res, const Status& st) {
  res.status = api::HttpStatusFor(st.code());
  res.set_content(api::ErrorBody(st).dump(), "application/json");
}

Result<json> HttpApi::ParseJsonBody(const httplib::Request& req) {
  try {
    return json::parse(req.body);
  } catch (const std::exception& e) {
    return InvalidArgument("", fmt::format("the body is not valid JSON: {}", e.what()));
  }
}

std::vector<HttpApi::QueryParam> HttpApi::QueryParamsOf(std::string_view method,
                                                        std::string_view path) {
  const std::string key = fmt::format("{} {}", method, path);
  if (key == "GET /api/v1/jobs") {
    // A value the caller cannot see is a 400 naming the field and the values it may use.
    return {{"tenant", "string", "only these tenants' jobs (comma-separated)"},
            {"queue", "string", "only these queues' jobs (comma-separated; names or aliases)"},
            {"state", "string", "only jobs in these states (pending,running,...)"},
            {"user", "string", "only these users' jobs (comma-separated)"},
            {"type", "string", "only jobs of these types (training,service,...)"},
            {"q", "string",
             "only jobs whose name or command contains this text (any case; at most 200 "
             "characters)"},
            {"array", "integer", "only this job array's elements (the array's id)"},
            {"index", "integer", "only the element of this index (with array)"},
            {"active", "boolean", "true: only jobs that have not ended (or are still stopping)"},
            {"since", "string", "only jobs that had not ended before this RFC 3339 time"},
            {"until", "string", "only jobs submitted at or before this RFC 3339 time"},
            {"cursor", "string", "resume after this job id (next_cursor of the previous page)"},
            {"limit", "integer", "at most this many jobs (1-1000, default 100)"}};
  }
  if (key == "PUT /api/v1/config") {
    return {{"dry_run", "boolean", "true: answer the diff, change nothing"},
            {"prune", "boolean",
             "true: cancel the live jobs whose tenant, queue, priority class or configured node "
             "the configuration deletes (without it such a configuration is refused, 409)"}};
  }
  if (key == "GET /api/v1/audit") {
    return {{"after", "integer", "records after this sequence number"},
            {"limit", "integer", "at most this many records (1-1000, default 100)"},
            {"since", "string",
             "records at or after: RFC 3339, milliseconds since the epoch, or a duration back "
             "from now (90s, 30m, 24h, 7d, 2w)"},
            {"until", "string", "records before: as since"},
            {"actor", "string", "records of this user"},
            {"action", "string", "records of this action (job.cancel, token.create, ...)"},
            {"object", "string",
             "records of this target or under it: job/12 (the job), job/ (every job)"}};
  }
  if (key == "GET /api/v1/events") {
    return {{"since", "integer", "resume after this event sequence number (default: now)"}};
  }
  if (key == "GET /api/v1/agent/watch") {
    return {
        {"node", "string", "the node's name (required)"},
        {"version", "integer", "the assignment version the agent has"},
        {"wait_ms", "integer", "return after this long at most (default 10000, at most 60000)"}};
  }
  if (key == "GET /api/v1/jobs/{id}/logs") {
    return {{"task", "integer", "the task (default 0)"},
            {"stream", "string",
             "combined (stdout and stderr line by line, in the order written), stdout (the "
             "default) or stderr"},
            {"run", "integer",
             "only this run (the job's Nth admission), without separators; default: every run, "
             "each after a line '--- run N, after <why the last one ended> ---'"},
            {"follow", "boolean",
             "true: wait for the job to start, stream while it runs, into its next runs, "
             "until the job ends"}};
  }
  if (key == "GET /api/v1/webhooks/{id}/deliveries") {
    return {
        {"limit", "integer", "at most this many deliveries, newest first (1-1000, default 50)"}};
  }
  if (key == "GET /api/v1/services") {
    return {{"tenant", "string", "only this tenant's services"}};
  }
  if (key == "GET /api/v1/registry-credentials") {
    return {{"tenant", "string", "only this tenant's credentials (admins; others: their own)"}};
  }
  if (key == "DELETE /api/v1/registry-credentials") {
    return {{"registry", "string", "the registry prefix (required)"},
            {"tenant", "string", "the tenant (default: the caller's)"}};
  }
  if (key == "GET /api/v1/gateway/routes") {
    return {{"after", "integer", "the version the gateway has (answer at once when it differs)"},
            {"wait_ms", "integer",
             "wait this long at most for a change (default 0, at most "
             "60000)"}};
  }
  if (key == "GET /api/v1/reports/serving") {
    return {{"from", "string", "start: RFC 3339 time or date"},
            {"to", "string", "end: RFC 3339 time or date (default now)"},
            {"since", "string", "start as a duration before the end (7d, 12h); not with from"},
            {"service", "string", "only this service"},
            {"group_by", "string", "(not used by this report)"},
            {"step", "string", "bucket width as a duration (1d, 1h)"},
            {"format", "string", "json (default) or csv"}};
  }
  if (method == "GET" && path.rfind("/api/v1/reports/", 0) == 0) {
    return {{"from", "string", "start: RFC 3339 time or date"},
            {"to", "string", "end: RFC 3339 time or date (default now)"},
            {"since", "string", "start as a duration before the end (7d, 12h); not with from"},
            {"group_by", "string", "tenant, queue, user, type or gpu_model"},
            {"step", "string", "bucket width as a duration (1d, 1h)"},
            {"format", "string", "json (default) or csv"}};
  }
  return {};
}

HttpApi::HttpApi(ControlPlane* cp, HttpOptions options) : cp_(cp), options_(options) {
  net::HttpLimits limits;
  limits.header_timeout_ms = options_.header_timeout_ms;
  limits.body_timeout_ms = options_.body_timeout_ms;
  limits.max_headers = options_.max_headers;
  limits.max_header_bytes = options_.max_header_bytes;
  limits.max_connections_per_address = options_.connections_per_address;
  limits.initial_threads = std::min<size_t>(options_.threads, 8);
  limits.max_threads = options_.threads;
  limits.idle_thread_ms = options_.idle_thread_ms;
  http_ = std::make_unique<net::GuardedHttpServer>(limits);
  // cpp-httplib's own check of the Content-Length, at the largest route's cap; each route's own
  // cap (MaxBodyBytes) is applied as its body is read (Register).
  http_->set_payload_max_length(std::max(api::kMaxBodyBytes, api::kMaxConfigBytes));
  // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 6.3), but
  // cpp-httplib would wait for the connection to close to read one (curl -X POST waited for the
  // read timeout, then got a 400): such requests are given "Content-Length: 0" first.
  http_->set_pre_routing_handler([](const httplib::Request& req, httplib::Response&) {
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding") &&
        (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
         req.method == "DELETE")) {
      const_cast<httplib::Request&>(req).set_header("Content-Length", "0");  // not a const object
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_keep_alive_max_count(100000);
  // Small request/response pairs on keep-alive connections: without TCP_NODELAY, Nagle's algorithm
  // and delayed ACKs add ~40 ms to each exchange.
  http_->set_tcp_nodelay(true);
  // The listening socket: cpp-httplib listens with a backlog of 5, which drops the SYNs of many
  // clients connecting at once (each then waits a 1 s retransmission). Its fd is noted here and
  // its backlog raised once bound (Bind).
  http_->set_socket_options([this](socket_t sock) {
    SetListenSocketOptions(sock);  // not SO_REUSEPORT: a second server on this port is refused
    listen_fd_ = sock;             // the last one created: the one that bound
  });
  Register();
}

HttpApi::~HttpApi() { Stop(); }

Result<int> HttpApi::Bind(const std::string& host, int port) {
  int bound = port;
  if (port == 0) {
    bound = http_->bind_to_any_port(host);
  } else if (!http_->bind_to_port(host, port)) {
    bound = -1;
  }
  if (bound <= 0) {
    return Status(StatusCode::kUnavailable, fmt::format("cannot listen on {}:{}", host, port));
  }
  // listen() again on a listening socket only changes its backlog (capped by somaxconn).
  int accepting = 0;
  socklen_t len = sizeof(accepting);
  if (listen_fd_ >= 0 && getsockopt(listen_fd_, SOL_SOCKET, SO_ACCEPTCONN, &accepting, &len) == 0 &&
      accepting) {
    ::listen(listen_fd_, 4096);
  }
  return bound;
}

void HttpApi::Serve() { http_->listen_after_bind(); }

void HttpApi::Stop() {
  if (stopping_.exchange(true)) return;
  cp_->WakeAll();
  http_->stop();
}

bool HttpApi::AllowRate(const std::string& token_id) {
  if (options_.rate_limit_per_second <= 0) return true;
  const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
  std::lock_guard<std::mutex> lock(rate_mu_);
  Bucket& b = buckets_[token_id];
  const double burst = options_.rate_limit_per_second * 2;
  if (b.last_ns == 0) b.tokens = burst;
  b.tokens = std::min(burst, b.tokens + static_cast<double>(now - b.last_ns) * 1e-9 *
                                            options_.rate_limit_per_second);
  b.last_ns = now;
  if (b.tokens < 1) return false;
  b.tokens -= 1;
  return true;
}

Result<Principal> HttpApi::Caller(const httplib::Request& req, std::string_view method) {
  const std::string cookie = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
  if (req.has_header("Authorization") || cookie.empty()) return cp_->Authenticate(Bearer(req));
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const auto session = sessions_.Use(cookie, now_ms);
  if (!session) {
    return Status(StatusCode::kUnauthenticated,
                  "the console session has ended (signed out, expired or the server restarted): "
                  "sign in again");
  }
  // A page of another site cannot read the CSRF token, so it cannot send it: a mutation without
  // it is refused even though the browser attached the cookie.
  if (method != "GET") {
    const std::string sent = req.get_header_value(kCsrfHeader);
    if (sent.size() != session->csrf.size() || !SecureEquals(sent, session->csrf)) {
      return Status(StatusCode::kPermissionDenied,
                    "a change through a console session needs its CSRF token in the X-CSRF-Token "
                    "header (returned by POST and GET /api/v1/session)",
                    kCsrfHeader);
    }
  }
  auto p = cp_->Authenticate(session->token);
  if (!p.ok()) sessions_.End(cookie);  // the token was revoked or expired: so is its session
  return p;
}

// Every authenticated route: token check, rate limit, query parameters, then the handler.
void HttpApi::AddRoute(const char* method, std::string path, std::string regex, std::string summary,
                       RouteHandler h) {
  std::vector<QueryParam> params = QueryParamsOf(method, path);
  route_info_.push_back({method, path, summary, params});
  // The latency histogram is labelled with the route's template, never the raw path.
  ServerMetrics::Route* latency = cp_->metrics().RouteHandle(method, path);
  // Only an admin may send a configuration, and its body (8 MiB of YAML to parse) is worth
  // reading for nobody else: other callers are refused before a byte of it is read.
  const bool admin_body = std::string_view(method) == "PUT" && path == "/api/v1/config";
  // `read` is the body's reader (POST, PUT) or null. The order is the point: the token, the
  // rate limit, the query parameters and any role the body needs are checked before the body
  // is read, so an unauthorised caller never costs a body's worth of memory or parsing.
  auto serve = [this, h, method, latency, params = std::move(params), path, admin_body,
                max_body = MaxBodyBytes(path)](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader* read) {
    const auto t0 = std::chrono::steady_clock::now();
    auto observe = [&] {
      latency->Observe(
          res.status, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    };
    auto p = Caller(req, method);
    if (!p.ok()) {
      SendError(res, p.status());
      return observe();
    }
    p->source = req.remote_addr;
    // A read-only token reads: every other call is refused before the handler (signing a console
    // session out ends the session, not anything in the cluster).
    if (p->read_only && std::string_view(method) != "GET" && path != "/api/v1/session") {
      SendError(res, Status(StatusCode::kPermissionDenied,
                            fmt::format("this token is read-only: it may only read (GET and "
                                        "HEAD), not {} {}; use a token with scope full",
                                        method, path)));
      cp_->Audit(*p, fmt::format("{} {}", method, req.path), req.path, "denied: read-only token");
      return observe();
    }
    if (!AllowRate(p->token_id)) {
      SendError(res, Status(StatusCode::kResourceExhausted,
                            "rate limit exceeded for this token; retry shortly"));
      res.set_header("Retry-After", "1");
      return observe();
    }
    for (const auto& [name, value] : req.params) {
      if (std::none_of(params.begin(), params.end(),
                       [&](const QueryParam& q) { return q.name == name; })) {
        std::string known;
        for (const QueryParam& q : params) known += (known.empty() ? "" : ", ") + q.name;
        SendError(res,
                  InvalidArgument(name, fmt::format("unknown query parameter; {} {} takes {}",
                                                    method, path, known.empty() ? "none" : known)));
        return observe();
      }
    }
    // Booleans are exactly true or false on every route (net::QueryBool), checked before the
    // handler so that no route can read a misspelt one as false.
    for (const QueryParam& q : params) {
      if (q.type != "boolean") continue;
      if (auto b = net::QueryBool(req, q.name); !b.ok()) {
        SendError(res, b.status());
        return observe();
      }
    }
    auto audit_denied = [&] {
      if (std::string_view(method) != "GET" && res.status == 403) {
        cp_->Audit(*p, fmt::format("{} {}", method, req.path), req.path, "denied");
      }
    };
    if (read != nullptr) {
      if (admin_body && p->role != Role::kAdmin) {
        SendError(
            res, Status(StatusCode::kPermissionDenied, "only admins may change the configuration"));
        res.set_header("Connection", "close");  // the unread body is not worth draining
        audit_denied();
        return observe();
      }
      bool too_large = false;
      if (Status st = ReadBody(req, res, *read, max_body, &too_large); !st.ok()) {
        SendError(res, st);
        res.status = too_large ? 413 : 400;
        res.set_header("Connection", "close");
        return observe();
      }
    }
    h(*p, req, res);
    audit_denied();
    observe();
  };
  auto wrapped = [serve](const httplib::Request& req, httplib::Response& res) {
    serve(req, res, nullptr);
  };
  auto with_body = [serve](const httplib::Request& req, httplib::Response& res,
                           const httplib::ContentReader& read) { serve(req, res, &read); };
  const std::string m = method;
  if (m == "GET") http_->Get(regex, wrapped);
  if (m == "POST") http_->Post(regex, with_body);
  if (m == "PUT") http_->Put(regex, with_body);
  if (m == "DELETE") http_->Delete(regex, wrapped);
}

void HttpApi::Reply(httplib::Response& res, const Result<json>& r, int ok_status) {
  if (!r.ok()) {
    SendError(res, r.status());
  } else {
    SendJson(res, ok_status, *r);
  }
}

void HttpApi::Register() {
  const RouteFn route = [this](const char* method, std::string path, std::string regex,
                               std::string summary, RouteHandler h) {
    AddRoute(method, std::move(path), std::move(regex), std::move(summary), std::move(h));
  };

  route_info_.push_back({"GET", "/healthz", "Liveness: the process serves requests"});
  http_->Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, {{"status", "ok"}});
  });
  route_info_.push_back({"GET", "/readyz", "Readiness: the store is open and the state loaded"});
  http_->Get("/readyz", [this](const httplib::Request&, httplib::Response& res) {
    const bool ready = cp_->ready() && !stopping_;
    SendJson(res, ready ? 200 : 503, {{"status", ready ? "ready" : "not ready"}});
  });
  route_info_.push_back({"GET", "/api/v1/openapi.json", "This document"});
  http_->Get("/api/v1/openapi.json", [this](const httplib::Request&, httplib::Response& res) {
    SendJson(res, 200, OpenApi());
  });

  route_info_.push_back({"GET", "/metrics",
                         "Prometheus metrics (text format): an admin token or the "
                         "--metrics-token-file secret; no token with --metrics-public"});
  http_->Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
    ServeMetrics(req, res);
  });

  RegisterJobRoutes(route);
  RegisterAccessRoutes(route);
  RegisterClusterRoutes(route);
  RegisterAgentRoutes(route);
  RegisterLogRoutes(route);
  RegisterReportRoutes(route);
  RegisterServiceRoutes(route);
  RegisterWebhookRoutes(route);
  RegisterConsoleRoutes(route);
  RegisterLoginRoutes();

  http_->set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, Status(StatusCode::kNotFound,
                            fmt::format("no route for {} {}", req.method, req.path)));
    } else if (res.status == 413) {
      SendError(res, InvalidArgument("", fmt::format("the body is larger than {} bytes",
                                                     MaxBodyBytes(req.path))));
      res.status = 413;
    } else {
      res.set_content(
          api::ErrorBody(Status(StatusCode::kInvalidArgument, fmt::format("HTTP {}", res.status)))
              .dump(),
          "application/json");
    }
  });
}

// Metrics are cluster-wide (every tenant's queues and usage), so a tenant's token may not read
// them, as it may not read another tenant's objects; Prometheus gets an admin token, or better the
// dedicated scrape secret (`authorization: credentials_file` in its scrape config).
void HttpApi::ServeMetrics(const httplib::Request& req, httplib::Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string bearer = Bearer(req);
  std::string rate_key = "metrics";
  Status denied = Status::Ok();
  if (options_.metrics_public) {
    rate_key = "";
  } else if (!options_.metrics_token.empty() && !bearer.empty() &&
             bearer.size() == options_.metrics_token.size() &&
             SecureEquals(bearer, options_.metrics_token)) {
    // the scrape secret
  } else if (auto p = cp_->Authenticate(bearer); !p.ok()) {
    denied = p.status();
  } else if (p->role != Role::kAdmin) {
    denied = Status(StatusCode::kPermissionDenied,
                    "metrics cover every tenant: they need an admin token or the server's metrics "
                    "token (--metrics-token-file)");
  } else {
    rate_key = p->token_id;
  }
  if (denied.ok() && !rate_key.empty() && !AllowRate(rate_key)) {
    denied = Status(StatusCode::kResourceExhausted, "rate limit exceeded; retry shortly");
    res.set_header("Retry-After", "1");
  }
  if (!denied.ok()) {
    SendError(res, denied);
  } else {
    res.status = 200;
    res.set_content(cp_->MetricsText() + HttpMetricsText(),
                    "text/plain; version=0.0.4; charset=utf-8");
  }
  cp_->metrics().HttpRequest(
      "GET", "/metrics", res.status,
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
}

std::string HttpApi::HttpMetricsText() const {
  const net::HttpServerStats& s = http_->stats();
  std::string out;
  auto gauge = [&out](const char* name, const char* help, int64_t v) {
    out += fmt::format("# HELP {0} {1}\n# TYPE {0} gauge\n{0} {2}\n", name, help, v);
  };
  gauge("arbiter_http_threads", "HTTP server threads now (they exit after some idle time)",
        s.threads.load());
  gauge("arbiter_http_connections", "Open HTTP connections", s.connections.load());
  gauge("arbiter_log_followers", "Task log requests streaming now", log_followers_.load());
  out +=
      "# HELP arbiter_http_refused_total Requests and connections refused before routing, by "
      "reason\n# TYPE arbiter_http_refused_total counter\n";
  const std::pair<const char*, int64_t> refused[] = {
      {"header_timeout", s.header_timeouts.load()},
      {"body_timeout", s.body_timeouts.load()},
      {"headers_too_large", s.headers_too_large.load()},
      {"connections_per_address", s.address_limited.load()}};
  for (const auto& [reason, n] : refused) {
    out += fmt::format("arbiter_http_refused_total{{reason=\"{}\"}} {}\n", reason, n);
  }
  return out;
}

json HttpApi::OpenApi() const {
  json paths = json::object();
  for (const RouteInfo& r : route_info_) {
    std::string m = r.method;
    std::transform(m.begin(), m.end(), m.begin(), ::tolower);
    json op = {
        {"summary", r.summary},
        {"responses",
         {{"200", {{"description", "OK"}}},
          {"4XX", {{"description", "Error: {\"error\": {\"code\", \"message\", \"field\"}}"}}}}}};
    if (!r.open && r.path != "/healthz" && r.path != "/readyz" &&
        r.path != "/api/v1/openapi.json") {
      op["security"] = json::array({{{"bearer", json::array()}}});
    }
    json params = json::array();
    for (const char* name : {"id", "name"}) {
      if (r.path.find(std::string("{") + name + "}") != std::string::npos) {
        params.push_back(
            {{"name", name}, {"in", "path"}, {"required", true}, {"schema", {{"type", "string"}}}});
      }
    }
    for (const QueryParam& q : r.params) {
      params.push_back({{"name", q.name},
                        {"in", "query"},
                        {"required", false},
                        {"description", q.description},
                        {"schema", {{"type", q.type}}}});
    }
    if (!params.empty()) op["parameters"] = params;
    paths[r.path][m] = op;
  }
  return {
      {"openapi", "3.0.3"},
      {"info", {{"title", "Arbiter API"}, {"version", "v1"}}},
      {"components", {{"securitySchemes", {{"bearer", {{"type", "http"}, {"scheme", "bearer"}}}}}}},
      {"paths", paths}};
}

}  // namespace arbiter::server
