// `arbiter admin migrate-store`: a real server's SQLite data dir, with jobs that ran and their
// history, is copied into PostgreSQL while the server is stopped; a server started on PostgreSQL
// with the same data dir shows the same jobs, events, audit records and usage report.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "server_process.h"

namespace arbiter::testing {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

constexpr const char* kConfig = R"(
gpu_models:
  - {name: A100-80G, memory_mib: 81920}
tenants:
  - name: lab
    queues:
      - {name: lab-q, guaranteed: {gpu: 8}}
)";

json Parse(const httplib::Result& r) {
  if (!r || r->status != 200) return json();
  try {
    return json::parse(r->body);
  } catch (...) {
    return json();
  }
}

class MigrateStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (OnPostgres()) GTEST_SKIP() << "copies a SQLite data dir: runs in the SQLite pass only";
    std::ofstream(dir_.path() + "/cluster.yaml") << kConfig;
  }

  json Get(const std::string& path) { return Parse(admin_->Get(path)); }

  json WaitFor(uint64_t id, const std::string& state) {
    json j;
    const auto deadline = Clock::now() + std::chrono::seconds(20);
    while (Clock::now() < deadline) {
      j = Get(fmt::format("/api/v1/jobs/{}", id));
      if (j["state"] == state) return j;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    ADD_FAILURE() << "job " << id << " never became " << state << ": " << j.dump();
    return j;
  }

  uint64_t Submit(const std::string& command) {
    const json body = {
        {"queue", "lab-q"}, {"command", {"sh", "-c", command}}, {"resources", {{"gpus", 1}}}};
    auto r = admin_->Post("/api/v1/jobs", body.dump(), "application/json");
    EXPECT_TRUE(r && r->status == 201) << (r ? r->body : "no answer");
    return r && r->status == 201 ? json::parse(r->body)["id"].get<uint64_t>() : 0;
  }

  // What a user sees of the installation: each job, its events, the audit log and a report.
  json View(const std::vector<uint64_t>& ids) {
    json v;
    for (uint64_t id : ids) {
      json job = Get(fmt::format("/api/v1/jobs/{}", id));
      job.erase("queue_position");  // depends on the scheduler's state, not the store's
      v["jobs"].push_back(job);
      v["events"].push_back(Get(fmt::format("/api/v1/jobs/{}/events", id)));
    }
    v["audit"] = Get("/api/v1/audit?limit=1000")["items"];
    v["usage"] = Get("/api/v1/reports/usage?since=1d&group_by=type")["rows"];
    return v;
  }

  TempDir dir_;
  std::unique_ptr<httplib::Client> admin_;
};

TEST_F(MigrateStoreTest, ASqliteDataDirMovesToPostgresWithItsHistory) {
  std::string error;
  PostgresCluster* pg = PostgresCluster::ForTests(&error);
  ASSERT_NE(pg, nullptr) << error;
  const std::string db = PostgresCluster::UniqueDatabaseName("migrated");
  ASSERT_TRUE(pg->CreateDatabase(db, &error)) << error;
  const std::vector<std::string> flags = {
      "--local-node", "box", "--fake-gpus", "8", "--config", dir_.path() + "/cluster.yaml"};

  ServerProcess sqlite;
  ASSERT_TRUE(sqlite.Start(dir_.path(), flags)) << sqlite.output();
  admin_ = sqlite.Client(sqlite.admin_token());
  const uint64_t ok = Submit("echo done");
  const uint64_t failed = Submit("exit 3");
  const uint64_t slept = Submit("sleep 0.3; echo slept");
  WaitFor(ok, "succeeded");
  WaitFor(failed, "failed");
  WaitFor(slept, "succeeded");
  // Every job has ended: nothing the next server would still change (a task running across the
  // move would end, and be accounted, on the new server).
  const json before = View({ok, failed, slept});
  ASSERT_FALSE(before["audit"].empty());
  sqlite.Kill(SIGTERM);

  std::string out;
  const int rc = Shell(fmt::format("{} admin migrate-store --from sqlite:{} --to {} 2>&1",
                                   ARBITER_BINARY, sqlite.data_dir(), pg->Uri(db)),
                       &out);
  ASSERT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("copied and verified"), std::string::npos) << out;
  EXPECT_NE(out.find("job_events"), std::string::npos) << out;
  // A second copy into the same database is refused.
  EXPECT_NE(Shell(fmt::format("{} admin migrate-store --from sqlite:{} --to {} 2>&1",
                              ARBITER_BINARY, sqlite.data_dir(), pg->Uri(db)),
                  &out),
            0);
  EXPECT_NE(out.find("--force"), std::string::npos) << out;

  std::vector<std::string> on_pg = flags;
  on_pg.insert(on_pg.end(), {"--store", pg->Uri(db)});
  ServerProcess postgres;
  ASSERT_TRUE(postgres.Start(dir_.path(), on_pg)) << postgres.output();
  admin_ = postgres.Client(postgres.admin_token());
  json after = View({ok, failed, slept});
  // The new server's start adds its own records; the old ones come first and are unchanged.
  ASSERT_GE(after["audit"].size(), before["audit"].size());
  after["audit"] = json(
      std::vector<json>(after["audit"].begin(), after["audit"].begin() + before["audit"].size()));
  EXPECT_EQ(after["jobs"], before["jobs"]);
  EXPECT_EQ(after["events"], before["events"]);
  EXPECT_EQ(after["audit"], before["audit"]);
  EXPECT_EQ(after["usage"], before["usage"]);
  // New jobs continue the ids.
  EXPECT_GT(Submit("true"), slept);
}

}  // namespace
}  // namespace arbiter::testing
