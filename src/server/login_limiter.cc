#include "server/login_limiter.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace arbiter::server {

LoginLimiter::Bucket& LoginLimiter::Refill(const std::string& key, double burst, double per_second,
                                           int64_t now_ms) {
  auto [it, fresh] = buckets_.try_emplace(key);
  Bucket& b = it->second;
  if (fresh) {
    b.tokens = burst;
  } else if (now_ms > b.last_ms) {
    b.tokens =
        std::min(burst, b.tokens + static_cast<double>(now_ms - b.last_ms) / 1000.0 * per_second);
  }
  b.last_ms = std::max(b.last_ms, now_ms);
  return b;
}

LoginLimiter::Verdict LoginLimiter::Allow(std::string_view address, std::string_view user,
                                          int64_t now_ms) {
  std::lock_guard<std::mutex> lock(mu_);
  if (buckets_.size() + 2 > options_.max_keys) BoundLocked(now_ms);
  Bucket& a = Refill("a:" + std::string(address), options_.address_burst,
                     options_.address_per_second, now_ms);
  Bucket& u =
      Refill("u:" + std::string(user), options_.user_burst, options_.user_per_second, now_ms);
  if (a.tokens >= 1 && u.tokens >= 1) {
    a.tokens -= 1;
    u.tokens -= 1;
    return {true, 0};
  }
  // Seconds until a bucket short of a token has one: (1 - tokens) / per_second.
  auto wait = [](const Bucket& b, double per_second) {
    return b.tokens >= 1 ? 0.0 : (1 - b.tokens) / per_second;
  };
  const double s =
      std::max(wait(a, options_.address_per_second), wait(u, options_.user_per_second));
  return {false, std::max<int64_t>(1, static_cast<int64_t>(std::ceil(s)))};
}

void LoginLimiter::BoundLocked(int64_t now_ms) {
  // 1. Drop the buckets that have filled up again: a fresh one is the same.
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const bool user = it->first.rfind("u:", 0) == 0;
    const double burst = user ? options_.user_burst : options_.address_burst;
    const double rate = user ? options_.user_per_second : options_.address_per_second;
    const double tokens =
        it->second.tokens + static_cast<double>(now_ms - it->second.last_ms) / 1000.0 * rate;
    it = tokens >= burst ? buckets_.erase(it) : std::next(it);
  }
  if (buckets_.size() + 2 <= options_.max_keys) return;
  // 2. Still too many: keep the most recently used three quarters.
  std::vector<int64_t> used;
  used.reserve(buckets_.size());
  for (const auto& [key, b] : buckets_) used.push_back(b.last_ms);
  const size_t keep = options_.max_keys * 3 / 4;
  if (buckets_.size() <= keep) return;
  const size_t drop = buckets_.size() - keep;
  std::nth_element(used.begin(), used.begin() + static_cast<ptrdiff_t>(drop - 1), used.end());
  const int64_t cutoff = used[drop - 1];
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    it = it->second.last_ms <= cutoff ? buckets_.erase(it) : std::next(it);
  }
}

size_t LoginLimiter::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return buckets_.size();
}

}  // namespace arbiter::server
