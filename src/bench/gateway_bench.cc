#include "bench/gateway_bench.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "bench/child_process.h"
#include "bench/http_load.h"

namespace arbiter::bench {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

void Progress(const std::string& m) { std::fprintf(stderr, "bench gateway: %s\n", m.c_str()); }

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

// A port free right now on 127.0.0.1 (for nginx, which cannot report the one it got).
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

std::string FindNginx(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  for (const char* dir : {"/usr/sbin/", "/usr/local/sbin/", "/usr/bin/", "/usr/local/bin/"}) {
    const std::string p = dir + name;
    if (access(p.c_str(), X_OK) == 0) return p;
  }
  return "";
}

// nginx in the same role as the gateway: a reverse proxy with keep-alive connections to the
// replicas, /s/bench/ stripped as the gateway does, no access log.
std::string NginxConfig(const std::string& dir, int port, int workers,
                        const std::vector<int>& replica_ports) {
  std::string upstream;
  for (const int p : replica_ports) upstream += fmt::format("    server 127.0.0.1:{};\n", p);
  return fmt::format(
      R"(worker_processes {workers};
daemon off;
master_process on;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
worker_rlimit_nofile 65536;
events {{
  worker_connections 16384;
}}
http {{
  access_log off;
  client_body_temp_path {dir}/nginx-tmp/body;
  proxy_temp_path {dir}/nginx-tmp/proxy;
  fastcgi_temp_path {dir}/nginx-tmp/fastcgi;
  uwsgi_temp_path {dir}/nginx-tmp/uwsgi;
  scgi_temp_path {dir}/nginx-tmp/scgi;
  keepalive_requests 100000000;
  keepalive_timeout 75s;
  upstream replicas {{
{upstream}    keepalive 1024;
    keepalive_requests 100000000;
  }}
  server {{
    listen 127.0.0.1:{port} reuseport backlog=4096;
    location /s/bench/ {{
      proxy_pass http://replicas/;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }}
  }}
}}
)",
      fmt::arg("workers", workers), fmt::arg("dir", dir), fmt::arg("port", port),
      fmt::arg("upstream", upstream));
}

// CPU seconds (user + system) used so far by `pid` and its children processes (nginx's
// workers), from /proc.
double CpuSeconds(pid_t pid) {
  if (pid <= 0) return 0;
  const double tick = static_cast<double>(sysconf(_SC_CLK_TCK));
  double total = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    const std::string stat = ReadFile(entry.path().string() + "/stat");
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    // After "pid (comm) ": state ppid ... utime (14th field) stime (15th).
    std::istringstream in(stat.substr(close + 2));
    std::string state;
    long ppid = 0;
    in >> state >> ppid;
    if (std::stol(name) != pid && ppid != pid) continue;
    std::string skip;
    for (int i = 0; i < 9; ++i) in >> skip;
    double utime = 0;
    double stime = 0;
    in >> utime >> stime;
    total += (utime + stime) / tick;
  }
  return total;
}

struct Row {
  std::string proxy;
  int concurrency = 0;
  double rps = 0;
  double p50_ms = 0;
  double p99_ms = 0;
  int64_t failed = 0;
  double cpu_us_per_request = 0;  // of the proxy's processes (0 for direct)
  std::string first_error;
};

// One run of the closed-loop load against one proxy (or the replicas straight).
Row Measure(const std::string& proxy, const std::vector<LoadTarget>& targets,
            const std::string& path, int concurrency, int64_t requests, pid_t proxy_pid) {
  const std::string bytes = HttpRequestBytes(targets[0], "GET", path, {}, "");
  auto request = [&](int64_t) -> const std::string& { return bytes; };
  LoadOptions o;
  o.connections = concurrency;
  o.expect_status = 200;
  o.timeout_ms = 30000;
  o.requests = requests;
  // Each run first warms up on its own connections (every connection opened and used, the
  // proxies' pools filled): twice the connections or a tenth of the requests.
  o.warmup = std::max<int64_t>(2 * static_cast<int64_t>(concurrency), requests / 10);
  const double cpu0 = CpuSeconds(proxy_pid);
  const LoadResult res = RunHttpLoad(targets, o, request);
  const double cpu = CpuSeconds(proxy_pid) - cpu0;
  Row row;
  row.proxy = proxy;
  row.concurrency = concurrency;
  row.rps = res.seconds > 0 ? static_cast<double>(res.requests_ok) / res.seconds : 0;
  row.p50_ms = Percentile(res.latencies_ms, 50);
  row.p99_ms = Percentile(res.latencies_ms, 99);
  row.failed = res.requests_failed;
  row.first_error = res.first_error;
  row.cpu_us_per_request = cpu * 1e6 / static_cast<double>(o.requests + o.warmup);
  return row;
}

}  // namespace

