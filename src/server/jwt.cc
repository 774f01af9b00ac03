#include "server/jwt.h"

#include <fmt/format.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/evp.h>
#include <openssl/param_build.h>

#include <array>

namespace arbiter::server::jwt {

using nlohmann::json;

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

Status Unauthenticated(std::string message) {
  return Status(StatusCode::kUnauthenticated, std::move(message), "Authorization");
}

struct BnFree {
  void operator()(BIGNUM* b) const { BN_free(b); }
};
using Bn = std::unique_ptr<BIGNUM, BnFree>;

Bn BnFrom(const std::string& bytes) {
  return Bn(BN_bin2bn(reinterpret_cast<const unsigned char*>(bytes.data()),
                      static_cast<int>(bytes.size()), nullptr));
}

std::string BnBytes(const BIGNUM* b, int width) {
  std::string out(static_cast<size_t>(width > 0 ? width : BN_num_bytes(b)), '\0');
  const int n = width > 0 ? BN_bn2binpad(b, reinterpret_cast<unsigned char*>(out.data()), width)
                          : BN_bn2bin(b, reinterpret_cast<unsigned char*>(out.data()));
  if (n < 0) return "";
  return out;
}

struct CtxFree {
  void operator()(EVP_PKEY_CTX* c) const { EVP_PKEY_CTX_free(c); }
  void operator()(EVP_MD_CTX* c) const { EVP_MD_CTX_free(c); }
  void operator()(OSSL_PARAM_BLD* b) const { OSSL_PARAM_BLD_free(b); }
  void operator()(OSSL_PARAM* p) const { OSSL_PARAM_free(p); }
  void operator()(ECDSA_SIG* s) const { ECDSA_SIG_free(s); }
};

// An EVP_PKEY from OSSL parameters of `type` ("RSA" or "EC").
Result<Pkey> FromParams(const char* type, OSSL_PARAM_BLD* bld) {
  std::unique_ptr<OSSL_PARAM, CtxFree> params(OSSL_PARAM_BLD_to_param(bld));
  if (!params) return Unauthenticated("the signing key could not be built");
  std::unique_ptr<EVP_PKEY_CTX, CtxFree> ctx(EVP_PKEY_CTX_new_from_name(nullptr, type, nullptr));
  EVP_PKEY* pkey = nullptr;
  if (!ctx || EVP_PKEY_fromdata_init(ctx.get()) != 1 ||
      EVP_PKEY_fromdata(ctx.get(), &pkey, EVP_PKEY_PUBLIC_KEY, params.get()) != 1) {
    return Unauthenticated(fmt::format("the {} signing key is invalid", type));
  }
  return Pkey(pkey);
}

std::string JsonString(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

Result<std::string> DecodedMember(const json& jwk, const char* key) {
  std::string out;
  const std::string text = JsonString(jwk, key);
  if (text.empty() || !Base64UrlDecode(text, &out) || out.empty()) {
    return Unauthenticated(fmt::format("the JWK's \"{}\" is missing or not base64url", key));
  }
  return out;
}

// The DER signature of a raw r||s pair of `half` bytes each.
std::string RawToDer(std::string_view raw) {
  const size_t half = raw.size() / 2;
  std::unique_ptr<ECDSA_SIG, CtxFree> sig(ECDSA_SIG_new());
  BIGNUM* r = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data()), static_cast<int>(half),
                        nullptr);
  BIGNUM* s = BN_bin2bn(reinterpret_cast<const unsigned char*>(raw.data() + half),
                        static_cast<int>(half), nullptr);
  if (!sig || r == nullptr || s == nullptr || ECDSA_SIG_set0(sig.get(), r, s) != 1) {
    BN_free(r);
    BN_free(s);
    return "";
  }
  unsigned char* der = nullptr;
  const int n = i2d_ECDSA_SIG(sig.get(), &der);
  if (n <= 0) return "";
  std::string out(reinterpret_cast<char*>(der), static_cast<size_t>(n));
  OPENSSL_free(der);
  return out;
}

std::string DerToRaw(std::string_view der, int half) {
  const auto* p = reinterpret_cast<const unsigned char*>(der.data());
  std::unique_ptr<ECDSA_SIG, CtxFree> sig(
      d2i_ECDSA_SIG(nullptr, &p, static_cast<long>(der.size())));
  if (!sig) return "";
  return BnBytes(ECDSA_SIG_get0_r(sig.get()), half) + BnBytes(ECDSA_SIG_get0_s(sig.get()), half);
}

