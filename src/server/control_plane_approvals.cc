// Approvals (docs/approvals.md): a submission an approval rule matches waits in awaiting_approval
// until one of the rule's approvers approves it (pending) or rejects it (rejected), or its request
// expires (rejected, saying so). Nobody decides on their own job; admins may decide on any other.
#include <fmt/format.h>

#include <algorithm>

#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

constexpr size_t kMaxCommentBytes = 1000;

bool Matches(const api::ApprovalWhen& w, const JobSpec& s) {
  const int64_t gpus = static_cast<int64_t>(s.tasks) * s.resources.gpus;
  if (w.gpus_at_least && gpus < *w.gpus_at_least) return false;
  // GPUs x walltime; a job without a walltime has no bound, so it is at least any amount.
  if (w.gpu_hours_at_least &&
      (gpus == 0 ||
       (s.walltime_seconds > 0 && gpus * s.walltime_seconds < *w.gpu_hours_at_least * 3600))) {
    return false;
  }
  if (!w.priority_class.empty() && s.priority_class != w.priority_class) return false;
  if (!w.queue.empty() && s.queue != w.queue && s.tenant != w.queue) return false;
  if (!w.type.empty() && JobTypeName(s.type) != w.type) return false;
  return true;
}

const api::ApprovalRuleConfig* RuleNamed(const api::ClusterConfig& c, const std::string& name) {
  for (const api::ApprovalRuleConfig& r : c.approvals) {
    if (r.name == name) return &r;
  }
  return nullptr;
}

std::string ApproversText(const api::ApprovalRuleConfig& r, const std::string& tenant) {
  if (!r.approver_role.empty()) return fmt::format("the tenant admins of {}", tenant);
  return fmt::format("{}", fmt::join(r.approver_users, ", "));
}

// The most replicas a service may run at once: its fixed count, or its autoscaling maximum.
int64_t MaxReplicas(const ServiceSpec& s) {
  return s.autoscaling ? std::max(s.max_replicas, s.replicas) : s.replicas;
}

int64_t ServiceGpus(const ServiceSpec& s) {
  return MaxReplicas(s) * std::max<int64_t>(s.tmpl.tasks, 1) * s.tmpl.resources.gpus;
}

}  // namespace

const api::ApprovalRuleConfig* ControlPlane::ServiceApprovalRuleLocked(const ServiceSpec& s) const {
  // Matched as one job of all its replicas at most: no walltime, so gpu_hours_at_least holds for
  // any service with GPUs.
  JobSpec as = s.tmpl;
  as.tasks = static_cast<int32_t>(MaxReplicas(s) * std::max<int64_t>(s.tmpl.tasks, 1));
  as.walltime_seconds = 0;
  as.type = JobType::kService;
  as.queue = s.queue;
  as.tenant = s.tenant;
  as.priority_class = s.priority_class;
  for (const api::ApprovalRuleConfig& r : config_.approvals) {
    if (Matches(r.when, as)) return &r;
  }
  return nullptr;
}

void ControlPlane::AwaitServiceApprovalLocked(Service& s, const api::ApprovalRuleConfig& r) {
  ServiceApproval& a = s.approval;
  a = ServiceApproval{};
  a.state = "awaiting";
  a.rule = r.name;
  a.requested_ms = now_();
  a.reason = fmt::format("awaiting approval (rule {}): may approve: {}", r.name,
                         ApproversText(r, s.spec.tenant));
  if (r.expires_after_seconds > 0) {
    a.reason += fmt::format("; expires after {} s", r.expires_after_seconds);
  }
}

bool ControlPlane::MayDecideServiceLocked(const Principal& p, const ServiceEntry& e) const {
  return MayDecideForLocked(p, e.service.user, e.service.spec.tenant, e.service.approval.rule);
}

