// The SQLite store's tables and rows (internal to src/store/sqlite): the columns of each table,
// the SQL built from them, and rows read back into records.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "store/columns.h"
#include "store/row_readers.h"
#include "store/sqlite/connection.h"
#include "store/store.h"

namespace arbiter::store {

using sqlite::Connection;
using sqlite::Row;
using sqlite::Statement;

// Rolls raw GPU samples older than ?1 up into hourly rows, adding to an hourly row already there.
// (The WHERE clause before ON CONFLICT keeps SQLite's parser from reading it as a join.)
inline constexpr std::string_view kRollUpGpuSamplesSql = R"sql(
INSERT INTO gpu_samples (resolution_ms, node, gpu, at_ms, span_ms, busy_ms, memory_max_mib,
                         memory_mib_ms)
  SELECT 3600000, node, gpu, (at_ms / 3600000) * 3600000, sum(span_ms), sum(busy_ms),
         max(memory_max_mib), sum(memory_mib_ms)
  FROM gpu_samples WHERE resolution_ms < 3600000 AND at_ms < ?1
  GROUP BY node, gpu, at_ms / 3600000
  ON CONFLICT (at_ms, node, gpu, resolution_ms) DO UPDATE SET
    span_ms = span_ms + excluded.span_ms, busy_ms = busy_ms + excluded.busy_ms,
    memory_max_mib = max(memory_max_mib, excluded.memory_max_mib),
    memory_mib_ms = memory_mib_ms + excluded.memory_mib_ms)sql";

std::string Join(Columns cols, std::string_view prefix = {});
std::string Placeholders(size_t n);
std::string InsertSql(std::string_view table, Columns cols);
std::string UpsertSql(std::string_view table, Columns cols);
std::string DeleteSql(std::string_view table, Columns cols);
std::string SelectSql(std::string_view table, Columns cols, std::string_view tail);
// Prepares `sql` into `out`, or returns why not.
Status PrepareInto(Connection& conn, Statement& out, const std::string& sql);
// A LIMIT for SQLite (int64).
int64_t ClampLimit(size_t limit);

}  // namespace arbiter::store
