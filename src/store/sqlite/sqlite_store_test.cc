#include "store/sqlite/sqlite_store.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>
#include <iostream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "store/job_history_checks.h"
#include "store/job_history_sql.h"
#include "store/report_aggregates_checks.h"
#include "store/sqlite/migrations.h"
#include "testing/temp_dir.h"

namespace arbiter::store {
namespace {

using arbiter::testing::TempDir;

std::unique_ptr<Store> MustOpen(const std::string& path, SqliteOptions options = {}) {
  auto store = OpenSqliteStore(path, options);
  EXPECT_TRUE(store.ok()) << store.status().ToString();
  return store.ok() ? std::move(store).value() : nullptr;
}

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
  return j;
}

WriteBatch JobBatch(uint64_t id) {
  WriteBatch b;
  b.PutJob(MakeJob(id));
  return b;
}

std::string HexHash(int n) { return fmt::format("{:064x}", n); }

TEST(SqliteStore, JobHistoryReadsFilterPageAndLoadAWindow) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  ASSERT_NE(store, nullptr);
  testing::CheckJobHistoryReads(*store);
}

TEST(SqliteStore, EveryRecordKindRoundTripsThroughReopen) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  StoreState want;
  want.tenants = {{"research", R"({"budget":100})", 11}, {"prod", "{}", 12}};
  want.queues = {{"research-train", "research", "", R"({"guaranteed":{"gpu":8000}})"},
                 {"research-train-small", "research", "research-train", "{}"}};
  want.users = {{"alice", "research", "admin", 13}};
  want.tokens = {
      {"tok-1", HexHash(1), "alice", "research", "admin", "api", 14, 0, false},
      {"tok-2", HexHash(2), "alice", "research", "viewer", "session", 15, 99, true},
      {"tok-3", HexHash(3), "admin", "", "node", "node", 16, 0, false, "gpu-07"},
      {"tok-4", HexHash(4), "alice", "research", "viewer", "user", 17, 0, false, "", "read-only"}};
  want.priority_classes = {{"high", R"({"value":1000})"}};
  want.gpu_models = {{"A100-80G", R"({"memory_mib":81920})"}};
  want.nodes = {{"node-1", R"({"gpus":8})", "ready", 16}};
  want.jobs = {MakeJob(1), MakeJob(2)};
  want.jobs[1].status_json = "quote ' and unicode \u00e9 and \n newline";
  want.kv = {{"binary", std::string("a\0b\xff", 4)}, {"cursor", "42"}};
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
    auto store = MustOpen(path);
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
    for (const auto& r : events) b.AppendJobEvent(r);
    b.AppendUsage(usage);
    b.AppendAudit(audit);
    ASSERT_TRUE(store->Write(std::move(b)).ok());
    store->Close();
  }
  auto store = MustOpen(path);
  Result<StoreState> got = store->Load();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  // Each table comes back sorted by its key.
  std::swap(want.tenants[0], want.tenants[1]);
  EXPECT_EQ(got->tenants, want.tenants);
  EXPECT_EQ(got->queues, want.queues);
  EXPECT_EQ(got->users, want.users);
  EXPECT_EQ(got->tokens, want.tokens);
  EXPECT_EQ(got->priority_classes, want.priority_classes);
  EXPECT_EQ(got->gpu_models, want.gpu_models);
  EXPECT_EQ(got->nodes, want.nodes);
  EXPECT_EQ(got->jobs, want.jobs);
  EXPECT_EQ(got->kv, want.kv);
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
}

