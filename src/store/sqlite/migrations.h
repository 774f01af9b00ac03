// The schema migrations of the SQLite store, embedded at build time from migrations/NNNN_*.sql
// (embed_migrations.cmake turns them into a generated header of raw strings).
//
// Versions are 1, 2, ... with no gap, in file name order; the build fails otherwise. A migration is
// never edited once released: a change to the schema is a new file. Applied migrations are
// recorded in the table schema_version (version, name, applied_at_ms).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"
#include "store/sqlite/connection.h"

namespace arbiter::store::sqlite {

struct Migration {
  int version = 0;
  std::string_view name;  // the file name, "0001_initial.sql"
  std::string_view sql;   // the file's text, one or more statements
};

// All known migrations, in version order.
std::span<const Migration> Migrations();

// The highest version this binary knows.
int LatestSchemaVersion();

// Brings the database behind `conn` to LatestSchemaVersion(): applies each missing migration in its
// own transaction, together with its schema_version row. Idempotent. Fails with
// kFailedPrecondition when the database records a version newer than this binary knows, and with
// kInternal when schema_version is inconsistent with the known migrations. `path` is for messages.
Status ApplyMigrations(Connection& conn, const std::string& path, int64_t now_ms);

}  // namespace arbiter::store::sqlite
