// The records of the durable store and the WriteBatch that changes them.
//
// Records are plain values: each mirrors one row of one table (docs/store.md). Nested specs
// (`spec_json`, `status_json`, `detail_json`) are JSON text owned by the server: the store keeps
// them byte for byte and never parses them.
//
// Tokens are stored only as hashes: `TokenRecord::hash_hex` is the lowercase hex digest (at least
// 128 bits, e.g. SHA-256, 64 characters) that the server computes from the plain token, which the
// store never sees. The schema refuses a `hash_hex` that is not lowercase hex of 32 to 128 digits,
// so a plain token passed by mistake is not written.
//
// Every member has a default initializer, so designated initializers that name only some members
// compile cleanly under -Wextra.
//
// Thread safety: plain values; a WriteBatch is built by one thread and then moved into the store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace arbiter::store {

struct TenantRecord {
  std::string name{};
  std::string spec_json{};
  int64_t created_at_ms = 0;

  bool operator==(const TenantRecord&) const = default;
};

struct QueueRecord {
  std::string name{};
  std::string tenant{};
  std::string parent{};  // empty: a top-level queue of its tenant
  std::string spec_json{};

  bool operator==(const QueueRecord&) const = default;
};

struct UserRecord {
  std::string name{};
  std::string tenant{};
  std::string role{};
  int64_t created_at_ms = 0;

  bool operator==(const UserRecord&) const = default;
};

struct TokenRecord {
  std::string id{};
  std::string hash_hex{};  // lowercase hex digest of the token; never the token itself
  std::string user{};
  std::string tenant{};
  std::string role{};
  std::string kind{};
  int64_t created_at_ms = 0;
  int64_t expires_at_ms = 0;  // 0: never expires
  bool revoked = false;
  std::string node{};          // a node token's node; "" for user tokens
  std::string scope = "full";  // "full" or "read-only" (GET and HEAD only)

  bool operator==(const TokenRecord&) const = default;
};

struct PriorityClassRecord {
  std::string name{};
  std::string spec_json{};

  bool operator==(const PriorityClassRecord&) const = default;
};

struct GpuModelRecord {
  std::string name{};
  std::string spec_json{};

  bool operator==(const GpuModelRecord&) const = default;
};

struct NodeRecord {
  std::string name{};
  std::string spec_json{};
  std::string state{};
  int64_t updated_at_ms = 0;

  bool operator==(const NodeRecord&) const = default;
};

struct JobRecord {
  uint64_t id = 0;  // > 0, assigned by the server (StoreState::max_job_id + 1 onwards)
  std::string tenant{}, queue{}, user{}, name{}, type{}, state{};
  std::string spec_json{};
  std::string status_json{};
  // When not empty, unique per (tenant, user): a second job of the same tenant and user with the
  // same key is refused.
  std::string idempotency_key{};
  int64_t submitted_at_ms = 0;
  int64_t updated_at_ms = 0;
  // The values of the job's secret variables (api::SecretEnvJsonText; '' for none): never part of
  // spec_json, which the API returns.
  std::string secret_env_json{};
  // SHA-256 (hex) of the submission the job was made from, for Idempotency-Key replays ('' for
  // jobs recorded before schema 5).
  std::string request_digest{};

  bool operator==(const JobRecord&) const = default;
};

// Append-only: events are never changed or deleted once written.
struct JobEventRecord {
  // > 0: given by the server (StoreState::max_event_seq + 1 onwards), unique; 0: the store assigns
  // the next one. A server should do one or the other, not mix them.
  uint64_t seq = 0;
  uint64_t job_id = 0;
  int64_t at_ms = 0;
  std::string from_state{}, to_state{}, reason{}, detail_json{};

  bool operator==(const JobEventRecord&) const = default;
};

// Append-only: one task's use of GPUs over [start_ms, end_ms), written when it ends.
struct UsageRecord {
  uint64_t seq = 0;  // 0: the store assigns the next one
  uint64_t job_id = 0;
  int32_t task = 0;
  std::string tenant{}, queue{}, user{}, job_type{}, gpu_model{};
  int64_t gpu_milli = 0, gpu_memory_mib = 0, start_ms = 0, end_ms = 0, cost_micro = 0;

  bool operator==(const UsageRecord&) const = default;
};

// Append-only.
struct AuditRecord {
  uint64_t seq = 0;  // 0: the store assigns the next one
  int64_t at_ms = 0;
  std::string actor{}, action{}, target{}, result{}, detail_json{};
  std::string token_id{};  // the token that made the call ("": none)
  std::string source{};    // the client's address as the HTTP layer saw it ("": none)
  std::string tenant{};    // the tenant the record concerns ("": cluster-wide)

