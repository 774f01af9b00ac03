// ControlPlane: online services (docs/services.md): the service objects, their replicas (jobs of
// type service), the controller's reconcile step, the gateways' routes and stats.
#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "api/job_codec.h"
#include "api/service_codec.h"
#include "server/control_plane.h"
#include "server/control_plane_compiled.h"
#include "server/control_plane_helpers.h"
#include "server/service_rollout.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// How long a drained replica stays out of the routes before it is stopped, at most: the gateways
// take the new routes at once (long poll) and finish what they sent it meanwhile.
constexpr DurationMs kMaxDrainWaitMs = 5000;
// How long an ended replica stays listed in its service's status.
constexpr DurationMs kEndedShownMs = 60000;
// A gateway's load report counts this long (it reports every second).
constexpr DurationMs kLoadFreshMs = 3000;
// A scale-up whose replicas are not ready after this long is no longer timed.
constexpr DurationMs kScaleUpGiveUpMs = 30 * 60 * 1000;

// The gateways' load reports of a service that are fresh at `now`, summed; `waiting`: some
// gateway holds requests for it with no replica to send them to.
struct GatewayLoadSum {
  double concurrency = 0;
  double rps = 0;
  bool waiting = false;
};
GatewayLoadSum SumLoad(const ServiceEntry& e, TimeMs now) {
  GatewayLoadSum sum;
  for (const auto& [gateway, r] : e.load) {
    if (now - r.at_ms > kLoadFreshMs) continue;
    sum.concurrency += r.concurrency;
    sum.rps += r.rps;
    sum.waiting = sum.waiting || (r.waiting > 0 && r.no_replica);
  }
  return sum;
}

bool IsLive(const JobEntry& j) { return !IsFinal(j.state) || j.stopping; }

// A template's errors name its fields under "template." (the queue and class are the service's).
Status ForService(const Status& st) {
  if (st.ok() || st.field().empty() || st.field() == "queue" || st.field() == "priority_class") {
    return st;
  }
  return api::UnderField(st, "template");
}

}  // namespace

void ControlPlane::SetServicePorts(int32_t lo, int32_t hi) {
  std::lock_guard<std::mutex> lock(mu_);
  service_port_lo_ = lo;
  service_port_hi_ = hi;
}

// --- Loading ------------------------------------------------------------------------------------

void ControlPlane::LoadServicesLocked(const std::vector<store::ServiceRecord>& records) {
  for (const store::ServiceRecord& r : records) {
    auto s = api::ParseStoredService(r.spec_json, r.secret_env_json);
    if (!s.ok()) {
      // Left out rather than refusing to start: its replicas are jobs and stay visible as such.
      PushEventLocked("service",
                      {{"name", r.name},
                       {"tenant", r.tenant},
                       {"message", "stored service unreadable: " + s.status().ToString()}});
      continue;
    }
    ServiceEntry e;
    e.service = std::move(s).value();
    services_.all.emplace(r.name, std::move(e));
  }
  // Replicas are jobs: a service's live ones are found by their links.
  for (auto& [id, j] : jobs_.all) {
    if (!j.spec.service || !IsLive(j)) continue;
    ServiceEntry* e = services_.Find(j.spec.service->name);
    if (e == nullptr) continue;
    ReplicaState st;
    st.job = id;
    st.revision = j.spec.service->revision;
    st.removed = j.stopping && j.state == JobState::kCancelled;
    e->replicas.emplace(id, st);
  }
}

// --- Access and checks
// ----------------------------------------------------------------------------

Status ControlPlane::MayManageServiceLocked(const Principal& p, const ServiceEntry* e,
                                            const std::string& name,
                                            std::string_view action) const {
  if (p.role == Role::kNode) return Forbidden("nodes may not read or manage services");
  if (e == nullptr || !CanReadTenantLocked(p, e->service.spec.tenant)) {
    if (e != nullptr && !action.empty()) {
      const_cast<ControlPlane*>(this)->Audit(p, fmt::format("service.{}", action),
                                             "service/" + name, "denied: another tenant's service");
    }
    return NotFoundError(fmt::format("service {} not found", name));
  }
  if (action.empty()) return Status::Ok();  // a read
  if (p.role == Role::kViewer) {
    return Forbidden(fmt::format("viewers may read service {} but not change it", name));
  }
  return Status::Ok();
}

