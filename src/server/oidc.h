// OidcVerifier: bearer JWTs from the configured OIDC issuer (docs/identity.md) as principals.
//
// Owns: a copy of the identity configuration (issuer, audience, claims, mappings) and the issuer's
// discovery document and signing keys (JWKS), fetched over HTTP(S) and cached. Keys are fetched on
// first use, again when a token names a key id the cache lacks (at most once per
// kUnknownKidRefreshSeconds, so a stream of forged kids cannot make the server hammer the issuer),
// and when the cached set is older than kRefreshSeconds (a failed refresh keeps the old keys).
//
// Lock: its own mutexes, leaves. The fetch happens in the calling request's thread with no lock of
// the control plane held (ControlPlane::Authenticate calls this before taking any), and
// concurrent requests that need keys wait on one fetch rather than each making their own.
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <shared_mutex>
#include <string>
#include <string_view>
#include <vector>

#include "api/config.h"
#include "common/result.h"
#include "server/auth.h"
#include "server/jwt.h"

namespace arbiter::server {

class OidcVerifier {
 public:
  // GET `url`: the body of a 200 answer, else an error saying what failed.
  using Fetch = std::function<Result<std::string>(const std::string& url)>;
  // Seconds since the epoch (wall clock: tokens carry wall-clock times).
  using Clock = std::function<int64_t()>;

  static constexpr int64_t kUnknownKidRefreshSeconds = 10;
  static constexpr int64_t kRefreshSeconds = 3600;

  // An HTTP(S) GET with cpp-httplib (5 s connect and read timeouts, redirects followed, at most
  // 1 MiB); https verifies the server's certificate against the system's CAs.
  static Result<std::string> HttpGet(const std::string& url);

  explicit OidcVerifier(Fetch fetch = HttpGet, Clock clock = nullptr);

  // The identity section as it is now; a changed issuer drops the cached keys.
  void Configure(const api::IdentityConfig& identity);
  bool enabled() const;

  // The principal of a JWT: Unauthenticated (field Authorization) saying what is wrong when it is
  // malformed, signed by no key of the issuer, expired, not yet valid, for another issuer or
  // audience; PermissionDenied when it is valid but no mapping gives its user a tenant and role.
  // The principal's token_id is "oidc:<user>" (rate limits and audit records).
  Result<Principal> Authenticate(std::string_view token);

  // What a client needs to sign in (GET /api/v1/auth/config): issuer, client_id and the
  // endpoints of the discovery document (fetched when not cached; null when unreachable).
  nlohmann::json ClientConfig();
  // The origins the console's page may call besides its own (its Content-Security-Policy's
  // connect-src): the issuer's and, once discovery is cached, the token endpoint's. Never fetches.
  std::vector<std::string> ConsoleOrigins() const;

 private:
  struct Settings {
    api::OidcConfig oidc;
    std::vector<api::IdentityMapping> mappings;
  };
  struct Keys {
    nlohmann::json discovery;  // null until fetched
    std::vector<jwt::Key> keys;
    int64_t fetched_at = 0;  // last successful fetch, 0: never
    int64_t tried_at = 0;    // last attempt
    Status last_error = Status::Ok();
  };

  int64_t Now() const;
  std::shared_ptr<const Settings> settings() const;
  std::shared_ptr<const Keys> keys() const;
  // Fetches discovery and JWKS for `s` unless `min_age` seconds have not passed since the last
  // attempt (another thread's included); returns the keys as they are then. `wait`: wait for a
  // fetch in progress (the caller needs its result), else return the cached keys at once.
  std::shared_ptr<const Keys> Refresh(const Settings& s, int64_t min_age, bool wait);
  Result<std::shared_ptr<const Keys>> FetchKeys(const Settings& s, const Keys& old);

  Fetch fetch_;
  Clock clock_;
  mutable std::shared_mutex mu_;  // guards settings_ and keys_ (the pointers, not what they hold)
  std::shared_ptr<const Settings> settings_;
  std::shared_ptr<const Keys> keys_;
  std::mutex fetch_mu_;  // one fetch at a time; taken before mu_, never while holding it
};

}  // namespace arbiter::server
