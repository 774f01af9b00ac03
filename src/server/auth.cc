#include "server/auth.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>

#include "common/check.h"

namespace arbiter::server {

namespace {

std::string Hex(const unsigned char* p, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

std::string RandomHex(size_t bytes) {
  std::array<unsigned char, 64> buf{};
  ARBITER_CHECK(bytes <= buf.size(), "too many random bytes");
  ARBITER_CHECK(RAND_bytes(buf.data(), static_cast<int>(bytes)) == 1, "RAND_bytes failed");
  return Hex(buf.data(), bytes);
}

constexpr std::array<std::string_view, 5> kRoles = {"admin", "tenant-admin", "member", "viewer",
                                                    "node"};

}  // namespace

std::string NewSecretHex(size_t bytes) { return RandomHex(bytes); }

std::string HmacHex(std::string_view key, std::string_view message) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ARBITER_CHECK(HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
                     reinterpret_cast<const unsigned char*>(message.data()), message.size(), md,
                     &len) != nullptr,
                "HMAC-SHA256 failed");
  return Hex(md, len);
}

std::string_view RoleName(Role r) { return kRoles[static_cast<size_t>(r)]; }

std::optional<Role> ParseRole(std::string_view s) {
  for (size_t i = 0; i < kRoles.size(); ++i) {
    if (kRoles[i] == s) return static_cast<Role>(i);
  }
  return std::nullopt;
}

std::string HashSecret(std::string_view secret) {
  // Fetched once: EVP_sha256() would make OpenSSL 3 look the algorithm up again at every call
  // (every authenticated request hashes its token).
  static EVP_MD* const sha256 = EVP_MD_fetch(nullptr, "SHA256", nullptr);
  ARBITER_CHECK(sha256 != nullptr, "SHA-256 is not available");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  ARBITER_CHECK(EVP_Digest(secret.data(), secret.size(), md, &len, sha256, nullptr) == 1,
                "SHA-256 failed");
  return Hex(md, len);
}

NewToken GenerateToken() {
  NewToken t;
  t.id = RandomHex(6);
  const std::string secret = RandomHex(24);
  t.token = "arb_" + t.id + "_" + secret;
  t.hash_hex = HashSecret(secret);
  return t;
}

bool ParseToken(std::string_view token, std::string* id, std::string* secret) {
  if (token.size() < 8 || token.substr(0, 4) != "arb_") return false;
  const std::string_view rest = token.substr(4);
  const size_t sep = rest.find('_');
  if (sep == std::string_view::npos || sep == 0 || sep + 1 >= rest.size()) return false;
  *id = std::string(rest.substr(0, sep));
  *secret = std::string(rest.substr(sep + 1));
  return true;
}

bool SecureEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace arbiter::server
