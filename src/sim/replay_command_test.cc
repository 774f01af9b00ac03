#include "sim/replay_command.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

namespace arbiter::sim {
namespace {

using ::testing::HasSubstr;

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

std::filesystem::path TempPath(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("arbiter_replay_" + std::to_string(getpid()) + "_" + name);
}

nlohmann::json ReadJson(const std::filesystem::path& p) {
  std::ifstream in(p);
  return nlohmann::json::parse(in);
}

TEST(RunReplayCommand, OneObjectPerPolicyFromAPodList) {
  const auto out = TempPath("pods.json");
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"fgd", "bestfit"};
  o.convert.time_scale = 0.0001;
  o.json_path = out.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  const nlohmann::json j = ReadJson(out);
  ASSERT_EQ(j["results"].size(), 2u);
  for (const nlohmann::json& r : j["results"]) {
    EXPECT_EQ(r["jobs"], 255);
    EXPECT_EQ(r["trace"], "pods");
    EXPECT_EQ(r["nodes"], "nodes");
    EXPECT_EQ(r["completed"].get<int64_t>() + r["timed_out"].get<int64_t>() +
                  r["dropped"].get<int64_t>() + r["unfinished"].get<int64_t>(),
              255);
    EXPECT_EQ(r["by_queue"].size(), 8u);  // 4 tenants x online, batch
    EXPECT_TRUE(r["fairness"].contains("jain_while_waiting"));
  }
  EXPECT_EQ(j["results"][0]["policy"], "fgd");
  EXPECT_EQ(j["results"][1]["policy"], "bestfit");
  std::filesystem::remove(out);
}

// A trace of `rows` (after the header) and a configuration of one 8-GPU node, one tenant
// (vision) with one queue (train) and one priority class (batch).
void WriteOneNodeWorld(const std::filesystem::path& trace, const std::filesystem::path& config,
                       const std::string& rows) {
  std::ofstream t(trace);
  t << "submit_time,duration,tenant,queue,type,priority_class,tasks,gpus_per_task,gpu_milli,"
       "gpu_models,walltime\n"
    << rows;
  std::ofstream c(config);
  c << "gpu_models: [{name: A100}]\n"
       "priority_classes: [{name: batch, value: 10}]\n"
       "tenants:\n"
       "  - name: vision\n"
       "    queues: [{name: train, guaranteed: {gpu: 8}}]\n"
       "nodes:\n"
       "  - {name: n1, cpu_milli: 64000, memory_mib: 262144, gpus: {count: 8, model: A100}}\n";
}

TEST(RunReplayCommand, ATraceFileAndAConfiguration) {
  const auto trace = TempPath("trace.csv");
  const auto config = TempPath("config.yaml");
  const auto out = TempPath("trace.json");
  WriteOneNodeWorld(trace, config,
                    "0,100,vision,train,training,batch,1,8,1000,,0\n"
                    "10,50,vision,train,training,batch,1,8,1000,,30\n");
  ReplayCommandOptions o;
  o.config_path = config.string();
  o.trace_path = trace.string();
  o.policies = {"binpack"};
  o.json_path = out.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  const nlohmann::json r = ReadJson(out);
  // One node: the second job waits for the first (0 -> 100), then times out after 30 s.
  EXPECT_EQ(r["completed"], 1);
  EXPECT_EQ(r["timed_out"], 1);
  EXPECT_DOUBLE_EQ(r["wait_seconds"]["max"].get<double>(), 90);
  EXPECT_DOUBLE_EQ(r["makespan_seconds"].get<double>(), 130);
  EXPECT_EQ(r["config"], config.stem().string());
  // The configuration has nodes: --nodes as well is refused.
  o.nodes_path = kFixtures + "/nodes.csv";
  EXPECT_EQ(RunReplayCommand(o), 2);
  for (const auto& p : {trace, config, out}) std::filesystem::remove(p);
}

std::string ReadText(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(RunReplayCommand, WritesAnHtmlReportWithEverySection) {
  const auto html = TempPath("report.html");
  const auto json = TempPath("report.json");
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"default", "bestfit"};
  o.convert.time_scale = 0.0001;
  o.json_path = json.string();
  o.html_path = html.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  const std::string page = ReadText(html);
  ASSERT_THAT(page, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(page, HasSubstr("<title>Trace replay: pods on nodes</title>"));
  EXPECT_THAT(page, HasSubstr("arbiter simulate replay --nodes "));
  EXPECT_THAT(page, HasSubstr("--policy default --policy bestfit"));
  for (const char* title :
       {">Summary</h2>", ">GPU allocation over time</h2>", ">GPU allocation while jobs arrive</h2>",
        ">Wait time distribution</h2>", ">Waits by queue</h2>",
        ">Waits and completion times by job type</h2>", ">GPU share by queue</h2>",
        ">GPU share while waiting</h2>", ">Dropped and unfinished jobs</h2>"}) {
    EXPECT_THAT(page, HasSubstr(title));
  }
  EXPECT_EQ(Count(page, "<section"), 9u);
  EXPECT_EQ(Count(page, "<svg"), 7u);
  EXPECT_EQ(Count(page, ">guaranteed</text>"), 2u);  // the legends of both share charts
  // The JSON carries the allocation series: bounded, in percent.
  const nlohmann::json j = ReadJson(json);
  for (const nlohmann::json& r : j["results"]) {
    const nlohmann::json& series = r["gpu_alloc_series"];
    EXPECT_GT(series["step_seconds"].get<double>(), 0);
    ASSERT_FALSE(series["alloc_pct"].empty());
    EXPECT_LE(series["alloc_pct"].size(), 1000u);
    for (const nlohmann::json& v : series["alloc_pct"]) {
      EXPECT_GE(v.get<double>(), 0);
      EXPECT_LE(v.get<double>(), 100);
    }
  }
  // An HTML path that cannot be written is an error.
  o.json_path.clear();
  o.html_path = (TempPath("no-such-dir") / "report.html").string();
  EXPECT_EQ(RunReplayCommand(o), 2);
  std::filesystem::remove(html);
  std::filesystem::remove(json);
}

TEST(RunReplayCommand, BadInputIsExitCodeTwo) {
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.policies = {"fgd"};
  EXPECT_EQ(RunReplayCommand(o), 2);  // neither --trace nor --pods
  o.pods_path = kFixtures + "/pods.csv";
  o.trace_path = kFixtures + "/pods.csv";
  EXPECT_EQ(RunReplayCommand(o), 2);  // both
  o.trace_path.clear();
  o.policies = {"no-such-policy"};
  EXPECT_EQ(RunReplayCommand(o), 2);
  o.policies = {"fgd"};
  o.nodes_path = kFixtures + "/missing.csv";
  EXPECT_EQ(RunReplayCommand(o), 2);
}

TEST(RunReplayCommand, SeedsGiveTheSpreadOfEveryFigure) {
  const auto out = TempPath("seeds.json");
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"fgd", "bestfit"};
  o.convert.time_scale = 0.0001;
  o.seeds = "1-3";
  o.runtime_estimates = "history";
  o.json_path = out.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  const nlohmann::json j = ReadJson(out);
  std::filesystem::remove(out);
  ASSERT_EQ(j["results"].size(), 6u);  // 3 seeds x 2 policies
  EXPECT_EQ(j["results"][0]["runtime_estimates"], "history");
  ASSERT_EQ(j["spread"]["policies"].size(), 2u);
  const nlohmann::json& fgd = j["spread"]["policies"][0];
  EXPECT_EQ(fgd["policy"], "fgd");
  EXPECT_EQ(fgd["seeds"], nlohmann::json::array({1, 2, 3}));
  for (const char* key : {"jobs_waited", "wait_max_s", "gpu_hours_idle_while_waiting",
                          "gpu_alloc_busy_pct", "preemptions"}) {
    EXPECT_EQ(fgd[key]["n"], 3) << key;
    EXPECT_LE(fgd[key]["ci95_lo"].get<double>(), fgd[key]["mean"].get<double>()) << key;
  }
  ASSERT_EQ(j["spread"]["differences"].size(), 1u);
  EXPECT_EQ(j["spread"]["differences"][0]["policy"], "bestfit");
  EXPECT_EQ(j["spread"]["differences"][0]["from"], "fgd");
  const std::string table = FormatReplaySpread(j["spread"]);
  EXPECT_THAT(table, HasSubstr("mean over 3 seeds [95% t-interval]"));
  EXPECT_THAT(table, HasSubstr("bestfit minus fgd, paired by seed"));
  o.runtime_estimates = "sometimes";
  EXPECT_EQ(RunReplayCommand(o), 2);
}

// One node that holds one job at a time; a long job and a short one submitted 1 s apart. In file
// order the short one waits 99 s; delayed by up to 30 s each, the order may turn, and the waits
// change from seed to seed.
TEST(RunReplayCommand, ArrivalJitterSpreadsATraceWithTimesOverSeeds) {
  const auto trace = TempPath("jitter.csv");
  const auto config = TempPath("jitter.yaml");
  const auto out = TempPath("jitter.json");
  WriteOneNodeWorld(trace, config,
                    "0,100,vision,train,training,batch,1,8,1000,,0\n"
                    "1,10,vision,train,training,batch,1,8,1000,,0\n");
  ReplayCommandOptions o;
  o.config_path = config.string();
  o.trace_path = trace.string();
  o.policies = {"binpack"};
  o.seeds = "1-8";
  o.json_path = out.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  nlohmann::json j = ReadJson(out);
  const nlohmann::json& still = j["spread"]["policies"][0]["wait_max_s"];
  EXPECT_DOUBLE_EQ(still["mean"].get<double>(), 99);  // every seed: the file's order
  EXPECT_DOUBLE_EQ(still["sd"].get<double>(), 0);

  o.arrival_jitter_seconds = 30;
  ASSERT_EQ(RunReplayCommand(o), 0);
  j = ReadJson(out);
  const nlohmann::json& moved = j["spread"]["policies"][0]["wait_max_s"];
  EXPECT_GT(moved["sd"].get<double>(), 0);
  std::set<double> waits;
  for (const nlohmann::json& r : j["results"]) {
    const double w = r["wait_seconds"]["max"].get<double>();
    EXPECT_GE(w, 0);
    EXPECT_LE(w, 100);  // at most the long job's run
    waits.insert(w);
  }
  EXPECT_GT(waits.size(), 1u);
  EXPECT_THAT(ReplayCommandLine(o), HasSubstr("--arrival-jitter 30"));
  for (const auto& p : {trace, config, out}) std::filesystem::remove(p);
}

TEST(FormatReplayTable, OneColumnPerPolicy) {
  ReplayReport a;
  a.policy = "fgd";
  a.jobs = 3;
  a.wait = Stats::Of({0, 10, 20});
  a.queues.push_back(QueueReport{});
  a.queues[0].name = "q";
  a.dropped = 1;
  a.dropped_jobs.push_back({"j", "q", "NoFeasibleNode: too big"});
  ReplayReport b = a;
  b.policy = "bestfit-long-name";
  const std::string t = FormatReplayTable({a, b});
  std::istringstream lines(t);
  std::string header;
  std::getline(lines, header);
  EXPECT_THAT(header, HasSubstr("fgd"));
  EXPECT_THAT(header, HasSubstr("bestfit-long-name"));
  EXPECT_THAT(t, HasSubstr("10 / 20 / 20 / 20"));  // nearest rank: p50 is the 2nd of 3
  EXPECT_THAT(t, HasSubstr("  q "));
  EXPECT_THAT(t, HasSubstr("dropped by fgd (1 jobs):\n  1 x NoFeasibleNode: too big"));
}

TEST(ConvertCommand, WritesATraceThatLoads) {
  const auto out = TempPath("converted.csv");
  ConvertCommandOptions o;
  o.pods_path = kFixtures + "/pods_multigpu.csv";
  o.out_path = out.string();
  ASSERT_EQ(RunConvertCommand(o), 0);
  auto t = LoadTrace(out.string());
  ASSERT_TRUE(t.ok()) << t.status().ToString();
  EXPECT_EQ(t->jobs.size(), 53u);
  o.pods_path = kFixtures + "/missing.csv";
  EXPECT_EQ(RunConvertCommand(o), 2);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace arbiter::sim

namespace arbiter::sim {
namespace {

TEST(RunReplayCommand, ServicesWithAStaticArm) {
  const auto service = TempPath("chat.yaml");
  const auto out = TempPath("services.json");
  std::ofstream(service) << "kind: Service\nname: chat\ntemplate: {command: [x], resources: "
                            "{gpus: 1}}\nreplicas: {min: 0, max: 4}\nautoscaling: {target: 8}\n"
                            "max_concurrency: 8\nslo: {latency_ms: 2000}\n";
  ReplayCommandOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"default"};
  o.services_paths = {service.string()};
  o.requests_paths = {ARBITER_FIXTURES_DIR "/azure-llm/conv_head600.csv"};
  o.static_replicas = 2;
  o.time_limit_seconds = 3600;
  o.json_path = out.string();
  ASSERT_EQ(RunReplayCommand(o), 0);
  const nlohmann::json j = ReadJson(out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][1]["policy"], "default static 2");
  for (const nlohmann::json& r : j["results"]) {
    ASSERT_EQ(r["services"].size(), 1u);
    EXPECT_EQ(r["services"][0]["requests"], 600);
    EXPECT_EQ(r["services"][0]["queue"], "chat");
    EXPECT_TRUE(r.contains("gpu_hours_jobs"));
  }
  EXPECT_EQ(j["results"][0]["services"][0]["scaling"], "autoscaled 0..4");
  EXPECT_EQ(j["results"][1]["services"][0]["ready_replicas"]["max"], 2);
  // Requests without services are refused, naming the flag.
  o.services_paths.clear();
  EXPECT_EQ(RunReplayCommand(o), 2);
  std::filesystem::remove(service);
  std::filesystem::remove(out);
}

}  // namespace
}  // namespace arbiter::sim
