// arbiter-srun: Slurm's `srun` inside an Arbiter batch job (every task finds it on its PATH as
// `srun`). The model is in exec/srun_layout.h and docs/cli.md ("srun inside a batch script").
//
//   srun [options] command [args...]   a job step: --ntasks-per-node processes on each node of
//                                      the step, ranks and GPUs as Slurm gives them; waits for all
//                                      and exits with the worst exit status
//   srun --arbiter-worker              tasks 1..N-1 of a multi-node batch job: run the steps the
//                                      script's srun sends, until the script ends
//   srun --arbiter-release             the batch wrapper, after the script: lets the workers end
//
// Multi-node steps: the srun in the script (task 0) listens on MASTER_ADDR's step port
// (26000 + the job id modulo 6000); the workers on the other nodes connect to it, prove they
// belong to the job with ARBITER_STEP_KEY (a per-run secret the server gives every task of the job,
// and no one else), receive the step, run their node's share of it, stream its output back, and
// report their worst exit status. Both sides prove they hold the key without sending it
// (HMAC-SHA256 over each other's nonces), so a process that takes the port first learns nothing and
// gets no worker. Only the C++ runtime and libcrypto go into this binary.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <poll.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "exec/srun_layout.h"

extern char** environ;

namespace arbiter::exec {
namespace {

constexpr int kJoinTimeoutMs = 300000;  // how long a step waits for the other nodes' workers
volatile sig_atomic_t g_signal = 0;

std::string Env(const char* name, const std::string& fallback = "") {
  const char* v = std::getenv(name);
  return v != nullptr ? v : fallback;
}

int EnvInt(const char* name, int fallback) {
  const std::string v = Env(name);
  if (v.empty() || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
    return fallback;
  }
  return std::atoi(v.c_str());
}

int64_t NowMs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

std::string Hex(const unsigned char* p, size_t n) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out.push_back(kDigits[p[i] >> 4]);
    out.push_back(kDigits[p[i] & 15]);
  }
  return out;
}

std::string Nonce() {
  unsigned char buf[16];
  if (RAND_bytes(buf, sizeof(buf)) != 1) return {};
  return Hex(buf, sizeof(buf));
}

std::string Proof(const std::string& key, const std::string& message) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), md,
           &len) == nullptr) {
    return {};
  }
  return Hex(md, len);
}

bool SameProof(const std::string& a, const std::string& b) {
  return !a.empty() && a.size() == b.size() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

void Error(const std::string& what) { std::fprintf(stderr, "srun: error: %s\n", what.c_str()); }

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == ENOTSOCK) {
      const ssize_t v = ::write(fd, data, n);
      if (v < 0 && errno == EINTR) continue;
      if (v <= 0) return false;
      data += v;
      n -= static_cast<size_t>(v);
      continue;
    }
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Messages between srun and its workers: "T LEN\n" and LEN bytes.
bool SendMsg(int fd, char type, const std::string& body) {
  const std::string head = std::string(1, type) + " " + std::to_string(body.size()) + "\n";
  return WriteAll(fd, head.data(), head.size()) && WriteAll(fd, body.data(), body.size());
}

// Reads messages from a socket as they arrive.
class MsgReader {
 public:
  // Appends what is readable; false at end of stream or on an error.
  bool Fill(int fd) {
    char buf[65536];
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    in_.append(buf, static_cast<size_t>(n));
    return true;
  }
  // The next complete message, if any.
  bool Next(char* type, std::string* body) {
    const size_t nl = in_.find('\n');
    if (nl == std::string::npos || nl < 2) return false;
    const size_t len = std::strtoull(in_.c_str() + 2, nullptr, 10);
    if (in_.size() < nl + 1 + len) return false;
    *type = in_[0];
    *body = in_.substr(nl + 1, len);
    in_.erase(0, nl + 1 + len);
    return true;
  }
  // Blocks until one message (or the end, or `deadline_ms` on the monotonic clock).
  bool Wait(int fd, char* type, std::string* body, int64_t deadline_ms) {
    while (!Next(type, body)) {
      const int64_t left = deadline_ms - NowMs();
      if (left <= 0) return false;
      pollfd p{fd, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 1000)));
      if (r < 0 && errno != EINTR) return false;
      if (r > 0 && !Fill(fd)) return false;
    }
    return true;
  }

 private:
  std::string in_;
};

