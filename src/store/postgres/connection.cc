#include "store/postgres/connection.h"

#include <fmt/format.h>

#include <charconv>
#include <cstdlib>
#include <utility>

namespace arbiter::store::postgres {
namespace {

// libpq prints notices (e.g. "relation already exists, skipping") to stderr by default.
void IgnoreNotice(void* /*arg*/, const char* /*message*/) {}

std::string Trimmed(const char* s) {
  std::string out = s == nullptr ? "" : s;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

bool UnavailableState(std::string_view state) {
  if (state.size() != 5) return false;
  const std::string_view cls = state.substr(0, 2);
  return cls == "08" || cls == "53" || cls == "57" || cls == "58" || cls == "40";
}

}  // namespace

std::string SqlState(const PGresult* r) {
  if (r == nullptr) return "";
  const char* s = PQresultErrorField(r, PG_DIAG_SQLSTATE);
  return s == nullptr ? "" : s;
}

Status PgStatus(PGconn* conn, const PGresult* r, std::string_view what) {
  const std::string state = SqlState(r);
  std::string message = Trimmed(r != nullptr ? PQresultErrorMessage(r) : nullptr);
  if (message.empty() && conn != nullptr) message = Trimmed(PQerrorMessage(conn));
  if (message.starts_with("ERROR:  ")) message.erase(0, 8);
  const bool lost = conn == nullptr || PQstatus(conn) != CONNECTION_OK;
  const StatusCode code = lost || state.empty() || UnavailableState(state)
                              ? StatusCode::kUnavailable
                              : StatusCode::kInternal;
  if (state.empty()) return {code, fmt::format("{}: {}", what, message)};
  return {code, fmt::format("{}: {} (SQLSTATE {})", what, message, state)};
}

// ---- Params ----------------------------------------------------------------------------------

Params& Params::Text(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  formats_.push_back(0);
  return *this;
}

Params& Params::Int(int64_t v) { return Text(std::to_string(v)); }

Params& Params::Double(double v) { return Text(fmt::format("{}", v)); }

Params& Params::Bytes(std::string_view v) {
  values_.emplace_back(v);
  null_.push_back(false);
  formats_.push_back(1);
  return *this;
}

Params& Params::Binary(std::string v) {
  values_.push_back(std::move(v));
  null_.push_back(false);
  formats_.push_back(1);
  return *this;
}

Params& Params::Null() {
  values_.emplace_back();
  null_.push_back(true);
  formats_.push_back(0);
  return *this;
}

Params::Arrays Params::arrays() const {
  Arrays a;
  a.values.reserve(values_.size());
  for (size_t i = 0; i < values_.size(); ++i) {
    a.values.push_back(null_[i] ? nullptr : values_[i].c_str());
    a.lengths.push_back(static_cast<int>(values_[i].size()));
  }
  a.formats = formats_;
  return a;
}

// ---- Row -------------------------------------------------------------------------------------

std::string Row::Text() {
  const int i = i_++;
  return std::string(PQgetvalue(r_, row_, i), static_cast<size_t>(PQgetlength(r_, row_, i)));
}

std::string_view Row::TextView() {
  const int i = i_++;
  return std::string_view(PQgetvalue(r_, row_, i), static_cast<size_t>(PQgetlength(r_, row_, i)));
}

int64_t Row::Int() {
  const int i = i_++;
  const char* s = PQgetvalue(r_, row_, i);
  int64_t v = 0;
  std::from_chars(s, s + PQgetlength(r_, row_, i), v);
  return v;
}

double Row::Double() { return std::strtod(Text().c_str(), nullptr); }

bool Row::Bool() {
  const int i = i_++;
  const char* s = PQgetvalue(r_, row_, i);
  return s[0] == 't' || s[0] == '1';
}

std::string Row::Bytes() {
  const int i = i_++;
  size_t n = 0;
  unsigned char* bytes =
      PQunescapeBytea(reinterpret_cast<const unsigned char*>(PQgetvalue(r_, row_, i)), &n);
  if (bytes == nullptr) return "";
  std::string out(reinterpret_cast<const char*>(bytes), n);
  PQfreemem(bytes);
  return out;
}

// ---- Connection ------------------------------------------------------------------------------

Result<std::unique_ptr<Connection>> Connection::Open(const std::string& uri, std::string setup) {
  PGconn* c = PQconnectdb(uri.c_str());
  if (c == nullptr) return Status(StatusCode::kUnavailable, "store: cannot allocate a connection");
  auto conn = std::unique_ptr<Connection>(new Connection(c, std::move(setup)));
  if (PQstatus(c) != CONNECTION_OK) {
    return Status(StatusCode::kUnavailable, fmt::format("store: cannot connect to PostgreSQL: {}",
                                                        Trimmed(PQerrorMessage(c))));
  }
  ARBITER_RETURN_IF_ERROR(conn->Setup());
  return conn;
}

Connection::~Connection() { PQfinish(conn_); }

Status Connection::Setup() {
  PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  if (!setup_.empty()) ARBITER_RETURN_IF_ERROR(Exec(setup_, "store: connection setup"));
  for (const auto& [name, sql] : prepared_) {
    PgResult r(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
      return PgStatus(conn_, r.get(), fmt::format("store: prepare {}", name));
    }
  }
  return Status::Ok();
}

Status Connection::EnsureConnected() {
  if (PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Status(StatusCode::kUnavailable, fmt::format("store: cannot reconnect to PostgreSQL: {}",
                                                        Trimmed(PQerrorMessage(conn_))));
  }
  return Setup();
}

bool Connection::InTransaction() const {
  const PGTransactionStatusType t = PQtransactionStatus(conn_);
  return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

Status Connection::Exec(std::string_view sql, std::string_view what) {
  PgResult r(PQexec(conn_, std::string(sql).c_str()));
  const ExecStatusType s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return PgStatus(conn_, r.get(), what);
  return Status::Ok();
}

Status Connection::Prepare(const std::string& name, const std::string& sql) {
  PgResult r(PQprepare(conn_, name.c_str(), sql.c_str(), 0, nullptr));
  if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) {
    return PgStatus(conn_, r.get(), fmt::format("store: prepare {}", name));
  }
  prepared_.emplace_back(name, sql);
  return Status::Ok();
}

namespace {
Result<PgResult> Checked(PGconn* conn, PGresult* raw, std::string_view what) {
  PgResult r(raw);
  const ExecStatusType s = PQresultStatus(r.get());
  if (s != PGRES_COMMAND_OK && s != PGRES_TUPLES_OK) return PgStatus(conn, r.get(), what);
  return r;
}
}  // namespace

Result<PgResult> Connection::RunPrepared(const std::string& name, const Params& p,
                                         std::string_view what) {
  const Params::Arrays a = p.arrays();
  return Checked(conn_,
                 PQexecPrepared(conn_, name.c_str(), p.size(), a.values.data(), a.lengths.data(),
                                a.formats.data(), 0),
                 what);
}

Result<PgResult> Connection::Run(const std::string& sql, const Params& p, std::string_view what) {
  const Params::Arrays a = p.arrays();
  return Checked(conn_,
                 PQexecParams(conn_, sql.c_str(), p.size(), nullptr, a.values.data(),
                              a.lengths.data(), a.formats.data(), 0),
                 what);
}

Status Connection::EnterPipeline() {
  if (PQenterPipelineMode(conn_) != 1) return PgStatus(conn_, nullptr, "store: pipeline mode");
  return Status::Ok();
}

Status Connection::ExitPipeline() {
  if (PQpipelineStatus(conn_) == PQ_PIPELINE_OFF) return Status::Ok();
  if (PQexitPipelineMode(conn_) != 1) return PgStatus(conn_, nullptr, "store: pipeline mode");
  return Status::Ok();
}

bool Connection::SendPrepared(const std::string& name, const Params& p) {
  const Params::Arrays a = p.arrays();
  return PQsendQueryPrepared(conn_, name.c_str(), p.size(), a.values.data(), a.lengths.data(),
                             a.formats.data(), 0) == 1;
}

bool Connection::SendQuery(const std::string& sql, const Params& p) {
  const Params::Arrays a = p.arrays();
  return PQsendQueryParams(conn_, sql.c_str(), p.size(), nullptr, a.values.data(), a.lengths.data(),
                           a.formats.data(), 0) == 1;
}

bool Connection::Flush() { return PQsendFlushRequest(conn_) == 1 && PQflush(conn_) == 0; }

bool Connection::Sync() { return PQpipelineSync(conn_) == 1; }

PgResult Connection::NextPipelineResult() {
  PgResult r(PQgetResult(conn_));
  if (r == nullptr) return r;
  if (PQresultStatus(r.get()) == PGRES_PIPELINE_SYNC) return r;
  // The end of this statement's results.
  while (PGresult* extra = PQgetResult(conn_)) PQclear(extra);
  return r;
}

}  // namespace arbiter::store::postgres
