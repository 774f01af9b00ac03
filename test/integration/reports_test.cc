// Reports end to end: a real server with the built-in node runs a few short jobs; the usage and
// failures reports, over HTTP and through `arbiter report`, match the jobs' own resources and
// times (GPUs x the time from each admission to the release, priced per GPU-hour).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <thread>

#include "cli_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 3.6}
tenants:
  - name: lab
    budget: {gpu_hours: 1000, period: month}
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
)";

class ReportsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(server_.Start(dir_.path(), {"--config", dir_.path() + "/cluster.yaml",
                                            "--local-node", "box", "--sample-interval-ms", "1000"}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  uint64_t Submit(const std::string& type, int gpus, const std::string& script) {
    const json body = {{"queue", "lab-q"},
                       {"type", type},
                       {"resources", {{"gpus", gpus}}},
                       {"command", {"sh", "-c", script}}};
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  json GetJson(const std::string& path) {
    auto r = admin_->Get(path);
    EXPECT_TRUE(r && r->status == 200) << path << ": " << (r ? r->body : "no response");
    return r && r->status == 200 ? json::parse(r->body) : json();
  }

  // Polls (bounded, 50 ms apart) until the job is final; returns its state.
  std::string WaitFinal(uint64_t id) {
    for (int i = 0; i < 400; ++i) {
      const std::string s = GetJson(fmt::format("/api/v1/jobs/{}", id))["state"];
      if (s == "succeeded" || s == "failed") return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "not final";
  }

  // GPU-hours the job held: its GPUs from the admission to the final event.
  double HeldGpuHours(uint64_t id, int gpus) {
    int64_t admitted = 0, released = 0;
    const json events = GetJson(fmt::format("/api/v1/jobs/{}/events", id));  // kept: see below
    for (const json& e : events["items"]) {  // (ranging over a temporary's member dangles)
      const int64_t at = MillisOf(e["at"]);
      if (e["to"] == "admitted") admitted = at;
      if (e["to"] == "succeeded" || e["to"] == "failed") released = at;
    }
    EXPECT_GT(released, admitted);
    return gpus * static_cast<double>(released - admitted) / 3'600'000.0;
  }

  static int64_t MillisOf(const json& iso) {
    std::tm tm{};
    int ms = 0;
    std::sscanf(iso.get<std::string>().c_str(), "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon,
                &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &ms);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return static_cast<int64_t>(timegm(&tm)) * 1000 + ms;
  }

  static std::map<std::string, json> ByKey(const json& report, const std::string& key) {
    std::map<std::string, json> out;
    for (const json& r : report["rows"]) out[r[key].get<std::string>()] = r;
    return out;
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(ReportsTest, UsageAndFailuresMatchTheJobs) {
  const uint64_t a = Submit("training", 2, "sleep 0.5");
  const uint64_t b = Submit("experiment", 1, "sleep 0.3");
  const uint64_t c = Submit("training", 4, "exit 3");
  EXPECT_EQ(WaitFinal(a), "succeeded");
  EXPECT_EQ(WaitFinal(b), "succeeded");
  EXPECT_EQ(WaitFinal(c), "failed");
  const double training = HeldGpuHours(a, 2) + HeldGpuHours(c, 4);
  const double experiment = HeldGpuHours(b, 1);
  // The records are written when the GPUs are released, within a few ms of the final event.
  const double tolerance = 7 * 0.02 / 3600.0;

  const json usage = GetJson("/api/v1/reports/usage?since=1h&group_by=type");
  ASSERT_EQ(usage["report"], "usage");
  auto rows = ByKey(usage, "type");
  ASSERT_EQ(rows.size(), 2u) << usage.dump();
  EXPECT_NEAR(rows["training"]["gpu_hours"].get<double>(), training, tolerance);
  EXPECT_NEAR(rows["experiment"]["gpu_hours"].get<double>(), experiment, tolerance);
  EXPECT_NEAR(rows["training"]["cost"].get<double>(), 3.6 * training, 3.6 * tolerance);
  EXPECT_TRUE(rows["training"]["busy_gpu_hours"].is_null());  // the built-in node: no telemetry

  const json by_tenant = GetJson("/api/v1/reports/usage?since=1h");
  ASSERT_EQ(by_tenant["rows"].size(), 1u);
  const json& lab = by_tenant["rows"][0];
  EXPECT_EQ(lab["tenant"], "lab");
  EXPECT_EQ(lab["budget_gpu_hours"], 1000);
  EXPECT_NEAR(lab["budget_used_gpu_hours"].get<double>(), training + experiment, tolerance);

  const json failures = GetJson("/api/v1/reports/failures?since=1h&group_by=type");
  auto f = ByKey(failures, "type");
  EXPECT_EQ(f["training"]["runs"], 2);
  EXPECT_EQ(f["training"]["failed"], 1);
  EXPECT_EQ(f["training"]["top_causes"], "exit code 3 (1)");
  EXPECT_EQ(f["experiment"]["failed"], 0);

  // The CLI shows the same report.
  CliOptions o;
  o.env["HOME"] = dir_.path();
  o.env["ARBITER_SERVER"] = fmt::format("http://127.0.0.1:{}", server_.port());
  o.env["ARBITER_TOKEN"] = server_.admin_token();
  const CliResult cli =
      RunCli({"report", "usage", "--since", "1h", "--by", "type", "-o", "json"}, o);
  ASSERT_EQ(cli.code, 0) << cli.err;
  auto cli_rows = ByKey(json::parse(cli.out), "type");
  EXPECT_NEAR(cli_rows["training"]["gpu_hours"].get<double>(), training, tolerance);
  EXPECT_NEAR(cli_rows["experiment"]["gpu_hours"].get<double>(), experiment, tolerance);
  const CliResult csv = RunCli({"report", "failures", "--since", "1h", "-o", "csv"}, o);
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\r')),
            "queue,runs,succeeded,failed,failure_rate,top_causes");
  EXPECT_NE(csv.out.find("lab-q,3,2,1,0.333333,exit code 3 (1)"), std::string::npos) << csv.out;
  const CliResult table = RunCli({"report", "usage", "--since", "1h"}, o);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("GPU HOURS"), std::string::npos) << table.out;
}

TEST_F(ReportsTest, TheSamplerFeedsTheClusterReport) {
  const uint64_t a = Submit("training", 2, "sleep 3");
  json cluster;
  for (int i = 0; i < 100; ++i) {  // samples come every second
    cluster = GetJson("/api/v1/reports/cluster?since=1h");
    if (cluster["rows"][0]["samples"].get<int>() >= 3) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  const json& row = cluster["rows"][0];
  ASSERT_GE(row["samples"].get<int>(), 3) << cluster.dump();
  EXPECT_GT(row["gpu_hours_total"].get<double>(), 0);
  EXPECT_GT(row["allocation_rate"].get<double>(), 0);
  EXPECT_LE(row["allocation_rate"].get<double>(), 0.25 + 1e-6);  // at most 2 of 8 GPUs
  EXPECT_EQ(WaitFinal(a), "succeeded");
}

TEST_F(ReportsTest, BadParametersNameTheField) {
  for (const auto& [query, field] : std::vector<std::pair<std::string, std::string>>{
           {"usage?group_by=team", "group_by"},
           {"usage?since=7x", "since"},
           {"usage?from=yesterday", "from"},
           {"usage?from=2026-01-02&to=2026-01-01", "to"},
           {"usage?since=1d&from=2026-01-01", "since"},
           {"wait?step=1s&since=7d", "step"},
           {"usage?format=xml", "format"},
           {"fairness?group_by=user", "group_by"}}) {
    auto r = admin_->Get("/api/v1/reports/" + query);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 400) << query << ": " << r->body;
    EXPECT_EQ(json::parse(r->body)["error"]["field"], field) << query << ": " << r->body;
  }
  auto csv = admin_->Get("/api/v1/reports/wait?since=1d&format=csv");
  ASSERT_TRUE(csv);
  EXPECT_EQ(csv->status, 200);
  EXPECT_EQ(csv->get_header_value("Content-Type"), "text/csv; charset=utf-8");
}

}  // namespace
}  // namespace arbiter::testing
