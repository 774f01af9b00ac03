#include "store/postgres/migrations.h"

#include <fmt/format.h>

#include <vector>

#include "store/postgres/migrations_embedded.h"  // generated: kEmbeddedMigrations

namespace arbiter::store::postgres {
namespace {

constexpr std::string_view kCreateSchemaVersion = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (
  version       INTEGER PRIMARY KEY NOT NULL,
  name          TEXT NOT NULL,
  applied_at_ms BIGINT NOT NULL
))sql";

struct Applied {
  int64_t version = 0;
  std::string name;
};

Result<int> CurrentVersion(Connection& conn, const std::string& where) {
  std::vector<Applied> applied;
  ARBITER_RETURN_IF_ERROR(conn.Query("SELECT version, name FROM schema_version ORDER BY version",
                                     Params(), "store: cannot read schema_version", applied,
                                     [](Row& r) {
                                       Applied a;
                                       a.version = r.Int();
                                       a.name = r.Text();
                                       return a;
                                     }));
  const int latest = LatestSchemaVersion();
  if (!applied.empty() && applied.back().version > latest) {
    return FailedPrecondition(fmt::format(
        "store: {} has schema version {}, newer than this arbiter knows (latest {}); run the "
        "arbiter that wrote it, or a newer one",
        where, applied.back().version, latest));
  }
  for (size_t i = 0; i < applied.size(); ++i) {
    const Migration& known = Migrations()[i];
    if (applied[i].version != known.version || applied[i].name != known.name) {
      return Internal(fmt::format(
          "store: {}: schema_version is inconsistent: row {} is {} '{}', expected {} '{}'", where,
          i + 1, applied[i].version, applied[i].name, known.version, known.name));
    }
  }
  return static_cast<int>(applied.size());
}

Status Migrate(Connection& conn, const std::string& where, int64_t now_ms) {
  ARBITER_RETURN_IF_ERROR(conn.Exec(kCreateSchemaVersion, "store: cannot create schema_version"));
  Result<int> version = CurrentVersion(conn, where);
  if (!version.ok()) return version.status();
  for (size_t v = static_cast<size_t>(*version); v < Migrations().size(); ++v) {
    const Migration& m = Migrations()[v];
    ARBITER_RETURN_IF_ERROR(conn.Exec("BEGIN", "store: cannot begin a migration"));
    Status st = conn.Exec(m.sql, fmt::format("store: {}: migration {} failed", where, m.name));
    if (st.ok()) {
      auto r = conn.Run(
          "INSERT INTO schema_version (version, name, applied_at_ms) "
          "VALUES ($1, $2, $3)",
          Params().Int(m.version).Text(m.name).Int(now_ms), "store: cannot record the migration");
      if (!r.ok()) st = r.status();
    }
    if (st.ok()) st = conn.Exec("COMMIT", "store: cannot commit a migration");
    if (!st.ok()) {
      if (conn.InTransaction()) (void)conn.Exec("ROLLBACK", "store: rollback");
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace

std::span<const Migration> Migrations() {
  static const auto* const migrations = [] {
    auto* v = new std::vector<Migration>();
    for (const EmbeddedMigration& m : kEmbeddedMigrations) v->push_back({m.version, m.name, m.sql});
    return v;
  }();
  return *migrations;
}

int LatestSchemaVersion() { return Migrations().empty() ? 0 : Migrations().back().version; }

Status ApplyMigrations(Connection& conn, const std::string& where, int64_t now_ms) {
  // A session lock: a second server opening the same database waits here, then finds the schema
  // current.
  ARBITER_RETURN_IF_ERROR(conn.Exec(fmt::format("SELECT pg_advisory_lock({})", kMigrationLockKey),
                                    "store: cannot lock the schema for migration"));
  Status st = Migrate(conn, where, now_ms);
  Status unlock = conn.Exec(fmt::format("SELECT pg_advisory_unlock({})", kMigrationLockKey),
                            "store: cannot unlock the schema");
  if (!st.ok()) return st;
  return unlock;
}

}  // namespace arbiter::store::postgres
