// Who and what: whoami, tenants, queues, users, tokens, priority classes, the audit log.
#include <fmt/format.h>
#include <httplib.h>

#include <string>
#include <utility>

#include "api/config_codec.h"
#include "api/errors.h"
#include "api/job_codec.h"
#include "common/time.h"
#include "net/http_params.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// An audit search's time: RFC 3339 (or a date), milliseconds since the epoch, or a duration back
// from `now` ("90s", "30m", "24h", "7d", "2w").
Result<int64_t> ParseAuditTimeMs(const std::string& s, const char* field, int64_t now) {
  const Status bad = InvalidArgument(
      field, fmt::format("must be an RFC 3339 time (2026-11-10T08:00:00Z), milliseconds since the "
                         "epoch, or a duration such as 90s, 30m, 24h, 7d or 2w, got '{}'",
                         s));
  if (s.empty() || s.size() > 40) return bad;
  if (auto ms = ParseRfc3339Ms(s)) return *ms;
  const size_t digits = s.find_first_not_of("0123456789");
  if (digits == std::string::npos) {
    if (s.size() > 15) return bad;
    return std::stoll(s);
  }
  if (digits == 0 || digits + 1 != s.size() || digits > 6) return bad;
  const int64_t n = std::stoll(s.substr(0, digits));
  int64_t unit = 0;
  switch (s.back()) {
    case 's':
      unit = 1000;
      break;
    case 'm':
      unit = 60'000;
      break;
    case 'h':
      unit = 3'600'000;
      break;
    case 'd':
      unit = 86'400'000;
      break;
    case 'w':
      unit = 7 * 86'400'000LL;
      break;
    default:
      return bad;
  }
  if (n <= 0) return bad;
  return now - n * unit;
}

}  // namespace

