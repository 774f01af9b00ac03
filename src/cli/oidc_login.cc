#include "cli/oidc_login.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/stat.h>
#include <yaml-cpp/yaml.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace arbiter::cli {

using nlohmann::json;

namespace {

bool Base64UrlDecode(std::string_view text, std::string* out) {
  while (!text.empty() && text.back() == '=') text.remove_suffix(1);
  out->clear();
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
  return true;
}

std::string Str(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : "";
}

// The OAuth error of a token endpoint answer, as a sentence.
std::string OAuthError(const json& j) {
  const std::string e = Str(j, "error");
  const std::string d = Str(j, "error_description");
  return d.empty() ? e : fmt::format("{} ({})", e, d);
}

}  // namespace

OidcRenewal ReadOidcRenewal(const std::string& path) {
  OidcRenewal r;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return r;
  try {
    const YAML::Node doc = YAML::LoadFile(path);
    if (!doc.IsMap()) return r;
    auto get = [&](const char* key) {
      return doc[key] && doc[key].IsScalar() ? doc[key].as<std::string>() : std::string();
    };
    r.refresh_token = get("refresh_token");
    r.token_endpoint = get("oidc_token_endpoint");
    r.client_id = get("oidc_client_id");
  } catch (const YAML::Exception&) {
    return OidcRenewal();  // ReadConfigFile reports a malformed file
  }
  return r;
}

Status WriteConfigWithRenewal(const std::string& path, const ClientConfig& c,
                              const OidcRenewal& r) {
  ARBITER_RETURN_IF_ERROR(WriteConfigFile(path, c));
  if (r.refresh_token.empty()) return Status::Ok();
  std::stringstream text;
  {
    std::ifstream in(path);
    text << in.rdbuf();
  }
  // JSON strings are YAML's double-quoted scalars.
  text << "refresh_token: " << json(r.refresh_token).dump() << "\n"
       << "oidc_token_endpoint: " << json(r.token_endpoint).dump() << "\n"
       << "oidc_client_id: " << json(r.client_id).dump() << "\n";
  const std::string tmp = path + ".tmp";
  {
    const mode_t old = umask(077);  // a secret: the owner's only
    std::ofstream f(tmp, std::ios::trunc);
    umask(old);
    f << text.str();
    if (!f.good()) return Status(StatusCode::kInternal, fmt::format("cannot write {}", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    return Status(StatusCode::kInternal, fmt::format("cannot write {}: {}", path, ec.message()));
  }
  return Status::Ok();
}

int64_t JwtExpiry(std::string_view token) {
  const size_t a = token.find('.');
  if (a == std::string_view::npos || token.rfind("arb_", 0) == 0) return 0;
  const size_t b = token.find('.', a + 1);
  if (b == std::string_view::npos) return 0;
  std::string payload;
  if (!Base64UrlDecode(token.substr(a + 1, b - a - 1), &payload)) return 0;
  const json j = json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("exp") || !j["exp"].is_number()) return 0;
  return j["exp"].is_number_integer() ? j["exp"].get<int64_t>()
                                      : static_cast<int64_t>(j["exp"].get<double>());
}

Result<json> PostForm(const std::string& url, const std::map<std::string, std::string>& form,
                      int* status) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return InvalidArgument("", fmt::format("not a URL: {}", url));
  const size_t slash = url.find('/', scheme + 3);
  httplib::Client c(url.substr(0, slash));
  c.set_connection_timeout(10);
  c.set_read_timeout(30);
  httplib::Params params;
  for (const auto& [k, v] : form) params.emplace(k, v);
  auto r = c.Post(slash == std::string::npos ? "/" : url.substr(slash), params);
  if (!r) {
    return Status(StatusCode::kUnavailable, fmt::format("cannot reach the identity provider at "
                                                        "{}: {}",
                                                        url, httplib::to_string(r.error())));
  }
  *status = r->status;
  json j = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) {
    return Status(StatusCode::kUnavailable,
                  fmt::format("{} answered HTTP {} without JSON", url, r->status));
  }
  return j;
}

Status RefreshOidcToken(ClientConfig* cfg, const std::string& path, int64_t now) {
  const int64_t exp = JwtExpiry(cfg->token);
  if (exp == 0 || exp - now > 60) return Status::Ok();
  OidcRenewal renewal = ReadOidcRenewal(path);
  if (renewal.refresh_token.empty() || renewal.token_endpoint.empty()) return Status::Ok();
  int status = 0;
  auto r = PostForm(renewal.token_endpoint,
                    {{"grant_type", "refresh_token"},
                     {"refresh_token", renewal.refresh_token},
                     {"client_id", renewal.client_id}},
                    &status);
  if (!r.ok()) return r.status();
  const std::string id_token = Str(*r, "id_token");
  if (status != 200 || id_token.empty()) {
    return Status(
        StatusCode::kUnauthenticated,
        fmt::format("the sign-in expired and the identity provider refused to renew it "
                    "({}): log in again with `arbiter login --oidc --server {}`",
                    status == 200 ? "no id_token in its answer" : OAuthError(*r), cfg->server));
  }
  cfg->token = id_token;
  if (!Str(*r, "refresh_token").empty()) renewal.refresh_token = Str(*r, "refresh_token");
  return WriteConfigWithRenewal(path, *cfg, renewal);
}

