// The PostgreSQL store's SQL and rows (internal to src/store/postgres): statements built from the
// shared column lists (store/columns.h), every identifier quoted ("user" is a keyword), and rows
// read back into records.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "store/columns.h"
#include "store/postgres/connection.h"
#include "store/row_readers.h"
#include "store/store.h"

namespace arbiter::store::postgres {

// "a", "b", ... (quoted, each prefixed with `prefix`).
std::string Join(Columns cols, std::string_view prefix = {});
// $1, $2, ... $n
std::string Placeholders(size_t n);
std::string InsertSql(std::string_view table, Columns cols);
// Insert, or replace every column but the key's `key_cols` first columns.
std::string UpsertSql(std::string_view table, Columns cols, size_t key_cols = 1);
std::string DeleteSql(std::string_view table, Columns cols);
std::string SelectSql(std::string_view table, Columns cols, std::string_view tail);
// An append: seq ($1) NULL takes max(seq) + 1 of the table.
std::string AppendSql(std::string_view table, Columns cols);
// A LIMIT (BIGINT).
int64_t ClampLimit(size_t limit);

}  // namespace arbiter::store::postgres