// The caller's environment for the other nodes, as hex of "K=V" words ended by NUL bytes (one
// line, whatever the values hold); what belongs to a node is left out.
std::string EncodeEnv(const std::map<std::string, std::string>& env) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (const auto& [k, v] : env) {
    if (IsNodeEnv(k)) continue;
    for (const char c : k + "=" + v + '\0') {
      out += kHex[static_cast<unsigned char>(c) >> 4];
      out += kHex[static_cast<unsigned char>(c) & 15];
    }
  }
  return out;
}

std::map<std::string, std::string> DecodeEnv(const std::string& hex) {
  std::string raw;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    raw += static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16));
  }
  std::map<std::string, std::string> env;
  for (const std::string& kv : SplitList(raw, '\0')) {
    const size_t eq = kv.find('=');
    if (eq != std::string::npos && eq > 0) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// This process's environment.
std::map<std::string, std::string> OwnEnv() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string kv = *e;
    const size_t eq = kv.find('=');
    if (eq != std::string::npos) env[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return env;
}

// The step's description as sent to the workers: "key=value" lines, then the command's words
// separated by NUL bytes after an empty line.
std::string EncodeStep(const SrunRequest& r, const StepLayout& l, int step) {
  std::string s = "nodes=" + std::to_string(l.nodes) + "\nper_node=" + std::to_string(l.per_node) +
                  "\nntasks=" + std::to_string(l.ntasks) +
                  "\ngpus_per_task=" + std::to_string(r.gpus_per_task) +
                  "\ngpu_bind=" + r.gpu_bind + "\nlabel=" + (r.label ? "1" : "0") +
                  "\nchdir=" + r.chdir + "\nstep=" + std::to_string(step) +
                  "\nenv=" + EncodeEnv(r.env) + "\n\n";
  for (const std::string& a : r.argv) s += a + '\0';
  return s;
}

bool DecodeStep(const std::string& s, SrunRequest* r, StepLayout* l, int* step) {
  const size_t end = s.find("\n\n");
  if (end == std::string::npos) return false;
  std::map<std::string, std::string> kv;
  for (const std::string& line : SplitList(s.substr(0, end), '\n')) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  l->nodes = std::atoi(kv["nodes"].c_str());
  l->per_node = std::atoi(kv["per_node"].c_str());
  l->ntasks = std::atoi(kv["ntasks"].c_str());
  r->gpus_per_task = std::atoi(kv["gpus_per_task"].c_str());
  r->gpu_bind = kv["gpu_bind"];
  r->label = kv["label"] == "1";
  r->chdir = kv["chdir"];
  // Older srun sent no environment: the tasks then have the worker's own.
  r->env = StepEnv(DecodeEnv(kv["env"]), OwnEnv());
  *step = std::atoi(kv["step"].c_str());
  r->argv = SplitList(s.substr(end + 2), '\0');
  return !r->argv.empty() && l->per_node > 0;
}

// One local task of a step.
struct Task {
  int rank = 0;
  pid_t pid = -1;
  int out = -1, err = -1;  // pipes, when the output goes elsewhere than srun's own stdio
  std::string out_rest, err_rest;
  int status = 0;
  bool done = false;
};

// Starts node `node`'s share of the step. With `capture`, each task's stdout and stderr come
// back through pipes (to label them or to send them to the script's srun); else they are srun's.
std::string StartTasks(const SrunRequest& r, const StepLayout& l, int node, int step, bool capture,
                       std::vector<Task>* tasks) {
  const std::vector<std::string> gpus = SplitList(Env("CUDA_VISIBLE_DEVICES"));
  const std::vector<int> ranks = l.RanksOn(node);
  for (size_t local = 0; local < ranks.size(); ++local) {
    std::vector<std::string> mine;
    if (std::string e = TaskGpus(r, gpus, static_cast<int>(local), l.per_node, &mine); !e.empty()) {
      return e;
    }
    std::map<std::string, std::string> env = r.env;
    env.erase("ARBITER_STEP_KEY");  // the step's secret stays with srun
    for (const auto& [k, v] : TaskEnv(l, node, ranks[local], static_cast<int>(local), mine, step)) {
      env[k] = v;
    }
    Task t;
    t.rank = ranks[local];
    int out_pipe[2] = {-1, -1};
    int err_pipe[2] = {-1, -1};
    if (capture && (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0)) {
      return std::string("cannot create pipes: ") + std::strerror(errno);
    }
    const pid_t pid = ::fork();
    if (pid < 0) return std::string("cannot fork: ") + std::strerror(errno);
    if (pid == 0) {
      if (capture) {
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
      }
      signal(SIGTERM, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      if (!r.chdir.empty() && ::chdir(r.chdir.c_str()) != 0) {
        std::fprintf(stderr, "srun: error: cannot enter %s: %s\n", r.chdir.c_str(),
                     std::strerror(errno));
        _exit(1);
      }
      std::vector<std::string> envs;
      for (const auto& [k, v] : env) envs.push_back(k + "=" + v);
      std::vector<char*> envp;
      for (std::string& s : envs) envp.push_back(s.data());
      envp.push_back(nullptr);
      std::vector<std::string> argv = r.argv;
      std::vector<char*> args;
      for (std::string& s : argv) args.push_back(s.data());
      args.push_back(nullptr);
      environ = envp.data();
      ::execvp(args[0], args.data());
      std::fprintf(stderr, "srun: error: %s: %s\n", r.argv[0].c_str(), std::strerror(errno));
      _exit(errno == ENOENT ? 127 : 126);
    }
    if (capture) {
      ::close(out_pipe[1]);
      ::close(err_pipe[1]);
      t.out = out_pipe[0];
      t.err = err_pipe[0];
    }
    t.pid = pid;
    tasks->push_back(std::move(t));
  }
  return "";
}

// The exit status a shell would give: the code, or 128 + the signal.
int ExitCodeOf(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

// Text from a task's pipe: with `label`, each whole line prefixed "RANK: " (the rest kept until
// its newline or the end).
std::string Chunk(const std::string& data, std::string* rest, int rank, bool label, bool last) {
  if (!label) return data;
  *rest += data;
  std::string out;
  size_t start = 0;
  for (size_t nl = rest->find('\n'); nl != std::string::npos; nl = rest->find('\n', start)) {
    out += std::to_string(rank) + ": " + rest->substr(start, nl + 1 - start);
    start = nl + 1;
  }
  rest->erase(0, start);
  if (last && !rest->empty()) {
    out += std::to_string(rank) + ": " + *rest + "\n";
    rest->clear();
  }
  return out;
}

// Runs the local tasks' output loop until they all exit. `emit(is_err, text)` gets their output
// when captured; `extra` are more descriptors to watch (worker sockets), `on_extra(i)` is called
// when one is readable and returns false to stop watching it. Forwards SIGTERM/SIGINT to the
// tasks. Returns the worst exit status of the local tasks.
template <typename Emit, typename OnExtra>
int RunLoop(std::vector<Task>& tasks, bool label, Emit emit, std::vector<int>& extra,
            OnExtra on_extra) {
  int worst = 0;
  bool signalled = false;
  auto open_pipes = [&] {
    for (const Task& t : tasks) {
      if (t.out >= 0 || t.err >= 0) return true;
    }
    return false;
  };
  auto running = [&] {
    for (const Task& t : tasks) {
      if (!t.done) return true;
    }
    return false;
  };
  auto any_extra = [&] {
    return std::any_of(extra.begin(), extra.end(), [](int fd) { return fd >= 0; });
  };
  while (running() || open_pipes() || any_extra()) {
    if (g_signal != 0 && !signalled) {
      signalled = true;
      for (const Task& t : tasks) {
        if (!t.done) ::kill(t.pid, SIGTERM);
      }
    }
    std::vector<pollfd> fds;
    std::vector<std::pair<int, int>> who;  // (task index or -1 - extra index, 1 out / 2 err)
    for (size_t i = 0; i < tasks.size(); ++i) {
      if (tasks[i].out >= 0) {
        fds.push_back({tasks[i].out, POLLIN, 0});
        who.push_back({static_cast<int>(i), 1});
      }
      if (tasks[i].err >= 0) {
        fds.push_back({tasks[i].err, POLLIN, 0});
        who.push_back({static_cast<int>(i), 2});
      }
    }
    for (size_t i = 0; i < extra.size(); ++i) {
      if (extra[i] < 0) continue;
      fds.push_back({extra[i], POLLIN, 0});
      who.push_back({-1 - static_cast<int>(i), 0});
    }
    const int r = ::poll(fds.data(), fds.size(), 100);
    for (int k = 0; r > 0 && k < static_cast<int>(fds.size()); ++k) {
      if (fds[static_cast<size_t>(k)].revents == 0) continue;
      const auto [index, stream] = who[static_cast<size_t>(k)];
      if (index < 0) {
        const size_t e = static_cast<size_t>(-1 - index);
        if (!on_extra(e)) extra[e] = -1;
        continue;
      }
      Task& t = tasks[static_cast<size_t>(index)];
      int& fd = stream == 1 ? t.out : t.err;
      std::string& rest = stream == 1 ? t.out_rest : t.err_rest;
      char buf[65536];
      const ssize_t n = ::read(fd, buf, sizeof(buf));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        emit(stream == 2, Chunk("", &rest, t.rank, label, true));
        ::close(fd);
        fd = -1;
        continue;
      }
      const std::string text =
          Chunk(std::string(buf, static_cast<size_t>(n)), &rest, t.rank, label, false);
      if (!text.empty()) emit(stream == 2, text);
    }
    for (Task& t : tasks) {
      if (t.done) continue;
      int status = 0;
      if (::waitpid(t.pid, &status, WNOHANG) == t.pid) {
        t.done = true;
        t.status = status;
        worst = std::max(worst, ExitCodeOf(status));
      }
    }
  }
  return worst;
}

void OnSignal(int sig) { g_signal = sig; }

void InstallSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGHUP, &sa, nullptr);
}

