// Quota requests (docs/approvals.md, "Quota requests"; server/quota_requests.h): a temporary rise
// of a queue's guaranteed amounts, asked for by its tenant and decided by an admin. An approval
// changes the running configuration through ApplyConfig, as `arbiter apply` would (the same
// checks, the stored configuration, the diff, a config.apply audit record); at `until` the
// scheduling cycle undoes it the same way, field by field: an amount the configuration changed
// since the approval is left as it is now (noted in the request's `revert.kept`).
#include <fmt/format.h>

#include <algorithm>

#include "api/config_codec.h"
#include "server/control_plane.h"
#include "server/control_plane_helpers.h"

namespace arbiter::server {

using nlohmann::json;

namespace {

// The control plane's own identity, for the changes it makes at `until`.
const Principal kArbiter{"arbiter", "", Role::kAdmin, "", ""};

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Where queue `name` (its name, or an alias, in any case) is in `c`: (tenant, queue) indexes.
std::optional<std::pair<size_t, size_t>> FindQueue(const api::ClusterConfig& c,
                                                   const std::string& name) {
  const std::string want = Lower(name);
  std::optional<std::pair<size_t, size_t>> folded;
  for (size_t t = 0; t < c.tenants.size(); ++t) {
    for (size_t q = 0; q < c.tenants[t].queues.size(); ++q) {
      const QueueSpec& s = c.tenants[t].queues[q];
      if (s.name == name) return std::make_pair(t, q);
      bool alias = Lower(s.name) == want;
      for (const std::string& a : s.aliases) alias = alias || Lower(a) == want;
      if (alias && !folded) folded = std::make_pair(t, q);
    }
  }
  return folded;
}

// Sets (or, for nullopt, clears) the guaranteed amounts of queue (t, q).
void SetGuaranteed(api::ClusterConfig* c, std::pair<size_t, size_t> at,
                   const std::map<std::string, std::optional<int64_t>>& amounts) {
  QueueSpec& s = c->tenants[at.first].queues[at.second];
  for (const auto& [key, amount] : amounts) {
    QuotaLimits& l = s.quota[key];
    l.guaranteed = amount;
    if (l == QuotaLimits{}) s.quota.erase(key);
  }
}

std::optional<int64_t> GuaranteedOf(const api::ClusterConfig& c, std::pair<size_t, size_t> at,
                                    const std::string& key) {
  const QueueSpec& s = c.tenants[at.first].queues[at.second];
  auto it = s.quota.find(key);
  return it == s.quota.end() ? std::nullopt : it->second.guaranteed;
}

std::string AmountText(const std::string& key, std::optional<int64_t> v) {
  return v ? QuotaAmountJson(key, *v).dump() : std::string("(none)");
}

json AmountsJson(const std::map<std::string, std::optional<int64_t>>& m) {
  json out = json::object();
  for (const auto& [k, v] : m) out[k] = v ? QuotaAmountJson(k, *v) : json(nullptr);
  return out;
}

json ChangesJson(const std::vector<api::ConfigChange>& changes) {
  json out = json::array();
  for (const api::ConfigChange& c : changes) {
    out.push_back({{"kind", c.kind}, {"name", c.name}, {"action", c.action}, {"detail", c.detail}});
  }
  return out;
}

// Whether the configuration `c` passes the parser's checks (child guarantees within their
// parent's, GPU models known, ...); the error names the request's field.
Status CheckConfig(const api::ClusterConfig& c) {
  auto parsed = api::ParseConfigYaml(api::DumpConfigYaml(c));
  if (parsed.ok()) return Status::Ok();
  const Status& st = parsed.status();
  std::string field = "guaranteed";
  const size_t at = st.field().rfind(".guaranteed.");
  if (at != std::string::npos) field = st.field().substr(at + 1);
  return InvalidArgument(field,
                         fmt::format("the configuration would refuse it: {}{}",
                                     st.field().empty() ? "" : st.field() + ": ", st.message()));
}

std::string Key(uint64_t id) { return fmt::format("{}{}", kQuotaRequestKeyPrefix, id); }

}  // namespace

void ControlPlane::LoadQuotaRequestLocked(const std::string& key, const std::string& value) {
  auto r = QuotaRequestFromJson(value);
  if (!r.ok()) {
    PushEventLocked("quota_request", {{"key", key}, {"message", r.status().ToString()}});
    return;
  }
  next_quota_request_id_ = std::max(next_quota_request_id_, r->id + 1);
  quota_requests_[r->id] = std::move(r).value();
}

json ControlPlane::QuotaRequestJsonLocked(const QuotaRequest& r, const Principal& p) const {
  json out = QuotaRequestToJson(r);
  out["may_decide"] = r.state == "pending" && p.role == Role::kAdmin && p.user != r.user;
  return out;
}

Result<json> ControlPlane::CreateQuotaRequest(const Principal& p, QuotaRequestInput in) {
  if (p.role == Role::kViewer || p.role == Role::kNode) {
    return Forbidden(fmt::format("{}s may not request quota", RoleName(p.role)));
  }
  std::shared_future<Status> done;
  json out;
  {
    std::lock_guard<std::mutex> lock(mu_);
    const auto at = FindQueue(config_, in.queue);
    if (!at || (p.role != Role::kAdmin && config_.tenants[at->first].name != p.tenant)) {
      return InvalidArgument(
          "queue", fmt::format("queue {} not found{}", in.queue,
                               p.tenant.empty() ? std::string() : " in tenant " + p.tenant));
    }
    api::ClusterConfig desired = config_;
    std::map<std::string, std::optional<int64_t>> amounts(in.guaranteed.begin(),
                                                          in.guaranteed.end());
    SetGuaranteed(&desired, *at, amounts);
    ARBITER_RETURN_IF_ERROR(CheckConfig(desired));
    QuotaRequest r;
    r.id = next_quota_request_id_++;
    r.tenant = config_.tenants[at->first].name;
    r.queue = config_.tenants[at->first].queues[at->second].name;
    r.user = p.user;
    r.reason = std::move(in.reason);
    r.guaranteed = std::move(in.guaranteed);
    r.until_ms = in.until_ms;
    r.created_ms = now_();
    store::WriteBatch b;
    b.PutKv({Key(r.id), QuotaRequestToJson(r).dump()});
    json guaranteed = json::object();
    for (const auto& [k, v] : r.guaranteed) guaranteed[k] = QuotaAmountJson(k, v);
    b.AppendAudit({0, r.created_ms, p.user, "quota_request.create",
                   fmt::format("quota_request/{}", r.id), "ok",
                   json{{"queue", r.queue},
                        {"guaranteed", guaranteed},
                        {"until_ms", r.until_ms},
                        {"reason", r.reason}}
                       .dump(),
                   p.token_id});
    out = QuotaRequestJsonLocked(r, p);
    PushEventLocked("quota_request",
                    {{"id", std::to_string(r.id)}, {"state", r.state}, {"tenant", r.tenant}});
    quota_requests_[r.id] = std::move(r);
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<json> ControlPlane::ListQuotaRequests(const Principal& p) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read quota requests");
  std::lock_guard<std::mutex> lock(mu_);
  json items = json::array();
  for (auto it = quota_requests_.rbegin(); it != quota_requests_.rend(); ++it) {
    if (CanReadTenantLocked(p, it->second.tenant)) {
      items.push_back(QuotaRequestJsonLocked(it->second, p));
    }
  }
  return json{{"items", std::move(items)}};
}

Result<json> ControlPlane::GetQuotaRequest(const Principal& p, uint64_t id) {
  if (p.role == Role::kNode) return Forbidden("nodes may not read quota requests");
  std::lock_guard<std::mutex> lock(mu_);
  auto it = quota_requests_.find(id);
  if (it == quota_requests_.end() || !CanReadTenantLocked(p, it->second.tenant)) {
    return NotFoundError(fmt::format("quota request {} not found", id));
  }
  return QuotaRequestJsonLocked(it->second, p);
}

Result<json> ControlPlane::DecideQuotaRequest(const Principal& p, uint64_t id, bool approve,
                                              const std::string& comment) {
  const std::string action = approve ? "quota_request.approve" : "quota_request.reject";
  const std::string target = fmt::format("quota_request/{}", id);
  if (p.role == Role::kNode) return Forbidden("nodes may not decide quota requests");
  if (comment.size() > kMaxQuotaRequestReasonBytes) {
    return InvalidArgument("comment", fmt::format("is {} bytes; at most {}", comment.size(),
                                                  kMaxQuotaRequestReasonBytes));
  }
  std::lock_guard<std::mutex> serial(quota_mu_);  // one decision or revert at a time
  std::shared_future<Status> done;
  json out;
  api::ClusterConfig desired, expected;
  std::map<std::string, std::optional<int64_t>> before;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = quota_requests_.find(id);
    if (it == quota_requests_.end() || !CanReadTenantLocked(p, it->second.tenant)) {
      if (it != quota_requests_.end()) Audit(p, action, target, "denied: another tenant's request");
      return NotFoundError(fmt::format("quota request {} not found", id));
    }
    QuotaRequest& r = it->second;
    const TimeMs now = now_();
    if (p.user == r.user) {
      Audit(p, action, target, "denied: own request");
      return Forbidden(
          fmt::format("{} made quota request {}: nobody decides on their own request", p.user, id));
    }
    if (p.role != Role::kAdmin) {
      Audit(p, action, target, "denied: not an approver");
      return Forbidden(
          fmt::format("only admins decide quota requests; {} is a {}", p.user, RoleName(p.role)));
    }
    if (r.state != "pending") {
      return Status(StatusCode::kConflict,
                    fmt::format("quota request {} is {}, not pending", id, r.state));
    }
    if (r.until_ms <= now) {
      return Status(StatusCode::kConflict,
                    fmt::format("quota request {} ran until {} ms, which has passed; ask again", id,
                                r.until_ms));
    }
    if (!approve) {
      r.state = "rejected";
      r.decided_by = p.user;
      r.decided_ms = now;
      r.comment = comment;
      store::WriteBatch b;
      b.PutKv({Key(id), QuotaRequestToJson(r).dump()});
      b.AppendAudit({0, now, p.user, action, target, "ok",
                     json{{"queue", r.queue}, {"comment", comment}}.dump(), p.token_id});
      out = QuotaRequestJsonLocked(r, p);
      done = store_->WriteAsync(std::move(b));
    } else {
      const auto at = FindQueue(config_, r.queue);
      if (!at) {
        return Status(StatusCode::kConflict,
                      fmt::format("queue {} is no longer in the configuration", r.queue));
      }
      std::map<std::string, std::optional<int64_t>> after;
      for (const auto& [k, v] : r.guaranteed) {
        before[k] = GuaranteedOf(config_, *at, k);
        after[k] = v;
      }
      expected = config_;
      desired = config_;
      SetGuaranteed(&desired, *at, after);
    }
  }
  if (!approve) {
    ARBITER_RETURN_IF_ERROR(done.get());
    return out;
  }
  auto applied = ApplyConfig(p, desired, /*dry_run=*/false, /*prune=*/false, &expected);
  if (!applied.ok()) {
    const Status& st = applied.status();
    return Status(st.code(), fmt::format("quota request {} was not applied: {}", id, st.message()),
                  st.field());
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    QuotaRequest& r = quota_requests_.at(id);
    r.state = "approved";
    r.decided_by = p.user;
    r.decided_ms = now_();
    r.comment = comment;
    r.before = before;
    r.changes = applied->changes;
    store::WriteBatch b;
    b.PutKv({Key(id), QuotaRequestToJson(r).dump()});
    std::map<std::string, std::optional<int64_t>> after(r.guaranteed.begin(), r.guaranteed.end());
    b.AppendAudit({0, r.decided_ms, p.user, action, target, "ok",
                   json{{"queue", r.queue},
                        {"comment", comment},
                        {"until_ms", r.until_ms},
                        {"before", AmountsJson(before)},
                        {"after", AmountsJson(after)},
                        {"changes", ChangesJson(r.changes)}}
                       .dump(),
                   p.token_id});
    out = QuotaRequestJsonLocked(r, p);
    PushEventLocked("quota_request",
                    {{"id", std::to_string(id)}, {"state", r.state}, {"tenant", r.tenant}});
    done = store_->WriteAsync(std::move(b));
  }
  ARBITER_RETURN_IF_ERROR(done.get());
  return out;
}

Result<size_t> ControlPlane::ExpireQuotaRequests() {
  std::lock_guard<std::mutex> serial(quota_mu_);
  std::vector<uint64_t> due;
  size_t changed = 0;
  std::shared_future<Status> done;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!loaded_) return size_t{0};
    const TimeMs now = now_();
    store::WriteBatch b;
    for (auto& [id, r] : quota_requests_) {
      if (r.until_ms > now) continue;
      if (r.state == "approved") due.push_back(id);
      if (r.state != "pending") continue;
      r.state = "expired";
      r.decided_by = "arbiter";
      r.decided_ms = now;
      b.PutKv({Key(id), QuotaRequestToJson(r).dump()});
      b.AppendAudit(
          {0, now, "arbiter", "quota_request.expire", fmt::format("quota_request/{}", id), "ok",
           json{{"queue", r.queue}, {"reason", "nobody decided before until"}}.dump(), ""});
      ++changed;
    }
    if (!b.empty()) done = store_->WriteAsync(std::move(b));
  }
  if (done.valid()) ARBITER_RETURN_IF_ERROR(done.get());

  for (uint64_t id : due) {
    api::ClusterConfig desired, expected;
    std::map<std::string, std::optional<int64_t>> back, now_values;
    std::vector<std::string> kept;
    {
      std::lock_guard<std::mutex> lock(mu_);
      const QuotaRequest& r = quota_requests_.at(id);
      const auto at = FindQueue(config_, r.queue);
      for (const auto& [k, v] : r.guaranteed) {
        const std::optional<int64_t> current = at ? GuaranteedOf(config_, *at, k) : std::nullopt;
        if (!at) {
          kept.push_back(fmt::format("{}: queue {} is no longer configured", k, r.queue));
        } else if (current != v) {
          kept.push_back(fmt::format("{}: {} (changed since the approval; left as it is)", k,
                                     AmountText(k, current)));
        } else {
          auto b = r.before.find(k);
          back[k] = b == r.before.end() ? std::nullopt : b->second;
          now_values[k] = current;
        }
      }
      expected = config_;
      desired = config_;
      if (at && !back.empty()) SetGuaranteed(&desired, *at, back);
    }
    std::vector<api::ConfigChange> changes;
    std::string result = "ok";
    if (!back.empty()) {
      auto applied = ApplyConfig(kArbiter, desired, false, false, &expected);
      if (!applied.ok() && applied.status().code() == StatusCode::kConflict &&
          applied.status().field().empty()) {
        continue;  // the configuration changed meanwhile: the next cycle tries again
      }
      if (!applied.ok()) {
        result = "failed: " + applied.status().message();
        kept.push_back("not undone: " + applied.status().message());
      } else {
        changes = applied->changes;
      }
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      QuotaRequest& r = quota_requests_.at(id);
      r.state = "reverted";
      r.reverted_ms = now_();
      r.revert_changes = changes;
      r.kept = kept;
      store::WriteBatch b;
      b.PutKv({Key(id), QuotaRequestToJson(r).dump()});
      b.AppendAudit({0, r.reverted_ms, "arbiter", "quota_request.revert",
                     fmt::format("quota_request/{}", id), result,
                     json{{"queue", r.queue},
                          {"before", AmountsJson(now_values)},
                          {"after", AmountsJson(back)},
                          {"changes", ChangesJson(changes)},
                          {"kept", kept}}
                         .dump(),
                     ""});
      PushEventLocked("quota_request",
                      {{"id", std::to_string(id)}, {"state", r.state}, {"tenant", r.tenant}});
      done = store_->WriteAsync(std::move(b));
    }
    ++changed;
    ARBITER_RETURN_IF_ERROR(done.get());
  }
  return changed;
}

}  // namespace arbiter::server