void HttpApi::RegisterAccessRoutes(const RouteFn& route) {
  route("GET", "/api/v1/whoami", "/api/v1/whoami", "The caller's user, tenant and role",
        [](const Principal& p, const httplib::Request&, httplib::Response& res) {
          SendJson(
              res, 200,
              {{"user", p.user}, {"tenant", p.tenant}, {"role", std::string(RoleName(p.role))}});
        });

  // Tenants, queues, users, tokens, priority classes.
  route("GET", "/api/v1/tenants", "/api/v1/tenants", "List tenants",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListTenants(p));
        });
  route("GET", "/api/v1/queues", "/api/v1/queues",
        "List queues with live usage: guaranteed, max, usage, borrowed, pending and running",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListQueues(p));
        });
  route("GET", "/api/v1/queues/{name}", R"(/api/v1/queues/([a-z0-9][a-z0-9-]*))", "Get a queue",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->GetQueue(p, req.matches[1]));
        });
  route("GET", "/api/v1/users", "/api/v1/users", "List users",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListUsers(p));
        });
  route("POST", "/api/v1/users", "/api/v1/users", "Create a user {name, tenant, role}",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
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
          Reply(res, cp_->CreateUser(p, u), 201);
        });
  route("POST", "/api/v1/tokens", "/api/v1/tokens",
        "Create a token {user, role?, node?, expires_in_seconds?, scope?}; node tokens name "
        "their node; scope full (default) or read-only (GET and HEAD only); the plain token is "
        "in the response only",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
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
            if (k == "scope") {
              if (!v.is_string() || (v != "full" && v != "read-only")) {
                return SendError(res, InvalidArgument(k, "must be \"full\" or \"read-only\""));
              }
              t.read_only = v == "read-only";
              continue;
            }
            if (k != "user" && k != "role" && k != "node") {
              return SendError(res, InvalidArgument(k,
                                                    "unknown field; allowed: user, role, node, "
                                                    "expires_in_seconds, scope"));
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
          Reply(res, cp_->CreateToken(p, t), 201);
        });
  route("GET", "/api/v1/tokens", "/api/v1/tokens",
        "List tokens (never their secrets): a member or viewer its own, a tenant admin its "
        "tenant's, an admin all",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListTokens(p), 200);
        });
  route("DELETE", "/api/v1/tokens/{id}", R"(/api/v1/tokens/([0-9a-f]+))",
        "Revoke a token: it stops working at once (one's own; a tenant admin its tenant's; an "
        "admin any)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->RevokeToken(p, req.matches[1]), 200);
        });
  // Registry credentials (docs/config.md): the password goes in, never out.
  route("PUT", "/api/v1/registry-credentials", "/api/v1/registry-credentials",
        "Set a tenant's credential for a registry prefix {tenant?, registry, user, password} "
        "(tenant admins their tenant's, admins any); stored sealed, never returned",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          auto body = ParseJsonBody(req);
          if (!body.ok()) return SendError(res, body.status());
          if (!body->is_object()) return SendError(res, InvalidArgument("", "must be an object"));
          for (auto& [k, v] : body->items()) {
            if (k != "tenant" && k != "registry" && k != "user" && k != "password") {
              return SendError(res, InvalidArgument(k,
                                                    "unknown field; allowed: tenant, registry, "
                                                    "user, password"));
            }
            if (!v.is_string()) return SendError(res, InvalidArgument(k, "must be a string"));
          }
          Reply(res, cp_->SetRegistryCredential(
                         p, body->value("tenant", ""), body->value("registry", ""),
                         body->value("user", ""), body->value("password", "")));
        });
  route("GET", "/api/v1/registry-credentials", "/api/v1/registry-credentials",
        "A tenant's registry credentials (?tenant=; admins: all by default): registry, user, "
        "created; never the password",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->ListRegistryCredentials(
                         p, req.has_param("tenant") ? req.get_param_value("tenant") : ""));
        });
  route("DELETE", "/api/v1/registry-credentials", "/api/v1/registry-credentials",
        "Delete a tenant's credential for a registry (?registry=R&tenant=T; tenant admins their "
        "tenant's, admins any)",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          Reply(res, cp_->DeleteRegistryCredential(
                         p, req.has_param("tenant") ? req.get_param_value("tenant") : "",
                         req.has_param("registry") ? req.get_param_value("registry") : ""));
        });
  route("GET", "/api/v1/priority-classes", "/api/v1/priority-classes", "List priority classes",
        [this](const Principal& p, const httplib::Request&, httplib::Response& res) {
          Reply(res, cp_->ListPriorityClasses(p));
        });

  // The audit log.
  route("GET", "/api/v1/audit", "/api/v1/audit",
        "The audit log (admins; tenant admins: their tenant's records): records after=SEQ, at "
        "most limit (1-1000, default 100), filtered by since, until, actor, action and object; "
        "next_after resumes",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          store::AuditQuery q;
          if (req.has_param("after")) {
            auto a = ParseId(req.get_param_value("after"), "after");
            if (!a.ok())
              return SendError(res, InvalidArgument("after", "must be a sequence number"));
            q.after_seq = *a;
          }
          if (req.has_param("limit")) {
            auto l = ParseId(req.get_param_value("limit"), "limit");
            if (!l.ok() || *l < 1 || *l > 1000) {
              return SendError(res, InvalidArgument("limit", "must be between 1 and 1000"));
            }
            q.limit = *l;
          }
          const int64_t now = cp_->now();
          for (const char* field : {"since", "until"}) {
            if (!req.has_param(field)) continue;
            auto t = ParseAuditTimeMs(req.get_param_value(field), field, now);
            if (!t.ok()) return SendError(res, t.status());
            (std::string_view(field) == "since" ? q.since_ms : q.until_ms) = *t;
          }
          if (q.since_ms && q.until_ms && *q.until_ms <= *q.since_ms) {
            return SendError(res, InvalidArgument("until", "must be after since"));
          }
          for (auto [field, out] : {std::pair{"actor", &q.actor}, std::pair{"action", &q.action},
                                    std::pair{"object", &q.object}}) {
            if (!req.has_param(field)) continue;
            *out = req.get_param_value(field);
            if (out->empty() || out->size() > 256) {
              return SendError(res, InvalidArgument(field, "must be 1 to 256 characters"));
            }
          }
          Reply(res, cp_->ListAudit(p, std::move(q)));
        });
}

}  // namespace arbiter::server
