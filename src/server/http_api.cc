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

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  res.set_content(body.dump(), "application/json");
}

// A body that is JSON text already (the job routes write theirs without a tree).
void SendJsonText(httplib::Response& res, int status, std::string body) {
  res.status = status;
  res.body = std::move(body);
  res.set_header("Content-Type", "application/json");
}

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

Result<uint64_t> ParseId(const std::string& s, const char* field) {
  if (s.empty() || s.size() > 19) return InvalidArgument(field, "must be a job id");
  uint64_t v = 0;
  for (char c : s) {
    if (c < '0' || c > '9') return InvalidArgument(field, "must be a job id");
    v = v * 10 + static_cast<uint64_t>(c - '0');
  }
  return v;
}

}  // namespace

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
    return {{"tenant", "string", "only this tenant's jobs"},
            {"queue", "string", "only this queue's jobs"},
            {"state", "string", "only jobs in this state (pending, running, ...)"},
            {"user", "string", "only this user's jobs"},
            {"type", "string", "only jobs of this type (training, inference, ...)"},
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
            {"limit", "integer", "at most this many records (1-1000, default 100)"}};
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
            {"stream", "string", "stdout (default) or stderr"},
            {"follow", "boolean", "true: stream until the task ends"}};
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

void HttpApi::Register() {
  using Handler =
      std::function<void(const Principal&, const httplib::Request&, httplib::Response&)>;
  // Every authenticated route: token check, rate limit, then the handler.
  auto route = [this](const char* method, std::string path, std::string regex, std::string summary,
                      Handler h) {
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
                  max_body = MaxBodyBytes(path)](const httplib::Request& req,
                                                 httplib::Response& res,
                                                 const httplib::ContentReader* read) {
      const auto t0 = std::chrono::steady_clock::now();
      auto observe = [&] {
        latency->Observe(
            res.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      };
      auto p = cp_->Authenticate(Bearer(req));
      if (!p.ok()) {
        SendError(res, p.status());
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
          SendError(res, InvalidArgument(
                             name, fmt::format("unknown query parameter; {} {} takes {}", method,
                                               path, known.empty() ? "none" : known)));
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
          SendError(res, Status(StatusCode::kPermissionDenied,
                                "only admins may change the configuration"));
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
  };
  auto reply = [](httplib::Response& res, const Result<json>& r, int ok_status = 200) {
    if (!r.ok()) {
      SendError(res, r.status());
    } else {
      SendJson(res, ok_status, *r);
    }
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

  route("GET", "/api/v1/whoami", "/api/v1/whoami", "The caller's user, tenant and role",
        [](const Principal& p, const httplib::Request&, httplib::Response& res) {
          SendJson(
              res, 200,
              {{"user", p.user}, {"tenant", p.tenant}, {"role", std::string(RoleName(p.role))}});
        });

  // Jobs.
  route("POST", "/api/v1/jobs", "/api/v1/jobs", "Submit a job (Idempotency-Key header honoured)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto spec = api::ParseJobSubmission(req.body);
          if (!spec.ok()) return SendError(res, spec.status());
          bool created = false;
          auto r = cp_->SubmitJob(p, std::move(spec).value(),
                                  req.get_header_value("Idempotency-Key"), &created);
          if (!r.ok()) return SendError(res, r.status());
          res.set_header("Location", fmt::format("/api/v1/jobs/{}", r->id));
          SendJsonText(res, created ? 201 : 200, std::move(r->body));
        });
  route("POST", "/api/v1/jobs/batch", "/api/v1/jobs/batch",
        "Submit up to 1000 jobs in one durable batch, all or nothing: {\"jobs\": [job, ...]} "
        "answers {\"items\": [job, ...]} (Idempotency-Key header honoured: job i gets KEY#i)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto specs = api::ParseJobBatch(req.body);
          if (!specs.ok()) return SendError(res, specs.status());
          bool created = false;
          auto r = cp_->SubmitJobs(p, std::move(specs).value(),
                                   req.get_header_value("Idempotency-Key"), &created);
          if (!r.ok()) return SendError(res, r.status());
          SendJsonText(res, created ? 201 : 200, std::move(r).value());
        });
  route("GET", "/api/v1/jobs", "/api/v1/jobs",
        "List jobs; filters tenant, queue, state, user, type; cursor pagination (cursor, limit)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          JobFilter f;
          f.tenant = req.get_param_value("tenant");
          f.queue = req.get_param_value("queue");
          f.state = req.get_param_value("state");
          f.user = req.get_param_value("user");
          f.type = req.get_param_value("type");
          if (!f.state.empty() && !ParseJobState(f.state)) {
            return SendError(res,
                             InvalidArgument("state", fmt::format("unknown state '{}'", f.state)));
          }
          if (req.has_param("cursor")) {
            auto c = ParseId(req.get_param_value("cursor"), "cursor");
            if (!c.ok()) return SendError(res, c.status());
            f.after_id = *c;
          }
          if (req.has_param("limit")) {
            auto l = ParseId(req.get_param_value("limit"), "limit");
            if (!l.ok() || *l < 1 || *l > 1000) {
              return SendError(res, InvalidArgument("limit", "must be between 1 and 1000"));
            }
            f.limit = *l;
          }
          auto r = cp_->ListJobs(p, f);
          if (!r.ok()) return SendError(res, r.status());
          SendJsonText(res, 200, std::move(r).value());
        });
  route("GET", "/api/v1/jobs/{id}", R"(/api/v1/jobs/(\d+))", "Get a job",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          reply(res, cp_->GetJob(p, *id));
        });
  route("GET", "/api/v1/jobs/{id}/events", R"(/api/v1/jobs/(\d+)/events)",
        "A job's history of state changes with reasons",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          reply(res, cp_->JobEvents(p, *id));
        });
  route("GET", "/api/v1/jobs/{id}/why", R"(/api/v1/jobs/(\d+)/why)",
        "Why a job is pending: verdict code, message, position, estimated start",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto id = ParseId(req.matches[1], "id");
          if (!id.ok()) return SendError(res, id.status());
          reply(res, cp_->WhyPending(p, *id));
        });
  for (const char* action : {"cancel", "suspend", "resume", "retry"}) {
    route("POST", fmt::format("/api/v1/jobs/{{id}}/{}", action),
          fmt::format(R"(/api/v1/jobs/(\d+)/{})", action), fmt::format("{} a job", action),
          [this, reply, action](const Principal& p, const httplib::Request& req,
                                httplib::Response& res) {
            auto id = ParseId(req.matches[1], "id");
            if (!id.ok()) return SendError(res, id.status());
            reply(res, cp_->JobAction(p, *id, action));
          });
  }

  // Tenants, queues, users, tokens, priority classes.
  route("GET", "/api/v1/tenants", "/api/v1/tenants", "List tenants",
        [this, reply](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListTenants(p));
        });
  route("GET", "/api/v1/queues", "/api/v1/queues",
        "List queues with live usage: guaranteed, max, usage, borrowed, pending and running",
        [this, reply](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListQueues(p));
        });
  route("GET", "/api/v1/queues/{name}", R"(/api/v1/queues/([a-z0-9][a-z0-9-]*))", "Get a queue",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          reply(res, cp_->GetQueue(p, req.matches[1]));
        });
  route("GET", "/api/v1/users", "/api/v1/users", "List users",
        [this, reply](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListUsers(p));
        });
  route("POST", "/api/v1/users", "/api/v1/users", "Create a user {name, tenant, role}",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          if (!body->is_object()) return SendError(res, InvalidArgument("", "must be an object"));
          api::UserConfig u;
          for (auto& [k, v] : body->items()) {
            if (k != "name" && k != "tenant" && k != "role") {
              return SendError(res,
                               InvalidArgument(k, "unknown field; allowed: name, tenant, role"));
            }
            if (!v.is_string()) return SendError(res, InvalidArgument(k, "must be a string"));
          }
          u.name = body->value("name", "");
          u.tenant = body->value("tenant", p.tenant);
          u.role = body->value("role", "member");
          reply(res, cp_->CreateUser(p, u), 201);
        });
  route("POST", "/api/v1/tokens", "/api/v1/tokens",
        "Create a token {user, role?, node?, expires_in_seconds?}; node tokens name their node; "
        "the plain token is in the response only",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          if (!body->is_object()) return SendError(res, InvalidArgument("", "must be an object"));
          ControlPlane::TokenRequest t;
          for (auto& [k, v] : body->items()) {
            if (k == "expires_in_seconds") {
              // From a minute to ten years.
              if (!v.is_number_integer() || v.get<int64_t>() < 60 ||
                  v.get<int64_t>() > int64_t{10} * 366 * 86400) {
                return SendError(res, InvalidArgument(k,
                                                      "must be a whole number of seconds from "
                                                      "60 to 316224000 (ten years)"));
              }
              t.expires_in_ms = v.get<int64_t>() * 1000;
              continue;
            }
            if (k != "user" && k != "role" && k != "node") {
              return SendError(res, InvalidArgument(k,
                                                    "unknown field; allowed: user, role, node, "
                                                    "expires_in_seconds"));
            }
            if (!v.is_string()) return SendError(res, InvalidArgument(k, "must be a string"));
          }
          std::optional<Role> role;
          if (body->contains("role")) {
            role = ParseRole((*body)["role"].get<std::string>());
            if (!role) return SendError(res, InvalidArgument("role", "unknown role"));
          }
          t.user = body->value("user", p.user);
          t.role = role;
          t.node = body->value("node", "");
          reply(res, cp_->CreateToken(p, t), 201);
        });
  route("GET", "/api/v1/tokens", "/api/v1/tokens",
        "List tokens (never their secrets): a member or viewer its own, a tenant admin its "
        "tenant's, an admin all",
        [reply, this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListTokens(p), 200);
        });
  route("DELETE", "/api/v1/tokens/{id}", R"(/api/v1/tokens/([0-9a-f]+))",
        "Revoke a token: it stops working at once (one's own; a tenant admin its tenant's; an "
        "admin any)",
        [reply, this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          reply(res, cp_->RevokeToken(p, req.matches[1]), 200);
        });
  route("GET", "/api/v1/priority-classes", "/api/v1/priority-classes", "List priority classes",
        [this, reply](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListPriorityClasses(p));
        });

  // Nodes.
  route("GET", "/api/v1/nodes", "/api/v1/nodes", "List nodes",
        [this, reply](const Principal& p, const httplib::Request&, httplib::Response& res) {
          reply(res, cp_->ListNodes(p));
        });
  route("GET", "/api/v1/nodes/{name}", R"(/api/v1/nodes/([A-Za-z0-9._-]+))",
        "Get a node and the jobs on it",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          reply(res, cp_->GetNode(p, req.matches[1]));
        });
  for (const char* action : {"cordon", "drain", "uncordon"}) {
    route("POST", fmt::format("/api/v1/nodes/{{name}}/{}", action),
          fmt::format(R"(/api/v1/nodes/([A-Za-z0-9._-]+)/{})", action),
          fmt::format("{} a node", action),
          [this, reply, action](const Principal& p, const httplib::Request& req,
                                httplib::Response& res) {
            reply(res, cp_->NodeAction(p, req.matches[1], action));
          });
  }

  RegisterAgentRoutes(route);
  RegisterReportRoutes(route);

  // Configuration.
  route(
      "PUT", "/api/v1/config", "/api/v1/config",
      "Make the server match a YAML configuration; ?dry_run=true returns the diff only",
      [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
        auto c = api::ParseConfigYaml(req.body);
        if (!c.ok()) return SendError(res, c.status());
        auto dry_run = net::QueryBool(req, "dry_run");
        if (!dry_run.ok()) return SendError(res, dry_run.status());
        const bool dry = *dry_run;
        auto prune = net::QueryBool(req, "prune");
        if (!prune.ok()) return SendError(res, prune.status());
        auto applied = cp_->ApplyConfig(p, *c, dry, *prune);
        if (!applied.ok()) return SendError(res, applied.status());
        json changes = json::array();
        for (const api::ConfigChange& ch : applied->changes) {
          changes.push_back(
              {{"kind", ch.kind}, {"name", ch.name}, {"action", ch.action}, {"detail", ch.detail}});
        }
        json affected = json::array();
        for (const ControlPlane::AffectedJob& a : applied->affected) {
          affected.push_back({{"id", a.id},
                              {"tenant", a.tenant},
                              {"queue", a.queue},
                              {"user", a.user},
                              {"state", a.state},
                              {"because", a.because}});
        }
        SendJson(res, 200,
                 {{"dry_run", dry},
                  {"changes", changes},
                  {"affected_jobs", affected},
                  {"affected_total", applied->affected_total},
                  {"needs_prune", applied->affected_total > 0 && !*prune},
                  {"cancelled", applied->cancelled}});
      });
  route("GET", "/api/v1/config", "/api/v1/config", "The configuration as YAML",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          if (p.role != Role::kAdmin) {
            return SendError(res, Status(StatusCode::kPermissionDenied,
                                         "only admins may read the configuration"));
          }
          res.set_content(cp_->ConfigYaml(), "application/yaml");
        });

  // The audit log.
  route("GET", "/api/v1/audit", "/api/v1/audit",
        "The audit log (admins): records after=SEQ, at most limit (1-1000, default 100); "
        "next_after resumes",
        [this, reply](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          uint64_t after = 0;
          size_t limit = 100;
          if (req.has_param("after")) {
            auto a = ParseId(req.get_param_value("after"), "after");
            if (!a.ok())
              return SendError(res, InvalidArgument("after", "must be a sequence number"));
            after = *a;
          }
          if (req.has_param("limit")) {
            auto l = ParseId(req.get_param_value("limit"), "limit");
            if (!l.ok() || *l < 1 || *l > 1000) {
              return SendError(res, InvalidArgument("limit", "must be between 1 and 1000"));
            }
            limit = *l;
          }
          reply(res, cp_->ListAudit(p, after, limit));
        });

  // Server-sent events.
  route("GET", "/api/v1/events", "/api/v1/events",
        "Server-sent events of job and node changes (since=SEQ to resume)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          if (p.role == Role::kNode) {
            return SendError(
                res, Status(StatusCode::kPermissionDenied, "nodes may not read the event stream"));
          }
          uint64_t since = cp_->last_event_seq();
          if (req.has_param("since")) {
            auto s = ParseId(req.get_param_value("since"), "since");
            if (!s.ok()) return SendError(res, s.status());
            since = *s;
          }
          auto seq = std::make_shared<uint64_t>(since);
          const Principal who = p;
          res.set_header("Cache-Control", "no-cache");
          res.set_chunked_content_provider(
              "text/event-stream", [this, seq, who](size_t, httplib::DataSink& sink) {
                if (stopping_) return false;
                for (const ServerEvent& e : cp_->EventsAfter(*seq, 1000)) {
                  *seq = e.seq;
                  if (who.role != Role::kAdmin && !e.tenant.empty() && e.tenant != who.tenant) {
                    continue;
                  }
                  const std::string msg =
                      fmt::format("id: {}\nevent: {}\ndata: {}\n\n", e.seq, e.kind, e.data);
                  if (!sink.write(msg.data(), msg.size())) return false;
                }
                const std::string ping = ": keep-alive\n\n";
                return sink.write(ping.data(), ping.size()) && !stopping_;
              });
        });

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
    if (r.path != "/healthz" && r.path != "/readyz" && r.path != "/api/v1/openapi.json") {
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
