// ConsoleSessions: the web console's sign-ins (docs/console.md, "Security model").
//
// Signing in trades an API token for a session: a random id that the browser keeps in an HttpOnly,
// SameSite=Strict cookie, and a CSRF token that the page keeps in memory and sends back in the
// X-CSRF-Token header of every request that changes something. The API token stays in the
// server's memory only; each request through a session authenticates it again, so revoking the
// token ends its sessions at once. Sessions live in memory: a restart signs everyone out.
//
// A session ends when signed out, after kIdleMs without a request, or kMaxAgeMs after it began.
// At most kMaxSessions are held; a new one beyond that ends the oldest.
//
// Thread safety: every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace arbiter::server {

class ConsoleSessions {
 public:
  static constexpr int64_t kIdleMs = 12LL * 3600 * 1000;
  static constexpr int64_t kMaxAgeMs = 7LL * 24 * 3600 * 1000;
  static constexpr size_t kMaxSessions = 10000;

  struct Session {
    std::string token;  // the API token it stands for
    std::string csrf;   // what X-CSRF-Token must say
    int64_t created_ms = 0;
    int64_t last_used_ms = 0;
  };
  struct Created {
    std::string id;  // the cookie's value
    std::string csrf;
  };

  // Starts a session for `token` (already authenticated by the caller).
  Created Create(std::string token, int64_t now_ms);
  // The live session of cookie value `id`, its idle clock restarted; nullopt when there is none
  // (never was, signed out, expired).
  std::optional<Session> Use(std::string_view id, int64_t now_ms);
  // Ends the session of `id`; false when there was none.
  bool End(std::string_view id);
  size_t size() const;

 private:
  // Expired sessions out; requires mu_.
  void Sweep(int64_t now_ms);

  mutable std::mutex mu_;
  // By the SHA-256 of the id, so that the map's comparisons reveal nothing of a live id.
  std::map<std::string, Session> by_hash_;
};

// The value of cookie `name` in a Cookie header ("a=1; b=2"); "" when absent.
std::string CookieValue(std::string_view header, std::string_view name);

}  // namespace arbiter::server
