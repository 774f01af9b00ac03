#include "store/sqlite/migrations.h"

#include <fmt/format.h>

#include <vector>

#include "store/sqlite/migrations_embedded.h"  // generated: kEmbeddedMigrations

namespace arbiter::store::sqlite {
namespace {

constexpr std::string_view kCreateSchemaVersion = R"sql(
CREATE TABLE IF NOT EXISTS schema_version (
  version       INTEGER PRIMARY KEY NOT NULL,
  name          TEXT NOT NULL,
  applied_at_ms INTEGER NOT NULL
))sql";

struct AppliedMigration {
  int64_t version = 0;
  std::string name;
};

// The version the database is at, after checking that its schema_version rows are exactly the
// first known migrations.
Result<int> CurrentVersion(Connection& conn, const std::string& path) {
  Result<Statement> s = conn.Prepare("SELECT version, name FROM schema_version ORDER BY version");
  if (!s.ok()) return s.status();
  std::vector<AppliedMigration> applied;
  ARBITER_RETURN_IF_ERROR(
      conn.Query(s->get(), "store: cannot read schema_version", applied, [](Row& r) {
        AppliedMigration m;
        m.version = r.Int();
        m.name = r.Text();
        return m;
      }));
  const int latest = LatestSchemaVersion();
  if (!applied.empty() && applied.back().version > latest) {
    return FailedPrecondition(fmt::format(
        "store: {} has schema version {}, newer than this arbiter knows (latest {}); run the "
        "arbiter that wrote it, or a newer one",
        path, applied.back().version, latest));
  }
  for (size_t i = 0; i < applied.size(); ++i) {
    const Migration& known = Migrations()[i];
    if (applied[i].version != known.version) {
      return Internal(
          fmt::format("store: {}: schema_version is inconsistent: expected version {}, found {}",
                      path, known.version, applied[i].version));
    }
    if (applied[i].name != known.name) {
      return Internal(fmt::format(
          "store: {}: schema_version records migration {} as '{}', this arbiter knows it as '{}'",
          path, known.version, applied[i].name, known.name));
    }
  }
  return static_cast<int>(applied.size());
}

// One step: in one transaction, applies the next migration if there is one. Sets `done` when the
// database is at the latest version.
Status MigrateOneStep(Connection& conn, const std::string& path, int64_t now_ms, bool& done) {
  ARBITER_RETURN_IF_ERROR(conn.Exec(kCreateSchemaVersion, "store: cannot create schema_version"));
  Result<int> version = CurrentVersion(conn, path);
  if (!version.ok()) return version.status();
  if (*version == LatestSchemaVersion()) {
    done = true;
    return Status::Ok();
  }
  const Migration& next = Migrations()[static_cast<size_t>(*version)];
  ARBITER_RETURN_IF_ERROR(
      conn.Exec(next.sql, fmt::format("store: {}: migration {} failed", path, next.name)));
  Result<Statement> record =
      conn.Prepare("INSERT INTO schema_version (version, name, applied_at_ms) VALUES (?1, ?2, ?3)");
  if (!record.ok()) return record.status();
  return conn.Run(record->get(), "store: cannot record the migration",
                  static_cast<int64_t>(next.version), next.name, now_ms);
}

}  // namespace

std::span<const Migration> Migrations() {
  // Never destroyed: it is read until the process exits.
  static const auto* const migrations = [] {
    auto* v = new std::vector<Migration>();
    for (const EmbeddedMigration& m : kEmbeddedMigrations) v->push_back({m.version, m.name, m.sql});
    return v;
  }();
  return *migrations;
}

int LatestSchemaVersion() { return Migrations().empty() ? 0 : Migrations().back().version; }

Status ApplyMigrations(Connection& conn, const std::string& path, int64_t now_ms) {
  for (bool done = false; !done;) {
    // IMMEDIATE: two processes opening a new file at once cannot both apply a migration.
    ARBITER_RETURN_IF_ERROR(conn.Exec("BEGIN IMMEDIATE", "store: cannot begin a migration"));
    Status st = MigrateOneStep(conn, path, now_ms, done);
    if (st.ok()) st = conn.Exec("COMMIT", "store: cannot commit a migration");
    if (!st.ok()) {
      if (conn.InTransaction()) (void)conn.Exec("ROLLBACK", "store: rollback");
      return st;
    }
  }
  return Status::Ok();
}

}  // namespace arbiter::store::sqlite
