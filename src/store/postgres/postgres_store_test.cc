// The PostgreSQL store against a throw-away PostgreSQL server (testing/postgres_cluster.h): the
// Store contract as the SQLite store's tests check it (sqlite/*_test.cc), and what is PostgreSQL's
// own: schema versions, concurrent first opens, a lost connection.
#include "store/postgres/postgres_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <libpq-fe.h>

#include <atomic>
#include <chrono>
#include <limits>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/job_history_checks.h"
#include "store/postgres/migrations.h"
#include "store/report_aggregates_checks.h"
#include "testing/postgres_cluster.h"

namespace arbiter::store {
namespace {

using arbiter::testing::PostgresCluster;

JobRecord MakeJob(uint64_t id) {
  JobRecord j;
  j.id = id;
  j.tenant = fmt::format("tenant-{}", id % 3);
  j.queue = fmt::format("queue-{}", id % 5);
  j.user = fmt::format("user-{}", id % 7);
  j.name = fmt::format("train-{}", id);
  j.type = id % 2 == 0 ? "training" : "inference";
  j.state = "pending";
  j.spec_json = fmt::format(R"({{"tasks":{},"gpus":8,"image":"registry/llm:{}"}})", id % 4, id);
  j.status_json = R"({"attempts":0})";
  j.idempotency_key = fmt::format("key-{}", id);
  j.submitted_at_ms = 1'700'000'000'000 + static_cast<int64_t>(id);
  j.updated_at_ms = j.submitted_at_ms + 5;
  j.secret_env_json = id % 2 == 0 ? R"({"TOKEN":"s"})" : "";
  j.request_digest = fmt::format("{:064x}", id);
  return j;
}

// Each test: a fresh database of the shared cluster.
class PostgresStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string error;
    PostgresCluster* pg = PostgresCluster::ForTests(&error);
    ASSERT_NE(pg, nullptr) << error;
    const std::string db = PostgresCluster::UniqueDatabaseName("store");
    ASSERT_TRUE(pg->CreateDatabase(db, &error)) << error;
    uri_ = pg->Uri(db);
  }

  std::unique_ptr<Store> MustOpen(PostgresOptions options = {}) {
    auto store = OpenPostgresStore(uri_, options);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Runs `sql` on a connection of its own; its error message ("" when it succeeded).
  std::string Sql(const std::string& sql) {
    PGconn* c = PQconnectdb(uri_.c_str());
    PGresult* r = PQexec(c, sql.c_str());
    const ExecStatusType s = PQresultStatus(r);
    std::string error = s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ? "" : PQerrorMessage(c);
    if (error.empty() && s == PGRES_TUPLES_OK && PQntuples(r) > 0)
      last_value_ = PQgetvalue(r, 0, 0);
    PQclear(r);
    PQfinish(c);
    return error;
  }

  // How many transactions (and savepoints) wrote the rows of `table` that pass `where`: rows
  // written by one transaction share its id (xmin); a savepoint's rows have their own.
  std::string Writers(const std::string& table, const std::string& where = "true") {
    last_value_.clear();
    EXPECT_EQ(Sql(fmt::format("SELECT count(DISTINCT xmin::text) FROM {} WHERE {}", table, where)),
              "");
    return last_value_;
  }

  // Enqueues `batches` so that they commit as one group: another connection holds `gate_table`
  // while the writer takes a first batch (a job, id kGateJobId) and blocks on it, and the batches
  // queue up behind it. Returns the first batch's future, then one per batch.
  std::vector<std::shared_future<Status>> WriteAsOneGroup(Store& store,
                                                          std::vector<WriteBatch> batches,
                                                          const std::string& gate_table = "jobs") {
    PGconn* gate = PQconnectdb(uri_.c_str());
    PQclear(PQexec(
        gate, fmt::format("BEGIN; LOCK TABLE {} IN ACCESS EXCLUSIVE MODE", gate_table).c_str()));
    std::vector<std::shared_future<Status>> futures;
    WriteBatch first;
    first.PutJob(MakeJob(kGateJobId));
    futures.push_back(store.WriteAsync(std::move(first)));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (store.stats().queued != 0 && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::yield();  // until the writer took it
    }
    for (WriteBatch& b : batches) futures.push_back(store.WriteAsync(std::move(b)));
    PQclear(PQexec(gate, "COMMIT"));
    PQfinish(gate);
    return futures;
  }

  static constexpr uint64_t kGateJobId = 1000;

  std::string uri_;
  std::string last_value_;
};

WriteBatch JobBatch(uint64_t id) {
  WriteBatch b;
  b.PutJob(MakeJob(id));
  return b;
}

std::string HexHash(int n) { return fmt::format("{:064x}", n); }

TEST_F(PostgresStoreTest, JobHistoryReadsFilterPageAndLoadAWindow) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  testing::CheckJobHistoryReads(*store);
}

