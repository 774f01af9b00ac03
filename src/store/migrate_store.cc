#include "store/migrate_store.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <utility>

namespace arbiter::store {
namespace {

// Wide enough for every instant a sample can have, narrow enough that the readers' window
// arithmetic (at_ms - 1 hour) cannot overflow.
constexpr int64_t kMinMs = -(int64_t{1} << 60);
constexpr int64_t kMaxMs = int64_t{1} << 60;
constexpr size_t kPage = 5000;

// Writes ops in batches of `rows`.
class Copier {
 public:
  Copier(Store& to, size_t rows) : to_(to), rows_(rows) {}
  template <typename Fn>
  Status Add(Fn add) {
    add(batch_);
    return batch_.size() >= rows_ ? Flush() : Status::Ok();
  }
  Status Flush() {
    if (batch_.empty()) return Status::Ok();
    Status st = to_.Write(std::move(batch_));
    batch_ = WriteBatch();
    return st;
  }

 private:
  Store& to_;
  size_t rows_;
  WriteBatch batch_;
};

// Pages through a history table: `read(after, limit)` returns records in seq order.
template <typename Read, typename Each>
Result<uint64_t> EachPage(Read read, Each each) {
  uint64_t after = 0, n = 0;
  for (;;) {
    auto page = read(after, kPage);
    if (!page.ok()) return page.status();
    for (const auto& r : *page) {
      ARBITER_RETURN_IF_ERROR(each(r));
      after = r.seq;
      ++n;
    }
    if (page->size() < kPage) return n;
  }
}

template <typename Read>
Result<std::pair<uint64_t, uint64_t>> CountAndMaxSeq(Read read) {
  uint64_t max = 0;
  auto n = EachPage(read, [&](const auto& r) {
    max = std::max<uint64_t>(max, r.seq);
    return Status::Ok();
  });
  if (!n.ok()) return n.status();
  return std::pair<uint64_t, uint64_t>(*n, max);
}

// Every usage record, in seq order: one per task that ended, read at once (the Store has no
// paged read of usage; a row is about 150 bytes).
Result<std::vector<UsageRecord>> AllUsage(Store& s) { return s.Usage(kMinMs, kMaxMs); }

struct History {
  uint64_t events = 0, usage = 0, audit = 0;             // counts
  uint64_t max_event = 0, max_usage = 0, max_audit = 0;  // highest seqs
  uint64_t max_fact = 0;  // the report facts' highest seq (they are not counted)
};

Result<History> ReadHistory(Store& s) {
  History h;
  auto events = CountAndMaxSeq([&](uint64_t a, size_t l) { return s.EventsSince(a, l); });
  if (!events.ok()) return events.status();
  auto usage = AllUsage(s);
  if (!usage.ok()) return usage.status();
  auto audit = CountAndMaxSeq([&](uint64_t a, size_t l) { return s.Audit(a, l); });
  if (!audit.ok()) return audit.status();
  h.events = events->first;
  h.max_event = events->second;
  h.usage = usage->size();
  h.max_usage = usage->empty() ? 0 : usage->back().seq;
  h.audit = audit->first;
  h.max_audit = audit->second;
  auto facts = s.JobFacts(kMinMs, kMaxMs);
  if (!facts.ok()) return facts.status();
  for (const JobFactRecord& f : *facts) h.max_fact = std::max<uint64_t>(h.max_fact, f.seq);
  return h;
}

// Every row of every table but the append-only history, as counts by table name.
struct Snapshot {
  StoreState state;
  std::vector<WebhookDeliveryRecord> deliveries;  // every delivery of every webhook
  std::vector<ClusterSampleRecord> cluster_samples;
  std::vector<GpuSampleRecord> gpu_samples;
  std::vector<ServingStatRecord> serving_stats;
};

Result<Snapshot> ReadSnapshot(Store& s) {
  Snapshot snap;
  auto state = s.Load();
  if (!state.ok()) return state.status();
  snap.state = std::move(state).value();
  for (const WebhookRecord& w : snap.state.webhooks) {
    auto d = s.WebhookDeliveries(w.id, std::numeric_limits<size_t>::max());
    if (!d.ok()) return d.status();
    snap.deliveries.insert(snap.deliveries.end(), d->begin(), d->end());
  }
  auto cluster = s.ClusterSamples(kMinMs, kMaxMs);
  if (!cluster.ok()) return cluster.status();
  snap.cluster_samples = std::move(cluster).value();
  auto gpu = s.GpuSamples(kMinMs, kMaxMs);
  if (!gpu.ok()) return gpu.status();
  snap.gpu_samples = std::move(gpu).value();
  auto serving = s.ServingStats(kMinMs, kMaxMs);
  if (!serving.ok()) return serving.status();
  snap.serving_stats = std::move(serving).value();
  return snap;
}

std::vector<TableCount> Counts(const Snapshot& s, const History& h) {
  const StoreState& st = s.state;
  return {{"tenants", st.tenants.size()},
          {"queues", st.queues.size()},
          {"users", st.users.size()},
          {"tokens", st.tokens.size()},
          {"priority_classes", st.priority_classes.size()},
          {"gpu_models", st.gpu_models.size()},
          {"nodes", st.nodes.size()},
          {"jobs", st.jobs.size()},
          {"kv", st.kv.size()},
          {"services", st.services.size()},
          {"webhooks", st.webhooks.size()},
          {"webhook_deliveries", s.deliveries.size()},
          {"job_events", h.events},
          {"usage", h.usage},
          {"audit", h.audit},
          {"cluster_samples", s.cluster_samples.size()},
          {"gpu_samples", s.gpu_samples.size()},
          {"serving_stats", s.serving_stats.size()}};
}

bool HoldsRecords(const Snapshot& s, const History& h) {
  for (const TableCount& c : Counts(s, h)) {
    if (c.source > 0) return true;
  }
  return false;
}

template <typename T, typename Put>
Status CopyAll(Copier& c, const std::vector<T>& rows, Put put) {
  for (const T& r : rows) {
    ARBITER_RETURN_IF_ERROR(c.Add([&](WriteBatch& b) { (b.*put)(r); }));
  }
  return Status::Ok();
}

Status CopyState(const Snapshot& s, Copier& c) {
  const StoreState& st = s.state;
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.tenants, &WriteBatch::PutTenant));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.queues, &WriteBatch::PutQueue));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.users, &WriteBatch::PutUser));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.tokens, &WriteBatch::PutToken));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.priority_classes, &WriteBatch::PutPriorityClass));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.gpu_models, &WriteBatch::PutGpuModel));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.nodes, &WriteBatch::PutNode));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.jobs, &WriteBatch::PutJob));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.kv, &WriteBatch::PutKv));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.services, &WriteBatch::PutService));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, st.webhooks, &WriteBatch::PutWebhook));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, s.deliveries, &WriteBatch::PutWebhookDelivery));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, s.cluster_samples, &WriteBatch::PutClusterSample));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, s.gpu_samples, &WriteBatch::PutGpuSample));
  ARBITER_RETURN_IF_ERROR(CopyAll(c, s.serving_stats, &WriteBatch::PutServingStat));
  // Job ids are never reused: the highest id ever used survives the copy even when that job's
  // row was deleted. Deleting a row is what notes its id, so a placeholder job with that id is
  // put and deleted in one batch (atomic: it is never visible).
  const uint64_t max_row_id = st.jobs.empty() ? 0 : st.jobs.back().id;
  if (st.max_job_id > max_row_id) {
    ARBITER_RETURN_IF_ERROR(c.Flush());
    ARBITER_RETURN_IF_ERROR(c.Add([&](WriteBatch& b) {
      b.PutJob({.id = st.max_job_id, .state = "deleted"});
      b.DeleteJob(st.max_job_id);
    }));
  }
  return c.Flush();
}