TEST(SqliteStore, PutReplacesAndDeleteRemoves) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch put;
  put.PutTenant({"a", "{}", 1});
  put.PutTenant({"b", "{}", 1});
  put.PutQueue({"qa", "a", "", "{}"});
  put.PutUser({"ua", "a", "member", 1});
  put.PutToken({"ta", HexHash(7), "ua", "a", "member", "api", 1, 0, false});
  put.PutPriorityClass({"low", "{}"});
  put.PutGpuModel({"H100", "{}"});
  put.PutNode({"n1", "{}", "ready", 1});
  put.PutJob(MakeJob(4));
  put.PutJob(MakeJob(9));
  put.PutKv({"k", "v"});
  ASSERT_TRUE(store->Write(std::move(put)).ok());

  WriteBatch change;
  JobRecord running = MakeJob(4);
  running.state = "running";
  change.PutJob(running);  // replaces job 4 in place
  change.PutNode({"n1", "{}", "draining", 2});
  change.DeleteTenant("a");
  change.DeleteQueue("qa");
  change.DeleteUser("ua");
  change.DeleteToken("ta");
  change.DeletePriorityClass("low");
  change.DeleteGpuModel("H100");
  change.DeleteJob(9);
  change.DeleteKv("k");
  change.DeleteKv("never-there");  // not an error
  ASSERT_TRUE(store->Write(std::move(change)).ok());

  auto s = store->Load();
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  ASSERT_EQ(s->tenants.size(), 1u);
  EXPECT_EQ(s->tenants[0].name, "b");
  EXPECT_TRUE(s->queues.empty());
  EXPECT_TRUE(s->users.empty());
  EXPECT_TRUE(s->tokens.empty());
  EXPECT_TRUE(s->priority_classes.empty());
  EXPECT_TRUE(s->gpu_models.empty());
  EXPECT_TRUE(s->kv.empty());
  ASSERT_EQ(s->nodes.size(), 1u);
  EXPECT_EQ(s->nodes[0].state, "draining");
  ASSERT_EQ(s->jobs.size(), 1u);
  EXPECT_EQ(s->jobs[0], running);
  // Job 9 is gone, but its id is never handed out again.
  EXPECT_EQ(s->max_job_id, 9u);
}

TEST(SqliteStore, HistoryQueries) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  for (uint64_t seq = 1; seq <= 10; ++seq) {
    b.AppendJobEvent({seq, seq % 2 + 1, static_cast<int64_t>(seq), "a", "b", "r", "{}"});
  }
  // Usage over [start, end): [0,10) [10,20) [20,30) [5,25).
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

  auto usage = store->Usage(10, 20);  // overlaps [10,20) and [5,25), touches neither end of others
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
}

TEST(SqliteStore, AuditQueriesFilterByTimeActorObjectActionAndTenant) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  WriteBatch b;
  // seq 1..8
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
  // An object is its target exactly or a path under it: job/12 is not job/123.
  EXPECT_EQ(seqs({.object = "job/12"}), (V{1, 2, 7}));
  EXPECT_EQ(seqs({.object = "job/"}), (V{1, 2, 3, 5, 7}));
  EXPECT_EQ(seqs({.object = "job"}), (V{1, 2, 3, 5, 7}));
  EXPECT_EQ(seqs({.object = "config"}), (V{4}));
  EXPECT_EQ(seqs({.tenant = "prod"}), (V{3, 5, 8}));
  EXPECT_EQ(seqs({.tenant = ""}), (V{4}));
  // Filters combine, and the cursor pages through what they select.
  EXPECT_EQ(seqs({.after_seq = 1, .limit = 1, .actor = "alice", .object = "job/12"}), (V{2}));
  EXPECT_EQ(seqs({.after_seq = 2,
                  .since_ms = 1,
                  .actor = "alice",
                  .action = "job.hold",
                  .object = "job/12",
                  .tenant = "research"}),
            (V{7}));
  // A filter value is data, never SQL.
  EXPECT_EQ(seqs({.actor = "alice' OR '1'='1"}), V{});

  auto all = store->QueryAudit({.after_seq = 3, .limit = 1});
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 1u);
  EXPECT_EQ(all->front().source, "::1");
  EXPECT_EQ(all->front().tenant, "");
  EXPECT_EQ(all->front().at_ms, 4000);
}

TEST(SqliteStore, AuditQueriesUseTheirIndexes) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  { MustOpen(path)->Close(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto plan = [&](const std::string& where) {
    std::string out;
    sqlite3_stmt* s = nullptr;
    const std::string sql =
        "EXPLAIN QUERY PLAN SELECT seq FROM audit WHERE " + where + " ORDER BY seq LIMIT 100";
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK);
    while (sqlite3_step(s) == SQLITE_ROW) {
      out += reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
      out += "\n";
    }
    sqlite3_finalize(s);
    return out;
  };
  EXPECT_NE(plan("seq > 0 AND actor = 'alice'").find("audit_by_actor"), std::string::npos);
  EXPECT_NE(plan("seq > 0 AND action = 'job.cancel'").find("audit_by_action"), std::string::npos);
  EXPECT_NE(plan("seq > 0 AND tenant = 'prod'").find("audit_by_tenant"), std::string::npos);
  EXPECT_NE(plan("seq > 0 AND (target = 'job/1' OR (target >= 'job/1/' AND target < 'job/10'))")
                .find("audit_by_target"),
            std::string::npos);
  sqlite3_close(db);
}

