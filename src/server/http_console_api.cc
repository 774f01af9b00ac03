// The web console (docs/console.md): its page and assets, served from the binary, and the session
// routes that trade an API token for an HttpOnly, SameSite=Strict cookie and a CSRF token.
#include <fmt/format.h>
#include <httplib.h>

#include <chrono>
#include <string>
#include <vector>

#include "net/http_server.h"
#include "server/console_assets.h"
#include "server/http_api.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// The pages are the console's own script's work: nothing but this origin is loaded, no frame may
// hold them, and no inline script runs.
// `connect` adds origins the script may call: the identity provider's token endpoint, for the
// console's SSO sign-in (docs/identity.md).
void SetPageHeaders(httplib::Response& res, const std::vector<std::string>& connect = {}) {
  std::string connect_src = "'self'";
  for (const std::string& o : connect) connect_src += " " + o;
  res.set_header("Content-Security-Policy",
                 fmt::format("default-src 'self'; script-src 'self'; style-src 'self'; img-src "
                             "'self' data:; connect-src {}; base-uri 'none'; form-action 'self'; "
                             "frame-ancestors 'none'",
                             connect_src));
  res.set_header("X-Content-Type-Options", "nosniff");
  res.set_header("X-Frame-Options", "DENY");
  res.set_header("Referrer-Policy", "no-referrer");
  res.set_header("Cache-Control", "no-cache");
}

void ServeAsset(const ConsoleAsset& a, const httplib::Request& req, httplib::Response& res,
                const std::vector<std::string>& connect = {}) {
  SetPageHeaders(res, connect);
  res.set_header("ETag", std::string(a.etag));
  if (req.get_header_value("If-None-Match") == a.etag) {
    res.status = 304;
    return;
  }
  res.status = 200;
  res.set_content(a.body.data(), a.body.size(), std::string(a.content_type));
}

// Secure when the request came through a TLS proxy that says so; the server itself speaks HTTP.
std::string CookieAttributes(const httplib::Request& req) {
  std::string attrs = "Path=/; HttpOnly; SameSite=Strict";
  if (req.get_header_value("X-Forwarded-Proto") == "https") attrs += "; Secure";
  return attrs;
}

json SessionJson(const Principal& p) {
  return {{"user", p.user},
          {"tenant", p.tenant},
          {"role", std::string(RoleName(p.role))},
          {"read_only", p.read_only}};
}

}  // namespace

void HttpApi::RegisterConsoleRoutes(const RouteFn& route) {
  // The console's pages: each is a URL a person can share; the script shows the one asked for.
  route_info_.push_back({"GET",
                         "/",
                         "The web console (its pages /overview, /jobs, /jobs/{id}, /queues, "
                         "/nodes, /services, /reports, /admin serve the same page)",
                         {},
                         true});
  const auto page = [this](const httplib::Request& req, httplib::Response& res) {
    const ConsoleAsset* index = FindConsoleAsset("/index.html");
    if (index == nullptr) {
      SendError(res, Status(StatusCode::kNotFound, "this binary was built without the console"));
      return;
    }
    ServeAsset(*index, req, res, cp_->ConsoleOrigins());
  };
  http_->Get("/", page);
  http_->Get(R"(/(overview|jobs|queues|nodes|services|reports|admin|sign-in)(/[A-Za-z0-9._-]+)?)",
             page);
  http_->Get(R"(/assets/[A-Za-z0-9._-]+)", [](const httplib::Request& req, httplib::Response& res) {
    const ConsoleAsset* a = FindConsoleAsset(req.path);
    if (a == nullptr) {
      SendError(res, Status(StatusCode::kNotFound, fmt::format("no console asset {}", req.path)));
      return;
    }
    ServeAsset(*a, req, res);
  });

  // How to sign in (docs/identity.md): needs no token, since its reader has none yet.
  route_info_.push_back({"GET",
                         "/api/v1/auth/config",
                         "How clients sign in: the OIDC issuer, client id and endpoints (null "
                         "when OIDC is not configured), and whether LDAP is",
                         {},
                         true});
  http_->Get("/api/v1/auth/config", [this](const httplib::Request& req, httplib::Response& res) {
    if (!req.params.empty()) {
      return SendError(res, InvalidArgument(req.params.begin()->first,
                                            "unknown query parameter; GET /api/v1/auth/config "
                                            "takes none"));
    }
    res.set_header("Cache-Control", "no-store");
    SendJson(res, 200, cp_->AuthConfig());
  });

  route_info_.push_back(
      {"POST",
       "/api/v1/session",
       "Sign in to the console: {\"token\": API token or OIDC JWT} in, an HttpOnly session "
       "cookie and {\"csrf_token\"} out (node tokens are refused)",
       {},
       true});
  http_->Post("/api/v1/session",
              [this](const httplib::Request& req, httplib::Response& res) { SignIn(req, res); });

  route("GET", "/api/v1/session", "/api/v1/session",
        "The caller's user, tenant and role; through a console session also its CSRF token",
        [this](const Principal& p, const httplib::Request& req, httplib::Response& res) {
          json out = SessionJson(p);
          out["session"] = false;
          const std::string cookie = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
          if (!req.has_header("Authorization") && !cookie.empty()) {
            const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::steady_clock::now().time_since_epoch())
                                       .count();
            if (auto s = sessions_.Use(cookie, now_ms)) {
              out["session"] = true;
              out["csrf_token"] = s->csrf;
            }
          }
          SendJson(res, 200, out);
        });
  route("DELETE", "/api/v1/session", "/api/v1/session",
        "Sign out of the console: the session ends and its cookie is cleared",
        [this](const Principal&, const httplib::Request& req, httplib::Response& res) {
          const std::string cookie = CookieValue(req.get_header_value("Cookie"), kSessionCookie);
          const bool ended = !req.has_header("Authorization") && sessions_.End(cookie);
          res.set_header("Set-Cookie",
                         fmt::format("{}=; {}; Max-Age=0", kSessionCookie, CookieAttributes(req)));
          SendJson(res, 200, {{"signed_out", ended}});
        });
}

