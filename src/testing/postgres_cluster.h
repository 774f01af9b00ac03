// PostgresCluster: a throw-away PostgreSQL server for tests, in a temporary folder: initdb, then
// pg_ctl start on a free 127.0.0.1 port, fsync on, trust authentication on loopback and the
// folder's own Unix socket only. As root (which PostgreSQL refuses to run as) the folder is given
// to the `postgres` system user (Debian's package makes it) and every server command runs as that
// user (runuser). The destructor stops the server (pg_ctl stop -m immediate) and removes the
// folder. Every wait is bounded.
//
//   std::string error;
//   auto pg = PostgresCluster::Start(&error);   // null, with `error`, when it cannot
//   pg->CreateDatabase("t1", &error);
//   OpenStore(... pg->Uri("t1") ...);
//
// A cluster can also outlive the process that started it (a test fixture that several test
// binaries share): Start(dir) in a folder of one's choosing, Detach(), and later StopAt(dir);
// Attach(dir) reads the port of a running one. ForTests() is the one a test process uses: the
// fixture's, when the environment variable kEnv names its folder (`make test` starts one for the
// whole run), else one of its own, started at the first call and stopped at exit.
//
// Thread safety: CreateDatabase may be called from any thread; the rest from one.
#pragma once

#include <fmt/format.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

namespace arbiter::testing {

class PostgresCluster {
 public:
  static constexpr const char* kUser = "arbiter";  // the superuser initdb makes
  // The folder of a running cluster that tests should use, with every server of the test on it
  // (set by ctest's postgres fixture for the pg.* pass).
  static constexpr const char* kEnv = "ARBITER_TEST_POSTGRES";
  // The folder of a running cluster for the tests that need PostgreSQL themselves, while the
  // rest of their servers stay on SQLite.
  static constexpr const char* kClusterEnv = "ARBITER_TEST_POSTGRES_CLUSTER";

  // The cluster of this test process (see above); null, with `error`, when there is none.
  static PostgresCluster* ForTests(std::string* error) {
    static std::string why;
    static std::unique_ptr<PostgresCluster> cluster = [] {
      const char* env = kClusterEnv;
      const char* dir = std::getenv(kClusterEnv);
      if (dir == nullptr || *dir == '\0') {
        env = kEnv;
        dir = std::getenv(kEnv);
      }
      if (dir != nullptr && *dir != '\0') {
        auto attached = Attach(dir);
        if (attached == nullptr) why = fmt::format("{}={}: no cluster runs there", env, dir);
        return attached;
      }
      return Start(&why);
    }();
    *error = why;
    return cluster.get();
  }

  // A database name of `prefix` unique to this process and call, for a test's fresh database.
  static std::string UniqueDatabaseName(const std::string& prefix) {
    static std::atomic<int> n{0};
    return fmt::format("{}_{}_{}", prefix, ::getpid(), ++n);
  }

  // The folder of PostgreSQL's server programs (initdb, pg_ctl, createdb), "" when not installed.
  static std::string BinDir() {
    std::string best;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/usr/lib/postgresql", ec)) {
      const std::string bin = e.path().string() + "/bin";
      if (::access((bin + "/initdb").c_str(), X_OK) == 0 &&
          ::access((bin + "/pg_ctl").c_str(), X_OK) == 0 && bin > best) {
        best = bin;
      }
    }
    return best;
  }
  static bool Available() { return !BinDir().empty(); }

  // Starts a cluster in `dir` (made if missing; a fresh temporary folder when empty). Null, with
  // `error` set, when it cannot.
  static std::unique_ptr<PostgresCluster> Start(std::string* error, std::string dir = "") {
    auto c = std::unique_ptr<PostgresCluster>(new PostgresCluster());
    c->bin_ = BinDir();
    if (c->bin_.empty()) {
      *error = "PostgreSQL's server programs are not installed (/usr/lib/postgresql/*/bin)";
      return nullptr;
    }
    if (dir.empty()) {
      const char* base = std::getenv("TMPDIR");
      std::string pattern =
          std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/arbiter-pg.XXXXXX";
      if (mkdtemp(pattern.data()) == nullptr) {
        *error = "mkdtemp failed for " + pattern;
        return nullptr;
      }
      dir = pattern;
    }
    c->dir_ = dir;
    if (!c->Init(error)) return nullptr;
    for (int attempt = 0; attempt < 3; ++attempt) {  // a free port may be taken meanwhile
      if (c->Launch(error)) return c;
    }
    return nullptr;
  }

  // A running cluster started in `dir` by another process (its port from dir/port); null when
  // there is none.
  static std::unique_ptr<PostgresCluster> Attach(const std::string& dir) {
    std::ifstream in(dir + "/port");
    int port = 0;
    if (!(in >> port) || port <= 0) return nullptr;
    auto c = std::unique_ptr<PostgresCluster>(new PostgresCluster());
    c->bin_ = BinDir();
    c->dir_ = dir;
    c->port_ = port;
    c->detached_ = true;
    return c;
  }