Status ControlPlane::CheckServiceSpecLocked(const Principal& p, ServiceSpec& spec) {
  // 1. The tenant: the caller's, or any for an admin.
  const core::QuotaTree& tree = compiled_->tree;
  if (spec.tenant.empty()) spec.tenant = p.tenant;
  if (spec.tenant.empty() && !spec.queue.empty()) {
    // An admin's service without a tenant: its queue's (as an admin's job).
    QueueId q;
    bool found = tree.Find(spec.queue, &q);
    if (!found) {
      auto a = compiled_->queue_names.find(LowerAscii(spec.queue));
      found = a != compiled_->queue_names.end() && tree.Find(a->second, &q);
    }
    if (!found || tree.node(q).is_tenant) {
      return InvalidArgument("queue", fmt::format("queue {} not found", spec.queue));
    }
    spec.tenant = tree.node(tree.node(q).tenant).name;
  }
  if (spec.tenant.empty()) {
    return InvalidArgument("tenant",
                           "is required: an admin belongs to no tenant; name the "
                           "service's tenant or its queue");
  }
  QueueId tenant_id;
  const bool tenant_known = tree.Find(spec.tenant, &tenant_id) && tree.node(tenant_id).is_tenant;
  if ((p.role != Role::kAdmin && spec.tenant != p.tenant) || !tenant_known) {
    return InvalidArgument("tenant", fmt::format("tenant {} not found", spec.tenant));
  }
  // 2. The queue, class and template as one replica's submission.
  JobSpec replica = spec.tmpl;
  replica.queue = spec.queue;
  replica.priority_class = spec.priority_class;
  replica.type = JobType::kService;
  replica.name = ReplicaJobName(spec.name, 1);
  ApplyTaskMinimums(&replica);
  const Principal as{p.user, spec.tenant, Role::kMember, p.token_id, ""};
  ARBITER_RETURN_IF_ERROR(ForService(CheckSubmissionLocked(as, replica)));
  // 3. The queue must take services.
  QueueId q;
  if (tree.Find(replica.queue, &q)) {
    const core::QuotaNode& n = tree.node(q);
    const uint32_t bit = 1u << static_cast<unsigned>(JobType::kService);
    if (n.allowed_types_mask != 0 && (n.allowed_types_mask & bit) == 0) {
      std::vector<std::string> types;
      for (int t = 0; t <= static_cast<int>(JobType::kExperiment); ++t) {
        if (n.allowed_types_mask & (1u << t)) {
          types.emplace_back(JobTypeName(static_cast<JobType>(t)));
        }
      }
      return InvalidArgument("queue", fmt::format("queue {} does not take services (its "
                                                  "allowed_types: {})",
                                                  n.name, fmt::join(types, ", ")));
    }
  }
  spec.queue = replica.queue;  // the default or alias resolved
  return Status::Ok();
}

Status ControlPlane::CheckTrafficLocked(const Service& s,
                                        const std::vector<TrafficSplit>& traffic) const {
  for (const TrafficSplit& t : traffic) {
    if (s.FindRevision(t.revision) == nullptr) {
      std::vector<int64_t> known;
      for (const ServiceRevision& r : s.revisions) known.push_back(r.revision);
      return InvalidArgument("traffic",
                             fmt::format("revision {} does not exist; service {} has revisions {}",
                                         t.revision, s.spec.name, fmt::join(known, ", ")));
    }
  }
  return Status::Ok();
}

// --- The object as the API shows it --------------------------------------------------------------

std::string ControlPlane::ReplicaAddressLocked(const JobEntry& j, bool probe) const {
  if (!j.spec.service || j.placement.empty()) return "";
  const std::string& node = j.placement.front().node;
  std::string host = node;
  if (probe && node == nodes_.builtin) {
    host = "127.0.0.1";  // the built-in node is this machine
  } else if (const NodeEntry* e = nodes_.Find(node); e != nullptr && !e->address.empty()) {
    host = e->address;
  }
  if (host.find(':') != std::string::npos) host = "[" + host + "]";  // IPv6
  return fmt::format("{}:{}", host, j.spec.service->port);
}

