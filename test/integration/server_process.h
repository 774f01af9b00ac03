// ServerProcess: the real `arbiter server` binary in a child process, on a loopback port chosen by
// the kernel (--listen 127.0.0.1:0), with its data in a temporary folder (DIR/data, and the
// built-in node's task folders in DIR/node). Nothing outlives the test: the destructor kills the
// child and the shims of its built-in node's tasks; TempDir removes the folder.
//
// Under ARBITER_TEST_POSTGRES (the PostgreSQL pass of `make test`, tests named pg.*: the variable
// names the folder of a running throw-away cluster, testing/postgres_cluster.h) the server's store
// is a database of that cluster, named after the server's folder, so a restart of the same folder
// finds its state again.
#pragma once

#include <fcntl.h>
#include <httplib.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "testing/postgres_cluster.h"

namespace arbiter::testing {

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "arbiter-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
    // Tasks run as their own users: they must be able to pass through to their folders.
    ::chmod(path_.c_str(), 0711);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Kills what a node's executor left running under `work_dir` (the shims its pid files name, and
// every process in its task cgroups), and removes those cgroups: nothing outlives a test.
inline void KillNodeTasks(const std::string& work_dir) {
  std::error_code ec;
  for (const auto& job : std::filesystem::directory_iterator(work_dir + "/jobs", ec)) {
    for (const auto& f : std::filesystem::directory_iterator(job.path(), ec)) {
      if (f.path().extension() != ".pid") continue;
      std::ifstream in(f.path());
      long pid = 0;
      if (in >> pid && pid > 1) ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  std::ifstream bases(work_dir + "/jobs/cgroups");
  for (std::string base; std::getline(bases, base);) {
    if (base.find("/arbiter/") == std::string::npos) continue;  // only our own groups
    for (const auto& group : std::filesystem::directory_iterator(base, ec)) {
      if (!group.is_directory(ec) || group.path().filename().string().rfind("task-", 0) != 0) {
        continue;
      }
      for (int round = 0; round < 100; ++round) {
        std::ifstream procs(group.path() / "cgroup.procs");
        bool any = false;
        for (long pid = 0; procs >> pid;)
          any = ::kill(static_cast<pid_t>(pid), SIGKILL) == 0 || any;
        if (::rmdir(group.path().c_str()) == 0 || (!any && errno != EBUSY)) break;
        usleep(5000);
      }
    }
    ::rmdir(base.c_str());
  }
}

// Runs `command` through the shell; returns its exit status (-1 when it did not exit) and, in
// `output`, what it printed.
inline int Shell(const std::string& command, std::string* output) {
  std::string text;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n = 0;
  while ((n = fread(buf, 1, sizeof(buf), p)) > 0) text.append(buf, n);
  const int status = pclose(p);
  if (output != nullptr) *output = text;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Whether the servers of this test run on PostgreSQL (see above).
inline bool OnPostgres() {
  const char* dir = std::getenv(PostgresCluster::kEnv);
  return dir != nullptr && *dir != '\0';
}

// The --store flag of a server whose folder is `dir` under OnPostgres(): its own database of the
// shared cluster (made if missing), named by a hash of the folder; "" with `error` if none.
inline std::string PostgresStoreFor(const std::string& dir, std::string* error) {
  PostgresCluster* pg = PostgresCluster::ForTests(error);
  if (pg == nullptr) return "";
  uint64_t h = 1469598103934665603ull;  // FNV-1a: the same folder, the same database
  for (unsigned char c : dir) h = (h ^ c) * 1099511628211ull;
  const std::string db = fmt::format("server_{:016x}", h);
  return pg->CreateDatabase(db, error) ? pg->Uri(db) : "";
}

class ServerProcess {
 public:
  // Starts the server with its data in DIR/data and the built-in node's folders in DIR/node;
  // `extra` are more flags. Fails the test (returns false) if it does not say where it listens
  // within 20 s.
  bool Start(const std::string& dir, std::vector<std::string> extra = {}) {
    dir_ = dir;
    const std::string data_dir = this->data_dir();
    const std::string node_dir = this->node_dir();
    if (OnPostgres()) {
      std::string error;
      const std::string uri = PostgresStoreFor(dir, &error);
      if (uri.empty()) {
        std::fprintf(stderr, "no PostgreSQL database for the server: %s\n", error.c_str());
        return false;
      }
      extra.insert(extra.begin(), {"--store", uri});
    }
    // A test's server is alone on its store: no election (which PostgreSQL turns on by default),
    // unless the test asks for one.
    if (std::find(extra.begin(), extra.end(), "--leader-election") == extra.end() &&
        std::any_of(extra.begin(), extra.end(),
                    [](const std::string& a) { return a.starts_with("postgres"); })) {
      extra.insert(extra.end(), {"--leader-election", "off"});
    }
    int out[2];
    if (pipe(out) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      close(out[0]);
      close(out[1]);
      // A task left by a test stops soon after its server is gone (--orphan-timeout-ms).
      std::vector<std::string> args = {
          ARBITER_BINARY,     "server",      "--data-dir",          data_dir,
          "--listen",         "127.0.0.1:0", "--cycle-interval-ms", "50",
          "--local-work-dir", node_dir,      "--orphan-timeout-ms", "30000"};
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
      const size_t at = buf.find("listening on http://127.0.0.1:");
      if (at != std::string::npos) {
        const size_t eol = buf.find('\n', at);
        if (eol == std::string::npos) continue;
        port_ = std::stoi(buf.substr(at + 30, eol - at - 30));
        output_ = buf;
        std::ifstream tok(data_dir + "/admin.token");
        if (tok) std::getline(tok, admin_token_);
        return true;
      }
    }
    return false;
  }

  ~ServerProcess() {
    Kill(SIGKILL);
    KillTasks();
  }

  // Kills the shims of the built-in node's tasks (their tasks die with them) and removes their
  // cgroups.
  void KillTasks() {
    if (!dir_.empty()) KillNodeTasks(node_dir());
  }

  std::string data_dir() const { return dir_ + "/data"; }
  std::string node_dir() const { return dir_ + "/node"; }

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

  // Reads more of the server's output until it holds `needle` (and the rest of that line), at
  // most `seconds`; output() then holds it.
  bool WaitForOutput(const std::string& needle, int seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (true) {
      const size_t at = output_.find(needle);
      if (at != std::string::npos && output_.find('\n', at) != std::string::npos) return true;
      if (out_fd_ < 0 || std::chrono::steady_clock::now() >= deadline) return false;
      pollfd p{out_fd_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char c[512];
      const ssize_t n = read(out_fd_, c, sizeof(c));
      if (n <= 0) return false;
      output_.append(c, static_cast<size_t>(n));
    }
  }
  int port() const { return port_; }
  const std::string& admin_token() const { return admin_token_; }
  const std::string& output() const { return output_; }

  std::unique_ptr<httplib::Client> Client(const std::string& token) const {
    auto c = std::make_unique<httplib::Client>("127.0.0.1", port_);
    c->set_connection_timeout(5);
    c->set_read_timeout(10);
    c->set_tcp_nodelay(true);
    if (!token.empty()) c->set_bearer_token_auth(token);
    return c;
  }

 private:
  std::string dir_;
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int port_ = 0;
  std::string admin_token_;
  std::string output_;
};

}  // namespace arbiter::testing