bool IsEs256Key(EVP_PKEY* key) {
  if (EVP_PKEY_get_base_id(key) != EVP_PKEY_EC) return false;
  std::array<char, 64> curve{};
  size_t len = 0;
  return EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, curve.data(), curve.size(),
                                        &len) == 1 &&
         std::string_view(curve.data(), len) == "prime256v1";
}

bool NumericClaim(const json& claims, const char* key, int64_t* out, Status* error) {
  auto it = claims.find(key);
  if (it == claims.end()) return false;
  if (!it->is_number()) {
    *error = Unauthenticated(fmt::format("malformed token: the \"{}\" claim is not a number", key));
    return false;
  }
  *out = it->is_number_integer() ? it->get<int64_t>() : static_cast<int64_t>(it->get<double>());
  return true;
}

}  // namespace

void PkeyFree::operator()(EVP_PKEY* p) const { EVP_PKEY_free(p); }

std::string Base64UrlEncode(std::string_view bytes) {
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : bytes) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kAlphabet[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kAlphabet[(acc << (6 - bits)) & 63]);
  return out;
}

bool Base64UrlDecode(std::string_view text, std::string* out) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  out->clear();
  out->reserve(text.size() * 3 / 4);
  uint32_t acc = 0;
  int bits = 0;
  for (char c : text) {
    int v;
    if (c >= 'A' && c <= 'Z') {
      v = c - 'A';
    } else if (c >= 'a' && c <= 'z') {
      v = c - 'a' + 26;
    } else if (c >= '0' && c <= '9') {
      v = c - '0' + 52;
    } else if (c == '-') {
      v = 62;
    } else if (c == '_') {
      v = 63;
    } else {
      return false;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out->push_back(static_cast<char>((acc >> bits) & 0xff));
    }
  }
  return bits < 6;  // one leftover character (6 bits) cannot come from any byte string
}

bool LooksLikeJwt(std::string_view bearer) {
  if (bearer.rfind("arb_", 0) == 0) return false;
  int dots = 0;
  for (char c : bearer) {
    if (c == '.') {
      ++dots;
    } else if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '-' || c == '_' || c == '=')) {
      return false;
    }
  }
  return dots == 2 && bearer.front() != '.';
}

Result<Key> KeyFromJwk(const json& jwk) {
  if (!jwk.is_object()) return Unauthenticated("a JWK is not an object");
  Key k;
  k.kid = JsonString(jwk, "kid");
  const std::string kty = JsonString(jwk, "kty");
  std::unique_ptr<OSSL_PARAM_BLD, CtxFree> bld(OSSL_PARAM_BLD_new());
  if (kty == "RSA") {
    auto n = DecodedMember(jwk, "n");
    if (!n.ok()) return n.status();
    auto e = DecodedMember(jwk, "e");
    if (!e.ok()) return e.status();
    Bn bn_n = BnFrom(*n);
    Bn bn_e = BnFrom(*e);
    if (!bn_n || !bn_e || BN_num_bits(bn_n.get()) < 2048 ||
        OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_N, bn_n.get()) != 1 ||
        OSSL_PARAM_BLD_push_BN(bld.get(), OSSL_PKEY_PARAM_RSA_E, bn_e.get()) != 1) {
      return Unauthenticated("the RSA JWK is invalid (a modulus of at least 2048 bits is needed)");
    }
    auto pkey = FromParams("RSA", bld.get());
    if (!pkey.ok()) return pkey.status();
    k.alg = "RS256";
    k.pkey = std::shared_ptr<EVP_PKEY>(pkey->release(), PkeyFree());
  } else if (kty == "EC") {
    if (JsonString(jwk, "crv") != "P-256")
      return Unauthenticated("the EC JWK's curve is not P-256");
    auto x = DecodedMember(jwk, "x");
    if (!x.ok()) return x.status();
    auto y = DecodedMember(jwk, "y");
    if (!y.ok()) return y.status();
    if (x->size() != 32 || y->size() != 32)
      return Unauthenticated("the EC JWK's x or y is not 32 bytes");
    const std::string point = "\x04" + *x + *y;  // uncompressed
    if (OSSL_PARAM_BLD_push_utf8_string(bld.get(), OSSL_PKEY_PARAM_GROUP_NAME, "prime256v1", 0) !=
            1 ||
        OSSL_PARAM_BLD_push_octet_string(bld.get(), OSSL_PKEY_PARAM_PUB_KEY, point.data(),
                                         point.size()) != 1) {
      return Unauthenticated("the EC JWK is invalid");
    }
    auto pkey = FromParams("EC", bld.get());
    if (!pkey.ok()) return pkey.status();
    k.alg = "ES256";
    k.pkey = std::shared_ptr<EVP_PKEY>(pkey->release(), PkeyFree());
  } else {
    return Unauthenticated(fmt::format("unsupported JWK type \"{}\"", kty));
  }
  const std::string alg = JsonString(jwk, "alg");
  if (!alg.empty() && alg != k.alg) {
    return Unauthenticated(fmt::format("the JWK's alg {} does not fit its key ({})", alg, k.alg));
  }
  return k;
}

