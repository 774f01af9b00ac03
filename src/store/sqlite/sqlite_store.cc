#include "store/sqlite/sqlite_store.h"

#include <fmt/format.h>
#include <pthread.h>

#include <algorithm>
#include <array>
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
#include "store/sqlite/connection.h"
#include "store/sqlite/migrations.h"
#include "store/sqlite/tables.h"
#include "store/usage_rollup.h"

namespace arbiter::store {
namespace {

using sqlite::Blob;
using sqlite::Connection;
using sqlite::Row;
using sqlite::SeqOrNull;
using sqlite::Statement;

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

int64_t WallMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- The writer: the write connection and its statements; used by the writer thread only. ----

// What one group commit did.
struct GroupOutcome {
  std::vector<Status> statuses;     // one per batch, in order
  std::vector<uint64_t> commit_us;  // one per committed transaction
};

class Writer {
 public:
  static Result<std::unique_ptr<Writer>> Create(std::unique_ptr<Connection> conn);

  // Commits the batches of one group in one transaction (see sqlite_store.h).
  GroupOutcome CommitGroup(std::span<const WriteBatch* const> batches);

  // Store::SetFence: read by the writer thread at every transaction.
  void SetFence(uint64_t term) { fence_.store(term, std::memory_order_release); }

 private:
  explicit Writer(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  Status PrepareAll();

  Status Apply(const WriteOp& op);
  Status ApplyAll(const WriteBatch& batch);
  // Applies the batch inside a savepoint; on failure undoes the batch only, if the transaction
  // survived the failure.
  Status ApplyInSavepoint(const WriteBatch& batch);
  // One batch in its own transaction; appends its commit latency on success. Sets `begin_failed`
  // when the transaction could not even start.
  Status CommitAlone(const WriteBatch& batch, std::vector<uint64_t>& commit_us, bool& begin_failed);
  Status Commit(std::chrono::steady_clock::time_point start, std::vector<uint64_t>& commit_us);
  void RollbackIfOpen();
  // BEGIN IMMEDIATE, then the fence: fails (with the transaction rolled back) when a fence is set
  // and the lease's term is no longer it.
  Status Begin();

  std::atomic<uint64_t> fence_{0};

  std::unique_ptr<Connection> conn_;
  Statement begin_, commit_, rollback_, savepoint_, release_, rollback_to_, lease_term_;
  Statement put_tenant_, del_tenant_, put_queue_, del_queue_, put_user_, del_user_;
  Statement put_token_, del_token_, put_priority_class_, del_priority_class_;
  Statement put_gpu_model_, del_gpu_model_, put_node_, del_node_, put_job_, del_job_;
  Statement put_kv_, del_kv_, append_event_, append_usage_, append_audit_;
  Statement put_cluster_sample_, put_gpu_sample_, roll_up_gpu_samples_, del_raw_gpu_samples_,
      del_hourly_gpu_samples_, del_cluster_samples_;
  Statement put_service_, del_service_, put_serving_stat_, del_serving_stats_;
  Statement put_webhook_, del_webhook_, del_webhook_deliveries_, put_webhook_delivery_,
      prune_webhook_deliveries_;
  Statement add_usage_rollup_, append_fact_, prune_events_, prune_usage_;
};

Result<std::unique_ptr<Writer>> Writer::Create(std::unique_ptr<Connection> conn) {
  auto w = std::unique_ptr<Writer>(new Writer(std::move(conn)));
  ARBITER_RETURN_IF_ERROR(w->PrepareAll());
  return w;
}

Status Writer::PrepareAll() {
  Connection& c = *conn_;
  const std::pair<Statement*, std::string> all[] = {
      {&begin_, "BEGIN IMMEDIATE"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&savepoint_, "SAVEPOINT batch"},
      {&release_, "RELEASE batch"},
      {&rollback_to_, "ROLLBACK TO batch"},
      {&lease_term_, "SELECT term FROM leader_lease WHERE id = 1"},
      {&put_tenant_, UpsertSql("tenants", kTenantCols)},
      {&del_tenant_, DeleteSql("tenants", kTenantCols)},
      {&put_queue_, UpsertSql("queues", kQueueCols)},
      {&del_queue_, DeleteSql("queues", kQueueCols)},
      {&put_user_, UpsertSql("users", kUserCols)},
      {&del_user_, DeleteSql("users", kUserCols)},
      {&put_token_, UpsertSql("tokens", kTokenCols)},
      {&del_token_, DeleteSql("tokens", kTokenCols)},
      {&put_priority_class_, UpsertSql("priority_classes", kPriorityClassCols)},
      {&del_priority_class_, DeleteSql("priority_classes", kPriorityClassCols)},
      {&put_gpu_model_, UpsertSql("gpu_models", kGpuModelCols)},
      {&del_gpu_model_, DeleteSql("gpu_models", kGpuModelCols)},
      {&put_node_, UpsertSql("nodes", kNodeCols)},
      {&del_node_, DeleteSql("nodes", kNodeCols)},
      {&put_job_, UpsertSql("jobs", kJobCols)},
      {&del_job_, DeleteSql("jobs", kJobCols)},
      {&put_kv_, UpsertSql("kv", kKvCols)},
      {&del_kv_, DeleteSql("kv", kKvCols)},
      {&append_event_, InsertSql("job_events", kEventCols)},
      {&append_usage_, InsertSql("usage", kUsageCols)},
      {&append_audit_, InsertSql("audit", kAuditCols)},
      {&put_cluster_sample_, UpsertSql("cluster_samples", kClusterSampleCols)},
      {&put_gpu_sample_, fmt::format("INSERT OR REPLACE INTO gpu_samples ({}) VALUES ({})",
                                     Join(kGpuSampleCols), Placeholders(kGpuSampleCols.size()))},
      {&roll_up_gpu_samples_, std::string(kRollUpGpuSamplesSql)},
      {&del_raw_gpu_samples_,
       "DELETE FROM gpu_samples WHERE resolution_ms < 3600000 AND at_ms < ?1"},
      {&del_hourly_gpu_samples_,
       "DELETE FROM gpu_samples WHERE resolution_ms >= 3600000 AND at_ms < ?1"},
      {&del_cluster_samples_, "DELETE FROM cluster_samples WHERE at_ms < ?1"},
      {&put_service_, UpsertSql("services", kServiceCols)},
      {&del_service_, DeleteSql("services", kServiceCols)},
      {&put_serving_stat_,
       fmt::format("INSERT OR REPLACE INTO serving_stats ({}) VALUES ({})", Join(kServingStatCols),
                   Placeholders(kServingStatCols.size()))},
      {&del_serving_stats_, "DELETE FROM serving_stats WHERE minute_ms < ?1"},
      {&put_webhook_, UpsertSql("webhooks", kWebhookCols)},
      {&del_webhook_, DeleteSql("webhooks", kWebhookCols)},
      {&del_webhook_deliveries_, "DELETE FROM webhook_deliveries WHERE webhook_id = ?1"},
      {&put_webhook_delivery_, UpsertSql("webhook_deliveries", kWebhookDeliveryCols)},
      {&prune_webhook_deliveries_,
       "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND updated_at_ms < ?1"},
      {&add_usage_rollup_,
       fmt::format(
           "INSERT INTO usage_rollups ({}) VALUES ({}) ON CONFLICT (span_ms, at_ms, tenant, "
           "queue, user, job_type, gpu_model) DO UPDATE SET "
           "gpu_milli_ms = gpu_milli_ms + excluded.gpu_milli_ms, "
           "cost_micro = cost_micro + excluded.cost_micro",
           Join(kUsageRollupCols), Placeholders(kUsageRollupCols.size()))},
      {&append_fact_, InsertSql("job_facts", kJobFactCols)},
      {&prune_events_, "DELETE FROM job_events WHERE at_ms < ?1 AND seq <= ?2"},
      {&prune_usage_, "DELETE FROM usage WHERE end_ms < ?1 AND seq <= ?2"},
  };
  for (const auto& [stmt, sql] : all) ARBITER_RETURN_IF_ERROR(PrepareInto(c, *stmt, sql));
  return Status::Ok();
}

Status Writer::Apply(const WriteOp& op) {
  Connection& c = *conn_;
  Status st = std::visit(
      Overloaded{
          [&](const TenantRecord& r) {
            return c.Run(put_tenant_.get(), "", r.name, r.spec_json, r.created_at_ms);
          },
          [&](const op::DeleteTenant& r) { return c.Run(del_tenant_.get(), "", r.name); },
          [&](const QueueRecord& r) {
            return c.Run(put_queue_.get(), "", r.name, r.tenant, r.parent, r.spec_json);
          },
          [&](const op::DeleteQueue& r) { return c.Run(del_queue_.get(), "", r.name); },
          [&](const UserRecord& r) {
            return c.Run(put_user_.get(), "", r.name, r.tenant, r.role, r.created_at_ms);
          },
          [&](const op::DeleteUser& r) { return c.Run(del_user_.get(), "", r.name); },
          [&](const TokenRecord& r) {
            return c.Run(put_token_.get(), "", r.id, r.hash_hex, r.user, r.tenant, r.role, r.kind,
                         r.created_at_ms, r.expires_at_ms, r.revoked, r.node, r.scope);
          },
          [&](const op::DeleteToken& r) { return c.Run(del_token_.get(), "", r.id); },
          [&](const PriorityClassRecord& r) {
            return c.Run(put_priority_class_.get(), "", r.name, r.spec_json);
          },
          [&](const op::DeletePriorityClass& r) {
            return c.Run(del_priority_class_.get(), "", r.name);
          },
          [&](const GpuModelRecord& r) {
            return c.Run(put_gpu_model_.get(), "", r.name, r.spec_json);
          },
          [&](const op::DeleteGpuModel& r) { return c.Run(del_gpu_model_.get(), "", r.name); },
          [&](const NodeRecord& r) {
            return c.Run(put_node_.get(), "", r.name, r.spec_json, r.state, r.updated_at_ms);
          },
          [&](const op::DeleteNode& r) { return c.Run(del_node_.get(), "", r.name); },
          [&](const JobRecord& r) {
            return c.Run(put_job_.get(), "", r.id, r.tenant, r.queue, r.user, r.name, r.type,
                         r.state, r.spec_json, r.status_json, r.idempotency_key, r.submitted_at_ms,
                         r.updated_at_ms, r.secret_env_json, r.request_digest);
          },
          [&](const op::DeleteJob& r) { return c.Run(del_job_.get(), "", r.id); },
          [&](const KvRecord& r) { return c.Run(put_kv_.get(), "", r.key, Blob{r.value}); },
          [&](const op::DeleteKv& r) { return c.Run(del_kv_.get(), "", r.key); },
          [&](const JobEventRecord& r) {
            return c.Run(append_event_.get(), "", SeqOrNull{r.seq}, r.job_id, r.at_ms, r.from_state,
                         r.to_state, r.reason, r.detail_json);
          },
          [&](const UsageRecord& r) {
            Status s = c.Run(append_usage_.get(), "", SeqOrNull{r.seq}, r.job_id, r.task, r.tenant,
                             r.queue, r.user, r.job_type, r.gpu_model, r.gpu_milli,
                             r.gpu_memory_mib, r.start_ms, r.end_ms, r.cost_micro);
            // The report aggregates, in the same transaction as the record.
            for (const RollupPart& part : SplitUsage(r)) {
              if (!s.ok()) break;
              s = c.Run(add_usage_rollup_.get(), "", part.span_ms, part.at_ms, r.tenant, r.queue,
                        r.user, r.job_type, r.gpu_model, part.gpu_milli_ms, part.cost_micro);
            }
            return s;
          },
          [&](const AuditRecord& r) {
            return c.Run(append_audit_.get(), "", SeqOrNull{r.seq}, r.at_ms, r.actor, r.action,
                         r.target, r.result, r.detail_json, r.token_id, r.source, r.tenant);
          },
          [&](const ClusterSampleRecord& r) {
            return c.Run(put_cluster_sample_.get(), "", r.at_ms, r.interval_ms, r.data_json);
          },
          [&](const GpuSampleRecord& r) {
            return c.Run(put_gpu_sample_.get(), "", r.resolution_ms, r.node, r.gpu, r.at_ms,
                         r.span_ms, r.busy_ms, r.memory_max_mib, r.memory_mib_ms);
          },
          [&](const op::CompactSamples& r) {
            // Roll up, then delete what was rolled up: one op, so in one transaction.
            Status s = c.Run(roll_up_gpu_samples_.get(), "", r.gpu_rollup_before_ms);
            if (s.ok()) s = c.Run(del_raw_gpu_samples_.get(), "", r.gpu_rollup_before_ms);
            if (s.ok()) s = c.Run(del_hourly_gpu_samples_.get(), "", r.gpu_hourly_before_ms);
            if (s.ok()) s = c.Run(del_cluster_samples_.get(), "", r.cluster_before_ms);
            if (s.ok()) s = c.Run(del_serving_stats_.get(), "", r.serving_before_ms);
            return s;
          },
          [&](const ServiceRecord& r) {
            return c.Run(put_service_.get(), "", r.name, r.tenant, r.spec_json, r.secret_env_json,
                         r.updated_at_ms);
          },
          [&](const op::DeleteService& r) { return c.Run(del_service_.get(), "", r.name); },
          [&](const ServingStatRecord& r) {
            return c.Run(put_serving_stat_.get(), "", r.minute_ms, r.service, r.revision,
                         r.data_json);
          },
          [&](const WebhookRecord& r) {
            return c.Run(put_webhook_.get(), "", r.id, r.tenant, r.user, r.spec_json, r.secret,
                         r.created_at_ms);
          },
          [&](const op::DeleteWebhook& r) {
            Status s = c.Run(del_webhook_deliveries_.get(), "", r.id);
            if (s.ok()) s = c.Run(del_webhook_.get(), "", r.id);
            return s;
          },
          [&](const WebhookDeliveryRecord& r) {
            return c.Run(put_webhook_delivery_.get(), "", r.id, r.webhook_id, r.state,
                         r.created_at_ms, r.updated_at_ms, r.data_json);
          },
          [&](const op::PruneWebhookDeliveries& r) {
            return c.Run(prune_webhook_deliveries_.get(), "", r.finished_before_ms);
          },
          [&](const JobFactRecord& r) {
            return c.Run(append_fact_.get(), "", SeqOrNull{r.seq}, r.job_id, r.at_ms, r.kind,
                         r.tenant, r.queue, r.user, r.job_type, r.gpu_model, r.since_ms,
                         r.lost_milli_ms, r.reason, r.gpu_milli);
          },
          [&](const op::PruneHistory& r) {
            Status s = c.Run(prune_events_.get(), "", r.before_ms, r.max_event_seq);
            if (s.ok()) s = c.Run(prune_usage_.get(), "", r.before_ms, r.max_usage_seq);
            return s;
          },
      },
      op);
  if (st.ok()) return st;
  return {st.code(), fmt::format("store: {}: {}", DescribeWriteOp(op), st.message())};
}

Status Writer::ApplyAll(const WriteBatch& batch) {
  for (const WriteOp& op : batch.ops()) ARBITER_RETURN_IF_ERROR(Apply(op));
  return Status::Ok();
}

Status Writer::ApplyInSavepoint(const WriteBatch& batch) {
  if (batch.empty()) return Status::Ok();
  ARBITER_RETURN_IF_ERROR(conn_->Run(savepoint_.get(), "store: savepoint"));
  Status st = ApplyAll(batch);
  if (st.ok()) return conn_->Run(release_.get(), "store: release savepoint");
  if (conn_->InTransaction()) {
    // ROLLBACK TO undoes the batch and keeps the savepoint open; RELEASE pops it.
    Status undo = conn_->Run(rollback_to_.get(), "store: rollback to savepoint");
    if (undo.ok()) undo = conn_->Run(release_.get(), "store: release savepoint");
    if (!undo.ok()) RollbackIfOpen();  // the group falls back to one batch at a time
  }
  return st;
}

Status Writer::Begin() {
  ARBITER_RETURN_IF_ERROR(conn_->Run(begin_.get(), "store: begin"));
  const uint64_t fence = fence_.load(std::memory_order_acquire);
  if (fence == 0) return Status::Ok();
  std::vector<uint64_t> term;
  Status st = conn_->Query(lease_term_.get(), "store: read the lease", term,
                           [](Row& row) { return row.Uint(); });
  if (st.ok() && (term.size() != 1 || term[0] != fence)) {
    st = Status(StatusCode::kUnavailable,
                fmt::format("{} the leadership term {} is over (the lease is at term {})",
                            kFencedPrefix, fence, term.empty() ? 0 : term[0]));
  }
  if (!st.ok()) RollbackIfOpen();
  return st;
}

void Writer::RollbackIfOpen() {
  if (conn_->InTransaction()) (void)conn_->Run(rollback_.get(), "store: rollback");
}

Status Writer::Commit(std::chrono::steady_clock::time_point start,
                      std::vector<uint64_t>& commit_us) {
  Status st = conn_->Run(commit_.get(), "store: commit");
  if (!st.ok()) {
    RollbackIfOpen();
    return st;
  }
  auto us = std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                                  start);
  commit_us.push_back(static_cast<uint64_t>(us.count()));
  return st;
}

Status Writer::CommitAlone(const WriteBatch& batch, std::vector<uint64_t>& commit_us,
                           bool& begin_failed) {
  if (batch.empty()) return Status::Ok();
  auto start = std::chrono::steady_clock::now();
  if (Status begin = Begin(); !begin.ok()) {
    begin_failed = true;
    return begin;
  }
  Status st = ApplyAll(batch);
  if (!st.ok()) {
    RollbackIfOpen();
    return st;
  }
  return Commit(start, commit_us);
}

// 1. If no batch has an op, there is nothing to commit: all succeed.
// 2. BEGIN IMMEDIATE. If that fails (the file is locked by another process past the busy
//    timeout, or cannot be written), every batch gets that error: retrying alone would fail alike.
// 3. Every batch applied straight into the transaction, then one COMMIT: with synchronous=FULL
//    this appends to the WAL and syncs it. A failing statement is rare (the control plane checks
//    what it writes first), so this is the path of nearly every group.
// 4. If a batch failed, the transaction is rolled back and redone with each batch inside its own
//    savepoint: a batch whose statement fails is undone alone and gets its error; the others stay
//    in the transaction. (Savepoints on every group would copy each page a batch touches again
//    into a statement journal: most of a group's pages are shared by all its batches.)
// 5. If the transaction itself was lost (COMMIT failed, or SQLite rolled it back after an I/O
//    error or a full disk), retry the batches one at a time, so each caller gets its own status.
GroupOutcome Writer::CommitGroup(std::span<const WriteBatch* const> batches) {
  GroupOutcome out;
  out.statuses.resize(batches.size());
  if (std::all_of(batches.begin(), batches.end(), [](const auto* b) { return b->empty(); })) {
    return out;
  }
  auto start = std::chrono::steady_clock::now();
  if (Status begin = Begin(); !begin.ok()) {
    for (auto& st : out.statuses) st = begin;
    return out;
  }
  Status lost = Status::Ok();
  size_t failed = batches.size();
  for (size_t i = 0; i < batches.size(); ++i) {
    Status st = ApplyAll(*batches[i]);
    if (!st.ok()) {
      failed = i;
      if (batches.size() == 1 || !conn_->InTransaction()) lost = st;
      break;
    }
  }
  if (failed == batches.size()) {
    lost = Commit(start, out.commit_us);
    if (lost.ok()) return out;
  } else if (lost.ok()) {
    // Step 4: undo everything, then one savepoint per batch.
    RollbackIfOpen();
    if (Status begin = Begin(); !begin.ok()) {
      for (auto& st : out.statuses) st = begin;
      return out;
    }
    for (size_t i = 0; lost.ok() && i < batches.size(); ++i) {
      out.statuses[i] = ApplyInSavepoint(*batches[i]);
      if (!out.statuses[i].ok() && !conn_->InTransaction()) lost = out.statuses[i];
    }
    if (lost.ok()) lost = Commit(start, out.commit_us);
    if (lost.ok()) return out;
  }

  RollbackIfOpen();
  out.commit_us.clear();
  if (batches.size() == 1) {
    out.statuses[0] = lost;
    return out;
  }
  bool begin_failed = false;
  for (size_t i = 0; i < batches.size(); ++i) {
    if (begin_failed) {
      out.statuses[i] = out.statuses[i - 1];
    } else {
      out.statuses[i] = CommitAlone(*batches[i], out.commit_us, begin_failed);
    }
  }
  return out;
}

// ---- The reader: the read connection; callers hold the store's read mutex. -------------------

class Reader {
 public:
  static Result<std::unique_ptr<Reader>> Create(std::unique_ptr<Connection> conn);