bool ControlPlane::ServiceHeldLocked(ServiceEntry& e, TimeMs now, store::WriteBatch* b) {
  ServiceApproval& a = e.service.approval;
  if (a.state == "awaiting") {
    const api::ApprovalRuleConfig* r = RuleNamed(config_, a.rule);
    if (r != nullptr && r->expires_after_seconds > 0 &&
        now >= a.requested_ms + r->expires_after_seconds * 1000) {
      a.state = "rejected";
      a.decided_by = "arbiter";
      a.decided_ms = now;
      a.reason = fmt::format("approval expired (rule {}): nobody decided within {} s", r->name,
                             r->expires_after_seconds);
      b->PutService(ServiceRecordLocked(e.service));
      b->AppendAudit({0, now, "arbiter", "service.reject", "service/" + e.service.spec.name, "ok",
                      json{{"rule", r->name}, {"reason", "expired"}}.dump(), ""});
      ServiceEventLocked(e, a.reason);
    }
  }
  if (a.state != "awaiting" && a.state != "rejected") return false;
  e.blocked = a.reason;
  return true;
}

const api::ApprovalRuleConfig* ControlPlane::ApprovalRuleForLocked(const JobSpec& s) const {
  if (s.service) return nullptr;  // a service's replicas are started by the server itself
  for (const api::ApprovalRuleConfig& r : config_.approvals) {
    if (Matches(r.when, s)) return &r;
  }
  return nullptr;
}

const api::ApprovalRuleConfig* ControlPlane::PendingApprovalRuleLocked(const JobEntry& j) const {
  return RuleNamed(config_, j.approval_rule);
}

std::string ControlPlane::AwaitApprovalLocked(JobEntry& j, const api::ApprovalRuleConfig& r) {
  j.state = JobState::kAwaitingApproval;
  j.approval_rule = r.name;
  std::string reason = fmt::format("awaiting approval (rule {}): may approve: {}", r.name,
                                   ApproversText(r, j.spec.tenant));
  if (r.expires_after_seconds > 0) {
    reason += fmt::format("; expires after {} s", r.expires_after_seconds);
  }
  j.reason = reason;
  return reason;
}

bool ControlPlane::MayDecideForLocked(const Principal& p, const std::string& owner,
                                      const std::string& tenant, const std::string& rule) const {
  if (p.user == owner || p.role == Role::kNode || p.role == Role::kViewer) return false;
  if (p.role == Role::kAdmin) return true;
  const api::ApprovalRuleConfig* r = RuleNamed(config_, rule);
  if (r == nullptr) return false;  // the rule is gone from the configuration: admins decide
  if (!r->approver_role.empty()) {
    return p.role == Role::kTenantAdmin && p.tenant == tenant;
  }
  return std::find(r->approver_users.begin(), r->approver_users.end(), p.user) !=
         r->approver_users.end();
}

bool ControlPlane::MayDecideLocked(const Principal& p, const JobEntry& j) const {
  return MayDecideForLocked(p, j.spec.user, j.spec.tenant, j.approval_rule);
}

bool ControlPlane::ExpireApprovalLocked(JobEntry& j, store::WriteBatch* b) {
  if (j.state != JobState::kAwaitingApproval) return false;
  const api::ApprovalRuleConfig* r = PendingApprovalRuleLocked(j);
  if (r == nullptr || r->expires_after_seconds <= 0) return false;
  const TimeMs now = now_();
  if (now < j.spec.submit_time + r->expires_after_seconds * 1000) return false;
  j.finished_at = now;
  RecordTransitionLocked(j, JobState::kRejected,
                         fmt::format("approval expired (rule {}): nobody decided within {} s",
                                     r->name, r->expires_after_seconds),
                         b);
  b->AppendAudit({0, now, "arbiter", "job.reject", fmt::format("job/{}", j.spec.id.value()), "ok",
                  json{{"rule", r->name}, {"reason", "expired"}}.dump(), "", "", j.spec.tenant});
  return true;
}

void ControlPlane::ExpireApprovalsLocked(store::WriteBatch* b) {
  for (auto& [id, j] : jobs_.active) ExpireApprovalLocked(*j, b);
}

