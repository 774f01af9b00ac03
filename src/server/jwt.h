// JSON Web Tokens as an OIDC provider signs them (RFC 7519, RFC 7515): parsing, the signature
// (RS256 and ES256 only, with keys from a JWK set, RFC 7517/7518), and the registered claims.
//
// Pure functions over OpenSSL 3's EVP interface: no I/O, no clock (the caller passes `now`), no
// state. Every failure is an Unauthenticated Status whose message says what is wrong (expired,
// wrong issuer, bad signature, ...) with field "Authorization".
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

typedef struct evp_pkey_st EVP_PKEY;

namespace arbiter::server::jwt {

// RFC 4648 section 5, no padding on output; input padding is tolerated.
std::string Base64UrlEncode(std::string_view bytes);
// nullopt-like failure: false when `text` has characters outside the alphabet.
bool Base64UrlDecode(std::string_view text, std::string* out);

// Whether `bearer` has the shape of a JWS compact serialisation (three base64url parts): what
// tells an OIDC token from an Arbiter token (arb_...) before anything is verified.
bool LooksLikeJwt(std::string_view bearer);

struct PkeyFree {
  void operator()(EVP_PKEY* p) const;
};
using Pkey = std::unique_ptr<EVP_PKEY, PkeyFree>;

// One verification key of a JWK set.
struct Key {
  std::string kid;
  std::string alg;  // "RS256" or "ES256": what the key may verify
  std::shared_ptr<EVP_PKEY> pkey;
};

// The RS256 and ES256 keys of a JWK set's JSON ({"keys": [...]}); keys of other types, curves or
// uses ("use": "enc") are skipped. An error when the text is no JWK set.
Result<std::vector<Key>> ParseJwks(std::string_view json_text);
// One JWK (RSA n/e, or EC P-256 x/y) as an EVP_PKEY.
Result<Key> KeyFromJwk(const nlohmann::json& jwk);

// A token split and decoded, not yet verified.
struct Token {
  nlohmann::json header;
  nlohmann::json claims;
  std::string signing_input;  // "<header>.<payload>" as sent
  std::string signature;      // raw bytes
  std::string alg;
  std::string kid;
};
// Splits and decodes; refuses any alg but RS256 and ES256 (so "none" and HS256 never verify).
Result<Token> Parse(std::string_view compact);

// Whether `signature` over `signing_input` verifies under `key` with `alg`. ES256 signatures are
// JOSE's raw r||s (64 bytes), converted to DER for EVP.
bool VerifySignature(std::string_view alg, EVP_PKEY* key, std::string_view signing_input,
                     std::string_view signature);

// What the claims must say.
struct ClaimRules {
  std::string issuer;    // iss must equal it exactly
  std::string audience;  // aud (a string or an array) must contain it
  int64_t clock_skew_seconds = 60;
};
// exp (required), nbf and iat (when present) against `now_seconds` with the skew; iss; aud.
Status CheckClaims(const nlohmann::json& claims, const ClaimRules& rules, int64_t now_seconds);

// Signing, for tests and tools: `header` gets "alg" (and "kid" when not empty) set; ES256 writes
// raw r||s. An error when the key cannot sign with `alg`.
Result<std::string> Sign(std::string_view alg, EVP_PKEY* key, const std::string& kid,
                         nlohmann::json header, const nlohmann::json& claims);
// The public JWK of `key` (RSA or EC P-256), with kid and alg.
Result<nlohmann::json> PublicJwk(EVP_PKEY* key, const std::string& kid, const std::string& alg);

}  // namespace arbiter::server::jwt
