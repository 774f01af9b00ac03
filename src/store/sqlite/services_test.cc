// The service tables of schema version 6: services (put, delete, loaded at start) and the
// serving stats per minute, service and revision (replaced by key, read by minute, pruned).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::store {
namespace {

using arbiter::testing::TempDir;

std::unique_ptr<Store> MustOpen(const std::string& path) {
  auto store = OpenSqliteStore(path);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

TEST(ServiceTables, ServicesArePutDeletedAndLoaded) {
  TempDir dir;
  {
    auto store = MustOpen(dir.File("arbiter.db"));
    WriteBatch b;
    b.PutService({"chat", "lab", R"({"v":1})", "", 10});
    b.PutService({"embed", "lab", R"({"v":1})", R"({"1":{"K":"v"}})", 11});
    b.PutService({"chat", "lab", R"({"v":2})", "", 12});  // replaces
    ASSERT_TRUE(store->Write(std::move(b)).ok());
    WriteBatch d;
    d.DeleteService("embed");
    d.DeleteService("missing");  // not an error
    ASSERT_TRUE(store->Write(std::move(d)).ok());
    store->Close();
  }
  auto store = MustOpen(dir.File("arbiter.db"));
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  const std::vector<ServiceRecord> want = {{"chat", "lab", R"({"v":2})", "", 12}};
  EXPECT_EQ(state->services, want);
}

TEST(ServiceTables, ServingStatsAreKeyedByMinuteServiceAndRevision) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  b.PutServingStat({0, "chat", 1, "a"});
  b.PutServingStat({60000, "chat", 1, "b"});
  b.PutServingStat({60000, "chat", 2, "c"});
  b.PutServingStat({60000, "chat", 1, "b2"});  // replaces
  b.PutServingStat({120000, "chat", 1, "d"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  auto got = store->ServingStats(60000, 120000);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const std::vector<ServingStatRecord> want = {{60000, "chat", 1, "b2"}, {60000, "chat", 2, "c"}};
  EXPECT_EQ(*got, want);
  // Retention: rows before the bound go.
  WriteBatch c;
  c.CompactSamples({0, 0, 0, 60000});
  ASSERT_TRUE(store->Write(std::move(c)).ok());
  got = store->ServingStats(0, 1'000'000);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->size(), 3u);
  EXPECT_EQ(got->front().minute_ms, 60000);
}

}  // namespace
}  // namespace arbiter::store