TEST_F(PostgresStoreTest, EveryRecordKindRoundTripsThroughReopen) {
  StoreState want;
  want.tenants = {{"research", R"({"budget":100})", 11}, {"prod", "{}", 12}};
  want.queues = {{"research-train", "research", "", R"({"guaranteed":{"gpu":8000}})"},
                 {"research-train-small", "research", "research-train", "{}"}};
  want.users = {{"alice", "research", "admin", 13}, {"Zed", "prod", "viewer", 14}};
  want.tokens = {
      {"tok-1", HexHash(1), "alice", "research", "admin", "api", 14, 0, false},
      {"tok-2", HexHash(2), "alice", "research", "viewer", "session", 15, 99, true},
      {"tok-3", HexHash(3), "admin", "", "node", "node", 16, 0, false, "gpu-07"},
      {"tok-4", HexHash(4), "alice", "research", "viewer", "user", 17, 0, false, "", "read-only"}};
  want.priority_classes = {{"high", R"({"value":1000})"}};
  want.gpu_models = {{"A100-80G", R"({"memory_mib":81920})"}};
  want.nodes = {{"node-1", R"({"gpus":8})", "ready", 16}};
  want.jobs = {MakeJob(1), MakeJob(2)};
  want.jobs[1].status_json = "quote ' and unicode \u00e9 and \n newline and \\ backslash";
  want.kv = {{"binary", std::string("a\0b\xff", 4)}, {"cursor", "42"}};
  want.services = {{"chat", "research", R"({"revisions":[]})", R"({"1":{"K":"v"}})", 20}};
  want.webhooks = {{"wh-1", "research", "alice", R"({"url":"http://x"})", "secret", 21}};
  want.pending_deliveries = {{"d-1", "wh-1", "pending", 22, 23, "{}"}};
  want.max_job_id = 2;
  want.max_event_seq = 2;

  const std::vector<JobEventRecord> events = {
      {1, 1, 100, "", "pending", "submitted", "{}"},
      {2, 1, 200, "pending", "running", "admitted", R"({"node":"node-1"})"}};
  const UsageRecord usage{0,       1,          0,          "research", "research-train",
                          "alice", "training", "A100-80G", 8000,       81920,
                          1000,    5000,       123456};
  const AuditRecord audit{0,    300,          "alice", "job.submit", "job/1",
                          "ok", R"({"q":1})", "tok-1", "10.0.0.1",   "research"};
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    WriteBatch b;
    for (const auto& r : want.tenants) b.PutTenant(r);
    for (const auto& r : want.queues) b.PutQueue(r);
    for (const auto& r : want.users) b.PutUser(r);
    for (const auto& r : want.tokens) b.PutToken(r);
    for (const auto& r : want.priority_classes) b.PutPriorityClass(r);
    for (const auto& r : want.gpu_models) b.PutGpuModel(r);
    for (const auto& r : want.nodes) b.PutNode(r);
    for (const auto& r : want.jobs) b.PutJob(r);
    for (const auto& r : want.kv) b.PutKv(r);
    for (const auto& r : want.services) b.PutService(r);
    for (const auto& r : want.webhooks) b.PutWebhook(r);
    for (const auto& r : want.pending_deliveries) b.PutWebhookDelivery(r);
    b.PutWebhookDelivery({"d-0", "wh-1", "delivered", 1, 2, "{}"});  // finished: not loaded
    for (const auto& r : events) b.AppendJobEvent(r);
    b.AppendUsage(usage);
    b.AppendAudit(audit);
    Status st = store->Write(std::move(b));
    ASSERT_TRUE(st.ok()) << st.ToString();
    store->Close();
  }
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  Result<StoreState> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  // Each table comes back sorted by its key, in byte order ("Zed" before "alice").
  std::swap(want.tenants[0], want.tenants[1]);
  std::swap(want.users[0], want.users[1]);
  EXPECT_EQ(got->tenants, want.tenants);
  EXPECT_EQ(got->queues, want.queues);
  EXPECT_EQ(got->users, want.users);
  EXPECT_EQ(got->tokens, want.tokens);
  EXPECT_EQ(got->priority_classes, want.priority_classes);
  EXPECT_EQ(got->gpu_models, want.gpu_models);
  EXPECT_EQ(got->nodes, want.nodes);
  EXPECT_EQ(got->jobs, want.jobs);
  EXPECT_EQ(got->kv, want.kv);
  EXPECT_EQ(got->services, want.services);
  EXPECT_EQ(got->webhooks, want.webhooks);
  EXPECT_EQ(got->pending_deliveries, want.pending_deliveries);
  EXPECT_EQ(got->max_job_id, 2u);
  EXPECT_EQ(got->max_event_seq, 2u);

  auto job_events = store->JobEvents(1);
  ASSERT_TRUE(job_events.ok());
  EXPECT_EQ(*job_events, events);
  auto got_usage = store->Usage(0, 10'000);
  ASSERT_TRUE(got_usage.ok());
  ASSERT_EQ(got_usage->size(), 1u);
  UsageRecord want_usage = usage;
  want_usage.seq = 1;  // assigned by the store
  EXPECT_EQ(got_usage->front(), want_usage);
  auto got_audit = store->Audit(0, 10);
  ASSERT_TRUE(got_audit.ok());
  ASSERT_EQ(got_audit->size(), 1u);
  AuditRecord want_audit = audit;
  want_audit.seq = 1;
  EXPECT_EQ(got_audit->front(), want_audit);
  auto deliveries = store->WebhookDeliveries("wh-1", 10);
  ASSERT_TRUE(deliveries.ok());
  ASSERT_EQ(deliveries->size(), 2u);
  EXPECT_EQ((*deliveries)[0].id, "d-1");  // newest first
}

TEST_F(PostgresStoreTest, PutReplacesDeleteRemovesAndJobIdsAreNeverReused) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.PutTenant({"t", "{}", 1});
  b.PutTenant({"t", R"({"v":2})", 2});
  b.PutJob(MakeJob(7));
  b.PutKv({"k", "1"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  WriteBatch d;
  d.DeleteJob(7);
  d.DeleteKv("k");
  d.DeleteKv("never-there");
  ASSERT_TRUE(store->Write(std::move(d)).ok());
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->tenants.size(), 1u);
  EXPECT_EQ(state->tenants[0].spec_json, R"({"v":2})");
  EXPECT_TRUE(state->jobs.empty());
  EXPECT_TRUE(state->kv.empty());
  EXPECT_EQ(state->max_job_id, 7u);
}

TEST_F(PostgresStoreTest, HistoryQueriesAndAppendOnlyTables) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    b.AppendJobEvent({seq, seq % 2 + 1, static_cast<int64_t>(seq), "a", "b", "r", "{}"});
  }
  const std::vector<std::pair<int64_t, int64_t>> spans = {{0, 10}, {10, 20}, {20, 30}, {5, 25}};
  for (auto [start, end] : spans) {
    UsageRecord u;
    u.job_id = 1;
    u.start_ms = start;
    u.end_ms = end;
    b.AppendUsage(u);
  }
  for (int i = 0; i < 5; ++i) b.AppendAudit({0, i, "alice", "a", "t", "ok", "{}"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());

  auto of_job_2 = store->JobEvents(2);
  ASSERT_TRUE(of_job_2.ok());
  std::vector<uint64_t> seqs;
  for (const auto& e : *of_job_2) seqs.push_back(e.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{1, 3, 5, 7, 9}));
  auto since = store->EventsSince(4, 3);
  ASSERT_TRUE(since.ok());
  seqs.clear();
  for (const auto& e : *since) seqs.push_back(e.seq);
  EXPECT_EQ(seqs, (std::vector<uint64_t>{5, 6, 7}));
  auto usage = store->Usage(10, 20);
  ASSERT_TRUE(usage.ok());
  std::vector<int64_t> starts;
  for (const auto& u : *usage) starts.push_back(u.start_ms);
  EXPECT_EQ(starts, (std::vector<int64_t>{10, 5}));
  auto audit = store->Audit(2, 100);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 3u);
  EXPECT_EQ(audit->front().seq, 3u);
  EXPECT_EQ(audit->back().seq, 5u);
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->max_event_seq, 10u);

  // A store-assigned seq follows the highest one.
  WriteBatch next;
  next.AppendJobEvent({0, 1, 11, "b", "c", "r", "{}"});
  ASSERT_TRUE(store->Write(std::move(next)).ok());
  EXPECT_EQ(store->Load()->max_event_seq, 11u);

  // Events and usage records may be deleted (by the retention, PruneHistory), never changed.
  for (const char* sql : {"UPDATE job_events SET reason = 'x'", "UPDATE usage SET end_ms = 1",
                          "UPDATE audit SET actor = 'x'"}) {
    EXPECT_NE(Sql(sql).find("append-only"), std::string::npos) << sql;
  }
}