  Result<StoreState> Load(const LoadOptions& o);
  Result<JobRecord> GetJob(uint64_t id);
  Result<std::vector<JobRecord>> ListJobs(const JobQuery& q);
  Result<JobRecord> JobByKey(const std::string& tenant, const std::string& user,
                             const std::string& key);
  Result<std::vector<JobEventRecord>> JobEvents(uint64_t job_id);
  Result<std::vector<JobEventRecord>> EventsSince(uint64_t after_seq, size_t limit);
  Result<std::vector<UsageRecord>> Usage(int64_t from_ms, int64_t to_ms);
  Result<std::vector<AuditRecord>> Audit(uint64_t after_seq, size_t limit);
  Result<std::vector<AuditRecord>> QueryAudit(const AuditQuery& q);
  Result<std::vector<ClusterSampleRecord>> ClusterSamples(int64_t from_ms, int64_t to_ms);
  Result<std::vector<GpuSampleRecord>> GpuSamples(int64_t from_ms, int64_t to_ms);
  Result<std::vector<ServingStatRecord>> ServingStats(int64_t from_ms, int64_t to_ms);
  Result<std::vector<WebhookDeliveryRecord>> WebhookDeliveries(const std::string& webhook_id,
                                                               size_t limit);
  Result<std::vector<UsageRollupRecord>> UsageRollup(int64_t from_ms, int64_t to_ms,
                                                     uint32_t columns);
  Result<std::vector<JobFactRecord>> JobFacts(int64_t from_ms, int64_t to_ms);
  Result<JobWaits> WaitFacts(int64_t from_ms, int64_t to_ms, uint32_t columns);
  Result<std::vector<JobEventRecord>> EventsBefore(int64_t before_ms, uint64_t after_seq,
                                                   size_t limit);
  Result<std::vector<UsageRecord>> UsageBefore(int64_t before_ms, uint64_t after_seq, size_t limit);

