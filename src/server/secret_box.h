// Secrets at rest: AES-256-GCM under a server key (OpenSSL), for what the server must keep and
// use but never show, such as a tenant's registry passwords (docs/config.md, "Registry
// credentials").
//
// A sealed value is text: "v1:" then base64 of nonce (12 random bytes), ciphertext and tag (16
// bytes). `context` is authenticated with it (not stored): a value sealed for one context (a
// tenant and registry) does not open under another, so a row copied elsewhere in the store is
// refused rather than used.
//
// The key is 32 bytes in a file of its own (mode 0600), created at the server's first start in
// its data dir (or named with --secret-key-file: servers that share a store must share the key).
//
// Thread safety: a SecretBox is immutable after construction; Seal and Open may be called from
// any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/result.h"

namespace arbiter::server {

class SecretBox {
 public:
  static constexpr size_t kKeyBytes = 32;

  explicit SecretBox(const std::array<uint8_t, kKeyBytes>& key) : key_(key) {}

  // The key in `path`: read when the file exists (it must hold exactly 32 bytes and be readable
  // by its owner only), else made from the system's random source and written with mode 0600.
  static Result<SecretBox> LoadOrCreate(const std::string& path);

  Result<std::string> Seal(std::string_view plaintext, std::string_view context) const;
  // FailedPrecondition when the value was sealed under another key or context, or altered.
  Result<std::string> Open(std::string_view sealed, std::string_view context) const;

 private:
  std::array<uint8_t, kKeyBytes> key_;
};

}  // namespace arbiter::server