TEST(SqliteStore, JobHistoryQueriesUseTheirPartialIndexes) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  { MustOpen(path)->Close(); }
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  auto plan = [&](const std::string& tail) {
    std::string out;
    sqlite3_stmt* s = nullptr;
    const std::string sql = "EXPLAIN QUERY PLAN SELECT id FROM jobs " + tail;
    EXPECT_EQ(sqlite3_prepare_v2(db, sql.c_str(), -1, &s, nullptr), SQLITE_OK) << sql;
    while (sqlite3_step(s) == SQLITE_ROW) {
      out += reinterpret_cast<const char*>(sqlite3_column_text(s, 3));
      out += "\n";
    }
    sqlite3_finalize(s);
    return out;
  };
  // The SQL the store writes (store/job_history_sql.h).
  auto list = [&](JobQuery q) {
    const JobQuerySql sql = BuildJobQuerySql(q, [](size_t i) { return fmt::format("?{}", i); });
    return plan("WHERE " + sql.where + " " + sql.tail);
  };
  EXPECT_NE(list({.users = {"alice"}, .finished_only = true, .after_id = 10})
                .find("jobs_finished_by_user"),
            std::string::npos);
  EXPECT_NE(list({.tenants = {"t"}, .users = {"alice"}, .finished_only = true})
                .find("jobs_finished_by_user"),
            std::string::npos);
  EXPECT_NE(plan(LiveJobsWhere("instr")).find("jobs_live"), std::string::npos);
  // The latest finished: the newest ids first, no sort.
  const std::string latest = plan(LatestFinishedWhere("?1"));
  EXPECT_EQ(latest.find("TEMP B-TREE"), std::string::npos) << latest;
  sqlite3_close(db);
}

TEST(SqliteStore, HistoryIsAppendOnly) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  auto store = MustOpen(path);
  WriteBatch b;
  b.AppendJobEvent({1, 1, 1, "", "pending", "submitted", "{}"});
  b.AppendUsage({});
  b.AppendAudit({});
  ASSERT_TRUE(store->Write(std::move(b)).ok());

  WriteBatch again;
  again.AppendJobEvent({1, 1, 2, "pending", "running", "admitted", "{}"});
  Status st = store->Write(std::move(again));
  EXPECT_EQ(st.code(), StatusCode::kInternal);
  EXPECT_NE(st.message().find("AppendJobEvent(job_id=1, seq=1)"), std::string::npos)
      << st.message();

  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  EXPECT_NE(sqlite3_exec(db, "UPDATE job_events SET reason = 'x'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  EXPECT_NE(std::string(sqlite3_errmsg(db)).find("append-only"), std::string::npos);
  for (const char* sql :
       {"UPDATE usage SET end_ms = 1", "UPDATE audit SET actor = 'x'", "DELETE FROM audit"}) {
    EXPECT_NE(sqlite3_exec(db, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  // Events and usage records may be deleted (by the retention, PruneHistory), never changed.
  sqlite3_close(db);
}

TEST(SqliteStore, RefusesATokenThatIsNotAHash) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  for (const std::string& bad : {std::string("arb_live_s3cr3t"), std::string(64, 'A'),
                                 std::string(31, 'a'), std::string()}) {
    WriteBatch b;
    b.PutToken({"t", bad, "alice", "research", "admin", "api", 1, 0, false});
    Status st = store->Write(std::move(b));
    EXPECT_EQ(st.code(), StatusCode::kInternal) << bad;
    EXPECT_NE(st.message().find("token_hash_is_lowercase_hex_digest"), std::string::npos)
        << st.message();
  }
}

TEST(SqliteStore, IdempotencyKeysAreScopedToTenantAndUser) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  auto job = [](uint64_t id, const char* tenant, const char* user) {
    JobRecord j = MakeJob(id);
    j.tenant = tenant;
    j.user = user;
    j.idempotency_key = "retry-me";
    WriteBatch b;
    b.PutJob(j);
    return b;
  };
  EXPECT_TRUE(store->Write(job(1, "research", "alice")).ok());
  EXPECT_TRUE(store->Write(job(2, "research", "bob")).ok());
  EXPECT_TRUE(store->Write(job(3, "prod", "alice")).ok());
  EXPECT_TRUE(store->Write(job(1, "research", "alice")).ok()) << "a put of the same job again";
  EXPECT_EQ(store->Write(job(4, "research", "alice")).code(), StatusCode::kInternal);
  JobRecord no_key = MakeJob(5);
  no_key.idempotency_key.clear();
  WriteBatch b;
  b.PutJob(no_key);
  no_key.id = 6;
  b.PutJob(no_key);  // empty keys never collide
  EXPECT_TRUE(store->Write(std::move(b)).ok());
}

TEST(SqliteStore, ConcurrentSingleJobBatchesAreGroupCommitted) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  constexpr int kThreads = 8;
  constexpr int kPerThread = 2000;
  std::vector<std::vector<std::shared_future<Status>>> futures(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        futures[t].push_back(store->WriteAsync(JobBatch(t * kPerThread + i + 1)));
      }
    });
  }
  for (auto& th : threads) th.join();
  int ok = 0;
  for (auto& per_thread : futures) {
    for (auto& f : per_thread) ok += f.get().ok() ? 1 : 0;
  }
  EXPECT_EQ(ok, kThreads * kPerThread);

  StoreStats stats = store->stats();
  EXPECT_EQ(stats.batches, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(stats.ops, uint64_t{kThreads * kPerThread});
  EXPECT_EQ(stats.failed_batches, 0u);
  EXPECT_GE(stats.commits, 1u);
  EXPECT_LE(stats.commits * 10, stats.batches) << "group commit should batch many per commit";
  EXPECT_GT(stats.max_group, 1u);
  uint64_t histogram_total = 0;
  for (uint64_t n : stats.commit_us_histogram) histogram_total += n;
  EXPECT_EQ(histogram_total, stats.commits);
  EXPECT_LE(stats.max_commit_us, stats.total_commit_us);

  std::cout << stats.batches << " batches in " << stats.commits << " commits (largest "
            << stats.max_group << "), mean commit " << stats.total_commit_us / stats.commits
            << " us\n";

  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  ASSERT_EQ(state->jobs.size(), size_t{kThreads * kPerThread});
  for (size_t i = 0; i < state->jobs.size(); ++i) ASSERT_EQ(state->jobs[i], MakeJob(i + 1));
  EXPECT_EQ(state->max_job_id, uint64_t{kThreads * kPerThread});
}

