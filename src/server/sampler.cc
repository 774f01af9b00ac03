// Metering: the cluster and GPU samples the control plane records, the inputs of a report, and
// the sampler thread. The figures of a sample are defined in docs/reports.md ("Cluster samples").
#include "server/sampler.h"

#include <fmt/format.h>
#include <pthread.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <set>
#include <tuple>

#include "server/history_retention.h"
#include "server/report_inputs.h"

namespace arbiter::server {
namespace {

using nlohmann::json;

constexpr DurationMs kMaxSampleIntervalMs = 3'600'000;

Status Denied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }

// The shape of a pending job's task, as far as fragmentation is concerned.
struct Shape {
  std::vector<std::string> models;  // allowed GPU models; empty: any
  int32_t gpus = 0;
  int32_t gpu_milli = 1000;
  int64_t gpu_memory_mib = 0;
  auto operator<=>(const Shape&) const = default;
};

bool Allows(const std::vector<std::string>& models, const std::string& model) {
  return models.empty() || std::find(models.begin(), models.end(), model) != models.end();
}

// Free capacity of one ready node: per GPU, milli-GPU not allocated.
struct NodeFree {
  const Node* node = nullptr;
  std::vector<int64_t> free;  // per entry of node->gpus (0 for unhealthy GPUs)
  int64_t total_free = 0;
};

// Whether one task of `s` fits the node's free GPUs.
bool TaskFits(const Shape& s, const NodeFree& n) {
  int32_t whole = 0;
  for (size_t i = 0; i < n.node->gpus.size(); ++i) {
    const Gpu& g = n.node->gpus[i];
    if (!Allows(s.models, g.model)) continue;
    if (s.gpu_memory_mib > 0 && g.memory_mib > 0 && g.memory_mib < s.gpu_memory_mib) continue;
    if (s.gpus == 1 && s.gpu_milli < 1000) {
      if (n.free[i] >= s.gpu_milli) return true;
    } else if (n.free[i] >= 1000) {
      ++whole;
    }
  }
  return s.gpus > 0 && whole >= s.gpus;
}

// Running work by (tenant, queue, user, type, model): GPUs held and, where the GPUs report
// telemetry, busy = sum over its GPUs of share x utilisation.
json RunningWork(const std::map<uint64_t, JobEntry*>& active,
                 const std::map<std::pair<std::string, int32_t>, int32_t>& util) {
  using RunKey = std::tuple<std::string, std::string, std::string, std::string, std::string>;
  std::map<RunKey, std::pair<int64_t, std::optional<int64_t>>> running;
  for (const auto& [id, entry] : active) {
    const JobEntry& j = *entry;
    if (!j.holds_capacity() || j.placement.empty()) continue;
    auto& r = running[{j.spec.tenant, j.spec.queue, j.spec.user,
                       std::string(JobTypeName(j.spec.type)), j.gpu_model}];
    for (const PlacedTask& t : j.placement) {
      for (size_t g = 0; g < t.gpu_indices.size() && g < t.gpu_milli.size(); ++g) {
        r.first += t.gpu_milli[g];
        auto u = util.find({t.node, t.gpu_indices[g]});
        if (u != util.end()) r.second = r.second.value_or(0) + t.gpu_milli[g] * u->second / 100;
      }
    }
  }
  json running_json = json::array();
  for (const auto& [k, v] : running) {
    running_json.push_back({{"tenant", std::get<0>(k)},
                            {"queue", std::get<1>(k)},
                            {"user", std::get<2>(k)},
                            {"type", std::get<3>(k)},
                            {"gpu_model", std::get<4>(k)},
                            {"gpus", v.first},
                            {"busy", v.second ? json(*v.second) : json(nullptr)}});
  }
  return running_json;
}

// The backlog by queue, why each waiting job did not use the free GPUs, and the free GPUs on
// nodes where no waiting job's task fits (returned).
int64_t Backlog(const std::map<uint64_t, JobEntry*>& active, const std::vector<NodeFree>& ready,
                int64_t free, json* queues, std::map<std::string, int64_t>* by_reason,
                int64_t* waiting) {
  std::map<std::string, int64_t> free_by_model;
  for (const NodeFree& n : ready) {
    for (size_t i = 0; i < n.node->gpus.size(); ++i)
      free_by_model[n.node->gpus[i].model] += n.free[i];
  }
  std::set<Shape> shapes;
  for (const auto& [id, entry] : active) {
    const JobEntry& j = *entry;
    if (j.state != JobState::kPending) continue;
    const int64_t needed = int64_t{j.spec.tasks} * j.spec.resources.total_gpu_milli();
    json& q = (*queues)[j.spec.queue];
    if (q.is_null()) q = {{"tenant", j.spec.tenant}, {"pending_jobs", 0}, {"pending_gpus", 0}};
    q["pending_jobs"] = q["pending_jobs"].get<int64_t>() + 1;
    q["pending_gpus"] = q["pending_gpus"].get<int64_t>() + needed;
    if (needed <= 0) continue;
    ++*waiting;
    shapes.insert({j.spec.gpu_models, j.spec.resources.gpus, j.spec.resources.gpu_milli,
                   j.spec.resources.gpu_memory_mib});
    int64_t free_allowed = j.spec.gpu_models.empty() ? free : 0;
    for (const std::string& m : j.spec.gpu_models) {
      auto it = free_by_model.find(m);
      if (it != free_by_model.end()) free_allowed += it->second;
    }
    const std::string code =
        j.verdict ? std::string(core::VerdictCodeName(j.verdict->code)) : std::string();
    ++(*by_reason)[std::string(reports::WaitReason(code, free_allowed, free, needed))];
  }
  // 5. Fragmentation: free GPUs on nodes where no waiting job's task fits.
  int64_t fragmented = 0;
  if (!shapes.empty()) {
    for (const NodeFree& n : ready) {
      const bool usable =
          std::any_of(shapes.begin(), shapes.end(), [&](const Shape& s) { return TaskFits(s, n); });
      if (!usable) fragmented += n.total_free;
    }
  }
  return fragmented;
}

}  // namespace

