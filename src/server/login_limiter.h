// LoginLimiter: how often passwords may be tried (POST /api/v1/login/ldap), against guessing.
//
// Two token buckets per try: one for the client's address, one for the user name tried. A try
// goes ahead only when both hold a token, and then takes one from each, whether the password turns
// out right or wrong (so the answer's timing tells nothing about the limit). A bucket holds at
// most `burst` tokens and gains `per_second` a second:
//   tokens(now) = min(burst, tokens(last) + (now - last) * per_second)
// With the defaults a name may be tried 10 times at once, then once every 6 s; an address 30
// times, then once every 2 s. Trying one name from many addresses locks that name out for as long
// as the tries go on, never longer than it takes its bucket to gain one token.
//
// Memory is bounded: beyond max_keys buckets, full ones (equal to a fresh one) are dropped, then,
// if still too many, the longest unused.
//
// Thread safety: every method may be called from any thread. Time comes from the caller.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>

namespace arbiter::server {

class LoginLimiter {
 public:
  struct Options {
    double address_burst = 30;
    double address_per_second = 0.5;
    double user_burst = 10;
    double user_per_second = 1.0 / 6;
    size_t max_keys = 100000;
  };
  struct Verdict {
    bool allowed = false;
    int64_t retry_after_seconds = 0;  // when refused: until both buckets hold a token (>= 1)
  };

  LoginLimiter() : LoginLimiter(Options()) {}
  explicit LoginLimiter(Options options) : options_(options) {}

  // Whether a try from `address` for `user` at `now_ms` (a monotonic clock) may go ahead; when it
  // may, one token is taken from each bucket.
  Verdict Allow(std::string_view address, std::string_view user, int64_t now_ms);

  // How many buckets are held (for tests of the bound).
  size_t size() const;

 private:
  struct Bucket {
    double tokens = 0;
    int64_t last_ms = 0;
  };
  // The bucket of `key`, refilled to `now_ms` (created full).
  Bucket& Refill(const std::string& key, double burst, double per_second, int64_t now_ms);
  void BoundLocked(int64_t now_ms);

  Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;  // "a:" + address, "u:" + user
};

}  // namespace arbiter::server