TEST(SqliteStore, AFailingBatchFailsAloneInsideItsGroup) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  auto store = MustOpen(path);

  // Hold the write lock from another connection so the writer blocks on its first group while the
  // next batches queue up behind it: they then commit as one group.
  sqlite3* gate = nullptr;
  ASSERT_EQ(sqlite3_open(path.c_str(), &gate), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(gate, "BEGIN IMMEDIATE", nullptr, nullptr, nullptr), SQLITE_OK);
  auto first = store->WriteAsync(JobBatch(1));
  while (store->stats().queued != 0) std::this_thread::yield();  // the writer took it

  WriteBatch duplicate_key;  // job 3 reuses job 2's idempotency key: same tenant, same user
  duplicate_key.PutTenant({"only-in-the-failed-batch", "{}", 0});
  JobRecord dup = MakeJob(3);
  dup.tenant = MakeJob(2).tenant;
  dup.user = MakeJob(2).user;
  dup.idempotency_key = MakeJob(2).idempotency_key;
  duplicate_key.PutJob(dup);
  WriteBatch bad_id;
  bad_id.PutJob(MakeJob(0));  // ids start at 1

  std::vector<std::shared_future<Status>> group;
  group.push_back(store->WriteAsync(JobBatch(2)));
  group.push_back(store->WriteAsync(std::move(duplicate_key)));
  group.push_back(store->WriteAsync(JobBatch(4)));
  group.push_back(store->WriteAsync(std::move(bad_id)));
  group.push_back(store->WriteAsync(JobBatch(5)));
  ASSERT_EQ(sqlite3_exec(gate, "COMMIT", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(gate);

  EXPECT_TRUE(first.get().ok());
  EXPECT_TRUE(group[0].get().ok()) << group[0].get().ToString();
  EXPECT_EQ(group[1].get().code(), StatusCode::kInternal);
  EXPECT_NE(group[1].get().message().find("PutJob(id=3)"), std::string::npos)
      << group[1].get().message();
  EXPECT_NE(group[1].get().message().find("UNIQUE constraint failed"), std::string::npos)
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

TEST(SqliteStore, EmptyBatchIsABarrier) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  auto job = store->WriteAsync(JobBatch(1));
  EXPECT_TRUE(store->Write(WriteBatch()).ok());
  EXPECT_EQ(job.wait_for(std::chrono::seconds(0)), std::future_status::ready);
}

TEST(SqliteStore, CloseFlushesAndThenRefuses) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  std::vector<std::shared_future<Status>> futures;
  {
    auto store = MustOpen(path);
    for (uint64_t id = 1; id <= 100; ++id) futures.push_back(store->WriteAsync(JobBatch(id)));
    store->Close();
    for (auto& f : futures) EXPECT_TRUE(f.get().ok());
    Status after = store->Write(JobBatch(101));
    EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(store->Load().status().code(), StatusCode::kFailedPrecondition);
    store->Close();  // idempotent
  }
  auto store = MustOpen(path);
  auto state = store->Load();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->jobs.size(), 100u);
}