Result<std::vector<Key>> ParseJwks(std::string_view json_text) {
  const json j = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("keys") || !j["keys"].is_array()) {
    return Unauthenticated("the JWKS document has no \"keys\" array");
  }
  std::vector<Key> keys;
  for (const json& jwk : j["keys"]) {
    if (jwk.is_object() && JsonString(jwk, "use") == "enc") continue;
    auto k = KeyFromJwk(jwk);
    if (k.ok()) keys.push_back(std::move(*k));  // other kinds of keys: not ours to use
  }
  return keys;
}

Result<Token> Parse(std::string_view compact) {
  if (!LooksLikeJwt(compact)) {
    return Unauthenticated("malformed token: a JWT has three base64url parts separated by '.'");
  }
  const size_t a = compact.find('.');
  const size_t b = compact.find('.', a + 1);
  Token t;
  std::string header_text;
  std::string claims_text;
  if (!Base64UrlDecode(compact.substr(0, a), &header_text) ||
      !Base64UrlDecode(compact.substr(a + 1, b - a - 1), &claims_text) ||
      !Base64UrlDecode(compact.substr(b + 1), &t.signature)) {
    return Unauthenticated("malformed token: a part is not base64url");
  }
  t.header = json::parse(header_text, nullptr, /*allow_exceptions=*/false);
  t.claims = json::parse(claims_text, nullptr, /*allow_exceptions=*/false);
  if (!t.header.is_object()) return Unauthenticated("malformed token: the header is not JSON");
  if (!t.claims.is_object()) return Unauthenticated("malformed token: the payload is not JSON");
  t.alg = JsonString(t.header, "alg");
  t.kid = JsonString(t.header, "kid");
  if (t.alg != "RS256" && t.alg != "ES256") {
    return Unauthenticated(
        fmt::format("the token's algorithm \"{}\" is not accepted (only RS256 and ES256)", t.alg));
  }
  t.signing_input = std::string(compact.substr(0, b));
  return t;
}

bool VerifySignature(std::string_view alg, EVP_PKEY* key, std::string_view signing_input,
                     std::string_view signature) {
  if (key == nullptr) return false;
  std::string der;
  if (alg == "RS256") {
    if (EVP_PKEY_get_base_id(key) != EVP_PKEY_RSA) return false;
  } else if (alg == "ES256") {
    if (!IsEs256Key(key) || signature.size() != 64) return false;
    der = RawToDer(signature);
    if (der.empty()) return false;
    signature = der;
  } else {
    return false;
  }
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  return ctx && EVP_DigestVerifyInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) == 1 &&
         EVP_DigestVerify(ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
                          signature.size(),
                          reinterpret_cast<const unsigned char*>(signing_input.data()),
                          signing_input.size()) == 1;
}