void HttpApi::SignIn(const httplib::Request& req, httplib::Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  auto observe = [&] {
    cp_->metrics().HttpRequest(
        "POST", "/api/v1/session", res.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  // Guessing tokens is hopeless (192 random bits), but each try costs a hash: per address.
  if (!AllowRate("sign-in " + req.remote_addr)) {
    SendError(res, Status(StatusCode::kResourceExhausted, "too many sign-ins; retry shortly"));
    res.set_header("Retry-After", "1");
    return observe();
  }
  // A form of another site can post only form encodings without asking first (and this server
  // answers no CORS preflight): JSON alone keeps such a page from signing a browser in.
  const std::string type = req.get_header_value("Content-Type");
  if (type.rfind("application/json", 0) != 0) {
    SendError(res, InvalidArgument("Content-Type", "must be application/json"));
    return observe();
  }
  // (Checked after the type: cpp-httplib reads a form body's fields into the parameters too.)
  if (!req.params.empty()) {
    SendError(res, InvalidArgument(req.params.begin()->first,
                                   "unknown query parameter; POST /api/v1/session takes none"));
    return observe();
  }
  auto body = ParseJsonBody(req);
  if (!body.ok()) {
    SendError(res, body.status());
    return observe();
  }
  if (!body->is_object() || !body->contains("token") || !(*body)["token"].is_string() ||
      (*body)["token"].get<std::string>().empty()) {
    SendError(res, InvalidArgument("token", "must be an API token (arb_...) or an OIDC ID token"));
    return observe();
  }
  std::string token = (*body)["token"].get<std::string>();
  auto p = cp_->Authenticate(token);
  if (!p.ok()) {
    SendError(res, p.status());
    return observe();
  }
  p->source = req.remote_addr;
  if (p->role == Role::kNode) {
    SendError(res, Status(StatusCode::kPermissionDenied,
                          "node tokens speak for a node, not a person: sign in with a user's token",
                          "token"));
    cp_->Audit(*p, "POST /api/v1/session", req.path, "denied");
    return observe();
  }
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const ConsoleSessions::Created s = sessions_.Create(std::move(token), now_ms);
  res.set_header("Set-Cookie",
                 fmt::format("{}={}; {}; Max-Age={}", kSessionCookie, s.id, CookieAttributes(req),
                             ConsoleSessions::kMaxAgeMs / 1000));
  res.set_header("Cache-Control", "no-store");
  json out = SessionJson(*p);
  out["session"] = true;
  out["csrf_token"] = s.csrf;
  SendJson(res, 201, out);
  observe();
}

}  // namespace arbiter::server
