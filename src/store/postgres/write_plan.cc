#include "store/postgres/write_plan.h"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "store/columns.h"
#include "store/postgres/tables.h"
#include "store/usage_rollup.h"

namespace arbiter::store::postgres {
namespace {

template <typename... F>
struct Overloaded : F... {
  using F::operator()...;
};
template <typename... F>
Overloaded(F...) -> Overloaded<F...>;

// The element types of the multi-row statements' arrays: a column's SQL type, and its OID
// (pg_type), which the binary array format names.
constexpr std::string_view kBigint = "bigint";
constexpr std::string_view kText = "text";
constexpr uint32_t kInt8Oid = 20;
constexpr uint32_t kTextOid = 25;

// The columns of the multi-row statements, after seq for the appends: their SQL types in order.
constexpr std::array<std::string_view, 14> kJobTypes = {kBigint, kText,   kText, kText, kText,
                                                        kText,   kText,   kText, kText, kText,
                                                        kBigint, kBigint, kText, kText};
constexpr std::array<std::string_view, 6> kEventTypes = {kBigint, kBigint, kText,
                                                         kText,   kText,   kText};
constexpr std::array<std::string_view, 12> kUsageTypes = {kBigint, kBigint, kText,   kText,
                                                          kText,   kText,   kText,   kBigint,
                                                          kBigint, kBigint, kBigint, kBigint};
constexpr std::array<std::string_view, 9> kAuditTypes = {kBigint, kText, kText, kText, kText,
                                                         kText,   kText, kText, kText};
static_assert(kJobTypes.size() == kJobCols.size());
static_assert(kEventTypes.size() + 1 == kEventCols.size());
static_assert(kUsageTypes.size() + 1 == kUsageCols.size());
static_assert(kAuditTypes.size() + 1 == kAuditCols.size());

// One array parameter in PostgreSQL's binary format (array_recv): a header (dimensions: 1, no
// nulls, the element type's OID, the length, the lower bound 1), then each element as its length
// and its bytes, every integer in network byte order. Text elements are the bytes as they are,
// so no quoting or escaping: any text value round-trips.
class ArrayParam {
 public:
  explicit ArrayParam(std::string_view type)
      : oid_(type == kBigint ? kInt8Oid : kTextOid), data_(kHeaderSize, '\0') {}

  void Int(int64_t v) {
    Put32(8);
    Put64(static_cast<uint64_t>(v));
    ++n_;
  }
  void Text(std::string_view v) {
    Put32(static_cast<uint32_t>(v.size()));
    data_.append(v);
    ++n_;
  }
  std::string Finish() && {
    size_t at = 0;
    auto put = [&](uint32_t v) {
      for (int shift = 24; shift >= 0; shift -= 8) {
        data_[at++] = static_cast<char>((v >> shift) & 0xff);
      }
    };
    put(1);     // dimensions
    put(0);     // flags: no nulls
    put(oid_);  // element type
    put(n_);    // length
    put(1);     // lower bound
    return std::move(data_);
  }

 private:
  static constexpr size_t kHeaderSize = 20;
  void Put32(uint32_t v) {
    const char b[4] = {static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
    data_.append(b, 4);
  }
  void Put64(uint64_t v) {
    Put32(static_cast<uint32_t>(v >> 32));
    Put32(static_cast<uint32_t>(v));
  }

  uint32_t oid_;
  std::string data_;
  uint32_t n_ = 0;
};

// The arrays of one multi-row statement, one per column.
class Arrays {
 public:
  explicit Arrays(std::span<const std::string_view> types) {
    cols_.reserve(types.size());
    for (std::string_view t : types) cols_.emplace_back(t);
  }
  ArrayParam& operator[](size_t i) { return cols_[i]; }
  Params Finish() && {
    Params p;
    for (ArrayParam& a : cols_) p.Binary(std::move(a).Finish());
    return p;
  }