 private:
  explicit Reader(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}
  Status PrepareAll();
  Status LoadInto(StoreState& state, const LoadOptions& o);
  Result<JobRecord> OneJob(std::vector<JobRecord> rows, std::string_view what);

  std::unique_ptr<Connection> conn_;
  Statement begin_, commit_, rollback_;
  Statement tenants_, queues_, users_, tokens_, priority_classes_, gpu_models_, nodes_, jobs_, kv_;
  Statement max_job_id_, max_event_seq_, events_of_job_, events_since_, usage_, audit_;
  Statement cluster_samples_, gpu_samples_, services_, serving_stats_;
  Statement webhooks_, pending_deliveries_, deliveries_of_hook_;
  Statement facts_, events_before_, usage_before_;
  // By AttributionColumns, prepared when first used.
  std::array<Statement, kAllAttributionColumns + 1> rollup_sum_;
  std::array<Statement, kAllAttributionColumns + 1>
      waits_;  // by AttributionColumns, prepared when first used
  Statement job_by_id_, job_by_key_, live_jobs_, latest_finished_;
};

Result<std::unique_ptr<Reader>> Reader::Create(std::unique_ptr<Connection> conn) {
  auto r = std::unique_ptr<Reader>(new Reader(std::move(conn)));
  ARBITER_RETURN_IF_ERROR(r->PrepareAll());
  return r;
}

Status Reader::PrepareAll() {
  const std::pair<Statement*, std::string> all[] = {
      {&begin_, "BEGIN"},
      {&commit_, "COMMIT"},
      {&rollback_, "ROLLBACK"},
      {&tenants_, SelectSql("tenants", kTenantCols, "ORDER BY name")},
      {&queues_, SelectSql("queues", kQueueCols, "ORDER BY name")},
      {&users_, SelectSql("users", kUserCols, "ORDER BY name")},
      {&tokens_, SelectSql("tokens", kTokenCols, "ORDER BY id")},
      {&priority_classes_, SelectSql("priority_classes", kPriorityClassCols, "ORDER BY name")},
      {&gpu_models_, SelectSql("gpu_models", kGpuModelCols, "ORDER BY name")},
      {&nodes_, SelectSql("nodes", kNodeCols, "ORDER BY name")},
      {&jobs_, SelectSql("jobs", kJobCols, "ORDER BY id")},
      {&kv_, SelectSql("kv", kKvCols, "ORDER BY key")},
      {&job_by_id_, SelectSql("jobs", kJobCols, "WHERE id = ?1")},
      {&job_by_key_, SelectSql("jobs", kJobCols,
                               "WHERE tenant = ?1 AND \"user\" = ?2 AND idempotency_key = ?3 "
                               "AND idempotency_key <> ''")},
      {&live_jobs_, SelectSql("jobs", kJobCols, LiveJobsWhere("instr"))},
      {&latest_finished_, SelectSql("jobs", kJobCols, LatestFinishedWhere("?1"))},
      // The highest id ever used: noted in store_meta when a job row is deleted, else the rows'.
      {&max_job_id_,
       "SELECT max(value, (SELECT coalesce(max(id), 0) FROM jobs)) FROM store_meta "
       "WHERE key = 'max_job_id'"},
      {&max_event_seq_, "SELECT coalesce(max(seq), 0) FROM job_events"},
      {&events_of_job_, SelectSql("job_events", kEventCols, "WHERE job_id = ?1 ORDER BY seq")},
      {&events_since_, SelectSql("job_events", kEventCols, "WHERE seq > ?1 ORDER BY seq LIMIT ?2")},
      // Through usage_by_end (`+start_ms` keeps SQLite off usage_by_start, and no ORDER BY off a
      // scan of the whole table in seq order): the records that end after `from`, filtered on
      // start_ms inside the index, then sorted by seq in Usage(). Recent periods (a report's
      // partial hours, the budgets' current hour) read only their own records.
      {&usage_, SelectSql("usage", kUsageCols,
                          "INDEXED BY usage_by_end WHERE end_ms > ?1 AND +start_ms < ?2")},
      {&audit_, SelectSql("audit", kAuditCols, "WHERE seq > ?1 ORDER BY seq LIMIT ?2")},
      {&cluster_samples_, SelectSql("cluster_samples", kClusterSampleCols,
                                    "WHERE at_ms >= ?1 AND at_ms < ?2 ORDER BY at_ms")},
      // Rows are at most an hour long: the second bound lets the key (at_ms first) narrow the scan.
      {&gpu_samples_,
       SelectSql("gpu_samples", kGpuSampleCols,
                 "WHERE at_ms < ?2 AND at_ms > ?1 - 3600000 AND at_ms + resolution_ms > ?1 "
                 "ORDER BY at_ms, node, gpu, resolution_ms")},
      {&services_, SelectSql("services", kServiceCols, "ORDER BY name")},
      {&serving_stats_, SelectSql("serving_stats", kServingStatCols,
                                  "WHERE minute_ms >= ?1 AND minute_ms < ?2 "
                                  "ORDER BY minute_ms, service, revision")},
      {&webhooks_, SelectSql("webhooks", kWebhookCols, "ORDER BY id")},
      {&pending_deliveries_, SelectSql("webhook_deliveries", kWebhookDeliveryCols,
                                       "WHERE state = 'pending' ORDER BY id")},
      {&deliveries_of_hook_,
       SelectSql("webhook_deliveries", kWebhookDeliveryCols,
                 "WHERE webhook_id = ?1 ORDER BY created_at_ms DESC, id DESC LIMIT ?2")},
      {&facts_, SelectSql("job_facts", kJobFactCols,
                          "WHERE at_ms >= ?1 AND since_ms < ?2 ORDER BY at_ms, seq")},
      {&events_before_,
       SelectSql("job_events", kEventCols, "WHERE seq > ?2 AND at_ms < ?1 ORDER BY seq LIMIT ?3")},
      {&usage_before_,
       SelectSql("usage", kUsageCols, "WHERE seq > ?2 AND end_ms < ?1 ORDER BY seq LIMIT ?3")},
  };
  for (const auto& [stmt, sql] : all) ARBITER_RETURN_IF_ERROR(PrepareInto(*conn_, *stmt, sql));
  return Status::Ok();
}

Status Reader::LoadInto(StoreState& s, const LoadOptions& o) {
  Connection& c = *conn_;
  const std::string_view what = "store: load";
  ARBITER_RETURN_IF_ERROR(c.Query(tenants_.get(), what, s.tenants, ReadTenant));
  ARBITER_RETURN_IF_ERROR(c.Query(queues_.get(), what, s.queues, ReadQueue));
  ARBITER_RETURN_IF_ERROR(c.Query(users_.get(), what, s.users, ReadUser));
  ARBITER_RETURN_IF_ERROR(c.Query(tokens_.get(), what, s.tokens, ReadToken));
  ARBITER_RETURN_IF_ERROR(
      c.Query(priority_classes_.get(), what, s.priority_classes, ReadPriorityClass));
  ARBITER_RETURN_IF_ERROR(c.Query(gpu_models_.get(), what, s.gpu_models, ReadGpuModel));
  ARBITER_RETURN_IF_ERROR(c.Query(nodes_.get(), what, s.nodes, ReadNode));
  if (o.finished_max < 0 && o.finished_since_ms <= 0) {
    ARBITER_RETURN_IF_ERROR(c.Query(jobs_.get(), what, s.jobs, ReadJob));
  } else {
    // The live jobs and those still stopping (one partial index), and the latest finished by
    // id, of which those updated within the window are kept.
    ARBITER_RETURN_IF_ERROR(c.Query(live_jobs_.get(), what, s.jobs, ReadJob));
    std::vector<JobRecord> more;
    const int64_t max = o.finished_max < 0 ? std::numeric_limits<int64_t>::max() : o.finished_max;
    ARBITER_RETURN_IF_ERROR(c.Query(latest_finished_.get(), what, more, ReadJob, max));
    KeepUpdatedSince(more, o.finished_since_ms);
    MergeLoadedJobs(s.jobs, std::move(more));
    SortUniqueJobs(s.jobs);
  }
  ARBITER_RETURN_IF_ERROR(c.Query(kv_.get(), what, s.kv, ReadKv));
  ARBITER_RETURN_IF_ERROR(c.Query(services_.get(), what, s.services, ReadService));
  ARBITER_RETURN_IF_ERROR(c.Query(webhooks_.get(), what, s.webhooks, ReadWebhook));
  ARBITER_RETURN_IF_ERROR(
      c.Query(pending_deliveries_.get(), what, s.pending_deliveries, ReadWebhookDelivery));
  std::vector<uint64_t> v;
  auto read_uint = [](Row& r) { return r.Uint(); };
  ARBITER_RETURN_IF_ERROR(c.Query(max_job_id_.get(), what, v, read_uint));
  ARBITER_RETURN_IF_ERROR(c.Query(max_event_seq_.get(), what, v, read_uint));
  if (v.size() != 2) return Internal("store: load: store_meta has no max_job_id");
  s.max_job_id = v[0];
  s.max_event_seq = v[1];
  return Status::Ok();
}

Result<StoreState> Reader::Load(const LoadOptions& o) {
  // One read transaction: every SELECT sees the same snapshot of the WAL.
  ARBITER_RETURN_IF_ERROR(conn_->Run(begin_.get(), "store: load: begin"));
  StoreState state;
  Status st = LoadInto(state, o);
  Status end = conn_->Run(st.ok() ? commit_.get() : rollback_.get(), "store: load: end");
  if (!st.ok()) return st;
  if (!end.ok()) return end;
  return state;
}

Result<JobRecord> Reader::OneJob(std::vector<JobRecord> rows, std::string_view what) {
  if (rows.empty()) return NotFound(fmt::format("store: {}: no such job", what));
  return std::move(rows.front());
}

Result<JobRecord> Reader::GetJob(uint64_t id) {
  std::vector<JobRecord> rows;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(job_by_id_.get(), "store: get job", rows, ReadJob, ClampId(id)));
  return OneJob(std::move(rows), fmt::format("get job {}", id));
}

Result<JobRecord> Reader::JobByKey(const std::string& tenant, const std::string& user,
                                   const std::string& key) {
  std::vector<JobRecord> rows;
  ARBITER_RETURN_IF_ERROR(conn_->Query(job_by_key_.get(), "store: job by idempotency key", rows,
                                       ReadJob, tenant, user, key));
  return OneJob(std::move(rows), "job by idempotency key");
}

Result<std::vector<JobRecord>> Reader::ListJobs(const JobQuery& q) {
  // Only the filters asked for are in the SQL, so that SQLite picks the index that narrows most.
  const JobQuerySql sql = BuildJobQuerySql(q, [](size_t i) { return fmt::format("?{}", i); });
  auto stmt = conn_->Prepare(SelectSql("jobs", kJobCols, "WHERE " + sql.where + " " + sql.tail));
  if (!stmt.ok()) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  for (size_t i = 0; i < sql.params.size(); ++i) {
    const int at = static_cast<int>(i + 1);
    const int rc =
        std::holds_alternative<int64_t>(sql.params[i])
            ? sqlite3_bind_int64(s, at, std::get<int64_t>(sql.params[i]))
            : sqlite3_bind_text(s, at, std::get<std::string>(sql.params[i]).data(),
                                static_cast<int>(std::get<std::string>(sql.params[i]).size()),
                                SQLITE_TRANSIENT);
    if (rc != SQLITE_OK) {
      return sqlite::SqliteStatus(rc, sqlite3_errmsg(conn_->db()), "store: list jobs");
    }
  }
  std::vector<JobRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(s, "store: list jobs", out, ReadJob));
  return out;
}

