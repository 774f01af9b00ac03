// What-if on recorded history end to end: a real server with its built-in node (8 GPUs) runs four
// 8-GPU jobs that had to take turns; the replay of that history reproduces the waits, adding
// nodes cuts them to 0, and `plan capacity` finds exactly the nodes needed.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <fstream>
#include <thread>

#include "cli_process.h"
#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920, price_per_hour: 2.5}
tenants:
  - name: lab
    queues:
      - {name: lab-q}
nodes:
  - {name: box, cpu_milli: 32000, memory_mib: 65536, gpus: {count: 8, model: A100-80G}}
)";

class PlanTest : public ::testing::Test {
 protected:
  void SetUp() override {
    {
      std::ofstream f(dir_.path() + "/cluster.yaml");
      f << kConfig;
    }
    ASSERT_TRUE(server_.Start(dir_.path(),
                              {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box"}))
        << server_.output();
    admin_ = server_.Client(server_.admin_token());
  }

  uint64_t Submit(int gpus, const std::string& script) {
    const json body = {
        {"queue", "lab-q"}, {"resources", {{"gpus", gpus}}}, {"command", {"sh", "-c", script}}};
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no response");
    return r ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  std::string WaitFinal(uint64_t id) {
    for (int i = 0; i < 400; ++i) {
      auto r = admin_->Get(fmt::format("/api/v1/jobs/{}", id).c_str());
      if (r && r->status == 200) {
        const std::string s = json::parse(r->body)["state"];
        if (s == "succeeded" || s == "failed") return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "not final";
  }

  json Post(const std::string& path, const json& body, int want = 200) {
    auto r = admin_->Post(path, body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == want) << path << ": " << (r ? r->body : "no response");
    return r ? json::parse(r->body, nullptr, false) : json();
  }

  // Four jobs of the whole node, submitted together: they run one after another.
  void RunSerialHistory() {
    std::vector<uint64_t> ids;
    for (int i = 0; i < 4; ++i) ids.push_back(Submit(8, "sleep 1"));
    for (uint64_t id : ids) ASSERT_EQ(WaitFinal(id), "succeeded");
  }

  TempDir dir_;
  ServerProcess server_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(PlanTest, ReplayReproducesTheHistoryAndNodesCutTheWaits) {
  RunSerialHistory();
  const json r = Post("/api/v1/plan", {{"since", "1h"}, {"add_nodes", {"3xA100-80G"}}});
  ASSERT_EQ(r["jobs"], 4) << r.dump();
  ASSERT_EQ(r["queues"].size(), 1u) << r.dump();
  const json& q = r["queues"][0];
  EXPECT_EQ(q["queue"], "lab-q");
  // Recorded: about 0, 1, 2 and 3 s of waiting (each run a second plus the node's start and
  // stop); the replay runs the recorded run times on the same node, so the same order and waits.
  const double rec_p90 = q["recorded"]["wait_p90_s"].get<double>();
  const double rep_p90 = q["replayed"]["wait_p90_s"].get<double>();
  EXPECT_GT(rec_p90, 2.5) << q.dump();
  EXPECT_NEAR(rep_p90, rec_p90, 0.1 * rec_p90 + 0.05) << q.dump();
  EXPECT_NEAR(q["replayed"]["wait_p50_s"].get<double>(), q["recorded"]["wait_p50_s"].get<double>(),
              0.25)
      << q.dump();
  ASSERT_EQ(q["variants"].size(), 1u);
  EXPECT_EQ(q["variants"][0]["label"], "add 3xA100-80G");
  EXPECT_EQ(q["variants"][0]["wait_p90_s"].get<double>(), 0) << q.dump();
  EXPECT_EQ(q["variants"][0]["wait_max_s"].get<double>(), 0) << q.dump();
  ASSERT_EQ(r["runs"].size(), 3u);
  EXPECT_EQ(r["runs"][2]["gpus"], 32);
  // No job was preempted: no stop was measured, and none is added to the replay's preemptions.
  EXPECT_EQ(r["stop_latency_ms"], 0);
  EXPECT_EQ(r["stop_latency_samples"], 0);

  // Per job: each of the four, recorded and in each replay, in the order they arrived.
  const json pj =
      Post("/api/v1/plan", {{"since", "1h"}, {"add_nodes", {"3xA100-80G"}}, {"jobs", true}});
  EXPECT_EQ(pj["jobs"], 4);
  ASSERT_EQ(pj["per_job"].size(), 4u) << pj.dump();
  double last_recorded = -1;
  for (const json& j : pj["per_job"]) {
    ASSERT_EQ(j["runs"].size(), 3u) << j.dump();
    EXPECT_EQ(j["runs"][0]["label"], "recorded");
    EXPECT_EQ(j["runs"][1]["label"], "baseline");
    EXPECT_EQ(j["runs"][2]["wait_s"].get<double>(), 0) << j.dump();  // 3 more nodes: no wait
    const double rec = j["runs"][0]["wait_s"].get<double>();
    EXPECT_NEAR(j["runs"][1]["wait_s"].get<double>(), rec, 0.25) << j.dump();
    EXPECT_GE(rec, last_recorded) << pj["per_job"].dump();  // they took turns
    last_recorded = rec;
  }
  // A stop latency given replaces the measured one.
  const json given = Post("/api/v1/plan", {{"since", "1h"}, {"stop_latency_ms", 250}});
  EXPECT_EQ(given["stop_latency_ms"], 250);
  EXPECT_FALSE(given.contains("per_job"));

  // Capacity: every job at once needs 3 more nodes; within 1.5 s (the third and fourth may wait
  // one run) one more node is enough.
  const json c = Post("/api/v1/plan/capacity",
                      {{"since", "1h"}, {"model", "A100-80G"}, {"target_wait_p90", "0s"}});
  EXPECT_EQ(c["found"], true) << c.dump();
  EXPECT_EQ(c["nodes"], 3) << c.dump();
  EXPECT_EQ(c["gpus_per_node"], 8);
  EXPECT_DOUBLE_EQ(c["cost_per_hour"].get<double>(), 3 * 8 * 2.5);
  const json one =
      Post("/api/v1/plan",
           {{"since", "1h"}, {"capacity", {{"model", "A100-80G"}, {"target_wait_p90", "2s"}}}});
  EXPECT_EQ(one["nodes"], 1) << one.dump();
  const json short_of =
      Post("/api/v1/plan/capacity",
           {{"since", "1h"}, {"model", "A100-80G"}, {"target_wait_p90", "0s"}, {"max_nodes", 2}});
  EXPECT_EQ(short_of["found"], false) << short_of.dump();

  // The CLI shows the same.
  CliOptions o;
  o.env["HOME"] = dir_.path();
  o.env["ARBITER_SERVER"] = fmt::format("http://127.0.0.1:{}", server_.port());
  o.env["ARBITER_TOKEN"] = server_.admin_token();
  const CliResult cli =
      RunCli({"plan", "replay", "--since", "1h", "--add-nodes", "3xA100-80G", "--json"}, o);
  ASSERT_EQ(cli.code, 0) << cli.err;
  const json cj = json::parse(cli.out);
  EXPECT_EQ(cj["queues"][0]["variants"][0]["wait_p90_s"].get<double>(), 0);
  const CliResult table = RunCli({"plan", "replay", "--since", "1h"}, o);
  ASSERT_EQ(table.code, 0) << table.err;
  EXPECT_NE(table.out.find("lab-q"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("RECORDED"), std::string::npos) << table.out;
  const CliResult cap = RunCli(
      {"plan", "capacity", "--since", "1h", "--model", "A100-80G", "--target-wait-p90", "0s"}, o);
  ASSERT_EQ(cap.code, 0) << cap.err;
  EXPECT_NE(cap.out.find("3 node(s) of A100-80G"), std::string::npos) << cap.out;
  const CliResult html = RunCli({"plan", "replay", "--since", "1h", "--html"}, o);
  ASSERT_EQ(html.code, 0) << html.err;
  EXPECT_NE(html.out.find("<html"), std::string::npos);
}

TEST_F(PlanTest, BadInputNamesTheField) {
  const std::vector<std::pair<json, std::string>> cases = {
      {{{"since", "forever"}}, "since"},
      {{{"since", "1h"}, {"add_nodes", {"lots"}}}, "add_nodes[0]"},
      {{{"since", "1h"}, {"quota", {"lab-q.most.gpu=1"}}}, "quota[0]"},
      {{{"since", "1h"}, {"remove_nodes", {"nope"}}}, "remove_node"},
      {{{"since", "1h"}, {"add_nodes", {"1xH100"}}}, "add_nodes"},
      {{{"since", "1h"}, {"colour", "red"}}, "colour"},
      {{{"since", "400d"}}, "since"},
      {{{"since", "1h"}, {"capacity", {{"model", "A100-80G"}}}}, "capacity.target_wait_p90"},
      {{{"since", "1h"}, {"stop_latency_ms", -1}}, "stop_latency_ms"},
      {{{"since", "1h"}, {"stop_latency_ms", "1s"}}, "stop_latency_ms"},
      {{{"since", "1h"}, {"jobs", "yes"}}, "jobs"},
  };
  for (const auto& [body, field] : cases) {
    const json e = Post("/api/v1/plan", body, 400);
    EXPECT_EQ(e["error"]["field"], field) << body.dump() << " -> " << e.dump();
  }
}

}  // namespace
}  // namespace arbiter::testing
