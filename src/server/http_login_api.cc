// Signing in with a directory's password (docs/identity.md "LDAP"): POST /api/v1/login/ldap, the
// one route that takes a password. It needs no token; tries are limited per client address and
// per user name (LoginLimiter), and the directory is asked without any of the control plane's
// locks held (it blocks on the network).
#include <fmt/format.h>
#include <httplib.h>

#include <cctype>
#include <chrono>
#include <string>

#include "api/value.h"
#include "net/http_server.h"
#include "server/http_api.h"
#include "server/ldap_login.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr const char* kLdapLoginPath = "/api/v1/login/ldap";
constexpr const char* kLdapAuditAction = "login.ldap";
// The longest the directory may take to connect, and then to answer each request.
constexpr int64_t kDirectoryTimeoutMs = 10000;

}  // namespace

void HttpApi::RegisterLoginRoutes() {
  route_info_.push_back({"POST",
                         kLdapLoginPath,
                         "Sign in with a directory (LDAP) user's name and password: {user, "
                         "password} in, {token, user, tenant, role, expires_at} out; limited per "
                         "address and user name",
                         {},
                         true});
  http_->Post(kLdapLoginPath,
              [this](const httplib::Request& req, httplib::Response& res) { LoginLdap(req, res); });
}

void HttpApi::LoginLdap(const httplib::Request& req, httplib::Response& res) {
  const auto t0 = std::chrono::steady_clock::now();
  auto observe = [&] {
    cp_->metrics().HttpRequest(
        "POST", kLdapLoginPath, res.status,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  };
  auto fail = [&](const Status& st) {
    SendError(res, st);
    res.set_header("Cache-Control", "no-store");
    observe();
  };
  // 1. The request: JSON only (as POST /api/v1/session).
  if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0) {
    return fail(InvalidArgument("Content-Type", "must be application/json"));
  }
  if (!req.params.empty()) {
    return fail(InvalidArgument(
        req.params.begin()->first,
        fmt::format("unknown query parameter; POST {} takes none", kLdapLoginPath)));
  }
  // 2. Is a directory configured at all? Then a user name and a password.
  const std::optional<api::LdapConfig> ldap = cp_->LdapSettings();
  if (!ldap) {
    return fail(
        Status(StatusCode::kNotFound,
               "signing in with a directory is not configured on this server (identity.ldap "
               "in the configuration, docs/identity.md)"));
  }
  auto body = ParseJsonBody(req);
  if (!body.ok()) return fail(body.status());
  if (!body->is_object()) return fail(InvalidArgument("", "must be an object {user, password}"));
  for (const auto& [k, v] : body->items()) {
    if (k != "user" && k != "password") {
      return fail(InvalidArgument(k, "unknown field; allowed: user, password"));
    }
    if (!v.is_string()) return fail(InvalidArgument(k, "must be a string"));
  }
  // Directory names match in any case (uid is case-insensitive): the Arbiter user is the name in
  // lower case, so that "Alice" and "alice" are one owner of jobs and tokens.
  std::string user = body->value("user", "");
  for (char& c : user) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  const std::string password = body->value("password", "");
  if (user.empty()) return fail(InvalidArgument("user", "must not be empty"));
  if (!api::IsValidUserName(user)) {
    return fail(
        InvalidArgument("user", "use letters, digits, '.', '_', '-' and '@' (at most 253)"));
  }
  if (password.empty()) {
    // An LDAP bind with an empty password is an unauthenticated bind, which "succeeds".
    return fail(InvalidArgument("password", "must not be empty"));
  }
  if (api::IsReservedUserName(user)) {
    return fail(Status(StatusCode::kPermissionDenied,
                       fmt::format("{} is reserved for the server's own identities and cannot "
                                   "sign in with a directory",
                                   user),
                       "user"));
  }
  // 3. Guessing: every try costs a token of the address's bucket and of the name's.
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::steady_clock::now().time_since_epoch())
                             .count();
  const LoginLimiter::Verdict v = login_limiter_.Allow(req.remote_addr, user, now_ms);
  if (!v.allowed) {
    res.set_header("Retry-After", std::to_string(v.retry_after_seconds));
    return fail(Status(StatusCode::kResourceExhausted,
                       fmt::format("too many sign-in tries from this address or for this user; "
                                   "retry in {} s",
                                   v.retry_after_seconds)));
  }
  // 4. The directory, without any lock held.
  auto who = BindDirectoryUser(*ldap, user, password, kDirectoryTimeoutMs);
  const Principal actor{user, "", Role::kViewer, ""};
  if (!who.ok()) {
    const bool refused = who.status().code() == StatusCode::kUnauthenticated;
    cp_->Audit(actor, kLdapAuditAction, "user/" + user,
               refused ? "denied: invalid user name or password"
                       : fmt::format("failed: {}", who.status().message()));
    return fail(who.status());
  }
  // 5. The mapping and the token.
  auto issued = cp_->IssueDirectoryToken(user, who->groups, "ldap", ldap->token_ttl_seconds,
                                         kLdapAuditAction);
  if (!issued.ok()) return fail(issued.status());
  res.set_header("Cache-Control", "no-store");
  SendJson(res, 200, *issued);
  observe();
}

}  // namespace arbiter::server
