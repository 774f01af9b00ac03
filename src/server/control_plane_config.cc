// ControlPlane: applying a configuration (dry runs, what it would delete, pruning).
#include <fmt/format.h>

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

// At most this many changes of one configuration apply are listed in its audit record.
constexpr size_t kMaxAuditedChanges = 1000;

// --- Configuration ----------------------------------------------------------------------------

std::vector<ControlPlane::AffectedJob> ControlPlane::AffectedJobsLocked(
    const api::ClusterConfig& desired) const {
  std::set<std::string, std::less<>> tenants, queues, classes, nodes;
  for (const api::TenantConfig& t : desired.tenants) {
    tenants.insert(t.name);
    for (const QueueSpec& q : t.queues) {
      if (!q.is_tenant) queues.insert(q.name);
    }
  }
  for (const PriorityClass& pc : desired.priority_classes) classes.insert(pc.name);
  for (const Node& n : desired.nodes) nodes.insert(n.name);
  std::vector<AffectedJob> out;
  for (const auto& [id, entry] : jobs_.active) {
    const JobEntry& j = *entry;
    if (IsFinal(j.state)) continue;  // stopping ones hold on until their nodes report them gone
    std::string because;
    if (!tenants.contains(j.spec.tenant)) {
      because = fmt::format("tenant '{}' is deleted", j.spec.tenant);
    } else if (!queues.contains(j.spec.queue) && !tenants.contains(j.spec.queue)) {
      because = fmt::format("queue '{}' is deleted", j.spec.queue);
    } else if (!j.spec.priority_class.empty() && !classes.contains(j.spec.priority_class)) {
      because = fmt::format("priority class '{}' is deleted", j.spec.priority_class);
    } else {
      for (const PlacedTask& t : j.placement) {
        auto nit = nodes_.all.find(t.node);
        if (nit != nodes_.all.end() && nit->second.from_config && !nodes.contains(t.node)) {
          because = fmt::format("node '{}' is deleted", t.node);
          break;
        }
      }
    }
    if (because.empty()) continue;
    out.push_back({id, j.spec.tenant, j.spec.queue, j.spec.user, std::string(JobStateName(j.state)),
                   std::move(because)});
  }
  std::sort(out.begin(), out.end(),
            [](const AffectedJob& a, const AffectedJob& b) { return a.id < b.id; });
  return out;
}

Result<ControlPlane::ConfigApplied> ControlPlane::ApplyConfig(const Principal& p,
                                                              const api::ClusterConfig& c,
                                                              bool dry_run, bool prune,
                                                              const api::ClusterConfig* expected) {
  if (p.role != Role::kAdmin) return Forbidden("only admins may change the configuration");
  std::shared_future<Status> done;
  // Checked here, not by the parser: a data dir from before the names were reserved still loads.
  for (size_t i = 0; i < c.users.size(); ++i) {
    if (api::IsReservedUserName(c.users[i].name)) {
      return InvalidArgument(
          fmt::format("users[{}].name", i),
          fmt::format("'{}' is reserved for the server's own identities", c.users[i].name));
    }
  }
  ConfigApplied out;
  std::vector<uint64_t> stops;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (expected != nullptr && !api::DiffConfig(config_, *expected).empty()) {
      return Status(StatusCode::kConflict,
                    "the configuration changed meanwhile; nothing was changed: try again");
    }
    out.changes = api::DiffConfig(config_, c);
    std::vector<AffectedJob> affected = AffectedJobsLocked(c);
    out.affected_total = affected.size();
    // Validate by compiling the desired state before anything changes.
    api::ClusterConfig old = config_;
    auto old_nodes = nodes_;
    config_ = c;
    for (auto it = nodes_.all.begin(); it != nodes_.all.end();) {
      it = it->second.from_config ? nodes_.all.erase(it) : std::next(it);
    }
    for (const Node& n : config_.nodes) nodes_.all[n.name] = NodeEntry{n, true, 0};
    Status st = CompileLocked();
    if (st.ok() && !dry_run && !prune && !affected.empty()) {
      std::string ids;
      for (size_t i = 0; i < affected.size() && i < 5; ++i) {
        ids += fmt::format("{}{} ({})", i == 0 ? "" : ", ", affected[i].id, affected[i].because);
      }
      st = Status(
          StatusCode::kConflict,
          fmt::format("the configuration would leave {} live job{} without what {} run{} in: {}{}; "
                      "nothing was changed. Apply with prune=true (arbiter apply --prune) to "
                      "cancel them, or see them all with dry_run=true",
                      affected.size(), affected.size() == 1 ? "" : "s",
                      affected.size() == 1 ? "it" : "they", affected.size() == 1 ? "s" : "", ids,
                      affected.size() > 5 ? ", ..." : ""),
          "prune");
    }
    const size_t listed = std::min(affected.size(), ConfigApplied::kMaxAffectedListed);
    out.affected.assign(affected.begin(), affected.begin() + static_cast<ptrdiff_t>(listed));
    if (!st.ok() || dry_run) {
      config_ = old;
      nodes_ = std::move(old_nodes);
      Status back = CompileLocked();
      if (!st.ok()) return st;
      ARBITER_RETURN_IF_ERROR(back);
      return out;
    }
    store::WriteBatch b;
    ARBITER_RETURN_IF_ERROR(PersistConfigLocked(&b, &old));
    AllocateTenantUidsLocked(&b);
    for (const api::UserConfig& u : config_.users) b.PutUser({u.name, u.tenant, u.role, now_()});
    RefreshUserIndexLocked();
    // Pruned: the jobs the configuration leaves behind are cancelled, saying why.
    for (const AffectedJob& a : affected) {
      auto it = jobs_.all.find(a.id);
      if (it == jobs_.all.end()) continue;
      JobEntry& j = it->second;
      if (StopJobLocked(j, JobState::kCancelled,
                        fmt::format("cancelled by {}: {} by the configuration", p.user, a.because),
                        &b)) {
        stops.push_back(a.id);
      }
      ++out.cancelled;
    }
    // The diff, object by object: "update" details say each field's before -> after.
    json changes = json::array();
    for (const api::ConfigChange& ch : out.changes) {
      if (changes.size() == kMaxAuditedChanges) break;
      changes.push_back(
          {{"kind", ch.kind}, {"name", ch.name}, {"action", ch.action}, {"detail", ch.detail}});
    }
    json detail = {{"changes", changes}, {"cancelled", out.cancelled}};
    if (out.changes.size() > changes.size())
      detail["changes_not_listed"] = out.changes.size() - changes.size();
    b.AppendAudit(AuditRecordOf(
        p, "config.apply", "config", "", detail.dump(),
        out.cancelled > 0
            ? fmt::format("ok: {} changes, {} jobs cancelled", out.changes.size(), out.cancelled)
            : fmt::format("ok: {} changes", out.changes.size())));
    done = store_->WriteAsync(std::move(b));
    PushEventLocked("config", {{"changes", out.changes.size()}, {"cancelled", out.cancelled}});
  }
  const Status committed = done.get();
  if (!stops.empty()) PublishStops(stops);
  ARBITER_RETURN_IF_ERROR(committed);
  return out;
}

}  // namespace arbiter::server