TEST_F(PostgresStoreTest, AuditQueriesFilterByTimeActorObjectActionAndTenant) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.AppendAudit({0, 1000, "alice", "job.submit", "job/12", "ok", "{}", "", "10.0.0.1", "research"});
  b.AppendAudit({0, 2000, "alice", "job.cancel", "job/12", "ok", "{}", "", "10.0.0.1", "research"});
  b.AppendAudit({0, 3000, "bob", "job.submit", "job/123", "ok", "{}", "", "10.0.0.2", "prod"});
  b.AppendAudit({0, 4000, "admin", "config.apply", "config", "ok", "{}", "", "::1", ""});
  b.AppendAudit({0, 5000, "bob", "job.cancel", "job/123", "ok", "{}", "", "10.0.0.2", "prod"});
  b.AppendAudit(
      {0, 6000, "admin", "token.create", "user/alice", "ok", "{}", "", "::1", "research"});
  b.AppendAudit({0, 7000, "alice", "job.hold", "job/12", "ok", "{}", "", "10.0.0.1", "research"});
  b.AppendAudit({0, 8000, "carol", "array.submit", "array/5", "ok", "{}", "", "10.0.0.3", "prod"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());

  auto seqs = [&](const AuditQuery& q) {
    auto r = store->QueryAudit(q);
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    std::vector<uint64_t> out;
    if (r.ok()) {
      for (const AuditRecord& a : *r) out.push_back(a.seq);
    }
    return out;
  };
  using V = std::vector<uint64_t>;
  EXPECT_EQ(seqs({}), (V{1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(seqs({.after_seq = 6}), (V{7, 8}));
  EXPECT_EQ(seqs({.limit = 3}), (V{1, 2, 3}));
  EXPECT_EQ(seqs({.since_ms = 3000, .until_ms = 6000}), (V{3, 4, 5}));
  EXPECT_EQ(seqs({.actor = "alice"}), (V{1, 2, 7}));
  EXPECT_EQ(seqs({.action = "job.cancel"}), (V{2, 5}));
  EXPECT_EQ(seqs({.object = "job/12"}), (V{1, 2, 7}));
  EXPECT_EQ(seqs({.object = "job/"}), (V{1, 2, 3, 5, 7}));
  EXPECT_EQ(seqs({.object = "job"}), (V{1, 2, 3, 5, 7}));
  EXPECT_EQ(seqs({.object = "config"}), (V{4}));
  EXPECT_EQ(seqs({.tenant = "prod"}), (V{3, 5, 8}));
  EXPECT_EQ(seqs({.tenant = ""}), (V{4}));
  EXPECT_EQ(seqs({.after_seq = 1, .limit = 1, .actor = "alice", .object = "job/12"}), (V{2}));
  EXPECT_EQ(seqs({.after_seq = 2,
                  .since_ms = 1,
                  .actor = "alice",
                  .action = "job.hold",
                  .object = "job/12",
                  .tenant = "research"}),
            (V{7}));
  EXPECT_EQ(seqs({.actor = "alice' OR '1'='1"}), V{});
}

TEST_F(PostgresStoreTest, RefusesATokenThatIsNotAHashAndADuplicateIdempotencyKey) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.PutToken({"tok", "plain-token-NOT-a-hash-0123456789", "u", "t", "admin", "api", 1, 0, false});
  Status st = store->Write(std::move(b));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("PutToken(id=tok)"), std::string::npos) << st.message();

  ASSERT_TRUE(store->Write(JobBatch(1)).ok());
  JobRecord other_user = MakeJob(2);
  other_user.idempotency_key = MakeJob(1).idempotency_key;  // another tenant and user: allowed
  WriteBatch ok;
  ok.PutJob(other_user);
  EXPECT_TRUE(store->Write(std::move(ok)).ok());
  JobRecord dup = MakeJob(8);
  dup.tenant = MakeJob(1).tenant;
  dup.user = MakeJob(1).user;
  dup.idempotency_key = MakeJob(1).idempotency_key;
  WriteBatch refused;
  refused.PutJob(dup);
  EXPECT_EQ(store->Write(std::move(refused)).code(), StatusCode::kInternal);
}

TEST_F(PostgresStoreTest, ConcurrentBatchesCommitInOrderAndInGroups) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  // Batches that each overwrite one key: the last enqueued must win, as enqueued.
  std::vector<std::shared_future<Status>> futures;
  for (int i = 0; i < 500; ++i) {
    WriteBatch b;
    b.PutKv({"order", std::to_string(i)});
    b.PutJob(MakeJob(static_cast<uint64_t>(i) + 1));
    futures.push_back(store->WriteAsync(std::move(b)));
  }
  for (auto& f : futures) EXPECT_TRUE(f.get().ok());
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->kv.size(), 1u);
  EXPECT_EQ(state->kv[0].value, "499");
  EXPECT_EQ(state->jobs.size(), 500u);
  const StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, 500u);
  EXPECT_LT(stats.commits, 500u) << "batches queued together commit together";
  EXPECT_GT(stats.max_group, 1u);
}