  bool operator==(const AuditRecord&) const = default;
};

// A search of the audit log (Store::QueryAudit). Empty strings and absent bounds filter nothing.
struct AuditQuery {
  uint64_t after_seq = 0;  // records with seq > after_seq
  size_t limit = 100;
  std::optional<int64_t> since_ms{};  // at_ms >= since_ms
  std::optional<int64_t> until_ms{};  // at_ms < until_ms
  std::string actor{};                // exactly
  std::string action{};               // exactly
  // The target exactly, or a path under it: "job/12" matches "job/12" and "job/12/...", "job/"
  // (or "job") matches every "job/..." record.
  std::string object{};
  std::optional<std::string> tenant{};  // exactly (a tenant admin's view)
};

// The leadership lease of the servers sharing one store (docs/operations.md): one row. `term` is
// the fencing epoch: it grows by one every time the lease is taken (never on a renewal), so a
// deposed leader's term is always below the store's. Times are the store's clock.
struct LeaseRecord {
  std::string holder{};      // the server id holding (or last holding) the lease; "" = never held
  std::string holder_url{};  // its API URL, where followers and clients find the leader
  uint64_t term = 0;         // 0 = never held
  int64_t expires_at_ms = 0;
  int64_t now_ms = 0;  // the store's clock when the row was read (not stored)

  bool operator==(const LeaseRecord&) const = default;
};

// One server of those sharing a store, as it last reported itself (docs/operations.md).
struct ServerRecord {
  std::string id{};    // unique per process: host, pid and start time
  std::string url{};   // its API URL
  std::string role{};  // "leader", "follower" or "stopped"
  uint64_t term = 0;   // the term it leads, or the newest it has seen
  int64_t started_at_ms = 0;
  int64_t last_seen_ms = 0;  // the store's clock at its last report

  bool operator==(const ServerRecord&) const = default;
};

// What the cluster looked like at one instant, written by the server's sampler every interval; the
// sample stands for [at_ms, at_ms + interval_ms). `data_json` holds the figures (docs/reports.md).
// Keyed by at_ms: a second sample at the same instant replaces the first. Pruned by age.
struct ClusterSampleRecord {
  int64_t at_ms = 0;
  int64_t interval_ms = 0;  // > 0
  std::string data_json{};

  bool operator==(const ClusterSampleRecord&) const = default;
};

// Telemetry of one GPU over [at_ms, at_ms + resolution_ms). The server writes raw samples
// (resolution_ms: its sampling interval); CompactSamples rolls them up into hourly ones
// (resolution_ms = kHourMs) by summing span_ms, busy_ms and memory_mib_ms and keeping the highest
// memory_max_mib. Keyed by (resolution_ms, node, gpu, at_ms): a raw sample with the same key
// replaces the earlier one.
struct GpuSampleRecord {
  static constexpr int64_t kHourMs = 3'600'000;
  int64_t resolution_ms = 0;  // > 0
  std::string node{};
  int32_t gpu = 0;  // index on the node
  int64_t at_ms = 0;
  int64_t span_ms = 0;         // telemetry time the row sums
  int64_t busy_ms = 0;         // sum of span x utilisation / 100
  int64_t memory_max_mib = 0;  // highest memory in use
  int64_t memory_mib_ms = 0;   // sum of span x memory in use

  bool operator==(const GpuSampleRecord&) const = default;
};

// Small named values the server keeps durable (cursors, budget periods, cluster settings).
// `value` may hold any bytes.
struct KvRecord {
  std::string key{}, value{};

  bool operator==(const KvRecord&) const = default;
};

// An online service (docs/services.md): the server's JSON of the object, and its revisions'
// secret variables kept apart ('' for none).
struct ServiceRecord {
  std::string name{};
  std::string tenant{};
  std::string spec_json{};
  std::string secret_env_json{};
  int64_t updated_at_ms = 0;

  bool operator==(const ServiceRecord&) const = default;
};

// What was measured of one service revision over one minute [minute_ms, minute_ms + 60 s).
// Keyed by (minute_ms, service, revision): a put replaces the row (the server sums before it
// writes). Pruned by age (CompactSamples).
struct ServingStatRecord {
  int64_t minute_ms = 0;
  std::string service{};
  int64_t revision = 0;
  std::string data_json{};

  bool operator==(const ServingStatRecord&) const = default;
};

