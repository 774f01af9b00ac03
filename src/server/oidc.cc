#include "server/oidc.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <httplib.h>

#include <chrono>

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxDocumentBytes = 1 << 20;

Status Unauthenticated(std::string message) {
  return Status(StatusCode::kUnauthenticated, std::move(message), "Authorization");
}

std::string JsonString(const json& j, const std::string& key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// "https://h:1/x" -> "https://h:1"; "" when no URL.
std::string Origin(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return "";
  return url.substr(0, url.find('/', scheme + 3));
}

}  // namespace

Result<std::string> OidcVerifier::HttpGet(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return Status(StatusCode::kUnavailable, "not a URL: " + url);
  const size_t slash = url.find('/', scheme + 3);
  const std::string base = url.substr(0, slash);
  const std::string path = slash == std::string::npos ? "/" : url.substr(slash);
  httplib::Client client(base);
  if (!client.is_valid()) return Status(StatusCode::kUnavailable, "unsupported URL: " + url);
  client.set_connection_timeout(5, 0);
  client.set_read_timeout(5, 0);
  client.set_follow_location(true);
  auto res = client.Get(path);
  if (!res) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("GET {} failed: {}", url, httplib::to_string(res.error())));
  }
  if (res->status != 200) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("GET {} answered HTTP {}", url, res->status));
  }
  if (res->body.size() > kMaxDocumentBytes) {
    return Status(StatusCode::kUnavailable, fmt::format("GET {}: the document is too large", url));
  }
  return res->body;
}

OidcVerifier::OidcVerifier(Fetch fetch, Clock clock)
    : fetch_(std::move(fetch)),
      clock_(std::move(clock)),
      settings_(std::make_shared<Settings>()),
      keys_(std::make_shared<Keys>()) {}

int64_t OidcVerifier::Now() const {
  if (clock_) return clock_();
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

void OidcVerifier::Configure(const api::IdentityConfig& identity) {
  auto s = std::make_shared<Settings>();
  if (identity.oidc) s->oidc = *identity.oidc;
  s->mappings = identity.mappings;
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (settings_->oidc.issuer != s->oidc.issuer) keys_ = std::make_shared<Keys>();
  settings_ = std::move(s);
}

bool OidcVerifier::enabled() const { return !settings()->oidc.issuer.empty(); }

std::shared_ptr<const OidcVerifier::Settings> OidcVerifier::settings() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return settings_;
}

std::shared_ptr<const OidcVerifier::Keys> OidcVerifier::keys() const {
  std::shared_lock<std::shared_mutex> lock(mu_);
  return keys_;
}

Result<std::shared_ptr<const OidcVerifier::Keys>> OidcVerifier::FetchKeys(const Settings& s,
                                                                          const Keys& old) {
  const std::string discovery_url = s.oidc.issuer + "/.well-known/openid-configuration";
  auto text = fetch_(discovery_url);
  if (!text.ok()) return text.status();
  json discovery = json::parse(*text, nullptr, /*allow_exceptions=*/false);
  if (!discovery.is_object()) {
    return Status(StatusCode::kUnavailable, fmt::format("{} is not JSON", discovery_url));
  }
  // The discovery document names its issuer; one that names another is not this issuer's.
  if (JsonString(discovery, "issuer") != s.oidc.issuer) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} names issuer \"{}\", not \"{}\"", discovery_url,
                              JsonString(discovery, "issuer"), s.oidc.issuer));
  }
  const std::string jwks_uri = JsonString(discovery, "jwks_uri");
  if (jwks_uri.empty()) {
    return Status(StatusCode::kUnavailable, fmt::format("{} has no jwks_uri", discovery_url));
  }
  auto jwks = fetch_(jwks_uri);
  if (!jwks.ok()) return jwks.status();
  auto keys = jwt::ParseJwks(*jwks);
  if (!keys.ok()) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{}: {}", jwks_uri, keys.status().message()));
  }
  auto k = std::make_shared<Keys>(old);
  k->discovery = std::move(discovery);
  k->keys = std::move(*keys);
  k->fetched_at = Now();
  k->tried_at = k->fetched_at;
  k->last_error = Status::Ok();
  return std::shared_ptr<const Keys>(std::move(k));
}

std::shared_ptr<const OidcVerifier::Keys> OidcVerifier::Refresh(const Settings& s, int64_t min_age,
                                                                bool wait) {
  std::unique_lock<std::mutex> fetching(fetch_mu_, std::defer_lock);
  if (wait) {
    fetching.lock();
  } else if (!fetching.try_lock()) {
    return keys();  // another request is refreshing: the cached keys serve meanwhile
  }
  std::shared_ptr<const Keys> old = keys();
  // Another thread may have fetched while this one waited for fetch_mu_.
  if (old->tried_at > 0 && Now() - old->tried_at < min_age) return old;
  auto fresh = FetchKeys(s, *old);
  std::shared_ptr<const Keys> next;
  if (fresh.ok()) {
    next = *fresh;
  } else {
    auto k = std::make_shared<Keys>(*old);
    k->tried_at = Now();
    k->last_error = fresh.status();
    next = std::move(k);
  }
  std::unique_lock<std::shared_mutex> lock(mu_);
  if (settings_->oidc.issuer != s.oidc.issuer) return next;  // reconfigured meanwhile
  keys_ = next;
  return next;
}

