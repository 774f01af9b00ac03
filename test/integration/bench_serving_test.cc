// `arbiter bench serving` end to end at a small scale: both arms start their own server, service
// and training jobs, replay a small trace through the gateway, report their figures, and leave
// nothing behind; bad input is refused before anything starts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

TEST(BenchServingTest, RunsBothArmsOnATraceAndReportsTheirFigures) {
  const std::string tmp =
      (std::filesystem::temp_directory_path() / "bench-serving-test-XXXXXX").string();
  std::string dir = tmp;
  ASSERT_NE(mkdtemp(dir.data()), nullptr);
  std::filesystem::permissions(dir, std::filesystem::perms(0755));  // tasks pass through
  // A small trace: 300 requests 0.2 s apart, 200-token prompts, 20-token answers (14 ms each).
  const std::string trace = dir + "/trace.csv";
  {
    std::ofstream f(trace);
    f << "TIMESTAMP,ContextTokens,GeneratedTokens\n";
    for (int i = 0; i < 300; ++i) {
      f << "2023-11-16 18:" << 10 + i / 300 << ":" << (i / 5) % 60 / 10 << (i / 5) % 10 << "."
        << (i % 5) * 2 << ",200,20\n";
    }
  }
  CliOptions o;
  o.env = {{"TMPDIR", dir}};
  o.timeout_s = 240;
  const CliResult r =
      RunCli({"bench", "serving", "--trace", trace, "--duration", "12", "--speedup", "4", "--gpus",
              "4", "--static-replicas", "2", "--train-work", "4", "--checkpoint", "2", "--json"},
             o);
  ASSERT_EQ(r.code, 0) << r.err << r.out;
  const json out = json::parse(r.out);
  for (const char* arm : {"static", "arbiter"}) {
    ASSERT_TRUE(out["arms"].contains(arm)) << out.dump();
    const json& a = out["arms"][arm];
    EXPECT_GT(a["requests"].get<int64_t>(), 50) << arm;
    EXPECT_EQ(a["failed_requests"], 0) << arm;
    EXPECT_GT(a["slo_attainment"].get<double>(), 0.9) << arm;
    EXPECT_GT(a["p99_ms"].get<double>(), 0) << arm;
    EXPECT_GT(a["training_gpu_hours"].get<double>(), 0) << arm;
    EXPECT_GE(a["training_work_lost_gpu_hours"].get<double>(), 0) << arm;
    EXPECT_TRUE(a.contains("scale_up_p99_s")) << arm;
    EXPECT_TRUE(a.contains("reclaim_p99_s")) << arm;
  }
  EXPECT_EQ(out["arms"]["static"]["mean_replicas_ready"], 2);
  EXPECT_TRUE(out["arms"]["static"]["scale_up_p99_s"].is_null());
  EXPECT_EQ(out["settings"]["peak_replicas"], 2);
  // Its temporary folder (stores, logs, the jobs' records) is gone; the trace stays.
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().filename(), "trace.csv") << e.path();
  }

  // Bad input: refused with the field named, nothing started.
  {
    std::ofstream f(dir + "/bad.csv");
    f << "TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:00:00.0,12,x\n";
  }
  const CliResult bad = RunCli({"bench", "serving", "--trace", dir + "/bad.csv"}, o);
  EXPECT_EQ(bad.code, 2);
  EXPECT_NE(bad.err.find("line 2: GeneratedTokens"), std::string::npos) << bad.err;
  const CliResult missing = RunCli({"bench", "serving", "--trace", dir + "/none.csv"}, o);
  EXPECT_EQ(missing.code, 2);
  EXPECT_NE(missing.err.find("--trace"), std::string::npos) << missing.err;
  const CliResult arms = RunCli({"bench", "serving", "--arms", "static,dynamic"}, o);
  EXPECT_EQ(arms.code, 2);
  EXPECT_NE(arms.err.find("--arms"), std::string::npos) << arms.err;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace arbiter::testing