Status ControlPlane::RecordSamples(DurationMs interval) {
  if (interval <= 0 || interval > kMaxSampleIntervalMs) {
    return InvalidArgument("interval", fmt::format("must be 1 ms .. 1 h, got {} ms", interval));
  }
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimeMs now = now_();
    // 1. What each GPU holds: milli-GPU allocated by (node, CUDA index), and who holds it.
    struct Holder {
      const JobEntry* job;
      int32_t milli;
    };
    std::map<std::pair<std::string, int32_t>, std::vector<Holder>> held;
    for (const auto& [id, entry] : jobs_.active) {
      const JobEntry& j = *entry;
      if (!j.holds_capacity()) continue;
      for (const PlacedTask& t : j.placement) {
        for (size_t g = 0; g < t.gpu_indices.size() && g < t.gpu_milli.size(); ++g) {
          held[{t.node, t.gpu_indices[g]}].push_back({&j, t.gpu_milli[g]});
        }
      }
    }
    // 2. Nodes: capacity, allocation, telemetry (fresh only: at most two intervals old).
    int64_t total = 0, allocated = 0, free = 0;
    std::optional<int64_t> busy;
    int64_t idle_nodes = 0;
    std::vector<NodeFree> ready;
    std::map<std::pair<std::string, int32_t>, int32_t> util;  // by (node, index), percent
    store::WriteBatch b;
    for (const auto& [name, e] : nodes_.all) {
      if (e.node.state == NodeState::kDown) continue;
      const bool fresh = e.last_heartbeat >= now - 2 * std::max<DurationMs>(interval, 10'000);
      if (fresh && e.status.is_object()) {
        for (const json& g : e.status.value("gpus", json::array())) {
          if (!g.is_object() || !g.contains("index")) continue;
          const int32_t index = g.value("index", 0);
          const int32_t pct = std::clamp(g.value("utilization_pct", 0), 0, 100);
          const int64_t mem = std::max<int64_t>(0, g.value("memory_used_mib", int64_t{0}));
          util[{name, index}] = pct;
          busy = busy.value_or(0) + int64_t{pct} * 10;
          b.PutGpuSample(
              {interval, name, index, now, interval, interval * pct / 100, mem, interval * mem});
        }
      }
      NodeFree nf{&e.node, {}, 0};
      int64_t node_alloc = 0;
      for (const Gpu& g : e.node.gpus) {
        if (!g.healthy) {
          nf.free.push_back(0);
          continue;
        }
        int64_t a = 0;
        auto h = held.find({name, g.index});
        if (h != held.end()) {
          for (const Holder& x : h->second) a += x.milli;
        }
        a = std::min<int64_t>(a, 1000);
        total += 1000;
        allocated += a;
        node_alloc += a;
        nf.free.push_back(e.node.state == NodeState::kReady ? 1000 - a : 0);
        nf.total_free += nf.free.back();
      }
      if (e.node.state != NodeState::kReady) continue;
      free += nf.total_free;
      if (node_alloc == 0 && !e.node.gpus.empty()) ++idle_nodes;
      if (nf.total_free > 0) ready.push_back(std::move(nf));
    }
    // 3. Running work by (tenant, queue, user, type, model).
    json running_json = RunningWork(jobs_.active, util);
    // 4. The backlog, and why each waiting job did not use the free GPUs; 5. fragmentation.
    json queues = json::object();
    std::map<std::string, int64_t> by_reason;
    int64_t waiting = 0;
    const int64_t fragmented = Backlog(jobs_.active, ready, free, &queues, &by_reason, &waiting);
    json data = {{"gpus_total", total},
                 {"gpus_allocated", allocated},
                 {"gpus_busy", busy ? json(*busy) : json(nullptr)},
                 {"gpus_free", free},
                 {"fragmented", fragmented},
                 {"idle_nodes", idle_nodes},
                 {"queues", std::move(queues)},
                 {"waiting", {{"jobs", waiting}, {"by_reason", by_reason}}},
                 {"running", std::move(running_json)}};
    b.PutClusterSample({now, interval, data.dump()});
    done = store_->WriteAsync(std::move(b));
  }
  return done.get();
}

