#include "store/sqlite/migrations.h"

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "store/sqlite/sqlite_store.h"
#include "testing/temp_dir.h"

namespace arbiter::store::sqlite {
namespace {

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `sql` on a connection of its own and returns the rows, columns joined by '|'.
std::vector<std::string> RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  EXPECT_EQ(sqlite3_open(path.c_str(), &db), SQLITE_OK);
  std::vector<std::string> rows;
  char* err = nullptr;
  auto collect = [](void* out, int n, char** values, char**) {
    std::string row;
    for (int i = 0; i < n; ++i) {
      if (i > 0) row += '|';
      if (values[i] != nullptr) row += values[i];
    }
    static_cast<std::vector<std::string>*>(out)->push_back(row);
    return 0;
  };
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), collect, &rows, &err), SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(db);
  return rows;
}

TEST(Migrations, EmbeddedTextIsTheFilesOnDisk) {
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(ARBITER_MIGRATIONS_DIR)) {
    if (e.path().extension() == ".sql") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  ASSERT_EQ(files.size(), Migrations().size()) << "rebuild after adding a migration";
  for (size_t i = 0; i < files.size(); ++i) {
    const Migration& m = Migrations()[i];
    EXPECT_EQ(m.version, static_cast<int>(i) + 1);
    EXPECT_EQ(m.name, files[i].filename().string());
    EXPECT_EQ(m.sql, ReadFile(files[i])) << m.name << " differs from the embedded text";
  }
  EXPECT_EQ(LatestSchemaVersion(), static_cast<int>(files.size()));
}

TEST(Migrations, AreRecordedAndReopeningIsIdempotent) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  for (int i = 0; i < 3; ++i) {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    (*store)->Close();
  }
  std::vector<std::string> want;
  for (const Migration& m : Migrations()) want.push_back(fmt::format("{}|{}", m.version, m.name));
  EXPECT_EQ(RawQuery(path, "SELECT version, name FROM schema_version ORDER BY version"), want);
  EXPECT_EQ(RawQuery(path, "PRAGMA journal_mode"), std::vector<std::string>{"wal"});
  // Every table of every migration is there.
  auto tables = RawQuery(path, "SELECT name FROM sqlite_schema WHERE type = 'table' ORDER BY name");
  for (const char* t :
       {"audit", "gpu_models", "job_events", "jobs", "kv", "nodes", "priority_classes", "queues",
        "tenants", "tokens", "usage", "users", "cluster_samples", "gpu_samples"}) {
    EXPECT_NE(std::find(tables.begin(), tables.end(), t), tables.end()) << t;
  }
}

// Every index is written at each insert and each state change: only the ones a query or a
// constraint needs exist (0003 dropped the jobs' and the audit log's unread indexes; 0007 gave
// the audit log the ones its search reads).
TEST(Migrations, OnlyIndexesThatAreReadOrEnforceAConstraint) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    (*store)->Close();
  }
  EXPECT_EQ(RawQuery(path,
                     "SELECT tbl_name || '.' || name FROM sqlite_schema WHERE type = 'index' AND "
                     "sql IS NOT NULL ORDER BY tbl_name, name"),
            (std::vector<std::string>{
                "audit.audit_by_action", "audit.audit_by_actor", "audit.audit_by_target",
                "audit.audit_by_tenant", "audit.audit_by_time", "job_events.job_events_by_job",
                // Read by the wait, failures and preemptions reports (JobFacts).
                "job_facts.job_facts_by_time",
                // Partial and covering: the waits alone (WaitFacts: the wait report, the
                // forecast).
                "job_facts.job_facts_waits", "jobs.jobs_by_idempotency_key",
                // Partial: the job history's reads (the live jobs at a start; one user's finished
                // ones in the job list).
                "jobs.jobs_finished_by_user", "jobs.jobs_live", "queues.queues_by_tenant",
                "tokens.tokens_by_hash", "tokens.tokens_by_user", "usage.usage_by_end",
                "usage.usage_by_start", "usage.usage_by_tenant", "users.users_by_tenant",
                // Read by a hook's delivery log (and its deletion); by the pending ones' load at
                // start.
                "webhook_deliveries.webhook_deliveries_by_hook",
                "webhook_deliveries.webhook_deliveries_by_state"}));
}

