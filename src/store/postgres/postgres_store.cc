#include "store/postgres/postgres_store.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <limits>
#include <mutex>
#include <span>
#include <string_view>
#include <thread>
#include <variant>

#include "store/commit_stats.h"
#include "store/job_history_sql.h"
#include "store/job_waits.h"
#include "store/open_store.h"
#include "store/postgres/connection.h"
#include "store/postgres/migrations.h"
#include "store/postgres/tables.h"
#include "store/postgres/write_plan.h"
#include "store/usage_rollup.h"

namespace arbiter::store {
namespace {

using postgres::Call;
using postgres::Connection;
using postgres::Params;
using postgres::PgResult;
using postgres::PgStatus;
using postgres::Row;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Every connection: acknowledged means flushed to the WAL on PostgreSQL's disk (the server's
// default, set here so a database or role default cannot weaken it), and UTC milliseconds.
constexpr std::string_view kSetup =
    "SET synchronous_commit = on; SET application_name = 'arbiter'; SET TIME ZONE 'UTC'";

// The store's clock: PostgreSQL's, in milliseconds since the epoch.
constexpr std::string_view kClockMs = "(extract(epoch from clock_timestamp()) * 1000)::bigint";

constexpr std::string_view kFenceSqlState = "AR001";

// ---- The writer: the write connection; used by the writer thread only. ----------------------

struct GroupOutcome {
  std::vector<Status> statuses;     // one per batch, in order
  std::vector<uint64_t> commit_us;  // one per committed transaction
};

class Writer {
 public:
  static Result<std::unique_ptr<Writer>> Create(std::unique_ptr<Connection> conn);
  GroupOutcome CommitGroup(std::span<const WriteBatch* const> batches);
  void SetFence(uint64_t term) { fence_.store(term, std::memory_order_release); }