json ControlPlane::ServiceJsonLocked(const ServiceEntry& e) const {
  json out = api::ServiceToJson(e.service);
  json replicas = json::array();
  int32_t ready = 0;
  for (const auto& [id, st] : e.replicas) {
    const JobEntry* j = jobs_.Find(id);
    if (j == nullptr) continue;
    std::string state;
    std::string reason = st.reason;
    if (st.ended_ms > 0) {
      state = "failed";
    } else if (st.draining || st.removed) {
      state = "draining";
    } else if (j->state != JobState::kRunning) {
      state = "pending";
      if (j->verdict && j->state == JobState::kPending) reason = j->verdict->message;
      if (reason.empty()) reason = fmt::format("job {}", JobStateName(j->state));
    } else if (st.ready) {
      state = "ready";
      ++ready;
    } else {
      state = "starting";
    }
    replicas.push_back({{"job", std::to_string(id)},
                        {"name", j->spec.name},
                        {"revision", st.revision},
                        {"state", state},
                        {"node", j->placement.empty() ? "" : j->placement.front().node},
                        {"address", ReplicaAddressLocked(*j, false)},
                        {"port", j->spec.service ? j->spec.service->port : 0},
                        {"started_ms", j->started_at},
                        {"restarts", j->restarts},
                        {"reason", reason}});
  }
  int32_t desired = 0;
  for (const auto& [rev, n] : DesiredReplicas(DesiredCountLocked(e), e.service.traffic)) {
    desired += n;
  }
  json events = json::array();
  for (const ServiceEvent& ev : e.events) {
    events.push_back({{"at_ms", ev.at_ms}, {"message", ev.message}});
  }
  out["status"] = {{"replicas", replicas}, {"ready", ready},         {"desired", desired},
                   {"blocked", e.blocked}, {"restarts", e.restarts}, {"events", events}};
  if (e.service.spec.autoscaling) {
    json decisions = json::array();
    for (const ScaleDecisionRecord& d : e.decisions) {
      decisions.push_back(
          {{"at_ms", d.at_ms}, {"from", d.from}, {"to", d.to}, {"reason", d.reason}});
    }
    auto timings = [](const Timings& t) {
      json j = {{"count", t.count}};
      if (!t.seconds.empty()) {
        j["p50_seconds"] = std::round(t.Quantile(0.5) * 1000) / 1000;
        j["p99_seconds"] = std::round(t.Quantile(0.99) * 1000) / 1000;
        j["last_seconds"] = std::round(t.seconds.back() * 1000) / 1000;
      }
      return j;
    };
    const GatewayLoadSum load = SumLoad(e, now_());
    out["status"]["autoscaling"] = {{"desired", DesiredCountLocked(e)},
                                    {"panicking", e.autoscaler.panicking()},
                                    {"concurrency", std::round(load.concurrency * 100) / 100},
                                    {"rps", std::round(load.rps * 100) / 100},
                                    {"decisions", decisions},
                                    {"scale_up", timings(e.scale_up)},
                                    {"reclaim", timings(e.reclaim)},
                                    {"cold_start", timings(e.cold_start)}};
  }
  return out;
}

store::ServiceRecord ControlPlane::ServiceRecordLocked(const Service& s) const {
  return {s.spec.name, s.spec.tenant, api::ServiceStoredJson(s), api::ServiceSecretsJson(s),
          s.updated_ms};
}

void ControlPlane::ServiceEventLocked(ServiceEntry& e, std::string message) {
  e.events.push_back({now_(), message});
  while (e.events.size() > ServiceEntry::kMaxEvents) e.events.pop_front();
  PushEventLocked("service", {{"name", e.service.spec.name},
                              {"tenant", e.service.spec.tenant},
                              {"message", std::move(message)}});
}

Result<json> ControlPlane::CommitServiceLocked(const Principal& p, ServiceEntry& e,
                                               std::string action, store::WriteBatch* b,
                                               std::shared_future<Status>* done) {
  b->PutService(ServiceRecordLocked(e.service));
  b->AppendAudit({0, now_(), p.user, "service." + action, "service/" + e.service.spec.name, "ok",
                  "{}", p.token_id, p.source, e.service.spec.tenant});
  json out = ServiceJsonLocked(e);
  *done = store_->WriteAsync(std::move(*b));
  return out;
}

// --- The API's operations ------------------------------------------------------------------------

namespace {

Status MayWriteServices(const Principal& p) {
  if (p.role == Role::kViewer || p.role == Role::kNode) {
    return Forbidden(fmt::format("{}s may not create or change services", RoleName(p.role)));
  }
  return Status::Ok();
}

}  // namespace

