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

std::string ApproversText(const api::ApprovalRuleConfig& r, const std::string& tenant) {
  if (!r.approver_role.empty()) return fmt::format("the tenant admins of {}", tenant);
  return fmt::format("{}", fmt::join(r.approver_users, ", "));
}

}  // namespace

const api::ApprovalRuleConfig* ControlPlane::ApprovalRuleForLocked(const JobSpec& s) const {
  if (s.service) return nullptr;  // a service's replicas are started by the server itself
  for (const api::ApprovalRuleConfig& r : config_.approvals) {
    if (Matches(r.when, s)) return &r;
  }
  return nullptr;
}

const api::ApprovalRuleConfig* ControlPlane::PendingApprovalRuleLocked(const JobEntry& j) const {
  for (const api::ApprovalRuleConfig& r : config_.approvals) {
    if (r.name == j.approval_rule) return &r;
  }
  return nullptr;
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

bool ControlPlane::MayDecideLocked(const Principal& p, const JobEntry& j) const {
  if (p.user == j.spec.user || p.role == Role::kNode || p.role == Role::kViewer) return false;
  if (p.role == Role::kAdmin) return true;
  const api::ApprovalRuleConfig* r = PendingApprovalRuleLocked(j);
  if (r == nullptr) return false;  // the rule is gone from the configuration: admins decide
  if (!r->approver_role.empty()) {
    return p.role == Role::kTenantAdmin && p.tenant == j.spec.tenant;
  }
  return std::find(r->approver_users.begin(), r->approver_users.end(), p.user) !=
         r->approver_users.end();
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
      json item = {{"job", id},
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
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return json{{"items", std::move(items)}};
}

}  // namespace arbiter::server
