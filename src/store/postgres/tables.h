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
// Multi-row forms: one array parameter per column ($1::types[0][], ...), row i of the statement
// made of element i of every array, inserted in array order.
// Insert every row, or replace every column but the key's `key_cols` first columns. Two rows
// with the same key in one statement are an error (PostgreSQL updates a row once per statement).
std::string UpsertManySql(std::string_view table, Columns cols, Columns types, size_t key_cols = 1);
// Appends without a seq: `cols` starts with "seq", `types` names the other columns' types; row i
// (from 1) gets max(seq) + i of the table.
std::string AppendManySql(std::string_view table, Columns cols, Columns types);
// A LIMIT (BIGINT).
int64_t ClampLimit(size_t limit);

}  // namespace arbiter::store::postgres
