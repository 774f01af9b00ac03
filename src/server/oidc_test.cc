#include "server/oidc.h"

#include <gtest/gtest.h>
#include <openssl/ec.h>
#include <openssl/evp.h>
#include <openssl/rsa.h>

#include <map>

#include "server/jwt.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr const char* kIssuer = "https://idp.example.com";
constexpr int64_t kNow = 1'800'000'000;

jwt::Pkey NewRsaKey() { return jwt::Pkey(EVP_RSA_gen(2048)); }
jwt::Pkey NewEcKey() { return jwt::Pkey(EVP_EC_gen("P-256")); }
// The issuer's keys, made once: RSA key generation takes a while.
EVP_PKEY* IssuerRsa() {
  static EVP_PKEY* const k = EVP_RSA_gen(2048);
  return k;
}
EVP_PKEY* IssuerEc() {
  static EVP_PKEY* const k = EVP_EC_gen("P-256");
  return k;
}

json Claims() {
  return {{"iss", kIssuer},
          {"aud", "arbiter"},
          {"sub", "u-1"},
          {"exp", kNow + 300},
          {"iat", kNow - 10},
          {"nbf", kNow - 10},
          {"preferred_username", "alice"},
          {"groups", {"vision-team", "everyone"}}};
}

std::string SignedBy(EVP_PKEY* key, const std::string& alg, const std::string& kid,
                     const json& claims) {
  auto t = jwt::Sign(alg, key, kid, {{"typ", "JWT"}}, claims);
  EXPECT_TRUE(t.ok()) << t.status().ToString();
  return t.ok() ? *t : "";
}

// A provider: its discovery document and JWK set served by a fake fetch, counting fetches.
struct FakeIssuer {
  std::map<std::string, std::string> docs;
  int jwks_fetches = 0;
  bool down = false;

  FakeIssuer() {
    docs[std::string(kIssuer) + "/.well-known/openid-configuration"] = json{
        {"issuer", kIssuer},
        {"jwks_uri", std::string(kIssuer) + "/jwks"},
        {"authorization_endpoint", std::string(kIssuer) + "/auth"},
        {"token_endpoint", std::string(kIssuer) + "/token"},
        {"device_authorization_endpoint",
         std::string(kIssuer) + "/device/auth"}}.dump();
  }
  void SetKeys(const std::vector<std::tuple<EVP_PKEY*, std::string, std::string>>& keys) {
    json set = {{"keys", json::array()}};
    for (const auto& [k, kid, alg] : keys) {
      auto jwk = jwt::PublicJwk(k, kid, alg);
      EXPECT_TRUE(jwk.ok());
      set["keys"].push_back(*jwk);
    }
    docs[std::string(kIssuer) + "/jwks"] = set.dump();
  }
  OidcVerifier::Fetch Fetch() {
    return [this](const std::string& url) -> Result<std::string> {
      if (down) return Status(StatusCode::kUnavailable, "connection refused");
      if (url.size() >= 5 && url.substr(url.size() - 5) == "/jwks") ++jwks_fetches;
      auto it = docs.find(url);
      if (it == docs.end()) return Status(StatusCode::kUnavailable, "HTTP 404");
      return it->second;
    };
  }
};

api::IdentityConfig Identity() {
  api::IdentityConfig c;
  api::OidcConfig o;
  o.issuer = kIssuer;
  o.audience = "arbiter";
  o.client_id = "arbiter-cli";
  c.oidc = o;
  c.mappings.push_back({"vision-team", "", "vision", "member"});
  c.mappings.push_back({"", "root", "", "admin"});
  return c;
}

class OidcVerifierTest : public ::testing::Test {
 protected:
  OidcVerifierTest() : verifier_(issuer_.Fetch(), [this] { return now_; }) {
    issuer_.SetKeys({{rsa_.get(), "r1", "RS256"}, {ec_.get(), "e1", "ES256"}});
    verifier_.Configure(Identity());
  }
  void ExpectUnauthenticated(const std::string& token, const std::string& words) {
    auto p = verifier_.Authenticate(token);
    ASSERT_FALSE(p.ok()) << words;
    EXPECT_EQ(p.status().code(), StatusCode::kUnauthenticated) << p.status().ToString();
    EXPECT_EQ(p.status().field(), "Authorization");
    EXPECT_NE(p.status().message().find(words), std::string::npos) << p.status().message();
  }