// A webhook (docs/webhooks.md): its owner, the server's JSON of its settings, and the key its
// deliveries are signed with (kept because signing needs it; the API never returns it again).
struct WebhookRecord {
  std::string id{};
  std::string tenant{};  // "" : a cluster-wide hook
  std::string user{};    // the user a user-scoped hook belongs to; who made it otherwise
  std::string spec_json{};
  std::string secret{};
  int64_t created_at_ms = 0;

  bool operator==(const WebhookRecord&) const = default;
};

// One event for one webhook. `state`: pending, delivered or failed (given up). `data_json`: the
// server's JSON of the event, its body and its attempts. A put replaces the row.
struct WebhookDeliveryRecord {
  std::string id{};
  std::string webhook_id{};
  std::string state{};
  int64_t created_at_ms = 0;
  int64_t updated_at_ms = 0;
  std::string data_json{};

  bool operator==(const WebhookDeliveryRecord&) const = default;
};

// ---- Report aggregates (docs/reports.md, "How the reports read the records") ----

// GPU time and cost of the usage records inside [from_ms, to_ms), summed per (tenant, queue, user,
// job_type, gpu_model). The store keeps hourly and daily rows as usage records are appended, in
// the same transaction: each record is split at hour boundaries, so that the rows of any period of
// whole hours add up exactly to the records' GPU time inside it.
struct UsageRollupRecord {
  int64_t from_ms = 0, to_ms = 0;
  std::string tenant{}, queue{}, user{}, job_type{}, gpu_model{};
  int64_t gpu_milli_ms = 0;  // sum of gpu_milli x overlap (exact)
  double cost_micro = 0;     // sum of cost_micro x overlap / (end_ms - start_ms)

  bool operator==(const UsageRollupRecord&) const = default;
};

// One fact of a job that the wait, failures and preemptions reports count, attributed to the job's
// tenant, queue, user, type and GPU model as they were at at_ms. Append-only; the server writes it
// in the batch that appends the job event it comes from, so the two never disagree.
//   kind "admitted":  the job was admitted after waiting since since_ms (a wait);
//        "unqueued":  the job left pending at at_ms without an admission (cancel, suspend);
//        "succeeded", "failed": a run's outcome; `reason` is the failure's cause;
//        "preempted": a preemption; `reason` is its reason, lost_milli_ms the GPU time of the run
//                     it ended (the job's GPUs x time since the run reached running; 0 if never).
// since_ms <= at_ms always: the start of what the fact ends (the wait; for other kinds at_ms or
// the run's start), so that a read of [from, to) finds every wait that overlaps it.
struct JobFactRecord {
  uint64_t seq = 0;  // 0: the store assigns the next one
  uint64_t job_id = 0;
  int64_t at_ms = 0;
  std::string kind{};
  std::string tenant{}, queue{}, user{}, job_type{}, gpu_model{};
  int64_t since_ms = 0;
  int64_t lost_milli_ms = 0;
  std::string reason{};
  int64_t gpu_milli = 0;  // the job's GPUs, all tasks (the forecast's queued demand)

  bool operator==(const JobFactRecord&) const = default;
};

// The waits among the job facts (kinds "admitted" and "unqueued"), in the compact form the wait
// report and the forecast read (Store::JobWaits): each distinct attribution once, and per wait
// its bounds, GPUs and the index of its attribution. A year of waits is millions of rows; this
// keeps them at 32 bytes each.
struct WaitAttribution {
  std::string tenant{}, queue{}, user{}, job_type{}, gpu_model{};

  bool operator==(const WaitAttribution&) const = default;
};

struct JobWait {
  int64_t at_ms = 0;     // when the wait ended (the fact's at_ms)
  int64_t since_ms = 0;  // when it began
  int64_t gpu_milli = 0;
  uint32_t attribution = 0;  // index into JobWaits::attributions
  bool admitted = false;     // ended by an admission ("admitted"), else left pending ("unqueued")

  bool operator==(const JobWait&) const = default;
};

struct JobWaits {
  std::vector<WaitAttribution> attributions;
  std::vector<JobWait> waits;
};

// Which attribution columns a read of the waits (Store::WaitFacts) or of the usage rollups
// (Store::UsageRollup) keeps besides the tenant (always kept): a report grouped by queue needs
// neither users nor models, and fewer distinct attributions make a read of millions of rows
// cheaper (the rollups are summed per distinct kept columns). The columns left out are empty.
enum AttributionColumns : uint32_t {
  kAttributionQueue = 1,
  kAttributionUser = 2,
  kAttributionJobType = 4,
  kAttributionGpuModel = 8,
  kAllAttributionColumns = 15,
};