Result<std::vector<JobEventRecord>> Reader::JobEvents(uint64_t job_id) {
  std::vector<JobEventRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(events_of_job_.get(), "store: job events", out, ReadEvent, job_id));
  return out;
}

Result<std::vector<JobEventRecord>> Reader::EventsSince(uint64_t after_seq, size_t limit) {
  std::vector<JobEventRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(events_since_.get(), "store: events since", out, ReadEvent,
                                       after_seq, ClampLimit(limit)));
  return out;
}

Result<std::vector<UsageRecord>> Reader::Usage(int64_t from_ms, int64_t to_ms) {
  std::vector<UsageRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(usage_.get(), "store: usage", out, ReadUsage, from_ms, to_ms));
  std::sort(out.begin(), out.end(),
            [](const UsageRecord& a, const UsageRecord& b) { return a.seq < b.seq; });
  return out;
}

Result<std::vector<UsageRollupRecord>> Reader::UsageRollup(int64_t from_ms, int64_t to_ms,
                                                           uint32_t columns) {
  columns &= kAllAttributionColumns;
  if (rollup_sum_[columns] == nullptr) {
    ARBITER_RETURN_IF_ERROR(
        PrepareInto(*conn_, rollup_sum_[columns],
                    RollupSumSql(columns, 1, [](int n) { return "?" + std::to_string(n); })));
  }
  if (from_ms % kRollupHourMs != 0) {
    return InvalidArgument("from_ms", "store: usage rollup: must be a whole hour");
  }
  if (to_ms % kRollupHourMs != 0) {
    return InvalidArgument("to_ms", "store: usage rollup: must be a whole hour");
  }
  // One read transaction: the ranges see the same snapshot.
  ARBITER_RETURN_IF_ERROR(conn_->Run(begin_.get(), "store: usage rollup: begin"));
  std::vector<UsageRollupRecord> parts;
  Status st;
  for (const RollupRange& r : RollupRanges(from_ms, to_ms)) {
    st = conn_->Query(rollup_sum_[columns].get(), "store: usage rollup", parts, ReadRollupSum,
                      r.span_ms, r.from_ms, r.to_ms);
    if (!st.ok()) break;
  }
  Status end = conn_->Run(st.ok() ? commit_.get() : rollback_.get(), "store: usage rollup: end");
  if (!st.ok()) return st;
  if (!end.ok()) return end;
  return MergeRollupParts(std::move(parts), from_ms, to_ms);
}

