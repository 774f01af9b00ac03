// Integration tests of GET /metrics: the real server with jobs, queues and the built-in node;
// `promtool check metrics` on a real scrape; who may read it; and a real Prometheus server,
// configured from deploy/prometheus.yml, scraping the server until it reports the GPUs the jobs
// hold. Tests that need Prometheus' binaries skip (with the reason) where they are missing.
#include <arpa/inet.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

#include "agent_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kPromtool = "/usr/bin/promtool";
constexpr const char* kPrometheus = "/usr/bin/prometheus";
constexpr const char* kMetricsSecret = "scrape-secret-0123456789abcdef";

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
priority_classes:
  - {name: normal, value: 100, preemptible: true}
tenants:
  - name: vision
    queues:
      - {name: vision-train, guaranteed: {gpu: 4}, max: {gpu: 6}}
      - {name: vision-dev, guaranteed: {gpu: 0}}
  - name: speech
    queues:
      - {name: speech-train, guaranteed: {gpu: 4}}
users:
  - {name: alice, tenant: vision, role: member}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
  - {name: spare, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
)";

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A free loopback port: bound to port 0, then released for the child to take.
int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

// Replaces the one occurrence of `from` in `text`; fails the test when it is not there once.
void ReplaceOnce(std::string* text, const std::string& from, const std::string& to) {
  const size_t at = text->find(from);
  ASSERT_NE(at, std::string::npos) << "deploy/prometheus.yml has no '" << from << "'";
  ASSERT_EQ(text->find(from, at + 1), std::string::npos) << "twice: " << from;
  text->replace(at, from.size(), to);
}

// A child process (Prometheus) whose output goes to a log file; the destructor stops it (SIGTERM,
// then SIGKILL after 10 s) so that nothing outlives the test, on failure too.
class ChildProcess {
 public:
  bool Start(std::vector<std::string> args, const std::string& log) {
    pid_ = fork();
    if (pid_ == 0) {
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    return pid_ > 0;
  }
  ~ChildProcess() { Stop(); }
  // Returns the wait status, or -1 when it was not running.
  int Stop() {
    if (pid_ <= 0) return -1;
    ::kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 200; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return status;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ::kill(pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  bool running() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      return false;
    }
    return true;
  }

 private:
  pid_t pid_ = -1;
};

class MetricsTest : public ::testing::Test {
 protected:
  // SIGTERM: the server kills its tasks (the jobs' `sleep`) before it exits.
  void TearDown() override { server_.Kill(SIGTERM); }

