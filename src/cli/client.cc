#include "cli/client.h"

#include <fmt/format.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "api/errors.h"
#include "cli/commands.h"
#include "cli/oidc_login.h"
#include "common/server_list.h"

namespace arbiter::cli {

using nlohmann::json;

int ExitCodeFor(const Status& s) {
  switch (s.code()) {
    case StatusCode::kOk:
      return kExitOk;
    case StatusCode::kUnavailable:
      return kExitUnreachable;
    case StatusCode::kUnauthenticated:
    case StatusCode::kPermissionDenied:
      return kExitAuth;
    default:
      return kExitFailed;
  }
}

std::string Describe(const Status& s) {
  if (s.field().empty()) return s.message();
  // A message that starts with what the field names ("queue X not found" for "queue") reads
  // well alone; others get the field in front ("resources.gpus: must be ...").
  std::string last = s.field();
  const size_t cut = last.find_last_of('.');
  if (cut != std::string::npos) last = last.substr(cut + 1);
  const std::string& m = s.message();
  if (m.rfind(s.field(), 0) == 0 || (!last.empty() && m.rfind(last, 0) == 0)) return m;
  return fmt::format("{}: {}", s.field(), m);
}

int Fail(const Status& s) { return Fail(s, ExitCodeFor(s)); }

int Fail(const Status& s, int exit_code) {
  std::fprintf(stderr, "error: %s\n", Describe(s).c_str());
  return exit_code;
}

// --- Settings --------------------------------------------------------------------------------

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

}  // namespace

std::string ConfigPath() {
  if (!Env("ARBITER_CONFIG").empty()) return Env("ARBITER_CONFIG");
  if (!Env("XDG_CONFIG_HOME").empty()) return Env("XDG_CONFIG_HOME") + "/arbiter/config.yaml";
  if (!Env("HOME").empty()) return Env("HOME") + "/.config/arbiter/config.yaml";
  return "";
}

Result<ClientConfig> ReadConfigFile(const std::string& path) {
  ClientConfig c;
  std::error_code ec;
  if (path.empty() || !std::filesystem::exists(path, ec)) return c;
  try {
    const YAML::Node doc = YAML::LoadFile(path);
    if (doc.IsNull()) return c;
    if (!doc.IsMap()) {
      return InvalidArgument("",
                             fmt::format("{}: must be a mapping of server, token, queue", path));
    }
    for (const auto& kv : doc) {
      const std::string key = kv.first.as<std::string>();
      if (!kv.second.IsScalar()) {
        return InvalidArgument("", fmt::format("{}: {} must be a string", path, key));
      }
      const std::string value = kv.second.as<std::string>();
      if (key == "server") {
        c.server = value;
      } else if (key == "token") {
        c.token = value;
      } else if (key == "queue") {
        c.queue = value;
      } else if (key == "refresh_token" || key == "oidc_token_endpoint" ||
                 key == "oidc_client_id") {
        // An OIDC sign-in's renewal: read by cli/oidc_login.h (ReadOidcRenewal).
      } else {
        return InvalidArgument(
            "", fmt::format("{}: unknown key '{}' (allowed: server, token, queue, refresh_token, "
                            "oidc_token_endpoint, oidc_client_id)",
                            path, key));
      }
    }
  } catch (const YAML::Exception& e) {
    return InvalidArgument("", fmt::format("{}: not valid YAML: {}", path, e.what()));
  }
  return c;
}

Status WriteConfigFile(const std::string& path, const ClientConfig& c) {
  if (path.empty()) {
    return FailedPrecondition("no place for the configuration: set HOME or ARBITER_CONFIG");
  }
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path p(path);
  if (p.has_parent_path()) {
    fs::create_directories(p.parent_path(), ec);
    if (ec) {
      return Status(StatusCode::kInternal,
                    fmt::format("cannot create {}: {}", p.parent_path().string(), ec.message()));
    }
  }
  YAML::Emitter e;
  e << YAML::BeginMap;
  e << YAML::Key << "server" << YAML::Value << YAML::DoubleQuoted << c.server;
  e << YAML::Key << "token" << YAML::Value << YAML::DoubleQuoted << c.token;
  if (!c.queue.empty()) e << YAML::Key << "queue" << YAML::Value << YAML::DoubleQuoted << c.queue;
  e << YAML::EndMap;
  const std::string tmp = path + ".tmp";
  {
    // The token is a secret: the file is readable by its owner only.
    const mode_t old = umask(077);
    std::ofstream f(tmp, std::ios::trunc);
    umask(old);
    if (!f) return Status(StatusCode::kInternal, fmt::format("cannot write {}", tmp));
    f << "# Written by `arbiter login`.\n" << e.c_str() << "\n";
    if (!f.good()) return Status(StatusCode::kInternal, fmt::format("cannot write {}", tmp));
  }
  chmod(tmp.c_str(), 0600);
  fs::rename(tmp, p, ec);
  if (ec)
    return Status(StatusCode::kInternal, fmt::format("cannot write {}: {}", path, ec.message()));
  return Status::Ok();
}