TEST_F(PostgresStoreTest, AFailingBatchFailsAloneInsideItsGroup) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  // Another connection holds the jobs table, so the writer blocks inside its first group while
  // the next batches queue up behind it: they then commit as one group.
  PGconn* gate = PQconnectdb(uri_.c_str());
  PQclear(PQexec(gate, "BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE"));
  auto first = store->WriteAsync(JobBatch(1));
  while (store->stats().queued != 0) std::this_thread::yield();  // the writer took it

  WriteBatch duplicate_key;
  duplicate_key.PutTenant({"only-in-the-failed-batch", "{}", 0});
  JobRecord dup = MakeJob(3);
  dup.tenant = MakeJob(2).tenant;
  dup.user = MakeJob(2).user;
  dup.idempotency_key = MakeJob(2).idempotency_key;
  duplicate_key.PutJob(dup);
  WriteBatch bad_id;
  bad_id.PutJob(MakeJob(0));

  std::vector<std::shared_future<Status>> group;
  group.push_back(store->WriteAsync(JobBatch(2)));
  group.push_back(store->WriteAsync(std::move(duplicate_key)));
  group.push_back(store->WriteAsync(JobBatch(4)));
  group.push_back(store->WriteAsync(std::move(bad_id)));
  group.push_back(store->WriteAsync(JobBatch(5)));
  PQclear(PQexec(gate, "COMMIT"));
  PQfinish(gate);

  EXPECT_TRUE(first.get().ok()) << first.get().ToString();
  EXPECT_TRUE(group[0].get().ok()) << group[0].get().ToString();
  EXPECT_EQ(group[1].get().code(), StatusCode::kInternal);
  EXPECT_NE(group[1].get().message().find("PutJob(id=3)"), std::string::npos)
      << group[1].get().message();
  EXPECT_NE(group[1].get().message().find("duplicate key"), std::string::npos)
      << group[1].get().message();
  EXPECT_TRUE(group[2].get().ok()) << group[2].get().ToString();
  EXPECT_EQ(group[3].get().code(), StatusCode::kInternal);
  EXPECT_NE(group[3].get().message().find("PutJob(id=0)"), std::string::npos)
      << group[3].get().message();
  EXPECT_TRUE(group[4].get().ok()) << group[4].get().ToString();

  StoreStats stats = store->stats();
  EXPECT_EQ(stats.commits, 2u);
  EXPECT_EQ(stats.max_group, 5u);
  EXPECT_EQ(stats.failed_batches, 2u);
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  std::vector<uint64_t> ids;
  for (const auto& j : state->jobs) ids.push_back(j.id);
  EXPECT_EQ(ids, (std::vector<uint64_t>{1, 2, 4, 5}));
  EXPECT_TRUE(state->tenants.empty()) << "the failed batch's first op must be undone too";
}

// ---- Multi-row statements: a group's job puts and appends become one statement per table. ----

// The ids of the jobs in `state`, without the gate's.
std::vector<uint64_t> JobIds(const StoreState& state) {
  std::vector<uint64_t> ids;
  for (const auto& j : state.jobs) {
    if (j.id != 1000) ids.push_back(j.id);
  }
  return ids;
}

TEST_F(PostgresStoreTest, AJobPutTwiceInOneGroupKeepsTheLastPut) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  std::vector<WriteBatch> batches(6);
  JobRecord v1 = MakeJob(1);
  JobRecord v2 = v1;
  v2.state = "running";
  v2.status_json = R"({"attempts":1})";
  JobRecord v3 = v2;
  v3.state = "succeeded";
  batches[0].PutJob(v1);
  batches[1].PutJob(MakeJob(2));
  batches[2].PutJob(v2);
  batches[3].PutJob(MakeJob(3));
  batches[4].PutJob(v3);
  // Twice in one batch, too.
  JobRecord four = MakeJob(4);
  batches[5].PutJob(four);
  four.state = "queued";
  batches[5].PutJob(four);
  auto futures = WriteAsOneGroup(*store, std::move(batches));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok()) << f.get().ToString();
  EXPECT_EQ(store->stats().max_group, 6u) << "the batches committed as one group";

  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(JobIds(*state), (std::vector<uint64_t>{1, 2, 3, 4}));
  EXPECT_EQ(state->jobs[0], v3);
  EXPECT_EQ(state->jobs[3], four);
  EXPECT_EQ(Writers("jobs", "id <> 1000"), "1") << "one transaction, without savepoints";
}