 private:
  std::vector<ArrayParam> cols_;
};

}  // namespace

std::vector<std::pair<const char*, std::string>> WriteStatements() {
  return {
      {"fence", "SELECT arbiter_check_fence($1)"},
      {"put_tenant", UpsertSql("tenants", kTenantCols)},
      {"del_tenant", DeleteSql("tenants", kTenantCols)},
      {"put_queue", UpsertSql("queues", kQueueCols)},
      {"del_queue", DeleteSql("queues", kQueueCols)},
      {"put_user", UpsertSql("users", kUserCols)},
      {"del_user", DeleteSql("users", kUserCols)},
      {"put_token", UpsertSql("tokens", kTokenCols)},
      {"del_token", DeleteSql("tokens", kTokenCols)},
      {"put_priority_class", UpsertSql("priority_classes", kPriorityClassCols)},
      {"del_priority_class", DeleteSql("priority_classes", kPriorityClassCols)},
      {"put_gpu_model", UpsertSql("gpu_models", kGpuModelCols)},
      {"del_gpu_model", DeleteSql("gpu_models", kGpuModelCols)},
      {"put_node", UpsertSql("nodes", kNodeCols)},
      {"del_node", DeleteSql("nodes", kNodeCols)},
      {"put_job", UpsertSql("jobs", kJobCols)},
      {"del_job", DeleteSql("jobs", kJobCols)},
      {"put_kv", UpsertSql("kv", kKvCols)},
      {"del_kv", DeleteSql("kv", kKvCols)},
      {"append_event", AppendSql("job_events", kEventCols)},
      {"append_usage", AppendSql("usage", kUsageCols)},
      {"append_audit", AppendSql("audit", kAuditCols)},
      {"put_cluster_sample", UpsertSql("cluster_samples", kClusterSampleCols)},
      // Keyed by (at_ms, node, gpu, resolution_ms): the columns' order differs from the key's.
      {"put_gpu_sample",
       fmt::format("{} ON CONFLICT (at_ms, node, gpu, resolution_ms) DO UPDATE SET "
                   "span_ms = EXCLUDED.span_ms, busy_ms = EXCLUDED.busy_ms, "
                   "memory_max_mib = EXCLUDED.memory_max_mib, "
                   "memory_mib_ms = EXCLUDED.memory_mib_ms",
                   InsertSql("gpu_samples", kGpuSampleCols))},
      // Rolls raw GPU samples older than $1 up into hourly rows, adding to an hourly row there.
      {"roll_up_gpu_samples",
       "INSERT INTO gpu_samples (resolution_ms, node, gpu, at_ms, span_ms, busy_ms, "
       "memory_max_mib, memory_mib_ms) "
       "SELECT 3600000, node, gpu, (at_ms / 3600000) * 3600000, sum(span_ms), sum(busy_ms), "
       "max(memory_max_mib), sum(memory_mib_ms) "
       "FROM gpu_samples WHERE resolution_ms < 3600000 AND at_ms < $1 "
       "GROUP BY node, gpu, at_ms / 3600000 "
       "ON CONFLICT (at_ms, node, gpu, resolution_ms) DO UPDATE SET "
       "span_ms = gpu_samples.span_ms + EXCLUDED.span_ms, "
       "busy_ms = gpu_samples.busy_ms + EXCLUDED.busy_ms, "
       "memory_max_mib = greatest(gpu_samples.memory_max_mib, EXCLUDED.memory_max_mib), "
       "memory_mib_ms = gpu_samples.memory_mib_ms + EXCLUDED.memory_mib_ms"},
      {"del_raw_gpu_samples",
       "DELETE FROM gpu_samples WHERE resolution_ms < 3600000 AND at_ms < $1"},
      {"del_hourly_gpu_samples",
       "DELETE FROM gpu_samples WHERE resolution_ms >= 3600000 AND at_ms < $1"},
      {"del_cluster_samples", "DELETE FROM cluster_samples WHERE at_ms < $1"},
      {"put_service", UpsertSql("services", kServiceCols)},
      {"del_service", DeleteSql("services", kServiceCols)},
      {"put_serving_stat", UpsertSql("serving_stats", kServingStatCols, 3)},
      {"del_serving_stats", "DELETE FROM serving_stats WHERE minute_ms < $1"},
      {"put_webhook", UpsertSql("webhooks", kWebhookCols)},
      {"del_webhook", DeleteSql("webhooks", kWebhookCols)},
      {"del_webhook_deliveries", "DELETE FROM webhook_deliveries WHERE webhook_id = $1"},
      {"put_webhook_delivery", UpsertSql("webhook_deliveries", kWebhookDeliveryCols)},
      {"prune_webhook_deliveries",
       "DELETE FROM webhook_deliveries WHERE state <> 'pending' AND updated_at_ms < $1"},
      {"add_usage_rollup",
       fmt::format("{} ON CONFLICT (span_ms, at_ms, tenant, queue, \"user\", job_type, gpu_model) "
                   "DO UPDATE SET gpu_milli_ms = usage_rollups.gpu_milli_ms + "
                   "EXCLUDED.gpu_milli_ms, cost_micro = usage_rollups.cost_micro + "
                   "EXCLUDED.cost_micro",
                   InsertSql("usage_rollups", kUsageRollupCols))},
      {"append_fact", AppendSql("job_facts", kJobFactCols)},
      {"prune_events", "DELETE FROM job_events WHERE at_ms < $1 AND seq <= $2"},
      {"prune_usage", "DELETE FROM usage WHERE end_ms < $1 AND seq <= $2"},
      // The multi-row statements of PlanGroup.
      {"put_jobs", UpsertManySql("jobs", kJobCols, kJobTypes)},
      {"append_events", AppendManySql("job_events", kEventCols, kEventTypes)},
      {"append_usages", AppendManySql("usage", kUsageCols, kUsageTypes)},
      {"append_audits", AppendManySql("audit", kAuditCols, kAuditTypes)},
  };
}

namespace {

// A usage record's own row (without the rollups).
void EncodeUsageAppend(const UsageRecord& r, const WriteOp& op, size_t batch,
                       std::vector<Call>& out) {
  out.push_back(Call{"append_usage",
                     Params()
                         .SeqOrNull(r.seq)
                         .Uint(r.job_id)
                         .Int(r.task)
                         .Text(r.tenant)
                         .Text(r.queue)
                         .Text(r.user)
                         .Text(r.job_type)
                         .Text(r.gpu_model)
                         .Int(r.gpu_milli)
                         .Int(r.gpu_memory_mib)
                         .Int(r.start_ms)
                         .Int(r.end_ms)
                         .Int(r.cost_micro),
                     batch, &op, 1});
}

// The report aggregates a usage record adds to, in the same transaction as the record.
void EncodeUsageRollups(const UsageRecord& r, const WriteOp& op, size_t batch,
                        std::vector<Call>& out) {
  for (const RollupPart& part : SplitUsage(r)) {
    out.push_back(Call{"add_usage_rollup",
                       Params()
                           .Int(part.span_ms)
                           .Int(part.at_ms)
                           .Text(r.tenant)
                           .Text(r.queue)
                           .Text(r.user)
                           .Text(r.job_type)
                           .Text(r.gpu_model)
                           .Int(part.gpu_milli_ms)
                           .Double(part.cost_micro),
                       batch, &op, 1});
  }
}

}  // namespace

void EncodeOp(const WriteOp& op, size_t batch, std::vector<Call>& out) {
  auto add = [&](const char* stmt, Params p) {
    out.push_back(Call{stmt, std::move(p), batch, &op, 1});
  };
  std::visit(
      Overloaded{
          [&](const TenantRecord& r) {
            add("put_tenant", Params().Text(r.name).Text(r.spec_json).Int(r.created_at_ms));
          },
          [&](const op::DeleteTenant& r) { add("del_tenant", Params().Text(r.name)); },
          [&](const QueueRecord& r) {
            add("put_queue", Params().Text(r.name).Text(r.tenant).Text(r.parent).Text(r.spec_json));
          },
          [&](const op::DeleteQueue& r) { add("del_queue", Params().Text(r.name)); },
          [&](const UserRecord& r) {
            add("put_user", Params().Text(r.name).Text(r.tenant).Text(r.role).Int(r.created_at_ms));
          },
          [&](const op::DeleteUser& r) { add("del_user", Params().Text(r.name)); },
          [&](const TokenRecord& r) {
            add("put_token", Params()
                                 .Text(r.id)
                                 .Text(r.hash_hex)
                                 .Text(r.user)
                                 .Text(r.tenant)
                                 .Text(r.role)
                                 .Text(r.kind)
                                 .Int(r.created_at_ms)
                                 .Int(r.expires_at_ms)
                                 .Bool(r.revoked)
                                 .Text(r.node)
                                 .Text(r.scope));
          },
          [&](const op::DeleteToken& r) { add("del_token", Params().Text(r.id)); },
          [&](const PriorityClassRecord& r) {
            add("put_priority_class", Params().Text(r.name).Text(r.spec_json));
          },
          [&](const op::DeletePriorityClass& r) {
            add("del_priority_class", Params().Text(r.name));
          },
          [&](const GpuModelRecord& r) {
            add("put_gpu_model", Params().Text(r.name).Text(r.spec_json));
          },
          [&](const op::DeleteGpuModel& r) { add("del_gpu_model", Params().Text(r.name)); },
          [&](const NodeRecord& r) {
            add("put_node",
                Params().Text(r.name).Text(r.spec_json).Text(r.state).Int(r.updated_at_ms));
          },
          [&](const op::DeleteNode& r) { add("del_node", Params().Text(r.name)); },
          [&](const JobRecord& r) {
            add("put_job", Params()
                               .Uint(r.id)
                               .Text(r.tenant)
                               .Text(r.queue)
                               .Text(r.user)
                               .Text(r.name)
                               .Text(r.type)
                               .Text(r.state)
                               .Text(r.spec_json)
                               .Text(r.status_json)
                               .Text(r.idempotency_key)
                               .Int(r.submitted_at_ms)
                               .Int(r.updated_at_ms)
                               .Text(r.secret_env_json)
                               .Text(r.request_digest));
          },
          [&](const op::DeleteJob& r) { add("del_job", Params().Uint(r.id)); },
          [&](const KvRecord& r) { add("put_kv", Params().Text(r.key).Bytes(r.value)); },
          [&](const op::DeleteKv& r) { add("del_kv", Params().Text(r.key)); },
          [&](const JobEventRecord& r) {
            add("append_event", Params()
                                    .SeqOrNull(r.seq)
                                    .Uint(r.job_id)
                                    .Int(r.at_ms)
                                    .Text(r.from_state)
                                    .Text(r.to_state)
                                    .Text(r.reason)
                                    .Text(r.detail_json));
          },
          [&](const UsageRecord& r) {
            EncodeUsageAppend(r, op, batch, out);
            EncodeUsageRollups(r, op, batch, out);
          },
          [&](const AuditRecord& r) {
            add("append_audit", Params()
                                    .SeqOrNull(r.seq)
                                    .Int(r.at_ms)
                                    .Text(r.actor)
                                    .Text(r.action)
                                    .Text(r.target)
                                    .Text(r.result)
                                    .Text(r.detail_json)
                                    .Text(r.token_id)
                                    .Text(r.source)
                                    .Text(r.tenant));
          },
          [&](const ClusterSampleRecord& r) {
            add("put_cluster_sample", Params().Int(r.at_ms).Int(r.interval_ms).Text(r.data_json));
          },
          [&](const GpuSampleRecord& r) {
            add("put_gpu_sample", Params()
                                      .Int(r.resolution_ms)
                                      .Text(r.node)
                                      .Int(r.gpu)
                                      .Int(r.at_ms)
                                      .Int(r.span_ms)
                                      .Int(r.busy_ms)
                                      .Int(r.memory_max_mib)
                                      .Int(r.memory_mib_ms));
          },
          [&](const op::CompactSamples& r) {
            // Roll up, then delete what was rolled up: one op, so in one transaction.
            add("roll_up_gpu_samples", Params().Int(r.gpu_rollup_before_ms));
            add("del_raw_gpu_samples", Params().Int(r.gpu_rollup_before_ms));
            add("del_hourly_gpu_samples", Params().Int(r.gpu_hourly_before_ms));
            add("del_cluster_samples", Params().Int(r.cluster_before_ms));
            add("del_serving_stats", Params().Int(r.serving_before_ms));
          },
          [&](const ServiceRecord& r) {
            add("put_service", Params()
                                   .Text(r.name)
                                   .Text(r.tenant)
                                   .Text(r.spec_json)
                                   .Text(r.secret_env_json)
                                   .Int(r.updated_at_ms));
          },
          [&](const op::DeleteService& r) { add("del_service", Params().Text(r.name)); },
          [&](const ServingStatRecord& r) {
            add("put_serving_stat",
                Params().Int(r.minute_ms).Text(r.service).Int(r.revision).Text(r.data_json));
          },
          [&](const WebhookRecord& r) {
            add("put_webhook", Params()
                                   .Text(r.id)
                                   .Text(r.tenant)
                                   .Text(r.user)
                                   .Text(r.spec_json)
                                   .Text(r.secret)
                                   .Int(r.created_at_ms));
          },
          [&](const op::DeleteWebhook& r) {
            add("del_webhook_deliveries", Params().Text(r.id));
            add("del_webhook", Params().Text(r.id));
          },
          [&](const WebhookDeliveryRecord& r) {
            add("put_webhook_delivery", Params()
                                            .Text(r.id)
                                            .Text(r.webhook_id)
                                            .Text(r.state)
                                            .Int(r.created_at_ms)
                                            .Int(r.updated_at_ms)
                                            .Text(r.data_json));
          },
          [&](const op::PruneWebhookDeliveries& r) {
            add("prune_webhook_deliveries", Params().Int(r.finished_before_ms));
          },
          [&](const JobFactRecord& r) {
            add("append_fact", Params()
                                   .SeqOrNull(r.seq)
                                   .Uint(r.job_id)
                                   .Int(r.at_ms)
                                   .Text(r.kind)
                                   .Text(r.tenant)
                                   .Text(r.queue)
                                   .Text(r.user)
                                   .Text(r.job_type)
                                   .Text(r.gpu_model)
                                   .Int(r.since_ms)
                                   .Int(r.lost_milli_ms)
                                   .Text(r.reason)
                                   .Int(r.gpu_milli));
          },
          [&](const op::PruneHistory& r) {
            add("prune_events", Params().Int(r.before_ms).Uint(r.max_event_seq));
            add("prune_usage", Params().Int(r.before_ms).Uint(r.max_usage_seq));
          },
      },
      op);
}

std::vector<Call> EncodeOps(std::span<const WriteBatch* const> batches) {
  std::vector<Call> calls;
  for (size_t b = 0; b < batches.size(); ++b) {
    for (const WriteOp& op : batches[b]->ops()) EncodeOp(op, b, calls);
  }
  return calls;
}

namespace {

// The tables whose ops PlanGroup gathers.
enum Table : size_t { kJobs, kEvents, kUsage, kAudit, kTables };

struct Item {
  const WriteOp* op;
  size_t batch;
};

class Planner {
 public:
  explicit Planner(std::vector<Call>& out) : out_(out) {}

