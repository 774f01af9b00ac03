#include "sim/inflate_command.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

namespace arbiter::sim {
namespace {

const std::string kFixtures = ARBITER_FIXTURES_DIR "/openb";

TEST(ParseSeeds, RangesListsAndMixes) {
  auto r = ParseSeeds("42-51");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->size(), 10u);
  EXPECT_EQ(r->front(), 42u);
  EXPECT_EQ(r->back(), 51u);
  EXPECT_EQ(*ParseSeeds("7"), (std::vector<uint64_t>{7}));
  EXPECT_EQ(*ParseSeeds("1-3,9,5"), (std::vector<uint64_t>{1, 2, 3, 9, 5}));
  for (const char* bad : {"", "x", "5-3", "1,,2", "1-", "-4", "1.5"}) {
    EXPECT_FALSE(ParseSeeds(bad).ok()) << "'" << bad << "'";
  }
}

TEST(InflateReport, HasTheCurveAndTheHeadlineNumbers) {
  InflateRun a;
  a.seed = 1;
  InflateRun b;
  b.seed = 2;
  for (int d = 0; d <= 130; ++d) {
    a.curve.push_back({d, d * 0.5, 10.0});
    b.curve.push_back({d, d * 0.7, 20.0});
  }
  const nlohmann::json j = InflateReport("fgd", "trace", "nodes", 1.3, {a, b});
  EXPECT_EQ(j["policy"], "fgd");
  EXPECT_EQ(j["trace"], "trace");
  EXPECT_EQ(j["seeds"], nlohmann::json::array({1, 2}));
  ASSERT_EQ(j["curve"].size(), 131u);
  EXPECT_EQ(j["curve"][100]["demand_pct"], 100);
  EXPECT_DOUBLE_EQ(j["curve"][100]["alloc_pct"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(j["alloc_pct_at_100"].get<double>(), 60.0);
  EXPECT_DOUBLE_EQ(j["alloc_pct_at_130"].get<double>(), 78.0);
  EXPECT_DOUBLE_EQ(j["frag_pct_at_0"].get<double>(), 15.0);
  EXPECT_EQ(j["runs"].size(), 2u);
}

TEST(InflateReport, SpreadOverSeedsAndPairedDifferences) {
  std::vector<InflateRun> fgd;
  std::vector<InflateRun> other;
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    InflateRun a;
    a.seed = seed;
    InflateRun b;
    b.seed = seed;
    for (int d = 0; d <= 130; ++d) {
      a.curve.push_back({d, d >= 100 ? 90.0 + static_cast<double>(seed) : 0.0, 0.0});
      b.curve.push_back({d, d >= 100 ? 91.0 + static_cast<double>(seed) : 0.0, 0.0});
    }
    fgd.push_back(a);
    other.push_back(b);
  }
  const nlohmann::json a = InflateReport("fgd", "t", "n", 1.3, fgd);
  const nlohmann::json& s = a["spread"]["alloc_pct_at_130"];
  EXPECT_EQ(s["n"], 5);
  EXPECT_DOUBLE_EQ(s["mean"].get<double>(), 93.0);
  EXPECT_NEAR(s["ci95_lo"].get<double>(), 93.0 - 2.776 * std::sqrt(2.5 / 5.0), 1e-9);
  EXPECT_DOUBLE_EQ(a["runs"][0]["alloc_pct_at_130"].get<double>(), 91.0);
  const nlohmann::json results =
      nlohmann::json::array({a, InflateReport("default", "t", "n", 1.3, other)});
  const std::string table = InflateTextTable(results);
  EXPECT_NE(table.find("93.00 ["), std::string::npos) << table;
  // Every seed is one point better: the paired difference has no spread.
  EXPECT_NE(table.find("alloc_pct_at_130: +1.00 [+1.00, +1.00] (n=5)"), std::string::npos) << table;
}

TEST(InflateReport, PointsBeyondTheTargetAreNull) {
  InflateRun a;
  for (int d = 0; d <= 50; ++d) a.curve.push_back({d, d * 1.0, 0.0});
  const nlohmann::json j = InflateReport("bestfit", "t", "n", 0.5, {a});
  EXPECT_TRUE(j["alloc_pct_at_130"].is_null());
  EXPECT_TRUE(j["alloc_pct_at_100"].is_null());
}

TEST(RunInflateCommand, WritesOneObjectPerPolicy) {
  const auto out = std::filesystem::temp_directory_path() /
                   ("arbiter_inflate_" + std::to_string(::getpid()) + ".json");
  InflateOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"fgd", "random"};
  o.seeds = "1-2";
  o.json_path = out.string();
  ASSERT_EQ(RunInflateCommand(o), 0);
  std::ifstream in(out);
  const nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  ASSERT_EQ(j["results"].size(), 2u);
  EXPECT_EQ(j["results"][0]["policy"], "fgd");
  EXPECT_EQ(j["results"][1]["policy"], "random");
  EXPECT_EQ(j["results"][0]["trace"], "pods");
  EXPECT_EQ(j["results"][0]["curve"].size(), 131u);
  EXPECT_TRUE(j["results"][0]["alloc_pct_at_130"].is_number());
}

nlohmann::json RunToJson(InflateOptions o, const std::string& tag) {
  const auto out = std::filesystem::temp_directory_path() /
                   ("arbiter_inflate_" + tag + "_" + std::to_string(::getpid()) + ".json");
  o.json_path = out.string();
  EXPECT_EQ(RunInflateCommand(o), 0);
  std::ifstream in(out);
  nlohmann::json j = nlohmann::json::parse(in);
  std::filesystem::remove(out);
  return j;
}

// Under FGD a CPU-only task changes no node's fragmentation while the node keeps enough CPU for
// the typical GPU tasks, so it ties on every such node and the tie-break decides where it goes.
// Here the first node of the file is GPU-dense and CPU-poor: in file order the CPU-only tasks
// take its CPU and strand its GPUs; in a shuffled order they go to it on only some seeds.
TEST(RunInflateCommand, NodeOrderDecidesTiesAndIsReported) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("arbiter_node_order_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  {
    std::ofstream nodes(dir / "nodes.csv");
    nodes << "sn,cpu_milli,memory_mib,gpu,model\n";
    for (int i = 0; i < 4; ++i) nodes << "dense-" << i << ",24000,262144,8,G2\n";
    for (int i = 0; i < 4; ++i) nodes << "roomy-" << i << ",96000,262144,2,T4\n";
    std::ofstream pods(dir / "pods.csv");
    pods << "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
            "deletion_time,scheduled_time\n";
    int k = 0;
    // Per dense node 16 cores of CPU-only work, and GPU tasks of 2 cores per GPU.
    for (int i = 0; i < 4; ++i) {
      pods << "cpu-" << k++ << ",16000,1024,0,0,,BE,Running,0,10,0\n";
    }
    for (int i = 0; i < 40; ++i) {
      pods << "gpu-" << k++ << ",2000,1024,1,1000,,LS,Running,0,10,0\n";
    }
  }
  InflateOptions o;
  o.nodes_path = (dir / "nodes.csv").string();
  o.pods_path = (dir / "pods.csv").string();
  o.policies = {"fgd"};
  o.seeds = "1-8";
  o.target = 1.0;
  o.node_order = "file";
  const nlohmann::json file = RunToJson(o, "file");
  o.node_order = "shuffled";
  const nlohmann::json shuffled = RunToJson(o, "shuffled");
  const nlohmann::json again = RunToJson(o, "again");
  std::filesystem::remove_all(dir);