Result<json> ControlPlane::CreateService(const Principal& p, ServiceSpec spec) {
  ARBITER_RETURN_IF_ERROR(MayWriteServices(p));
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    if (services_.Find(spec.name) != nullptr) {
      return Status(StatusCode::kAlreadyExists,
                    fmt::format("service {} already exists: service names are unique in the "
                                "cluster (change it with PUT /api/v1/services/{})",
                                spec.name, spec.name),
                    "name");
    }
    ARBITER_RETURN_IF_ERROR(CheckServiceSpecLocked(p, spec));
    const TimeMs now = now_();
    ServiceEntry e;
    Service& s = e.service;
    s.user = p.user;
    s.revision = 1;
    s.revisions.push_back({1, now, spec.tmpl, spec.port});
    s.traffic = spec.traffic.empty() ? LatestTraffic(1) : spec.traffic;
    s.spec = std::move(spec);
    s.created_ms = now;
    s.updated_ms = now;
    ARBITER_RETURN_IF_ERROR(CheckTrafficLocked(s, s.traffic));
    // An approval rule that matches holds every replica until someone decides (docs/approvals.md).
    if (const api::ApprovalRuleConfig* r = ServiceApprovalRuleLocked(s.spec)) {
      AwaitServiceApprovalLocked(s, *r);
      e.blocked = s.approval.reason;
    }
    ServiceEntry& entry = services_.all.emplace(s.spec.name, std::move(e)).first->second;
    ServiceEventLocked(
        entry, fmt::format("created by {} with {} replicas", p.user, entry.service.spec.replicas));
    if (!entry.blocked.empty()) ServiceEventLocked(entry, entry.blocked);
    store::WriteBatch b;
    auto r = CommitServiceLocked(p, entry, "create", &b, &done);
    if (!r.ok()) return r.status();
    out = std::move(r).value();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::ReplaceService(const Principal& p, const std::string& name,
                                          ServiceSpec spec) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read or manage services");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    ServiceEntry* e = services_.Find(name);
    ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, "update"));
    if (spec.name != name) {
      return InvalidArgument("name", fmt::format("is {} but the path names {}: a service cannot "
                                                 "be renamed",
                                                 spec.name, name));
    }
    Service& s = e->service;
    if (!spec.tenant.empty() && spec.tenant != s.spec.tenant) {
      return InvalidArgument("tenant", fmt::format("a service cannot move to another tenant; "
                                                   "{} is tenant {}'s",
                                                   name, s.spec.tenant));
    }
    spec.tenant = s.spec.tenant;
    // The owner's tenant is the service's, whoever (an admin) changes it.
    const Principal as{p.user, s.spec.tenant, p.role == Role::kAdmin ? Role::kAdmin : p.role,
                       p.token_id, ""};
    ARBITER_RETURN_IF_ERROR(CheckServiceSpecLocked(as, spec));
    // A new revision when what replicas run changes.
    Service next = s;
    const ServiceRevision& latest = s.revisions.back();
    const TimeMs now = now_();
    const bool changed = !SameTemplate(spec.tmpl, latest.tmpl) || spec.port != latest.port;
    if (changed) {
      next.revision = s.revision + 1;
      next.revisions.push_back({next.revision, now, spec.tmpl, spec.port});
    }
    next.traffic = spec.traffic.empty() ? LatestTraffic(next.revision) : spec.traffic;
    ARBITER_RETURN_IF_ERROR(CheckTrafficLocked(next, next.traffic));
    next.spec = std::move(spec);
    next.updated_ms = now;
    s = std::move(next);
    ServiceEventLocked(*e, changed ? fmt::format("updated by {}: revision {}", p.user, s.revision)
                                   : fmt::format("updated by {}", p.user));
    store::WriteBatch b;
    auto r = CommitServiceLocked(p, *e, "update", &b, &done);
    if (!r.ok()) return r.status();
    out = std::move(r).value();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::GetService(const Principal& p, const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  const ServiceEntry* e = services_.Find(name);
  ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, ""));
  return ServiceJsonLocked(*e);
}

Result<json> ControlPlane::ListServices(const Principal& p, const std::string& tenant) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read or manage services");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (const auto& [name, e] : services_.all) {
    if (!CanReadTenantLocked(p, e.service.spec.tenant)) continue;
    if (!tenant.empty() && e.service.spec.tenant != tenant) continue;
    items.push_back(ServiceJsonLocked(e));
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::DeleteService(const Principal& p, const std::string& name) {
  std::shared_future<Status> done;
  std::vector<uint64_t> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServiceEntry* e = services_.Find(name);
    ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, "delete"));
    store::WriteBatch b;
    for (auto& [id, st] : e->replicas) {
      if (st.ended_ms == 0 && !st.removed) {
        StopReplicaLocked(st, fmt::format("service {} deleted by {}", name, p.user), &b, &stops);
      }
    }
    PushEventLocked("service", {{"name", name},
                                {"tenant", e->service.spec.tenant},
                                {"message", fmt::format("deleted by {}", p.user)}});
    const std::string tenant = e->service.spec.tenant;
    services_.all.erase(name);
    b.DeleteService(name);
    b.AppendAudit({0, now_(), p.user, "service.delete", "service/" + name, "ok", "{}", p.token_id,
                   p.source, tenant});
    PublishRoutesLocked();
    done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.get();
  PublishStops(stops);
  ARBITER_RETURN_IF_ERROR(committed);
  return json{{"name", name}, {"deleted", true}};
}