  // Starts the server with the configuration, the built-in node `box`, and `extra` flags.
  void StartServer(std::vector<std::string> extra = {}) {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
      std::ofstream t(dir_.path() + "/metrics.token");
      t << kMetricsSecret << "\n";
    }
    std::vector<std::string> flags = {
        "--config", dir_.path() + "/cluster.yaml", "--local-node",
        "box",      "--metrics-token-file",        dir_.path() + "/metrics.token"};
    for (auto& e : extra) flags.push_back(e);
    ASSERT_TRUE(server_.Start(dir_.path(), flags)) << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  uint64_t Submit(const std::string& queue, int gpus) {
    const json body = {{"queue", queue},
                       {"command", {"sleep", "60"}},
                       {"resources", {{"gpus", gpus}, {"cpu_milli", 100}, {"memory_mib", 64}}}};
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  // Polls (bounded, 50 ms apart) until the job is in `state`.
  bool WaitFor(uint64_t id, const std::string& state) {
    std::string last;
    for (int i = 0; i < 400; ++i) {
      auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id));
      if (r && r->status == 200) {
        last = json::parse(r->body)["state"];
        if (last == state) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << " (last: " << last << ")";
    return false;
  }

  // Jobs in several states: 3 GPUs running on `box` (2 in vision-train, 1 in speech-train), a job
  // pending on vision-train's max (2 + 5 > 6) and one cancelled while pending; `spare` cordoned.
  void MakeWorkload() {
    auto cordon = admin_->Post("/api/v1/nodes/spare/cordon", "", "application/json");
    ASSERT_TRUE(cordon && cordon->status == 200) << (cordon ? cordon->body : "no response");
    const uint64_t a = Submit("vision-train", 2);
    const uint64_t b = Submit("speech-train", 1);
    ASSERT_TRUE(WaitFor(a, "running"));
    ASSERT_TRUE(WaitFor(b, "running"));
    Submit("vision-train", 5);
    const uint64_t c = Submit("vision-train", 5);
    auto r = admin_->Post(fmt::format("/api/v1/jobs/{}/cancel", c), "", "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  }

  std::string Scrape(const std::string& token) {
    auto r = server_.Client(token)->Get("/metrics");
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
    if (r) {
      EXPECT_EQ(r->get_header_value("Content-Type"), "text/plain; version=0.0.4; charset=utf-8");
    }
    return r ? r->body : "";
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

// The sum of every sample of `name` whose line contains `filter`.
double Sum(const std::string& text, const std::string& name, const std::string& filter = "") {
  double sum = 0;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(name, 0) != 0 ||
        (line.size() > name.size() && line[name.size()] != '{' && line[name.size()] != ' ')) {
      continue;
    }
    if (!filter.empty() && line.find(filter) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TEST_F(MetricsTest, ARealScrapePassesPromtoolAndMatchesTheJobs) {
  StartServer();
  MakeWorkload();
  const std::string text = Scrape(server_.admin_token());
  EXPECT_EQ(Sum(text, "arbiter_gpus_allocated"), 3) << text;
  EXPECT_EQ(Sum(text, "arbiter_gpus_allocated", "node=\"box\""), 3);
  EXPECT_EQ(Sum(text, "arbiter_gpus"), 16);
  EXPECT_EQ(Sum(text, "arbiter_jobs", "queue=\"vision-train\",state=\"running\""), 1);
  EXPECT_EQ(Sum(text, "arbiter_jobs", "queue=\"vision-train\",state=\"pending\""), 1);
  EXPECT_EQ(Sum(text, "arbiter_queue_used_gpus", "queue=\"vision-train\""), 2);
  EXPECT_EQ(Sum(text, "arbiter_queue_guaranteed_gpus", "queue=\"vision-train\""), 4);
  EXPECT_EQ(Sum(text, "arbiter_job_starts_total"), 2);
  EXPECT_EQ(Sum(text, "arbiter_job_ends_total", "outcome=\"cancelled\""), 1);
  EXPECT_EQ(Sum(text, "arbiter_job_wait_seconds_count"), 2);
  EXPECT_EQ(Sum(text, "arbiter_nodes", "state=\"ready\""), 1);
  EXPECT_EQ(Sum(text, "arbiter_node_state", "node=\"spare\",state=\"cordoned\""), 1);
  EXPECT_GT(Sum(text, "arbiter_scheduling_cycle_duration_seconds_count"), 0);
  EXPECT_GT(Sum(text, "arbiter_store_commit_duration_seconds_count"), 0);
  // Requests are labelled by their route's template, never by a job id.
  EXPECT_GT(Sum(text, "arbiter_http_request_duration_seconds_count",
                "route=\"/api/v1/jobs/{id}\",status_class=\"2xx\""),
            0);
  EXPECT_EQ(text.find("route=\"/api/v1/jobs/1\""), std::string::npos);

  // Every metric is documented.
  const std::string docs = ReadFile(std::string(ARBITER_SOURCE_DIR) + "/docs/metrics.md");
  ASSERT_FALSE(docs.empty());
  std::istringstream lines(text);
  std::string line;
  size_t families = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("# TYPE ", 0) != 0) continue;
    const std::string name = line.substr(7, line.find(' ', 7) - 7);
    ++families;
    EXPECT_NE(docs.find(fmt::format("`{}`", name)), std::string::npos)
        << name << " is not in docs/metrics.md";
  }
  EXPECT_GE(families, 20u);

  if (access(kPromtool, X_OK) != 0) GTEST_SKIP() << kPromtool << " is missing (Debian: prometheus)";
  const std::string file = dir_.path() + "/scrape.txt";
  {
    std::ofstream f(file);
    f << text;
  }
  std::string out;
  EXPECT_EQ(Shell(fmt::format("{} check metrics < {}", kPromtool, file), &out), 0) << out;
  EXPECT_EQ(out.find("problem"), std::string::npos) << out;
}

// Busy GPUs and utilisation come from a real agent's telemetry (its fake GPUs report 80-99% on
// the GPUs its tasks use, 0 on the others).
TEST_F(MetricsTest, BusyGpusComeFromAgentTelemetry) {
  StartServer();
  for (const char* node : {"box", "spare"}) {
    auto r = admin_->Post(fmt::format("/api/v1/nodes/{}/cordon", node), "", "application/json");
    ASSERT_TRUE(r && r->status == 200) << (r ? r->body : "no response");
  }
  const std::string token = NodeToken(*admin_, "agent-01");
  ASSERT_FALSE(token.empty());
  AgentProcess agent;
  ASSERT_TRUE(agent.Start(fmt::format("http://127.0.0.1:{}", server_.port()), token, "agent-01",
                          dir_.path() + "/agent-01"))
      << agent.Log();
  const uint64_t id = Submit("vision-train", 2);
  ASSERT_TRUE(WaitFor(id, "running"));
  const std::string node = "node=\"agent-01\"";
  std::string text;
  for (int i = 0; i < 200; ++i) {  // bounded: heartbeats come every 200 ms
    text = Scrape(kMetricsSecret);
    if (Sum(text, "arbiter_gpus_busy", node) == 2) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(Sum(text, "arbiter_gpus_busy", node), 2) << text;
  EXPECT_EQ(Sum(text, "arbiter_gpus_allocated", node), 2);
  EXPECT_EQ(Sum(text, "arbiter_gpus", node), 4);
  const double utilization = Sum(text, "arbiter_gpu_utilization_ratio", node);
  EXPECT_GE(utilization, 2 * 0.80 / 4);
  EXPECT_LE(utilization, 2 * 0.99 / 4);
  // The built-in node reports its own (fake) GPUs' telemetry: cordoned, nothing runs on it.
  EXPECT_NE(text.find("arbiter_gpus_busy{gpu_model=\"A100-80G\",node=\"box\"} 0"),
            std::string::npos)
      << text;
}

TEST_F(MetricsTest, AdminsAndTheScrapeSecretMayReadOthersMayNot) {
  StartServer();
  auto t = admin_->Post("/api/v1/tokens", json{{"user", "alice"}}.dump(), "application/json");
  ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no response");
  const std::string alice = json::parse(t->body)["token"];

  EXPECT_FALSE(Scrape(kMetricsSecret).empty());
  EXPECT_FALSE(Scrape(server_.admin_token()).empty());
  auto none = server_.Client("")->Get("/metrics");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["code"], "unauthenticated") << none->body;
  auto member = server_.Client(alice)->Get("/metrics");
  ASSERT_TRUE(member);
  EXPECT_EQ(member->status, 403) << member->body;
  EXPECT_FALSE(json::parse(member->body)["error"].value("message", "").empty());
  auto wrong = server_.Client(std::string(kMetricsSecret) + "x")->Get("/metrics");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  // The scrape secret opens nothing else.
  auto other = server_.Client(kMetricsSecret)->Get("/api/v1/jobs");
  ASSERT_TRUE(other);
  EXPECT_EQ(other->status, 401);
}

TEST_F(MetricsTest, AShortScrapeSecretIsRefusedAtStart) {
  {
    std::ofstream t(dir_.path() + "/short.token");
    t << "too-short\n";
  }
  ASSERT_FALSE(server_.Start(dir_.path(), {"--metrics-token-file", dir_.path() + "/short.token"}));
  const int status = server_.Kill(SIGKILL);  // reaps the exited process
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 2);
}

TEST_F(MetricsTest, MetricsPublicNeedsNoToken) {
  StartServer({"--metrics-public"});
  auto r = server_.Client("")->Get("/metrics");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  EXPECT_NE(r->body.find("arbiter_gpus{"), std::string::npos);
  // The rest of the API still needs a token.
  EXPECT_EQ(server_.Client("")->Get("/api/v1/jobs")->status, 401);
}

// A real Prometheus, configured from deploy/prometheus.yml (target, token file and interval
// replaced), scrapes the server until its query API reports the GPUs the jobs hold.
TEST_F(MetricsTest, PrometheusScrapesTheServer) {
  if (access(kPrometheus, X_OK) != 0 || access(kPromtool, X_OK) != 0) {
    GTEST_SKIP() << kPrometheus << " or " << kPromtool << " is missing (Debian: prometheus)";
  }
  StartServer();
  MakeWorkload();

  std::string config = ReadFile(std::string(ARBITER_SOURCE_DIR) + "/deploy/prometheus.yml");
  ASSERT_FALSE(config.empty());
  ReplaceOnce(&config, "scrape_interval: 15s", "scrape_interval: 1s");
  ReplaceOnce(&config, "credentials_file: /etc/arbiter/metrics.token",
              "credentials_file: " + dir_.path() + "/metrics.token");
  ReplaceOnce(&config, "\"127.0.0.1:8080\"", fmt::format("\"127.0.0.1:{}\"", server_.port()));
  const std::string config_file = dir_.path() + "/prometheus.yml";
  {
    std::ofstream f(config_file);
    f << config;
  }
  std::string out;
  ASSERT_EQ(Shell(fmt::format("{} check config {}", kPromtool, config_file), &out), 0) << out;

  const int port = FreePort();
  ASSERT_GT(port, 0);
  const std::string log = dir_.path() + "/prometheus.log";
  ChildProcess prometheus;
  ASSERT_TRUE(prometheus.Start(
      {kPrometheus, "--config.file=" + config_file, "--storage.tsdb.path=" + dir_.path() + "/tsdb",
       fmt::format("--web.listen-address=127.0.0.1:{}", port)},
      log));
  httplib::Client c("127.0.0.1", port);
  c.set_connection_timeout(2);
  c.set_read_timeout(5);
  // Bounded poll: Prometheus starts, scrapes every second, and answers the query.
  double allocated = -1;
  std::string last;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (std::chrono::steady_clock::now() < deadline && prometheus.running()) {
    auto r = c.Get("/api/v1/query?query=sum(arbiter_gpus_allocated)");
    if (r && r->status == 200) {
      last = r->body;
      const json body = json::parse(r->body, nullptr, false);
      if (body.is_object() && body.value("status", "") == "success" &&
          !body["data"]["result"].empty()) {
        allocated = std::stod(body["data"]["result"][0]["value"][1].get<std::string>());
        if (allocated == 3) break;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  EXPECT_EQ(allocated, 3) << "last answer: " << last << "\nPrometheus log:\n" << ReadFile(log);
  // The scrape itself was healthy (the bearer token from the credentials file was accepted).
  auto up = c.Get("/api/v1/query?query=up%7Bjob%3D%22arbiter%22%7D");
  ASSERT_TRUE(up && up->status == 200);
  const json upj = json::parse(up->body, nullptr, false);
  ASSERT_TRUE(upj.is_object() && !upj["data"]["result"].empty()) << up->body;
  EXPECT_EQ(upj["data"]["result"][0]["value"][1], "1") << up->body;
  // Every query of deploy/grafana-dashboard.json is valid PromQL over documented metrics.
  const json dashboard = json::parse(
      ReadFile(std::string(ARBITER_SOURCE_DIR) + "/deploy/grafana-dashboard.json"), nullptr, false);
  ASSERT_TRUE(dashboard.is_object() && dashboard.contains("panels"));
  const std::string docs = ReadFile(std::string(ARBITER_SOURCE_DIR) + "/docs/metrics.md");
  size_t queries = 0;
  for (const json& panel : dashboard["panels"]) {
    for (const json& target : panel["targets"]) {
      std::string expr = target["expr"];
      for (const auto& [var, value] : std::vector<std::pair<std::string, std::string>>{
               {"$__rate_interval", "1m"}, {"$tenant", ".*"}, {"$queue", ".*"}}) {
        for (size_t at = expr.find(var); at != std::string::npos; at = expr.find(var)) {
          expr.replace(at, var.size(), value);
        }
      }
      for (size_t at = expr.find("arbiter_"); at != std::string::npos;
           at = expr.find("arbiter_", at + 1)) {
        std::string name = expr.substr(at, expr.find_first_of("{[() ", at) - at);
        for (const char* suffix : {"_bucket", "_count", "_sum"}) {
          if (name.ends_with(suffix)) name.resize(name.size() - std::string(suffix).size());
        }
        EXPECT_NE(docs.find(fmt::format("`{}`", name)), std::string::npos)
            << panel["title"] << ": " << name << " is not a documented metric";
      }
      auto r = c.Get("/api/v1/query?query=" + httplib::detail::encode_query_param(expr));
      ASSERT_TRUE(r) << expr;
      EXPECT_EQ(r->status, 200) << panel["title"] << ": " << expr << ": " << r->body;
      ++queries;
    }
  }
  EXPECT_GE(queries, 15u);
  const int status = prometheus.Stop();
  EXPECT_TRUE(WIFEXITED(status)) << "Prometheus did not stop on SIGTERM";
}

}  // namespace
}  // namespace arbiter::testing