 private:
  explicit Writer(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  Status PrepareAll();

  // What one pipelined transaction did.
  struct Attempt {
    Status error = Status::Ok();                              // the first failure
    bool fenced = false;                                      // the fence refused the transaction
    size_t failed_call = std::numeric_limits<size_t>::max();  // the call that failed, if any
  };
  // Step 1: BEGIN, the fence, every call and COMMIT as one pipeline.
  Attempt Pipelined(const std::vector<Call>& calls, uint64_t fence);
  // Step 2: every batch in its own savepoint of one transaction, statement by statement.
  void WithSavepoints(std::span<const WriteBatch* const> batches, const std::vector<Call>& calls,
                      uint64_t fence, GroupOutcome& out);
  Status CallError(const Call& c, const PGresult* r);
  Status Fenced(const PGresult* r);
  void RollbackIfOpen();

  std::atomic<uint64_t> fence_{0};
  std::unique_ptr<Connection> conn_;
};

Result<std::unique_ptr<Writer>> Writer::Create(std::unique_ptr<Connection> conn) {
  auto w = std::unique_ptr<Writer>(new Writer(std::move(conn)));
  ARBITER_RETURN_IF_ERROR(w->PrepareAll());
  return w;
}

Status Writer::PrepareAll() {
  for (const auto& [name, sql] : postgres::WriteStatements()) {
    ARBITER_RETURN_IF_ERROR(conn_->Prepare(name, sql));
  }
  return Status::Ok();
}

Status Writer::CallError(const Call& c, const PGresult* r) {
  if (c.op == nullptr) {
    return PgStatus(conn_->get(), r, fmt::format("store: {} ({} ops)", c.stmt, c.rows));
  }
  return PgStatus(conn_->get(), r, fmt::format("store: {}", DescribeWriteOp(*c.op)));
}

Status Writer::Fenced(const PGresult* r) {
  std::string why = r != nullptr ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : "";
  return {StatusCode::kUnavailable, fmt::format("{} {}", kFencedPrefix, why)};
}

void Writer::RollbackIfOpen() {
  if (!conn_->broken() && conn_->InTransaction()) (void)conn_->Exec("ROLLBACK", "store: rollback");
}

// Sends in chunks and reads each chunk's results before the next, so that neither side blocks on
// a full socket buffer while the other waits.
Writer::Attempt Writer::Pipelined(const std::vector<Call>& calls, uint64_t fence) {
  Attempt a;
  constexpr size_t kChunk = 256;
  // Tags of the statements sent and not yet read: a call's index, or one of these.
  constexpr size_t kBegin = std::numeric_limits<size_t>::max() - 2;
  constexpr size_t kFence = kBegin + 1;
  constexpr size_t kCommit = kBegin + 2;
  std::deque<size_t> pending;
  bool failed = false;
  auto lost = [&] {
    a.error = PgStatus(conn_->get(), nullptr, "store: connection lost");
    failed = true;
  };
  auto read = [&](size_t tag) {
    PgResult r = conn_->NextPipelineResult();
    if (r == nullptr) return lost();
    const ExecStatusType s = PQresultStatus(r.get());
    if (s != PGRES_FATAL_ERROR || failed) return;
    failed = true;
    if (tag == kFence && postgres::SqlState(r.get()) == kFenceSqlState) {
      a.fenced = true;
      a.error = Fenced(r.get());
    } else if (tag < calls.size()) {
      a.failed_call = tag;
      a.error = CallError(calls[tag], r.get());
    } else {
      a.error = PgStatus(conn_->get(), r.get(),
                         tag == kCommit ? "store: commit" : "store: begin a transaction");
    }
  };
  auto drain = [&] {
    while (!pending.empty() && !(failed && conn_->broken())) {
      read(pending.front());
      pending.pop_front();
    }
  };
  if (Status st = conn_->EnterPipeline(); !st.ok()) {
    a.error = st;
    return a;
  }
  bool sent = conn_->SendQuery("BEGIN", Params());
  pending.push_back(kBegin);
  if (fence != 0) {
    sent = sent && conn_->SendPrepared("fence", Params().Uint(fence));
    pending.push_back(kFence);
  }
  for (size_t i = 0; sent && !failed && i < calls.size(); ++i) {
    sent = conn_->SendPrepared(calls[i].stmt, calls[i].params);
    pending.push_back(i);
    if (pending.size() >= kChunk) {
      sent = sent && conn_->Flush();
      if (sent) drain();
    }
  }
  if (sent && !failed) {
    sent = conn_->SendQuery("COMMIT", Params());
    pending.push_back(kCommit);
  }
  sent = sent && conn_->Sync();
  if (!sent) {
    lost();
    (void)conn_->ExitPipeline();
    return a;
  }
  drain();
  if (!conn_->broken()) {
    PgResult sync = conn_->NextPipelineResult();  // the Sync's
    if (sync == nullptr) lost();
  }
  if (Status st = conn_->ExitPipeline(); !st.ok() && a.error.ok()) a.error = st;
  if (!a.error.ok()) RollbackIfOpen();
  return a;
}

void Writer::WithSavepoints(std::span<const WriteBatch* const> batches,
                            const std::vector<Call>& calls, uint64_t fence, GroupOutcome& out) {
  auto all = [&](const Status& st) {
    for (auto& s : out.statuses) s = st;
  };
  const auto start = std::chrono::steady_clock::now();
  if (Status st = conn_->Exec("BEGIN", "store: begin a transaction"); !st.ok()) return all(st);
  if (fence != 0) {
    auto r = conn_->RunPrepared("fence", Params().Uint(fence), "store: fence");
    if (!r.ok()) {
      // The fence's own refusal (SQLSTATE AR001) reads "... (SQLSTATE AR001)".
      const bool fenced =
          r.status().message().ends_with(fmt::format("(SQLSTATE {})", kFenceSqlState));
      Status st =
          fenced ? Status(StatusCode::kUnavailable,
                          fmt::format("{} the leadership term {} is over", kFencedPrefix, fence))
                 : r.status();
      RollbackIfOpen();
      return all(st);
    }
  }
  size_t next = 0;
  for (size_t b = 0; b < batches.size(); ++b) {
    if (batches[b]->empty()) continue;
    if (Status st = conn_->Exec("SAVEPOINT batch", "store: savepoint"); !st.ok()) {
      RollbackIfOpen();
      return all(st);
    }
    Status batch_st = Status::Ok();
    for (; next < calls.size() && calls[next].batch == b; ++next) {
      if (!batch_st.ok()) continue;
      auto r = conn_->RunPrepared(calls[next].stmt, calls[next].params,
                                  fmt::format("store: {}", DescribeWriteOp(*calls[next].op)));
      if (!r.ok()) batch_st = r.status();
    }
    if (conn_->broken()) return all(batch_st);
    out.statuses[b] = batch_st;
    const char* end = batch_st.ok() ? "RELEASE SAVEPOINT batch"
                                    : "ROLLBACK TO SAVEPOINT batch; RELEASE SAVEPOINT batch";
    if (Status st = conn_->Exec(end, "store: savepoint"); !st.ok()) {
      RollbackIfOpen();
      return all(st);
    }
  }
  if (Status st = conn_->Exec("COMMIT", "store: commit"); !st.ok()) {
    RollbackIfOpen();
    return all(st);
  }
  out.commit_us.push_back(
      static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                std::chrono::steady_clock::now() - start)
                                .count()));
}

// 1. If no batch has an op, there is nothing to commit: all succeed (a barrier).
// 2. Reconnect if the connection was lost; if that fails, every batch gets the error.
// 3. One pipeline: BEGIN, the fence, the group's statements (PlanGroup: one multi-row statement
//    per table for the ops every submission writes), COMMIT. The path of nearly every group: one
//    round trip, one WAL flush for the group.
// 4. Fenced: every batch fails with the fence's status. The connection lost: every batch fails
//    with kUnavailable (a commit in flight may have happened: "committed, reply lost").
// 5. A statement failed: the transaction was rolled back. If it wrote one op of the only batch
//    with ops, that batch fails with its error. Otherwise (several batches, or a multi-row
//    statement, whose error names no op) redo the group op by op, each batch in its own
//    savepoint, so the failing batch fails alone with the error of its op.
GroupOutcome Writer::CommitGroup(std::span<const WriteBatch* const> batches) {
  GroupOutcome out;
  out.statuses.resize(batches.size());
  if (std::all_of(batches.begin(), batches.end(), [](const auto* b) { return b->empty(); })) {
    return out;
  }
  if (Status st = conn_->EnsureConnected(); !st.ok()) {
    for (auto& s : out.statuses) s = st;
    return out;
  }
  const std::vector<Call> calls = postgres::PlanGroup(batches);
  const uint64_t fence = fence_.load(std::memory_order_acquire);
  const auto start = std::chrono::steady_clock::now();
  Attempt a = Pipelined(calls, fence);
  if (a.error.ok()) {
    out.commit_us.push_back(
        static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                  std::chrono::steady_clock::now() - start)
                                  .count()));
    return out;
  }
  const bool statement_failed = a.failed_call < calls.size() && !conn_->broken();
  const bool retry =
      statement_failed && (calls[a.failed_call].op == nullptr ||
                           std::count_if(batches.begin(), batches.end(),
                                         [](const auto* b) { return !b->empty(); }) > 1);
  if (!retry) {
    // One batch with ops (it gets the error), or a failure of the whole transaction (every batch
    // with ops gets it). Empty batches are barriers: they never fail.
    for (size_t b = 0; b < batches.size(); ++b) {
      if (!batches[b]->empty()) out.statuses[b] = a.error;
    }
    return out;
  }
  WithSavepoints(batches, postgres::EncodeOps(batches), fence, out);
  return out;
}