Result<json> ControlPlane::DecideApproval(const Principal& p, uint64_t id, bool approve,
                                          const std::string& comment) {
  const std::string action = approve ? "job.approve" : "job.reject";
  if (p.role == Role::kNode) return Forbidden("nodes may not decide approvals");
  if (comment.size() > kMaxCommentBytes) {
    return InvalidArgument(
        "comment", fmt::format("is {} bytes; at most {}", comment.size(), kMaxCommentBytes));
  }
  std::shared_future<Status> done;
  json out;
  std::string expired;  // the reason, when the request had expired
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.all.find(id);
    JobEntry* j = it == jobs_.all.end() ? nullptr : &it->second;
    const bool visible =
        j != nullptr && (CanReadTenantLocked(p, j->spec.tenant) ||
                         (j->state == JobState::kAwaitingApproval && MayDecideLocked(p, *j)));
    if (!visible) {
      if (j != nullptr) Audit(p, action, fmt::format("job/{}", id), "denied: another tenant's job");
      return NotFoundError(fmt::format("job {} not found", id));
    }
    store::WriteBatch b;
    if (ExpireApprovalLocked(*j, &b)) {
      expired = j->reason;
      done = store_->WriteAsync(std::move(b));
    } else if (p.user == j->spec.user) {
      Audit(p, action, fmt::format("job/{}", id), "denied: own job");
      return Forbidden(
          fmt::format("{} submitted job {}: nobody decides on their own job", p.user, id));
    } else if (!MayDecideLocked(p, *j)) {
      Audit(p, action, fmt::format("job/{}", id), "denied: not an approver");
      const api::ApprovalRuleConfig* r = PendingApprovalRuleLocked(*j);
      return Forbidden(fmt::format(
          "{} may not decide on job {}; may decide: {}", p.user, id,
          r == nullptr ? std::string("admins") : ApproversText(*r, j->spec.tenant) + ", admins"));
    } else if (j->state != JobState::kAwaitingApproval) {
      return Status(StatusCode::kConflict,
                    fmt::format("job {} is {}, not awaiting approval", id, JobStateName(j->state)));
    } else {
      const std::string rule = j->approval_rule;
      std::string reason =
          fmt::format("{} by {} (rule {})", approve ? "approved" : "rejected", p.user, rule);
      if (!comment.empty()) reason += ": " + comment;
      if (!approve) j->finished_at = now_();
      RecordTransitionLocked(*j, approve ? JobState::kPending : JobState::kRejected, reason, &b);
      b.AppendAudit({0, now_(), p.user, action, fmt::format("job/{}", id), "ok",
                     json{{"rule", rule}, {"comment", comment}}.dump(), p.token_id, p.source,
                     j->spec.tenant});
      out = JobJsonLocked(*j, p);
      done = store_->WriteAsync(std::move(b));
      if (approve && wake_scheduler_) wake_scheduler_();
    }
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  if (!expired.empty()) {
    return Status(StatusCode::kConflict, fmt::format("job {} was rejected: {}", id, expired));
  }
  return out;
}

