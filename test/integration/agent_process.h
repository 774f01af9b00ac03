// AgentProcess: the real `arbiter agent` binary in a child process; TcpProxy: a loopback TCP
// forwarder the agents reach the server through, so a test can cut the network (Stop) and point
// it at a restarted server (SetTarget). Nothing outlives the test: the destructors stop the
// agent (SIGTERM, which stops its tasks) and close every connection.
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {

// A node token for node `node` (of the admin user), made with the admin's client: what
// `arbiter token create --user admin --role node --node NODE` prints. "" on failure.
inline std::string NodeToken(httplib::Client& admin, const std::string& node) {
  const std::string body = R"({"user": "admin", "role": "node", "node": ")" + node + R"("})";
  auto t = admin.Post("/api/v1/tokens", body, "application/json");
  if (!t || t->status != 201) return "";
  const std::string key = R"("token":")";
  const size_t at = t->body.find(key);
  if (at == std::string::npos) return "";
  const size_t start = at + key.size();
  return t->body.substr(start, t->body.find('"', start) - start);
}

class AgentProcess {
 public:
  // Starts `arbiter agent`; true once it says it registered (within 20 s).
  bool Start(const std::string& server_url, const std::string& token, const std::string& name,
             const std::string& work_dir, std::vector<std::string> extra = {}) {
    work_dir_ = work_dir;
    std::filesystem::create_directories(work_dir);
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      const int err =
          ::open((work_dir + "/agent.log").c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (err >= 0) dup2(err, STDERR_FILENO);
      close(out[0]);
      close(out[1]);
      std::vector<std::string> args = {ARBITER_BINARY, "agent", "--server", server_url,
                                       "--token",      token,   "--name",   name,
                                       "--work-dir",   work_dir};
      // Defaults a test may override in `extra`.
      for (const auto& [flag, value] : std::vector<std::pair<std::string, std::string>>{
               {"--fake-gpus", "4"}, {"--heartbeat-ms", "200"}, {"--backoff-max-ms", "400"}}) {
        if (std::find(extra.begin(), extra.end(), flag) != extra.end()) continue;
        args.push_back(flag);
        args.push_back(value);
      }
      for (auto& e : extra) args.push_back(e);
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(out[1]);
    out_fd_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::string buf;
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char c[512];
      const ssize_t n = read(out_fd_, c, sizeof(c));
      if (n <= 0) return false;
      buf.append(c, static_cast<size_t>(n));
      if (buf.find("registered with") != std::string::npos) return true;
    }
    return false;
  }

  ~AgentProcess() { Stop(); }

  // SIGTERM and wait (it stops its tasks first); SIGKILL if it takes longer than 10 s.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 200; ++i) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        Forget();
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    Kill9();
  }

  void Kill9() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    Forget();
  }

  // The agent's own log (stderr).
  std::string Log() const {
    std::ifstream f(work_dir_ + "/agent.log");
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
  }

  const std::string& work_dir() const { return work_dir_; }
  bool running() const { return pid_ > 0; }

 private:
  void Forget() {
    pid_ = -1;
    if (out_fd_ >= 0) close(out_fd_);
    out_fd_ = -1;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  std::string work_dir_;
};

// Forwards every connection to 127.0.0.1:target. Stop closes the listener and all connections
// (the network is gone: connections are refused); Start again listens on the same port.
class TcpProxy {
 public:
  ~TcpProxy() { Stop(); }

  bool Start(int target, int port = 0) {
    target_ = target;
    listen_fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        listen(listen_fd_, 64) != 0) {
      close(listen_fd_);
      listen_fd_ = -1;
      return false;
    }
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    stop_ = false;
    thread_ = std::thread([this] { Loop(); });
    return true;
  }

  void Stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    if (listen_fd_ >= 0) close(listen_fd_);
    listen_fd_ = -1;
    for (auto& [fd, peer] : peers_) close(fd);
    peers_.clear();
  }

  void SetTarget(int target) { target_ = target; }
  int port() const { return port_; }

 private:
  void Loop() {
    while (!stop_) {
      std::vector<pollfd> fds = {{listen_fd_, POLLIN, 0}};
      for (auto& [fd, peer] : peers_) fds.push_back({fd, POLLIN, 0});
      if (poll(fds.data(), fds.size(), 50) <= 0) continue;
      if (fds[0].revents & POLLIN) Accept();
      for (size_t i = 1; i < fds.size(); ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        auto it = peers_.find(fds[i].fd);
        if (it == peers_.end()) continue;  // closed with its peer in this round
        char buf[65536];
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0 || !WriteAll(it->second, buf, static_cast<size_t>(n))) Close(fds[i].fd);
      }
    }
  }

  void Accept() {
    const int in = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (in < 0) return;
    const int out = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(target_.load()));
    if (connect(out, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
      close(in);
      close(out);
      return;
    }
    peers_[in] = out;
    peers_[out] = in;
  }

  static bool WriteAll(int fd, const char* p, size_t n) {
    while (n > 0) {
      const ssize_t w = write(fd, p, n);
      if (w <= 0) return false;
      p += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }

  void Close(int fd) {
    auto it = peers_.find(fd);
    if (it == peers_.end()) return;
    const int peer = it->second;
    peers_.erase(it);
    peers_.erase(peer);
    close(fd);
    close(peer);
  }

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<int> target_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::map<int, int> peers_;  // fd -> the other end; only the loop thread touches it
};

// Kills what a kill -9'd agent's tasks left (their pid files and cgroups), so nothing outlives a
// test.
inline void KillLeftoverTasks(const std::string& work_dir) { KillNodeTasks(work_dir); }

}  // namespace arbiter::testing