Result<std::string> NormaliseServerUrl(std::string_view url) {
  std::string u(url);
  while (!u.empty() && (u.back() == '/' || u.back() == ' ')) u.pop_back();
  while (!u.empty() && u.front() == ' ') u.erase(u.begin());
  if (u.empty()) return InvalidArgument("server", "the server URL is empty");
  if (u.find("://") == std::string::npos) u = fmt::format("http://{}", u);
  const size_t colon = u.find("://");
  const std::string scheme = u.substr(0, colon);
  if (scheme != "http" && scheme != "https") {
    return InvalidArgument("server", fmt::format("{}: use an http:// or https:// URL", url));
  }
  const std::string rest = u.substr(colon + 3);
  if (rest.empty() || rest.front() == '/' || rest.front() == ':') {
    return InvalidArgument("server", fmt::format("{}: the URL names no host", url));
  }
  return u;
}

namespace {

// Several servers on one store: "a, b" -> "http://a,http://b" (each normalised).
Result<std::string> NormaliseServerList(std::string_view urls) {
  std::string out;
  for (const std::string& url : SplitServerUrls(urls)) {
    auto norm = NormaliseServerUrl(url);
    if (!norm.ok()) return norm.status();
    out += (out.empty() ? "" : ",") + *norm;
  }
  if (out.empty()) return InvalidArgument("server", "the server URL is empty");
  return out;
}

}  // namespace

Result<Connection> ResolveConnection(const ClientFlags& flags) {
  auto cfg = ReadConfigFile(ConfigPath());
  if (!cfg.ok()) return cfg.status();
  Connection c;
  std::string server = flags.server;
  if (server.empty()) server = Env("ARBITER_SERVER");
  if (server.empty()) server = cfg->server;
  if (server.empty()) server = kDefaultServer;
  auto norm = NormaliseServerList(server);
  if (!norm.ok()) return norm.status();
  c.server = *norm;
  // The saved token and queue belong to the saved server: never send them anywhere else.
  bool same_server = false;
  if (!cfg->server.empty()) {
    auto saved = NormaliseServerList(cfg->server);
    same_server = saved.ok() && *saved == c.server;
  }
  c.token = flags.token;
  if (c.token.empty()) c.token = Env("ARBITER_TOKEN");
  if (c.token.empty() && same_server) {
    // An expired OIDC sign-in is renewed with its refresh token first (cli/oidc_login.h).
    const int64_t now = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
    ARBITER_RETURN_IF_ERROR(RefreshOidcToken(&*cfg, ConfigPath(), now));
    c.token = cfg->token;
  }
  c.queue = Env("ARBITER_QUEUE");
  if (c.queue.empty() && same_server) c.queue = cfg->queue;
  return c;
}

// --- HTTP ------------------------------------------------------------------------------------

namespace {

// scheme://host:port and /base of a server URL.
void SplitUrl(const std::string& url, std::string* origin, std::string* base_path) {
  const size_t scheme = url.find("://");
  const size_t scheme_end = scheme == std::string::npos ? 0 : scheme + 3;
  const size_t slash = url.find('/', scheme_end);
  *origin = slash == std::string::npos ? url : url.substr(0, slash);
  *base_path = slash == std::string::npos ? "" : url.substr(slash);
}

}  // namespace

// c_.server may name several servers (a,b,c): origin_ and base_path_ are the one in use.
ApiClient::ApiClient(Connection c) : c_(std::move(c)) {
  const std::vector<std::string> servers = SplitServerUrls(c_.server);
  SplitUrl(servers.empty() ? c_.server : servers.front(), &origin_, &base_path_);
}

ApiClient::~ApiClient() = default;

