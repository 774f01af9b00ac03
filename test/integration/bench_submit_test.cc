// `arbiter bench submit` against a real server: every acknowledged job is in the store, one per
// request and in batches, and failures are counted and explained, not hidden.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "cli_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 0}, max: {gpu: 8}}
)";

class BenchSubmitTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Start(dir_.path(), {"--rate-limit", "0"})) << server_.output();
    admin_ = server_.Client(server_.admin_token());
    auto r = admin_->Put("/api/v1/config", kConfig, "application/yaml");
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body;
  }

  CliResult Bench(std::vector<std::string> extra, const std::string& token = "") {
    std::vector<std::string> args = {"bench",    "submit",
                                     "--server", fmt::format("http://127.0.0.1:{}", server_.port()),
                                     "--token",  token.empty() ? server_.admin_token() : token,
                                     "--queue",  "lab-q",
                                     "--json"};
    for (auto& e : extra) args.push_back(e);
    CliOptions o;
    o.timeout_s = 120;
    return RunCli(args, o);
  }

  // Every job the server holds, through the paginated list.
  size_t CountJobs() {
    size_t n = 0;
    std::string cursor;
    for (int page = 0; page < 1000; ++page) {
      auto r = admin_->Get("/api/v1/jobs?limit=500" + (cursor.empty() ? "" : "&cursor=" + cursor));
      if (!r || r->status != 200) return 0;
      const json body = json::parse(r->body);
      n += body["items"].size();
      if (body["next_cursor"].is_null()) break;
      cursor = body["next_cursor"].get<std::string>();
    }
    return n;
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(BenchSubmitTest, EveryAcknowledgedJobIsStored) {
  const CliResult one = Bench({"--jobs", "400", "--concurrency", "16"});
  ASSERT_EQ(one.code, 0) << one.out << one.err;
  const json a = json::parse(one.out);
  EXPECT_EQ(a["acknowledged"], 400);
  EXPECT_EQ(a["failed"], 0);
  EXPECT_EQ(a["batch"], 1);
  EXPECT_GT(a["jobs_per_sec"].get<double>(), 0);
  EXPECT_GE(a["p99_ms"].get<double>(), a["p50_ms"].get<double>());
  EXPECT_EQ(CountJobs(), 400u);

  // 300 jobs in batches of 64: four full requests and one of 44.
  const CliResult batched = Bench({"--jobs", "300", "--concurrency", "2", "--batch", "64"});
  ASSERT_EQ(batched.code, 0) << batched.out << batched.err;
  const json b = json::parse(batched.out);
  EXPECT_EQ(b["acknowledged"], 300);
  EXPECT_EQ(b["failed"], 0);
  EXPECT_EQ(CountJobs(), 700u);
}

TEST_F(BenchSubmitTest, RefusedRequestsAreCountedAndTheFirstErrorShown) {
  const CliResult r = Bench({"--jobs", "20", "--concurrency", "4"}, "arb_000000000000_nope");
  EXPECT_EQ(r.code, 1) << r.out << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["acknowledged"], 0);
  EXPECT_EQ(out["failed"], 20);
  EXPECT_NE(out["first_error"].get<std::string>().find("HTTP 401"), std::string::npos) << out;
  EXPECT_EQ(CountJobs(), 0u);

  const CliResult https = RunCli({"bench", "submit", "--server", "https://127.0.0.1:1", "--token",
                                  "t", "--queue", "q", "--jobs", "1"},
                                 CliOptions{});
  EXPECT_EQ(https.code, 2);
  EXPECT_NE(https.err.find("must be http://HOST:PORT"), std::string::npos) << https.err;
}

}  // namespace
}  // namespace arbiter::testing