TEST(SqliteStore, OpenErrorsAreClear) {
  TempDir dir;
  auto missing_dir = OpenSqliteStore(dir.File("no/such/dir/arbiter.db"));
  ASSERT_FALSE(missing_dir.ok());
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(missing_dir.status().message().find("no/such/dir/arbiter.db"), std::string::npos)
      << missing_dir.status().message();

  const std::string garbage = dir.File("garbage.db");
  std::ofstream(garbage) << std::string(8192, 'x');
  auto not_a_db = OpenSqliteStore(garbage);
  ASSERT_FALSE(not_a_db.ok());
  EXPECT_NE(not_a_db.status().message().find("not a database"), std::string::npos)
      << not_a_db.status().message();

  EXPECT_EQ(OpenSqliteStore("").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(OpenSqliteStore(":memory:").status().field(), "path");
  SqliteOptions zero;
  zero.max_batches_per_commit = 0;
  EXPECT_EQ(OpenSqliteStore(dir.File("a.db"), zero).status().field(), "max_batches_per_commit");
}

// The child writes batches in a loop from 4 threads and reports each acknowledged job id on a
// pipe; the parent SIGKILLs it mid-way, then reopens the store: every acknowledged id must be
// there, unchanged, and every batch is whole (job and event together, or neither).
TEST(SqliteStoreDurability, AcknowledgedWritesSurviveSigkill) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    close(fds[0]);
    auto store = OpenSqliteStore(path);
    if (!store.ok()) _exit(2);
    std::vector<std::thread> writers;
    for (uint64_t t = 0; t < 4; ++t) {
      writers.emplace_back([&, t] {
        for (uint64_t id = t + 1; id < 1'000'000; id += 4) {
          WriteBatch b;
          b.PutJob(MakeJob(id));
          b.AppendJobEvent({id, id, 1, "", "pending", "submitted", "{}"});
          if (!(*store)->Write(std::move(b)).ok()) _exit(3);
          if (write(fds[1], &id, sizeof id) != static_cast<ssize_t>(sizeof id)) _exit(4);
        }
      });
    }
    for (auto& w : writers) w.join();
    _exit(0);
  }
  close(fds[1]);
  std::vector<uint64_t> acked;
  uint64_t id = 0;
  while (read(fds[0], &id, sizeof id) == static_cast<ssize_t>(sizeof id)) {
    acked.push_back(id);
    if (acked.size() == 2000) kill(child, SIGKILL);
  }
  close(fds[0]);
  int wstatus = 0;
  ASSERT_EQ(waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the child ended on its own, status " << wstatus;
  ASSERT_GE(acked.size(), 2000u);

  auto store = MustOpen(path);
  auto state = store->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  std::map<uint64_t, JobRecord> jobs;
  for (const auto& j : state->jobs) jobs[j.id] = j;
  for (uint64_t a : acked) {
    auto it = jobs.find(a);
    ASSERT_NE(it, jobs.end()) << "acknowledged job " << a << " lost";
    ASSERT_EQ(it->second, MakeJob(a));
  }
  auto events = store->EventsSince(0, 10'000'000);
  ASSERT_TRUE(events.ok());
  ASSERT_EQ(events->size(), jobs.size());
  for (const auto& e : *events) EXPECT_EQ(jobs.count(e.job_id), 1u) << e.job_id;
  std::cout << "acknowledged " << acked.size() << ", present after SIGKILL " << jobs.size() << "\n";
}

TEST(SqliteStore, UsageRollupsEqualTheRecordsForEveryPeriodOfWholeHours) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  ASSERT_NE(store, nullptr);
  checks::UsageRollupsEqualTheRecords(*store);
}