std::unique_ptr<httplib::Client> ApiClient::Open(int read_timeout_s) const {
  auto cli = std::make_unique<httplib::Client>(origin_);
  cli->set_connection_timeout(5);
  cli->set_read_timeout(read_timeout_s);
  cli->set_write_timeout(30);
  cli->set_tcp_nodelay(true);
  if (!c_.token.empty()) cli->set_bearer_token_auth(c_.token);
  return cli;
}

Status ApiClient::NeedToken() const {
  if (!c_.token.empty()) return Status::Ok();
  return Status(StatusCode::kUnauthenticated,
                fmt::format("no token for {}: log in with `arbiter login --server {} --token "
                            "TOKEN` (the first admin token is in the server's DATA_DIR/"
                            "admin.token), or set --token/ARBITER_TOKEN",
                            c_.server, c_.server));
}

Status ApiClient::FromTransportError(int error, const std::string& path) const {
  const auto e = static_cast<httplib::Error>(error);
  switch (e) {
    case httplib::Error::Connection:
      return Status(StatusCode::kUnavailable,
                    fmt::format("cannot reach the server at {}: is it running? (arbiter server, "
                                "or set --server/ARBITER_SERVER)",
                                c_.server));
    case httplib::Error::ConnectionTimeout:
      return Status(StatusCode::kUnavailable,
                    fmt::format("the server at {} did not accept a connection within 5 s: is the "
                                "address right? (--server/ARBITER_SERVER)",
                                c_.server));
    case httplib::Error::Read:
      return Status(StatusCode::kUnavailable,
                    fmt::format("the server at {} closed the connection or did not answer {} in "
                                "time; is it restarting?",
                                c_.server, path));
    case httplib::Error::SSLConnection:
    case httplib::Error::SSLServerVerification:
    case httplib::Error::SSLLoadingCerts:
      return Status(StatusCode::kUnavailable,
                    fmt::format("TLS with {} failed ({}): check the URL's scheme and the "
                                "server's certificate",
                                c_.server, httplib::to_string(e)));
    default:
      return Status(StatusCode::kUnavailable, fmt::format("request to {}{} failed: {}", c_.server,
                                                          path, httplib::to_string(e)));
  }
}

Status ApiClient::FromReply(const HttpReply& r) const {
  const Status reply = api::StatusFromErrorReply(r.status, r.body);
  const StatusCode code = reply.code();
  std::string message = reply.message();
  if (message.empty()) {
    message = fmt::format("the server at {} answered HTTP {}{}", c_.server, r.status,
                          r.status == 404 ? " (is it an Arbiter server of this version?)" : "");
  }
  if (code == StatusCode::kUnauthenticated) {
    message = fmt::format(
        "{}: the server at {} refused the token; log in with `arbiter login "
        "--server {} --token TOKEN`, or set --token/ARBITER_TOKEN",
        message, c_.server, c_.server);
  }
  return Status(code, message, reply.field());
}

Result<HttpReply> ApiClient::Send(const std::string& method, const std::string& path,
                                  const std::string& body, const std::string& content_type,
                                  const HeaderMap& headers) {
  if (method != "GET" && method != "POST" && method != "PUT" && method != "DELETE") {
    return Internal(fmt::format("unknown method {}", method));
  }
  httplib::Headers h;
  for (const auto& [k, v] : headers) h.emplace(k, v);
  // Several servers (--server a,b,c): the next one when one cannot be reached, the leader when a
  // follower names it; the one that answers is kept for the next calls.
  const std::vector<std::string> servers = SplitServerUrls(c_.server);
  httplib::Result res{nullptr, httplib::Error::Unknown};
  for (size_t tries = 0; tries < servers.size() + 1; ++tries) {
    auto cli = Open(60);
    const std::string full = base_path_ + path;
    if (method == "GET") {
      res = cli->Get(full, h);
    } else if (method == "POST") {
      res = cli->Post(full, h, body, content_type);
    } else if (method == "PUT") {
      res = cli->Put(full, h, body, content_type);
    } else {
      res = cli->Delete(full, h, body, content_type);
    }
    const std::string current = origin_ + base_path_;
    if (res && res->status == 503 && res->has_header(kLeaderHeader) &&
        res->get_header_value(kLeaderHeader) != current) {
      SplitUrl(res->get_header_value(kLeaderHeader), &origin_, &base_path_);
      continue;
    }
    const bool unreachable = !res && (res.error() == httplib::Error::Connection ||
                                      res.error() == httplib::Error::ConnectionTimeout);
    if (!unreachable || servers.size() <= 1) break;
    auto it = std::find(servers.begin(), servers.end(), current);
    SplitUrl(it == servers.end() || it + 1 == servers.end() ? servers.front() : *(it + 1), &origin_,
             &base_path_);
  }
  if (!res) return FromTransportError(static_cast<int>(res.error()), path);
  HttpReply r;
  r.status = res->status;
  r.body = res->body;
  r.content_type = res->get_header_value("Content-Type");
  return r;
}

