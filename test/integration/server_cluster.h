// ServerCluster: several real `arbiter server` processes on one store with leader election, each
// on a fixed loopback port (a server that steps down starts again on the same one), for the
// failover tests. The store's URL comes from SharedStoreUrl, the one place that names it.
#pragma once

#include <fmt/format.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {

// A loopback port free now (the kernel's pick; the test binds it soon after).
inline int FreePort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

// The store the servers of a test share: one SQLite file in `dir` (several servers of one
// machine may share it under the lease).
inline std::string SharedStoreUrl(const std::string& dir) { return "sqlite:" + dir + "/store"; }

// /healthz of the server at `url`: its role, term and leader; null when it does not answer.
inline nlohmann::json Health(const std::string& url) {
  httplib::Client c(url);
  c.set_connection_timeout(0, 300000);
  c.set_read_timeout(2, 0);
  auto r = c.Get("/healthz");
  if (!r || r->status != 200) return nullptr;
  try {
    return nlohmann::json::parse(r->body);
  } catch (...) {
    return nullptr;
  }
}

class ServerCluster {
 public:
  // `flags`: more flags for every server (the lease's, --config, ...).
  ServerCluster(std::string dir, std::vector<std::string> flags)
      : dir_(std::move(dir)), flags_(std::move(flags)) {}

  // Starts server `i` (0, 1, ...) in DIR/sI on its own port; false when it does not listen.
  bool Start(size_t i) {
    while (servers_.size() <= i) {
      servers_.push_back(std::make_unique<ServerProcess>());
      ports_.push_back(FreePort());
    }
    ServerProcess& s = *servers_[i];
    s.listen = fmt::format("127.0.0.1:{}", ports_[i]);
    std::vector<std::string> flags = {"--store", SharedStoreUrl(dir_), "--leader-election", "on"};
    flags.insert(flags.end(), flags_.begin(), flags_.end());
    return s.Start(fmt::format("{}/s{}", dir_, i), flags);
  }

  ServerProcess& server(size_t i) { return *servers_[i]; }
  std::string url(size_t i) const { return fmt::format("http://127.0.0.1:{}", ports_[i]); }
  // "http://a,http://b": every server, for --server.
  std::string urls() const {
    std::string out;
    for (size_t i = 0; i < ports_.size(); ++i) out += (i == 0 ? "" : ",") + url(i);
    return out;
  }

  // Waits until server `i` says it is `role` (within `ms`); its /healthz then, or null.
  nlohmann::json WaitForRole(size_t i, const std::string& role, int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      nlohmann::json h = Health(url(i));
      if (h.is_object() && h.value("role", "") == role) return h;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return nullptr;
  }

  // The bootstrap admin token the first leader wrote to its data dir (within 20 s).
  std::string AdminToken(size_t i) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream tok(server(i).data_dir() + "/admin.token");
      std::string token;
      if (tok && std::getline(tok, token) && !token.empty()) return token;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return "";
  }

 private:
  std::string dir_;
  std::vector<std::string> flags_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<int> ports_;
};

}  // namespace arbiter::testing
