// MigrateStore: a SQLite store with every kind of record and history is copied into a fresh
// PostgreSQL database, verified, and read back equal; a target with records is refused unless
// forced, and a forced second copy appends nothing twice.
#include "store/migrate_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "store/postgres/postgres_store.h"
#include "store/sqlite/sqlite_store.h"
#include "testing/postgres_cluster.h"
#include "testing/temp_dir.h"

namespace arbiter::store {
namespace {

using arbiter::testing::PostgresCluster;
using arbiter::testing::TempDir;

std::unique_ptr<Store> Must(Result<std::unique_ptr<Store>> s) {
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? std::move(s).value() : nullptr;
}

// A source with a row in every table, history of each kind, and a deleted highest job.
void Fill(Store& s) {
  WriteBatch b;
  b.PutTenant({"research", "{}", 1});
  b.PutQueue({"train", "research", "", "{}"});
  b.PutUser({"alice", "research", "admin", 2});
  b.PutToken({"tok", fmt::format("{:064x}", 7), "alice", "research", "admin", "api", 3, 0, false});
  b.PutPriorityClass({"high", "{}"});
  b.PutGpuModel({"A100", "{}"});
  b.PutNode({"n1", "{}", "ready", 4});
  for (uint64_t id = 1; id <= 30; ++id) {
    b.PutJob({.id = id, .tenant = "research", .queue = "train", .user = "alice", .state = "done"});
  }
  b.PutKv({"bytes", std::string("a\0b", 3)});
  b.PutService({"chat", "research", "{}", "", 5});
  b.PutWebhook({"wh", "research", "alice", "{}", "k", 6});
  b.PutWebhookDelivery({"d1", "wh", "pending", 7, 7, "{}"});
  b.PutWebhookDelivery({"d2", "wh", "delivered", 8, 9, "{}"});
  for (uint64_t seq = 1; seq <= 12'000; ++seq) {  // more than one page
    b.AppendJobEvent({seq, seq % 30 + 1, static_cast<int64_t>(seq), "a", "b", "r", "{}"});
  }
  b.AppendUsage({.job_id = 1, .tenant = "research", .start_ms = 10, .end_ms = 20});
  b.AppendAudit({.at_ms = 5, .actor = "alice", .action = "job.submit", .target = "job/1"});
  b.PutClusterSample({1000, 60'000, "{}"});
  b.PutGpuSample({60'000, "n1", 0, 0, 60'000, 1, 2, 3});
  b.PutServingStat({0, "chat", 1, "{}"});
  ASSERT_TRUE(s.Write(std::move(b)).ok());
  WriteBatch d;
  d.PutJob({.id = 31, .state = "done"});
  d.DeleteJob(31);
  ASSERT_TRUE(s.Write(std::move(d)).ok());
}

TEST(MigrateStore, SqliteToPostgresCopiesEverythingAndVerifies) {
  std::string error;
  PostgresCluster* pg = PostgresCluster::ForTests(&error);
  ASSERT_NE(pg, nullptr) << error;
  const std::string db = PostgresCluster::UniqueDatabaseName("migrate");
  ASSERT_TRUE(pg->CreateDatabase(db, &error)) << error;
  TempDir dir;
  auto from = Must(OpenSqliteStore(dir.File("arbiter.db")));
  auto to = Must(OpenPostgresStore(pg->Uri(db)));
  ASSERT_TRUE(from && to);
  Fill(*from);

  auto counts = MigrateStore(*from, *to, {});
  ASSERT_TRUE(counts.ok()) << counts.status().ToString();
  for (const TableCount& c : *counts) {
    EXPECT_EQ(c.source, c.target) << c.table;
    EXPECT_GT(c.source, 0u) << c.table;
  }
  auto a = from->Load();
  auto b = to->Load();
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->jobs, b->jobs);
  EXPECT_EQ(a->kv, b->kv);
  EXPECT_EQ(b->max_job_id, 31u);
  EXPECT_EQ(b->max_event_seq, 12'000u);
  EXPECT_EQ(*from->JobEvents(3), *to->JobEvents(3));
  EXPECT_EQ(to->WebhookDeliveries("wh", 10)->size(), 2u);

  // A target with records is refused; forced, it appends no history twice.
  auto refused = MigrateStore(*from, *to, {});
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  auto forced = MigrateStore(*from, *to, {.force = true});
  ASSERT_TRUE(forced.ok()) << forced.status().ToString();
  EXPECT_EQ(to->EventsSince(0, 20'000)->size(), 12'000u);
}

}  // namespace
}  // namespace arbiter::store