  jwt::Pkey rsa_{EVP_PKEY_dup(IssuerRsa())};
  jwt::Pkey ec_{EVP_PKEY_dup(IssuerEc())};
  FakeIssuer issuer_;
  int64_t now_ = kNow;
  OidcVerifier verifier_;
};

TEST(Jwt, Base64Url) {
  for (const std::string s : {"", "f", "fo", "foo", "foob", "fooba", "foobar", "\xff\xfe\x00"}) {
    std::string back;
    ASSERT_TRUE(jwt::Base64UrlDecode(jwt::Base64UrlEncode(s), &back));
    EXPECT_EQ(back, s);
  }
  EXPECT_EQ(jwt::Base64UrlEncode("\xfb\xff"), "-_8");
  std::string out;
  EXPECT_FALSE(jwt::Base64UrlDecode("a+b/", &out));
  EXPECT_FALSE(jwt::Base64UrlDecode("a", &out));
  EXPECT_TRUE(jwt::Base64UrlDecode("Zm8=", &out));
  EXPECT_EQ(out, "fo");
}

TEST(Jwt, LooksLikeJwt) {
  EXPECT_TRUE(jwt::LooksLikeJwt("eyJh.eyJi.c2ln"));
  EXPECT_FALSE(jwt::LooksLikeJwt("arb_abc_def"));
  EXPECT_FALSE(jwt::LooksLikeJwt("arb_a.b.c"));
  EXPECT_FALSE(jwt::LooksLikeJwt("a.b"));
  EXPECT_FALSE(jwt::LooksLikeJwt("a.b.c.d"));
  EXPECT_FALSE(jwt::LooksLikeJwt("a b.c.d"));
  EXPECT_FALSE(jwt::LooksLikeJwt(""));
}

TEST(Jwt, SignsAndVerifiesBothAlgorithms) {
  jwt::Pkey rsa = NewRsaKey();
  jwt::Pkey ec = NewEcKey();
  for (auto [key, alg] : {std::pair{rsa.get(), "RS256"}, std::pair{ec.get(), "ES256"}}) {
    const std::string token = SignedBy(key, alg, "k", Claims());
    auto t = jwt::Parse(token);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    EXPECT_EQ(t->alg, alg);
    EXPECT_EQ(t->kid, "k");
    if (std::string(alg) == "ES256") {
      EXPECT_EQ(t->signature.size(), 64u);  // raw r||s
    }
    // Through the public JWK, as a verifier gets it.
    auto jwk = jwt::PublicJwk(key, "k", alg);
    ASSERT_TRUE(jwk.ok());
    auto pub = jwt::KeyFromJwk(*jwk);
    ASSERT_TRUE(pub.ok()) << pub.status().ToString();
    EXPECT_EQ(pub->alg, alg);
    EXPECT_TRUE(jwt::VerifySignature(alg, pub->pkey.get(), t->signing_input, t->signature));
    // Another payload under the same signature fails.
    EXPECT_FALSE(jwt::VerifySignature(alg, pub->pkey.get(), t->signing_input + "x", t->signature));
  }
  // An RSA key does not verify ES256, nor an EC key RS256.
  const std::string es = SignedBy(ec.get(), "ES256", "", Claims());
  auto t = jwt::Parse(es);
  ASSERT_TRUE(t.ok());
  EXPECT_FALSE(jwt::VerifySignature("RS256", rsa.get(), t->signing_input, t->signature));
  EXPECT_FALSE(jwt::VerifySignature("ES256", rsa.get(), t->signing_input, t->signature));
}

