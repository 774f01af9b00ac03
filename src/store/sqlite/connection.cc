#include "store/sqlite/connection.h"

#include <fmt/format.h>

#include <limits>

namespace arbiter::store::sqlite {
namespace {

bool IsUnavailable(int rc) {
  switch (rc & 0xff) {  // the primary code of an extended one
    case SQLITE_IOERR:
    case SQLITE_FULL:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
    case SQLITE_PROTOCOL:
    case SQLITE_NOLFS:
    case SQLITE_PERM:
      return true;
    default:
      return false;
  }
}

}  // namespace

Status SqliteStatus(int rc, std::string_view sqlite_message, std::string_view what) {
  std::string message = what.empty()
                            ? fmt::format("{} (sqlite error {})", sqlite_message, rc)
                            : fmt::format("{}: {} (sqlite error {})", what, sqlite_message, rc);
  return {IsUnavailable(rc) ? StatusCode::kUnavailable : StatusCode::kInternal, std::move(message)};
}

std::string Row::Text() {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i_));
  int n = sqlite3_column_bytes(s_, i_);
  ++i_;
  return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(n));
}

std::string_view Row::TextView() {
  const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(s_, i_));
  int n = sqlite3_column_bytes(s_, i_);
  ++i_;
  return p == nullptr ? std::string_view() : std::string_view(p, static_cast<size_t>(n));
}

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& path, bool create,
                                                     int busy_timeout_ms) {
  if (sqlite3_threadsafe() == 0) {
    return Internal("store: the SQLite library was built without thread support");
  }
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg = db != nullptr ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return SqliteStatus(rc, msg, fmt::format("store: cannot open {}", path));
  }
  auto conn = std::unique_ptr<Connection>(new Connection(db));
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, busy_timeout_ms);
  return conn;
}

Connection::~Connection() { sqlite3_close_v2(db_); }

Status Connection::Exec(std::string_view sql, std::string_view what) {
  std::string text(sql);
  char* err = nullptr;
  int rc = sqlite3_exec(db_, text.c_str(), nullptr, nullptr, &err);
  if (rc == SQLITE_OK) return Status::Ok();
  std::string msg = err != nullptr ? err : sqlite3_errmsg(db_);
  sqlite3_free(err);
  return SqliteStatus(rc, msg, what);
}

Result<Statement> Connection::Prepare(std::string_view sql) {
  sqlite3_stmt* s = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &s, nullptr);
  if (rc != SQLITE_OK) {
    return SqliteStatus(rc, sqlite3_errmsg(db_), fmt::format("store: cannot prepare '{}'", sql));
  }
  return Statement(s);
}

Result<std::string> Connection::QueryText(std::string_view sql, std::string_view what) {
  Result<Statement> s = Prepare(sql);
  if (!s.ok()) return s.status();
  std::vector<std::string> rows;
  ARBITER_RETURN_IF_ERROR(Query(s->get(), what, rows, [](Row& r) { return r.Text(); }));
  if (rows.empty()) return Internal(fmt::format("{}: no row", what));
  return rows.front();
}

Result<int64_t> Connection::QueryInt(std::string_view sql, std::string_view what) {
  Result<Statement> s = Prepare(sql);
  if (!s.ok()) return s.status();
  std::vector<int64_t> rows;
  ARBITER_RETURN_IF_ERROR(Query(s->get(), what, rows, [](Row& r) { return r.Int(); }));
  if (rows.empty()) return Internal(fmt::format("{}: no row", what));
  return rows.front();
}

int Connection::Bind(sqlite3_stmt* s, int i, const std::string& v) {
  return Bind(s, i, std::string_view(v));
}

int Connection::Bind(sqlite3_stmt* s, int i, std::string_view v) {
  // A null pointer would bind NULL; every text column is NOT NULL.
  return sqlite3_bind_text64(s, i, v.data() != nullptr ? v.data() : "", v.size(), SQLITE_STATIC,
                             SQLITE_UTF8);
}

int Connection::Bind(sqlite3_stmt* s, int i, const Blob& v) {
  return sqlite3_bind_blob64(s, i, v.bytes.data(), v.bytes.size(), SQLITE_STATIC);
}

int Connection::Bind(sqlite3_stmt* s, int i, SeqOrNull v) {
  return v.seq == 0 ? sqlite3_bind_null(s, i) : Bind(s, i, v.seq);
}

int Connection::Bind(sqlite3_stmt* s, int i, uint64_t v) {
  // SQLite integers are signed 64-bit; ids and seqs above 2^63 - 1 are refused, not wrapped.
  if (v > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return SQLITE_RANGE;
  return sqlite3_bind_int64(s, i, static_cast<int64_t>(v));
}

Status Connection::Finish(sqlite3_stmt* s, int rc, std::string_view what) {
  Status st = Status::Ok();
  if (rc == SQLITE_RANGE) {
    st = SqliteStatus(rc, "an integer is out of range (ids and seqs must be below 2^63)", what);
  } else if (rc != SQLITE_OK) {
    st = SqliteStatus(rc, sqlite3_errmsg(db_), what);
  }
  sqlite3_reset(s);
  sqlite3_clear_bindings(s);
  return st;
}

}  // namespace arbiter::store::sqlite