// A data dir written before tokens named their node (schema version 3) opens: its tokens load
// with no node and its audit records with no token id.
TEST(Migrations, VersionThreeTokensAndAuditLoad) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  std::string sql =
      "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, "
      "applied_at_ms INTEGER NOT NULL);";
  for (const Migration& m : Migrations()) {
    if (m.version > 3) break;
    sql += std::string(m.sql) + ";\n";
    sql += fmt::format("INSERT INTO schema_version VALUES ({}, '{}', 0);", m.version, m.name);
  }
  sql += "INSERT INTO tokens VALUES ('t1', '" + std::string(64, 'a') +
         "', 'admin', '', 'node', 'node', 1, 0, 0);"
         "INSERT INTO audit VALUES (1, 5, 'admin', 'config.apply', 'config', 'ok', '{}');";
  RawQuery(path, sql);
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->tokens.size(), 1u);
  EXPECT_EQ(state->tokens[0].role, "node");
  EXPECT_EQ(state->tokens[0].node, "");
  auto audit = (*store)->Audit(0, 10);
  ASSERT_TRUE(audit.ok());
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ(audit->front().action, "config.apply");
  EXPECT_EQ(audit->front().token_id, "");
  (*store)->Close();
}

// A data dir of schema version 6 opens: its tokens are full-scope, its audit records have no
// source or tenant, and they are found by the new search.
TEST(Migrations, VersionSixTokensAndAuditLoadWithTheNewColumns) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  std::string sql =
      "CREATE TABLE schema_version (version INTEGER PRIMARY KEY NOT NULL, name TEXT NOT NULL, "
      "applied_at_ms INTEGER NOT NULL);";
  for (const Migration& m : Migrations()) {
    if (m.version > 6) break;
    sql += std::string(m.sql) + ";\n";
    sql += fmt::format("INSERT INTO schema_version VALUES ({}, '{}', 0);", m.version, m.name);
  }
  sql += "INSERT INTO tokens VALUES ('t1', '" + std::string(64, 'a') +
         "', 'alice', 'vision', 'member', 'user', 1, 0, 0, '');"
         "INSERT INTO audit VALUES (1, 5, 'alice', 'job.cancel', 'job/7', 'ok', '{}', 't1');";
  RawQuery(path, sql);
  auto store = OpenSqliteStore(path);
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto state = (*store)->Load();
  ASSERT_TRUE(state.ok()) << state.status().ToString();
  ASSERT_EQ(state->tokens.size(), 1u);
  EXPECT_EQ(state->tokens[0].scope, "full");
  auto audit = (*store)->QueryAudit({.actor = "alice", .object = "job/"});
  ASSERT_TRUE(audit.ok()) << audit.status().ToString();
  ASSERT_EQ(audit->size(), 1u);
  EXPECT_EQ(audit->front().token_id, "t1");
  EXPECT_EQ(audit->front().source, "");
  EXPECT_EQ(audit->front().tenant, "");
  (*store)->Close();
}

TEST(Migrations, NewerSchemaIsRefused) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
  }
  const int future = LatestSchemaVersion() + 1;
  RawQuery(path, fmt::format("INSERT INTO schema_version VALUES ({}, '{:04}_future.sql', 0)",
                             future, future));
  auto store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("newer than this arbiter knows"), std::string::npos)
      << store.status().message();
  EXPECT_NE(store.status().message().find(path), std::string::npos);
}

TEST(Migrations, RenamedMigrationIsRefused) {
  arbiter::testing::TempDir dir;
  const std::string path = dir.File("arbiter.db");
  {
    auto store = OpenSqliteStore(path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
  }
  RawQuery(path, "UPDATE schema_version SET name = '0001_other.sql' WHERE version = 1");
  auto store = OpenSqliteStore(path);
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kInternal);
  EXPECT_NE(store.status().message().find("0001_other.sql"), std::string::npos)
      << store.status().message();
}

}  // namespace
}  // namespace arbiter::store::sqlite