TEST(Jwt, RefusesOtherAlgorithms) {
  const std::string body = jwt::Base64UrlEncode(Claims().dump());
  for (const char* alg : {"none", "HS256", "RS512", ""}) {
    const std::string token =
        jwt::Base64UrlEncode(json{{"alg", alg}}.dump()) + "." + body + ".c2ln";
    auto t = jwt::Parse(token);
    ASSERT_FALSE(t.ok()) << alg;
    EXPECT_NE(t.status().message().find("only RS256 and ES256"), std::string::npos);
  }
}

TEST(Jwt, JwksSkipsOtherKeys) {
  jwt::Pkey rsa = NewRsaKey();
  json set = {{"keys",
               {*jwt::PublicJwk(rsa.get(), "r", "RS256"),
                {{"kty", "oct"}, {"k", "c2VjcmV0"}, {"kid", "h"}},
                {{"kty", "EC"}, {"crv", "P-384"}, {"x", "AA"}, {"y", "AA"}, {"kid", "p384"}}}}};
  set["keys"].push_back(*jwt::PublicJwk(rsa.get(), "enc", "RS256"));
  set["keys"][3]["use"] = "enc";
  auto keys = jwt::ParseJwks(set.dump());
  ASSERT_TRUE(keys.ok());
  ASSERT_EQ(keys->size(), 1u);
  EXPECT_EQ((*keys)[0].kid, "r");
  EXPECT_FALSE(jwt::ParseJwks("{}").ok());
  EXPECT_FALSE(jwt::ParseJwks("not json").ok());
}

TEST(Jwt, Claims) {
  const jwt::ClaimRules rules{kIssuer, "arbiter", 60};
  EXPECT_TRUE(jwt::CheckClaims(Claims(), rules, kNow).ok());
  auto message = [&](json c, int64_t now = kNow) {
    Status st = jwt::CheckClaims(c, rules, now);
    EXPECT_EQ(st.code(), StatusCode::kUnauthenticated);
    return st.message();
  };
  json c = Claims();
  // Within the skew: still good; beyond it: expired.
  EXPECT_TRUE(jwt::CheckClaims(c, rules, kNow + 300 + 60).ok());
  EXPECT_NE(message(c, kNow + 300 + 61).find("expired"), std::string::npos);
  c.erase("exp");
  EXPECT_NE(message(c).find("no \"exp\""), std::string::npos);
  c = Claims();
  c["exp"] = "tomorrow";
  EXPECT_NE(message(c).find("malformed"), std::string::npos);
  c = Claims();
  c["nbf"] = kNow + 120;
  EXPECT_NE(message(c).find("not yet valid"), std::string::npos);
  c["nbf"] = kNow + 50;  // within the skew
  EXPECT_TRUE(jwt::CheckClaims(c, rules, kNow).ok());
  c = Claims();
  c["iat"] = kNow + 120;
  EXPECT_NE(message(c).find("not yet valid"), std::string::npos);
  c = Claims();
  c["iss"] = "https://idp.example.com/";  // exactly equal, not "the same site"
  EXPECT_NE(message(c).find("wrong issuer"), std::string::npos);
  c = Claims();
  c["aud"] = "other";
  EXPECT_NE(message(c).find("wrong audience"), std::string::npos);
  c["aud"] = {"other", "arbiter"};
  EXPECT_TRUE(jwt::CheckClaims(c, rules, kNow).ok());
  c["aud"] = {"other"};
  EXPECT_NE(message(c).find("wrong audience"), std::string::npos);
  c.erase("aud");
  EXPECT_NE(message(c).find("wrong audience"), std::string::npos);
}