namespace {

Result<json> ParseReply(const HttpReply& r, const std::string& server) {
  if (r.body.empty()) return json();
  json j = json::parse(r.body, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return Internal(fmt::format("the server at {} answered something that is not JSON", server));
  }
  return j;
}

}  // namespace

Result<json> ApiClient::Get(const std::string& path) {
  ARBITER_RETURN_IF_ERROR(NeedToken());
  auto r = Send("GET", path, "", "");
  if (!r.ok()) return r.status();
  if (r->status < 200 || r->status >= 300) return FromReply(*r);
  return ParseReply(*r, c_.server);
}

Result<json> ApiClient::Post(const std::string& path, const json& body, const HeaderMap& headers) {
  ARBITER_RETURN_IF_ERROR(NeedToken());
  auto r = Send("POST", path, body.is_null() ? "" : body.dump(), "application/json", headers);
  if (!r.ok()) return r.status();
  if (r->status < 200 || r->status >= 300) return FromReply(*r);
  return ParseReply(*r, c_.server);
}

Result<json> ApiClient::Put(const std::string& path, const std::string& body,
                            const std::string& content_type) {
  ARBITER_RETURN_IF_ERROR(NeedToken());
  auto r = Send("PUT", path, body, content_type);
  if (!r.ok()) return r.status();
  if (r->status < 200 || r->status >= 300) return FromReply(*r);
  return ParseReply(*r, c_.server);
}

Status ApiClient::Stream(const std::string& path,
                         const std::function<bool(std::string_view)>& on_data, int read_timeout_s) {
  ARBITER_RETURN_IF_ERROR(NeedToken());
  auto cli = Open(read_timeout_s);
  int status = 0;
  std::string content_type;
  std::string error_body;
  bool stopped = false;
  auto res = cli->Get(
      base_path_ + path, httplib::Headers{},
      [&](const httplib::Response& r) {
        status = r.status;
        content_type = r.get_header_value("Content-Type");
        return true;
      },
      [&](const char* data, size_t n) {
        if (status < 200 || status >= 300) {
          error_body.append(data, n);
          return error_body.size() < (size_t{1} << 20);
        }
        if (!on_data(std::string_view(data, n))) {
          stopped = true;
          return false;
        }
        return true;
      });
  if (stopped) return Status::Ok();
  if (!res) return FromTransportError(static_cast<int>(res.error()), path);
  if (status < 200 || status >= 300) return FromReply({status, error_body, content_type});
  return Status::Ok();
}

Result<json> ApiClient::ListAll(const std::string& path_with_query) {
  json items = json::array();
  std::string cursor;
  const char sep = path_with_query.find('?') == std::string::npos ? '?' : '&';
  for (int page = 0; page < 100000; ++page) {
    std::string path = fmt::format("{}{}limit=1000", path_with_query, sep);
    if (!cursor.empty()) path += fmt::format("&cursor={}", cursor);
    auto r = Get(path);
    if (!r.ok()) return r.status();
    for (json& item : (*r)["items"]) items.push_back(std::move(item));
    const json& next = (*r)["next_cursor"];
    if (!next.is_string() || next.get<std::string>().empty()) break;
    cursor = next.get<std::string>();
  }
  return items;
}

// --- login, logout, whoami -------------------------------------------------------------------