Result<json> ControlPlane::ScaleService(const Principal& p, const std::string& name,
                                        const ServiceScale& scale) {
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServiceEntry* e = services_.Find(name);
    ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, "scale"));
    ServiceSpec& spec = e->service.spec;
    if (spec.autoscaling) {
      if (scale.replicas >= 0) {
        return InvalidArgument("replicas", fmt::format("service \"{}\" autoscales: give its range "
                                                       "as min and max",
                                                       name));
      }
      const int32_t lo = spec.min_replicas, hi = spec.max_replicas;
      spec.min_replicas = scale.min;
      spec.max_replicas = scale.max;
      ServiceEventLocked(*e, fmt::format("range set by {} from {}..{} to {}..{} replicas", p.user,
                                         lo, hi, scale.min, scale.max));
    } else {
      if (scale.replicas < 0) {
        return InvalidArgument("min", fmt::format("service \"{}\" does not autoscale: give "
                                                  "replicas (or replace it with replicas: {{min, "
                                                  "max}})",
                                                  name));
      }
      const int32_t before = spec.replicas;
      spec.replicas = scale.replicas;
      ServiceEventLocked(
          *e, fmt::format("scaled by {} from {} to {} replicas", p.user, before, scale.replicas));
    }
    e->service.updated_ms = now_();
    store::WriteBatch b;
    auto r = CommitServiceLocked(p, *e, "scale", &b, &done);
    if (!r.ok()) return r.status();
    out = std::move(r).value();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::SetServiceTraffic(const Principal& p, const std::string& name,
                                             std::vector<TrafficSplit> traffic) {
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServiceEntry* e = services_.Find(name);
    ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, "traffic"));
    ARBITER_RETURN_IF_ERROR(CheckTrafficLocked(e->service, traffic));
    e->service.traffic = traffic;
    e->service.spec.traffic = std::move(traffic);
    e->service.updated_ms = now_();
    std::vector<std::string> parts;
    for (const TrafficSplit& t : e->service.traffic) {
      parts.push_back(fmt::format("r{} {}%", t.revision, t.percent));
    }
    ServiceEventLocked(*e, fmt::format("traffic set by {}: {}", p.user, fmt::join(parts, ", ")));
    store::WriteBatch b;
    auto r = CommitServiceLocked(p, *e, "traffic", &b, &done);
    if (!r.ok()) return r.status();
    out = std::move(r).value();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::RollbackService(const Principal& p, const std::string& name) {
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServiceEntry* e = services_.Find(name);
    ARBITER_RETURN_IF_ERROR(MayManageServiceLocked(p, e, name, "rollback"));
    Service& s = e->service;
    std::vector<int64_t> revisions;
    for (const ServiceRevision& r : s.revisions) revisions.push_back(r.revision);
    int64_t target = 0;
    if (!RollbackTarget(s.traffic, revisions, s.revision, &target)) {
      return InvalidArgument("revision", fmt::format("service {} has no revision below the one "
                                                     "that serves most of its traffic",
                                                     name));
    }
    s.traffic = {{target, 100}};
    s.spec.traffic = s.traffic;
    s.updated_ms = now_();
    ServiceEventLocked(*e, fmt::format("rolled back by {} to revision {}", p.user, target));
    store::WriteBatch b;
    auto r = CommitServiceLocked(p, *e, "rollback", &b, &done);
    if (!r.ok()) return r.status();
    out = std::move(r).value();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

// --- The controller's step -----------------------------------------------------------------------

int32_t ControlPlane::FreeServicePortLocked() {
  std::set<int32_t> used;
  for (const auto& [name, e] : services_.all) {
    if (e.service.revisions.back().port != 0) used.insert(e.service.revisions.back().port);
    for (const auto& [id, st] : e.replicas) {
      const JobEntry* j = jobs_.Find(id);
      if (j != nullptr && j->spec.service && IsLive(*j)) used.insert(j->spec.service->port);
    }
  }
  const int32_t span = service_port_hi_ - service_port_lo_ + 1;
  for (int32_t i = 0; i < span; ++i) {
    const int32_t port = service_port_lo_ + (service_port_next_ + i) % span;
    if (used.count(port)) continue;
    service_port_next_ = (port - service_port_lo_ + 1) % span;  // round robin: not reused soon
    return port;
  }
  return 0;
}

Status ControlPlane::StartReplicaLocked(ServiceEntry& e, int64_t revision, store::WriteBatch* b) {
  const Service& s = e.service;
  const ServiceRevision* rev = s.FindRevision(revision);
  if (rev == nullptr) return Internal(fmt::format("revision {} is gone", revision));
  JobSpec spec = rev->tmpl;
  spec.name = ReplicaJobName(s.spec.name, revision);
  spec.queue = s.spec.queue;
  spec.priority_class = s.spec.priority_class;
  spec.type = JobType::kService;
  spec.tasks = 1;
  const int32_t port = rev->port != 0 ? rev->port : FreeServicePortLocked();
  if (port == 0) {
    return Status(StatusCode::kResourceExhausted,
                  fmt::format("no free port in {}-{} (--service-ports) for another replica",
                              service_port_lo_, service_port_hi_));
  }
  spec.service = ServiceLink{s.spec.name, revision, port};
  // A serving replica is never preempted unless its priority class says it may be (a class is
  // how an operator decides what yields to what; without one, training cannot take its GPUs).
  if (s.spec.priority_class.empty()) spec.preemptible = false;
  ApplyTaskMinimums(&spec);
  // Through the admission path of any job: its queue, class and quotas; the scheduler places it.
  const Principal owner{s.user, s.spec.tenant, Role::kMember, "", ""};
  ARBITER_RETURN_IF_ERROR(ForService(CheckSubmissionLocked(owner, spec)));
  auto text = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
  bool created = false;
  const uint64_t id = AddJobLocked(owner, std::move(spec), std::move(text), "", "", b, &created,
                                   /*audit=*/false);
  ReplicaState st;
  st.job = id;
  st.revision = revision;
  st.reason = "waiting to be scheduled";
  e.replicas.emplace(id, st);
  if (wake_scheduler_) wake_scheduler_();
  return Status::Ok();
}

void ControlPlane::StopReplicaLocked(ReplicaState& st, std::string reason, store::WriteBatch* b,
                                     std::vector<uint64_t>* stops) {
  st.removed = true;
  st.ready = false;
  JobEntry* j = jobs_.Find(st.job);
  if (j == nullptr || !ActionTargetLocked(*j, "cancel").ok()) return;
  if (StopJobLocked(*j, JobState::kCancelled, std::move(reason), b)) stops->push_back(st.job);
}

int32_t ControlPlane::DesiredCountLocked(const ServiceEntry& e) const {
  const ServiceSpec& s = e.service.spec;
  if (!s.autoscaling) return s.replicas;
  if (e.desired < 0) return s.min_replicas;
  return std::clamp(e.desired, s.min_replicas, s.max_replicas);
}

void ControlPlane::AutoscaleLocked(ServiceEntry& e, TimeMs now, int32_t live, int32_t ready) {
  const ServiceSpec& s = e.service.spec;
  if (!s.autoscaling) {
    e.desired = -1;
    e.scale_ups.clear();
    return;
  }
  e.autoscaler.SetSpec(*s.autoscaling, s.min_replicas, s.max_replicas);
  // The gateways' reports of the last few seconds, summed; older ones are dropped.
  std::erase_if(e.load, [&](const auto& g) { return now - g.second.at_ms > kLoadFreshMs; });
  const GatewayLoadSum load = SumLoad(e, now);
  const double concurrency = load.concurrency, rps = load.rps;
  const bool waiting = load.waiting;
  if (e.desired < 0) {
    // A new service, or the first decision since the server started: what runs, in range.
    e.desired = std::clamp(live, s.min_replicas, s.max_replicas);
    e.last_sample_ms = now;
  }
  const int32_t current = std::clamp(e.desired, s.min_replicas, s.max_replicas);
  const bool sample_due = now - e.last_sample_ms >= 1000;
  // A request waiting where no replica runs does not wait for the next sample.
  const bool cold = waiting && current == 0;
  if (sample_due || cold) {
    if (sample_due) {
      e.last_sample_ms = now;
      e.autoscaler.Record({now, concurrency, rps});
    }
    const core::AutoscaleDecision d = e.autoscaler.Decide(now, ready, current, waiting);
    if (d.desired != current) {
      e.decisions.push_back({now, current, d.desired, d.reason});
      while (e.decisions.size() > ServiceEntry::kMaxDecisions) e.decisions.pop_front();
      ServiceEventLocked(e, fmt::format("{} -> {}: {}", current, d.desired, d.reason));
      if (d.desired > current) {
        // Earlier scale-ups beyond the new target are now part of this one.
        e.scale_ups.push_back({now, d.desired, current == 0});
      }
    }
    e.desired = d.desired;
  }
  // Scale-ups done: their count ready (or no longer wanted).
  while (!e.scale_ups.empty()) {
    PendingScaleUp& up = e.scale_ups.front();
    const int32_t want = std::min(up.target, e.desired);
    if (want <= 0 || now - up.decided_ms > kScaleUpGiveUpMs) {
      e.scale_ups.pop_front();
      continue;
    }
    if (ready < want) break;
    const double seconds = static_cast<double>(now - up.decided_ms) / 1000.0;
    // Did any replica started since the decision take its GPUs back from borrowers?
    bool reclaimed = false;
    for (const auto& [id, st] : e.replicas) {
      const JobEntry* j = jobs_.Find(id);
      if (j != nullptr && j->started_at >= up.decided_ms && !j->preempted_queues.empty()) {
        reclaimed = true;
      }
    }
    e.scale_up.Add(seconds);
    if (reclaimed) e.reclaim.Add(seconds);
    if (up.from_zero) e.cold_start.Add(seconds);
    ServiceEventLocked(e, fmt::format("{} replicas ready {:.2f} s after the decision{}{}", ready,
                                      seconds, up.from_zero ? " (from zero)" : "",
                                      reclaimed ? " (GPUs reclaimed from borrowers)" : ""));
    e.scale_ups.pop_front();
  }
}

void ControlPlane::ReconcileServiceLocked(ServiceEntry& e,
                                          const std::map<uint64_t, ProbeStatus>& probes, TimeMs now,
                                          store::WriteBatch* b, std::vector<uint64_t>* stops) {
  Service& s = e.service;
  // Awaiting approval, or rejected: no replica starts (docs/approvals.md, "Services").
  if (ServiceHeldLocked(e, now, b)) return;
  // 1. Observe each replica: its job's state and what its probes found.
  std::vector<ReplicaView> views;
  for (auto it = e.replicas.begin(); it != e.replicas.end();) {
    ReplicaState& st = it->second;
    JobEntry* j = jobs_.Find(st.job);
    if (j == nullptr || (st.ended_ms > 0 && now - st.ended_ms > kEndedShownMs)) {
      it = e.replicas.erase(it);
      continue;
    }
    if (st.ended_ms > 0) {
      ++it;
      continue;
    }
    if (!IsLive(*j)) {  // ended: a failure unless the controller stopped it
      st.ready = false;
      if (st.removed) {
        it = e.replicas.erase(it);
        continue;
      }
      st.ended_ms = now;
      ++e.failures;
      ++e.restarts;
      const DurationMs backoff = ReplaceBackoffMs(e.failures);
      e.next_start_ms = now + backoff;
      st.reason = fmt::format("job {} {}: {}", st.job, JobStateName(j->state), j->reason);
      ServiceEventLocked(
          e, fmt::format("replica {} (job {}) {}: {}; replaced in {} s", j->spec.name, st.job,
                         JobStateName(j->state), j->reason, backoff / 1000.0));
      ++it;
      continue;
    }
    ++it;
    if (st.removed) continue;  // stopping on purpose: counted no more
    if (st.draining) {
      if (now >= st.drain_until) {
        StopReplicaLocked(st, "drained: taken out of service", b, stops);
        continue;
      }
      views.push_back({st.job, st.revision, ReplicaPhase::kDraining});
      continue;
    }
    ReplicaPhase phase = ReplicaPhase::kPending;
    if (j->state == JobState::kRunning) {
      phase = ReplicaPhase::kStarting;
      auto p = probes.find(st.job);
      const bool was = st.ready;
      st.ready = p != probes.end() && p->second.ready;
      st.reason = st.ready ? ""
                  : p != probes.end() && !p->second.last_error.empty()
                      ? p->second.last_error
                      : "waiting for its readiness probe";
      if (st.ready && !was) {
        e.failures = 0;
        ServiceEventLocked(e, fmt::format("replica {} (job {}) ready at {}", j->spec.name, st.job,
                                          ReplicaAddressLocked(*j, false)));
      } else if (!st.ready && was) {
        ServiceEventLocked(
            e, fmt::format("replica {} (job {}) not ready: {}", j->spec.name, st.job, st.reason));
      }
      if (p != probes.end() && p->second.live_failed) {
        ++e.failures;
        ++e.restarts;
        e.next_start_ms = now + ReplaceBackoffMs(e.failures);
        ServiceEventLocked(e, fmt::format("replica {} (job {}) restarted: liveness probe failed "
                                          "({})",
                                          j->spec.name, st.job, p->second.last_error));
        StopReplicaLocked(st, "liveness probe failed", b, stops);
        continue;
      }
      if (st.ready) phase = ReplicaPhase::kReady;
    } else {
      st.ready = false;
      st.reason = "";
    }
    views.push_back({st.job, st.revision, phase});
  }

  // 2. Plan: how many replicas (the autoscaler's count), what each revision wants, what to start,
  //    what to take out.
  int32_t live = 0, ready = 0;
  for (const ReplicaView& v : views) {
    live += v.phase != ReplicaPhase::kDraining;
    ready += v.phase == ReplicaPhase::kReady;
  }
  AutoscaleLocked(e, now, live, ready);
  const RolloutPlan plan =
      PlanRollout(DesiredCountLocked(e), s.spec.rollout, s.traffic, views, now >= e.next_start_ms);
  // 3. Take out: a ready replica leaves the routes first and stops after its drain; one that
  //    serves nothing stops at once.
  for (uint64_t job : plan.drain) {
    ReplicaState& st = e.replicas.at(job);
    if (st.ready) {
      st.draining = true;
      st.drain_until = now + std::min<DurationMs>(s.spec.drain_seconds * 1000, kMaxDrainWaitMs);
    } else {
      StopReplicaLocked(st, "not needed by its service", b, stops);
    }
  }
  // 4. Start what is missing.
  std::string blocked;
  for (int64_t rev : plan.start) {
    Status st = StartReplicaLocked(e, rev, b);
    if (!st.ok()) {
      blocked = st.ToString();
      break;
    }
  }
  if (blocked != e.blocked) {
    if (!blocked.empty()) ServiceEventLocked(e, "cannot start a replica: " + blocked);
    e.blocked = blocked;
  }
}

void ControlPlane::PublishRoutesLocked() {
  json services = json::array();
  for (const auto& [name, e] : services_.all) {
    const Service& s = e.service;
    std::map<int64_t, json> replicas;
    std::map<int64_t, int32_t> ready;
    for (const auto& [id, st] : e.replicas) {
      if (!st.ready || st.draining || st.removed || st.ended_ms > 0) continue;
      const JobEntry* j = jobs_.Find(id);
      if (j == nullptr || j->state != JobState::kRunning) continue;
      replicas[st.revision].push_back(
          {{"id", std::to_string(id)}, {"address", ReplicaAddressLocked(*j, false)}});
      ++ready[st.revision];
    }
    json revisions = json::array();
    for (const RouteWeight& w :
         RouteWeights(s.traffic, DesiredReplicas(DesiredCountLocked(e), s.traffic), ready)) {
      auto r = replicas.find(w.revision);
      revisions.push_back({{"revision", w.revision},
                           {"percent", w.percent},
                           {"replicas", r == replicas.end() ? json::array() : r->second}});
    }
    services.push_back({{"name", name},
                        {"tenant", s.spec.tenant},
                        {"hosts", s.spec.hosts},
                        {"max_concurrency", s.spec.max_concurrency},
                        {"queue_max", s.spec.request_queue.max},
                        {"queue_timeout_ms", s.spec.request_queue.timeout_ms},
                        {"revisions", revisions}});
  }
  routes_->Publish(services);
}

std::vector<ProbeTarget> ControlPlane::ProbeTargetsLocked() const {
  std::vector<ProbeTarget> out;
  for (const auto& [name, e] : services_.all) {
    for (const auto& [id, st] : e.replicas) {
      if (st.removed || st.ended_ms > 0) continue;
      const JobEntry* j = jobs_.Find(id);
      if (j == nullptr || j->state != JobState::kRunning || !j->spec.service) continue;
      ProbeTarget t;
      t.job = id;
      t.attempt = j->attempt;
      const std::string address = ReplicaAddressLocked(*j, true);
      t.host = address.substr(0, address.rfind(':'));
      if (!t.host.empty() && t.host.front() == '[') t.host = t.host.substr(1, t.host.size() - 2);
      t.port = j->spec.service->port;
      t.readiness = e.service.spec.readiness;
      t.liveness = e.service.spec.liveness;
      t.started_ms = j->started_at;
      out.push_back(std::move(t));
    }
  }
  return out;
}

Status ControlPlane::ReconcileServices(const std::map<uint64_t, ProbeStatus>& probes,
                                       std::vector<ProbeTarget>* targets) {
  std::shared_future<Status> done;
  std::vector<uint64_t> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loaded_) return Status::Ok();
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    store::WriteBatch b;
    const TimeMs now = now_();
    for (auto& [name, e] : services_.all) ReconcileServiceLocked(e, probes, now, &b, &stops);
    PublishRoutesLocked();
    *targets = ProbeTargetsLocked();
    if (!b.empty()) done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.valid() ? done.get() : Status::Ok();
  if (!stops.empty()) PublishStops(stops);
  return committed;
}