Result<std::vector<JobFactRecord>> Reader::JobFacts(int64_t from_ms, int64_t to_ms) {
  std::vector<JobFactRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(facts_.get(), "store: job facts", out, ReadJobFact, from_ms, to_ms));
  return out;
}

Result<JobWaits> Reader::WaitFacts(int64_t from_ms, int64_t to_ms, uint32_t columns) {
  columns &= kAllAttributionColumns;
  if (waits_[columns] == nullptr) {
    ARBITER_RETURN_IF_ERROR(PrepareInto(*conn_, waits_[columns], JobWaitsSql(columns, "?1", "?2")));
  }
  JobWaitsBuilder b;
  std::vector<JobWait> waits;
  ARBITER_RETURN_IF_ERROR(conn_->Query(
      waits_[columns].get(), "store: job waits", waits, [&b](Row& r) { return ReadJobWait(r, b); },
      from_ms, to_ms));
  return std::move(b).Finish(std::move(waits));
}

Result<std::vector<JobEventRecord>> Reader::EventsBefore(int64_t before_ms, uint64_t after_seq,
                                                         size_t limit) {
  std::vector<JobEventRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(events_before_.get(), "store: events before", out, ReadEvent,
                                       before_ms, after_seq, ClampLimit(limit)));
  return out;
}