Result<json> ControlPlane::ListApprovals(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not decide approvals");
  std::shared_future<Status> done;
  json items = json::array();
  {
    std::lock_guard<std::mutex> lock(mu_);
    store::WriteBatch b;
    ExpireApprovalsLocked(&b);
    for (const auto& [id, j] : jobs_.active) {
      if (j->state != JobState::kAwaitingApproval || !MayDecideLocked(p, *j)) continue;
      const api::ApprovalRuleConfig* r = PendingApprovalRuleLocked(*j);
      json item = {{"kind", "job"},
                   {"id", std::to_string(id)},
                   {"job", id},
                   {"name", j->spec.name},
                   {"tenant", j->spec.tenant},
                   {"queue", j->spec.queue},
                   {"user", j->spec.user},
                   {"rule", j->approval_rule},
                   {"gpus", static_cast<int64_t>(j->spec.tasks) * j->spec.resources.gpus},
                   {"walltime_seconds", j->spec.walltime_seconds},
                   {"requested_at_ms", j->spec.submit_time},
                   {"reason", j->reason}};
      if (r != nullptr && r->expires_after_seconds > 0) {
        item["expires_at_ms"] = j->spec.submit_time + r->expires_after_seconds * 1000;
      } else {
        item["expires_at_ms"] = nullptr;
      }
      items.push_back(std::move(item));
    }
    const TimeMs now = now_();
    for (auto& [name, e] : services_.all) {
      const ServiceApproval& a = e.service.approval;
      if (a.state != "awaiting") continue;
      ServiceHeldLocked(e, now, &b);  // expires it when its time has passed
      if (a.state != "awaiting" || !MayDecideServiceLocked(p, e)) continue;
      const api::ApprovalRuleConfig* r = RuleNamed(config_, a.rule);
      const ServiceSpec& s = e.service.spec;
      json item = {{"kind", "service"},
                   {"id", name},
                   {"service", name},
                   {"name", name},
                   {"tenant", s.tenant},
                   {"queue", s.queue},
                   {"user", e.service.user},
                   {"rule", a.rule},
                   {"gpus", ServiceGpus(s)},
                   {"walltime_seconds", 0},
                   {"requested_at_ms", a.requested_ms},
                   {"reason", a.reason}};
      if (r != nullptr && r->expires_after_seconds > 0) {
        item["expires_at_ms"] = a.requested_ms + r->expires_after_seconds * 1000;
      } else {
        item["expires_at_ms"] = nullptr;
      }
      items.push_back(std::move(item));
    }
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return json{{"items", std::move(items)}};
}

Result<json> ControlPlane::DecideServiceApproval(const Principal& p, const std::string& name,
                                                 bool approve, const std::string& comment) {
  const std::string action = approve ? "service.approve" : "service.reject";
  const std::string target = "service/" + name;
  if (p.role == Role::kNode) return Forbidden("nodes may not decide approvals");
  if (comment.size() > kMaxCommentBytes) {
    return InvalidArgument(
        "comment", fmt::format("is {} bytes; at most {}", comment.size(), kMaxCommentBytes));
  }
  std::shared_future<Status> done;
  json out;
  std::string expired;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ServiceEntry* e = services_.Find(name);
    const bool visible =
        e != nullptr &&
        (CanReadTenantLocked(p, e->service.spec.tenant) ||
         (e->service.approval.state == "awaiting" && MayDecideServiceLocked(p, *e)));
    if (!visible) {
      if (e != nullptr) Audit(p, action, target, "denied: another tenant's service");
      return NotFoundError(fmt::format("service {} not found", name));
    }
    ServiceApproval& a = e->service.approval;
    store::WriteBatch b;
    const bool was_awaiting = a.state == "awaiting";
    ServiceHeldLocked(*e, now_(), &b);
    if (was_awaiting && a.state != "awaiting") {
      expired = a.reason;
      done = store_->WriteAsync(std::move(b));
    } else if (p.user == e->service.user) {
      Audit(p, action, target, "denied: own service");
      return Forbidden(
          fmt::format("{} created service {}: nobody decides on their own service", p.user, name));
    } else if (!MayDecideServiceLocked(p, *e)) {
      Audit(p, action, target, "denied: not an approver");
      const api::ApprovalRuleConfig* r = RuleNamed(config_, a.rule);
      return Forbidden(fmt::format("{} may not decide on service {}; may decide: {}", p.user, name,
                                   r == nullptr
                                       ? std::string("admins")
                                       : ApproversText(*r, e->service.spec.tenant) + ", admins"));
    } else if (a.state != "awaiting") {
      return Status(StatusCode::kConflict,
                    fmt::format("service {} is not awaiting approval{}", name,
                                a.state.empty() ? "" : " (it was " + a.state + ")"));
    } else {
      const TimeMs now = now_();
      a.state = approve ? "approved" : "rejected";
      a.decided_by = p.user;
      a.decided_ms = now;
      a.comment = comment;
      a.reason =
          fmt::format("{} by {} (rule {})", approve ? "approved" : "rejected", p.user, a.rule);
      if (!comment.empty()) a.reason += ": " + comment;
      e->blocked = approve ? "" : a.reason;
      ServiceEventLocked(*e, a.reason);
      b.PutService(ServiceRecordLocked(e->service));
      b.AppendAudit({0, now, p.user, action, target, "ok",
                     json{{"rule", a.rule}, {"comment", comment}}.dump(), p.token_id});
      out = ServiceJsonLocked(*e);
      done = store_->WriteAsync(std::move(b));
    }
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  if (!expired.empty()) {
    return Status(StatusCode::kConflict, fmt::format("service {} was rejected: {}", name, expired));
  }
  return out;
}

}  // namespace arbiter::server
