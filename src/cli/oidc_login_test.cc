#include "cli/oidc_login.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <string>

namespace arbiter::cli {
namespace {

// "eyJhbGciOiJub25lIn0" is {"alg":"none"}; the payloads below are base64url of their comments.
TEST(OidcLogin, JwtExpiry) {
  // {"exp":1800000000}
  EXPECT_EQ(JwtExpiry("eyJhbGciOiJub25lIn0.eyJleHAiOjE4MDAwMDAwMDB9.c2ln"), 1800000000);
  // {"sub":"a"}
  EXPECT_EQ(JwtExpiry("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.c2ln"), 0);
  EXPECT_EQ(JwtExpiry("arb_abc_def"), 0);
  EXPECT_EQ(JwtExpiry("not-a-jwt"), 0);
  EXPECT_EQ(JwtExpiry("a.!!!.c"), 0);
}

TEST(OidcLogin, NothingToRefresh) {
  ClientConfig c;
  c.token = "arb_abc_def";
  EXPECT_TRUE(RefreshOidcToken(&c, "", 0).ok());  // not a JWT: nothing to do
  c.token = "eyJhbGciOiJub25lIn0.eyJleHAiOjE4MDAwMDAwMDB9.c2ln";
  EXPECT_TRUE(RefreshOidcToken(&c, "", 1800000000 - 3600).ok());  // an hour left
  EXPECT_TRUE(RefreshOidcToken(&c, "", 1800000000).ok());         // no refresh token saved
  EXPECT_EQ(c.token, "eyJhbGciOiJub25lIn0.eyJleHAiOjE4MDAwMDAwMDB9.c2ln");
}

TEST(OidcLogin, ConfigFileKeepsTheRefreshToken) {
  const std::string dir = std::filesystem::temp_directory_path() / "arbiter-oidc-login-test";
  std::filesystem::remove_all(dir);
  const std::string path = dir + "/config.yaml";
  ClientConfig c;
  c.server = "http://h:1";
  c.token = "eyJ.x.y";
  ASSERT_TRUE(WriteConfigWithRenewal(path, c, {"r-1", "https://idp/token", "arbiter"}).ok());
  auto back = ReadConfigFile(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->token, "eyJ.x.y");
  const OidcRenewal r = ReadOidcRenewal(path);
  EXPECT_EQ(r.refresh_token, "r-1");
  EXPECT_EQ(r.token_endpoint, "https://idp/token");
  EXPECT_EQ(r.client_id, "arbiter");
  // A plain write (a token login, a logout) drops the renewal.
  ASSERT_TRUE(WriteConfigFile(path, c).ok());
  EXPECT_EQ(ReadOidcRenewal(path).refresh_token, "");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace arbiter::cli