Result<std::vector<UsageRecord>> Reader::UsageBefore(int64_t before_ms, uint64_t after_seq,
                                                     size_t limit) {
  std::vector<UsageRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(usage_before_.get(), "store: usage before", out, ReadUsage,
                                       before_ms, after_seq, ClampLimit(limit)));
  return out;
}

Result<std::vector<AuditRecord>> Reader::Audit(uint64_t after_seq, size_t limit) {
  std::vector<AuditRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(audit_.get(), "store: audit", out, ReadAudit, after_seq, ClampLimit(limit)));
  return out;
}

Result<std::vector<AuditRecord>> Reader::QueryAudit(const AuditQuery& q) {
  // Only the filters asked for are in the SQL, so that SQLite picks the index that narrows most
  // (docs/governance.md); a statement per search is cheap next to reading a page of records.
  std::string where = "seq > :after";
  if (q.since_ms) where += " AND at_ms >= :since";
  if (q.until_ms) where += " AND at_ms < :until";
  if (!q.actor.empty()) where += " AND actor = :actor";
  if (!q.action.empty()) where += " AND action = :action";
  if (q.tenant) where += " AND tenant = :tenant";
  // "job/12": the target itself, or anything under "job/12/"; a prefix scan of audit_by_target.
  std::string under = q.object;
  if (!under.empty() && under.back() != '/') under += '/';
  std::string under_end = under;
  if (!under_end.empty()) under_end.back() = static_cast<char>('/' + 1);
  if (!q.object.empty()) {
    where += " AND (target = :object OR (target >= :under AND target < :under_end))";
  }
  auto stmt = conn_->Prepare(
      SelectSql("audit", kAuditCols, "WHERE " + where + " ORDER BY seq LIMIT :limit"));
  if (!stmt.ok()) return stmt.status();
  sqlite3_stmt* s = stmt->get();
  auto bind_text = [&](const char* name, const std::string& v) {
    const int i = sqlite3_bind_parameter_index(s, name);
    return i == 0 ? SQLITE_OK
                  : sqlite3_bind_text(s, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  };
  auto bind_int = [&](const char* name, int64_t v) {
    const int i = sqlite3_bind_parameter_index(s, name);
    return i == 0 ? SQLITE_OK : sqlite3_bind_int64(s, i, v);
  };
  const int64_t after =
      static_cast<int64_t>(std::min<uint64_t>(q.after_seq, std::numeric_limits<int64_t>::max()));
  const int rcs[] = {bind_int(":after", after),
                     bind_int(":limit", ClampLimit(q.limit)),
                     bind_int(":since", q.since_ms.value_or(0)),
                     bind_int(":until", q.until_ms.value_or(0)),
                     bind_text(":actor", q.actor),
                     bind_text(":action", q.action),
                     bind_text(":tenant", q.tenant.value_or("")),
                     bind_text(":object", q.object),
                     bind_text(":under", under),
                     bind_text(":under_end", under_end)};
  for (int rc : rcs) {
    if (rc != SQLITE_OK)
      return sqlite::SqliteStatus(rc, sqlite3_errmsg(conn_->db()), "store: audit query");
  }
  std::vector<AuditRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(s, "store: audit query", out, ReadAudit));
  return out;
}

Result<std::vector<ClusterSampleRecord>> Reader::ClusterSamples(int64_t from_ms, int64_t to_ms) {
  std::vector<ClusterSampleRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(cluster_samples_.get(), "store: cluster samples", out,
                                       ReadClusterSample, from_ms, to_ms));
  return out;
}

Result<std::vector<GpuSampleRecord>> Reader::GpuSamples(int64_t from_ms, int64_t to_ms) {
  std::vector<GpuSampleRecord> out;
  ARBITER_RETURN_IF_ERROR(
      conn_->Query(gpu_samples_.get(), "store: gpu samples", out, ReadGpuSample, from_ms, to_ms));
  return out;
}

Result<std::vector<ServingStatRecord>> Reader::ServingStats(int64_t from_ms, int64_t to_ms) {
  std::vector<ServingStatRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(serving_stats_.get(), "store: serving stats", out,
                                       ReadServingStat, from_ms, to_ms));
  return out;
}

Result<std::vector<WebhookDeliveryRecord>> Reader::WebhookDeliveries(const std::string& webhook_id,
                                                                     size_t limit) {
  std::vector<WebhookDeliveryRecord> out;
  ARBITER_RETURN_IF_ERROR(conn_->Query(deliveries_of_hook_.get(), "store: webhook deliveries", out,
                                       ReadWebhookDelivery, webhook_id, ClampLimit(limit)));
  return out;
}

// ---- Leadership: the lease row and the servers table, on a connection of their own. ---------

class Leases {
 public:
  static Result<std::unique_ptr<Leases>> Create(std::unique_ptr<Connection> conn) {
    auto l = std::unique_ptr<Leases>(new Leases(std::move(conn)));
    const std::pair<Statement*, std::string> all[] = {
        {&l->begin_, "BEGIN IMMEDIATE"},
        {&l->commit_, "COMMIT"},
        {&l->rollback_, "ROLLBACK"},
        {&l->read_,
         "SELECT holder, holder_url, term, expires_at_ms FROM leader_lease WHERE id = 1"},
        {&l->write_,
         "UPDATE leader_lease SET holder = ?1, holder_url = ?2, term = ?3, expires_at_ms = ?4 "
         "WHERE id = 1"},
        {&l->put_server_,
         "INSERT OR REPLACE INTO servers (id, url, role, term, started_at_ms, last_seen_ms) "
         "VALUES (?1, ?2, ?3, ?4, ?5, ?6)"},
        {&l->servers_,
         "SELECT id, url, role, term, started_at_ms, last_seen_ms FROM servers ORDER BY id"},
    };
    for (const auto& [stmt, sql] : all) {
      auto prepared = l->conn_->Prepare(sql);
      if (!prepared.ok()) return prepared.status();
      *stmt = std::move(prepared).value();
    }
    return l;
  }