// The port of the job's steps on MASTER_ADDR (26000-31999): apart from MASTER_PORT's range
// (20000-25999), which the programs the steps start use for their own rendezvous, from services'
// replicas (10000-19999), and below the kernel's ephemeral ports (32768 and up), which outgoing
// connections take and which would make the port busy by chance.
int StepPort() {
  const long long job = std::atoll(Env("ARBITER_JOB_ID", "0").c_str());
  return 26000 + static_cast<int>(job % 6000);
}

// Accepts the workers of nodes 1..nodes-1 (each says who it is with the step key). Returns their
// sockets by node (index 0 unused), or an error.
std::string JoinWorkers(int nodes, std::vector<int>* socks) {
  const std::string key = Env("ARBITER_STEP_KEY");
  if (key.empty()) {
    return "this job has no step key (ARBITER_STEP_KEY): its nodes are run by an older Arbiter, "
           "so srun can run steps on this node only (-N 1)";
  }
  const int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = htons(static_cast<uint16_t>(StepPort()));
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(lfd, 64) != 0) {
    const std::string why = std::strerror(errno);
    ::close(lfd);
    return "cannot listen on port " + std::to_string(StepPort()) + " for the other nodes: " + why;
  }
  socks->assign(static_cast<size_t>(nodes), -1);
  int joined = 1;
  const int64_t deadline = NowMs() + kJoinTimeoutMs;
  while (joined < nodes) {
    if (g_signal != 0) break;
    pollfd p{lfd, POLLIN, 0};
    const int64_t left = deadline - NowMs();
    if (left <= 0) break;
    if (::poll(&p, 1, static_cast<int>(std::min<int64_t>(left, 500))) <= 0) continue;
    const int fd = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // H "NODE NONCE", C "NONCE PROOF" (ours), A "PROOF" (theirs): a worker of node NODE of this
    // run of the job.
    MsgReader reader;
    char type = 0;
    std::string body;
    if (!reader.Wait(fd, &type, &body, NowMs() + 5000) || type != 'H') {
      ::close(fd);
      continue;
    }
    const size_t sp = body.find(' ');
    const int node = sp == std::string::npos ? -1 : std::atoi(body.c_str());
    const std::string theirs = sp == std::string::npos ? "" : body.substr(sp + 1);
    const std::string ours = Nonce();
    if (node < 1 || node >= nodes || (*socks)[static_cast<size_t>(node)] >= 0 || theirs.empty() ||
        !SendMsg(fd, 'C', ours + " " + Proof(key, "srun " + theirs + " " + ours)) ||
        !reader.Wait(fd, &type, &body, NowMs() + 5000) || type != 'A' ||
        !SameProof(body,
                   Proof(key, "worker " + ours + " " + theirs + " " + std::to_string(node)))) {
      ::close(fd);  // not one of ours, or a node that already joined
      continue;
    }
    (*socks)[static_cast<size_t>(node)] = fd;
    ++joined;
  }
  ::close(lfd);
  if (joined < nodes) {
    std::string missing;
    for (int n = 1; n < nodes; ++n) {
      if ((*socks)[static_cast<size_t>(n)] < 0)
        missing += (missing.empty() ? "" : ",") + std::to_string(n);
    }
    for (int fd : *socks) {
      if (fd >= 0) ::close(fd);
    }
    return g_signal != 0 ? "stopped while waiting for the other nodes"
                         : "the tasks of node(s) " + missing + " did not join the step within " +
                               std::to_string(kJoinTimeoutMs / 1000) + " s";
  }
  return "";
}

