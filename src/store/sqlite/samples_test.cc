// The sample tables of schema version 2: cluster samples, GPU samples and their retention
// (CompactSamples), and the migration of a version-1 database.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <string>
#include <vector>

#include "store/sqlite/migrations.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::store {
namespace {

using arbiter::testing::TempDir;
constexpr int64_t kMin = 60'000;
constexpr int64_t kHour = GpuSampleRecord::kHourMs;

std::unique_ptr<Store> MustOpen(const std::string& path) {
  auto store = OpenSqliteStore(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

GpuSampleRecord Raw(std::string node, int32_t gpu, int64_t at, int64_t util_pct, int64_t mem) {
  return {kMin, std::move(node), gpu, at, kMin, kMin * util_pct / 100, mem, kMin * mem};
}

TEST(SampleTables, ClusterSamplesRoundTripAndAreReadByInstant) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  for (int64_t at : {0, 60, 120, 180})
    b.PutClusterSample({at, 60, fmt::format(R"({{"t":{}}})", at)});
  b.PutClusterSample({120, 60, R"({"t":"again"})"});  // same instant: replaces
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  auto got = store->ClusterSamples(60, 180);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<ClusterSampleRecord> want = {{60, 60, R"({"t":60})"},
                                                 {120, 60, R"({"t":"again"})"}};
  EXPECT_EQ(*got, want);
}

TEST(SampleTables, GpuSamplesRollUpIntoHoursExactlyOnce) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  // Hour 0: three samples of gpu 0 (50 %, 100 %, 0 %); hour 1: one sample at 10 %.
  b.PutGpuSample(Raw("n1", 0, 0, 50, 1000));
  b.PutGpuSample(Raw("n1", 0, 30 * kMin, 100, 4000));
  b.PutGpuSample(Raw("n1", 0, 59 * kMin, 0, 2000));
  b.PutGpuSample(Raw("n1", 0, kHour + 5 * kMin, 10, 500));
  ASSERT_TRUE(store->Write(std::move(b)).ok());

  // Roll up what is older than 40 minutes: the first two samples.
  WriteBatch c;
  c.CompactSamples({40 * kMin, 0, 0});
  c.CompactSamples({40 * kMin, 0, 0});  // idempotent
  ASSERT_TRUE(store->Write(std::move(c)).ok());
  auto got = store->GpuSamples(0, 2 * kHour);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  std::vector<GpuSampleRecord> want = {
      {kHour, "n1", 0, 0, 2 * kMin, kMin * 150 / 100, 4000, kMin * 5000},
      Raw("n1", 0, 59 * kMin, 0, 2000),
      Raw("n1", 0, kHour + 5 * kMin, 10, 500)};
  EXPECT_EQ(*got, want);

  // A later roll-up adds the third sample to the same hourly row.
  WriteBatch d;
  d.CompactSamples({kHour, 0, 0});
  ASSERT_TRUE(store->Write(std::move(d)).ok());
  got = store->GpuSamples(0, 2 * kHour);
  ASSERT_TRUE(got.ok());
  want = {{kHour, "n1", 0, 0, 3 * kMin, kMin * 150 / 100, 4000, kMin * 7000},
          Raw("n1", 0, kHour + 5 * kMin, 10, 500)};
  EXPECT_EQ(*got, want);

  // The hourly row overlaps any window inside its hour; the raw one only its minute.
  got = store->GpuSamples(kHour - 1, kHour + kMin);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 1u);
  got = store->GpuSamples(kHour + 5 * kMin, kHour + 5 * kMin + 1);
  ASSERT_TRUE(got.ok());
  ASSERT_EQ(got->size(), 1u);
  EXPECT_EQ((*got)[0].resolution_ms, kMin);
}

TEST(SampleTables, RetentionDeletesOldHourlyAndClusterSamples) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  b.PutGpuSample({kHour, "n1", 0, 0, kHour, kHour / 2, 10, 0});
  b.PutGpuSample({kHour, "n1", 0, kHour, kHour, kHour / 2, 10, 0});
  b.PutClusterSample({0, kMin, "{}"});
  b.PutClusterSample({kHour, kMin, "{}"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  WriteBatch c;
  c.CompactSamples({0, kHour, kHour});
  ASSERT_TRUE(store->Write(std::move(c)).ok());
  auto gpus = store->GpuSamples(0, 10 * kHour);
  ASSERT_TRUE(gpus.ok());
  ASSERT_EQ(gpus->size(), 1u);
  EXPECT_EQ((*gpus)[0].at_ms, kHour);
  auto cluster = store->ClusterSamples(0, 10 * kHour);
  ASSERT_TRUE(cluster.ok());
  ASSERT_EQ(cluster->size(), 1u);
  EXPECT_EQ((*cluster)[0].at_ms, kHour);
}

// A database written by a version-1 arbiter keeps its rows and gains the sample tables.
TEST(SampleTables, Version1DatabaseIsMigrated) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    const sqlite::Migration& v1 = sqlite::Migrations()[0];
    const std::string sql = fmt::format(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, "
        "applied_at_ms INTEGER NOT NULL); {}; INSERT INTO schema_version VALUES (1, '{}', 0); "
        "INSERT INTO usage (job_id, task, tenant, queue, user, job_type, gpu_model, gpu_milli, "
        "gpu_memory_mib, start_ms, end_ms, cost_micro) VALUES (7, 0, 't', 'q', 'u', 'training', "
        "'A100', 1000, 0, 0, 3600000, 0);",
        v1.sql, v1.name);
    char* err = nullptr;
    ASSERT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK) << err;
    sqlite3_close(db);
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  auto usage = store->Usage(0, kHour);
  ASSERT_TRUE(usage.ok());
  ASSERT_EQ(usage->size(), 1u);
  EXPECT_EQ((*usage)[0].job_id, 7u);
  WriteBatch b;
  b.PutClusterSample({5, kMin, "{}"});
  b.PutGpuSample(Raw("n1", 0, 5, 100, 1));
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  EXPECT_EQ(store->ClusterSamples(0, 10)->size(), 1u);
  EXPECT_EQ(store->GpuSamples(0, 10)->size(), 1u);
}

}  // namespace
}  // namespace arbiter::store