Result<Principal> OidcVerifier::Authenticate(std::string_view token) {
  const std::shared_ptr<const Settings> s = settings();
  if (s->oidc.issuer.empty()) {
    return Unauthenticated(
        "this server accepts no OIDC tokens (identity.oidc is not configured): use an Arbiter "
        "token (arb_...)");
  }
  auto t = jwt::Parse(token);
  if (!t.ok()) return t.status();
  // The issuer first: a token of another issuer is named as such rather than as an unknown key
  // (and never makes this server fetch keys).
  const std::string iss = JsonString(t->claims, "iss");
  if (iss != s->oidc.issuer) {
    return Unauthenticated(
        fmt::format("wrong issuer: the token's iss is \"{}\", this server accepts \"{}\"", iss,
                    s->oidc.issuer));
  }

  std::shared_ptr<const Keys> k = keys();
  if (k->fetched_at == 0) {
    k = Refresh(*s, 1, /*wait=*/true);
  } else if (Now() - k->fetched_at >= kRefreshSeconds) {
    k = Refresh(*s, kUnknownKidRefreshSeconds, /*wait=*/false);
  }
  auto find = [&](const Keys& ks) -> const jwt::Key* {
    for (const jwt::Key& key : ks.keys) {
      if (key.alg == t->alg && (t->kid.empty() || key.kid == t->kid)) return &key;
    }
    return nullptr;
  };
  const jwt::Key* key = find(*k);
  if (key == nullptr) {
    k = Refresh(*s, kUnknownKidRefreshSeconds, /*wait=*/true);  // a rotated key: fetch again
    key = find(*k);
  }
  if (key == nullptr) {
    if (k->fetched_at == 0) {
      return Status(StatusCode::kUnavailable,
                    fmt::format("the identity provider's keys could not be fetched: {}",
                                k->last_error.message()));
    }
    return Unauthenticated(
        fmt::format("unknown key: no {} key{} in the issuer's JWKS", t->alg,
                    t->kid.empty() ? "" : fmt::format(" with kid \"{}\"", t->kid)));
  }
  if (!jwt::VerifySignature(t->alg, key->pkey.get(), t->signing_input, t->signature)) {
    return Unauthenticated("bad signature: the token was not signed by the issuer's key");
  }
  ARBITER_RETURN_IF_ERROR(jwt::CheckClaims(
      t->claims, {s->oidc.issuer, s->oidc.audience, s->oidc.clock_skew_seconds}, Now()));

  const std::string user = JsonString(t->claims, s->oidc.username_claim);
  if (user.empty()) {
    return Unauthenticated(
        fmt::format("the token has no \"{}\" claim (identity.oidc.username_claim) naming the user",
                    s->oidc.username_claim));
  }
  // The reserved names (docs/security.md): nobody the provider vouches for passes for the
  // bootstrap admin, or for a call without a user, in the audit log.
  if (user == "admin" || user == "anonymous") {
    return Status(StatusCode::kPermissionDenied,
                  fmt::format("the user name {} is reserved in Arbiter; the identity provider's "
                              "{} claim must name someone else",
                              user, s->oidc.username_claim),
                  "Authorization");
  }
  std::vector<std::string> groups;
  if (auto it = t->claims.find(s->oidc.groups_claim); it != t->claims.end()) {
    if (it->is_string()) {
      groups.push_back(it->get<std::string>());
    } else if (it->is_array()) {
      for (const json& g : *it) {
        if (g.is_string()) groups.push_back(g.get<std::string>());
      }
    }
  }
  api::IdentityConfig identity;
  identity.mappings = s->mappings;
  const api::IdentityMapping* m = api::MapIdentity(identity, user, groups);
  if (m == nullptr) {
    return Status(
        StatusCode::kPermissionDenied,
        fmt::format("{} signed in, but is not mapped to any tenant/role: no mapping of "
                    "identity.mappings matches the user or its groups ({}); ask an "
                    "admin to add one",
                    user, groups.empty() ? "none" : fmt::format("{}", fmt::join(groups, ", "))),
        "Authorization");
  }
  Principal p;
  p.user = user;
  p.tenant = m->tenant;
  p.role = ParseRole(m->role).value_or(Role::kViewer);
  p.token_id = "oidc:" + user;
  return p;
}

json OidcVerifier::ClientConfig() {
  const std::shared_ptr<const Settings> s = settings();
  json out = {{"oidc", nullptr}};
  if (s->oidc.issuer.empty()) return out;
  std::shared_ptr<const Keys> k = keys();
  if (k->discovery.is_null()) {
    k = Refresh(*s, 1, /*wait=*/true);
  } else if (Now() - k->fetched_at >= kRefreshSeconds) {
    k = Refresh(*s, kUnknownKidRefreshSeconds, /*wait=*/false);
  }
  json o = {
      {"issuer", s->oidc.issuer}, {"client_id", s->oidc.client_id}, {"audience", s->oidc.audience}};
  for (const char* key : {"authorization_endpoint", "token_endpoint",
                          "device_authorization_endpoint", "end_session_endpoint"}) {
    const std::string v = k->discovery.is_object() ? JsonString(k->discovery, key) : "";
    o[key] = v.empty() ? json(nullptr) : json(v);
  }
  if (!k->discovery.is_object()) o["error"] = k->last_error.message();
  out["oidc"] = std::move(o);
  return out;
}

std::vector<std::string> OidcVerifier::ConsoleOrigins() const {
  std::vector<std::string> out;
  const std::shared_ptr<const Settings> s = settings();
  if (s->oidc.issuer.empty()) return out;
  out.push_back(Origin(s->oidc.issuer));
  const std::shared_ptr<const Keys> k = keys();
  if (k->discovery.is_object()) {
    const std::string token = Origin(JsonString(k->discovery, "token_endpoint"));
    if (!token.empty() && token != out.front()) out.push_back(token);
  }
  return out;
}

}  // namespace arbiter::server
