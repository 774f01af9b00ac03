// SlapdProcess: a throw-away OpenLDAP server (Debian's slapd) for the directory sign-in tests: its
// configuration (slapd.conf, an mdb database under dc=example,dc=com) and data in a temporary
// folder, seeded with slapadd, listening on a free loopback port, in the foreground as a child
// process. The destructor kills it.
#pragma once

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "server_process.h"

namespace arbiter::testing {

inline constexpr const char* kSlapdBinary = "/usr/sbin/slapd";
inline constexpr const char* kLdapSuffix = "dc=example,dc=com";
inline constexpr const char* kLdapRootDn = "cn=root,dc=example,dc=com";
inline constexpr const char* kLdapRootPassword = "root-secret";

// Whether slapd and the LDAP tools are installed (scripts/install-deps.sh: slapd, ldap-utils).
inline bool SlapdAvailable() {
  return ::access(kSlapdBinary, X_OK) == 0 && ::access("/usr/sbin/slapadd", X_OK) == 0 &&
         ::access("/usr/bin/ldapwhoami", X_OK) == 0;
}

// A port that was free a moment ago on 127.0.0.1 (slapd takes no port 0).
inline int FreeLoopbackPort() {
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

class SlapdProcess {
 public:
  ~SlapdProcess() { Stop(); }

  // Writes the configuration into `dir`, loads `ldif` (entries under kLdapSuffix, the suffix's own
  // entry included) and starts slapd; true once it answers a bind (at most 10 s). `error` says
  // what failed.
  bool Start(const std::string& dir, const std::string& ldif, std::string* error) {
    dir_ = dir;
    std::filesystem::create_directories(dir + "/db");
    {
      std::ofstream conf(dir + "/slapd.conf");
      conf << fmt::format(
          "include /etc/ldap/schema/core.schema\n"
          "include /etc/ldap/schema/cosine.schema\n"
          "include /etc/ldap/schema/nis.schema\n"
          "include /etc/ldap/schema/inetorgperson.schema\n"
          "pidfile {0}/slapd.pid\n"
          "modulepath /usr/lib/ldap\n"
          "moduleload back_mdb\n"
          "database mdb\n"
          "maxsize 16777216\n"
          "suffix \"{1}\"\n"
          "rootdn \"{2}\"\n"
          "rootpw {3}\n"
          "directory {0}/db\n",
          dir, kLdapSuffix, kLdapRootDn, kLdapRootPassword);
      std::ofstream seed(dir + "/seed.ldif");
      seed << ldif;
    }
    std::string out;
    if (Shell(fmt::format("/usr/sbin/slapadd -f {0}/slapd.conf -l {0}/seed.ldif", dir), &out) !=
        0) {
      *error = "slapadd: " + out;
      return false;
    }
    // A free port may be taken between the check and slapd's bind: a few tries.
    for (int attempt = 0; attempt < 3; ++attempt) {
      if (Launch(error)) return true;
      Stop();
    }
    return false;
  }

  // Kills slapd (SIGKILL) and waits for it.
  void Stop() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
  }

  int port() const { return port_; }
  std::string url() const { return fmt::format("ldap://127.0.0.1:{}", port_); }

 private:
  bool Launch(std::string* error) {
    port_ = FreeLoopbackPort();
    const std::string listen = fmt::format("ldap://127.0.0.1:{}/", port_);
    const std::string log = dir_ + "/slapd.log";
    pid_ = fork();
    if (pid_ == 0) {
      // -d 0: stays in the foreground (our child), logs nothing but errors. As root it keeps
      // running as root (no -u): the folder is the test's own.
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      const std::string conf = dir_ + "/slapd.conf";
      execl(kSlapdBinary, kSlapdBinary, "-d", "0", "-f", conf.c_str(), "-h", listen.c_str(),
            static_cast<char*>(nullptr));
      _exit(127);
    }
    const std::string probe =
        fmt::format("/usr/bin/ldapwhoami -x -o nettimeout=2 -H ldap://127.0.0.1:{} -D '{}' -w '{}'",
                    port_, kLdapRootDn, kLdapRootPassword);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        std::ifstream in(log);
        *error = "slapd exited: " + std::string(std::istreambuf_iterator<char>(in), {});
        return false;
      }
      if (Shell(probe, nullptr) == 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    *error = "slapd did not answer within 10 s";
    return false;
  }

  std::string dir_;
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace arbiter::testing
