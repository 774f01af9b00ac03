// ControlPlane: the job lifecycle: submission, records, listing, actions, events, why.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <set>

#include "api/agent_codec.h"
#include "api/job_codec.h"
#include "api/json_writer.h"
#include "core/budget/budget.h"
#include "server/admissibility.h"
#include "server/control_plane.h"
#include "server/control_plane_compiled.h"
#include "server/control_plane_helpers.h"
#include "server/reports.h"

namespace arbiter::server {

using nlohmann::json;
// --- Jobs ------------------------------------------------------------------------------------

namespace {

// "placement": [...]. The stored form (the status column) keeps what a restart needs, each GPU's
// memory share included, under the loader's names; the API's names a task's GPUs "gpus".
void WritePlacement(api::JsonWriter& w, const std::vector<PlacedTask>& placement, bool stored) {
  w.Key("placement").BeginArray();
  for (const PlacedTask& t : placement) {
    w.BeginObject().Field("node", t.node).Field(stored ? "gpu_indices" : "gpus", t.gpu_indices);
    w.Field("gpu_milli", t.gpu_milli);
    if (stored) w.Field("gpu_memory_mib", t.gpu_memory_mib);
    w.Field("cpu_milli", t.cpu_milli).Field("memory_mib", t.memory_mib).EndObject();
  }
  w.EndArray();
}

}  // namespace

store::JobRecord ControlPlane::JobRecordLocked(const JobEntry& j) const {
  store::JobRecord r;
  r.id = j.spec.id.value();
  r.tenant = j.spec.tenant;
  r.queue = j.spec.queue;
  r.user = j.spec.user;
  r.name = j.spec.name;
  r.type = std::string(JobTypeName(j.spec.type));
  r.state = std::string(JobStateName(j.state));
  r.spec_json = j.spec_json ? *j.spec_json : api::JobSpecJsonText(j.spec);
  // Fields at their zero value are left out (the loader defaults them): a pending job's status
  // is three fields, not twenty, at each submission.
  r.status_json.reserve(128);
  api::JsonWriter w(&r.status_json);
  w.BeginObject()
      .Field("state", r.state)
      .Field("reason", j.reason)
      .Field("updated_at", j.updated_at);
  auto put = [&w](const char* key, const auto& v) {
    if (v != std::decay_t<decltype(v)>{}) w.Field(key, v);
  };
  put("started_at", j.started_at);
  put("finished_at", j.finished_at);
  if (j.exit_code) w.Field("exit_code", *j.exit_code);
  put("restarts", j.restarts);
  put("preemptions", j.preemptions);
  put("not_before", j.not_before);
  put("gpu_model", j.gpu_model);
  put("preempted_queues", j.preempted_queues);
  put("stopping", j.stopping);
  put("stop_cause", j.stop_cause);
  put("approval_rule", j.approval_rule);
  put("task_state", j.task_state);
  put("task_exit", j.task_exit);
  put("attempt", j.attempt);
  put("held_since", j.held_since);
  if (j.pending_since) w.Field("pending_since", *j.pending_since);
  if (j.running_since) w.Field("running_since", *j.running_since);
  put("task_nodes", j.task_nodes);
  put("image_digest", j.image_digest);
  if (!j.placement.empty()) WritePlacement(w, j.placement, /*stored=*/true);
  w.EndObject();
  r.idempotency_key = j.idempotency_key;
  r.submitted_at_ms = j.spec.submit_time;
  r.updated_at_ms = j.updated_at;
  r.secret_env_json = api::SecretEnvJsonText(j.spec);
  r.request_digest = j.request_digest;
  return r;
}

json ControlPlane::JobJsonLocked(const JobEntry& j, const Principal& p) const {
  return json::parse(JobTextLocked(j, p));
}

bool ControlPlane::MaySeeEnvValuesLocked(const Principal& p, const JobEntry& j) const {
  if (p.role == Role::kAdmin) return true;
  if (p.tenant != j.spec.tenant) return false;
  return p.role == Role::kTenantAdmin || (p.role == Role::kMember && p.user == j.spec.user);
}

// The spec's stored text with the status fields written in before its closing brace: the two
// share no key (JobSpecJsonText never writes id, tenant, state and the rest).
std::string ControlPlane::JobTextLocked(const JobEntry& j, const Principal& p) const {
  std::string out = j.spec.env.empty() || MaySeeEnvValuesLocked(p, j)
                        ? (j.spec_json ? *j.spec_json : api::JobSpecJsonText(j.spec))
                        : api::JobSpecJsonText(j.spec, /*env_values=*/false);
  out.pop_back();  // '}'
  out.reserve(out.size() + 320);
  if (out.size() > 1) out += ',';
  auto time = [](api::JsonWriter& w, const char* key, TimeMs ms) {
    w.Key(key);
    if (ms > 0) {
      w.String(Iso8601(ms));
    } else {
      w.Null();
    }
  };
  // Written as the members of an object whose braces are the spec's.
  std::string fields;
  api::JsonWriter w(&fields);
  w.BeginObject();
  w.Field("id", j.spec.id.value()).Field("tenant", j.spec.tenant).Field("user", j.spec.user);
  w.Field("state", JobStateName(j.state)).Field("reason", j.reason);
  time(w, "submitted_at", j.spec.submit_time);
  time(w, "started_at", j.started_at);
  time(w, "finished_at", j.finished_at);
  w.Key("exit_code");
  if (j.exit_code) {
    w.Int(*j.exit_code);
  } else {
    w.Null();
  }
  w.Field("restarts", j.restarts).Field("preemptions", j.preemptions);
  if (!j.spec.secret_env.empty()) {  // the names only, to everyone
    w.Key("secret_env").BeginArray();
    for (const auto& [name, value] : j.spec.secret_env) w.String(name);
    w.EndArray();
  }
  if (j.stopping) w.Field("stopping", j.stop_cause);
  WritePlacement(w, j.placement, /*stored=*/false);
  if (!j.gpu_model.empty()) w.Field("gpu_model", j.gpu_model);
  if (!j.image_digest.empty()) w.Field("image_digest", j.image_digest);
  if (j.verdict && j.state == JobState::kPending) {
    w.Key("pending")
        .BeginObject()
        .Field("code", core::VerdictCodeName(j.verdict->code))
        .Field("message", j.verdict->message)
        .Field("position", j.verdict->position);
    time(w, "estimated_start", j.verdict->estimated_start.value_or(0));
    w.EndObject();
  }
  w.EndObject();
  out.append(fields, 1, std::string::npos);
  return out;
}

void ControlPlane::RecordTransitionLocked(JobEntry& j, JobState to, std::string reason,
                                          store::WriteBatch* b, std::string detail_json) {
  const JobState from = j.state;
  CountTransitionLocked(j, from, to, j.updated_at);
  j.state = to;
  j.reason = reason;
  jobs_.active.emplace(j.spec.id.value(), &j);
  j.updated_at = now_();
  store::JobEventRecord e{0,
                          j.spec.id.value(),
                          j.updated_at,
                          std::string(JobStateName(from)),
                          std::string(JobStateName(to)),
                          reason,
                          std::move(detail_json)};
  AppendJobFactsLocked(j, e, b);
  b->PutJob(JobRecordLocked(j));
  b->AppendJobEvent(std::move(e));
  TouchNodesLocked(j);
  // Work for the scheduler: a job to place, or capacity given back.
  const bool takes = to == JobState::kAdmitted || to == JobState::kStarting ||
                     to == JobState::kRunning || to == JobState::kPreempting;
  if (!takes && wake_scheduler_) wake_scheduler_();
  PushJobEventLocked(j, JobStateName(from), JobStateName(to), reason);
}

reports::JobInfo ControlPlane::ReportJobInfoLocked(const JobEntry& j) const {
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

void ControlPlane::AppendJobFactsLocked(JobEntry& j, const store::JobEventRecord& e,
                                        store::WriteBatch* b) {
  reports::FactState state{j.pending_since, j.running_since};
  std::vector<store::JobFactRecord> facts;
  reports::FactsOfEvent(e, ReportJobInfoLocked(j), state, facts);
  j.pending_since = state.pending_since;
  j.running_since = state.running_since;
  for (store::JobFactRecord& f : facts) b->AppendJobFact(std::move(f));
}

std::string RequestDigest(const std::string& spec_json, const JobSpec& spec) {
  return HashSecret(spec_json + '\n' + api::SecretEnvJsonText(spec));
}

Status MaySubmit(const Principal& p) {
  if (p.role == Role::kViewer || p.role == Role::kNode) {
    return Forbidden(fmt::format("{}s may not submit jobs", RoleName(p.role)));
  }
  return Status::Ok();
}

namespace {

// Whether a job in queue `q` may use priority class `pc` (its allowed_tenants and
// allowed_queues); the rule is about the job, whoever submits it.
Status CheckClassAllowed(const PriorityClass& pc, const core::QuotaTree& tree, QueueId q) {
  if (pc.allowed_tenants.empty() && pc.allowed_queues.empty()) return Status::Ok();
  auto listed = [](const std::vector<std::string>& names, const std::string& name) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  const std::string& tenant = tree.node(tree.node(q).tenant).name;
  if (listed(pc.allowed_tenants, tenant)) return Status::Ok();
  for (QueueId n = q; !tree.node(n).is_tenant && n != core::QuotaTree::kRoot;
       n = tree.node(n).parent) {
    if (listed(pc.allowed_queues, tree.node(n).name)) return Status::Ok();
  }
  std::vector<std::string> allowed;
  for (const std::string& t : pc.allowed_tenants) allowed.push_back("tenant " + t);
  for (const std::string& name : pc.allowed_queues) allowed.push_back("queue " + name);
  return Status(StatusCode::kPermissionDenied,
                fmt::format("priority class '{}' is not allowed for queue {} of tenant {}; it is "
                            "allowed for: {}",
                            pc.name, tree.node(q).name, tenant, fmt::join(allowed, ", ")),
                "priority_class");
}

}  // namespace

Status ControlPlane::CheckSubmissionLocked(const Principal& p, JobSpec& spec) {
  ARBITER_RETURN_IF_ERROR(CheckSubmittedEnv(spec));
  const core::QuotaTree& tree = compiled_->tree;
  auto usable = [&] {
    std::string names;
    for (size_t i = 1; i < tree.size(); ++i) {
      const core::QuotaNode& n = tree.nodes()[i];
      if (!n.is_leaf() || n.is_tenant) continue;
      if (p.role != Role::kAdmin && tree.node(n.tenant).name != p.tenant) continue;
      names += (names.empty() ? "" : ", ") + n.name;
    }
    return names.empty() ? std::string("none") : names;
  };
  if (spec.queue.empty()) {
    auto d = compiled_->default_queue.find(p.tenant);
    if (d == compiled_->default_queue.end()) {
      return InvalidArgument(
          "queue", fmt::format("is required: {} has no default_queue; queues you can use: {}",
                               p.tenant.empty() ? "an admin without a tenant"
                                                : fmt::format("tenant {}", p.tenant),
                               usable()));
    }
    spec.queue = d->second;
  }
  QueueId q;
  bool found = tree.Find(spec.queue, &q);
  std::string resolved = spec.queue;
  if (!found) {  // an alias, or a queue's name in other case
    auto a = compiled_->queue_names.find(LowerAscii(spec.queue));
    if (a != compiled_->queue_names.end() && tree.Find(a->second, &q)) {
      found = true;
      resolved = a->second;
    }
  }
  found = found && !tree.node(q).is_tenant;
  const std::string tenant = found ? tree.node(tree.node(q).tenant).name : "";
  if (!found || (p.role != Role::kAdmin && tenant != p.tenant)) {
    // The name as asked: what another tenant's alias stands for is not the caller's to learn.
    return InvalidArgument(
        "queue", fmt::format("queue {} not found; queues you can use: {}", spec.queue, usable()));
  }
  spec.queue = resolved;
  if (!tree.node(q).is_leaf()) {
    return InvalidArgument(
        "queue", fmt::format("queue {} has child queues; submit to one of them", spec.queue));
  }
  if (!spec.priority_class.empty()) {
    auto pc = compiled_->classes.find(spec.priority_class);
    if (pc == compiled_->classes.end()) {
      std::string known;
      for (const auto& [name, c] : compiled_->classes) known += (known.empty() ? "" : ", ") + name;
      return InvalidArgument("priority_class",
                             fmt::format("unknown priority class '{}'; known: {}",
                                         spec.priority_class, known.empty() ? "none" : known));
    }
    ARBITER_RETURN_IF_ERROR(CheckClassAllowed(pc->second, tree, q));
  }
  for (size_t i = 0; i < spec.gpu_models.size(); ++i) {
    if (compiled_->cluster.FindModel(spec.gpu_models[i]) == core::kNoModel) {
      std::string known;
      for (const GpuModel& m : compiled_->cluster.models()) {
        known += (known.empty() ? "" : ", ") + m.name;
      }
      return InvalidArgument(fmt::format("gpu_models[{}]", i),
                             fmt::format("unknown GPU model '{}'; the cluster's models: {}",
                                         spec.gpu_models[i], known.empty() ? "none" : known));
    }
  }
  // The tenant's images and host paths (docs/config.md, "Images and mounts").
  ARBITER_RETURN_IF_ERROR(CheckTenantBoundariesLocked(tenant, spec));
  // Beyond a max of its queue or tenant: it could never start (nodes are no reason here).
  ARBITER_RETURN_IF_ERROR(CheckQuotaAdmissible(tree, compiled_->cluster, spec, q));
  // A job may wait only for jobs its submitter can see (another tenant's look missing).
  for (size_t i = 0; i < spec.depends_on.size(); ++i) {
    const Dependency& d = spec.depends_on[i];
    if (d.type == DependencyType::kSingleton) continue;
    const JobEntry* dep = FindJobLocked(d.job);
    if (dep == nullptr || !CanReadTenantLocked(p, dep->spec.tenant)) {
      return InvalidArgument(fmt::format("depends_on[{}].job", i),
                             fmt::format("job {} not found", d.job));
    }
  }
  spec.tenant = tenant;
  spec.user = p.user;
  return Status::Ok();
}

Status ControlPlane::CheckTenantBoundariesLocked(const std::string& tenant,
                                                 const JobSpec& spec) const {
  const api::TenantConfig* t = nullptr;
  for (const api::TenantConfig& c : config_.tenants) {
    if (c.name == tenant) t = &c;
  }
  static const api::TenantConfig kNone;
  if (t == nullptr) t = &kNone;
  if (!spec.container_image.empty()) {
    ARBITER_RETURN_IF_ERROR(CheckImageAllowed(spec.container_image, t->images, tenant));
  }
  return CheckMountsAllowed(spec.mounts, t->mounts, t->volumes, tenant);
}

void ControlPlane::ApplyTaskMinimums(JobSpec* spec) const {
  TaskResources& r = spec->resources;
  r.cpu_milli = std::max(r.cpu_milli, task_limits_.min_cpu_milli);
  r.memory_mib = std::max(r.memory_mib, task_limits_.min_memory_mib);
}

Status ControlPlane::CheckReplayLocked(const std::string& tenant, const std::string& user,
                                       const std::string& idem_key, const std::string& digest,
                                       const std::string& what) {
  if (idem_key.empty()) return Status::Ok();
  const uint64_t id = JobByKeyLocked(tenant, user, idem_key);
  if (id == 0) return Status::Ok();
  const JobEntry& j = jobs_.all.at(id);
  if (j.request_digest.empty() || j.request_digest == digest) return Status::Ok();
  return Status(StatusCode::kUnprocessable,
                fmt::format("Idempotency-Key {} already made job {} from a different submission{}; "
                            "a retry must send the same body, a new job needs a new key",
                            idem_key, id, what),
                "Idempotency-Key");
}

uint64_t ControlPlane::AddJobLocked(const Principal& p, JobSpec spec,
                                    std::shared_ptr<const std::string> spec_json,
                                    const std::string& idem_key, const std::string& digest,
                                    store::WriteBatch* b, bool* created, bool audit) {
  const std::string tenant = spec.tenant;
  if (!idem_key.empty()) {
    if (const uint64_t id = JobByKeyLocked(tenant, p.user, idem_key); id != 0) return id;
  }
  spec.id = JobId(jobs_.next_id++);
  spec.submit_time = now_();
  JobEntry j;
  j.spec = std::move(spec);
  j.spec_json = std::move(spec_json);
  j.idempotency_key = idem_key;
  if (!idem_key.empty()) j.request_digest = digest;
  j.updated_at = j.spec.submit_time;
  j.reason = "submitted";
  const api::ApprovalRuleConfig* rule = ApprovalRuleForLocked(j.spec);
  if (rule != nullptr) AwaitApprovalLocked(j, *rule);
  const std::string first_state(JobStateName(j.state));
  const uint64_t id = j.spec.id.value();
  if (!idem_key.empty()) jobs_.by_key[tenant + "/" + p.user + "/" + idem_key] = id;
  auto& entry = jobs_.all.emplace(id, std::move(j)).first->second;
  jobs_.active.emplace(id, &entry);
  metrics_.JobSubmitted(tenant, entry.spec.queue);
  store::JobEventRecord e{0, id, entry.updated_at, "", first_state, entry.reason, "{}"};
  AppendJobFactsLocked(entry, e, b);
  b->PutJob(JobRecordLocked(entry));
  b->AppendJobEvent(std::move(e));
  if (audit) {
    b->AppendAudit({0, entry.updated_at, p.user, "job.submit", fmt::format("job/{}", id), "ok",
                    "{}", p.token_id, p.source, tenant});
  }
  PushJobEventLocked(entry, "", first_state, entry.reason);
  *created = true;
  return id;
}

Result<ControlPlane::Submitted> ControlPlane::SubmitJob(const Principal& p, JobSpec spec,
                                                        const std::string& idem_key,
                                                        bool* created) {
  *created = false;
  ARBITER_RETURN_IF_ERROR(MaySubmit(p));
  ApplyTaskMinimums(&spec);
  auto spec_json = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
  const std::string digest = idem_key.empty() ? "" : RequestDigest(*spec_json, spec);
  std::shared_future<Status> done;
  Submitted out;
  bool added = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    const std::string asked = spec.queue;
    ARBITER_RETURN_IF_ERROR(CheckSubmissionLocked(p, spec));
    ARBITER_RETURN_IF_ERROR(CheckReplayLocked(spec.tenant, p.user, idem_key, digest, ""));
    // The stored text names the queue the default or alias resolved to.
    if (spec.queue != asked)
      spec_json = std::make_shared<const std::string>(api::JobSpecJsonText(spec));
    store::WriteBatch b;
    b.Reserve(3);  // the job, its first event, the audit record
    out.id = AddJobLocked(p, std::move(spec), std::move(spec_json), idem_key, digest, &b, &added);
    out.body = JobTextLocked(jobs_.all.at(out.id), p);
    done = store_->WriteAsync(std::move(b));  // empty (a barrier) for a repeated key
    if (added && wake_scheduler_) wake_scheduler_();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  *created = added;
  return out;
}

Result<std::string> ControlPlane::SubmitJobs(const Principal& p, std::vector<JobSpec> specs,
                                             const std::string& idem_key, bool* created) {
  *created = false;
  ARBITER_RETURN_IF_ERROR(MaySubmit(p));
  std::vector<std::shared_ptr<const std::string>> texts;
  std::vector<std::string> digests(specs.size());
  texts.reserve(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    ApplyTaskMinimums(&specs[i]);
    texts.push_back(std::make_shared<const std::string>(api::JobSpecJsonText(specs[i])));
    if (!idem_key.empty()) digests[i] = RequestDigest(*texts[i], specs[i]);
  }
  // A repeated batch finds each of its jobs by its own key: KEY#INDEX.
  auto key_of = [&idem_key](size_t i) {
    return idem_key.empty() ? std::string() : fmt::format("{}#{}", idem_key, i);
  };
  std::shared_future<Status> done;
  std::string items = "{\"items\":[";
  bool any = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
    // All or nothing: every job is checked before any is recorded.
    for (size_t i = 0; i < specs.size(); ++i) {
      const std::string asked = specs[i].queue;
      ARBITER_RETURN_IF_ERROR(api::ForBatchJob(CheckSubmissionLocked(p, specs[i]), i));
      if (specs[i].queue != asked) {
        texts[i] = std::make_shared<const std::string>(api::JobSpecJsonText(specs[i]));
      }
      ARBITER_RETURN_IF_ERROR(CheckReplayLocked(specs[i].tenant, p.user, key_of(i), digests[i],
                                                fmt::format(" (job {} of the batch)", i)));
    }
    store::WriteBatch b;
    b.Reserve(3 * specs.size());
    for (size_t i = 0; i < specs.size(); ++i) {
      bool added = false;
      const uint64_t id = AddJobLocked(p, std::move(specs[i]), std::move(texts[i]), key_of(i),
                                       digests[i], &b, &added);
      if (i > 0) items += ',';
      items += JobTextLocked(jobs_.all.at(id), p);
      any = any || added;
    }
    done = store_->WriteAsync(std::move(b));
    if (any && wake_scheduler_) wake_scheduler_();
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  *created = any;
  items += "]}";
  return items;
}

Result<json> ControlPlane::GetJob(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  std::lock_guard<std::mutex> lock(mu_);
  const JobEntry* j = FindJobLocked(id);
  if (j == nullptr || !CanReadTenantLocked(p, j->spec.tenant)) {
    return NotFoundError(fmt::format("job {} not found", id));
  }
  return JobJsonLocked(*j, p);
}

namespace {

// "a, b, c", or the first `kMax` of them and how many more.
std::string KnownList(const std::set<std::string>& names) {
  constexpr size_t kMax = 20;
  if (names.empty()) return "none";
  std::string out;
  size_t n = 0;
  for (const std::string& name : names) {
    if (n++ == kMax) return fmt::format("{} and {} more", out, names.size() - kMax);
    out += (out.empty() ? "" : ", ") + name;
  }
  return out;
}

// Whether `v` is empty or holds `x`.
bool AnyOf(const std::vector<std::string>& v, std::string_view x) {
  return v.empty() || std::find(v.begin(), v.end(), x) != v.end();
}

}  // namespace

Status ControlPlane::ResolveJobFilterLocked(const Principal& p, JobFilter* f) {
  for (const std::string& s : f->states) {
    if (ParseJobState(s)) continue;
    std::set<std::string> known;
    for (int i = 0; i <= static_cast<int>(JobState::kRejected); ++i) {
      known.insert(std::string(JobStateName(static_cast<JobState>(i))));
    }
    return InvalidArgument("state",
                           fmt::format("unknown state '{}'; states: {}", s, KnownList(known)));
  }
  for (const std::string& s : f->types) {
    JobType t;
    if (ParseJobType(s, &t)) continue;
    std::set<std::string> known;
    for (const char* name :
         {"training", "fine-tuning", "evaluation", "batch-inference", "service", "experiment"}) {
      known.insert(name);
    }
    return InvalidArgument("type",
                           fmt::format("unknown type '{}'; types: {}", s, KnownList(known)));
  }
  if (f->queues.empty() && f->tenants.empty() && f->users.empty()) return Status::Ok();
  // What the caller may see: the configuration's, then what its jobs carry (a deleted queue's
  // or user's jobs stay listable). Another tenant's names are never among them.
  const core::QuotaTree& tree = compiled_->tree;
  std::set<std::string> queues, tenants, users;
  for (size_t i = 1; i < tree.size(); ++i) {
    const core::QuotaNode& n = tree.nodes()[i];
    const std::string& tenant = tree.node(n.tenant).name;
    if (!CanReadTenantLocked(p, tenant)) continue;
    (n.is_tenant ? tenants : queues).insert(n.name);
  }
  for (const api::UserConfig& u : config_.users) {
    if (CanReadTenantLocked(p, u.tenant)) users.insert(u.name);
  }
  if (!p.user.empty()) users.insert(p.user);
  auto missing = [&](const std::vector<std::string>& want, const std::set<std::string>& have) {
    for (const std::string& w : want) {
      if (!have.count(w)) return true;
    }
    return false;
  };
  // Queue names as submissions take them: an alias, or the name in other case.
  for (std::string& q : f->queues) {
    if (queues.count(q)) continue;
    auto a = compiled_->queue_names.find(LowerAscii(q));
    if (a != compiled_->queue_names.end() && queues.count(a->second)) q = a->second;
  }
  if (missing(f->queues, queues) || missing(f->tenants, tenants) || missing(f->users, users)) {
    for (const auto& [id, j] : jobs_.all) {
      if (!CanReadTenantLocked(p, j.spec.tenant)) continue;
      queues.insert(j.spec.queue);
      tenants.insert(j.spec.tenant);
      users.insert(j.spec.user);
    }
    // And what finished jobs that left memory carry: one indexed read per name still missing.
    auto in_history = [&](std::vector<std::string> store::JobQuery::*field, const std::string& v) {
      store::JobQuery q;
      q.finished_only = true;
      q.limit = 1;
      (q.*field).push_back(v);
      if (p.role != Role::kAdmin) {
        if (!q.tenants.empty() && q.tenants.front() != p.tenant) return false;
        q.tenants = {p.tenant};
      }
      auto rows = store_->ListJobs(q);
      return rows.ok() && !rows->empty();
    };
    if (history_in_store_) {
      for (const std::string& w : f->queues) {
        if (!queues.count(w) && in_history(&store::JobQuery::queues, w)) queues.insert(w);
      }
      for (const std::string& w : f->tenants) {
        if (!tenants.count(w) && in_history(&store::JobQuery::tenants, w)) tenants.insert(w);
      }
      for (const std::string& w : f->users) {
        if (!users.count(w) && in_history(&store::JobQuery::users, w)) users.insert(w);
      }
    }
  }
  struct Check {
    const char* field;
    const std::vector<std::string>* want;
    const std::set<std::string>* known;
    const char* seen;
  };
  for (const Check& c : {Check{"queue", &f->queues, &queues, "queues you can see"},
                         Check{"tenant", &f->tenants, &tenants, "tenants you can see"},
                         Check{"user", &f->users, &users, "users you can see"}}) {
    for (const std::string& w : *c.want) {
      if (c.known->count(w)) continue;
      return InvalidArgument(
          c.field, fmt::format("{} {} not found; {}: {}", c.field, w, c.seen, KnownList(*c.known)));
    }
  }
  return Status::Ok();
}

namespace {

// Whether `lower` (lower case) occurs in the job's name or in its command, in any case.
bool MatchesText(const JobSpec& spec, const std::string& lower) {
  auto contains = [&](const std::string& s) {
    if (s.size() < lower.size()) return false;
    return std::search(s.begin(), s.end(), lower.begin(), lower.end(), [](char a, char b) {
             return (a >= 'A' && a <= 'Z' ? a - 'A' + 'a' : a) == b;
           }) != s.end();
  };
  if (contains(spec.name)) return true;
  std::string command;
  for (const std::string& a : spec.command) command += (command.empty() ? "" : " ") + a;
  return contains(command);
}

}  // namespace

Result<std::string> ControlPlane::ListJobs(const Principal& p, JobFilter f) {
  if (p.role == Role::kNode) return Forbidden("nodes may not list jobs");
  std::lock_guard<std::mutex> lock(mu_);
  if (dirty_) ARBITER_RETURN_IF_ERROR(CompileLocked());
  ARBITER_RETURN_IF_ERROR(ResolveJobFilterLocked(p, &f));
  std::string out = "{\"items\":[";
  size_t items = 0;
  uint64_t last = 0;
  bool more = false;
  // Returns false once the page is full.
  auto add = [&](const JobEntry& j) {
    if (!CanReadTenantLocked(p, j.spec.tenant)) return true;
    if (!AnyOf(f.tenants, j.spec.tenant) || !AnyOf(f.queues, j.spec.queue) ||
        !AnyOf(f.users, j.spec.user) || !AnyOf(f.states, JobStateName(j.state)) ||
        !AnyOf(f.types, JobTypeName(j.spec.type))) {
      return true;
    }
    if (f.index && j.spec.array.index != *f.index) return true;
    if (!f.text.empty() && !MatchesText(j.spec, f.text)) return true;
    // Ended: a final state whose processes are gone (a cancelled job still stopping is live).
    const bool ended = IsFinal(j.state) && !j.stopping;
    if (f.active && ended) return true;
    if (f.since > 0 && ended && (j.finished_at > 0 ? j.finished_at : j.updated_at) < f.since) {
      return true;
    }
    if (f.until > 0 && j.spec.submit_time > f.until) return true;
    if (items == f.limit) {
      more = true;
      return false;
    }
    if (items++ > 0) out += ',';
    out += JobTextLocked(j, p);
    last = j.spec.id.value();
    return true;
  };
  if (f.array != 0) {  // the array's elements only, from its index
    if (jobs_.arrays.find(f.array) == jobs_.arrays.end()) FindJobLocked(f.array);  // read back
    auto a = jobs_.arrays.find(f.array);
    const std::vector<uint64_t> none;
    const std::vector<uint64_t>& ids = a == jobs_.arrays.end() ? none : a->second.elements;
    for (auto it = std::upper_bound(ids.begin(), ids.end(), f.after_id);
         it != ids.end() && add(jobs_.all.at(*it)); ++it) {
    }
  } else {
    std::optional<store::JobQuery> history = HistoryQueryLocked(p, f);
    // Memory's jobs and, where some finished ones are in the store only, those, merged by id:
    // the store's pages are read after the cursor as the merge needs them, and a row whose job
    // is in memory is skipped (memory's copy is the one to show).
    std::vector<store::JobRecord> rows;
    size_t row = 0;
    bool rows_done = !history;
    auto next_row = [&]() -> const store::JobRecord* {
      for (;;) {
        for (; row < rows.size(); ++row) {
          if (jobs_.all.count(rows[row].id) == 0) return &rows[row];
        }
        if (rows_done) return nullptr;
        auto page = store_->ListJobs(*history);
        if (!page.ok()) {
          spdlog::warn("job list: cannot read the store: {}", page.status().ToString());
          rows_done = true;
          return nullptr;
        }
        rows = std::move(page).value();
        row = 0;
        rows_done = rows.size() < history->limit;
        if (!rows.empty()) history->after_id = rows.back().id;
      }
    };
    auto mem = jobs_.all.upper_bound(f.after_id);
    const store::JobRecord* r = next_row();
    for (;;) {
      const bool from_memory = mem != jobs_.all.end() && (r == nullptr || mem->first < r->id);
      if (!from_memory && r == nullptr) break;
      if (from_memory) {
        if (!add(mem->second)) break;
        ++mem;
        continue;
      }
      auto j = JobEntryFromRecord(*r);
      if (!j.ok()) return j.status();
      if (!add(*j)) break;
      ++row;
      r = next_row();
    }
  }
  out += more ? fmt::format("],\"next_cursor\":\"{}\"}}", last) : "],\"next_cursor\":null}";
  return out;
}

std::optional<store::JobQuery> ControlPlane::HistoryQueryLocked(const Principal& p,
                                                                const JobFilter& f) const {
  if (!history_in_store_ || f.active) return std::nullopt;
  store::JobQuery q;
  q.finished_only = true;
  // Finished jobs only: a filter on states keeps the finished ones it names.
  for (const std::string& s : f.states) {
    auto st = ParseJobState(s);
    if (st && IsFinal(*st)) q.states.push_back(s);
  }
  if (!f.states.empty() && q.states.empty()) return std::nullopt;
  q.tenants = f.tenants;
  if (p.role != Role::kAdmin) {
    // Another tenant's jobs are never read: the caller's tenant only.
    if (!q.tenants.empty() && !AnyOf(q.tenants, p.tenant)) return std::nullopt;
    q.tenants = {p.tenant};
  }
  q.queues = f.queues;
  q.users = f.users;
  q.types = f.types;
  q.after_id = f.after_id;
  q.submitted_until_ms = f.until;
  // An ended job's end is at most its last update: one updated before `since` ended before it.
  q.updated_since_ms = f.since;
  // A page of the store's rows per read: the rest of the filter (text, since) is memory's.
  q.limit = std::max<size_t>(f.limit + 1, 256);
  return q;
}

Result<JobState> ControlPlane::ActionTargetLocked(const JobEntry& j,
                                                  std::string_view action) const {
  const uint64_t id = j.spec.id.value();
  JobState to;
  if (action == "cancel") {
    to = JobState::kCancelled;
  } else if (action == "suspend") {
    to = JobState::kSuspended;
  } else if (action == "resume") {
    if (j.state != JobState::kSuspended) {
      return Status(StatusCode::kConflict,
                    fmt::format("job {} is {}, not suspended", id, JobStateName(j.state)));
    }
    // A job still stopping goes back to its queue once its processes are gone (ApplyActionLocked),
    // so the capacity they hold is never handed out twice.
    if (j.stopping) return j.state;
    to = JobState::kPending;
  } else if (action == "requeue") {
    // Slurm's scontrol requeue: stop it and put it back in its queue (its submit time kept).
    if (j.state != JobState::kAdmitted && j.state != JobState::kStarting &&
        j.state != JobState::kRunning) {
      return Status(StatusCode::kConflict,
                    fmt::format("job {} is {}; only admitted, starting or running jobs can be "
                                "requeued",
                                id, JobStateName(j.state)));
    }
    to = JobState::kSuspended;
  } else if (action == "retry") {
    if (j.state != JobState::kFailed && j.state != JobState::kCancelled &&
        j.state != JobState::kTimedOut) {
      return Status(StatusCode::kConflict,
                    fmt::format("job {} is {}; only failed, cancelled or timed-out jobs can be "
                                "retried",
                                id, JobStateName(j.state)));
    }
    to = JobState::kRetryWait;
  } else {
    return NotFoundError(fmt::format("unknown action '{}'", action));
  }
  ARBITER_RETURN_IF_ERROR(CheckTransition(j.state, to));
  return to;
}

bool ControlPlane::ApplyActionLocked(const Principal& p, JobEntry& j, std::string_view action,
                                     JobState to, store::WriteBatch* b) {
  std::string reason = fmt::format("{} by {}", action, p.user);
  if (action == "requeue") {
    if (StopJobLocked(j, to, std::move(reason), b)) {
      j.stop_cause = "requeue";  // pending once its processes are gone (FinishExecutionLocked)
      return true;
    }
    RecordTransitionLocked(j, JobState::kPending, "requeued: nothing had started", b);
    return false;
  }
  if (action == "resume" && to == j.state) {  // still stopping: see ActionTargetLocked
    j.stop_cause = "requeue";
    j.reason = fmt::format("resume by {}: back to its queue once its processes are gone", p.user);
    b->PutJob(JobRecordLocked(j));
    return false;
  }
  if (to == JobState::kCancelled || to == JobState::kSuspended) {
    return StopJobLocked(j, to, std::move(reason), b);
  }
  if (to == JobState::kRetryWait) {
    j.not_before = now_();
    j.exit_code.reset();
    j.finished_at = 0;
  }
  RecordTransitionLocked(j, to, std::move(reason), b);
  return false;
}

Result<json> ControlPlane::JobAction(const Principal& p, uint64_t id, std::string_view action) {
  if (p.role == Role::kNode) return Forbidden("nodes may not act on jobs");
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    JobEntry* found = FindJobLocked(id);
    if (found == nullptr || !CanReadTenantLocked(p, found->spec.tenant)) {
      // Another tenant's job looks missing to the caller; the audit log says what it was.
      if (found != nullptr) {
        Audit(p, fmt::format("job.{}", action), fmt::format("job/{}", id),
              "denied: another tenant's job");
      }
      return NotFoundError(fmt::format("job {} not found", id));
    }
    JobEntry& j = *found;
    ARBITER_RETURN_IF_ERROR(CanActOnJobLocked(p, j));
    auto to = ActionTargetLocked(j, action);
    if (!to.ok()) return to.status();
    store::WriteBatch b;
    const JobState before = j.state;
    ApplyActionLocked(p, j, action, *to, &b);
    // A running job stops once its processes are gone: the state it is going to is the "after".
    json change = {{"before", {{"state", JobStateName(before)}}},
                   {"after", {{"state", JobStateName(j.stopping ? *to : j.state)}}}};
    if (j.stopping) change["after"]["stopping"] = true;
    b.AppendAudit(AuditRecordOf(p, fmt::format("job.{}", action), fmt::format("job/{}", id),
                                j.spec.tenant, change.dump()));
    out = JobJsonLocked(j, p);
    done = store_->WriteAsync(std::move(b));
  }
  const Status committed = done.get();
  PublishStops({id});  // even after a failed write: memory, which the nodes follow, has the stop
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

bool ControlPlane::StopJobLocked(JobEntry& j, JobState to, std::string reason,
                                 store::WriteBatch* b) {
  const bool started =
      std::any_of(j.task_state.begin(), j.task_state.end(), [](int32_t t) { return t == 1; });
  if (started) {
    j.stopping = true;  // the node stops the processes; the placement stays until it has
    j.stop_cause = to == JobState::kCancelled ? "cancel" : "suspend";
    j.stop_unpublished = true;
  }
  j.finished_at = to == JobState::kCancelled ? now_() : 0;
  RecordTransitionLocked(j, to, std::move(reason), b);
  // Nothing runs: the GPUs are released (and metered) now.
  if (!started) FinishExecutionLocked(j, b);
  return started;
}

void ControlPlane::PublishStops(const std::vector<uint64_t>& ids) {
  std::lock_guard<std::mutex> lock(mu_);
  for (uint64_t id : ids) {
    auto it = jobs_.all.find(id);
    if (it == jobs_.all.end() || !it->second.stop_unpublished) continue;
    it->second.stop_unpublished = false;
    TouchNodesLocked(it->second);
  }
}

Result<json> ControlPlane::JobEvents(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  {
    std::lock_guard<std::mutex> lock(mu_);
    const JobEntry* j = FindJobLocked(id);
    if (j == nullptr || !CanReadTenantLocked(p, j->spec.tenant)) {
      return NotFoundError(fmt::format("job {} not found", id));
    }
  }
  // Every change already visible in memory is in the history: wait for the writes enqueued so
  // far (an empty batch is a barrier) before reading it.
  ARBITER_RETURN_IF_ERROR(store_->Write(store::WriteBatch{}));
  auto events = store_->JobEvents(id);
  if (!events.ok()) return events.status();
  json items = json::array();
  for (const store::JobEventRecord& e : *events) {
    items.push_back({{"at", Iso8601(e.at_ms)},
                     {"from", e.from_state},
                     {"to", e.to_state},
                     {"reason", e.reason}});
  }
  return json{{"items", items}};
}

Result<json> ControlPlane::WhyPending(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read jobs");
  const TimeMs now = now_();
  json out;
  bool estimate = false;
  std::optional<TimeMs> reservation_start;
  std::optional<plan::StartEstimate> cached;
  EstimateRequest request;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const JobEntry* found = FindJobLocked(id);
    if (found == nullptr || !CanReadTenantLocked(p, found->spec.tenant)) {
      return NotFoundError(fmt::format("job {} not found", id));
    }
    const JobEntry& j = *found;
    out = {{"id", id}, {"state", std::string(JobStateName(j.state))}};
    if (j.state != JobState::kPending) {
      out["message"] = fmt::format("job {} is {}: {}", id, JobStateName(j.state), j.reason);
    } else if (!j.verdict) {
      out["message"] = "waiting for the next scheduling cycle";
    } else {
      out["code"] = std::string(core::VerdictCodeName(j.verdict->code));
      out["message"] = j.verdict->message;
      out["position"] = j.verdict->position;
      out["estimated_start"] =
          j.verdict->estimated_start ? TimeJson(*j.verdict->estimated_start) : json(nullptr);
      // The backfill reservation's start (exact when the jobs ahead have walltimes).
      const core::VerdictCode c = j.verdict->code;
      if (c == core::VerdictCode::kNoFeasibleNode ||
          c == core::VerdictCode::kWaitingForReservation ||
          c == core::VerdictCode::kLowerPriority) {
        reservation_start = j.verdict->estimated_start;
      }
      estimate = true;
      cached = estimates_->Cached(id, now);
      if (!cached && !PrepareEstimateLocked(id, &request)) estimate = false;
    }
  }
  if (out.contains("code")) out["expected_start"] = nullptr;
  if (!estimate) return out;
  // The replay runs without mu_ (start_estimates.h).
  const plan::StartEstimate e = cached ? *cached : estimates_->Compute(request, now);
  if (e.found) out["expected_start"] = StartEstimates::ToJson(e, now, reservation_start);
  return out;
}

bool ControlPlane::PrepareEstimateLocked(uint64_t id, EstimateRequest* r) const {
  if (last_cycle_ == nullptr) return false;
  const CycleSnapshot& s = *last_cycle_;
  const std::vector<size_t> chosen =
      plan::SelectPending(s.pending, JobId(id), estimates_->options().max_pending);
  if (std::none_of(chosen.begin(), chosen.end(),
                   [&](size_t i) { return s.pending[i].id.value() == id; })) {
    return false;  // held back from the last cycle (dependencies, an array's throttle) or newer
  }
  r->job = id;
  r->snapshot = last_cycle_;
  auto owner = [&](JobId job) {
    auto it = jobs_.all.find(job.value());
    if (it == jobs_.all.end()) return plan::JobOwner{};
    const JobSpec& spec = it->second.spec;
    return plan::JobOwner{spec.tenant + "/" + spec.user, spec.queue};
  };
  r->running_owners.reserve(s.running.size());
  for (const core::RunningJob& rj : s.running) r->running_owners.push_back(owner(rj.id));
  for (size_t i : chosen) {
    const core::PendingJob& pj = s.pending[i];
    r->pending.push_back(pj);
    r->pending_owners.push_back(owner(pj.id));
    auto it = jobs_.all.find(pj.id.value());
    const PriorityClass* pc = it != jobs_.all.end() ? it->second.priority_class : nullptr;
    r->pending_min_runtime.push_back(pc != nullptr ? SecondsToMs(pc->min_runtime_seconds)
                                                   : SecondsToMs(300));
  }
  r->pending_left_out = s.pending.size() - chosen.size();
  // The batch jobs submitted in the last arrival window: the templates of the arrivals to come.
  const DurationMs window = estimates_->options().arrival_window;
  if (window > 0) {
    std::vector<const JobEntry*> recent;
    for (const auto& [job_id, j] : jobs_.all) {
      if (j.spec.service || j.spec.submit_time > s.now) continue;
      if (j.spec.submit_time >= s.now - window) recent.push_back(&j);
    }
    const size_t keep = std::min(recent.size(), estimates_->options().max_recent);
    const bool truncated = keep < recent.size();
    std::partial_sort(recent.begin(), recent.begin() + static_cast<std::ptrdiff_t>(keep),
                      recent.end(), [](const JobEntry* a, const JobEntry* b) {
                        return a->spec.submit_time > b->spec.submit_time;
                      });
    recent.resize(keep);
    std::vector<core::Constraints> constraints(1);
    for (const JobEntry* j : recent) {
      QueueId q;
      if (!s.tree->Find(j->spec.queue, &q)) continue;
      plan::RecentArrival a;
      a.job = PendingJobOf(*j, q, *s.cluster, &constraints);
      a.job.constraints = 0;  // node constraints are not carried into future demand
      a.job.not_before = 0;
      a.owner = plan::JobOwner{j->spec.tenant + "/" + j->spec.user, j->spec.queue};
      const PriorityClass* pc = j->priority_class;
      a.min_runtime = pc != nullptr ? SecondsToMs(pc->min_runtime_seconds) : SecondsToMs(300);
      r->recent.push_back(std::move(a));
    }
    // The rate is over the whole window (a younger installation had no submissions before), or,
    // with more than max_recent, over the time the latest of them took.
    r->arrival_window = window;
    if (truncated && !recent.empty()) {
      r->arrival_window = std::max<DurationMs>(s.now - recent.back()->spec.submit_time, 1000);
    }
  }
  return true;
}

}  // namespace arbiter::server