// Appends the history newer than what the target has (all of it, for an empty target).
Status CopyHistory(Store& from, Copier& c, const History& target, const MigrateOptions& o) {
  auto say = [&](const std::string& table) {
    if (o.progress) o.progress(table);
  };
  say("job_events");
  auto events = EachPage([&](uint64_t a, size_t l) { return from.EventsSince(a, l); },
                         [&](const JobEventRecord& r) {
                           if (r.seq <= target.max_event) return Status::Ok();
                           return c.Add([&](WriteBatch& b) { b.AppendJobEvent(r); });
                         });
  if (!events.ok()) return events.status();
  say("usage");
  auto usage = AllUsage(from);
  if (!usage.ok()) return usage.status();
  for (const UsageRecord& r : *usage) {
    if (r.seq <= target.max_usage) continue;
    ARBITER_RETURN_IF_ERROR(c.Add([&](WriteBatch& b) { b.AppendUsage(r); }));
  }
  say("audit");
  auto audit = EachPage([&](uint64_t a, size_t l) { return from.Audit(a, l); },
                        [&](const AuditRecord& r) {
                          if (r.seq <= target.max_audit) return Status::Ok();
                          return c.Add([&](WriteBatch& b) { b.AppendAudit(r); });
                        });
  if (!audit.ok()) return audit.status();
  // The report facts (the usage rollups are rebuilt by the target as it appends the usage).
  say("job_facts");
  auto facts = from.JobFacts(kMinMs, kMaxMs);
  if (!facts.ok()) return facts.status();
  for (const JobFactRecord& r : *facts) {
    if (r.seq <= target.max_fact) continue;
    ARBITER_RETURN_IF_ERROR(c.Add([&](WriteBatch& b) { b.AppendJobFact(r); }));
  }
  return c.Flush();
}