Status CheckClaims(const json& claims, const ClaimRules& rules, int64_t now_seconds) {
  Status error = Status::Ok();
  int64_t exp = 0;
  if (!NumericClaim(claims, "exp", &exp, &error)) {
    return error.ok() ? Unauthenticated("malformed token: it has no \"exp\" (expiry) claim")
                      : error;
  }
  const int64_t skew = rules.clock_skew_seconds;
  if (now_seconds > exp + skew) {
    return Unauthenticated(
        fmt::format("the token has expired ({} s ago): sign in again", now_seconds - exp));
  }
  int64_t nbf = 0;
  if (NumericClaim(claims, "nbf", &nbf, &error) && now_seconds + skew < nbf) {
    return Unauthenticated(
        fmt::format("the token is not yet valid (nbf is {} s ahead)", nbf - now_seconds));
  }
  if (!error.ok()) return error;
  int64_t iat = 0;
  if (NumericClaim(claims, "iat", &iat, &error) && now_seconds + skew < iat) {
    return Unauthenticated(
        fmt::format("the token is not yet valid (issued {} s in the future: check the clocks)",
                    iat - now_seconds));
  }
  if (!error.ok()) return error;
  const std::string iss = JsonString(claims, "iss");
  if (iss != rules.issuer) {
    return Unauthenticated(
        fmt::format("wrong issuer: the token's iss is \"{}\", this server "
                    "accepts \"{}\"",
                    iss, rules.issuer));
  }
  bool aud_ok = false;
  std::string aud_text;
  if (auto it = claims.find("aud"); it != claims.end()) {
    if (it->is_string()) {
      aud_ok = it->get<std::string>() == rules.audience;
      aud_text = it->get<std::string>();
    } else if (it->is_array()) {
      for (const json& a : *it) {
        if (a.is_string() && a.get<std::string>() == rules.audience) aud_ok = true;
      }
      aud_text = it->dump();
    }
  }
  if (!aud_ok) {
    return Unauthenticated(
        fmt::format("wrong audience: the token's aud is {} and does not contain \"{}\"",
                    aud_text.empty() ? "missing" : "\"" + aud_text + "\"", rules.audience));
  }
  return Status::Ok();
}

Result<std::string> Sign(std::string_view alg, EVP_PKEY* key, const std::string& kid, json header,
                         const json& claims) {
  if (key == nullptr) return Internal("no key");
  header["alg"] = std::string(alg);
  if (!kid.empty()) header["kid"] = kid;
  const std::string input = Base64UrlEncode(header.dump()) + "." + Base64UrlEncode(claims.dump());
  std::unique_ptr<EVP_MD_CTX, CtxFree> ctx(EVP_MD_CTX_new());
  size_t len = 0;
  if (!ctx || EVP_DigestSignInit(ctx.get(), nullptr, EVP_sha256(), nullptr, key) != 1 ||
      EVP_DigestSign(ctx.get(), nullptr, &len, reinterpret_cast<const unsigned char*>(input.data()),
                     input.size()) != 1) {
    return Internal("the key cannot sign");
  }
  std::string sig(len, '\0');
  if (EVP_DigestSign(ctx.get(), reinterpret_cast<unsigned char*>(sig.data()), &len,
                     reinterpret_cast<const unsigned char*>(input.data()), input.size()) != 1) {
    return Internal("signing failed");
  }
  sig.resize(len);
  if (alg == "ES256") {
    sig = DerToRaw(sig, 32);
    if (sig.empty()) return Internal("the ECDSA signature could not be converted");
  }
  return input + "." + Base64UrlEncode(sig);
}

Result<json> PublicJwk(EVP_PKEY* key, const std::string& kid, const std::string& alg) {
  json jwk = {{"kid", kid}, {"alg", alg}, {"use", "sig"}};
  if (EVP_PKEY_get_base_id(key) == EVP_PKEY_RSA) {
    BIGNUM* n = nullptr;
    BIGNUM* e = nullptr;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_N, &n) != 1 ||
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_RSA_E, &e) != 1) {
      BN_free(n);
      BN_free(e);
      return Internal("not an RSA public key");
    }
    jwk["kty"] = "RSA";
    jwk["n"] = Base64UrlEncode(BnBytes(n, 0));
    jwk["e"] = Base64UrlEncode(BnBytes(e, 0));
    BN_free(n);
    BN_free(e);
    return jwk;
  }
  if (IsEs256Key(key)) {
    BIGNUM* x = nullptr;
    BIGNUM* y = nullptr;
    if (EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_X, &x) != 1 ||
        EVP_PKEY_get_bn_param(key, OSSL_PKEY_PARAM_EC_PUB_Y, &y) != 1) {
      BN_free(x);
      BN_free(y);
      return Internal("not an EC public key");
    }
    jwk["kty"] = "EC";
    jwk["crv"] = "P-256";
    jwk["x"] = Base64UrlEncode(BnBytes(x, 32));
    jwk["y"] = Base64UrlEncode(BnBytes(y, 32));
    BN_free(x);
    BN_free(y);
    return jwk;
  }
  return Internal("only RSA and EC P-256 keys have a JWK here");
}

}  // namespace arbiter::server::jwt