  // Store::AcquireLease, in one IMMEDIATE transaction: SQLite has one writer at a time, so the
  // lease changes between two transactions of the store's writer, never during one.
  Result<LeaseRecord> Acquire(const std::string& holder, const std::string& url, uint64_t term,
                              int64_t lease_ms) {
    ARBITER_RETURN_IF_ERROR(conn_->Run(begin_.get(), "store: begin (lease)"));
    auto lease = ReadLocked();
    if (!lease.ok()) return Abort(lease.status());
    LeaseRecord l = *lease;
    const bool held_by_caller = l.holder == holder && l.term == term && term != 0;
    const bool expired = l.expires_at_ms <= l.now_ms;
    if ((held_by_caller && !expired) || expired) {
      if (!(held_by_caller && !expired)) ++l.term;  // taken: a new term
      l.holder = holder;
      l.holder_url = url;
      l.expires_at_ms = l.now_ms + lease_ms;
      if (Status st = conn_->Run(write_.get(), "store: write the lease", l.holder, l.holder_url,
                                 l.term, l.expires_at_ms);
          !st.ok()) {
        return Abort(st);
      }
    }
    if (Status st = conn_->Run(commit_.get(), "store: commit (lease)"); !st.ok()) return Abort(st);
    return l;
  }

  Result<LeaseRecord> Read() { return ReadLocked(); }

  Status Release(const std::string& holder, uint64_t term) {
    ARBITER_RETURN_IF_ERROR(conn_->Run(begin_.get(), "store: begin (lease)"));
    auto lease = ReadLocked();
    if (!lease.ok()) return Abort(lease.status());
    if (lease->holder == holder && lease->term == term && lease->expires_at_ms > lease->now_ms) {
      if (Status st = conn_->Run(write_.get(), "store: release the lease", lease->holder,
                                 lease->holder_url, lease->term, lease->now_ms);
          !st.ok()) {
        return Abort(st);
      }
    }
    if (Status st = conn_->Run(commit_.get(), "store: commit (lease)"); !st.ok()) return Abort(st);
    return Status::Ok();
  }

  Status PutServer(const ServerRecord& r) {
    return conn_->Run(put_server_.get(), fmt::format("store: PutServer(id={})", r.id), r.id, r.url,
                      r.role, r.term, r.started_at_ms, WallMs());
  }