// ---- The reader: the read connection; callers hold the store's read mutex. -------------------

class Reader {
 public:
  static Result<std::unique_ptr<Reader>> Create(std::unique_ptr<Connection> conn) {
    auto r = std::unique_ptr<Reader>(new Reader(std::move(conn)));
    ARBITER_RETURN_IF_ERROR(r->PrepareAll());
    return r;
  }

  Result<StoreState> Load(const LoadOptions& o);
  Result<std::vector<JobRecord>> ListJobs(const JobQuery& q);
  template <typename T, typename Read>
  Result<std::vector<T>> Query(const char* stmt, const Params& p, std::string_view what,
                               Read read) {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    std::vector<T> out;
    ARBITER_RETURN_IF_ERROR(conn_->QueryPrepared(stmt, p, what, out, read));
    return out;
  }
  // A statement with parameters, not prepared (one of few variants, run rarely).
  template <typename T, typename Read>
  Result<std::vector<T>> QueryText(const std::string& sql, const Params& p, std::string_view what,
                                   Read read) {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    Result<postgres::PgResult> r = conn_->Run(sql, p, what);
    if (!r.ok()) return r.status();
    std::vector<T> out;
    postgres::Connection::ReadRows(r->get(), out, read);
    return out;
  }
  Result<std::vector<AuditRecord>> QueryAudit(const AuditQuery& q);

