// The webhook tables of schema version 8: webhooks (put, delete with their deliveries, loaded at
// start), deliveries (pending ones loaded at start, the newest of a hook read back, finished ones
// pruned by age).
#include <gtest/gtest.h>

#include <algorithm>
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

TEST(WebhookTables, HooksAndPendingDeliveriesAreLoaded) {
  TempDir dir;
  {
    auto store = MustOpen(dir.File("arbiter.db"));
    WriteBatch b;
    b.PutWebhook({"wh_1", "lab", "ann", R"({"url":"http://a"})", "s1", 10});
    b.PutWebhook({"wh_2", "lab", "bob", R"({"url":"http://b"})", "s2", 11});
    b.PutWebhookDelivery({"d1", "wh_1", "pending", 20, 20, "{}"});
    b.PutWebhookDelivery({"d2", "wh_1", "pending", 21, 21, "{}"});
    b.PutWebhookDelivery({"d2", "wh_1", "delivered", 21, 25, R"({"ok":1})"});  // replaces
    b.PutWebhookDelivery({"d3", "wh_2", "pending", 22, 22, "{}"});
    ASSERT_TRUE(store->Write(std::move(b)).ok());
    WriteBatch d;
    d.DeleteWebhook("wh_2");  // and its deliveries
    d.DeleteWebhook("missing");
    ASSERT_TRUE(store->Write(std::move(d)).ok());
    store->Close();
  }
  auto store = MustOpen(dir.File("arbiter.db"));
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  const std::vector<WebhookRecord> hooks = {
      {"wh_1", "lab", "ann", R"({"url":"http://a"})", "s1", 10}};
  EXPECT_EQ(state->webhooks, hooks);
  const std::vector<WebhookDeliveryRecord> pending = {{"d1", "wh_1", "pending", 20, 20, "{}"}};
  EXPECT_EQ(state->pending_deliveries, pending);

  auto log = store->WebhookDeliveries("wh_1", 10);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  ASSERT_EQ(log->size(), 2u);
  EXPECT_EQ((*log)[0].id, "d2");  // newest first
  EXPECT_EQ((*log)[1].id, "d1");
  auto one = store->WebhookDeliveries("wh_1", 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->size(), 1u);
  auto gone = store->WebhookDeliveries("wh_2", 10);
  ASSERT_TRUE(gone.ok());
  EXPECT_TRUE(gone->empty());
}

TEST(WebhookTables, PruneDeletesOnlyOldFinishedDeliveries) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  b.PutWebhookDelivery({"old-done", "wh", "delivered", 1, 5, "{}"});
  b.PutWebhookDelivery({"old-failed", "wh", "failed", 1, 6, "{}"});
  b.PutWebhookDelivery({"old-pending", "wh", "pending", 1, 5, "{}"});
  b.PutWebhookDelivery({"new-done", "wh", "delivered", 1, 50, "{}"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  WriteBatch p;
  p.PruneWebhookDeliveries({10});
  ASSERT_TRUE(store->Write(std::move(p)).ok());
  auto log = store->WebhookDeliveries("wh", 10);
  ASSERT_TRUE(log.ok());
  std::vector<std::string> ids;
  for (const auto& d : *log) ids.push_back(d.id);
  std::sort(ids.begin(), ids.end());
  EXPECT_EQ(ids, (std::vector<std::string>{"new-done", "old-pending"}));
}

TEST(WebhookTables, AStateOtherThanTheThreeIsRefused) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  b.PutWebhookDelivery({"d", "wh", "sent", 1, 1, "{}"});
  EXPECT_FALSE(store->Write(std::move(b)).ok());
}

}  // namespace
}  // namespace arbiter::store
