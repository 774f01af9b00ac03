// `arbiter login --oidc`: the OAuth 2.0 device authorization grant (RFC 8628) against the
// identity provider the server names (GET /api/v1/auth/config), and the refresh of the saved ID
// token when it expires (docs/identity.md).
//
// What is saved: the ID token, as the bearer token (its aud is the client id, which the server's
// identity.oidc.audience must then be), plus the refresh token, the token endpoint and the client
// id that refresh it. Access tokens are not used: their format and audience differ from provider
// to provider (opaque, or for another resource), while every OIDC provider signs ID tokens.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "cli/client.h"
#include "cli/output.h"

namespace arbiter::cli {

// What renews an OIDC sign-in, saved beside the token in the configuration file (keys
// refresh_token, oidc_token_endpoint, oidc_client_id; WriteConfigFile drops them, as a new token
// or a logout should).
struct OidcRenewal {
  std::string refresh_token;
  std::string token_endpoint;
  std::string client_id;
};
// The renewal saved in the file at `path` (empty when none, or when the file is unreadable).
OidcRenewal ReadOidcRenewal(const std::string& path);
// WriteConfigFile, then the renewal's keys (when it has a refresh token).
Status WriteConfigWithRenewal(const std::string& path, const ClientConfig& c, const OidcRenewal& r);

// The exp claim of a JWT (seconds since the epoch); 0 when `token` is no JWT or has none. The
// token is not verified: the server does that.
int64_t JwtExpiry(std::string_view token);

// POST `url` with a form body; the parsed JSON answer of any status (OAuth errors are JSON 400s)
// with the HTTP status in `*status`.
Result<nlohmann::json> PostForm(const std::string& url,
                                const std::map<std::string, std::string>& form, int* status);

// When `cfg`'s token expires within 60 s of `now` and a refresh token is saved: a fresh ID token
// from the saved token endpoint, written back to `path`. Ok when nothing needed doing; an
// Unauthenticated error saying to log in again when the provider refused.
Status RefreshOidcToken(ClientConfig* cfg, const std::string& path, int64_t now);

// The device flow against `server`'s identity provider; saves the result as `arbiter login` does.
// `scope`: what to ask for ("openid" is added when missing).
int OidcLogin(const std::string& server, const std::string& queue, const std::string& scope,
              OutputFormat format);

}  // namespace arbiter::cli
