#include "store/postgres/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace arbiter::store::postgres {

namespace {

// unnest($1::types[0][]), unnest($2::types[1][]), ...: set-returning functions in the select
// list, which PostgreSQL runs in lockstep, one row per element, without materializing them (in a
// FROM clause each would first be copied into a tuplestore).
std::string Unnests(Columns types) {
  std::string out;
  for (size_t i = 0; i < types.size(); ++i) {
    out += fmt::format("{}unnest(${}::{}[])", i > 0 ? ", " : "", i + 1, types[i]);
  }
  return out;
}

std::string UpdateSet(Columns cols, size_t key_cols) {
  std::string set;
  for (size_t i = key_cols; i < cols.size(); ++i) {
    set += fmt::format("{}\"{}\" = EXCLUDED.\"{}\"", i > key_cols ? ", " : "", cols[i], cols[i]);
  }
  return set;
}

}  // namespace

std::string Join(Columns cols, std::string_view prefix) {
  std::string out;
  for (size_t i = 0; i < cols.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}\"{}\"", prefix, cols[i]);
  }
  return out;
}

std::string Placeholders(size_t n) {
  std::string out;
  for (size_t i = 1; i <= n; ++i) out += fmt::format("{}${}", i > 1 ? ", " : "", i);
  return out;
}

std::string InsertSql(std::string_view table, Columns cols) {
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", table, Join(cols),
                     Placeholders(cols.size()));
}

std::string UpsertSql(std::string_view table, Columns cols, size_t key_cols) {
  return fmt::format("{} ON CONFLICT ({}) DO UPDATE SET {}", InsertSql(table, cols),
                     Join(cols.first(key_cols)), UpdateSet(cols, key_cols));
}

std::string DeleteSql(std::string_view table, Columns cols) {
  return fmt::format("DELETE FROM {} WHERE \"{}\" = $1", table, cols[0]);
}

std::string SelectSql(std::string_view table, Columns cols, std::string_view tail) {
  return fmt::format("SELECT {} FROM {} {}", Join(cols), table, tail);
}

std::string AppendSql(std::string_view table, Columns cols) {
  std::string values =
      fmt::format("COALESCE($1::bigint, (SELECT COALESCE(MAX(seq), 0) + 1 FROM {}))", table);
  for (size_t i = 2; i <= cols.size(); ++i) values += fmt::format(", ${}", i);
  return fmt::format("INSERT INTO {} ({}) VALUES ({})", table, Join(cols), values);
}

std::string UpsertManySql(std::string_view table, Columns cols, Columns types, size_t key_cols) {
  return fmt::format("INSERT INTO {} ({}) SELECT {} ON CONFLICT ({}) DO UPDATE SET {}", table,
                     Join(cols), Unnests(types), Join(cols.first(key_cols)),
                     UpdateSet(cols, key_cols));
}

std::string AppendManySql(std::string_view table, Columns cols, Columns types) {
  return fmt::format(
      "INSERT INTO {} ({}) SELECT (SELECT COALESCE(MAX(seq), 0) FROM {}) + "
      "generate_subscripts($1::{}[], 1), {}",
      table, Join(cols), table, types[0], Unnests(types));
}

int64_t ClampLimit(size_t limit) {
  return static_cast<int64_t>(
      std::min<uint64_t>(limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

}  // namespace arbiter::store::postgres