int OidcLogin(const std::string& server, const std::string& queue, const std::string& scope,
              OutputFormat format) {
  ApiClient anonymous(Connection{server, "", ""});
  auto reply = anonymous.Send("GET", "/api/v1/auth/config", "", "");
  if (!reply.ok()) return Fail(reply.status());
  if (reply->status != 200) return Fail(anonymous.FromReply(*reply));
  const json config = json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  const json oidc = config.is_object() ? config.value("oidc", json()) : json();
  if (!oidc.is_object()) {
    return Fail(Status(StatusCode::kFailedPrecondition,
                       fmt::format("{} has no OIDC sign-in (identity.oidc is not configured): "
                                   "log in with a token instead",
                                   server)),
                kExitUnavailable);
  }
  const std::string device_endpoint = Str(oidc, "device_authorization_endpoint");
  const std::string token_endpoint = Str(oidc, "token_endpoint");
  const std::string client_id = Str(oidc, "client_id");
  if (device_endpoint.empty() || token_endpoint.empty()) {
    return Fail(
        Status(StatusCode::kFailedPrecondition,
               fmt::format("the identity provider {} offers no device sign-in{}: enable "
                           "the device authorization grant for client {}",
                           Str(oidc, "issuer"),
                           Str(oidc, "error").empty() ? "" : " (" + Str(oidc, "error") + ")",
                           client_id)),
        kExitUnavailable);
  }
  std::string scopes = scope.empty() ? "openid profile offline_access" : scope;
  if ((" " + scopes + " ").find(" openid ") == std::string::npos) scopes = "openid " + scopes;

  int status = 0;
  auto device = PostForm(device_endpoint, {{"client_id", client_id}, {"scope", scopes}}, &status);
  if (!device.ok()) return Fail(device.status());
  if (status != 200) {
    return Fail(Status(
        StatusCode::kUnauthenticated,
        fmt::format("the identity provider refused the device sign-in: {}", OAuthError(*device))));
  }
  const std::string device_code = Str(*device, "device_code");
  const std::string user_code = Str(*device, "user_code");
  const std::string verify = Str(*device, "verification_uri");
  const std::string verify_complete = Str(*device, "verification_uri_complete");
  int64_t interval = device->value("interval", int64_t{5});
  if (interval < 1) interval = 5;
  const int64_t expires_in = device->value("expires_in", int64_t{600});
  std::fprintf(stderr, "To sign in, open %s and enter the code %s\n", verify.c_str(),
               user_code.c_str());
  if (!verify_complete.empty()) std::fprintf(stderr, "(or open %s)\n", verify_complete.c_str());
  std::fprintf(stderr, "Waiting for the sign-in...\n");
  std::fflush(stderr);

  // Polls as RFC 8628 section 3.5 says: every `interval` seconds, 5 s slower at each slow_down.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(expires_in);
  json tokens;
  while (true) {
    if (std::chrono::steady_clock::now() >= deadline) {
      return Fail(Status(StatusCode::kUnauthenticated,
                         "the sign-in code expired before it was used: run the login again"));
    }
    std::this_thread::sleep_for(std::chrono::seconds(interval));
    auto r = PostForm(token_endpoint,
                      {{"grant_type", "urn:ietf:params:oauth:grant-type:device_code"},
                       {"device_code", device_code},
                       {"client_id", client_id}},
                      &status);
    if (!r.ok()) return Fail(r.status());
    if (status == 200) {
      tokens = *r;
      break;
    }
    const std::string error = Str(*r, "error");
    if (error == "authorization_pending") continue;
    if (error == "slow_down") {
      interval += 5;
      continue;
    }
    return Fail(Status(StatusCode::kUnauthenticated,
                       fmt::format("the sign-in did not complete: {}", OAuthError(*r))));
  }
  const std::string id_token = Str(tokens, "id_token");
  if (id_token.empty()) {
    return Fail(Status(StatusCode::kUnauthenticated,
                       "the identity provider sent no ID token: ask for the openid scope"));
  }
  ApiClient api(Connection{server, id_token, ""});
  auto who = api.Get("/api/v1/whoami");
  if (!who.ok()) return Fail(who.status());

  const std::string path = ConfigPath();
  auto cfg = ReadConfigFile(path);
  if (!cfg.ok()) return Fail(cfg.status(), kExitUsage);
  ClientConfig next;
  next.server = server;
  next.token = id_token;
  const OidcRenewal renewal{Str(tokens, "refresh_token"), token_endpoint, client_id};
  auto saved = NormaliseServerUrl(cfg->server.empty() ? server : cfg->server);
  next.queue = !queue.empty() ? queue : (saved.ok() && *saved == server ? cfg->queue : "");
  Status st = WriteConfigWithRenewal(path, next, renewal);
  if (!st.ok()) return Fail(st, kExitFailed);
  if (IsStructured(format)) {
    PrintStructured({{"server", server}, {"config", path}, {"whoami", *who}}, format);
  } else {
    const std::string tenant = who->value("tenant", "");
    std::printf("logged in to %s as %s (%srole %s) through %s; saved to %s\n", server.c_str(),
                who->value("user", "?").c_str(),
                tenant.empty() ? "" : fmt::format("tenant {}, ", tenant).c_str(),
                who->value("role", "?").c_str(), Str(oidc, "issuer").c_str(), path.c_str());
  }
  return kExitOk;
}

}  // namespace arbiter::cli