TEST(SqliteStore, JobFactsAreReadByPeriodAndPruneHistoryKeepsTheAggregates) {
  TempDir dir;
  auto store = MustOpen(dir.File("arbiter.db"));
  ASSERT_NE(store, nullptr);
  checks::JobFactsAndPruneHistory(*store);
}

// A database of schema 9 with history: migration 10 builds the rollups and facts from it.
TEST(SqliteStore, MigrationTenBackfillsTheAggregatesFromTheHistory) {
  TempDir dir;
  const std::string path = dir.File("arbiter.db");
  const std::vector<UsageRecord> records = checks::RandomUsage(3, 120);
  {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
    auto exec = [&](const std::string& sql) {
      char* err = nullptr;
      EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
          << (err ? err : "") << "\n"
          << sql.substr(0, 200);
      sqlite3_free(err);
    };
    exec(
        "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, "
        "applied_at_ms INTEGER NOT NULL)");
    for (const sqlite::Migration& m : sqlite::Migrations()) {
      if (m.version >= 10) break;
      exec(std::string(m.sql));
      exec(fmt::format("INSERT INTO schema_version VALUES ({}, '{}', 0)", m.version, m.name));
    }
    for (const UsageRecord& u : records) {
      exec(fmt::format(
          "INSERT INTO usage (job_id, task, tenant, queue, user, job_type, gpu_model, gpu_milli, "
          "gpu_memory_mib, start_ms, end_ms, cost_micro) VALUES ({}, 0, '{}', '{}', '{}', '{}', "
          "'{}', {}, 0, {}, {}, {})",
          u.job_id, u.tenant, u.queue, u.user, u.job_type, u.gpu_model, u.gpu_milli, u.start_ms,
          u.end_ms, u.cost_micro));
    }
    // Job 1: submitted, admitted after 40 ms, running, preempted, requeued, admitted, failed.
    exec(
        "INSERT INTO jobs (id, tenant, queue, user, name, type, state, spec_json, status_json, "
        "idempotency_key, submitted_at_ms, updated_at_ms) VALUES (1, 't', 't-q', 'u', 'n', "
        "'training', 'failed', '{}', '{\"gpu_model\":\"H100\"}', '', 0, 0)");
    exec(
        "INSERT INTO usage (job_id, task, tenant, queue, user, job_type, gpu_model, gpu_milli, "
        "gpu_memory_mib, start_ms, end_ms, cost_micro) VALUES (1, 0, 't', 't-q', 'u', "
        "'training', 'H100', 2000, 0, 40, 90, 0)");
    const char* events[][4] = {{"10", "", "pending", "submitted"},
                               {"50", "pending", "admitted", "admitted"},
                               {"60", "admitted", "running", "running"},
                               {"90", "running", "preempting", "preempted by job 2 (priority)"},
                               {"95", "preempting", "pending", "requeued"},
                               {"120", "pending", "admitted", "admitted"},
                               {"130", "admitted", "running", "running"},
                               {"200", "running", "failed", "a task exited with code 3"}};
    for (const auto& e : events) {
      exec(
          fmt::format("INSERT INTO job_events (job_id, at_ms, from_state, to_state, reason, "
                      "detail_json) VALUES (1, {}, '{}', '{}', '{}', '{{}}')",
                      e[0], e[1], e[2], e[3]));
    }
    sqlite3_close(db);
  }
  auto store = MustOpen(path);
  ASSERT_NE(store, nullptr);
  for (const auto& [a, b] : std::vector<std::pair<int64_t, int64_t>>{
           {checks::kT0, checks::kT0 + 5 * kRollupDayMs},
           {checks::kT0 + 7 * kRollupHourMs, checks::kT0 + 30 * kRollupHourMs}}) {
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
  }
  auto facts = store->JobFacts(0, 1'000);
  ASSERT_TRUE(facts.ok()) << facts.status().ToString();
  const std::vector<JobFactRecord> want = {
      {1, 1, 50, "admitted", "t", "t-q", "u", "training", "H100", 10, 0, ""},
      {4, 1, 90, "preempted", "t", "t-q", "u", "training", "H100", 60, 2000 * 30,
       "preempted by job 2 (priority)"},
      {2, 1, 120, "admitted", "t", "t-q", "u", "training", "H100", 95, 0, ""},
      {3, 1, 200, "failed", "t", "t-q", "u", "training", "H100", 200, 0, "exit code 3"}};
  EXPECT_EQ(*facts, want);
}

}  // namespace
}  // namespace arbiter::store