TEST_F(PostgresStoreTest, PutsAndDeletesOfOneJobInOneGroupKeepTheirOrder) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write(JobBatch(9)).ok());
  JobRecord again = MakeJob(5);
  again.name = "put again";
  std::vector<WriteBatch> batches(7);
  batches[0].PutJob(MakeJob(5));
  batches[1].PutJob(MakeJob(6));
  batches[2].DeleteJob(5);
  batches[3].PutJob(MakeJob(7));
  batches[4].PutJob(again);  // put, delete, put: present, as put last
  batches[5].PutJob(MakeJob(8));
  batches[5].DeleteJob(6);  // put, then deleted: absent
  batches[6].DeleteJob(9);  // deleted, then put in the same batch: present
  batches[6].PutJob(MakeJob(9));
  batches[6].PutJob(MakeJob(10));
  batches[6].DeleteJob(10);
  auto futures = WriteAsOneGroup(*store, std::move(batches));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok()) << f.get().ToString();
  EXPECT_EQ(store->stats().max_group, 7u);

  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(JobIds(*state), (std::vector<uint64_t>{5, 7, 8, 9}));
  EXPECT_EQ(state->jobs[0], again);
  EXPECT_EQ(state->max_job_id, 1000u);
  EXPECT_EQ(Writers("jobs", "id <> 1000"), "1") << "one transaction, without savepoints";
}

TEST_F(PostgresStoreTest, AppendsOfOneGroupTakeSeqsInOpOrder) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  std::vector<WriteBatch> batches(4);
  batches[0].AppendJobEvent({0, 1, 10, "", "pending", "a", "{}"});
  batches[0].AppendJobEvent({0, 2, 11, "", "pending", "b", "{}"});
  batches[1].AppendJobEvent({0, 1, 12, "pending", "running", "c", "{}"});
  batches[2].AppendJobEvent({100, 2, 13, "pending", "running", "d", "{}"});  // its own seq
  batches[3].AppendJobEvent({0, 1, 14, "running", "succeeded", "e", "{}"});
  batches[3].AppendJobEvent({0, 2, 15, "running", "failed", "f", "{}"});
  auto futures = WriteAsOneGroup(*store, std::move(batches));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok()) << f.get().ToString();

  auto events = store->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  std::vector<std::pair<uint64_t, std::string>> got;
  for (const auto& e : *events) got.emplace_back(e.seq, e.reason);
  EXPECT_EQ(got, (std::vector<std::pair<uint64_t, std::string>>{
                     {1, "a"}, {2, "b"}, {3, "c"}, {100, "d"}, {101, "e"}, {102, "f"}}));
  EXPECT_EQ(Writers("job_events"), "1");
}

TEST_F(PostgresStoreTest, OddTextValuesRoundTripThroughAGroup) {
  const std::vector<std::string> odd = {
      "",
      "NULL",
      "null",
      R"("quoted")",
      "it's",
      R"(back\slash)",
      R"(\N)",
      R"(\\)",
      "a,b",
      "{braces}",
      "{}",
      R"({"a":[1,2],"b":"c,d"})",
      "{\"x\"}",
      "(paren)",
      "  spaced  ",
      "tab\tnew\nline\r",
      "unicode \u00e9 \u65e5\u672c \U0001F680",
      std::string(5000, 'x'),
  };
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  std::vector<WriteBatch> batches;
  std::vector<JobRecord> jobs;
  std::vector<JobEventRecord> events;
  std::vector<AuditRecord> audits;
  std::vector<UsageRecord> usages;
  for (size_t i = 0; i < odd.size(); ++i) {
    const std::string& v = odd[i];
    const std::string& w = odd[(i + 1) % odd.size()];
    JobRecord j = MakeJob(i + 1);
    j.name = v;
    j.type = w;
    j.state = v;
    j.spec_json = v;
    j.status_json = w;
    j.secret_env_json = v;
    j.request_digest = w;
    jobs.push_back(j);
    events.push_back({i + 1, i + 1, static_cast<int64_t>(i), v, w, v, w});
    audits.push_back({i + 1, static_cast<int64_t>(i), v, w, v, w, v, w, v, w});
    UsageRecord u{i + 1, i + 1, static_cast<int32_t>(i), v, w, v, w, v};
    u.gpu_milli = -1;
    u.gpu_memory_mib = std::numeric_limits<int64_t>::max();
    u.start_ms = std::numeric_limits<int64_t>::min() + 1;
    u.end_ms = static_cast<int64_t>(i);
    u.cost_micro = -static_cast<int64_t>(i);
    usages.push_back(u);
    WriteBatch b;
    b.PutJob(j);
    JobEventRecord e = events.back();
    e.seq = 0;
    b.AppendJobEvent(e);
    AuditRecord a = audits.back();
    a.seq = 0;
    b.AppendAudit(a);
    u.seq = 0;
    b.AppendUsage(u);
    batches.push_back(std::move(b));
  }
  auto futures = WriteAsOneGroup(*store, std::move(batches));
  for (auto& f : futures) EXPECT_TRUE(f.get().ok()) << f.get().ToString();
  EXPECT_EQ(store->stats().max_group, odd.size());

  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  state->jobs.pop_back();  // the gate's
  EXPECT_EQ(state->jobs, jobs);
  auto got_events = store->EventsSince(0, 1000);
  ASSERT_TRUE(got_events.ok());
  EXPECT_EQ(*got_events, events);
  auto got_audits = store->Audit(0, 1000);
  ASSERT_TRUE(got_audits.ok());
  EXPECT_EQ(*got_audits, audits);
  auto got_usages =
      store->Usage(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max());
  ASSERT_TRUE(got_usages.ok());
  EXPECT_EQ(*got_usages, usages);
  // Written by the multi-row statements (write_plan_test.cc), not redone op by op.
  for (const char* table : {"jobs", "job_events", "audit", "usage"}) {
    EXPECT_EQ(Writers(table, table == std::string("jobs") ? "id <> 1000" : "true"), "1") << table;
  }
}