// The job's steps are numbered from 0 in the order they start (SLURM_STEP_ID), in a file of the
// job's TMPDIR.
int NextStepId() {
  const std::string path = Env("TMPDIR", "/tmp") + "/.arbiter-steps-" + Env("ARBITER_JOB_ID", "0");
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return 0;
  ::flock(fd, LOCK_EX);
  char buf[32] = {0};
  const ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
  const int id = n > 0 ? std::atoi(buf) : 0;
  const std::string next = std::to_string(id + 1);
  if (::ftruncate(fd, 0) == 0 && ::pwrite(fd, next.data(), next.size(), 0) < 0) {
    // the next step gets the same id: harmless
  }
  ::close(fd);
  return id;
}

int RunStep(const std::vector<std::string>& args) {
  SrunRequest r;
  if (std::string e = ParseSrunArgs(args, &r); !e.empty()) {
    Error(e);
    return 2;
  }
  // The batch script's --gpus-per-task holds for its steps, as with Slurm.
  if (std::string e = ApplyJobGpusPerTask(Env("SLURM_GPUS_PER_TASK", ""), &r); !e.empty()) {
    Error(e);
    return 2;
  }
  const int alloc_nodes = std::max(1, EnvInt("SLURM_JOB_NUM_NODES", EnvInt("WORLD_SIZE", 1)));
  const int node = EnvInt("ARBITER_TASK_INDEX", 0);
  StepLayout l;
  if (std::string e = Layout(r, node == 0 ? alloc_nodes : 1, EnvInt("SLURM_NTASKS_PER_NODE", 0),
                             EnvInt("SLURM_NTASKS", 0), &l);
      !e.empty()) {
    Error(e);
    return 2;
  }
  if (node != 0) l.nodes = 1;  // a step started from a step: this node only
  const int step = NextStepId();
  r.env = OwnEnv();  // the script's, for every task of the step (--export=ALL)
  InstallSignals();
  std::vector<int> socks;
  if (l.nodes > 1) {
    if (std::string e = JoinWorkers(l.nodes, &socks); !e.empty()) {
      Error(e);
      return 1;
    }
    const std::string msg = EncodeStep(r, l, step);
    for (int n = 1; n < l.nodes; ++n) SendMsg(socks[static_cast<size_t>(n)], 'R', msg);
  }
  std::vector<Task> tasks;
  const std::string started = StartTasks(r, l, node == 0 ? 0 : node, step, r.label, &tasks);
  if (!started.empty()) {
    Error(started);
    for (Task& t : tasks) ::kill(t.pid, SIGTERM);
  }
  // Remote nodes: their output as it comes, then "X CODE".
  int remote_worst = 0;
  std::vector<MsgReader> readers(socks.size());
  std::vector<int> extra;
  for (size_t i = 1; i < socks.size(); ++i) extra.push_back(socks[i]);
  auto emit = [](bool is_err, const std::string& text) {
    if (!text.empty()) WriteAll(is_err ? 2 : 1, text.data(), text.size());
  };
  auto on_extra = [&](size_t e) {
    const int fd = extra[e];
    MsgReader& rd = readers[e + 1];
    const bool open = rd.Fill(fd);
    char type = 0;
    std::string body;
    bool finished = !open;
    while (rd.Next(&type, &body)) {
      if (type == 'O' || type == 'E') emit(type == 'E', body);
      if (type == 'X') {
        remote_worst = std::max(remote_worst, std::atoi(body.c_str()));
        finished = true;
      }
    }
    if (!open && type != 'X') {
      Error("node " + std::to_string(e + 1) + " left the step before it ended");
      remote_worst = std::max(remote_worst, 1);
    }
    if (finished) ::close(fd);
    return !finished;
  };
  const int local_worst = RunLoop(tasks, r.label, emit, extra, on_extra);
  if (!started.empty()) return std::max(1, std::max(local_worst, remote_worst));
  return std::max(local_worst, remote_worst);
}