 private:
  explicit Reader(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  Status PrepareAll();
  Status LoadInto(StoreState& s, const LoadOptions& o);

  std::unique_ptr<Connection> conn_;
};

Status Reader::PrepareAll() {
  using namespace postgres;  // NOLINT(google-build-using-namespace): the SQL builders
  const std::pair<const char*, std::string> all[] = {
      {"tenants", SelectSql("tenants", kTenantCols, "ORDER BY name")},
      {"queues", SelectSql("queues", kQueueCols, "ORDER BY name")},
      {"users", SelectSql("users", kUserCols, "ORDER BY name")},
      {"tokens", SelectSql("tokens", kTokenCols, "ORDER BY id")},
      {"priority_classes", SelectSql("priority_classes", kPriorityClassCols, "ORDER BY name")},
      {"gpu_models", SelectSql("gpu_models", kGpuModelCols, "ORDER BY name")},
      {"nodes", SelectSql("nodes", kNodeCols, "ORDER BY name")},
      {"jobs", SelectSql("jobs", kJobCols, "ORDER BY id")},
      {"kv", SelectSql("kv", kKvCols, "ORDER BY key")},
      {"job_by_id", SelectSql("jobs", kJobCols, "WHERE id = $1")},
      {"job_by_key", SelectSql("jobs", kJobCols,
                               "WHERE tenant = $1 AND \"user\" = $2 AND idempotency_key = $3 "
                               "AND idempotency_key <> ''")},
      {"live_jobs", SelectSql("jobs", kJobCols, LiveJobsWhere("strpos"))},
      {"latest_finished", SelectSql("jobs", kJobCols, LatestFinishedWhere("$1"))},
      {"services", SelectSql("services", kServiceCols, "ORDER BY name")},
      {"webhooks", SelectSql("webhooks", kWebhookCols, "ORDER BY id")},
      {"pending_deliveries", SelectSql("webhook_deliveries", kWebhookDeliveryCols,
                                       "WHERE state = 'pending' ORDER BY id")},
      // The highest id ever used: noted in store_meta when a job row is deleted, else the rows'.
      {"maxima",
       "SELECT greatest((SELECT value FROM store_meta WHERE key = 'max_job_id'), "
       "(SELECT coalesce(max(id), 0) FROM jobs)), (SELECT coalesce(max(seq), 0) FROM job_events)"},
      {"events_of_job", SelectSql("job_events", kEventCols, "WHERE job_id = $1 ORDER BY seq")},
      {"events_since", SelectSql("job_events", kEventCols, "WHERE seq > $1 ORDER BY seq LIMIT $2")},
      {"usage", SelectSql("usage", kUsageCols, "WHERE end_ms > $1 AND start_ms < $2 ORDER BY seq")},
      {"audit", SelectSql("audit", kAuditCols, "WHERE seq > $1 ORDER BY seq LIMIT $2")},
      {"cluster_samples", SelectSql("cluster_samples", kClusterSampleCols,
                                    "WHERE at_ms >= $1 AND at_ms < $2 ORDER BY at_ms")},
      // Rows are at most an hour long: the second bound lets the key (at_ms first) narrow the scan.
      {"gpu_samples",
       SelectSql("gpu_samples", kGpuSampleCols,
                 "WHERE at_ms < $2 AND at_ms > $1::bigint - 3600000 AND "
                 "at_ms + resolution_ms > $1::bigint ORDER BY at_ms, node, gpu, resolution_ms")},
      {"serving_stats", SelectSql("serving_stats", kServingStatCols,
                                  "WHERE minute_ms >= $1 AND minute_ms < $2 "
                                  "ORDER BY minute_ms, service, revision")},
      {"deliveries_of_hook",
       SelectSql("webhook_deliveries", kWebhookDeliveryCols,
                 "WHERE webhook_id = $1 ORDER BY created_at_ms DESC, id DESC LIMIT $2")},
      {"job_facts", SelectSql("job_facts", kJobFactCols,
                              "WHERE at_ms >= $1 AND since_ms < $2 ORDER BY at_ms, seq")},
      {"events_before",
       SelectSql("job_events", kEventCols, "WHERE seq > $2 AND at_ms < $1 ORDER BY seq LIMIT $3")},
      {"usage_before",
       SelectSql("usage", kUsageCols, "WHERE seq > $2 AND end_ms < $1 ORDER BY seq LIMIT $3")},
  };
  for (const auto& [name, sql] : all) ARBITER_RETURN_IF_ERROR(conn_->Prepare(name, sql));
  return Status::Ok();
}

Status Reader::LoadInto(StoreState& s, const LoadOptions& o) {
  using namespace postgres;  // NOLINT(google-build-using-namespace): the row readers
  Connection& c = *conn_;
  const std::string_view what = "store: load";
  const Params none;
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("tenants", none, what, s.tenants, ReadTenant));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("queues", none, what, s.queues, ReadQueue));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("users", none, what, s.users, ReadUser));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("tokens", none, what, s.tokens, ReadToken));
  ARBITER_RETURN_IF_ERROR(
      c.QueryPrepared("priority_classes", none, what, s.priority_classes, ReadPriorityClass));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("gpu_models", none, what, s.gpu_models, ReadGpuModel));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("nodes", none, what, s.nodes, ReadNode));
  if (o.finished_max < 0 && o.finished_since_ms <= 0) {
    ARBITER_RETURN_IF_ERROR(c.QueryPrepared("jobs", none, what, s.jobs, ReadJob));
  } else {
    // The live jobs and those still stopping (one partial index), and the latest finished by
    // id, of which those updated within the window are kept.
    ARBITER_RETURN_IF_ERROR(c.QueryPrepared("live_jobs", none, what, s.jobs, ReadJob));
    std::vector<JobRecord> more;
    const int64_t max = o.finished_max < 0 ? std::numeric_limits<int64_t>::max() : o.finished_max;
    ARBITER_RETURN_IF_ERROR(
        c.QueryPrepared("latest_finished", Params().Int(max), what, more, ReadJob));
    KeepUpdatedSince(more, o.finished_since_ms);
    MergeLoadedJobs(s.jobs, std::move(more));
    SortUniqueJobs(s.jobs);
  }
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("kv", none, what, s.kv, ReadKv));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("services", none, what, s.services, ReadService));
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("webhooks", none, what, s.webhooks, ReadWebhook));
  ARBITER_RETURN_IF_ERROR(
      c.QueryPrepared("pending_deliveries", none, what, s.pending_deliveries, ReadWebhookDelivery));
  std::vector<std::pair<uint64_t, uint64_t>> maxima;
  ARBITER_RETURN_IF_ERROR(c.QueryPrepared("maxima", none, what, maxima, [](Row& r) {
    const uint64_t job = r.Uint();
    return std::pair<uint64_t, uint64_t>(job, r.Uint());
  }));
  if (maxima.size() != 1) return Internal("store: load: store_meta has no max_job_id");
  s.max_job_id = maxima[0].first;
  s.max_event_seq = maxima[0].second;
  return Status::Ok();
}

Result<StoreState> Reader::Load(const LoadOptions& o) {
  ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
  // One snapshot for every SELECT: a batch is wholly in it or not at all.
  ARBITER_RETURN_IF_ERROR(
      conn_->Exec("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY", "store: load: begin"));
  StoreState state;
  Status st = LoadInto(state, o);
  if (!st.ok()) {
    if (!conn_->broken()) (void)conn_->Exec("ROLLBACK", "store: load: rollback");
    return st;
  }
  ARBITER_RETURN_IF_ERROR(conn_->Exec("COMMIT", "store: load: end"));
  return state;
}

Result<std::vector<JobRecord>> Reader::ListJobs(const JobQuery& q) {
  ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
  // Only the filters asked for are in the SQL, so that the planner picks the index that narrows
  // most.
  const JobQuerySql sql = BuildJobQuerySql(q, [](size_t i) { return fmt::format("${}", i); });
  Params p;
  for (const SqlParam& v : sql.params) {
    if (std::holds_alternative<int64_t>(v)) {
      p.Int(std::get<int64_t>(v));
    } else {
      p.Text(std::get<std::string>(v));
    }
  }
  std::vector<JobRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(postgres::SelectSql("jobs", kJobCols, "WHERE " + sql.where + " " + sql.tail), p,
                   "store: list jobs", out, ReadJob));
  return out;
}