TEST_F(PostgresStoreTest, AFailingBatchOfAGatheredGroupFailsAlone) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  // Each batch: a job, its event and an audit record, as a submission writes them.
  auto submission = [](const JobRecord& j) {
    WriteBatch b;
    b.PutJob(j);
    b.AppendJobEvent({0, j.id, 1, "", "pending", "submitted", "{}"});
    b.AppendAudit({0, 1, "alice", "job.submit", fmt::format("job/{}", j.id), "ok", "{}"});
    return b;
  };
  std::vector<WriteBatch> batches;
  batches.push_back(submission(MakeJob(11)));
  JobRecord dup = MakeJob(12);  // the idempotency key of job 11
  dup.tenant = MakeJob(11).tenant;
  dup.user = MakeJob(11).user;
  dup.idempotency_key = MakeJob(11).idempotency_key;
  batches.push_back(submission(dup));
  batches.push_back(submission(MakeJob(13)));
  WriteBatch bad_usage = submission(MakeJob(14));
  UsageRecord u;
  u.job_id = 14;
  u.start_ms = 10;
  u.end_ms = 5;  // ends before it starts
  bad_usage.AppendUsage(u);
  batches.push_back(std::move(bad_usage));
  batches.push_back(submission(MakeJob(15)));
  auto futures = WriteAsOneGroup(*store, std::move(batches));

  EXPECT_TRUE(futures[0].get().ok()) << futures[0].get().ToString();
  EXPECT_TRUE(futures[1].get().ok()) << futures[1].get().ToString();
  EXPECT_EQ(futures[2].get().code(), StatusCode::kInternal);
  EXPECT_NE(futures[2].get().message().find("PutJob(id=12)"), std::string::npos)
      << futures[2].get().message();
  EXPECT_NE(futures[2].get().message().find("duplicate key"), std::string::npos)
      << futures[2].get().message();
  EXPECT_TRUE(futures[3].get().ok()) << futures[3].get().ToString();
  EXPECT_EQ(futures[4].get().code(), StatusCode::kInternal);
  EXPECT_NE(futures[4].get().message().find("AppendUsage(job_id=14"), std::string::npos)
      << futures[4].get().message();
  EXPECT_TRUE(futures[5].get().ok()) << futures[5].get().ToString();
  const StoreStats stats = store->stats();
  EXPECT_EQ(stats.commits, 2u);
  EXPECT_EQ(stats.max_group, 5u);
  EXPECT_EQ(stats.failed_batches, 2u);

  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(JobIds(*state), (std::vector<uint64_t>{11, 13, 15}));
  EXPECT_EQ(Writers("jobs", "id <> 1000"), "3") << "redone with a savepoint per batch";
  auto events = store->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  std::vector<std::pair<uint64_t, uint64_t>> seq_job;
  for (const auto& e : *events) seq_job.emplace_back(e.seq, e.job_id);
  EXPECT_EQ(seq_job, (std::vector<std::pair<uint64_t, uint64_t>>{{1, 11}, {2, 13}, {3, 15}}));
  auto audits = store->Audit(0, 100);
  ASSERT_TRUE(audits.ok());
  std::vector<std::string> targets;
  for (const auto& a : *audits) targets.push_back(a.target);
  EXPECT_EQ(targets, (std::vector<std::string>{"job/11", "job/13", "job/15"}));
  auto usage = store->Usage(0, 100);
  ASSERT_TRUE(usage.ok());
  EXPECT_TRUE(usage->empty());
}

TEST_F(PostgresStoreTest, ABatchAloneWhoseGatheredStatementFailsNamesItsOp) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.PutJob(MakeJob(21));
  JobRecord dup = MakeJob(22);  // the idempotency key of job 21, in the same statement
  dup.tenant = MakeJob(21).tenant;
  dup.user = MakeJob(21).user;
  dup.idempotency_key = MakeJob(21).idempotency_key;
  b.PutJob(dup);
  b.AppendJobEvent({0, 21, 1, "", "pending", "submitted", "{}"});
  b.AppendJobEvent({0, 22, 1, "", "pending", "submitted", "{}"});
  Status st = store->Write(std::move(b));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("PutJob(id=22)"), std::string::npos) << st.message();
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_TRUE(state->jobs.empty());
  auto events = store->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
  EXPECT_TRUE(store->Write(JobBatch(23)).ok()) << "the writer goes on";
}

