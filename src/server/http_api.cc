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
#include "common/server_list.h"
#include "net/http_params.h"
#include "net/http_server.h"
#include "server/lease_keeper.h"
#include "store/store.h"

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

// The control plane pinned by the request this thread serves (ControlPlaneRef::Pin).
thread_local std::shared_ptr<ControlPlane> tl_pinned;
thread_local const ControlPlaneRef* tl_pinned_by = nullptr;

// How many replaced control planes a follower keeps alive for streams that outlive their request.
constexpr size_t kRetiredControlPlanes = 3;

// The request's path with its query, as it came.
std::string PathWithQuery(const httplib::Request& req) {
  std::string out = req.path;
  char sep = '?';
  for (const auto& [k, v] : req.params) {
    out += sep;
    out += httplib::detail::encode_query_param(k) + "=" + httplib::detail::encode_query_param(v);
    sep = '&';
  }
  return out;
}

// Sends `req` (with its body read) to the leader at `leader` and copies its answer to `res`.
void Forward(const std::string& leader, const httplib::Request& req, httplib::Response& res) {
  httplib::Client client(leader);
  client.set_connection_timeout(5);
  client.set_read_timeout(130);
  client.set_write_timeout(30);
  client.set_tcp_nodelay(true);
  httplib::Request out;
  out.method = req.method;
  out.path = PathWithQuery(req);
  for (const auto& [k, v] : req.headers) {
    if (k == "Host" || k == "Content-Length" || k == "Transfer-Encoding" || k == "Connection" ||
        k == "REMOTE_ADDR" || k == "REMOTE_PORT" || k == "LOCAL_ADDR" || k == "LOCAL_PORT") {
      continue;
    }
    out.headers.emplace(k, v);
  }
  out.headers.emplace("X-Forwarded-For", req.remote_addr);
  out.body = req.body;
  auto answer = client.send(out);
  if (!answer) {
    res.status = 503;
    res.set_content(api::ErrorBody(Status(StatusCode::kUnavailable,
                                          fmt::format("the leader at {} does not answer ({}); "
                                                      "retry shortly",
                                                      leader, httplib::to_string(answer.error()))))
                        .dump(),
                    "application/json");
    res.set_header("Retry-After", "1");
    return;
  }
  res.status = answer->status;
  std::string type = "application/json";
  for (const auto& [k, v] : answer->headers) {
    if (k == "Content-Type") {
      type = v;
    } else if (k != "Content-Length" && k != "Transfer-Encoding" && k != "Connection" &&
               k != "Keep-Alive" && k != "Content-Encoding") {  // the body is decoded
      res.headers.emplace(k, v);
    }
  }
  res.set_content(answer->body, type.c_str());
}

}  // namespace

ControlPlaneRef::ControlPlaneRef(std::shared_ptr<ControlPlane> cp) : current_(std::move(cp)) {}

ControlPlane* ControlPlaneRef::get() const {
  if (tl_pinned_by == this && tl_pinned) return tl_pinned.get();
  std::lock_guard<std::mutex> lock(mu_);
  return current_.get();
}

std::shared_ptr<ControlPlane> ControlPlaneRef::shared() const {
  if (tl_pinned_by == this && tl_pinned) return tl_pinned;
  std::lock_guard<std::mutex> lock(mu_);
  return current_;
}

void ControlPlaneRef::Set(std::shared_ptr<ControlPlane> cp) {
  std::shared_ptr<ControlPlane> dropped;  // destroyed outside the lock
  std::lock_guard<std::mutex> lock(mu_);
  retired_.push_back(std::move(current_));
  current_ = std::move(cp);
  if (retired_.size() > kRetiredControlPlanes) {
    dropped = std::move(retired_.front());
    retired_.erase(retired_.begin());
  }
}

void ControlPlaneRef::Pin() const {
  std::lock_guard<std::mutex> lock(mu_);
  tl_pinned = current_;
  tl_pinned_by = this;
}

void ControlPlaneRef::Unpin() const {
  if (tl_pinned_by != this) return;
  tl_pinned.reset();
  tl_pinned_by = nullptr;
}

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

HttpApi::HttpApi(ControlPlane* cp, HttpOptions options)
    : HttpApi(std::shared_ptr<ControlPlane>(cp, [](ControlPlane*) {}), std::move(options)) {}