Status ControlPlane::SampleServing() {
  std::vector<std::pair<ServingStats::Key, ServingFigures>> rows;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const TimeMs minute = MinuteOf(now_());
    for (const auto& [name, e] : services_.all) {
      std::map<int64_t, int64_t> ready;
      for (const TrafficSplit& t : e.service.traffic) ready[t.revision] += 0;
      for (const auto& [id, st] : e.replicas) {
        if (st.ended_ms > 0 || st.removed) continue;
        ready[st.revision] += st.ready && !st.draining ? 1 : 0;
      }
      for (const auto& [rev, n] : ready) {
        ServingFigures f;
        f.ready_samples = 1;
        f.ready_sum = n;
        f.ready_min = n;
        f.ready_max = n;
        rows.push_back({{minute, name, rev}, f});
      }
    }
  }
  return serving_.Add(rows);  // its own lock, without mu_
}

// --- Gateways -----------------------------------------------------------------------------------

namespace {

Status MayUseGatewayRoutes(const Principal& p) {
  if (p.role == Role::kAdmin || p.role == Role::kNode) return Status::Ok();
  return Forbidden("the gateway's routes take an admin token or a node (gateway) token");
}

}  // namespace

Result<std::string> ControlPlane::GatewayRoutes(const Principal& p, uint64_t known,
                                                DurationMs wait_ms) {
  ARBITER_RETURN_IF_ERROR(MayUseGatewayRoutes(p));
  return routes_->Wait(known, wait_ms);
}

