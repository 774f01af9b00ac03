// ServerCluster: several real `arbiter server` processes on one store with leader election, each
// on a fixed loopback port (a server that steps down starts again on the same one), for the
// failover tests. The store's URL comes from SharedStore, the one place that names it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
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
#include "testing/postgres_cluster.h"

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

// The store the servers of a test share, and the one place that names it: a fresh database of
// the test run's throw-away PostgreSQL (testing/postgres_cluster.h: `make test` starts one) when
// PostgreSQL is installed, else one SQLite file in the test's folder (several servers of one
// machine may share it under the lease).
class SharedStore {
 public:
  explicit SharedStore(const std::string& dir) {
    if (!PostgresCluster::Available()) {
      url_ = "sqlite:" + dir + "/store";
      return;
    }
    std::string error;
    PostgresCluster* pg = PostgresCluster::ForTests(&error);
    const std::string db = PostgresCluster::UniqueDatabaseName("failover");
    if (pg == nullptr || !pg->CreateDatabase(db, &error)) {
      ADD_FAILURE() << "PostgreSQL: " << error;
      url_ = "sqlite:" + dir + "/store";
      return;
    }
    postgres_ = true;
    port_ = pg->port();
    database_ = db;
    url_ = pg->Uri(db);
  }
  const std::string& url() const { return url_; }
  bool postgres() const { return postgres_; }
  int port() const { return port_; }
  // The URL through another port of this machine (a proxy in front of PostgreSQL).
  std::string UrlVia(int port) const {
    return fmt::format("postgres://{}@127.0.0.1:{}/{}", PostgresCluster::kUser, port, database_);
  }

 private:
  std::string url_;
  bool postgres_ = false;
  int port_ = 0;
  std::string database_;
};

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
      : dir_(std::move(dir)), flags_(std::move(flags)), store_(dir_) {}

  const SharedStore& store() const { return store_; }

  // Starts server `i` (0, 1, ...) in DIR/sI on its own port, on the shared store (or at
  // `store_url`, the same store by another way); false when it does not listen.
  bool Start(size_t i, const std::string& store_url = "") {
    while (servers_.size() <= i) {
      servers_.push_back(std::make_unique<ServerProcess>());
      ports_.push_back(FreePort());
    }
    ServerProcess& s = *servers_[i];
    s.listen = fmt::format("127.0.0.1:{}", ports_[i]);
    std::vector<std::string> flags = {"--store", store_url.empty() ? store_.url() : store_url,
                                      "--leader-election", "on"};
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
  SharedStore store_;
  std::vector<std::unique_ptr<ServerProcess>> servers_;
  std::vector<int> ports_;
};

}  // namespace arbiter::testing