Result<std::vector<AuditRecord>> Reader::QueryAudit(const AuditQuery& q) {
  ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
  // Only the filters asked for are in the SQL, so that the planner picks the index that narrows
  // most (docs/governance.md).
  Params p;
  int n = 0;
  auto next = [&n] { return fmt::format("${}", ++n); };
  const int64_t after =
      static_cast<int64_t>(std::min<uint64_t>(q.after_seq, std::numeric_limits<int64_t>::max()));
  std::string where = "seq > " + next();
  p.Int(after);
  if (q.since_ms) {
    where += " AND at_ms >= " + next();
    p.Int(*q.since_ms);
  }
  if (q.until_ms) {
    where += " AND at_ms < " + next();
    p.Int(*q.until_ms);
  }
  if (!q.actor.empty()) {
    where += " AND actor = " + next();
    p.Text(q.actor);
  }
  if (!q.action.empty()) {
    where += " AND action = " + next();
    p.Text(q.action);
  }
  if (q.tenant) {
    where += " AND tenant = " + next();
    p.Text(*q.tenant);
  }
  if (!q.object.empty()) {
    // "job/12": the target itself, or anything under "job/12/": a range scan of audit_by_target
    // (the "C" collation orders bytes).
    std::string under = q.object;
    if (under.back() != '/') under += '/';
    std::string under_end = under;
    under_end.back() = static_cast<char>('/' + 1);
    const std::string a = next(), b = next(), c = next();
    where += fmt::format(" AND (target = {} OR (target >= {} AND target < {}))", a, b, c);
    p.Text(q.object).Text(under).Text(under_end);
  }
  const std::string sql = postgres::SelectSql(
      "audit", kAuditCols, fmt::format("WHERE {} ORDER BY seq LIMIT {}", where, next()));
  p.Int(postgres::ClampLimit(q.limit));
  std::vector<AuditRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(sql, p, "store: audit query", out, ReadAudit));
  return out;
}

// ---- Leadership: the lease row and the servers table, on a connection of their own. ---------

class Leases {
 public:
  explicit Leases(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}

  // Store::AcquireLease in one transaction that holds the row FOR UPDATE: a fenced write
  // transaction in flight (which holds it FOR SHARE) finishes first, and fails.
  Result<LeaseRecord> Acquire(const std::string& holder, const std::string& url, uint64_t term,
                              int64_t lease_ms) {
    ARBITER_RETURN_IF_ERROR(Begin());
    auto lease = ReadRow(/*for_update=*/true);
    if (!lease.ok()) return Abort(lease.status());
    LeaseRecord l = *lease;
    const bool expired = l.expires_at_ms <= l.now_ms;
    const bool renewal = l.holder == holder && l.term == term && term != 0 && !expired;
    if (renewal || expired) {
      if (!renewal) ++l.term;  // taken: a new term
      l.holder = holder;
      l.holder_url = url;
      l.expires_at_ms = l.now_ms + lease_ms;
      if (Status st = Write(l); !st.ok()) return Abort(st);
    }
    ARBITER_RETURN_IF_ERROR(Commit());
    return l;
  }

  Result<LeaseRecord> Read() {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    return ReadRow(/*for_update=*/false);
  }

  Status Release(const std::string& holder, uint64_t term) {
    ARBITER_RETURN_IF_ERROR(Begin());
    auto lease = ReadRow(/*for_update=*/true);
    if (!lease.ok()) return Abort(lease.status());
    LeaseRecord l = *lease;
    if (l.holder == holder && l.term == term && l.expires_at_ms > l.now_ms) {
      l.expires_at_ms = l.now_ms;
      if (Status st = Write(l); !st.ok()) return Abort(st);
    }
    return Commit();
  }

  Status PutServer(const ServerRecord& r) {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    auto res = conn_->Run(
        fmt::format("INSERT INTO servers (id, url, role, term, started_at_ms, last_seen_ms) "
                    "VALUES ($1, $2, $3, $4, $5, {}) ON CONFLICT (id) DO UPDATE SET "
                    "url = EXCLUDED.url, role = EXCLUDED.role, term = EXCLUDED.term, "
                    "started_at_ms = EXCLUDED.started_at_ms, last_seen_ms = EXCLUDED.last_seen_ms",
                    kClockMs),
        Params().Text(r.id).Text(r.url).Text(r.role).Uint(r.term).Int(r.started_at_ms),
        fmt::format("store: PutServer(id={})", r.id));
    return res.ok() ? Status::Ok() : res.status();
  }

  Result<std::vector<ServerRecord>> Servers() {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    std::vector<ServerRecord> out;
    ARBITER_RETURN_IF_ERROR(conn_->Query(
        "SELECT id, url, role, term, started_at_ms, last_seen_ms FROM servers ORDER BY id",
        Params(), "store: read servers", out, [](Row& row) {
          ServerRecord r;
          r.id = row.Text();
          r.url = row.Text();
          r.role = row.Text();
          r.term = row.Uint();
          r.started_at_ms = row.Int();
          r.last_seen_ms = row.Int();
          return r;
        }));
    return out;
  }