Result<json> ControlPlane::RecordGatewayLoad(const Principal& p, const GatewayLoad& load) {
  ARBITER_RETURN_IF_ERROR(MayUseGatewayRoutes(p));
  const std::string gateway = load.gateway.empty() ? p.user : load.gateway;
  size_t known = 0;
  std::lock_guard<std::mutex> lock(mu_);
  const TimeMs now = now_();
  for (const GatewayLoad::Entry& l : load.services) {
    ServiceEntry* e = services_.Find(l.service);
    if (e == nullptr) continue;
    ++known;
    e->load[gateway] = {now, l.concurrency, l.rps, l.waiting, l.no_replica};
  }
  return json{{"accepted", known}};
}

Result<json> ControlPlane::RecordGatewayStats(const Principal& p, const GatewayStats& stats) {
  ARBITER_RETURN_IF_ERROR(MayUseGatewayRoutes(p));
  std::vector<std::pair<ServingStats::Key, ServingFigures>> rows;
  const TimeMs minute = MinuteOf(stats.window_start_ms);
  for (const GatewayStats::Entry& e : stats.services) {
    rows.push_back({{minute, e.service, e.revision}, e.figures});
  }
  ARBITER_RETURN_IF_ERROR(serving_.Add(rows));
  return json{{"accepted", rows.size()}};
}

}  // namespace arbiter::server
