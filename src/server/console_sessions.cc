#include "server/console_sessions.h"

#include "server/auth.h"

namespace arbiter::server {

ConsoleSessions::Created ConsoleSessions::Create(std::string token, int64_t now_ms) {
  Created c{NewSecretHex(32), NewSecretHex(32)};
  std::lock_guard<std::mutex> lock(mu_);
  Sweep(now_ms);
  while (by_hash_.size() >= kMaxSessions) {
    auto oldest = by_hash_.begin();
    for (auto it = by_hash_.begin(); it != by_hash_.end(); ++it) {
      if (it->second.created_ms < oldest->second.created_ms) oldest = it;
    }
    by_hash_.erase(oldest);
  }
  by_hash_[HashSecret(c.id)] = Session{std::move(token), c.csrf, now_ms, now_ms};
  return c;
}

std::optional<ConsoleSessions::Session> ConsoleSessions::Use(std::string_view id, int64_t now_ms) {
  if (id.empty()) return std::nullopt;
  const std::string key = HashSecret(id);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = by_hash_.find(key);
  if (it == by_hash_.end()) return std::nullopt;
  Session& s = it->second;
  if (now_ms - s.last_used_ms > kIdleMs || now_ms - s.created_ms > kMaxAgeMs) {
    by_hash_.erase(it);
    return std::nullopt;
  }
  s.last_used_ms = now_ms;
  return s;
}

bool ConsoleSessions::End(std::string_view id) {
  if (id.empty()) return false;
  std::lock_guard<std::mutex> lock(mu_);
  return by_hash_.erase(HashSecret(id)) > 0;
}

size_t ConsoleSessions::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return by_hash_.size();
}

void ConsoleSessions::Sweep(int64_t now_ms) {
  for (auto it = by_hash_.begin(); it != by_hash_.end();) {
    const Session& s = it->second;
    if (now_ms - s.last_used_ms > kIdleMs || now_ms - s.created_ms > kMaxAgeMs) {
      it = by_hash_.erase(it);
    } else {
      ++it;
    }
  }
}

std::string CookieValue(std::string_view header, std::string_view name) {
  size_t at = 0;
  while (at < header.size()) {
    size_t end = header.find(';', at);
    if (end == std::string_view::npos) end = header.size();
    std::string_view part = header.substr(at, end - at);
    while (!part.empty() && part.front() == ' ') part.remove_prefix(1);
    const size_t eq = part.find('=');
    if (eq != std::string_view::npos && part.substr(0, eq) == name) {
      return std::string(part.substr(eq + 1));
    }
    at = end + 1;
  }
  return "";
}

}  // namespace arbiter::server