int RunGatewayBench(const GatewayBenchOptions& o) {
  if (o.replicas < 1 || o.concurrency.empty() || o.requests < 1) {
    std::fprintf(stderr, "error: --replicas, --concurrency and --requests must be positive\n");
    return 2;
  }
  rlimit rl{};
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  const std::string binary = o.binary.empty() ? SelfExe() : o.binary;
  const std::string echo = o.echo_server.empty()
                               ? (fs::path(binary).parent_path() / "arbiter-echo-server").string()
                               : o.echo_server;
  if (access(echo.c_str(), X_OK) != 0) {
    std::fprintf(stderr, "error: %s is not an executable (build arbiter-echo-server)\n",
                 echo.c_str());
    return 1;
  }
  const int threads = o.threads > 0
                          ? o.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  std::string tmpl = (fs::temp_directory_path() / "arbiter-bench-gateway-XXXXXX").string();
  const std::string dir = mkdtemp(tmpl.data());
  ::chmod(dir.c_str(), 0755);

  int rc = 0;
  {
    // 1. The replicas.
    std::vector<std::unique_ptr<ChildProcess>> replicas;
    std::vector<int> ports;
    for (int i = 0; i < o.replicas; ++i) {
      auto c = std::make_unique<ChildProcess>(3000);
      c->Start({echo, "--port", "0", "--id", std::to_string(i + 1)},
               fmt::format("{}/echo-{}.log", dir, i + 1));
      const auto line = c->WaitFor("listening on 127.0.0.1:", 10000);
      if (!line) {
        std::fprintf(stderr, "error: arbiter-echo-server %d did not start (%s/echo-%d.log)\n",
                     i + 1, dir.c_str(), i + 1);
        return 1;
      }
      ports.push_back(std::stoi(*line));
      replicas.push_back(std::move(c));
    }
    // 2. The gateway, with a routes file naming them.
    json reps = json::array();
    for (size_t i = 0; i < ports.size(); ++i) {
      reps.push_back(
          {{"id", std::to_string(i + 1)}, {"address", fmt::format("127.0.0.1:{}", ports[i])}});
    }
    const json routes = {
        {"version", 1},
        {"services",
         {{{"name", "bench"},
           {"max_concurrency", 0},
           {"queue_max", 100000},
           {"queue_timeout_ms", 60000},
           {"revisions", {{{"revision", 1}, {"percent", 100}, {"replicas", reps}}}}}}}};
    std::ofstream(dir + "/routes.json") << routes.dump(2);
    ChildProcess gateway(3000);
    gateway.Start({binary, "gateway", "--routes-file", dir + "/routes.json", "--listen",
                   "127.0.0.1:0", "--threads", std::to_string(threads)},
                  dir + "/gateway.log");
    const auto gw_line = gateway.WaitFor("gateway listening on http://127.0.0.1:", 10000);
    if (!gw_line) {
      std::fprintf(stderr, "error: arbiter gateway did not start (%s/gateway.log)\n", dir.c_str());
      return 1;
    }
    const int gateway_port = std::stoi(*gw_line);
    // 3. nginx, when there is one.
    ChildProcess nginx(3000);
    int nginx_port = 0;
    const std::string nginx_bin = FindNginx(o.nginx);
    if (nginx_bin.empty()) {
      Progress("nginx not found: its rows are skipped (apt-get install nginx)");
    } else {
      fs::create_directories(dir + "/nginx-tmp");
      ::chmod((dir + "/nginx-tmp").c_str(), 0777);
      nginx_port = FreePort();
      std::ofstream(dir + "/nginx.conf") << NginxConfig(dir, nginx_port, threads, ports);
      nginx.Start({nginx_bin, "-p", dir, "-e", dir + "/nginx-error.log", "-c", dir + "/nginx.conf"},
                  dir + "/nginx.log");
      // Ready when it answers.
      bool up = false;
      for (int i = 0; i < 250 && !up; ++i) {
        LoadOptions probe;
        probe.connections = 1;
        probe.requests = 1;
        probe.expect_status = 200;
        probe.timeout_ms = 1000;
        const std::string bytes =
            HttpRequestBytes({"127.0.0.1", nginx_port}, "GET", "/s/bench/ready", {}, "");
        up = RunHttpLoad(LoadTarget{"127.0.0.1", nginx_port}, probe,
                         [&](int64_t) -> const std::string& { return bytes; })
                 .requests_ok == 1;
        if (!up) {
          if (nginx.Exited()) break;
          std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
      }
      if (!up) {
        std::fprintf(stderr, "error: nginx did not start: %s\n",
                     ReadFile(dir + "/nginx-error.log").c_str());
        return 1;
      }
    }

    // 4. The rows.
    std::vector<LoadTarget> direct;
    for (const int p : ports) direct.push_back({"127.0.0.1", p});
    const std::string query = o.delay_ms > 0 ? fmt::format("?delay_ms={}", o.delay_ms) : "";
    // Rounds interleave the three (direct, arbiter, nginx, then again), so that a busy moment
    // of a shared machine does not fall on one of them only; each keeps its best round
    // (highest rps), failures of every round added up.
    std::vector<Row> rows;
    for (const int c : o.concurrency) {
      struct Way {
        std::string proxy;
        std::vector<LoadTarget> targets;
        std::string path;
        pid_t pid;
      };
      std::vector<Way> ways = {
          {"direct", direct, "/bench" + query, 0},
          {"arbiter", {{"127.0.0.1", gateway_port}}, "/s/bench/bench" + query, gateway.pid()}};
      if (nginx_port != 0) {
        ways.push_back(
            {"nginx", {{"127.0.0.1", nginx_port}}, "/s/bench/bench" + query, nginx.pid()});
      }
      std::vector<Row> best(ways.size());
      int64_t failed[8] = {};
      for (int round = 0; round < std::max(1, o.rounds); ++round) {
        for (size_t w = 0; w < ways.size(); ++w) {
          Progress(fmt::format("{} connections: {} (round {})", c, ways[w].proxy, round + 1));
          Row r = Measure(ways[w].proxy, ways[w].targets, ways[w].path, c, o.requests, ways[w].pid);
          failed[w] += r.failed;
          if (round == 0 || r.rps > best[w].rps) best[w] = r;
        }
      }
      for (size_t w = 0; w < ways.size(); ++w) {
        best[w].failed = failed[w];
        rows.push_back(best[w]);
      }
    }

    // 5. The report: each proxy's latency added to the direct one's, and the gateway's share
    // of nginx's throughput.
    json out_rows = json::array();
    for (const Row& r : rows) {
      json row = {{"proxy", r.proxy},
                  {"concurrency", r.concurrency},
                  {"rps", std::round(r.rps)},
                  {"p50_ms", std::round(r.p50_ms * 1000) / 1000},
                  {"p99_ms", std::round(r.p99_ms * 1000) / 1000},
                  {"failed", r.failed}};
      if (r.proxy != "direct") {
        row["cpu_us_per_request"] = std::round(r.cpu_us_per_request * 10) / 10;
      }
      for (const Row& d : rows) {
        if (d.proxy == "direct" && d.concurrency == r.concurrency && r.proxy != "direct") {
          row["added_p50_ms"] = std::round((r.p50_ms - d.p50_ms) * 1000) / 1000;
          row["added_p99_ms"] = std::round((r.p99_ms - d.p99_ms) * 1000) / 1000;
        }
        if (d.proxy == "nginx" && d.concurrency == r.concurrency && r.proxy == "arbiter" &&
            d.rps > 0) {
          row["rps_vs_nginx"] = std::round(r.rps / d.rps * 1000) / 1000;
          row["p99_vs_nginx_ms"] = std::round((r.p99_ms - d.p99_ms) * 1000) / 1000;
        }
      }
      if (!r.first_error.empty()) row["first_error"] = r.first_error;
      if (r.failed > 0) rc = 1;
      out_rows.push_back(std::move(row));
    }
    const json report = {{"rows", out_rows}};
    if (o.json) {
      std::printf("%s\n", report.dump().c_str());
    } else {
      std::printf("%-8s %11s %10s %9s %9s %8s %11s\n", "proxy", "connections", "rps", "p50_ms",
                  "p99_ms", "failed", "cpu_us/req");
      for (const Row& r : rows) {
        std::printf("%-8s %11d %10.0f %9.3f %9.3f %8lld %11.1f\n", r.proxy.c_str(), r.concurrency,
                    r.rps, r.p50_ms, r.p99_ms, static_cast<long long>(r.failed),
                    r.cpu_us_per_request);
      }
      std::printf(
          "(replicas %d, gateway threads and nginx workers %d, requests %lld per row, "
          "delay %d ms)\n",
          o.replicas, threads, static_cast<long long>(o.requests), o.delay_ms);
    }
    nginx.Stop(3000);
    gateway.Stop(3000);
  }
  if (o.keep) {
    Progress("kept " + dir);
  } else {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  return rc;
}

}  // namespace arbiter::bench