// Connects to the script's srun; -1 while it is not listening.
int ConnectToStep() {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* ai = nullptr;
  const std::string host = Env("MASTER_ADDR", "127.0.0.1");
  if (::getaddrinfo(host.c_str(), std::to_string(StepPort()).c_str(), &hints, &ai) != 0 ||
      ai == nullptr) {
    return -1;
  }
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool ok = fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
  ::freeaddrinfo(ai);
  if (!ok) {
    if (fd >= 0) ::close(fd);
    return -1;
  }
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

// Tasks 1..N-1 of a multi-node batch job: join each step of the script and run this node's share,
// until the script's wrapper releases the workers (or the job is stopped).
int RunWorker() {
  const std::string key = Env("ARBITER_STEP_KEY");
  const int node = EnvInt("ARBITER_TASK_INDEX", 0);
  if (key.empty() || node < 1) {
    Error("--arbiter-worker runs on tasks 1..N-1 of a multi-node batch job only");
    return 2;
  }
  InstallSignals();
  while (g_signal == 0) {
    const int fd = ConnectToStep();
    if (fd < 0) {
      ::usleep(200 * 1000);
      continue;
    }
    // Only a step that proves it holds the key learns who we are and may give us work.
    const std::string ours = Nonce();
    SendMsg(fd, 'H', std::to_string(node) + " " + ours);
    MsgReader reader;
    char type = 0;
    std::string body;
    if (!reader.Wait(fd, &type, &body, NowMs() + 5000) || type != 'C') {
      ::close(fd);
      ::usleep(200 * 1000);
      continue;
    }
    const size_t sp = body.find(' ');
    const std::string theirs = body.substr(0, sp);
    const std::string proof = sp == std::string::npos ? "" : body.substr(sp + 1);
    if (theirs.empty() || !SameProof(proof, Proof(key, "srun " + ours + " " + theirs))) {
      ::close(fd);
      ::usleep(200 * 1000);
      continue;
    }
    SendMsg(fd, 'A', Proof(key, "worker " + theirs + " " + ours + " " + std::to_string(node)));
    // The step may wait for other nodes to join before it says what to run.
    if (!reader.Wait(fd, &type, &body, NowMs() + kJoinTimeoutMs + 60000)) {
      ::close(fd);
      continue;
    }
    if (type == 'Q') {
      ::close(fd);
      return 0;
    }
    SrunRequest r;
    StepLayout l;
    int step = 0;
    if (type != 'R' || !DecodeStep(body, &r, &l, &step)) {
      ::close(fd);
      continue;
    }
    std::vector<Task> tasks;
    const std::string started = StartTasks(r, l, node, step, true, &tasks);
    if (!started.empty()) {
      SendMsg(fd, 'E', "srun: error: node " + std::to_string(node) + ": " + started + "\n");
      for (Task& t : tasks) ::kill(t.pid, SIGTERM);
    }
    std::vector<int> none;
    auto emit = [&](bool is_err, const std::string& text) {
      if (!text.empty()) SendMsg(fd, is_err ? 'E' : 'O', text);
    };
    int worst = RunLoop(tasks, r.label, emit, none, [](size_t) { return false; });
    if (!started.empty()) worst = std::max(worst, 1);
    SendMsg(fd, 'X', std::to_string(worst));
    ::close(fd);
  }
  return 128 + g_signal;
}

// After the batch script: every worker still waiting is told to end.
int Release() {
  const int nodes = std::max(1, EnvInt("WORLD_SIZE", 1));
  if (nodes < 2 || Env("ARBITER_STEP_KEY").empty()) return 0;
  std::vector<int> socks;
  if (std::string e = JoinWorkers(nodes, &socks); !e.empty()) {
    Error(e);
    return 1;
  }
  for (size_t n = 1; n < socks.size(); ++n) {
    SendMsg(socks[n], 'Q', "");
    ::close(socks[n]);
  }
  return 0;
}

}  // namespace
}  // namespace arbiter::exec

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  const std::string self = argv[0];
  if (self.substr(self.rfind('/') == std::string::npos ? 0 : self.rfind('/') + 1) == "scontrol") {
    std::string out, err;
    const char* nodelist = std::getenv("SLURM_JOB_NODELIST");
    const int rc = arbiter::exec::Scontrol(args, nodelist != nullptr ? nodelist : "", &out, &err);
    std::fputs(out.c_str(), stdout);
    std::fputs(err.c_str(), stderr);
    return rc;
  }
  if (args.size() == 1 && args[0] == "--arbiter-worker") return arbiter::exec::RunWorker();
  if (args.size() == 1 && args[0] == "--arbiter-release") return arbiter::exec::Release();
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) {
    std::printf(
        "Usage: srun [options] command [args...]\n"
        "Runs a job step inside an Arbiter batch job, as Slurm's srun does inside an allocation:\n"
        "--ntasks-per-node processes on each node of the step (-n, -N, --ntasks-per-node), with\n"
        "SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID, RANK, LOCAL_RANK, WORLD_SIZE and their GPUs\n"
        "(--gpus-per-task, --gpu-bind=none|closest|single:N|per_task:N|map_gpu:LIST); -l labels\n"
        "output lines with the rank, -D sets the working directory. Waits for every task and\n"
        "exits with the worst exit status. See docs/cli.md, \"srun inside a batch script\".\n");
    return 0;
  }
  return arbiter::exec::RunStep(args);
}