HttpApi::HttpApi(std::shared_ptr<ControlPlane> cp, HttpOptions options)
    : cp_(std::move(cp)), options_(std::move(options)) {
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
  http_->set_pre_routing_handler([this](const httplib::Request& req, httplib::Response&) {
    cp_.Pin();  // this request's control plane, until post-routing (ControlPlaneRef)
    if (!req.has_header("Content-Length") && !req.has_header("Transfer-Encoding") &&
        (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
         req.method == "DELETE")) {
      const_cast<httplib::Request&>(req).set_header("Content-Length", "0");  // not a const object
    }
    return httplib::Server::HandlerResponse::Unhandled;
  });
  http_->set_post_routing_handler(
      [this](const httplib::Request&, httplib::Response&) { cp_.Unpin(); });
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
    if (keeper_ != nullptr && ServeAsFollower(method, path, req, res, read, max_body)) {
      return observe();
    }
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

void HttpApi::SetLeadership(LeaseKeeper* keeper, store::Store* store, std::string self_url) {
  keeper_ = keeper;
  store_ = store;
  self_url_ = std::move(self_url);
  role_ = keeper != nullptr ? ServingRole::kFollower : ServingRole::kLeader;
}

bool HttpApi::ServeAsFollower(std::string_view method, const std::string& path,
                              const httplib::Request& req, httplib::Response& res,
                              const httplib::ContentReader* read, size_t max_body) {
  const ServingRole role = role_;
  if (role == ServingRole::kLeader) return false;
  const bool agent = path.starts_with("/api/v1/agent/");
  if (method == "GET" && !agent) return false;  // reads: from this server's own state
  const LeaderInfo leader = keeper_->info();
  if (role == ServingRole::kStarting || leader.leader_url.empty() ||
      leader.leader_url == self_url_) {
    SendError(res, Status(StatusCode::kUnavailable,
                          role == ServingRole::kStarting
                              ? "this server was just elected leader and is loading the state; "
                                "retry shortly"
                              : "no leader yet: the servers are electing one; retry shortly"));
    res.set_header("Retry-After", "1");
    return true;
  }
  if (agent) {
    // Agents talk to the leader directly: its URL in the header and in the error.
    SendError(
        res, Status(StatusCode::kUnavailable,
                    fmt::format("this server is a follower; the leader is {}", leader.leader_url)));
    json body = json::parse(res.body);
    body["error"]["leader"] = leader.leader_url;
    res.set_content(body.dump(), "application/json");
    res.set_header(kLeaderHeader, leader.leader_url);
    return true;
  }
  if (read != nullptr) {
    bool too_large = false;
    if (Status st = ReadBody(req, res, *read, max_body, &too_large); !st.ok()) {
      SendError(res, st);
      res.status = too_large ? 413 : 400;
      res.set_header("Connection", "close");
      return true;
    }
  }
  Forward(leader.leader_url, req, res);
  return true;
}

void HttpApi::AddLeadership(json* body) const {
  if (keeper_ == nullptr) {
    (*body)["role"] = "leader";
    (*body)["term"] = 0;
    (*body)["leader"] = self_url_;
    return;
  }
  const LeaderInfo info = keeper_->info();
  (*body)["role"] = role_ == ServingRole::kLeader ? "leader" : "follower";
  (*body)["term"] = info.term;
  (*body)["leader"] = info.leader_url;
}

Result<json> HttpApi::ServersJson() const {
  json servers = json::array();
  if (store_ != nullptr) {
    auto rows = store_->Servers();
    if (!rows.ok()) return rows.status();
    for (const store::ServerRecord& r : *rows) {
      servers.push_back({{"id", r.id},
                         {"url", r.url},
                         {"role", r.role},
                         {"term", r.term},
                         {"started_at_ms", r.started_at_ms},
                         {"last_seen_ms", r.last_seen_ms}});
    }
  }
  json leader = nullptr;
  if (keeper_ == nullptr) {
    leader = {{"url", self_url_}, {"term", 0}};
  } else if (const LeaderInfo info = keeper_->info(); !info.leader_url.empty()) {
    leader = {{"id", info.leader_id}, {"url", info.leader_url}, {"term", info.term}};
  }
  return json{{"servers", servers}, {"leader", leader}};
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

  route_info_.push_back({"GET", "/healthz",
                         "Liveness: the process serves requests; its role (leader or follower), "
                         "term and the leader's URL"});
  http_->Get("/healthz", [this](const httplib::Request& req, httplib::Response& res) {
    if (!req.params.empty()) {
      return SendError(res, InvalidArgument(req.params.begin()->first,
                                            "unknown query parameter; GET /healthz takes none"));
    }
    json body = {{"status", "ok"}};
    AddLeadership(&body);
    SendJson(res, 200, body);
  });
  route_info_.push_back({"GET", "/readyz",
                         "Readiness: the store is open and the state loaded; its role, term and "
                         "the leader's URL"});
  http_->Get("/readyz", [this](const httplib::Request& req, httplib::Response& res) {
    if (!req.params.empty()) {
      return SendError(res, InvalidArgument(req.params.begin()->first,
                                            "unknown query parameter; GET /readyz takes none"));
    }
    const bool ready = cp_->ready() && !stopping_;
    json body = {{"status", ready ? "ready" : "not ready"}};
    AddLeadership(&body);
    SendJson(res, ready ? 200 : 503, body);
  });
  route("GET", "/api/v1/servers", "/api/v1/servers",
        "The servers sharing the store (id, URL, role, term, last seen) and the leader",
        [this](const Principal&, const httplib::Request&, httplib::Response& res) {
          Reply(res, ServersJson());
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
  RegisterPlanRoutes(route);
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
    res.set_content(cp_->MetricsText() + HttpMetricsText() +
                        (keeper_ != nullptr ? keeper_->MetricsText() : std::string()),
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