// Every source row is in the target, equal: state tables by key, history by count and order.
Status Verify(const Snapshot& src, const Snapshot& dst, bool force) {
  auto subset = [&](const auto& a, const auto& b, const char* table) -> Status {
    // Both sorted by key: every row of `a` must be in `b` (equal sets without --force).
    size_t j = 0;
    for (const auto& row : a) {
      while (j < b.size() && !(b[j] == row)) ++j;
      if (j == b.size()) return Internal(fmt::format("migrate-store: {}: a row differs", table));
    }
    if (!force && a.size() != b.size()) {
      return Internal(fmt::format("migrate-store: {}: {} rows in the source, {} in the target",
                                  table, a.size(), b.size()));
    }
    return Status::Ok();
  };
  const StoreState& a = src.state;
  const StoreState& b = dst.state;
  ARBITER_RETURN_IF_ERROR(subset(a.tenants, b.tenants, "tenants"));
  ARBITER_RETURN_IF_ERROR(subset(a.queues, b.queues, "queues"));
  ARBITER_RETURN_IF_ERROR(subset(a.users, b.users, "users"));
  ARBITER_RETURN_IF_ERROR(subset(a.tokens, b.tokens, "tokens"));
  ARBITER_RETURN_IF_ERROR(subset(a.priority_classes, b.priority_classes, "priority_classes"));
  ARBITER_RETURN_IF_ERROR(subset(a.gpu_models, b.gpu_models, "gpu_models"));
  ARBITER_RETURN_IF_ERROR(subset(a.nodes, b.nodes, "nodes"));
  ARBITER_RETURN_IF_ERROR(subset(a.jobs, b.jobs, "jobs"));
  ARBITER_RETURN_IF_ERROR(subset(a.kv, b.kv, "kv"));
  ARBITER_RETURN_IF_ERROR(subset(a.services, b.services, "services"));
  ARBITER_RETURN_IF_ERROR(subset(a.webhooks, b.webhooks, "webhooks"));
  ARBITER_RETURN_IF_ERROR(subset(a.pending_deliveries, b.pending_deliveries, "deliveries"));
  ARBITER_RETURN_IF_ERROR(subset(src.cluster_samples, dst.cluster_samples, "cluster_samples"));
  ARBITER_RETURN_IF_ERROR(subset(src.gpu_samples, dst.gpu_samples, "gpu_samples"));
  ARBITER_RETURN_IF_ERROR(subset(src.serving_stats, dst.serving_stats, "serving_stats"));
  if (b.max_job_id < a.max_job_id || b.max_event_seq < a.max_event_seq) {
    return Internal(
        "migrate-store: the target's highest job id or event seq is below the source's");
  }
  return Status::Ok();
}

