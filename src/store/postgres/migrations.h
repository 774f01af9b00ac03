// The schema migrations of the PostgreSQL store, embedded at build time from migrations/NNNN_*.sql
// (the same versions as the SQLite store's, in PostgreSQL's dialect; embed_migrations.cmake).
//
// Applied migrations are recorded in schema_version (version, name, applied_at_ms). Servers that
// open one database at once are safe: the migrating connection holds a session advisory lock
// (kMigrationLockKey) from reading the version to the last migration.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/postgres/connection.h"

namespace arbiter::store::postgres {

struct Migration {
  int version = 0;
  std::string_view name;  // the file name, "0001_initial.sql"
  std::string_view sql;
};

inline constexpr int64_t kMigrationLockKey = 0x61726269746572;  // "arbiter"

// All known migrations, in version order.
std::span<const Migration> Migrations();
int LatestSchemaVersion();

// Brings the database to LatestSchemaVersion(), each missing migration in its own transaction with
// its schema_version row. Idempotent. kFailedPrecondition when the database records a newer
// version than this binary knows; kInternal when schema_version disagrees with the known
// migrations. `where` names the database in messages (a URL without its password).
Status ApplyMigrations(Connection& conn, const std::string& where, int64_t now_ms);

}  // namespace arbiter::store::postgres
