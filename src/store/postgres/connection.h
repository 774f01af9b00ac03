// A thin RAII layer over one libpq connection: text parameters, rows read left to right, named
// prepared statements that survive a reconnect, pipelining, and SQLSTATEs turned into Status.
//
// Errors: kUnavailable when the connection is lost or cannot be made, and for SQLSTATE classes
// 08 (connection), 53 (insufficient resources: disk full), 57 (operator intervention: shutdown),
// 58 (system/I/O) and 40 (serialization failure, deadlock: a retry may succeed); kInternal
// otherwise (a violated constraint, bad SQL). Messages never contain the connection URI.
//
// Thread safety: a Connection is used by one thread at a time; callers serialize.
#pragma once

#include <libpq-fe.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "common/status.h"

namespace arbiter::store::postgres {

struct ResultDeleter {
  void operator()(PGresult* r) const { PQclear(r); }
};
using PgResult = std::unique_ptr<PGresult, ResultDeleter>;

// The SQLSTATE of a failed result ("" when there is none).
std::string SqlState(const PGresult* r);
// A failed result (or, with r == nullptr, the connection's last error) as a Status; the message is
// "`what`: <server message> (SQLSTATE xxxxx)".
Status PgStatus(PGconn* conn, const PGresult* r, std::string_view what);

// Parameters of one statement, sent as text (bytes: binary), in order $1, $2, ...
class Params {
 public:
  Params& Text(std::string_view v);
  Params& Int(int64_t v);
  Params& Uint(uint64_t v) { return Int(static_cast<int64_t>(v)); }
  Params& Bool(bool v) { return Text(v ? "true" : "false"); }
  Params& Double(double v);           // shortest text that reads back the same double
  Params& Bytes(std::string_view v);  // a BYTEA, any bytes
  // A value already in PostgreSQL's binary format for the parameter's type (the arrays of a
  // multi-row statement, write_plan.cc).
  Params& Binary(std::string v);
  Params& Null();
  // A sequence number: NULL when 0 (the store assigns the next one).
  Params& SeqOrNull(uint64_t v) { return v == 0 ? Null() : Uint(v); }

  int size() const { return static_cast<int>(values_.size()); }
  // Pointers into this object, valid while it is unchanged.
  struct Arrays {
    std::vector<const char*> values;
    std::vector<int> lengths, formats;
  };
  Arrays arrays() const;

 private:
  std::vector<std::string> values_;
  std::vector<bool> null_;
  std::vector<int> formats_;
};

// Reads the columns of one row left to right (text format).
class Row {
 public:
  Row(const PGresult* r, int row) : r_(r), row_(row) {}
  std::string Text();
  // The text of the next column, valid while the result is.
  std::string_view TextView();
  int64_t Int();
  uint64_t Uint() { return static_cast<uint64_t>(Int()); }
  int32_t Int32() { return static_cast<int32_t>(Int()); }
  double Double();
  bool Bool();
  std::string Bytes();  // a BYTEA column

 private:
  const PGresult* r_;
  int row_;
  int i_ = 0;
};

class Connection {
 public:
  // Connects to `uri` (a libpq connection URI); `setup` runs after each (re)connect, before the
  // prepared statements are prepared again (e.g. SET commands).
  static Result<std::unique_ptr<Connection>> Open(const std::string& uri, std::string setup);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Reconnects when the connection was lost (re-running the setup and preparing every statement
  // prepared so far); kUnavailable when it cannot.
  Status EnsureConnected();
  bool broken() const { return PQstatus(conn_) != CONNECTION_OK; }
  // Whether a transaction is open (in progress or failed).
  bool InTransaction() const;

  // Runs one or more statements without parameters (simple query protocol).
  Status Exec(std::string_view sql, std::string_view what);
  // Prepares `sql` as the statement `name`, now and after every reconnect.
  Status Prepare(const std::string& name, const std::string& sql);
  // Runs a prepared statement or a statement with parameters; the rows it returned.
  Result<PgResult> RunPrepared(const std::string& name, const Params& p, std::string_view what);
  Result<PgResult> Run(const std::string& sql, const Params& p, std::string_view what);

  // Runs `sql` and reads every row with `read(Row&)`, appending to `out`.
  template <typename T, typename Read>
  Status Query(const std::string& sql, const Params& p, std::string_view what, std::vector<T>& out,
               Read read) {
    Result<PgResult> r = Run(sql, p, what);
    if (!r.ok()) return r.status();
    ReadRows(r->get(), out, read);
    return Status::Ok();
  }
  template <typename T, typename Read>
  Status QueryPrepared(const std::string& name, const Params& p, std::string_view what,
                       std::vector<T>& out, Read read) {
    Result<PgResult> r = RunPrepared(name, p, what);
    if (!r.ok()) return r.status();
    ReadRows(r->get(), out, read);
    return Status::Ok();
  }
  template <typename T, typename Read>
  static void ReadRows(const PGresult* r, std::vector<T>& out, Read read) {
    const int n = PQntuples(r);
    out.reserve(out.size() + static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      Row row(r, i);
      out.push_back(read(row));
    }
  }

  // ---- Pipelining (libpq pipeline mode): send many statements, then read their results. ----
  Status EnterPipeline();
  // Leaves pipeline mode; every result must have been read.
  Status ExitPipeline();
  // Queues a prepared statement or an SQL statement with parameters.
  bool SendPrepared(const std::string& name, const Params& p);
  bool SendQuery(const std::string& sql, const Params& p);
  // Asks the server to flush the results so far, and sends what is buffered.
  bool Flush();
  // Ends the pipeline's current segment (a Sync).
  bool Sync();
  // The next result of the pipeline: of the next statement queued (then consumes its end), or
  // the PGRES_PIPELINE_SYNC of a Sync. Null when the connection failed.
  PgResult NextPipelineResult();

  PGconn* get() { return conn_; }

 private:
  explicit Connection(PGconn* conn, std::string setup) : conn_(conn), setup_(std::move(setup)) {}
  Status Setup();

  PGconn* conn_;
  std::string setup_;
  std::vector<std::pair<std::string, std::string>> prepared_;  // name, sql
};

}  // namespace arbiter::store::postgres