  EXPECT_EQ(file["node_order"], "file");
  EXPECT_EQ(shuffled["node_order"], "shuffled");
  // The same seeds give the same runs: the order is drawn from the seed.
  ASSERT_EQ(shuffled["runs"].size(), 8u);
  for (size_t i = 0; i < 8; ++i) {
    EXPECT_EQ(shuffled["runs"][i]["placed"], again["runs"][i]["placed"]);
    EXPECT_EQ(shuffled["runs"][i]["alloc_pct_end"], again["runs"][i]["alloc_pct_end"]);
  }
  // File order strands GPUs on every seed; a shuffled order allocates more on average.
  EXPECT_GT(shuffled["alloc_pct_at_100"].get<double>(), file["alloc_pct_at_100"].get<double>());
}

TEST(RunInflateCommand, BadInputExitsWithTwo) {
  InflateOptions o;
  o.nodes_path = kFixtures + "/nodes.csv";
  o.pods_path = kFixtures + "/pods.csv";
  o.policies = {"no-such-policy"};
  EXPECT_EQ(RunInflateCommand(o), 2);
  o.policies = {"fgd"};
  o.seeds = "x";
  EXPECT_EQ(RunInflateCommand(o), 2);
  o.seeds = "1";
  o.node_order = "sorted";
  EXPECT_EQ(RunInflateCommand(o), 2);
  o.node_order = "file";
  o.pods_path = kFixtures + "/missing.csv";
  EXPECT_EQ(RunInflateCommand(o), 2);
}

}  // namespace
}  // namespace arbiter::sim