 private:
  Status Begin() {
    ARBITER_RETURN_IF_ERROR(conn_->EnsureConnected());
    return conn_->Exec("BEGIN", "store: begin (lease)");
  }
  Status Commit() {
    Status st = conn_->Exec("COMMIT", "store: commit (lease)");
    return st.ok() ? st : Abort(st);
  }
  Status Abort(Status st) {
    if (!conn_->broken() && conn_->InTransaction()) {
      (void)conn_->Exec("ROLLBACK", "store: rollback (lease)");
    }
    return st;
  }

  // The row, then the clock: read after the row lock is granted, so that a wait for it does not
  // make the lease look younger than it is.
  Result<LeaseRecord> ReadRow(bool for_update) {
    std::vector<LeaseRecord> rows;
    ARBITER_RETURN_IF_ERROR(conn_->Query(
        fmt::format("SELECT holder, holder_url, term, expires_at_ms FROM leader_lease WHERE id = 1"
                    "{}",
                    for_update ? " FOR UPDATE" : ""),
        Params(), "store: read the lease", rows, [](Row& row) {
          LeaseRecord l;
          l.holder = row.Text();
          l.holder_url = row.Text();
          l.term = row.Uint();
          l.expires_at_ms = row.Int();
          return l;
        }));
    if (rows.size() != 1) return Internal("store: the leader_lease row is missing");
    std::vector<int64_t> now;
    ARBITER_RETURN_IF_ERROR(conn_->Query(fmt::format("SELECT {}", kClockMs), Params(),
                                         "store: read the clock", now,
                                         [](Row& row) { return row.Int(); }));
    rows[0].now_ms = now.at(0);
    return rows[0];
  }

  Status Write(const LeaseRecord& l) {
    auto res = conn_->Run(
        "UPDATE leader_lease SET holder = $1, holder_url = $2, term = $3, expires_at_ms = $4 "
        "WHERE id = 1",
        Params().Text(l.holder).Text(l.holder_url).Uint(l.term).Int(l.expires_at_ms),
        "store: write the lease");
    return res.ok() ? Status::Ok() : res.status();
  }

  std::unique_ptr<Connection> conn_;
};

// ---- The store: the queue, the writer thread, the read mutex. --------------------------------

Status Closed() { return FailedPrecondition("store: closed"); }

Result<JobRecord> OneJob(Result<std::vector<JobRecord>> rows, std::string_view what) {
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return NotFound(fmt::format("store: {}: no such job", what));
  return std::move(rows->front());
}

class PostgresStore final : public Store {
 public:
  PostgresStore(std::unique_ptr<Writer> writer, std::unique_ptr<Reader> reader,
                std::unique_ptr<Leases> leases, PostgresOptions options)
      : options_(options),
        writer_(std::move(writer)),
        reader_(std::move(reader)),
        leases_(std::move(leases)) {
    thread_ = std::thread([this] { WriterLoop(); });
  }
  ~PostgresStore() override { Close(); }