  Result<std::vector<ServerRecord>> Servers() {
    std::vector<ServerRecord> out;
    ARBITER_RETURN_IF_ERROR(conn_->Query(servers_.get(), "store: read servers", out, [](Row& row) {
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
  explicit Leases(std::unique_ptr<Connection> conn) : conn_(std::move(conn)) {}

  // The store's clock is this machine's: every server sharing a SQLite file runs on it.
  Result<LeaseRecord> ReadLocked() {
    std::vector<LeaseRecord> rows;
    ARBITER_RETURN_IF_ERROR(conn_->Query(read_.get(), "store: read the lease", rows, [](Row& row) {
      LeaseRecord l;
      l.holder = row.Text();
      l.holder_url = row.Text();
      l.term = row.Uint();
      l.expires_at_ms = row.Int();
      return l;
    }));
    if (rows.size() != 1) return Internal("store: the leader_lease row is missing");
    rows[0].now_ms = WallMs();
    return rows[0];
  }

  Status Abort(Status st) {
    if (conn_->InTransaction()) (void)conn_->Run(rollback_.get(), "store: rollback (lease)");
    return st;
  }

  std::unique_ptr<Connection> conn_;
  Statement begin_, commit_, rollback_, read_, write_, put_server_, servers_;
};

// ---- The store: the queue, the writer thread, the read mutex. --------------------------------

Status Closed() { return FailedPrecondition("store: closed"); }

class SqliteStore final : public Store {
 public:
  SqliteStore(std::unique_ptr<Writer> writer, std::unique_ptr<Reader> reader,
              std::unique_ptr<Leases> leases, SqliteOptions options)
      : options_(options),
        writer_(std::move(writer)),
        reader_(std::move(reader)),
        leases_(std::move(leases)) {
    thread_ = std::thread([this] { WriterLoop(); });
  }
  ~SqliteStore() override { Close(); }

  std::shared_future<Status> WriteAsync(WriteBatch batch) override;
  using Store::Load;
  Result<StoreState> Load(const LoadOptions& o) override;
  Result<JobRecord> GetJob(uint64_t id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobQuery& q) override;
  Result<JobRecord> JobByIdempotencyKey(const std::string& tenant, const std::string& user,
                                        const std::string& key) override;
  Result<std::vector<JobEventRecord>> JobEvents(uint64_t job_id) override;
  Result<std::vector<JobEventRecord>> EventsSince(uint64_t after_seq, size_t limit) override;
  Result<std::vector<UsageRecord>> Usage(int64_t from_ms, int64_t to_ms) override;
  Result<std::vector<UsageRollupRecord>> UsageRollup(int64_t from_ms, int64_t to_ms,
                                                     uint32_t columns) override {
    return Read([&](Reader& r) { return r.UsageRollup(from_ms, to_ms, columns); });
  }
  Result<std::vector<JobFactRecord>> JobFacts(int64_t from_ms, int64_t to_ms) override {
    return Read([&](Reader& r) { return r.JobFacts(from_ms, to_ms); });
  }
  Result<JobWaits> WaitFacts(int64_t from_ms, int64_t to_ms, uint32_t columns) override {
    return Read([&](Reader& r) { return r.WaitFacts(from_ms, to_ms, columns); });
  }
  Result<std::vector<JobEventRecord>> EventsBefore(int64_t before_ms, uint64_t after_seq,
                                                   size_t limit) override {
    return Read([&](Reader& r) { return r.EventsBefore(before_ms, after_seq, limit); });
  }
  Result<std::vector<UsageRecord>> UsageBefore(int64_t before_ms, uint64_t after_seq,
                                               size_t limit) override {
    return Read([&](Reader& r) { return r.UsageBefore(before_ms, after_seq, limit); });
  }
  Result<std::vector<AuditRecord>> Audit(uint64_t after_seq, size_t limit) override;
  Result<std::vector<AuditRecord>> QueryAudit(const AuditQuery& q) override;
  Result<std::vector<ClusterSampleRecord>> ClusterSamples(int64_t from_ms, int64_t to_ms) override;
  Result<std::vector<GpuSampleRecord>> GpuSamples(int64_t from_ms, int64_t to_ms) override;
  Result<std::vector<ServingStatRecord>> ServingStats(int64_t from_ms, int64_t to_ms) override;
  Result<std::vector<WebhookDeliveryRecord>> WebhookDeliveries(const std::string& webhook_id,
                                                               size_t limit) override;
  Result<LeaseRecord> AcquireLease(const std::string& holder, const std::string& holder_url,
                                   uint64_t term, int64_t lease_ms) override;
  Result<LeaseRecord> ReadLease() override;
  Status ReleaseLease(const std::string& holder, uint64_t term) override;
  void SetFence(uint64_t term) override {
    std::lock_guard lock(close_mu_);
    if (writer_ != nullptr) writer_->SetFence(term);
  }
  Status PutServer(const ServerRecord& r) override;
  Result<std::vector<ServerRecord>> Servers() override;
  StoreStats stats() const override;
  void Close() override;

 private:
  struct Pending {
    WriteBatch batch;
    std::promise<Status> done;
  };

  void WriterLoop();
  void RecordStats(const std::vector<Pending>& group, const GroupOutcome& outcome);

  // Runs `fn(reader)` under the read mutex, or fails once closed.
  template <typename Fn>
  auto Read(Fn fn) -> decltype(fn(std::declval<Reader&>())) {
    std::lock_guard lock(read_mu_);
    if (reader_ == nullptr) return Closed();
    return fn(*reader_);
  }

  const SqliteOptions options_;
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
  StoreStats stats_;  // guarded by stats_mu_; `queued` is read from queue_ instead

  std::mutex close_mu_;  // serializes Close()
  std::thread thread_;
};

std::shared_future<Status> SqliteStore::WriteAsync(WriteBatch batch) {
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

void SqliteStore::WriterLoop() {
  pthread_setname_np(pthread_self(), "arbiter-store");
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

void SqliteStore::RecordStats(const std::vector<Pending>& group, const GroupOutcome& outcome) {
  std::lock_guard lock(stats_mu_);
  RecordGroupCommit(stats_, group, outcome.statuses, outcome.commit_us);
}

Result<StoreState> SqliteStore::Load(const LoadOptions& o) {
  return Read([&](Reader& r) { return r.Load(o); });
}

Result<JobRecord> SqliteStore::GetJob(uint64_t id) {
  return Read([&](Reader& r) { return r.GetJob(id); });
}

Result<std::vector<JobRecord>> SqliteStore::ListJobs(const JobQuery& q) {
  return Read([&](Reader& r) { return r.ListJobs(q); });
}

Result<JobRecord> SqliteStore::JobByIdempotencyKey(const std::string& tenant,
                                                   const std::string& user,
                                                   const std::string& key) {
  return Read([&](Reader& r) { return r.JobByKey(tenant, user, key); });
}

Result<std::vector<JobEventRecord>> SqliteStore::JobEvents(uint64_t job_id) {
  return Read([&](Reader& r) { return r.JobEvents(job_id); });
}

Result<std::vector<JobEventRecord>> SqliteStore::EventsSince(uint64_t after_seq, size_t limit) {
  return Read([&](Reader& r) { return r.EventsSince(after_seq, limit); });
}

Result<std::vector<UsageRecord>> SqliteStore::Usage(int64_t from_ms, int64_t to_ms) {
  return Read([&](Reader& r) { return r.Usage(from_ms, to_ms); });
}

Result<std::vector<AuditRecord>> SqliteStore::Audit(uint64_t after_seq, size_t limit) {
  return Read([&](Reader& r) { return r.Audit(after_seq, limit); });
}

Result<std::vector<AuditRecord>> SqliteStore::QueryAudit(const AuditQuery& q) {
  return Read([&](Reader& r) { return r.QueryAudit(q); });
}

Result<std::vector<ClusterSampleRecord>> SqliteStore::ClusterSamples(int64_t from_ms,
                                                                     int64_t to_ms) {
  return Read([&](Reader& r) { return r.ClusterSamples(from_ms, to_ms); });
}

Result<std::vector<GpuSampleRecord>> SqliteStore::GpuSamples(int64_t from_ms, int64_t to_ms) {
  return Read([&](Reader& r) { return r.GpuSamples(from_ms, to_ms); });
}

Result<std::vector<ServingStatRecord>> SqliteStore::ServingStats(int64_t from_ms, int64_t to_ms) {
  return Read([&](Reader& r) { return r.ServingStats(from_ms, to_ms); });
}

Result<std::vector<WebhookDeliveryRecord>> SqliteStore::WebhookDeliveries(
    const std::string& webhook_id, size_t limit) {
  return Read([&](Reader& r) { return r.WebhookDeliveries(webhook_id, limit); });
}

template <typename Fn>
auto WithLeases(std::mutex& mu, std::unique_ptr<Leases>& leases, Fn fn)
    -> decltype(fn(std::declval<Leases&>())) {
  std::lock_guard lock(mu);
  if (leases == nullptr) return Closed();
  return fn(*leases);
}

Result<LeaseRecord> SqliteStore::AcquireLease(const std::string& holder,
                                              const std::string& holder_url, uint64_t term,
                                              int64_t lease_ms) {
  if (holder.empty()) return InvalidArgument("holder", "must not be empty");
  if (lease_ms <= 0) return InvalidArgument("lease_ms", "must be > 0");
  return WithLeases(lease_mu_, leases_,
                    [&](Leases& l) { return l.Acquire(holder, holder_url, term, lease_ms); });
}

Result<LeaseRecord> SqliteStore::ReadLease() {
  return WithLeases(lease_mu_, leases_, [](Leases& l) { return l.Read(); });
}

Status SqliteStore::ReleaseLease(const std::string& holder, uint64_t term) {
  return WithLeases(lease_mu_, leases_, [&](Leases& l) { return l.Release(holder, term); });
}

Status SqliteStore::PutServer(const ServerRecord& r) {
  if (r.id.empty()) return InvalidArgument("id", "must not be empty");
  return WithLeases(lease_mu_, leases_, [&](Leases& l) { return l.PutServer(r); });
}

Result<std::vector<ServerRecord>> SqliteStore::Servers() {
  return WithLeases(lease_mu_, leases_, [](Leases& l) { return l.Servers(); });
}

StoreStats SqliteStore::stats() const {
  StoreStats s;
  {
    std::lock_guard lock(stats_mu_);
    s = stats_;
  }
  std::lock_guard lock(mu_);
  s.queued = queue_.size();
  return s;
}

void SqliteStore::Close() {
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
  // The write connection closes last: as the last connection, it checkpoints the WAL into the
  // main file and removes it.
  writer_.reset();
}

// Journal mode and durability of the write connection.
Status Configure(Connection& conn, const std::string& path, const SqliteOptions& options) {
  Result<std::string> mode =
      conn.QueryText("PRAGMA journal_mode = WAL", fmt::format("store: cannot open {}", path));
  if (!mode.ok()) return mode.status();
  if (*mode != "wal") {
    return Internal(
        fmt::format("store: {}: cannot switch to WAL mode (journal_mode is {})", path, *mode));
  }
  // In WAL mode, FULL syncs the WAL at every commit; NORMAL only at checkpoints.
  ARBITER_RETURN_IF_ERROR(conn.Exec(
      options.synchronous_full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL",
      "store: cannot set synchronous"));
  // Truncate the WAL back to 64 MiB after a checkpoint instead of leaving it at its peak size.
  return conn.Exec("PRAGMA journal_size_limit = 67108864", "store: cannot set journal_size_limit");
}

}  // namespace

Result<std::unique_ptr<Store>> OpenSqliteStore(const std::string& path, SqliteOptions options) {
  if (path.empty() || path == ":memory:") {
    return InvalidArgument("path", "must be a file path (the store uses two connections to it)");
  }
  if (options.max_batches_per_commit == 0) {
    return InvalidArgument("max_batches_per_commit", "must be >= 1, got 0");
  }
  auto write_conn = Connection::Open(path, /*create=*/true, options.busy_timeout_ms);
  if (!write_conn.ok()) return write_conn.status();
  ARBITER_RETURN_IF_ERROR(Configure(**write_conn, path, options));
  ARBITER_RETURN_IF_ERROR(sqlite::ApplyMigrations(**write_conn, path, WallMs()));

  auto read_conn = Connection::Open(path, /*create=*/false, options.busy_timeout_ms);
  if (!read_conn.ok()) return read_conn.status();
  ARBITER_RETURN_IF_ERROR((*read_conn)->Exec("PRAGMA query_only = 1", "store: query_only"));

  auto lease_conn = Connection::Open(path, /*create=*/false, options.busy_timeout_ms);
  if (!lease_conn.ok()) return lease_conn.status();

  auto writer = Writer::Create(std::move(write_conn).value());
  if (!writer.ok()) return writer.status();
  auto reader = Reader::Create(std::move(read_conn).value());
  if (!reader.ok()) return reader.status();
  auto leases = Leases::Create(std::move(lease_conn).value());
  if (!leases.ok()) return leases.status();
  return std::unique_ptr<Store>(new SqliteStore(
      std::move(writer).value(), std::move(reader).value(), std::move(leases).value(), options));
}

}  // namespace arbiter::store