TEST_F(OidcVerifierTest, AcceptsBothAlgorithmsAndMaps) {
  for (auto [key, alg, kid] :
       {std::tuple{rsa_.get(), "RS256", "r1"}, std::tuple{ec_.get(), "ES256", "e1"}}) {
    auto p = verifier_.Authenticate(SignedBy(key, alg, kid, Claims()));
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->user, "alice");
    EXPECT_EQ(p->tenant, "vision");
    EXPECT_EQ(p->role, Role::kMember);
    EXPECT_EQ(p->token_id, "oidc:alice");
  }
  EXPECT_EQ(issuer_.jwks_fetches, 1);  // cached
  // A single-string groups claim; a mapping by user name (admin, no tenant).
  json c = Claims();
  c["groups"] = "vision-team";
  EXPECT_TRUE(verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c)).ok());
  c["preferred_username"] = "root";
  c.erase("groups");
  auto admin = verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c));
  ASSERT_TRUE(admin.ok());
  EXPECT_EQ(admin->role, Role::kAdmin);
  EXPECT_EQ(admin->tenant, "");
}

TEST_F(OidcVerifierTest, UnmappedUserIsForbidden) {
  json c = Claims();
  c["preferred_username"] = "bob";
  c["groups"] = {"sales"};
  auto p = verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kPermissionDenied);
  EXPECT_NE(p.status().message().find("not mapped to any tenant/role"), std::string::npos);
  EXPECT_NE(p.status().message().find("sales"), std::string::npos);
  EXPECT_EQ(p.status().field(), "Authorization");
}

TEST_F(OidcVerifierTest, ReservedNamesAreRefused) {
  for (const char* name : {"admin", "anonymous"}) {
    json c = Claims();
    c["preferred_username"] = name;
    auto p = verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c));
    ASSERT_FALSE(p.ok()) << name;
    EXPECT_EQ(p.status().code(), StatusCode::kPermissionDenied);
    EXPECT_NE(p.status().message().find("reserved"), std::string::npos);
  }
}

TEST_F(OidcVerifierTest, EveryFailureSaysWhat) {
  json c = Claims();
  c["exp"] = kNow - 3600;
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", c), "expired");
  c = Claims();
  c["nbf"] = kNow + 3600;
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", c), "not yet valid");
  c = Claims();
  c["aud"] = "someone-else";
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", c), "wrong audience");
  c = Claims();
  c["iss"] = "https://evil.example.com";
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", c), "wrong issuer");
  c = Claims();
  c.erase("preferred_username");
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", c), "preferred_username");
  // Signed by a key the issuer never published, under a kid it does publish.
  jwt::Pkey stranger = NewRsaKey();
  ExpectUnauthenticated(SignedBy(stranger.get(), "RS256", "r1", Claims()), "bad signature");
  // A kid the issuer does not have.
  ExpectUnauthenticated(SignedBy(stranger.get(), "RS256", "nope", Claims()), "unknown key");
  // The alg of the header says ES256, the kid names the RSA key.
  ExpectUnauthenticated(SignedBy(ec_.get(), "ES256", "r1", Claims()), "unknown key");
  // A signature tampered with, a payload changed.
  std::string good = SignedBy(rsa_.get(), "RS256", "r1", Claims());
  std::string tampered = good;
  tampered[tampered.size() - 5] = tampered[tampered.size() - 5] == 'A' ? 'B' : 'A';
  ExpectUnauthenticated(tampered, "bad signature");
  const size_t dot = good.find('.');
  json other = Claims();
  other["preferred_username"] = "root";
  const std::string swapped =
      good.substr(0, dot + 1) + jwt::Base64UrlEncode(other.dump()) + good.substr(good.rfind('.'));
  ExpectUnauthenticated(swapped, "bad signature");
  ExpectUnauthenticated("abc.def.ghi", "malformed");
  ExpectUnauthenticated("a.b", "malformed");
  // alg none, HS256 with the public key as the secret: refused before any key is looked at.
  const std::string body = jwt::Base64UrlEncode(Claims().dump());
  ExpectUnauthenticated(jwt::Base64UrlEncode(R"({"alg":"none"})") + "." + body + ".",
                        "\"none\" is not accepted");
  ExpectUnauthenticated(jwt::Base64UrlEncode(R"({"alg":"none"})") + "." + body + ".c2ln",
                        "\"none\" is not accepted");
  ExpectUnauthenticated(
      jwt::Base64UrlEncode(R"({"alg":"HS256","kid":"r1"})") + "." + body + ".c2ln",
      "\"HS256\" is not accepted");
}

