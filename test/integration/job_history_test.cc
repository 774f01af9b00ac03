// The job history beyond memory (docs/architecture.md, "What memory holds"): with a window of two
// finished jobs, an older finished job leaves memory (arbiter_jobs_in_memory) and is still read
// back exactly as before: by id, in the filtered and paged list, its events and its logs; its
// Idempotency-Key still finds it, `afterok` on it is satisfied, another tenant still cannot see
// it, and a restart loads only the live jobs and the window.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 0}}
  - name: other
    queues:
      - {name: other-q, guaranteed: {gpu: 0}}
users:
  - {name: ann, tenant: lab, role: member}
  - {name: olga, tenant: other, role: member}
)";

class JobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ofstream(dir_.path() + "/cluster.yaml") << kConfig;
    StartServer();
    for (const char* user : {"ann", "olga"}) {
      auto t = Admin()->Post("/api/v1/tokens", json{{"user", user}}.dump(), "application/json");
      ASSERT_TRUE(t && t->status == 201) << (t ? t->body : "no answer");
      tokens_[user] = json::parse(t->body)["token"].get<std::string>();
    }
  }

  void StartServer() {
    ASSERT_TRUE(server_.Start(
        dir_.path(),
        {"--config", dir_.path() + "/cluster.yaml", "--local-node", "box", "--fake-gpus", "4",
         "--finished-jobs-in-memory", "2", "--finished-jobs-max-age", "1h"}))
        << server_.output();
  }

  std::unique_ptr<httplib::Client> Admin() { return server_.Client(server_.admin_token()); }
  std::unique_ptr<httplib::Client> As(const std::string& user) {
    return server_.Client(tokens_.at(user));
  }

  static std::string Body(const std::string& name, const json& depends_on = json()) {
    json b = {{"queue", "lab-q"},
              {"name", name},
              {"command", {"sh", "-c", "echo hello from " + name}},
              {"resources", {{"gpus", 1}, {"cpu_milli", 100}, {"memory_mib", 64}}}};
    if (!depends_on.is_null()) b["depends_on"] = depends_on;
    return b.dump();
  }

  // Submits as ann (with an Idempotency-Key when `key` is not empty); the answer.
  httplib::Result Submit(const std::string& body, const std::string& key = "") {
    httplib::Headers h;
    if (!key.empty()) h.emplace("Idempotency-Key", key);
    return As("ann")->Post("/api/v1/jobs", h, body, "application/json");
  }

  // Polls (bounded, 50 ms apart) until the job is in `state`.
  bool WaitFor(uint64_t id, const std::string& state) {
    std::string last;
    for (int i = 0; i < 600; ++i) {
      auto r = Admin()->Get(fmt::format("/api/v1/jobs/{}", id));
      if (r && r->status == 200) {
        last = json::parse(r->body)["state"];
        if (last == state) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << " (last: " << last << ")";
    return false;
  }

  // arbiter_jobs_in_memory, polled (bounded) until it is `want`; its last value.
  int64_t WaitJobsInMemory(int64_t want) {
    int64_t last = -1;
    for (int i = 0; i < 200; ++i) {
      auto r = Admin()->Get("/metrics");
      if (r && r->status == 200) {
        const size_t at = r->body.find("\narbiter_jobs_in_memory ");
        if (at != std::string::npos) {
          last = std::stoll(r->body.substr(at + std::string("\narbiter_jobs_in_memory ").size()));
          if (last == want) return last;
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return last;
  }

  // GET as ann: status and body.
  std::pair<int, std::string> Get(const std::string& path, const std::string& user = "ann") {
    auto r = As(user)->Get(path);
    return r ? std::pair<int, std::string>{r->status, r->body}
             : std::pair<int, std::string>{-1, ""};
  }

  TempDir dir_;
  ServerProcess server_;
  std::map<std::string, std::string> tokens_;
};

TEST_F(JobHistoryTest, AnEvictedJobReadsBackExactlyAndStillCounts) {
  // 1. The first job, and how it reads while in memory.
  auto first = Submit(Body("first"), "key-first");
  ASSERT_TRUE(first && first->status == 201) << (first ? first->body : "no answer");
  const uint64_t id = json::parse(first->body)["id"].get<uint64_t>();
  ASSERT_TRUE(WaitFor(id, "succeeded"));
  const std::string path = fmt::format("/api/v1/jobs/{}", id);
  const auto job = Get(path);
  const auto events = Get(path + "/events");
  const auto logs = Get(path + "/logs?task=0");
  const auto page = Get(fmt::format("/api/v1/jobs?user=ann&state=succeeded&limit=1"));
  ASSERT_EQ(job.first, 200);
  ASSERT_EQ(events.first, 200);
  ASSERT_EQ(logs.first, 200) << logs.second;
  EXPECT_NE(logs.second.find("hello from first"), std::string::npos) << logs.second;
  ASSERT_EQ(page.first, 200);
  EXPECT_EQ(json::parse(page.second)["items"][0]["id"], id) << page.second;

  // 2. Three more finished jobs: with a window of two, the first leaves memory.
  std::vector<uint64_t> later;
  for (int i = 0; i < 3; ++i) {
    auto r = Submit(Body(fmt::format("later-{}", i)));
    ASSERT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    later.push_back(json::parse(r->body)["id"].get<uint64_t>());
    ASSERT_TRUE(WaitFor(later.back(), "succeeded"));
  }
  EXPECT_EQ(WaitJobsInMemory(2), 2);

  // 3. Read back from the store, the same answers.
  EXPECT_EQ(Get(path), job);
  EXPECT_EQ(Get(path + "/events"), events);
  EXPECT_EQ(Get(path + "/logs?task=0"), logs);
  // The same item on the first page (the page now has a next one: later jobs succeeded).
  const auto first_page = Get("/api/v1/jobs?user=ann&state=succeeded&limit=1");
  ASSERT_EQ(first_page.first, 200);
  EXPECT_EQ(json::parse(first_page.second)["items"], json::parse(page.second)["items"]);
  EXPECT_EQ(json::parse(first_page.second)["next_cursor"], std::to_string(id));
  // Paged over all of history: every job once, in id order, the evicted ones included.
  std::vector<uint64_t> seen;
  std::string cursor;
  for (int i = 0; i < 10; ++i) {
    const auto p = Get("/api/v1/jobs?user=ann&limit=1" + cursor);
    ASSERT_EQ(p.first, 200) << p.second;
    const json j = json::parse(p.second);
    for (const json& item : j["items"]) seen.push_back(item["id"].get<uint64_t>());
    if (j["next_cursor"].is_null()) break;
    cursor = "&cursor=" + j["next_cursor"].get<std::string>();
  }
  EXPECT_EQ(seen, (std::vector<uint64_t>{id, later[0], later[1], later[2]}));
  // Another tenant's member still does not see it, nor finds it by filter.
  EXPECT_EQ(Get(path, "olga").first, 404);
  EXPECT_EQ(json::parse(Get("/api/v1/jobs?state=succeeded", "olga").second)["items"].size(), 0u);

  // 4. Its Idempotency-Key still finds it: a retried submission returns the same job.
  EXPECT_EQ(WaitJobsInMemory(2), 2);
  auto again = Submit(Body("first"), "key-first");
  ASSERT_TRUE(again && again->status == 200) << (again ? again->body : "no answer");
  EXPECT_EQ(json::parse(again->body)["id"], id);

  // 5. A job after it (afterok) runs: the dependency is satisfied from the store.
  EXPECT_EQ(WaitJobsInMemory(2), 2);
  auto after = Submit(Body("after", json::array({{{"type", "afterok"}, {"job", id}}})));
  ASSERT_TRUE(after && after->status == 201) << (after ? after->body : "no answer");
  const uint64_t after_id = json::parse(after->body)["id"].get<uint64_t>();
  ASSERT_TRUE(WaitFor(after_id, "succeeded"));

  // 6. A restart loads only the window: the two latest finished jobs (nothing is live).
  server_.Kill(SIGTERM);
  StartServer();
  EXPECT_EQ(WaitJobsInMemory(2), 2);
  EXPECT_EQ(Get(path), job);
  EXPECT_EQ(Get(path + "/events"), events);
  EXPECT_EQ(Get("/api/v1/jobs?user=ann&state=succeeded&limit=1"), first_page);
}

}  // namespace
}  // namespace arbiter::testing