  std::shared_future<Status> WriteAsync(WriteBatch batch) override;
  using Store::Load;
  Result<StoreState> Load(const LoadOptions& o) override {
    return Read([&](Reader& r) { return r.Load(o); });
  }
  Result<JobRecord> GetJob(uint64_t id) override {
    auto rows = Read([&](Reader& r) {
      return r.Query<JobRecord>("job_by_id", Params().Int(ClampId(id)), "store: get job", ReadJob);
    });
    return OneJob(std::move(rows), fmt::format("get job {}", id));
  }
  Result<std::vector<JobRecord>> ListJobs(const JobQuery& q) override {
    return Read([&](Reader& r) { return r.ListJobs(q); });
  }
  Result<JobRecord> JobByIdempotencyKey(const std::string& tenant, const std::string& user,
                                        const std::string& key) override {
    auto rows = Read([&](Reader& r) {
      return r.Query<JobRecord>("job_by_key", Params().Text(tenant).Text(user).Text(key),
                                "store: job by idempotency key", ReadJob);
    });
    return OneJob(std::move(rows), "job by idempotency key");
  }
  Result<std::vector<JobEventRecord>> JobEvents(uint64_t job_id) override {
    return Read([&](Reader& r) {
      return r.Query<JobEventRecord>("events_of_job", Params().Uint(job_id), "store: job events",
                                     ReadEvent);
    });
  }
  Result<std::vector<JobEventRecord>> EventsSince(uint64_t after_seq, size_t limit) override {
    return Read([&](Reader& r) {
      return r.Query<JobEventRecord>("events_since",
                                     Params().Uint(after_seq).Int(postgres::ClampLimit(limit)),
                                     "store: events since", ReadEvent);
    });
  }
  Result<std::vector<UsageRecord>> Usage(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) {
      return r.Query<UsageRecord>("usage", Params().Int(from_ms).Int(to_ms), "store: usage",
                                  ReadUsage);
    });
  }
  Result<std::vector<UsageRollupRecord>> UsageRollup(int64_t from_ms, int64_t to_ms,
                                                     uint32_t columns) override {
    if (from_ms % kRollupHourMs != 0) {
      return InvalidArgument("from_ms", "store: usage rollup: must be a whole hour");
    }
    if (to_ms % kRollupHourMs != 0) {
      return InvalidArgument("to_ms", "store: usage rollup: must be a whole hour");
    }
    std::vector<RollupRange> ranges = RollupRanges(from_ms, to_ms);
    ranges.resize(5);  // the rest: span 0, which no row has
    Params p;
    for (const RollupRange& r : ranges) p.Int(r.span_ms).Int(r.from_ms).Int(r.to_ms);
    auto parts = Read([&](Reader& r) {
      // Up to five ranges of rollup rows (store/usage_rollup.h), summed in one snapshot.
      return r.QueryText<UsageRollupRecord>(
          RollupSumSql(
              columns & kAllAttributionColumns, 5, [](int n) { return "$" + std::to_string(n); },
              "::bigint"),
          p, "store: usage rollup", ReadRollupSum);
    });
    if (!parts.ok()) return parts.status();
    return MergeRollupParts(std::move(parts).value(), from_ms, to_ms);
  }
  Result<std::vector<JobFactRecord>> JobFacts(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) {
      return r.Query<JobFactRecord>("job_facts", Params().Int(from_ms).Int(to_ms),
                                    "store: job facts", ReadJobFact);
    });
  }
  Result<JobWaits> WaitFacts(int64_t from_ms, int64_t to_ms, uint32_t columns) override {
    columns &= kAllAttributionColumns;
    return Read([&](Reader& r) -> Result<JobWaits> {
      JobWaitsBuilder b;
      auto waits = r.QueryText<JobWait>(JobWaitsSql(columns, "$1", "$2"),
                                        Params().Int(from_ms).Int(to_ms), "store: job waits",
                                        [&b](postgres::Row& row) { return ReadJobWait(row, b); });
      if (!waits.ok()) return waits.status();
      return std::move(b).Finish(std::move(waits).value());
    });
  }
  Result<std::vector<JobEventRecord>> EventsBefore(int64_t before_ms, uint64_t after_seq,
                                                   size_t limit) override {
    return Read([&](Reader& r) {
      return r.Query<JobEventRecord>(
          "events_before", Params().Int(before_ms).Uint(after_seq).Int(postgres::ClampLimit(limit)),
          "store: events before", ReadEvent);
    });
  }
  Result<std::vector<UsageRecord>> UsageBefore(int64_t before_ms, uint64_t after_seq,
                                               size_t limit) override {
    return Read([&](Reader& r) {
      return r.Query<UsageRecord>(
          "usage_before", Params().Int(before_ms).Uint(after_seq).Int(postgres::ClampLimit(limit)),
          "store: usage before", ReadUsage);
    });
  }
  Result<std::vector<AuditRecord>> Audit(uint64_t after_seq, size_t limit) override {
    return Read([&](Reader& r) {
      return r.Query<AuditRecord>("audit",
                                  Params().Uint(after_seq).Int(postgres::ClampLimit(limit)),
                                  "store: audit", ReadAudit);
    });
  }
  Result<std::vector<AuditRecord>> QueryAudit(const AuditQuery& q) override {
    return Read([&](Reader& r) { return r.QueryAudit(q); });
  }
  Result<std::vector<ClusterSampleRecord>> ClusterSamples(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) {
      return r.Query<ClusterSampleRecord>("cluster_samples", Params().Int(from_ms).Int(to_ms),
                                          "store: cluster samples", ReadClusterSample);
    });
  }
  Result<std::vector<GpuSampleRecord>> GpuSamples(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) {
      return r.Query<GpuSampleRecord>("gpu_samples", Params().Int(from_ms).Int(to_ms),
                                      "store: gpu samples", ReadGpuSample);
    });
  }
  Result<std::vector<ServingStatRecord>> ServingStats(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) {
      return r.Query<ServingStatRecord>("serving_stats", Params().Int(from_ms).Int(to_ms),
                                        "store: serving stats", ReadServingStat);
    });
  }
  Result<std::vector<WebhookDeliveryRecord>> WebhookDeliveries(const std::string& webhook_id,
                                                               size_t limit) override {
    return Read([&](Reader& r) {
      return r.Query<WebhookDeliveryRecord>(
          "deliveries_of_hook", Params().Text(webhook_id).Int(postgres::ClampLimit(limit)),
          "store: webhook deliveries", ReadWebhookDelivery);
    });
  }

  Result<LeaseRecord> AcquireLease(const std::string& holder, const std::string& holder_url,
                                   uint64_t term, int64_t lease_ms) override {
    if (holder.empty()) return InvalidArgument("holder", "must not be empty");
    if (lease_ms <= 0) return InvalidArgument("lease_ms", "must be > 0");
    return WithLeases([&](Leases& l) { return l.Acquire(holder, holder_url, term, lease_ms); });
  }
  Result<LeaseRecord> ReadLease() override {
    return WithLeases([](Leases& l) { return l.Read(); });
  }
  Status ReleaseLease(const std::string& holder, uint64_t term) override {
    return WithLeases([&](Leases& l) { return l.Release(holder, term); });
  }
  void SetFence(uint64_t term) override {
    std::lock_guard lock(close_mu_);
    if (writer_ != nullptr) writer_->SetFence(term);
  }
  Status PutServer(const ServerRecord& r) override {
    if (r.id.empty()) return InvalidArgument("id", "must not be empty");
    return WithLeases([&](Leases& l) { return l.PutServer(r); });
  }
  Result<std::vector<ServerRecord>> Servers() override {
    return WithLeases([](Leases& l) { return l.Servers(); });
  }
  StoreStats stats() const override;
  void Close() override;

 private:
  struct Pending {
    WriteBatch batch;
    std::promise<Status> done;
  };

  void WriterLoop();
  void RecordStats(const std::vector<Pending>& group, const GroupOutcome& outcome);

  template <typename Fn>
  auto Read(Fn fn) -> decltype(fn(std::declval<Reader&>())) {
    std::lock_guard lock(read_mu_);
    if (reader_ == nullptr) return Closed();
    return fn(*reader_);
  }
  template <typename Fn>
  auto WithLeases(Fn fn) -> decltype(fn(std::declval<Leases&>())) {
    std::lock_guard lock(lease_mu_);
    if (leases_ == nullptr) return Closed();
    return fn(*leases_);
  }

  const PostgresOptions options_;
  std::unique_ptr<Writer> writer_;  // used by thread_ only, destroyed after it is joined

  std::mutex read_mu_;
  std::unique_ptr<Reader> reader_;  // guarded by read_mu_; null once closed

  std::mutex lease_mu_;
  std::unique_ptr<Leases> leases_;  // guarded by lease_mu_; null once closed

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;  // guarded by mu_
  bool stopping_ = false;      // guarded by mu_

  mutable std::mutex stats_mu_;
  StoreStats stats_;  // guarded by stats_mu_

  std::mutex close_mu_;  // serializes Close()
  std::thread thread_;
};

