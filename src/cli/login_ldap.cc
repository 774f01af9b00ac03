// `arbiter login --ldap --user NAME`: signs in with a directory user's password
// (POST /api/v1/login/ldap) and saves the token the server gives, as `arbiter login` saves one.
#include <fmt/format.h>
#include <termios.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "api/errors.h"
#include "cli/commands.h"

namespace arbiter::cli {

using nlohmann::json;

namespace {

// Turns the terminal's echo off while alive (and back on when it ends).
class NoEcho {
 public:
  explicit NoEcho(int fd) : fd_(fd) {
    if (tcgetattr(fd_, &saved_) != 0) return;
    termios quiet = saved_;
    quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
    quiet.c_lflag |= ECHONL;  // the Enter still moves to the next line
    active_ = tcsetattr(fd_, TCSAFLUSH, &quiet) == 0;
  }
  ~NoEcho() {
    if (active_) tcsetattr(fd_, TCSAFLUSH, &saved_);
  }
  NoEcho(const NoEcho&) = delete;
  NoEcho& operator=(const NoEcho&) = delete;

 private:
  int fd_;
  termios saved_{};
  bool active_ = false;
};

void TrimLineEnd(std::string* s) {
  while (!s->empty() && (s->back() == '\n' || s->back() == '\r')) s->pop_back();
}

// The password: stdin's first line when asked (--password-stdin) or when stdin is not a
// terminal; else typed at the terminal without echo.
Result<std::string> ReadPassword(const std::string& user, const std::string& server,
                                 bool from_stdin) {
  std::string password;
  if (from_stdin || isatty(STDIN_FILENO) == 0) {
    std::getline(std::cin, password);
    TrimLineEnd(&password);
  } else {
    std::fprintf(stderr, "Password for %s at %s: ", user.c_str(), server.c_str());
    std::fflush(stderr);
    NoEcho quiet(STDIN_FILENO);
    std::getline(std::cin, password);
    TrimLineEnd(&password);
  }
  if (password.empty()) {
    return InvalidArgument("password", "no password given (an empty one is never accepted)");
  }
  return password;
}

}  // namespace

int LoginLdap(const ContextPtr& ctx, const std::string& user, bool password_stdin,
              const std::string& queue) {
  auto cfg = ReadConfigFile(ConfigPath());
  if (!cfg.ok()) return Fail(cfg.status(), kExitUsage);
  std::string server = ctx->client.server;
  if (const char* env = std::getenv("ARBITER_SERVER"); server.empty() && env != nullptr) {
    server = env;
  }
  if (server.empty()) server = cfg->server;
  if (server.empty()) server = kDefaultServer;
  auto url = NormaliseServerUrl(server);
  if (!url.ok()) return Fail(url.status(), kExitUsage);
  if (user.empty()) {
    return Fail(InvalidArgument("user",
                                "give the directory user name: arbiter login --ldap "
                                "--user NAME"),
                kExitUsage);
  }
  if (!ctx->client.token.empty()) {
    return Fail(InvalidArgument("token", "--ldap signs in with a password; it takes no --token"),
                kExitUsage);
  }
  auto password = ReadPassword(user, *url, password_stdin);
  if (!password.ok()) return Fail(password.status(), kExitUsage);

  ApiClient api(Connection{*url, "", ""});
  auto reply = api.Send("POST", "/api/v1/login/ldap",
                        json{{"user", user}, {"password", *password}}.dump(), "application/json");
  if (!reply.ok()) return Fail(reply.status());
  if (reply->status != 200) {
    Status st = api::StatusFromErrorReply(reply->status, reply->body);
    if (st.message().empty()) {
      st = Status(st.code(), fmt::format("the server at {} answered HTTP {}{}", *url, reply->status,
                                         reply->status == 404 ? " (does it offer directory "
                                                                "sign-in?)"
                                                              : ""));
    }
    return Fail(st);
  }
  const json who = json::parse(reply->body, nullptr, /*allow_exceptions=*/false);
  if (!who.is_object() || !who.contains("token") || !who["token"].is_string()) {
    return Fail(Internal(fmt::format("the server at {} answered without a token", *url)));
  }

  ClientConfig next;
  next.server = *url;
  next.token = who["token"].get<std::string>();
  auto saved = NormaliseServerUrl(cfg->server.empty() ? *url : cfg->server);
  next.queue = !queue.empty() ? queue : (saved.ok() && *saved == *url ? cfg->queue : "");
  const std::string path = ConfigPath();
  Status st = WriteConfigFile(path, next);
  if (!st.ok()) return Fail(st, kExitFailed);
  if (IsStructured(ctx->format())) {
    json out = {{"server", *url}, {"config", path}};
    out["whoami"] = {{"user", who.value("user", "")},
                     {"tenant", who.value("tenant", "")},
                     {"role", who.value("role", "")}};
    out["expires_at"] = who.value("expires_at", "");
    PrintStructured(out, ctx->format());
    return kExitOk;
  }
  const std::string tenant = who.value("tenant", "");
  std::printf("logged in to %s as %s (%srole %s) until %s; saved to %s\n", url->c_str(),
              who.value("user", "?").c_str(),
              tenant.empty() ? "" : fmt::format("tenant {}, ", tenant).c_str(),
              who.value("role", "?").c_str(), who.value("expires_at", "?").c_str(), path.c_str());
  return kExitOk;
}

}  // namespace arbiter::cli
