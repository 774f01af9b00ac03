// ServerCluster: several real `arbiter server` processes on one store with leader election, each
// on a fixed loopback port (a server that steps down starts again on the same one), for the
// failover tests. The store's URL comes from SharedStore, the one place that names it.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
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

// One server of a cluster: `arbiter server` in a child process on a fixed loopback port, its
// data in DIR/data. Its standard output is read for the line that says it listens (a server
// that steps down starts again in the same process, on the same port).
class ClusterServer {
 public:
  ~ClusterServer() { Kill(SIGKILL); }

  bool Start(const std::string& dir, int port, const std::vector<std::string>& flags) {
    dir_ = dir;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<std::string> args = {ARBITER_BINARY,
                                       "server",
                                       "--data-dir",
                                       data_dir(),
                                       "--listen",
                                       fmt::format("127.0.0.1:{}", port),
                                       "--cycle-interval-ms",
                                       "50"};
      args.insert(args.end(), flags.begin(), flags.end());
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char c[512];
      const ssize_t n = read(out_fd_, c, sizeof(c));
      if (n <= 0) return false;
      output_.append(c, static_cast<size_t>(n));
      if (output_.find("listening on http://") != std::string::npos) return true;
    }
    return false;
  }

  // Sends `sig` and waits for the child; returns its wait status.
  int Kill(int sig) {
    if (pid_ <= 0) return 0;
    ::kill(pid_, sig);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
    return status;
  }

  std::string data_dir() const { return dir_ + "/data"; }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string output_;
};

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
      servers_.push_back(std::make_unique<ClusterServer>());
      ports_.push_back(FreePort());
    }
    std::vector<std::string> flags = {"--store", store_url.empty() ? store_.url() : store_url,
                                      "--leader-election", "on"};
    flags.insert(flags.end(), flags_.begin(), flags_.end());
    return servers_[i]->Start(fmt::format("{}/s{}", dir_, i), ports_[i], flags);
  }

  ClusterServer& server(size_t i) { return *servers_[i]; }
  std::string url(size_t i) const { return fmt::format("http://127.0.0.1:{}", ports_[i]); }
  // "http://a,http://b": every server, for --server.
  std::string urls() const {
    std::string out;
    for (size_t i = 0; i < ports_.size(); ++i) {
      if (i > 0) out += ',';
      out += url(i);
    }
    return out;
  }

  // Waits until server `i` says it is `role` (a follower: and names the leader), within `ms`;
  // its /healthz then, or null.
  nlohmann::json WaitForRole(size_t i, const std::string& role, int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      nlohmann::json h = Health(url(i));
      // A follower that has not yet read the lease names no leader.
      if (h.is_object() && h.value("role", "") == role &&
          (role != "follower" || !h.value("leader", "").empty())) {
        return h;
      }
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
  std::vector<std::unique_ptr<ClusterServer>> servers_;
  std::vector<int> ports_;
};

}  // namespace arbiter::testing