namespace {

// What a report needs of a job.
reports::JobInfo JobInfoOf(const JobEntry& j) {
  reports::JobInfo info{j.spec.tenant,
                        j.spec.queue,
                        j.spec.user,
                        std::string(JobTypeName(j.spec.type)),
                        j.gpu_model,
                        int64_t{j.spec.tasks} * j.spec.resources.total_gpu_milli(),
                        "",
                        0};
  if (j.spec.service) {
    info.service = j.spec.service->name;
    info.revision = j.spec.service->revision;
  }
  return info;
}

}  // namespace

Status ControlPlane::AddStoredJobInfos(reports::Inputs* in) const {
  std::vector<uint64_t> missing;
  for (const store::JobEventRecord& e : in->events) {
    if (!in->jobs.contains(e.job_id)) missing.push_back(e.job_id);
  }
  for (const store::UsageRecord& u : in->usage) {
    if (!in->jobs.contains(u.job_id)) missing.push_back(u.job_id);
  }
  if (missing.empty()) return Status::Ok();
  std::sort(missing.begin(), missing.end());
  missing.erase(std::unique(missing.begin(), missing.end()), missing.end());
  // The jobs of that id range, page by page, in id order, like the missing ids.
  store::JobQuery q;
  q.after_id = missing.front() - 1;
  q.before_id = missing.back() + 1;
  q.limit = 10'000;
  size_t next = 0;
  for (;;) {
    auto rows = store_->ListJobs(q);
    if (!rows.ok()) return rows.status();
    for (const store::JobRecord& r : *rows) {
      while (next < missing.size() && missing[next] < r.id) ++next;
      if (next == missing.size() || missing[next] != r.id) continue;
      auto j = JobEntryFromRecord(r);
      if (j.ok()) in->jobs.emplace(r.id, JobInfoOf(*j));
    }
    if (rows->size() < q.limit || next == missing.size()) break;
    q.after_id = rows->back().id;
  }
  return Status::Ok();
}