  // Stops the cluster in `dir` and removes the folder.
  static void StopAt(const std::string& dir) {
    const std::string bin = BinDir();
    if (!bin.empty() && std::filesystem::exists(dir + "/data/postmaster.pid")) {
      (void)Run(
          AsOwner(fmt::format("'{}/pg_ctl' stop -D '{}/data' -m immediate -w -t 30", bin, dir)));
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }

  ~PostgresCluster() {
    if (!detached_ && !dir_.empty()) StopAt(dir_);
  }
  PostgresCluster(const PostgresCluster&) = delete;
  PostgresCluster& operator=(const PostgresCluster&) = delete;

  // Leaves the server running when this object is destroyed (StopAt stops it).
  void Detach() { detached_ = true; }

  // Creates database `name` (letters, digits and '_'); an existing one is kept.
  bool CreateDatabase(const std::string& name, std::string* error) const {
    std::string out;
    const int rc = Run(
        fmt::format("'{}/createdb' -h 127.0.0.1 -p {} -U {} '{}' 2>&1", bin_, port_, kUser, name),
        &out);
    if (rc == 0 || out.find("already exists") != std::string::npos) return true;
    *error = fmt::format("createdb {}: {}", name, out);
    return false;
  }

  // The libpq URI of database `name`.
  std::string Uri(const std::string& name) const {
    return fmt::format("postgres://{}@127.0.0.1:{}/{}", kUser, port_, name);
  }
  int port() const { return port_; }
  const std::string& dir() const { return dir_; }

 private:
  PostgresCluster() = default;

  // Runs `cmd` with /bin/sh; its exit code, and its output in `out` when given.
  static int Run(const std::string& cmd, std::string* out = nullptr) {
    FILE* p = popen(cmd.c_str(), "r");
    if (p == nullptr) return -1;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) {
      if (out != nullptr) out->append(buf.data(), n);
    }
    const int status = pclose(p);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  // As root, the command runs as the postgres system user.
  static std::string AsOwner(const std::string& cmd) {
    if (::geteuid() != 0) return cmd;
    return fmt::format("/usr/sbin/runuser -u postgres -- /bin/sh -c \"{}\"", cmd);
  }

  bool Init(std::string* error) {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw == nullptr) {
        *error = "running as root needs the 'postgres' system user (Debian's postgresql package)";
        return false;
      }
      if (::chown(dir_.c_str(), pw->pw_uid, pw->pw_gid) != 0) {
        *error = "cannot give " + dir_ + " to the postgres user";
        return false;
      }
      ::chmod(dir_.c_str(), 0755);
    }
    std::string out;
    // --no-sync: initdb's own files are not synced (a test's); the server runs with fsync on.
    const std::string initdb = AsOwner(
        fmt::format("'{}/initdb' -D '{}/data' -U {} --auth=trust -E UTF8 --locale=C --no-sync 2>&1",
                    bin_, dir_, kUser));
    if (Run(initdb, &out) != 0) {
      *error = "initdb: " + out;
      return false;
    }
    std::ofstream hba(dir_ + "/data/pg_hba.conf", std::ios::trunc);
    hba << "local all all trust\nhost all all 127.0.0.1/32 trust\n";
    return true;
  }

  bool Launch(std::string* error) {
    port_ = FreePort();
    {
      std::ofstream conf(dir_ + "/data/postgresql.auto.conf", std::ios::trunc);
      conf << fmt::format(
          "listen_addresses = '127.0.0.1'\nport = {}\nunix_socket_directories = '{}'\n"
          "fsync = on\nsynchronous_commit = on\nmax_connections = 300\n",
          port_, dir_);
    }
    if (::geteuid() == 0) {
      const passwd* pw = ::getpwnam("postgres");
      if (pw != nullptr) {
        (void)::chown((dir_ + "/data/postgresql.auto.conf").c_str(), pw->pw_uid, pw->pw_gid);
        (void)::chown((dir_ + "/data/pg_hba.conf").c_str(), pw->pw_uid, pw->pw_gid);
      }
    }
    std::string out;
    const std::string start = AsOwner(fmt::format(
        "'{0}/pg_ctl' start -D '{1}/data' -l '{1}/server.log' -w -t 30 2>&1", bin_, dir_));
    if (Run(start, &out) != 0) {
      std::ifstream log(dir_ + "/server.log");
      std::stringstream s;
      s << log.rdbuf();
      *error = "pg_ctl start: " + out + s.str();
      (void)Run(
          AsOwner(fmt::format("'{}/pg_ctl' stop -D '{}/data' -m immediate -w -t 10", bin_, dir_)));
      return false;
    }
    std::ofstream(dir_ + "/port", std::ios::trunc) << port_ << "\n";
    return true;
  }

  // A port that was free a moment ago on 127.0.0.1.
  static int FreePort() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    int port = 0;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
      port = ntohs(a.sin_port);
    }
    ::close(fd);
    return port;
  }

  std::string bin_;
  std::string dir_;
  int port_ = 0;
  bool detached_ = false;
};

}  // namespace arbiter::testing