// The operations a WriteBatch holds. A Put* op is the record itself (insert or replace by key); a
// Delete* op names the key. Deleting a key that is not there is not an error.
namespace op {
struct DeleteTenant {
  std::string name;
};
struct DeleteQueue {
  std::string name;
};
struct DeleteUser {
  std::string name;
};
struct DeleteToken {
  std::string id;
};
struct DeletePriorityClass {
  std::string name;
};
struct DeleteGpuModel {
  std::string name;
};
struct DeleteNode {
  std::string name;
};
struct DeleteJob {
  uint64_t id = 0;
};
struct DeleteKv {
  std::string key;
};
struct DeleteService {
  std::string name;
};
// Retention of the samples: raw GPU samples with at_ms < gpu_rollup_before_ms are rolled up into
// hourly ones (added to an hourly row that is already there) and deleted; hourly GPU samples with
// at_ms < gpu_hourly_before_ms and cluster samples with at_ms < cluster_before_ms are deleted.
// Idempotent: running it twice with the same bounds changes nothing the second time.
struct CompactSamples {
  int64_t gpu_rollup_before_ms = 0;
  int64_t gpu_hourly_before_ms = 0;
  int64_t cluster_before_ms = 0;
  int64_t serving_before_ms = 0;  // serving stats with minute_ms below it are deleted
};
// Deletes a webhook and every delivery of it.
struct DeleteWebhook {
  std::string id;
};
// Deletes the finished (delivered or failed) webhook deliveries last updated before the bound.
struct PruneWebhookDeliveries {
  int64_t finished_before_ms = 0;
};
// Retention of the raw history (docs/store.md): deletes the job events with at_ms < before_ms and
// seq <= max_event_seq, and the usage records with end_ms < before_ms and seq <= max_usage_seq
// (the rows the server archived first). The report aggregates (usage rollups, job facts) stay.
struct PruneHistory {
  int64_t before_ms = 0;
  uint64_t max_event_seq = 0;
  uint64_t max_usage_seq = 0;
};
}  // namespace op

using WriteOp =
    std::variant<TenantRecord, op::DeleteTenant, QueueRecord, op::DeleteQueue, UserRecord,
                 op::DeleteUser, TokenRecord, op::DeleteToken, PriorityClassRecord,
                 op::DeletePriorityClass, GpuModelRecord, op::DeleteGpuModel, NodeRecord,
                 op::DeleteNode, JobRecord, op::DeleteJob, KvRecord, op::DeleteKv, JobEventRecord,
                 UsageRecord, AuditRecord, ClusterSampleRecord, GpuSampleRecord, op::CompactSamples,
                 ServiceRecord, op::DeleteService, ServingStatRecord, WebhookRecord,
                 op::DeleteWebhook, WebhookDeliveryRecord, op::PruneWebhookDeliveries,
                 JobFactRecord, op::PruneHistory>;

// "PutJob", "DeleteTenant", "AppendAudit", ...
std::string_view WriteOpName(const WriteOp& op);
// The op and its key, for error messages: "PutJob(id=17)", "DeleteQueue(name=research)".
std::string DescribeWriteOp(const WriteOp& op);