TEST_F(OidcVerifierTest, RotatedKeyIsFetchedAndUnknownKidsAreRateLimited) {
  ASSERT_TRUE(verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", Claims())).ok());
  EXPECT_EQ(issuer_.jwks_fetches, 1);
  // The issuer rotates: a new key, the old one gone.
  jwt::Pkey next = NewRsaKey();
  issuer_.SetKeys({{next.get(), "r2", "RS256"}});
  now_ += OidcVerifier::kUnknownKidRefreshSeconds;
  auto p = verifier_.Authenticate(SignedBy(next.get(), "RS256", "r2", Claims()));
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(issuer_.jwks_fetches, 2);
  // Unknown kids within the rate limit fetch nothing more.
  for (int i = 0; i < 5; ++i) {
    ExpectUnauthenticated(SignedBy(next.get(), "RS256", "x" + std::to_string(i), Claims()),
                          "unknown key");
  }
  EXPECT_EQ(issuer_.jwks_fetches, 2);
  now_ += OidcVerifier::kUnknownKidRefreshSeconds;
  ExpectUnauthenticated(SignedBy(next.get(), "RS256", "x", Claims()), "unknown key");
  EXPECT_EQ(issuer_.jwks_fetches, 3);
  // The old key no longer verifies (it left the set).
  now_ += OidcVerifier::kUnknownKidRefreshSeconds;
  ExpectUnauthenticated(SignedBy(rsa_.get(), "RS256", "r1", Claims()), "unknown key");
}

TEST_F(OidcVerifierTest, PeriodicRefreshKeepsOldKeysWhenTheIssuerIsDown) {
  ASSERT_TRUE(verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", Claims())).ok());
  issuer_.down = true;
  now_ += OidcVerifier::kRefreshSeconds;
  json c = Claims();
  c["exp"] = now_ + 300;
  c["iat"] = now_;
  c["nbf"] = now_;
  EXPECT_TRUE(verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c)).ok());
  issuer_.down = false;
  now_ += OidcVerifier::kRefreshSeconds;
  c["exp"] = now_ + 300;
  EXPECT_TRUE(verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", c)).ok());
  EXPECT_EQ(issuer_.jwks_fetches, 2);
}

TEST_F(OidcVerifierTest, UnreachableIssuerIsUnavailable) {
  issuer_.down = true;
  auto p = verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", Claims()));
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(p.status().message().find("connection refused"), std::string::npos);
}

TEST_F(OidcVerifierTest, NotConfigured) {
  OidcVerifier off(issuer_.Fetch());
  EXPECT_FALSE(off.enabled());
  auto p = off.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", Claims()));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("identity.oidc is not configured"), std::string::npos);
  EXPECT_TRUE(off.ClientConfig()["oidc"].is_null());
}

TEST_F(OidcVerifierTest, ClientConfigHasTheEndpoints) {
  const json c = verifier_.ClientConfig();
  EXPECT_EQ(c["oidc"]["issuer"], kIssuer);
  EXPECT_EQ(c["oidc"]["client_id"], "arbiter-cli");
  EXPECT_EQ(c["oidc"]["token_endpoint"], std::string(kIssuer) + "/token");
  EXPECT_EQ(c["oidc"]["device_authorization_endpoint"], std::string(kIssuer) + "/device/auth");
  EXPECT_EQ(c["oidc"]["authorization_endpoint"], std::string(kIssuer) + "/auth");
}

TEST_F(OidcVerifierTest, DiscoveryNamingAnotherIssuerIsRefused) {
  issuer_.docs[std::string(kIssuer) + "/.well-known/openid-configuration"] =
      json{{"issuer", "https://elsewhere"}, {"jwks_uri", std::string(kIssuer) + "/jwks"}}.dump();
  auto p = verifier_.Authenticate(SignedBy(rsa_.get(), "RS256", "r1", Claims()));
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("names issuer"), std::string::npos);
}

}  // namespace
}  // namespace arbiter::server