std::shared_future<Status> PostgresStore::WriteAsync(WriteBatch batch) {
  std::promise<Status> done;
  std::shared_future<Status> future = done.get_future().share();
  {
    std::lock_guard lock(mu_);
    if (!stopping_) {
      queue_.push_back(Pending{std::move(batch), std::move(done)});
      cv_.notify_one();
      return future;
    }
  }
  done.set_value(Closed());
  return future;
}

void PostgresStore::WriterLoop() {
  pthread_setname_np(pthread_self(), "arbiter-pgstore");
  std::vector<Pending> group;
  std::vector<const WriteBatch*> batches;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [this] { return !queue_.empty() || stopping_; });
      if (queue_.empty()) return;  // stopping, and everything enqueued is written
      const size_t n = std::min(queue_.size(), options_.max_batches_per_commit);
      for (size_t i = 0; i < n; ++i) {
        group.push_back(std::move(queue_.front()));
        queue_.pop_front();
      }
    }
    for (const Pending& p : group) batches.push_back(&p.batch);
    GroupOutcome outcome = writer_->CommitGroup(batches);
    RecordStats(group, outcome);
    for (size_t i = 0; i < group.size(); ++i) {
      group[i].done.set_value(std::move(outcome.statuses[i]));
    }
    group.clear();
    batches.clear();
  }
}

void PostgresStore::RecordStats(const std::vector<Pending>& group, const GroupOutcome& outcome) {
  std::lock_guard lock(stats_mu_);
  RecordGroupCommit(stats_, group, outcome.statuses, outcome.commit_us);
}

StoreStats PostgresStore::stats() const {
  StoreStats s;
  {
    std::lock_guard lock(stats_mu_);
    s = stats_;
  }
  std::lock_guard lock(mu_);
  s.queued = queue_.size();
  return s;
}

void PostgresStore::Close() {
  std::lock_guard close_lock(close_mu_);
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  {
    std::lock_guard lock(read_mu_);
    reader_.reset();
  }
  {
    std::lock_guard lock(lease_mu_);
    leases_.reset();
  }
  writer_.reset();
}

Result<std::unique_ptr<Connection>> Connect(const std::string& uri, const PostgresOptions& o) {
  // connect_timeout from the options unless the URI names one.
  std::string full = uri;
  if (full.find("connect_timeout=") == std::string::npos) {
    full += fmt::format("{}connect_timeout={}", full.find('?') == std::string::npos ? '?' : '&',
                        o.connect_timeout_s);
  }
  auto conn = Connection::Open(full, std::string(kSetup));
  if (!conn.ok()) {
    // libpq's messages name the host and port, never the password; the URL is redacted.
    return Status(conn.status().code(),
                  fmt::format("{} ({})", conn.status().message(), RedactStoreUrl(uri)));
  }
  return conn;
}

}  // namespace

Result<std::unique_ptr<Store>> OpenPostgresStore(const std::string& uri, PostgresOptions options) {
  if (options.max_batches_per_commit == 0) {
    return InvalidArgument("max_batches_per_commit", "must be >= 1, got 0");
  }
  auto write_conn = Connect(uri, options);
  if (!write_conn.ok()) return write_conn.status();
  ARBITER_RETURN_IF_ERROR(postgres::ApplyMigrations(**write_conn, RedactStoreUrl(uri), WallMs()));
  auto read_conn = Connect(uri, options);
  if (!read_conn.ok()) return read_conn.status();
  auto lease_conn = Connect(uri, options);
  if (!lease_conn.ok()) return lease_conn.status();

  auto writer = Writer::Create(std::move(write_conn).value());
  if (!writer.ok()) return writer.status();
  auto reader = Reader::Create(std::move(read_conn).value());
  if (!reader.ok()) return reader.status();
  auto leases = std::make_unique<Leases>(std::move(lease_conn).value());
  return std::unique_ptr<Store>(new PostgresStore(
      std::move(writer).value(), std::move(reader).value(), std::move(leases), options));
}

}  // namespace arbiter::store