Result<reports::Table> ControlPlane::Report(const Principal& p, std::string_view name,
                                            reports::Query q) {
  if (p.role == Role::kNode) return Denied("nodes may not read reports");
  if (p.role != Role::kAdmin) {
    if (reports::IsClusterWide(name)) {
      return Denied(fmt::format("the {} report covers the whole cluster: admins only", name));
    }
    q.tenant = p.tenant;
  }
  reports::Inputs in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    in.now_ms = now_();
    // Only the jobs not finished count from memory: open usage intervals, open waits, and for the
    // serving report the replicas (services' jobs) the usage records name. Everything else is read
    // from the report aggregates (report_inputs.h).
    for (const auto& [id, jp] : jobs_.active) {
      const JobEntry& j = *jp;
      reports::JobInfo info = ReportJobInfoLocked(j);
      if (j.state == JobState::kPending && j.pending_since) {
        in.pending.push_back({id, info, *j.pending_since});
      }
      // Intervals still open: GPUs held now, recorded when they are released.
      if (j.holds_capacity()) {
        const TimeMs since = j.held_since > 0   ? j.held_since
                             : j.started_at > 0 ? j.started_at
                                                : j.updated_at;
        for (size_t t = 0; t < j.placement.size(); ++t) {
          store::UsageRecord u{0,           id,         static_cast<int32_t>(t),
                               info.tenant, info.queue, info.user,
                               info.type,   j.gpu_model};
          for (int32_t m : j.placement[t].gpu_milli) u.gpu_milli += m;
          for (int64_t m : j.placement[t].gpu_memory_mib) u.gpu_memory_mib += m;
          u.start_ms = since;
          u.end_ms = std::max(since, in.now_ms);
          in.open_usage.push_back(std::move(u));
        }
      }
    }
    if (name == "serving") {
      for (const auto& [id, j] : jobs_.all) {
        if (j.spec.service) in.jobs.emplace(id, ReportJobInfoLocked(j));
      }
    }
    for (const auto& [svc_name, e] : services_.all) {
      reports::ServiceInfo info;
      info.tenant = e.service.spec.tenant;
      if (e.service.spec.slo) {
        info.latency_ms = e.service.spec.slo->latency_ms;
        info.percentile = e.service.spec.slo->percentile;
        info.availability = e.service.spec.slo->availability;
      }
      in.services.emplace(svc_name, info);
    }
    for (const GpuModel& m : config_.gpu_models) in.has_prices |= m.price_milli_per_hour > 0;
    for (const api::TenantConfig& t : config_.tenants) {
      if (t.budget && t.budget->gpu_hours > 0) {
        in.budgets.push_back({t.name, t.budget->gpu_hours, t.budget->period});
      }
      for (const QueueSpec& s : t.queues) {
        int64_t g = 0;
        for (const auto& [key, limits] : s.quota) {
          if ((key == "gpu" || key.starts_with("gpu:")) && limits.guaranteed)
            g += *limits.guaranteed;
        }
        in.entitlements.push_back(
            {s.name, t.name, s.is_tenant ? std::string() : s.parent, s.is_tenant, g});
      }
    }
  }
  // The stored records (read without the lock: the store has its own).
  ARBITER_RETURN_IF_ERROR(reports::ReadReportRecords(*store_, name, q, in));
  // The serving report names services' replicas by their jobs: those no longer in memory are
  // read from the store.
  if (name == "serving") ARBITER_RETURN_IF_ERROR(AddStoredJobInfos(&in));
  auto samples = store_->ClusterSamples(q.from_ms - kMaxSampleIntervalMs, q.to_ms);
  if (!samples.ok()) return samples.status();
  in.cluster_samples = std::move(samples).value();
  auto gpus = store_->GpuSamples(q.from_ms, q.to_ms);
  if (!gpus.ok()) return gpus.status();
  in.gpu_samples = std::move(gpus).value();
  if (name == "serving") {
    auto serving = store_->ServingStats(MinuteOf(q.from_ms), q.to_ms);
    if (!serving.ok()) return serving.status();
    in.serving = std::move(serving).value();
    // A deleted service's rows stay: its tenant is unknown, so only admins see them.
    for (const store::ServingStatRecord& r : in.serving) in.services.try_emplace(r.service);
    if (!q.service.empty()) {
      std::erase_if(in.serving, [&](const auto& r) { return r.service != q.service; });
      std::erase_if(in.services, [&](const auto& kv) { return kv.first != q.service; });
      for (auto& [id, info] : in.jobs) {
        if (info.service != q.service) info.service.clear();
      }
    }
  }
  return reports::Compute(name, q, in);
}

store::op::CompactSamples RetentionAt(const SampleRetention& r, TimeMs now) {
  return {now - r.raw_gpu_ms, now - r.hourly_gpu_ms, now - r.cluster_ms, now - r.cluster_ms};
}

Sampler::Sampler(ControlPlane* cp, store::Store* store, SamplerOptions options, NowFn now)
    : cp_(cp), store_(store), options_(options), now_(std::move(now)) {}

Sampler::~Sampler() { Stop(); }

Status Sampler::Tick() {
  const TimeMs now = now_();
  Status st = Status::Ok();
  if (last_sample_ == 0 || now - last_sample_ >= options_.interval_ms) {
    last_sample_ = now;
    st = cp_->RecordSamples(options_.interval_ms);
  }
  if (last_compact_ == 0 || now - last_compact_ >= options_.compact_every_ms) {
    last_compact_ = now;
    store::WriteBatch b;
    b.CompactSamples(RetentionAt(options_.retention, now));
    Status c = store_->Write(std::move(b));
    if (st.ok()) st = c;
  }
  if (options_.history_days > 0 &&
      (last_history_ == 0 || now - last_history_ >= options_.history_every_ms)) {
    last_history_ = now;
    auto done = ApplyHistoryRetention(*store_, options_.archive_dir, options_.history_days, now);
    if (!done.ok()) {
      if (st.ok()) st = done.status();
    } else if (done->events + done->usage > 0) {
      spdlog::info("retention: archived and deleted {} job events and {} usage records before {}",
                   done->events, done->usage, ArchiveDay(done->before_ms));
    }
  }
  return st;
}

void Sampler::Start() {
  thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "arbiter-sampler");
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      lock.unlock();
      if (Status st = Tick(); !st.ok()) spdlog::warn("metering sample failed: {}", st.ToString());
      lock.lock();
      cv_.wait_for(lock, std::chrono::milliseconds(options_.interval_ms), [this] { return stop_; });
    }
  });
}

void Sampler::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

}  // namespace arbiter::server