  void Add(const WriteOp& op, size_t batch) {
    std::visit(Overloaded{
                   [&](const JobRecord& r) {
                     if (!job_ids_.insert(r.id).second) {  // the same job again: a new run
                       Flush(kJobs);
                       job_ids_.insert(r.id);
                     }
                     runs_[kJobs].push_back({&op, batch});
                   },
                   [&](const op::DeleteJob&) { Alone(kJobs, op, batch); },
                   [&](const JobEventRecord& r) { Append(kEvents, r.seq, op, batch); },
                   [&](const UsageRecord& r) {
                     if (r.seq != 0) return Alone(kUsage, op, batch);  // rollups included
                     runs_[kUsage].push_back({&op, batch});
                     // Its rollups write another table: where the op stands.
                     EncodeUsageRollups(r, op, batch, out_);
                   },
                   [&](const AuditRecord& r) { Append(kAudit, r.seq, op, batch); },
                   // Every other op writes none of the gathered tables.
                   [&](const auto&) { EncodeOp(op, batch, out_); },
               },
               op);
  }

  void FlushAll() {
    for (size_t t = 0; t < kTables; ++t) Flush(static_cast<Table>(t));
  }

 private:
  void Append(Table t, uint64_t seq, const WriteOp& op, size_t batch) {
    if (seq != 0) return Alone(t, op, batch);  // its own seq: in order with the table's others
    runs_[t].push_back({&op, batch});
  }
  // An op on table `t` that is not gathered: after the run gathered so far.
  void Alone(Table t, const WriteOp& op, size_t batch) {
    Flush(t);
    EncodeOp(op, batch, out_);
  }