// One atomic unit of change: all of it commits, or none of it. Ops apply in the order they were
// added, so a Put followed by a Delete of the same key leaves no row.
class WriteBatch {
 public:
  void PutTenant(TenantRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteTenant(std::string name) { ops_.emplace_back(op::DeleteTenant{std::move(name)}); }
  void PutQueue(QueueRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteQueue(std::string name) { ops_.emplace_back(op::DeleteQueue{std::move(name)}); }
  void PutUser(UserRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteUser(std::string name) { ops_.emplace_back(op::DeleteUser{std::move(name)}); }
  void PutToken(TokenRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteToken(std::string id) { ops_.emplace_back(op::DeleteToken{std::move(id)}); }
  void PutPriorityClass(PriorityClassRecord r) { ops_.emplace_back(std::move(r)); }
  void DeletePriorityClass(std::string name) {
    ops_.emplace_back(op::DeletePriorityClass{std::move(name)});
  }
  void PutGpuModel(GpuModelRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteGpuModel(std::string name) { ops_.emplace_back(op::DeleteGpuModel{std::move(name)}); }
  void PutNode(NodeRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteNode(std::string name) { ops_.emplace_back(op::DeleteNode{std::move(name)}); }
  void PutJob(JobRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteJob(uint64_t id) { ops_.emplace_back(op::DeleteJob{id}); }
  void PutKv(KvRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteKv(std::string key) { ops_.emplace_back(op::DeleteKv{std::move(key)}); }
  void AppendJobEvent(JobEventRecord r) { ops_.emplace_back(std::move(r)); }
  void AppendUsage(UsageRecord r) { ops_.emplace_back(std::move(r)); }
  void AppendAudit(AuditRecord r) { ops_.emplace_back(std::move(r)); }
  void PutClusterSample(ClusterSampleRecord r) { ops_.emplace_back(std::move(r)); }
  void PutGpuSample(GpuSampleRecord r) { ops_.emplace_back(std::move(r)); }
  void CompactSamples(op::CompactSamples c) { ops_.emplace_back(c); }
  void PutService(ServiceRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteService(std::string name) { ops_.emplace_back(op::DeleteService{std::move(name)}); }
  void PutServingStat(ServingStatRecord r) { ops_.emplace_back(std::move(r)); }
  void PutWebhook(WebhookRecord r) { ops_.emplace_back(std::move(r)); }
  void DeleteWebhook(std::string id) { ops_.emplace_back(op::DeleteWebhook{std::move(id)}); }
  void PutWebhookDelivery(WebhookDeliveryRecord r) { ops_.emplace_back(std::move(r)); }
  void PruneWebhookDeliveries(op::PruneWebhookDeliveries p) { ops_.emplace_back(p); }
  void AppendJobFact(JobFactRecord r) { ops_.emplace_back(std::move(r)); }
  void PruneHistory(op::PruneHistory p) { ops_.emplace_back(p); }

  // Moves every op of `other` to the end of this batch.
  void Append(WriteBatch other);

  void Reserve(size_t ops) { ops_.reserve(ops); }  // room for this many ops, allocated once
  bool empty() const { return ops_.empty(); }
  size_t size() const { return ops_.size(); }
  const std::vector<WriteOp>& ops() const { return ops_; }
  void Clear() { ops_.clear(); }

 private:
  std::vector<WriteOp> ops_;
};

// ---- Job history: finished jobs read from the store (Store::GetJob, ListJobs) ----------------
//
// The server holds live jobs and a window of recently finished ones in memory; older finished
// jobs are read back from the store. "Finished" is a state in kFinishedJobStates (the server's
// final states); the indexes of these reads are partial (docs/store.md, "Job history").
inline constexpr std::string_view kFinishedJobStates[] = {"succeeded", "failed", "cancelled",
                                                          "timed-out", "rejected"};

// Which jobs Store::Load reads. Every unfinished job is always read, and every finished one
// whose status says it is still stopping (`"stopping":true`: its processes may still run).
struct LoadOptions {
  // At most this many other finished jobs: the latest by id (a scan of the newest ids that stops
  // after them); -1: every one.
  int64_t finished_max = -1;
  // Of those, only the ones with updated_at_ms >= it (0: no bound).
  int64_t finished_since_ms = 0;
};

// A search of the jobs table (Store::ListJobs). Each list filters by "any of" (empty: any).
struct JobQuery {
  std::vector<std::string> tenants{}, queues{}, users{}, states{}, types{};
  bool finished_only = false;      // only jobs in a state of kFinishedJobStates
  uint64_t after_id = 0;           // id > after_id
  uint64_t before_id = 0;          // id < before_id (0: no bound)
  int64_t submitted_until_ms = 0;  // submitted_at_ms <= it (0: no bound)
  int64_t updated_since_ms = 0;    // updated_at_ms >= it (0: no bound)
  bool newest_first = false;       // by id descending (else ascending)
  size_t limit = 100;
};

// Everything the server loads at start. Each vector is sorted by its key (jobs by id). Events,
// usage, audit and samples are not loaded: they are read with the Store's queries.
struct StoreState {
  std::vector<TenantRecord> tenants;
  std::vector<QueueRecord> queues;
  std::vector<UserRecord> users;
  std::vector<TokenRecord> tokens;
  std::vector<PriorityClassRecord> priority_classes;
  std::vector<GpuModelRecord> gpu_models;
  std::vector<NodeRecord> nodes;
  std::vector<JobRecord> jobs;
  std::vector<KvRecord> kv;
  std::vector<ServiceRecord> services;
  std::vector<WebhookRecord> webhooks;
  // The webhook deliveries still pending (by id); finished ones are read with
  // Store::WebhookDeliveries.
  std::vector<WebhookDeliveryRecord> pending_deliveries;
  // The highest job id ever written, deleted jobs included: ids are never reused.
  uint64_t max_job_id = 0;
  // The highest job event seq written.
  uint64_t max_event_seq = 0;
};

}  // namespace arbiter::store
