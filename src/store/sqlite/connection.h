// A thin RAII layer over one sqlite3 connection: prepared statements, binding, stepping, and
// SQLite result codes turned into Status.
//
// Thread safety: a Connection and its statements are used by one thread at a time (the connections
// are opened with SQLITE_OPEN_NOMUTEX); callers serialize.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace arbiter::store::sqlite {

// kUnavailable for I/O and locking errors (disk full, read-only, cannot open, busy), kInternal
// otherwise. The message is "`what`: <sqlite message> (sqlite error <extended code>)".
Status SqliteStatus(int rc, std::string_view sqlite_message, std::string_view what);

struct StatementDeleter {
  void operator()(sqlite3_stmt* s) const { sqlite3_finalize(s); }
};
using Statement = std::unique_ptr<sqlite3_stmt, StatementDeleter>;

// Bound as a BLOB (any bytes) instead of TEXT.
struct Blob {
  const std::string& bytes;
};
// Bound as NULL when 0: an INTEGER PRIMARY KEY given NULL takes max(rowid) + 1.
struct SeqOrNull {
  uint64_t seq;
};

// Reads the columns of the current row left to right.
class Row {
 public:
  explicit Row(sqlite3_stmt* s) : s_(s) {}
  std::string Text();
  // The text of the next column, valid until the statement steps again.
  std::string_view TextView();
  int64_t Int() { return sqlite3_column_int64(s_, i_++); }
  uint64_t Uint() { return static_cast<uint64_t>(Int()); }
  int32_t Int32() { return static_cast<int32_t>(Int()); }
  bool Bool() { return Int() != 0; }
  double Double() { return sqlite3_column_double(s_, i_++); }
  std::string Bytes() { return Text(); }  // a BLOB column

 private:
  sqlite3_stmt* s_;
  int i_ = 0;
};

class Connection {
 public:
  // Opens `path` read-write, creating it when `create`; extended result codes on.
  static Result<std::unique_ptr<Connection>> Open(const std::string& path, bool create,
                                                  int busy_timeout_ms);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* db() const { return db_; }

  // Runs one or more statements that return no rows we need.
  Status Exec(std::string_view sql, std::string_view what);
  // Prepares a statement kept for the connection's lifetime.
  Result<Statement> Prepare(std::string_view sql);
  // The single text value a statement (e.g. a PRAGMA) returns.
  Result<std::string> QueryText(std::string_view sql, std::string_view what);
  // The single integer a statement returns (0 for NULL).
  Result<int64_t> QueryInt(std::string_view sql, std::string_view what);

  // Binds `args` to ?1, ?2, ... and steps `s` to completion; the statement is reset after.
  template <typename... Args>
  Status Run(sqlite3_stmt* s, std::string_view what, const Args&... args) {
    int rc = BindAll(s, args...);
    if (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW || rc == SQLITE_DONE) rc = SQLITE_OK;
    }
    return Finish(s, rc, what);
  }

  // Binds `args`, steps `s` and appends read(Row&) of every row to `out`.
  template <typename T, typename Read, typename... Args>
  Status Query(sqlite3_stmt* s, std::string_view what, std::vector<T>& out, Read read,
               const Args&... args) {
    int rc = BindAll(s, args...);
    while (rc == SQLITE_OK) {
      rc = sqlite3_step(s);
      if (rc == SQLITE_ROW) {
        Row row(s);
        out.push_back(read(row));
        rc = SQLITE_OK;
      } else if (rc == SQLITE_DONE) {
        rc = SQLITE_OK;
        break;
      }
    }
    return Finish(s, rc, what);
  }

  // True while a transaction is open (SQLite rolls a transaction back by itself after some
  // errors, e.g. disk full or an I/O error).
  bool InTransaction() const { return sqlite3_get_autocommit(db_) == 0; }

 private:
  explicit Connection(sqlite3* db) : db_(db) {}

  static int Bind(sqlite3_stmt* s, int i, const std::string& v);
  static int Bind(sqlite3_stmt* s, int i, std::string_view v);
  static int Bind(sqlite3_stmt* s, int i, const Blob& v);
  static int Bind(sqlite3_stmt* s, int i, SeqOrNull v);
  static int Bind(sqlite3_stmt* s, int i, int64_t v) { return sqlite3_bind_int64(s, i, v); }
  static int Bind(sqlite3_stmt* s, int i, uint64_t v);
  static int Bind(sqlite3_stmt* s, int i, int32_t v) { return sqlite3_bind_int64(s, i, v); }
  static int Bind(sqlite3_stmt* s, int i, bool v) { return sqlite3_bind_int(s, i, v ? 1 : 0); }
  static int Bind(sqlite3_stmt* s, int i, double v) { return sqlite3_bind_double(s, i, v); }

  template <typename... Args>
  static int BindAll([[maybe_unused]] sqlite3_stmt* s, const Args&... args) {
    int rc = SQLITE_OK;
    [[maybe_unused]] int i = 0;
    ((rc = rc == SQLITE_OK ? Bind(s, ++i, args) : rc), ...);
    return rc;
  }

  // Turns `rc` into a Status (reading the connection's message first), then resets `s` and
  // clears its bindings.
  Status Finish(sqlite3_stmt* s, int rc, std::string_view what);

  sqlite3* db_;
};

}  // namespace arbiter::store::sqlite