TEST_F(PostgresStoreTest, AFencedGatheredGroupCommitsNothing) {
  auto a = MustOpen();
  auto b = MustOpen();
  ASSERT_TRUE(a && b);
  ASSERT_TRUE(a->AcquireLease("a", "http://a", 0, 600'000).ok());
  a->SetFence(1);
  ASSERT_TRUE(a->Write(JobBatch(1)).ok());
  ASSERT_TRUE(a->ReleaseLease("a", 1).ok());
  ASSERT_EQ(b->AcquireLease("b", "http://b", 0, 600'000)->term, 2u);

  std::vector<WriteBatch> batches;
  for (uint64_t id = 2; id <= 6; ++id) {
    WriteBatch w = JobBatch(id);
    w.AppendJobEvent({0, id, 1, "", "pending", "submitted", "{}"});
    batches.push_back(std::move(w));
  }
  // The gate holds the lease's row: the fence check of a's first group waits for it.
  auto futures = WriteAsOneGroup(*a, std::move(batches), "leader_lease");
  for (auto& f : futures) {
    Status st = f.get();
    EXPECT_TRUE(IsFenced(st)) << st.ToString();
  }
  auto state = b->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(JobIds(*state), (std::vector<uint64_t>{1}));
  auto events = b->EventsSince(0, 100);
  ASSERT_TRUE(events.ok());
  EXPECT_TRUE(events->empty());
}

TEST_F(PostgresStoreTest, EmptyBatchIsABarrierAndCloseFlushesThenRefuses) {
  std::vector<std::shared_future<Status>> futures;
  {
    auto store = MustOpen();
    ASSERT_NE(store, nullptr);
    auto job = store->WriteAsync(JobBatch(1000));
    EXPECT_TRUE(store->Write(WriteBatch()).ok());
    EXPECT_EQ(job.wait_for(std::chrono::seconds(0)), std::future_status::ready);
    for (uint64_t id = 1; id <= 100; ++id) futures.push_back(store->WriteAsync(JobBatch(id)));
    store->Close();
    for (auto& f : futures) EXPECT_TRUE(f.get().ok());
    EXPECT_EQ(store->Write(JobBatch(101)).code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->Load().status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->ReadLease().status().code(), StatusCode::kFailedPrecondition);
    store->Close();
  }
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Load()->jobs.size(), 101u);
}

TEST_F(PostgresStoreTest, SamplesAreReadByWindowAndCompacted) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  constexpr int64_t kHour = GpuSampleRecord::kHourMs;
  WriteBatch b;
  b.PutClusterSample({1000, 60'000, R"({"a":1})"});
  b.PutClusterSample({1000, 60'000, R"({"a":2})"});  // same instant: replaces
  b.PutClusterSample({2 * kHour, 60'000, "{}"});
  // Raw samples of one GPU in hour 0 (two) and hour 1 (one).
  b.PutGpuSample({60'000, "n1", 0, 0, 60'000, 30'000, 100, 6'000'000});
  b.PutGpuSample({60'000, "n1", 0, 60'000, 60'000, 60'000, 300, 18'000'000});
  b.PutGpuSample({60'000, "n1", 0, kHour, 60'000, 0, 50, 3'000'000});
  b.PutServingStat({0, "chat", 1, R"({"requests":3})"});
  b.PutServingStat({0, "chat", 1, R"({"requests":4})"});  // replaces
  b.PutServingStat({5 * kHour, "chat", 2, "{}"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());

  auto cluster = store->ClusterSamples(0, kHour);
  ASSERT_TRUE(cluster.ok());
  ASSERT_EQ(cluster->size(), 1u);
  EXPECT_EQ((*cluster)[0].data_json, R"({"a":2})");
  auto serving = store->ServingStats(0, kHour);
  ASSERT_TRUE(serving.ok());
  ASSERT_EQ(serving->size(), 1u);
  EXPECT_EQ((*serving)[0].data_json, R"({"requests":4})");

  // Roll up everything before hour 1, twice: the second run changes nothing.
  for (int i = 0; i < 2; ++i) {
    WriteBatch c;
    c.CompactSamples({.gpu_rollup_before_ms = kHour,
                      .gpu_hourly_before_ms = 0,
                      .cluster_before_ms = 2 * kHour,
                      .serving_before_ms = kHour});
    ASSERT_TRUE(store->Write(std::move(c)).ok());
  }
  auto gpu = store->GpuSamples(0, 2 * kHour);
  ASSERT_TRUE(gpu.ok());
  ASSERT_EQ(gpu->size(), 2u);
  const GpuSampleRecord hourly{kHour, "n1", 0, 0, 120'000, 90'000, 300, 24'000'000};
  EXPECT_EQ((*gpu)[0], hourly);
  EXPECT_EQ((*gpu)[1].resolution_ms, 60'000);
  EXPECT_EQ(store->ClusterSamples(0, 3 * kHour)->size(), 1u);
  EXPECT_TRUE(store->ServingStats(0, kHour)->empty());
  EXPECT_EQ(store->ServingStats(0, 6 * kHour)->size(), 1u);
}

TEST_F(PostgresStoreTest, WebhooksDeliveriesArePrunedAndDeletedWithTheirHook) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  WriteBatch b;
  b.PutWebhook({"wh", "", "admin", "{}", "k", 1});
  b.PutWebhookDelivery({"d1", "wh", "delivered", 1, 10, "{}"});
  b.PutWebhookDelivery({"d2", "wh", "failed", 2, 20, "{}"});
  b.PutWebhookDelivery({"d3", "wh", "pending", 3, 5, "{}"});
  ASSERT_TRUE(store->Write(std::move(b)).ok());
  WriteBatch prune;
  prune.PruneWebhookDeliveries({.finished_before_ms = 15});
  ASSERT_TRUE(store->Write(std::move(prune)).ok());
  auto left = store->WebhookDeliveries("wh", 10);
  ASSERT_TRUE(left.ok());
  std::vector<std::string> ids;
  for (const auto& d : *left) ids.push_back(d.id);
  EXPECT_EQ(ids, (std::vector<std::string>{"d3", "d2"}));
  WriteBatch bad;
  bad.PutWebhookDelivery({"d4", "wh", "lost", 4, 4, "{}"});
  EXPECT_EQ(store->Write(std::move(bad)).code(), StatusCode::kInternal);
  WriteBatch del;
  del.DeleteWebhook("wh");
  ASSERT_TRUE(store->Write(std::move(del)).ok());
  EXPECT_TRUE(store->WebhookDeliveries("wh", 10)->empty());
  EXPECT_TRUE(store->Load()->webhooks.empty());
}

TEST_F(PostgresStoreTest, SchemaVersionsAreRecordedAndANewerOneIsRefused) {
  ASSERT_NE(MustOpen(), nullptr);
  ASSERT_NE(MustOpen(), nullptr);  // reopening applies nothing
  ASSERT_EQ(Sql("SELECT count(*) || '/' || max(version) FROM schema_version"), "");
  EXPECT_EQ(last_value_, fmt::format("{0}/{0}", postgres::LatestSchemaVersion()));
  EXPECT_EQ(postgres::LatestSchemaVersion(), 12);
  ASSERT_EQ(Sql("INSERT INTO schema_version VALUES (99, '0099_future.sql', 0)"), "");
  auto refused = OpenPostgresStore(uri_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("newer"), std::string::npos);
}

TEST_F(PostgresStoreTest, ServersOpeningANewDatabaseAtOnceMigrateItOnce) {
  std::vector<std::thread> threads;
  std::atomic<int> opened{0};
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      if (OpenPostgresStore(uri_).ok()) ++opened;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(opened.load(), 4);
  ASSERT_EQ(Sql("SELECT count(*) FROM schema_version"), "");
  EXPECT_EQ(last_value_, std::to_string(postgres::LatestSchemaVersion()));
}

TEST_F(PostgresStoreTest, ALostConnectionFailsOneCallAndIsMadeAgain) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Write(JobBatch(1)).ok());
  ASSERT_TRUE(store->Load().ok());
  // Only this test's own connections: the cluster is shared by every test of the run.
  ASSERT_EQ(Sql("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE application_name = 'arbiter' AND datname = current_database() "
                "AND pid <> pg_backend_pid()"),
            "");
  // The first call after the loss may fail with kUnavailable; the next one reconnects.
  Status first = store->Write(JobBatch(2));
  if (!first.ok()) {
    EXPECT_EQ(first.code(), StatusCode::kUnavailable) << first.ToString();
    ASSERT_TRUE(store->Write(JobBatch(2)).ok());
  }
  auto load = store->Load();
  if (!load.ok()) {
    EXPECT_EQ(load.status().code(), StatusCode::kUnavailable) << load.status().ToString();
    load = store->Load();
  }
  ASSERT_TRUE(load.ok()) << load.status().ToString();
  EXPECT_EQ(load->jobs.size(), 2u);
  auto lease = store->ReadLease();
  if (!lease.ok()) lease = store->ReadLease();
  EXPECT_TRUE(lease.ok()) << lease.status().ToString();
}

TEST_F(PostgresStoreTest, ConnectionErrorsAreUnavailableAndHideThePassword) {
  auto store =
      OpenPostgresStore("postgres://arbiter:hunter2@127.0.0.1:1/nowhere?connect_timeout=2");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(store.status().message().find("hunter2"), std::string::npos)
      << store.status().message();
}

TEST_F(PostgresStoreTest, UsageRollupsEqualTheRecordsForEveryPeriodOfWholeHours) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  checks::UsageRollupsEqualTheRecords(*store);
}

TEST_F(PostgresStoreTest, JobFactsAreReadByPeriodAndPruneHistoryKeepsTheAggregates) {
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  checks::JobFactsAndPruneHistory(*store);
}

// A database of schema 9 with history: migration 10 builds the rollups and facts from it.
TEST_F(PostgresStoreTest, MigrationTenBackfillsTheAggregatesFromTheHistory) {
  ASSERT_EQ(Sql("CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT "
                "NULL, applied_at_ms BIGINT NOT NULL)"),
            "");
  for (const postgres::Migration& m : postgres::Migrations()) {
    if (m.version >= 10) break;
    ASSERT_EQ(Sql(std::string(m.sql)), "") << m.name;
    ASSERT_EQ(
        Sql(fmt::format("INSERT INTO schema_version VALUES ({}, '{}', 0)", m.version, m.name)), "");
  }
  const std::vector<UsageRecord> records = checks::RandomUsage(5, 80);
  uint64_t seq = 0;
  for (const UsageRecord& u : records) {
    ASSERT_EQ(
        Sql(fmt::format(
            "INSERT INTO usage VALUES ({}, {}, 0, '{}', '{}', '{}', '{}', '{}', {}, 0, {}, {}, "
            "{})",
            ++seq, u.job_id, u.tenant, u.queue, u.user, u.job_type, u.gpu_model, u.gpu_milli,
            u.start_ms, u.end_ms, u.cost_micro)),
        "");
  }
  // Job 1000: submitted, admitted after 40 ms, running, preempted, requeued, admitted, failed.
  ASSERT_EQ(Sql("INSERT INTO jobs (id, tenant, queue, \"user\", name, type, state, spec_json, "
                "status_json, idempotency_key, submitted_at_ms, updated_at_ms) VALUES (1000, 't', "
                "'t-q', 'u', 'n', 'training', 'failed', '{}', '{\"gpu_model\":\"H100\"}', '', 0, "
                "0)"),
            "");
  ASSERT_EQ(Sql(fmt::format("INSERT INTO usage VALUES ({}, 1000, 0, 't', 't-q', 'u', 'training', "
                            "'H100', 2000, 0, 40, 90, 0)",
                            ++seq)),
            "");
  const char* events[][4] = {{"10", "", "pending", "submitted"},
                             {"50", "pending", "admitted", "admitted"},
                             {"60", "admitted", "running", "running"},
                             {"90", "running", "preempting", "preempted by job 2 (priority)"},
                             {"95", "preempting", "pending", "requeued"},
                             {"120", "pending", "admitted", "admitted"},
                             {"130", "admitted", "running", "running"},
                             {"200", "running", "failed", "a task exited with code 3"}};
  int event_seq = 0;
  for (const auto& e : events) {
    ASSERT_EQ(
        Sql(fmt::format("INSERT INTO job_events VALUES ({}, 1000, {}, '{}', '{}', '{}', '{{}}')",
                        ++event_seq, e[0], e[1], e[2], e[3])),
        "");
  }
  auto store = MustOpen();
  ASSERT_NE(store, nullptr);
  const int64_t a = checks::kT0 + 7 * kRollupHourMs, b = checks::kT0 + 3 * kRollupDayMs;
  auto got = store->UsageRollup(a, b, kAllAttributionColumns);
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  const auto want = checks::ExpectedRollup(records, a, b);
  ASSERT_EQ(got->size(), want.size());
  for (const UsageRollupRecord& r : *got) {
    auto w = want.find({r.tenant, r.queue, r.user, r.job_type, r.gpu_model});
    ASSERT_NE(w, want.end());
    EXPECT_EQ(r.gpu_milli_ms, w->second.first);
    EXPECT_NEAR(r.cost_micro, w->second.second, 1e-3);
  }
  auto facts = store->JobFacts(0, 1'000);
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  const std::vector<JobFactRecord> want_facts = {
      {1, 1000, 50, "admitted", "t", "t-q", "u", "training", "H100", 10, 0, ""},
      {4, 1000, 90, "preempted", "t", "t-q", "u", "training", "H100", 60, 2000 * 30,
       "preempted by job 2 (priority)"},
      {2, 1000, 120, "admitted", "t", "t-q", "u", "training", "H100", 95, 0, ""},
      {3, 1000, 200, "failed", "t", "t-q", "u", "training", "H100", 200, 0, "exit code 3"}};
  EXPECT_EQ(*facts, want_facts);
}

}  // namespace
}  // namespace arbiter::store
