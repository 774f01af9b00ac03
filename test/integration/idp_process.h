// IdpProcess: the test OpenID Connect provider (test/idp/idp.mjs, the npm package oidc-provider)
// in a child process on 127.0.0.1, any free port. Its test routes hand out real tokens without a
// browser (/test/token, /test/device) and rotate its keys (/test/rotate). The destructor kills it;
// it also exits when its stdin (a pipe held here) closes, so it never outlives the test.
#pragma once

#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace arbiter::testing {

class IdpProcess {
 public:
  // Starts `node test/idp/idp.mjs` with `args`; false (the output in error()) unless it says
  // where it listens within 30 s.
  bool Start(std::vector<std::string> args = {}) {
    int out[2];
    int in[2];
    if (pipe(out) != 0 || pipe(in) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      dup2(in[0], STDIN_FILENO);
      close(out[0]);
      close(out[1]);
      close(in[0]);
      close(in[1]);
      std::vector<std::string> argv_s = {"node",
                                         std::string(ARBITER_SOURCE_DIR) + "/test/idp/idp.mjs"};
      for (auto& a : args) argv_s.push_back(a);
      std::vector<char*> argv;
      for (auto& a : argv_s) argv.push_back(a.data());
      argv.push_back(nullptr);
      execvp("node", argv.data());
      _exit(127);
    }
    close(out[1]);
    close(in[0]);
    out_fd_ = out[0];
    in_fd_ = in[1];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char c[512];
      const ssize_t n = read(out_fd_, c, sizeof(c));
      if (n <= 0) return false;
      output_.append(c, static_cast<size_t>(n));
      const size_t at = output_.find("{\"port\":");
      if (at == std::string::npos) continue;
      const size_t eol = output_.find('\n', at);
      if (eol == std::string::npos) continue;
      const auto j = nlohmann::json::parse(output_.substr(at, eol - at), nullptr, false);
      if (!j.is_object()) return false;
      port_ = j.value("port", 0);
      issuer_ = j.value("issuer", "");
      return port_ > 0;
    }
    return false;
  }

  ~IdpProcess() {
    if (in_fd_ >= 0) close(in_fd_);
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) close(out_fd_);
  }

  const std::string& issuer() const { return issuer_; }
  const std::string& output() const { return output_; }

  std::unique_ptr<httplib::Client> Client() const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_connection_timeout(5);
    c->set_read_timeout(20);
    return c;
  }

  // The token endpoint's answer for `user` signing in to `client` (authorization code flow with
  // PKCE, driven over HTTP by the provider's test route); `ttl` > 0 sets the ID token's lifetime.
  nlohmann::json Tokens(const std::string& user, const std::string& client = "arbiter",
                        int ttl = 0) const {
    std::string path = "/test/token?user=" + user + "&client=" + client;
    if (ttl > 0) path += "&ttl=" + std::to_string(ttl);
    auto r = Client()->Get(path);
    if (!r || r->status != 200) return nlohmann::json();
    return nlohmann::json::parse(r->body, nullptr, false);
  }
  std::string IdToken(const std::string& user, const std::string& client = "arbiter",
                      int ttl = 0) const {
    const nlohmann::json t = Tokens(user, client, ttl);
    return t.is_object() ? t.value("id_token", "") : "";
  }
  // New signing keys; the old ones leave the JWKS.
  bool Rotate() const {
    auto r = Client()->Post("/test/rotate", "", "application/json");
    return r && r->status == 200;
  }
  // Approves a device authorization's user code as `user`.
  bool ApproveDevice(const std::string& user_code, const std::string& user) const {
    auto r = Client()->Get("/test/device?user_code=" + user_code + "&user=" + user);
    return r && r->status == 200;
  }

 private:
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int in_fd_ = -1;
  int port_ = 0;
  std::string issuer_;
  std::string output_;
};

}  // namespace arbiter::testing
