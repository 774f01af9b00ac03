#include "store/postgres/tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace arbiter::store::postgres {

namespace {

// unnest($first::types[0][], $first+1::types[1][], ...)
std::string Unnest(Columns types, size_t first) {
  std::string out = "unnest(";
  for (size_t i = 0; i < types.size(); ++i) {
    out += fmt::format("{}${}::{}[]", i > 0 ? ", " : "", first + i, types[i]);
  }
  return out + ")";
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
  return fmt::format("INSERT INTO {} ({}) SELECT * FROM {} ON CONFLICT ({}) DO UPDATE SET {}",
                     table, Join(cols), Unnest(types, 1), Join(cols.first(key_cols)),
                     UpdateSet(cols, key_cols));
}

std::string AppendManySql(std::string_view table, Columns cols, Columns types) {
  const Columns rest = cols.subspan(1);
  return fmt::format(
      "INSERT INTO {} ({}) SELECT b.base + u.ord, {} FROM (SELECT COALESCE(MAX(seq), 0) AS base "
      "FROM {}) b CROSS JOIN {} WITH ORDINALITY AS u({}, ord)",
      table, Join(cols), Join(rest, "u."), table, Unnest(types, 1), Join(rest));
}

int64_t ClampLimit(size_t limit) {
  return static_cast<int64_t>(
      std::min<uint64_t>(limit, static_cast<uint64_t>(std::numeric_limits<int64_t>::max())));
}

}  // namespace arbiter::store::postgres