  void Flush(Table t) {
    std::vector<Item>& run = runs_[t];
    if (t == kJobs) job_ids_.clear();
    if (run.empty()) return;
    if (run.size() == 1 && t == kUsage) {
      // The row alone: its rollups went out where the op stood.
      EncodeUsageAppend(std::get<UsageRecord>(*run[0].op), *run[0].op, run[0].batch, out_);
    } else if (run.size() == 1) {
      EncodeOp(*run[0].op, run[0].batch, out_);
    } else {
      out_.push_back(Call{kStatements[t], Encode(t, run), run[0].batch, nullptr, run.size()});
    }
    run.clear();
  }

  static Params Encode(Table t, const std::vector<Item>& run) {
    switch (t) {
      case kJobs: {
        Arrays a(kJobTypes);
        for (const Item& i : run) {
          const auto& r = std::get<JobRecord>(*i.op);
          a[0].Int(static_cast<int64_t>(r.id));
          a[1].Text(r.tenant);
          a[2].Text(r.queue);
          a[3].Text(r.user);
          a[4].Text(r.name);
          a[5].Text(r.type);
          a[6].Text(r.state);
          a[7].Text(r.spec_json);
          a[8].Text(r.status_json);
          a[9].Text(r.idempotency_key);
          a[10].Int(r.submitted_at_ms);
          a[11].Int(r.updated_at_ms);
          a[12].Text(r.secret_env_json);
          a[13].Text(r.request_digest);
        }
        return std::move(a).Finish();
      }
      case kEvents: {
        Arrays a(kEventTypes);
        for (const Item& i : run) {
          const auto& r = std::get<JobEventRecord>(*i.op);
          a[0].Int(static_cast<int64_t>(r.job_id));
          a[1].Int(r.at_ms);
          a[2].Text(r.from_state);
          a[3].Text(r.to_state);
          a[4].Text(r.reason);
          a[5].Text(r.detail_json);
        }
        return std::move(a).Finish();
      }
      case kUsage: {
        Arrays a(kUsageTypes);
        for (const Item& i : run) {
          const auto& r = std::get<UsageRecord>(*i.op);
          a[0].Int(static_cast<int64_t>(r.job_id));
          a[1].Int(r.task);
          a[2].Text(r.tenant);
          a[3].Text(r.queue);
          a[4].Text(r.user);
          a[5].Text(r.job_type);
          a[6].Text(r.gpu_model);
          a[7].Int(r.gpu_milli);
          a[8].Int(r.gpu_memory_mib);
          a[9].Int(r.start_ms);
          a[10].Int(r.end_ms);
          a[11].Int(r.cost_micro);
        }
        return std::move(a).Finish();
      }
      case kAudit:
      case kTables:
        break;
    }
    Arrays a(kAuditTypes);
    for (const Item& i : run) {
      const auto& r = std::get<AuditRecord>(*i.op);
      a[0].Int(r.at_ms);
      a[1].Text(r.actor);
      a[2].Text(r.action);
      a[3].Text(r.target);
      a[4].Text(r.result);
      a[5].Text(r.detail_json);
      a[6].Text(r.token_id);
      a[7].Text(r.source);
      a[8].Text(r.tenant);
    }
    return std::move(a).Finish();
  }

  static constexpr std::array<const char*, kTables> kStatements = {
      "put_jobs", "append_events", "append_usages", "append_audits"};
  std::vector<Call>& out_;
  std::array<std::vector<Item>, kTables> runs_;
  std::unordered_set<uint64_t> job_ids_;  // the ids in runs_[kJobs]
};

}  // namespace

std::vector<Call> PlanGroup(std::span<const WriteBatch* const> batches) {
  std::vector<Call> calls;
  Planner planner(calls);
  for (size_t b = 0; b < batches.size(); ++b) {
    for (const WriteOp& op : batches[b]->ops()) planner.Add(op, b);
  }
  planner.FlushAll();
  return calls;
}

}  // namespace arbiter::store::postgres
