// Tokens and roles. A token is "arb_<id>_<secret>": the id finds the record, the secret is checked
// against its SHA-256 hash. Plain tokens exist only in the response that creates them (and in
// DATA_DIR/admin.token for the first admin); the store keeps hashes.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace arbiter::server {

enum class Role { kAdmin, kTenantAdmin, kMember, kViewer, kNode };

std::string_view RoleName(Role r);  // "admin", "tenant-admin", "member", "viewer", "node"
std::optional<Role> ParseRole(std::string_view s);

// Who is calling.
struct Principal {
  std::string user;
  std::string tenant;  // empty for admins and nodes
  Role role = Role::kViewer;
  std::string token_id;
  std::string node{};      // node tokens: the one node they speak for
  bool read_only = false;  // a read-only token (scope "read-only"): GET and HEAD only
  std::string source{};    // the client's address as the HTTP layer saw it (audit records)
};

struct NewToken {
  std::string token;  // the plain token: show once
  std::string id;
  std::string hash_hex;  // SHA-256 of the secret, lower-case hex
};

// A fresh token from the system's CSPRNG (OpenSSL RAND_bytes).
NewToken GenerateToken();
// SHA-256 of `secret`, lower-case hex.
std::string HashSecret(std::string_view secret);
// Splits "arb_<id>_<secret>"; false when malformed.
bool ParseToken(std::string_view token, std::string* id, std::string* secret);
// A fresh secret of `bytes` random bytes, lower-case hex.
std::string NewSecretHex(size_t bytes = 32);
// HMAC-SHA256 of `message` under `key`, lower-case hex.
std::string HmacHex(std::string_view key, std::string_view message);
// Constant-time comparison of equal-length strings.
bool SecureEquals(std::string_view a, std::string_view b);

}  // namespace arbiter::server