namespace {

int Login(const ContextPtr& ctx, const std::string& queue, bool no_check, bool oidc,
          const std::string& scope) {
  auto cfg = ReadConfigFile(ConfigPath());
  if (!cfg.ok()) return Fail(cfg.status(), kExitUsage);
  std::string server = ctx->client.server;
  if (server.empty()) server = Env("ARBITER_SERVER");
  if (server.empty()) server = cfg->server;
  if (server.empty()) server = kDefaultServer;
  auto url = NormaliseServerUrl(server);
  if (!url.ok()) return Fail(url.status(), kExitUsage);
  if (oidc) {
    if (!ctx->client.token.empty()) {
      return Fail(InvalidArgument("--token",
                                  "--oidc signs in through the identity provider: "
                                  "give no token"),
                  kExitUsage);
    }
    return OidcLogin(*url, queue, scope, ctx->format());
  }
  std::string token = ctx->client.token;
  if (token.empty() && isatty(STDIN_FILENO) == 0) std::getline(std::cin, token);
  while (!token.empty() && (token.back() == '\n' || token.back() == '\r' || token.back() == ' ')) {
    token.pop_back();
  }
  if (token.empty()) {
    return Fail(InvalidArgument("", fmt::format("give the token: arbiter login --server {} --token "
                                                "TOKEN (or pipe it in; the first admin token is "
                                                "in the server's DATA_DIR/admin.token)",
                                                *url)),
                kExitUsage);
  }
  json who;
  if (!no_check) {
    ApiClient api(Connection{*url, token, ""});
    auto r = api.Get("/api/v1/whoami");
    if (!r.ok()) return Fail(r.status());
    who = *r;
  }
  ClientConfig next;
  next.server = *url;
  next.token = token;
  auto saved = NormaliseServerUrl(cfg->server.empty() ? *url : cfg->server);
  next.queue = !queue.empty() ? queue : (saved.ok() && *saved == *url ? cfg->queue : "");
  const std::string path = ConfigPath();
  Status st = WriteConfigFile(path, next);
  if (!st.ok()) return Fail(st, kExitFailed);
  if (IsStructured(ctx->format())) {
    json out = {{"server", *url}, {"config", path}};
    if (!who.is_null()) out["whoami"] = who;
    PrintStructured(out, ctx->format());
  } else if (who.is_null()) {
    std::printf("saved %s (token not checked) to %s\n", url->c_str(), path.c_str());
  } else {
    const std::string tenant = who.value("tenant", "");
    std::printf("logged in to %s as %s (%srole %s); saved to %s\n", url->c_str(),
                who.value("user", "?").c_str(),
                tenant.empty() ? "" : fmt::format("tenant {}, ", tenant).c_str(),
                who.value("role", "?").c_str(), path.c_str());
  }
  return kExitOk;
}

int Logout() {
  const std::string path = ConfigPath();
  auto cfg = ReadConfigFile(path);
  if (!cfg.ok()) return Fail(cfg.status(), kExitUsage);
  if (cfg->token.empty()) {
    std::printf("not logged in (%s has no token)\n", path.c_str());
    return kExitOk;
  }
  cfg->token.clear();  // an OIDC sign-in's refresh token goes with it (not written back)
  Status st = WriteConfigFile(path, *cfg);
  if (!st.ok()) return Fail(st, kExitFailed);
  std::printf("removed the token for %s from %s\n", cfg->server.c_str(), path.c_str());
  return kExitOk;
}

int WhoAmI(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/whoami");
  if (!r.ok()) return Fail(r.status());
  json out = *r;
  out["server"] = c->server;
  if (IsStructured(ctx->format())) {
    PrintStructured(out, ctx->format());
    return kExitOk;
  }
  Table t({"USER", "TENANT", "ROLE", "SERVER"});
  const std::string tenant = out.value("tenant", "");
  t.AddRow(
      {out.value("user", ""), tenant.empty() ? "-" : tenant, out.value("role", ""), c->server});
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

// The servers sharing the store and the leader (GET /api/v1/servers).
int ServerStatus(const ContextPtr& ctx) {
  auto c = ctx->Resolve();
  if (!c.ok()) return Fail(c.status(), kExitUsage);
  ApiClient api(*c);
  auto r = api.Get("/api/v1/servers");
  if (!r.ok()) return Fail(r.status());
  if (IsStructured(ctx->format())) {
    PrintStructured(*r, ctx->format());
    return kExitOk;
  }
  const json leader = r->value("leader", json());
  std::printf(
      "leader: %s\n",
      leader.is_object()
          ? fmt::format("{} (term {})", leader.value("url", ""), leader.value("term", 0)).c_str()
          : "none (the servers are electing one)");
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  Table t({"ID", "URL", "ROLE", "TERM", "LAST SEEN"});
  for (const json& s : r->value("servers", json::array())) {
    const int64_t ago_ms = now_ms - s.value("last_seen_ms", int64_t{0});
    t.AddRow(
        {s.value("id", ""), s.value("url", ""), s.value("role", ""),
         std::to_string(s.value("term", uint64_t{0})),
         fmt::format("{:.1f}s ago", static_cast<double>(std::max<int64_t>(0, ago_ms)) / 1000)});
  }
  t.Print(stdout, StdoutColors());
  return kExitOk;
}

}  // namespace

void RegisterLoginCommands(CLI::App& app, const ContextPtr& ctx) {
  auto queue = std::make_shared<std::string>();
  auto no_check = std::make_shared<bool>(false);
  auto* login = app.add_subcommand(
      "login", "Check a token against a server and save both for later commands");
  AddClientFlags(login, ctx);
  AddOutputFlag(login, ctx, false);
  login->add_option("--queue", *queue, "Default queue for `arbiter submit`");
  login->add_flag("--no-check", *no_check, "Save without asking the server");
  auto oidc = std::make_shared<bool>(false);
  auto scope = std::make_shared<std::string>();
  login->add_flag("--oidc", *oidc,
                  "Sign in through the server's identity provider (OAuth device flow): open the "
                  "URL it prints, enter the code");
  login->add_option("--scope", *scope,
                    "With --oidc: the scopes to ask for (default \"openid profile "
                    "offline_access\"; add the one that puts groups in the ID token, if your "
                    "provider has one)");
  auto ldap = std::make_shared<bool>(false);
  auto ldap_user = std::make_shared<std::string>();
  auto password_stdin = std::make_shared<bool>(false);
  login->add_flag("--ldap", *ldap,
                  "Sign in with a directory (LDAP) user's password instead of a token");
  login->add_option("--user", *ldap_user, "With --ldap: the directory user name");
  login->add_flag("--password-stdin", *password_stdin,
                  "With --ldap: read the password from stdin's first line (the default when "
                  "stdin is not a terminal; else it is asked for without echo)");
  login->footer(fmt::format(
      "The settings go to $ARBITER_CONFIG, else $XDG_CONFIG_HOME/arbiter/config.yaml, else\n"
      "~/.config/arbiter/config.yaml (mode 0600). Flags and ARBITER_SERVER/ARBITER_TOKEN\n"
      "override them.\n\n"
      "Examples:\n"
      "  arbiter login --server http://gpu-head:8080 --token 3f1c...\n"
      "  cat data/admin.token | arbiter login --server {}\n"
      "  arbiter login --server https://arbiter.example.com --token $T --queue vision-train\n"
      "  arbiter login --server https://arbiter.example.com --oidc\n"
      "  arbiter login --server https://arbiter.example.com --ldap --user alice",
      kDefaultServer));
  login->callback([ctx, queue, no_check, oidc, scope, ldap, ldap_user, password_stdin] {
    ctx->Run([&] {
      if (*ldap && *oidc) {
        return Fail(InvalidArgument("ldap", "--ldap and --oidc are two ways to sign in: pick one"),
                    kExitUsage);
      }
      if (*ldap) return LoginLdap(ctx, *ldap_user, *password_stdin, *queue);
      if (!ldap_user->empty() || *password_stdin) {
        return Fail(InvalidArgument("user", "--user and --password-stdin go with --ldap"),
                    kExitUsage);
      }
      return Login(ctx, *queue, *no_check, *oidc, *scope);
    });
  });

  auto* logout = app.add_subcommand("logout", "Remove the saved token");
  SetExamples(logout, {"arbiter logout"});
  logout->callback([ctx] { ctx->Run([] { return Logout(); }); });

  auto* whoami = app.add_subcommand("whoami", "Show the user, tenant and role of the token");
  AddClientFlags(whoami, ctx);
  AddOutputFlag(whoami, ctx, false);
  SetExamples(whoami, {"arbiter whoami", "arbiter whoami -o json"});
  whoami->callback([ctx] { ctx->Run([&] { return WhoAmI(ctx); }); });

  auto* status = app.add_subcommand(
      "status", "Show the servers sharing the store (role, term, last seen) and the leader");
  AddClientFlags(status, ctx);
  AddOutputFlag(status, ctx, false);
  SetExamples(status, {"arbiter status", "arbiter status --server http://a:8080,http://b:8080",
                       "arbiter status -o json"});
  status->callback([ctx] { ctx->Run([&] { return ServerStatus(ctx); }); });
}

}  // namespace arbiter::cli