// The history rows of the source must all be in the target: compared row by row.
template <typename ReadSrc, typename ReadDst>
Status SameHistory(ReadSrc read_src, ReadDst read_dst, const char* table) {
  uint64_t after = 0;
  for (;;) {
    auto a = read_src(after, kPage);
    if (!a.ok()) return a.status();
    auto b = read_dst(after, kPage);
    if (!b.ok()) return b.status();
    for (size_t i = 0; i < a->size(); ++i) {
      if (i >= b->size() || !((*a)[i] == (*b)[i])) {
        return Internal(
            fmt::format("migrate-store: {}: the row with seq {} differs", table, (*a)[i].seq));
      }
    }
    if (a->size() < kPage) return Status::Ok();
    after = a->back().seq;
  }
}

}  // namespace

Result<std::vector<TableCount>> MigrateStore(Store& from, Store& to, const MigrateOptions& o) {
  if (o.batch_rows == 0) return InvalidArgument("batch_rows", "must be >= 1, got 0");
  auto say = [&](const std::string& what) {
    if (o.progress) o.progress(what);
  };
  // 1. What the target holds: refused unless empty or forced.
  auto target_snap = ReadSnapshot(to);
  if (!target_snap.ok()) return target_snap.status();
  auto target_hist = ReadHistory(to);
  if (!target_hist.ok()) return target_hist.status();
  if (!o.force && HoldsRecords(*target_snap, *target_hist)) {
    return FailedPrecondition(
        "migrate-store: the target store already holds records; pass --force to copy into it "
        "anyway (records with the same keys are replaced, newer history is appended)");
  }
  // 2. The source's state and samples, then its history, page by page.
  say("reading the source");
  auto src = ReadSnapshot(from);
  if (!src.ok()) return src.status();
  Copier copier(to, o.batch_rows);
  say("copying the state tables and samples");
  ARBITER_RETURN_IF_ERROR(CopyState(*src, copier));
  ARBITER_RETURN_IF_ERROR(CopyHistory(from, copier, *target_hist, o));
  ARBITER_RETURN_IF_ERROR(to.Write(WriteBatch()));  // a barrier: everything is durable

  // 3. Verify: read both again and compare.
  say("verifying");
  auto dst = ReadSnapshot(to);
  if (!dst.ok()) return dst.status();
  auto src_hist = ReadHistory(from);
  if (!src_hist.ok()) return src_hist.status();
  auto dst_hist = ReadHistory(to);
  if (!dst_hist.ok()) return dst_hist.status();
  ARBITER_RETURN_IF_ERROR(Verify(*src, *dst, o.force));
  if (!o.force) {
    ARBITER_RETURN_IF_ERROR(
        SameHistory([&](uint64_t a, size_t l) { return from.EventsSince(a, l); },
                    [&](uint64_t a, size_t l) { return to.EventsSince(a, l); }, "job_events"));
    auto usage_a = AllUsage(from);
    if (!usage_a.ok()) return usage_a.status();
    auto usage_b = AllUsage(to);
    if (!usage_b.ok()) return usage_b.status();
    if (*usage_a != *usage_b) return Internal("migrate-store: usage: the copy differs");
    ARBITER_RETURN_IF_ERROR(SameHistory([&](uint64_t a, size_t l) { return from.Audit(a, l); },
                                        [&](uint64_t a, size_t l) { return to.Audit(a, l); },
                                        "audit"));
  }
  std::vector<TableCount> counts = Counts(*src, *src_hist);
  const std::vector<TableCount> after = Counts(*dst, *dst_hist);
  for (size_t i = 0; i < counts.size(); ++i) {
    counts[i].target = after[i].source;
    if (counts[i].target < counts[i].source) {
      return Internal(fmt::format("migrate-store: {}: {} rows in the source, {} in the target",
                                  counts[i].table, counts[i].source, counts[i].target));
    }
  }
  return counts;
}

}  // namespace arbiter::store
